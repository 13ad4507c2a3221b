"""Cutting a stream of markdown into pieces that can be printed for good.

The REPL prints append-only (see :mod:`mind.shell.render`), so streamed text
is held back until it can no longer change, then handed over once:

- outside a code fence, a *block* is complete at a blank line (CommonMark
  paragraphs, lists and headings end there), and the text before a fence
  opener is complete too (a fence interrupts a paragraph);
- a fence opened at the left margin is handed over *line by line* as each
  line completes, so a long code block appears while it streams;
- a fence opened indented (typically inside a list item) is one block with
  its context, complete at its closing fence.

Every character is examined once when it arrives and once more as part of its
completed line: the work is linear in the stream, however long a paragraph or
a fence grows. :attr:`MarkdownBlocks.scanned` counts it.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple, final

_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")

PieceKind = Literal["markdown", "fence", "code", "close"]


class Piece(NamedTuple):
    """One thing ready to print.

    Attributes:
        kind: ``markdown`` (complete blocks, ``text`` is their source),
            ``fence`` (a left-margin fence opened; ``lang`` is its info
            word, ``text`` the opener line), ``code`` (complete lines of that
            open fence, each ending in ``\\n``, or at the end of a message the
            last partial line), ``close`` (the fence closed; ``text`` the
            closing line).
        text: the source text of the piece.
        lang: the open fence's language ("" when none was given).
    """

    kind: PieceKind
    text: str
    lang: str = ""


@final
class MarkdownBlocks:
    """Cuts a stream of markdown text into :class:`Piece` values.

    Feed deltas with :meth:`feed`; it returns what can no longer change, in
    order. :meth:`rest` returns and forgets what is still pending, for the end
    of a message. Adjacent ``markdown`` pieces (and adjacent ``code`` pieces)
    of one call are merged.
    """

    def __init__(self) -> None:
        self.scanned = 0
        """Characters examined so far (structural cost counter, for tests)."""
        self._reset()

    def _reset(self) -> None:
        self._partial: list[str] = []
        """Pieces of the line still missing its ``\\n``."""
        self._lines: list[str] = []
        """Complete lines of the block being collected (markdown mode)."""
        self._fence: str | None = None
        """The marker (e.g. ``````` or ``~~~~``) of the open fence, if any."""
        self._streaming = False
        """Whether the open fence is a left-margin one, handed over per line."""
        self._lang = ""

    def feed(self, delta: str) -> list[Piece]:
        """Add ``delta``; return the pieces now ready (``[]`` if none)."""
        out: list[Piece] = []
        self.scanned += len(delta)
        start = 0
        while (end := delta.find("\n", start)) != -1:
            self._partial.append(delta[start : end + 1])
            line = "".join(self._partial)
            self._partial.clear()
            self._take_line(line, out)
            start = end + 1
        if start < len(delta):
            self._partial.append(delta[start:])
        return out

    def rest(self) -> list[Piece]:
        """Return what is pending (the message ended) and start over."""
        out: list[Piece] = []
        tail = "".join(self._partial)
        if self._streaming:
            if tail:
                _add(out, Piece("code", tail, self._lang))
            _add(out, Piece("close", "", self._lang))
        else:
            text = "".join(self._lines) + tail
            if text:
                _add(out, Piece("markdown", text))
        self._reset()
        return out

    @property
    def in_fence(self) -> bool:
        """True while a left-margin fence is open (its lines arrive as ``code``)."""
        return self._streaming

    def tail(self) -> str:
        """The last non-blank line of the pending text ("" if none), for a preview.

        Costs the length of the lines looked at, not of everything pending.
        """
        partial = "".join(self._partial)
        if partial.strip():
            return partial
        for line in reversed(self._lines):
            if line.strip():
                return line
        return ""

    def _take_line(self, line: str, out: list[Piece]) -> None:
        """Classify one complete line (ending in ``\\n``) and add what it completes."""
        self.scanned += len(line)
        if self._fence is not None:
            closes = _closes_fence(line, self._fence)
            if self._streaming:
                if closes:
                    _add(out, Piece("close", line, self._lang))
                    self._fence, self._streaming = None, False
                else:
                    _add(out, Piece("code", line, self._lang))
                return
            self._lines.append(line)
            if closes:
                self._fence = None
                self._flush(out)
            return
        opener = _FENCE_RE.match(line.rstrip("\n"))
        if opener is not None and not (opener.group(2)[0] == "`" and "`" in opener.group(3)):
            self._fence = opener.group(2)
            if opener.group(1):  # indented: keep it with its context, whole
                self._lines.append(line)
                return
            self._flush(out)
            self._streaming = True
            self._lang = opener.group(3).strip().partition(" ")[0]
            _add(out, Piece("fence", line, self._lang))
            return
        self._lines.append(line)
        if not line.strip():
            self._flush(out)

    def _flush(self, out: list[Piece]) -> None:
        if self._lines:
            _add(out, Piece("markdown", "".join(self._lines)))
            self._lines.clear()


def _add(out: list[Piece], piece: Piece) -> None:
    """Append ``piece``, merged into the previous one when both are markdown or code."""
    if out and piece.kind in ("markdown", "code") and out[-1].kind == piece.kind:
        out[-1] = out[-1]._replace(text=out[-1].text + piece.text)
    else:
        out.append(piece)


def _closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes a code block opened by ``fence`` (CommonMark rule)."""
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


__all__ = ["MarkdownBlocks", "Piece", "PieceKind"]
