"""What a person sees: a pexpect child's output played into a terminal emulator.

``pexpect`` only hands over bytes; cursor movement and erasing (the REPL's
in-place redraws) only mean something once a terminal interprets them.
:class:`Screen` feeds everything the child prints into ``pyte`` (a VT100/xterm
emulator, no reflow on resize, like xterm), scrollback included::

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

    def __init__(self, rows: int, cols: int) -> None:
        self._screen = pyte.HistoryScreen(cols, rows, history=10_000)
        self._stream = pyte.Stream(self._screen)

    @classmethod
    def attach(cls, child: Any, *, rows: int, cols: int) -> Screen:
        """A screen of ``rows`` x ``cols`` receiving all of ``child``'s output from now on."""
        screen = cls(rows, cols)
        child.logfile_read = screen
        return screen

    def write(self, data: str) -> None:
        """pexpect's logfile interface: interpret ``data``."""
        self._stream.feed(data)

    def flush(self) -> None:
        """pexpect's logfile interface (nothing is buffered)."""

    def resize(self, rows: int, cols: int) -> None:
        """Resize the emulated terminal (call with the child's ``setwinsize``)."""
        self._screen.resize(rows, cols)

    def lines(self) -> list[str]:
        """Every row, scrollback first, right-trimmed."""
        cols = self._screen.columns
        top = [
            "".join(line[x].data for x in range(cols)).rstrip() for line in self._screen.history.top
        ]
        return top + [row.rstrip() for row in self._screen.display]

    def transcript(self) -> str:
        """:meth:`lines` joined with newlines."""
        return "\n".join(self.lines())
