"""What a person sees: a pexpect child's output played into a terminal emulator.

``pexpect`` only hands over bytes; cursor movement and erasing (the REPL's
in-place redraws) only mean something once a terminal interprets them.
:class:`Screen` feeds everything the child prints into ``pyte`` (a VT100/xterm
emulator), scrollback included. ``reflow=True`` makes a resize re-wrap
lines the way most terminals do (VTE, iTerm2, kitty, Windows Terminal): a row
filled to the last column continues on the next, and each such logical line
is wrapped again at the new width, the cursor moving with its character.
``answer=True`` answers the child's cursor position queries as a terminal
does (prompt_toolkit then gives its prompt every row down to the screen
bottom); the answers are sent while the child's output is read::

    screen = Screen.attach(child, rows=40, cols=120)
    child.expect(...)
    assert screen.transcript().count("answer") == 1
"""

from __future__ import annotations

from typing import Any

import pyte

__all__ = ["Screen"]


class Screen:
    """A ``pyte`` screen with scrollback, fed by a pexpect child's ``logfile_read``."""

    def __init__(self, rows: int, cols: int, *, reflow: bool = False) -> None:
        self._screen = pyte.HistoryScreen(cols, rows, history=10_000)
        self._stream = pyte.Stream(self._screen)
        self._reflow = reflow

    @classmethod
    def attach(
        cls, child: Any, *, rows: int, cols: int, reflow: bool = False, answer: bool = False
    ) -> Screen:
        """A screen of ``rows`` x ``cols`` receiving all of ``child``'s output from
        now on; with ``answer``, it answers the child's queries (``child.send``)."""
        screen = cls(rows, cols, reflow=reflow)
        child.logfile_read = screen
        if answer:
            screen._screen.write_process_input = child.send
        return screen

    def write(self, data: str) -> None:
        """pexpect's logfile interface: interpret ``data``."""
        self._stream.feed(data)

    def flush(self) -> None:
        """pexpect's logfile interface (nothing is buffered)."""

    def resize(self, rows: int, cols: int) -> None:
        """Resize the emulated terminal (call before the child's ``setwinsize``)."""
        if not self._reflow:
            self._screen.resize(rows, cols)
            return
        sc = self._screen
        old = self._rows()
        cursor_row = len(sc.history.top) + sc.cursor.y
        logical: list[str] = []
        cursor_at = (0, 0)  # (logical line, offset)
        for i, row in enumerate(old):
            if i and len(old[i - 1]) == sc.columns:  # filled to the edge: soft-wrapped
                base = len(logical[-1])
                logical[-1] += row
            else:
                base = 0
                logical.append(row)
            if i == cursor_row:
                cursor_at = (len(logical) - 1, base + sc.cursor.x)
        rewrapped: list[str] = []
        cursor = (0, 0)
        for n, line in enumerate(logical):
            pieces = [line[i : i + cols] for i in range(0, len(line), cols)] or [""]
            if n == cursor_at[0]:
                offset = cursor_at[1]
                cursor = (len(rewrapped) + min(offset // cols, len(pieces) - 1), offset % cols)
            rewrapped.extend(pieces)
        last = max(cursor[0], max((i for i, r in enumerate(rewrapped) if r.strip()), default=0))
        rewrapped = rewrapped[: last + 1]
        top = max(0, len(rewrapped) - rows)
        sc.lines, sc.columns = rows, cols
        sc.reset()
        for line in rewrapped[:top]:
            stored = pyte.screens.StaticDefaultDict(sc.default_char)
            for x, ch in enumerate(line):
                stored[x] = sc.default_char._replace(data=ch)
            sc.history.top.append(stored)
        for y, line in enumerate(rewrapped[top:]):
            for x, ch in enumerate(line):
                sc.buffer[y][x] = sc.default_char._replace(data=ch)
        sc.cursor.y, sc.cursor.x = cursor[0] - top, cursor[1]

    def _rows(self) -> list[str]:
        """Every row, scrollback first, untrimmed up to the last written cell."""
        sc = self._screen
        out = []
        for line in [*sc.history.top, *(sc.buffer[y] for y in range(sc.lines))]:
            text = "".join(line[x].data for x in range(sc.columns))
            out.append(text.rstrip(" "))
        return out

    def lines(self) -> list[str]:
        """Every row, scrollback first, right-trimmed."""
        cols = self._screen.columns
        top = [
            "".join(line[x].data for x in range(cols)).rstrip() for line in self._screen.history.top
        ]
        return top + [row.rstrip() for row in self._screen.display]

    def cursor_line(self) -> int:
        """The index in :meth:`lines` of the row the cursor is on."""
        return len(self._screen.history.top) + self._screen.cursor.y

    def transcript(self) -> str:
        """:meth:`lines` joined with newlines."""
        return "\n".join(self.lines())
