"""Bounded text capture: incremental UTF-8 decoding and head + tail capping."""

from __future__ import annotations

import codecs

REPLACEMENT = "\ufffd"
"""Shown for undecodable bytes and for NUL bytes (U+FFFD)."""


def omitted_note(omitted_bytes: int) -> str:
    """The line that stands for ``omitted_bytes`` cut from the middle of an output."""
    return f"[... {omitted_bytes} bytes omitted ...]"


class StreamText:
    """Decode one byte stream incrementally and keep a bounded head and tail.

    Bytes are decoded as UTF-8 with an incremental decoder, so a character
    split across two reads is never broken; invalid bytes become U+FFFD
    (``errors="replace"``) and NUL bytes become U+FFFD too (they cannot be
    carried safely to every provider). Sizes are counted in bytes of the
    decoded text encoded as UTF-8.

    Memory stays bounded: at most ``max_bytes`` of head and ``max_bytes`` of
    tail are kept, however long the stream.
    """

    def __init__(self, max_bytes: int) -> None:
        """Start an empty capture.

        Args:
            max_bytes: the most bytes of text :meth:`render` can return, > 0.
        """
        self._max_bytes = max_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0
        """All bytes seen so far, as decoded text re-encoded in UTF-8."""

    def feed(self, data: bytes) -> None:
        """Decode and keep a chunk of raw bytes from the stream."""
        self._keep(self._decoder.decode(data))

    def finish(self) -> None:
        """Flush the decoder at end of stream (a dangling partial character becomes U+FFFD)."""
        self._keep(self._decoder.decode(b"", final=True))

    def skip(self, cut_bytes: int) -> None:
        """Count ``cut_bytes`` the writer dropped between the head and tail it
        kept (the supervisor's bounded files, ``docs/design/processes.md``
        §3): they were never seen, so the decoder restarts after them."""
        self.finish()
        self._decoder.reset()
        self.total_bytes += cut_bytes

    def _keep(self, text: str) -> None:
        if not text:
            return
        data = text.replace("\x00", REPLACEMENT).encode("utf-8")
        self.total_bytes += len(data)
        room = self._max_bytes - len(self._head)
        if room > 0:
            self._head += data[:room]
        self._tail += data
        excess = len(self._tail) - self._max_bytes
        if excess > 0:
            del self._tail[:excess]

    def render(self, budget_bytes: int) -> str:
        """The text, cut to about ``budget_bytes`` keeping its beginning and end.

        Args:
            budget_bytes: the most bytes of kept text, <= ``max_bytes``; the
                note that replaces the middle is not counted.

        Returns:
            The whole text when it fits; otherwise its first and last bytes
            (half the budget each, cut on character boundaries) joined by an
            :func:`omitted_note` line.
        """
        budget_bytes = max(0, min(budget_bytes, self._max_bytes))
        if self.total_bytes <= budget_bytes:
            return self._head.decode("utf-8")
        head_n = budget_bytes // 2
        tail_n = budget_bytes - head_n
        head = self._head[:head_n].decode("utf-8", errors="ignore")
        tail = self._tail[len(self._tail) - tail_n :].decode("utf-8", errors="ignore")
        omitted = self.total_bytes - len(head.encode("utf-8")) - len(tail.encode("utf-8"))
        if head and not head.endswith("\n"):
            head += "\n"
        return f"{head}{omitted_note(omitted)}\n{tail}"


def split_budget(first_bytes: int, second_bytes: int, total_bytes: int) -> tuple[int, int]:
    """Share ``total_bytes`` between two texts: a small one keeps all it needs.

    Returns:
        ``(first_budget, second_budget)`` summing to at most ``total_bytes``;
        each is the text's own size when both fit.
    """
    if first_bytes + second_bytes <= total_bytes:
        return first_bytes, second_bytes
    half = total_bytes // 2
    if first_bytes <= half:
        return first_bytes, total_bytes - first_bytes
    if second_bytes <= half:
        return total_bytes - second_bytes, second_bytes
    return total_bytes - half, half


def cap_text(text: str, max_bytes: int) -> str:
    """Cut a whole string to ``max_bytes`` of UTF-8 keeping its beginning and end."""
    capture = StreamText(max_bytes)
    capture._keep(text)
    return capture.render(max_bytes)
