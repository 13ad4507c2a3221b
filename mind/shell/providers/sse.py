"""Incremental Server-Sent Events decoder: bytes in, events out.

A pure push parser in the style of h11: the caller feeds whatever byte chunks
the transport delivered (:meth:`SSEDecoder.feed`) and calls
:meth:`SSEDecoder.finish` at EOF. No I/O, no clocks.

Why not ``httpx-sse`` 0.4: it does not flush a pending event at EOF
(docs/design/providers.md §2; the Anthropic fixture ``stream_max_tokens_mid_tool_json``
ends without the final blank line) and it dispatches blocks that carry no
``data:`` once an ``id:`` was ever seen (docs/design/providers.md §2). Everything else it
did well is reproduced here and tested directly in ``tests/shell/test_sse.py``.

Shapes::

    SSEDecoder().feed(b"data: x\\n\\n") -> [SSEEvent(event="", data="x")]
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from mind.errors import ProviderError

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event.

    Attributes:
        event: the ``event:`` field ("" when absent, i.e. type ``message``).
        data: the ``data:`` lines joined with ``"\\n"``.
        id: the last ``id:`` field seen so far (SSE keeps it across events).
        error: a non-standard ``error:`` field (old llama.cpp,
            docs/design/providers.md §2); "" when absent.
        at_eof: True when the event was flushed at EOF without its
            terminating blank line (docs/design/providers.md §2); its data may be torn.
    """

    event: str
    data: str
    id: str = ""
    error: str = ""
    at_eof: bool = False


class SSEDecoder:
    """Incremental SSE parser (WHATWG event-stream interpretation, lenient).

    Implements docs/design/providers.md §2 (CRLF / LF / lone CR line ends, a CR/LF pair
    split across reads, incremental UTF-8 across reads), 2 (comments; no
    dispatch of a block without ``data:``), 3 (at most one optional space
    after the colon, multi-line data, flush at EOF), 5 (keep a non-standard
    ``error:`` field) and 6 (no fixed line-length cap: a partial line is kept
    as a list of pieces, so a multi-megabyte line costs linear time).

    Invalid UTF-8 is replaced with U+FFFD rather than raising.

    Args:
        max_event_chars: the most characters one event may hold while it is
            assembled (its pending line plus its ``data:`` lines); ``None``
            for no cap. Memory stays bounded however the server frames its
            bytes (docs/design/providers.md §1: one endless line must not grow without end).

    Raises:
        ProviderError: ``output_limit`` from :meth:`feed` / :meth:`finish`
            once an event being assembled exceeds ``max_event_chars``.
    """

    def __init__(self, *, max_event_chars: int | None = None) -> None:
        self._max_event_chars = max_event_chars
        self._pending_chars = 0
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial: list[str] = []
        self._skip_lf = False
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._data_chars = 0
        self._has_data = False
        self._error = ""
        self._last_id = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Decode one transport chunk.

        Args:
            chunk: raw (already content-decoded) body bytes, any length,
                split anywhere (even inside a UTF-8 sequence or a CRLF).

        Returns:
            Events completed by this chunk, in order (often empty).
        """
        return self._feed_text(self._utf8.decode(chunk, final=False))

    def finish(self) -> list[SSEEvent]:
        """Signal EOF: flush the partial line and any pending event.

        Returns:
            At most one event, marked ``at_eof=True`` when it lacked its
            blank line (docs/design/providers.md §2).
        """
        out = self._feed_text(self._utf8.decode(b"", final=True))
        if self._partial:
            line = "".join(self._partial)
            self._partial = []
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        ev = self._dispatch(at_eof=True)
        if ev is not None:
            out.append(ev)
        return out

    # ---- internals --------------------------------------------------------

    def _feed_text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._skip_lf:
            # A CR ended the previous read; a LF opening this one is its pair
            # (docs/design/providers.md §2), not an empty line.
            self._skip_lf = False
            if text.startswith("\n"):
                text = text[1:]
        out: list[SSEEvent] = []
        pos = 0
        for m in _LINE_END.finditer(text):
            piece = text[pos : m.start()]
            if self._partial:
                self._partial.append(piece)
                line = "".join(self._partial)
                self._partial = []
                self._pending_chars = self._data_chars
            else:
                line = piece
            pos = m.end()
            if m.group() == "\r" and m.end() == len(text):
                self._skip_lf = True
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        if pos < len(text):
            self._partial.append(text[pos:])
            self._pending_chars += len(text) - pos
            self._check_size()
        return out

    def _check_size(self) -> None:
        limit = self._max_event_chars
        if limit is not None and self._pending_chars > limit:
            raise ProviderError(
                "output_limit",
                detail=f"one stream event is larger than {limit} characters (max_output_mib)",
            )

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            return self._dispatch(at_eof=False)
        if line.startswith(":"):
            return None  # comment, including a lone ":" (docs/design/providers.md §2)
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]  # at most one optional space (docs/design/providers.md §2)
        if name == "data":
            self._data.append(value)
            self._has_data = True
            self._data_chars += len(value)
            self._pending_chars = self._data_chars
            self._check_size()
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "error":
            self._error = value  # non-standard llama.cpp field (docs/design/providers.md §2)
        # "retry" and unknown fields are ignored.
        return None

    def _dispatch(self, *, at_eof: bool) -> SSEEvent | None:
        has_payload = self._has_data or bool(self._error)
        ev = (
            SSEEvent(
                event=self._event,
                data="\n".join(self._data),
                id=self._last_id,
                error=self._error,
                at_eof=at_eof,
            )
            if has_payload
            else None
        )
        self._event = ""
        self._data = []
        self._data_chars = self._pending_chars = 0
        self._has_data = False
        self._error = ""
        return ev
