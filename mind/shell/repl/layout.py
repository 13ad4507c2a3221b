"""The prompt's layout: the input line ``› ``, the status area drawn under it, the styles.

The input line comes first; everything that changes while it is shown (the
session picker, the answer's preview, the status line, the waiting messages,
the parked sessions) is drawn under it (see :meth:`StatusArea.place` for why).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final, final

from prompt_toolkit.filters import Condition, is_done, to_filter
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.layout import (
    ConditionalContainer,
    Container,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
    walk,
)
from prompt_toolkit.styles import Style

from mind.errors import ConfigError
from mind.shell.event_text import format_context, format_duration

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

MODEL_QUIET_S: Final = 30.0
"""The status line says "waiting for the model" once it has sent nothing this long."""

_SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

STYLE: Final = Style.from_dict(
    {
        "prompt": "bold ansicyan",
        "prompt.busy": "ansigray",
        "continuation": "ansigray",
        "approval": "bold ansiyellow",
        "approval.key": "bold reverse",
        "status.dim": "ansigray",
        "preview": "italic",
        "status.busy": "ansicyan",
        "status.warn": "ansiyellow bold",
        "pending": "ansigray",
        "pending.steer": "ansicyan",
        "pending.next": "ansiyellow",
        "picker.title": "bold",
        "picker.focus": "reverse",
        "picker.attached": "ansigreen",
        "picker.parked": "ansicyan",
        "picker.occupied": "ansired",
        "picker.group": "ansigray italic",
    }
)
"""The prompt's style classes (``class:…`` in the formatted text of this package)."""


def input_column(layout: Layout) -> tuple[HSplit, Container]:
    """The column of a PromptSession's layout holding its input window, and
    the child of that column that holds it (the window or its conditional
    wrapper): the status area goes after that child.

    Raises:
        ConfigError: no column of ``layout`` holds its focused window (a
            prompt_toolkit whose prompt layout differs from 3.0's).
    """
    window = layout.current_window
    for container in walk(layout.container):
        if not isinstance(container, HSplit):
            continue
        for child in container.children:
            if child is window or (
                isinstance(child, ConditionalContainer) and child.content is window
            ):
                return container, child
    raise ConfigError(
        "the installed prompt_toolkit lays out its prompt without an input column "
        "(mind needs prompt_toolkit >=3.0.52,<3.1)"
    )


@final
class StatusArea:
    """The prompt on the input line and the lines drawn under it.

    Args:
        repl: the REPL it draws (read at each redraw, never snapshotted).
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl

    def place(self) -> None:
        """Draw :meth:`lines` right under the input window.

        Why under: prompt_toolkit erases its previous frame by moving the
        cursor up by the rows it drew *above* the cursor, then erasing down.
        A terminal that re-wraps lines on resize (VTE, iTerm2, kitty) turns a
        narrowed line above the cursor into two rows, so that erase would
        start one row too low and leave a stale row; rows under
        the cursor are cleared by the erase-down whatever the re-wrap.

        The input window stops stretching; a filler after the area takes the
        rows the renderer gives the prompt beyond its content (down to the
        screen bottom when the terminal reports the cursor position), so the
        area stays right under the input and the completion menu, which
        floats over the same column, keeps its room under the cursor.

        Raises:
            ConfigError: the installed prompt_toolkit lays out its prompt
                without the input column this extends.
        """
        layout = self._repl.prompt.layout
        input_window = layout.current_window
        column, holder = input_column(layout)
        input_window.dont_extend_height = to_filter(True)
        area = ConditionalContainer(
            Window(FormattedTextControl(self.lines), dont_extend_height=True),
            filter=Condition(lambda: bool(self.lines())) & ~is_done,
        )
        at = column.children.index(holder) + 1
        column.children[at:at] = [area, ConditionalContainer(Window(), filter=~is_done)]

    def message(self) -> StyleAndTextTuples:
        """The prompt on the input line: ``› `` (dim while a turn runs)."""
        return [("class:prompt.busy" if self._repl.busy else "class:prompt", "› ")]

    def rows(self) -> int:
        """Rows the prompt area takes below the output now (the draft, the
        status area under it), plus slack for a wrapped line: output is only
        erased in place above it."""
        area = self.lines()
        under = "".join(fragment[1] for fragment in area).count("\n") + 1 if area else 0
        return under + self._repl.prompt.default_buffer.document.line_count + 2

    def lines(self) -> StyleAndTextTuples:
        """The lines under the input: the picker, the answer's preview, the
        status line, the waiting messages, the parked sessions; ``[]`` when
        there are none (no trailing newline: the last line is the last row)."""
        repl = self._repl
        if repl.leaving:  # the last frame stays in the scrollback: keep it clean
            return []
        lines: StyleAndTextTuples = []
        if repl.picker.shown:
            lines += repl.picker.lines()
        status = self._status_line()
        if status:
            preview = repl.view.preview(repl.console.width - 3) if repl.busy else ""
            if preview and not repl.approvals.pending:
                lines += [("class:preview", preview), ("", "\n")]
            lines += [*status, ("", "\n")]
        lines += repl.waiting.lines(repl.session.waiting)
        lines += self._parked_line()
        if lines and lines[-1][1].endswith("\n"):
            style, text, *_ = lines[-1]
            lines[-1] = (style, text[:-1])
        return lines

    def _parked_line(self) -> StyleAndTextTuples:
        """``◐ 1 parked session running · /sessions`` while parked turns run."""
        repl = self._repl
        running = sum(1 for h in repl.hosting.parked() if h.session.busy)
        if not running or repl.picker.shown:
            return []
        plural = "s" if running != 1 else ""
        return [
            ("class:picker.parked", f"◐ {running} parked session{plural} running"),
            ("class:status.dim", " · /sessions to look\n"),
        ]

    def _status_line(self) -> StyleAndTextTuples:
        repl = self._repl
        session = repl.session
        if repl.exit_armed_at is not None:
            warn: StyleAndTextTuples = [("class:status.warn", "Press Ctrl+C again to exit")]
            if repl.busy:
                warn.append(("class:status.dim", " · interrupting the turn"))
            if session.waiting:
                warn.append(("class:status.dim", " · waiting messages are kept"))
            return warn
        if repl.approvals.pending:
            return repl.approvals.footer(repl.approvals.pending[0], repl.console.width - 1)
        if repl.busy:
            clock = repl.clock
            started = repl.view.turn_started_at
            elapsed = clock() - started if started is not None else 0.0
            frame = _SPINNER[int(clock() / 0.1) % len(_SPINNER)]
            esc = "Esc: interrupt + send waiting" if session.waiting else "Esc interrupts"
            working: StyleAndTextTuples = [
                ("class:status.busy", f"{frame} Working {format_duration(elapsed)}")
            ]
            if repl.view.compacting:  # its summary request runs before the round's (§5)
                working.append(("class:status.warn", " · compacting the context"))
            turn = repl.turn
            quiet_since = turn.model_quiet_since if turn is not None else None
            if quiet_since is not None and time.monotonic() - quiet_since >= MODEL_QUIET_S:
                quiet = format_duration(time.monotonic() - quiet_since)
                working.append(("class:status.warn", f" · waiting for the model {quiet}"))
            if context := format_context(session.context_usage):
                working.append(("class:status.dim", f" · {context}"))
            return [*working, ("class:status.dim", f" · {esc} · Enter steers · Tab queues")]
        if session.waiting:
            # A running /compact holds the input: Enter would send nothing sooner.
            hint = (
                " · sent when the compaction ends"
                if session.compacting
                else " · Enter sends now · or it goes first with your next message"
            )
            return [
                ("class:status.warn", f"{len(session.waiting)} waiting"),
                ("class:status.dim", hint),
            ]
        # Idle: how full the model's context is (docs/design/context.md §1).
        context = format_context(session.context_usage)
        return [("class:status.dim", context)] if context else []
