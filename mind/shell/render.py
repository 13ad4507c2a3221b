"""What the REPL prints: streamed markdown, tool calls, approvals, turn ends.

Size (over 500 lines): :class:`TurnView` is one screen state — what it
printed last, the open markdown blocks, the live ``Calling`` line, the
current model attempt's rows — that every event kind reads and writes: the
in-place edits (Calling to Called, an erased retried partial) depend on it,
so its methods stay one object. What needs no screen state lives beside it:
:mod:`mind.shell.call_summary` (a call's arguments, previews, ``shorten``),
:mod:`mind.shell.event_text` (one-line texts of events, durations, token
counts), :mod:`mind.shell.approval_card` (the card's lines) and
:mod:`mind.shell.terminal_text` (``plain``).

The REPL keeps a prompt_toolkit prompt on screen while a turn runs, so all
output goes through ``patch_stdout(raw=True)`` and appears above the prompt
(README.md). That proxy only flushes whole lines and nothing printed can be
redrawn later, so rendering is append-only, with these exceptions:

- streamed assistant text is cut into *complete markdown blocks* by
  :class:`mind.shell.stream_blocks.MarkdownBlocks` (a blank line outside a
  code fence, or a closing fence), in time linear in the stream; a code
  fence at the left margin is handed over line by line and highlighted by
  :mod:`mind.shell.code_lines` at the cost of each piece. Complete pieces
  arriving within ``coalesce_s`` are rendered together; the rest waits for
  the next delta or the end of the message;
- a tool call's ``⏺ Calling`` line is replaced in place by its ``✓ Called``
  line when nothing else was printed in between and the terminal's width
  (read from the device, whatever ``COLUMNS`` says) is the one it had when
  the line was printed (one cursor-up + erase-line: the line is one row);
  after a resize the ``Called`` line is printed below it instead;
- when a stream is cut and retried, the rows printed for the abandoned
  attempt are erased if they are provably this view's and on screen;
  otherwise the retry line says the partial answer above is discarded.

:class:`TurnView` is a projection of one session's event stream: it can be
fed any :data:`mind.generated.events.Event` and keeps no durable state.

"""

from __future__ import annotations

import math
import os
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Literal, final

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.markdown import Heading, Markdown
from rich.table import Table
from rich.text import Text

from mind.generated import events as ev
from mind.shell.approval_card import card_lines, decision_line, whole_text_lines
from mind.shell.call_summary import RESULT_PREVIEW_LINES, describe_arguments, preview_lines, shorten
from mind.shell.code_lines import CODE_THEME, CodeLines
from mind.shell.event_text import (
    describe_compaction,
    describe_compaction_failure,
    describe_resume,
    describe_waiting,
    format_duration,
    format_tokens,
)
from mind.shell.stream_blocks import MarkdownBlocks, Piece
from mind.shell.terminal_text import plain

_ERASE_PREVIOUS_LINE = "\x1b[1A\x1b[2K\r"
MISSED_LINES = 200
"""Lines of a parked session's output kept to show when it is attached again."""
_RESULT_LINES_BY_TOOL = {"apply_patch": 9}
"""Tools whose result is a per-file summary: more of it is shown."""

PROMPT_ROWS = 12
"""Rows assumed for the prompt area below the output when the REPL says nothing."""

_ANSWER_KINDS = frozenset({"text", "code"})
"""Output kinds that belong to a model attempt's answer (erased when it is retried)."""


class _LeftHeading(Heading):
    """A markdown heading aligned left (rich centres ``#`` headings)."""

    LEVEL_ALIGN: ClassVar[dict[str, Literal["left"]]] = {f"h{n}": "left" for n in range(1, 7)}  # type: ignore[assignment]


class _Markdown(Markdown):
    """Rich markdown with left-aligned headings, as terminals agents print it."""

    elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "heading_open": _LeftHeading}


def render_markdown(text: str) -> RenderableType:
    """The rich renderable of one markdown block (code blocks highlighted)."""
    return _Markdown(plain(text), code_theme=CODE_THEME, hyperlinks=False)


_SGR_TAIL_RE = re.compile(r"(?:\x1b\[[0-9;]*m| )+$")
_SGR_RE = re.compile(r"\x1b\[[0-9;]*m")


def _tidy(data: str, *, strip_blank_edges: bool) -> str:
    """Drop rich's padding: trailing spaces of each line and, for markdown,
    blank lines before and after the block (separation is added by the caller).
    """
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for line in lines:
        tail = _SGR_TAIL_RE.search(line)
        if tail is not None:
            reset = "\x1b[0m" if "\x1b[" in tail.group(0) else ""
            line = line[: tail.start()] + reset
        out.append(line)
    if strip_blank_edges:
        while out and not _SGR_RE.sub("", out[0]).strip():
            out.pop(0)
        while out and not _SGR_RE.sub("", out[-1]).strip():
            out.pop()
    return "".join(line + "\n" for line in out)


def _rows(data: str, width: int) -> int:
    """Terminal rows ``data`` (whole lines, SGR styling only) takes at ``width`` columns."""
    width = max(1, width)
    return sum(
        max(1, -(-cell_len(_SGR_RE.sub("", line)) // width)) for line in data.split("\n")[:-1]
    )


def _took(event: ev.ToolResultEvent, elapsed_s: float) -> str:
    """The duration suffix of a result line: a collected result's own run
    time from its supervisor's records (or that it ran across a restart
    when none is recorded) — the time since a resume measures nothing."""
    if event.collected is True:
        ran = event.ran_s
        if isinstance(ran, float | int):
            return f"  ({format_duration(ran)}, collected after restart)"
        return "  (ran across a restart)"
    return f"  ({format_duration(elapsed_s)})" if elapsed_s >= 1.0 else ""


_STATUS_STYLE = {
    ev.TurnStatus.completed: "dim",
    ev.TurnStatus.interrupted: "yellow",
    ev.TurnStatus.failed: "red",
    ev.TurnStatus.aborted: "red",
}


@final
class TurnView:
    """Prints one session's events above the prompt.

    Args:
        console: the rich console to print to (its file is resolved at print
            time, so under ``patch_stdout`` it writes through the proxy).
        clock: monotonic clock in seconds (injectable for tests).
        reserved_rows: terminal rows below the output that are not the
            view's (the prompt area); output is erased in place only above it.
        coalesce_s: complete markdown blocks and fence lines are held up to
            this many seconds (while deltas keep coming) and rendered
            together: the cost per render dominates a fast stream of short
            pieces. 0 renders each at once. Anything else printed first
            renders what is held.
        print_lag_s: how late, in seconds, printed lines may reach the
            screen (``patch_stdout`` bundles writes for 0.2 s) while the
            status area under the input is drawn at once: :meth:`preview`
            shows nothing this long after a print, so it never shows text
            that comes after lines not yet on screen.
    """

    def __init__(
        self,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
        reserved_rows: Callable[[], int] = lambda: PROMPT_ROWS,
        coalesce_s: float = 0.0,
        print_lag_s: float = 0.0,
    ) -> None:
        self.console = console
        self._clock = clock
        self._reserved_rows = reserved_rows
        self._coalesce_s = coalesce_s
        self._print_lag_s = print_lag_s
        self._printed_at = -math.inf
        """When answer text was last handed to the terminal (the view's clock)."""
        self._ready: list[Piece] = []
        """Complete answer pieces held so a burst is rendered in one piece."""
        self._ready_since = 0.0
        self._rendering_ready = False
        self._attempt_rows = 0
        """Terminal rows (parked: kept lines) printed for the current model attempt."""
        self._attempt_lines = 0
        self._attempt_clean = True
        """Nothing but the attempt's answer was printed since it began."""
        self._attempt_width = 0
        """The terminal width when the attempt's first row was printed."""
        self._kind_before_attempt: str | None = None
        self._call_width = 0
        """The terminal's width (from its device) when the last ``Calling`` line
        was printed; -1 when that line took more than one row."""
        self._text = MarkdownBlocks()
        self._reasoning = MarkdownBlocks()
        self._fence_opened = False
        """A code fence just opened: a blank line goes before its first line."""
        self._code: CodeLines | None = None
        """The painter of the open fence's lines."""
        self._streamed: list[str] = []
        self._calls: dict[str, tuple[str, Any, float]] = {}
        self._running_calls: set[str] = set()
        """Open calls whose command a crash left running (``already_running``)."""
        self._unknown_calls: set[str] = set()
        """The resumed turn's calls whose outcome is unknown (asked about, not run)."""
        self._last_line_call: str | None = None
        self._last_kind: str | None = None
        self._muted = False
        self._missed: deque[str] = deque(maxlen=MISSED_LINES)
        self._missed_total = 0
        self.turn_started_at: float | None = None
        self._resumed = False  # the turn began before mind stopped (turn.resumed)
        self.compacting = False
        """A compaction inside the turn is running (``context.compacting``
        until its end): the REPL's status line says so."""

    @property
    def muted(self) -> bool:
        """True while the session is parked: events still update the view's
        state (open calls, turn start time) but nothing is printed; the last
        ``MISSED_LINES`` lines are kept for :meth:`take_missed`."""
        return self._muted

    @muted.setter
    def muted(self, value: bool) -> None:
        if value and not self._muted:
            self.flush_text()  # what was complete when the session was left is shown
        self._muted = value
        # Whatever was on the last row belongs to another session now: never erase it.
        self._last_line_call = None
        self._last_kind = None
        self._start_attempt()

    def take_missed(self) -> tuple[str, int]:
        """What would have been printed while muted, and how many earlier lines
        were dropped to keep it to ``MISSED_LINES``; both are forgotten."""
        text = "".join(line + "\n" for line in self._missed)
        dropped = self._missed_total - len(self._missed)
        self._missed.clear()
        self._missed_total = 0
        return text, dropped

    # ---- low-level output ------------------------------------------------

    def print(
        self,
        *renderables: RenderableType,
        replace_last: bool = False,
        kind: str = "note",
        gap: bool | None = None,
    ) -> None:
        """Render ``renderables`` and write them in one piece.

        Args:
            renderables: what to print, each on its own line(s).
            replace_last: erase the previous terminal row first (only honoured
                on a terminal).
            kind: what is printed (``text``, ``code``, ``tool``, ``note``...):
                a blank line separates output of different kinds and
                consecutive markdown blocks (lines of one code fence follow
                each other).
            gap: force (True) or suppress (False) that blank line; None
                applies the rule above.
        """
        with self.console.capture() as capture:
            for item in renderables:
                self.console.print(item, crop=False, soft_wrap=False)
        self._emit(
            _tidy(capture.get(), strip_blank_edges=kind == "text"),
            replace_last=replace_last,
            kind=kind,
            gap=gap,
        )

    def _emit(
        self,
        data: str,
        *,
        replace_last: bool,
        kind: str,
        gap: bool | None,
        erase_rows: int = 0,
    ) -> None:
        """Write rendered ``data`` (whole lines) with the spacing rule of :meth:`print`.

        ``erase_rows`` terminal rows just above are erased first (the caller
        checked they are this view's and still on screen).
        """
        if not data:
            return
        if self._ready and not self._rendering_ready:
            self._render_ready()  # held answer blocks come before anything printed after them
        if gap is None:
            gap = (
                not replace_last
                and self._last_kind is not None
                and (kind != self._last_kind or kind == "text")
            )
        if gap:
            data = "\n" + data
        answer = kind in _ANSWER_KINDS
        if not answer and self._attempt_rows:
            self._attempt_clean = False  # something else now sits below the partial answer
        if self._muted:
            lines = data.rstrip("\n").split("\n")
            if replace_last and self._missed:  # the Calling line becomes Called
                self._missed.pop()
                self._missed_total -= 1
            self._missed.extend(lines)
            self._missed_total += len(lines)
            if answer:
                self._attempt_lines += len(lines)
                self._attempt_rows += len(lines)
            self._last_kind = kind
            self._last_line_call = None
            return
        if answer:
            self._printed_at = self._clock()
            if not self._attempt_rows:
                self._attempt_width = self.console.width
            self._attempt_rows += _rows(data, self.console.width)
        if replace_last and self.console.is_terminal:
            data = _ERASE_PREVIOUS_LINE + data
        elif erase_rows:
            data = f"\x1b[{erase_rows}A\r\x1b[J" + data
        self.console.file.write(data)
        self.console.file.flush()
        self._last_line_call = None
        self._last_kind = kind

    def _start_attempt(self) -> None:
        """What is printed from now on belongs to a new model attempt."""
        self._attempt_rows = 0
        self._attempt_lines = 0
        self._attempt_clean = True
        self._kind_before_attempt = self._last_kind

    def _discard_attempt(self, note: Text) -> None:
        """Print the retry ``note`` in place of the abandoned attempt's answer.

        The rule: the answer is on screen once. Pending text is
        dropped; what was already printed is erased when it is provably this
        view's and still on screen (a terminal, nothing else printed after it,
        the same width as when printed, fewer rows than the screen minus the
        prompt area); parked, its kept lines are dropped. Otherwise the note
        says the partial answer above is discarded.
        """
        self._text.rest()
        self._reasoning.rest()
        self._ready.clear()
        self._streamed.clear()
        self._fence_opened = False
        rows = self._attempt_rows
        if rows and self._muted:
            for _ in range(min(self._attempt_lines, len(self._missed))):
                self._missed.pop()
            self._missed_total -= self._attempt_lines
            self._last_kind = self._kind_before_attempt
            self.print(note)
        elif rows and self._can_erase(rows):
            self._last_kind = self._kind_before_attempt
            with self.console.capture() as capture:
                self.console.print(note, crop=False, soft_wrap=False)
            self._emit(
                _tidy(capture.get(), strip_blank_edges=False),
                replace_last=False,
                kind="note",
                gap=None,
                erase_rows=rows,
            )
        elif rows:
            note.append(" The partial answer above is discarded.", style="yellow")
            self.print(note)
        else:
            self.print(note)
        self._start_attempt()

    def _can_erase(self, rows: int) -> bool:
        """Whether the last ``rows`` terminal rows are this attempt's and on screen."""
        return (
            self.console.is_terminal
            and self._attempt_clean
            and self._attempt_width == self.console.width
            and rows + self._reserved_rows() < self.console.height
        )

    def write_ansi(self, data: str, kind: str = "replay") -> None:
        """Write text already rendered (e.g. :meth:`take_missed`) as it is."""
        if data and not self._muted:
            self._render_ready()
            self.console.file.write(data if data.endswith("\n") else data + "\n")
            self.console.file.flush()
            self._last_line_call = None
            self._last_kind = kind

    def reset_spacing(self) -> None:
        """Forget what was printed last (the prompt line was just echoed)."""
        self._last_kind = None

    def echo(self, text: str, suffix: str = "", *, gap_after: bool = False) -> None:
        """Print a line the person submitted, as the prompt showed it.

        Args:
            text: the submitted text (several lines are indented under ``› ``).
            suffix: dim text after it, e.g. ``(steering)``.
            gap_after: keep a blank line before whatever is printed next (a
                message delivered mid-turn); by default the next output
                follows directly (a turn start adds its own gap).
        """
        self.flush_text()
        body = Text(plain(text.rstrip("\n")))
        if suffix:
            body.append(suffix, style="dim")
        # Two columns so long and multi-line messages stay indented under "› ".
        out = Table.grid()
        out.add_column(no_wrap=True)
        out.add_column(overflow="fold")
        out.add_row(Text("› ", style="bold cyan"), body)
        self.print(out, kind="prompt")
        self._last_kind = "prompt" if gap_after else None

    def note(self, message: str, style: str = "dim") -> None:
        """Print one line of REPL information."""
        self.flush_text()
        self.print(Text(message, style=style))

    # ---- events ------------------------------------------------------------

    def show(self, event: ev.Event, *, failure_detail: str = "") -> None:
        """Print what ``event`` means to the person (approvals are shown by the REPL).

        ``failure_detail``: for a failed turn's end, the provider's own words
        (``Turn.failure_detail``, redacted where it was made), shown sanitised
        on one row under the ``✗`` line, as ``mind exec`` does on stderr."""
        if isinstance(event, ev.TurnStartedEvent | ev.TurnResumedEvent):
            self.turn_started_at = self._clock()
            self._streamed.clear()
            self._last_kind = "prompt"  # the prompt line was just echoed: keep a gap after it
            self._resumed = isinstance(event, ev.TurnResumedEvent)
            if isinstance(event, ev.TurnResumedEvent):
                unknown = event.unknown_call_ids
                self._unknown_calls = set(unknown) if isinstance(unknown, list) else set()
                self.note(f"↻ resuming the turn mind stopped in: {describe_resume(event)}")
            self._start_attempt()
        elif isinstance(event, ev.MessageDeltaEvent):
            self._flush_reasoning()
            self._streamed.append(event.text)
            self._print_text(self._text.feed(event.text))
        elif isinstance(event, ev.ReasoningDeltaEvent):
            self._print_reasoning(self._reasoning.feed(event.text))
        elif isinstance(event, ev.MessageCompletedEvent):
            self._flush_reasoning()
            if "".join(self._streamed) == event.text:
                self.flush_text()
            else:  # not streamed (or streamed differently): the completed text wins
                self._text.rest()
                if event.text.strip():
                    self.print(render_markdown(event.text), kind="text")
            self._streamed.clear()
            self._start_attempt()
        elif isinstance(event, ev.ToolCallEvent):
            self.flush_text()
            self._start_attempt()
            self._show_call(event)
        elif isinstance(event, ev.ToolResultEvent):
            self.flush_text()
            self._show_result(event)
            self._start_attempt()
        elif isinstance(event, ev.InteractionResolvedEvent):
            if event.by == ev.By.recovery and event.decision == ev.Decision.cancelled:
                # A running card's command ended on its own (nobody chose
                # kill: that answer is the person's): its card stays on
                # screen, so say it is answered and the result follows.
                self.flush_text()
                ended = Text("  ↳ it ended on its own; its result follows", "yellow")
                self.print(ended, kind="tool")
        elif isinstance(event, ev.ToolWaitingEvent):
            self.flush_text()
            self.note(f"… {describe_waiting(event, round(time.time() * 1000))}")
        elif isinstance(event, ev.TurnRetryingEvent):
            self._discard_attempt(
                Text(
                    f"↻ {event.failure.message} Retrying in {format_duration(event.delay_s)} "
                    f"(attempt {event.attempt}).",
                    style="yellow",
                )
            )
        elif isinstance(event, ev.TurnWarningEvent):
            self.flush_text()
            self.print(Text(f"⚠ {event.message}.", style="yellow"), kind="note")
        elif isinstance(event, ev.InstructionsLoadedEvent):
            # The files changed since they were last read (docs/design/context.md §4).
            # Only what was read is named as read; a skipped file is said so.
            read = [plain(s.path) for s in event.sources if not isinstance(s.skipped, str)]
            skipped = [plain(s.path) for s in event.sources if isinstance(s.skipped, str)]
            names = ", ".join(read) or "none"
            also = f"; skipped: {', '.join(skipped)}" if skipped else ""
            self.note(f"Instructions files changed; this turn reads: {names}{also} (/status).")
        elif isinstance(event, ev.ContextCompactingEvent):
            self.compacting = True
        elif isinstance(event, ev.ContextCompactedEvent):
            self.compacting = False
            self.flush_text()
            self.print(Text(f"⟳ {describe_compaction(event)}.", style="dim"), kind="note")
        elif isinstance(event, ev.ContextCompactionFailedEvent):
            self.compacting = False
            self.flush_text()
            self.print(
                Text(f"⚠ {describe_compaction_failure(event)}.", style="yellow"), kind="note"
            )
        elif isinstance(event, ev.TurnCompletedEvent):
            self.flush_text()
            self._show_end(event, failure_detail)

    def preview(self, width: int) -> str:
        """The tail of the text still streaming (not yet a complete block), as
        one line of at most ``width`` characters ("" if none). The REPL shows
        it under the output so a long paragraph is visibly arriving.

        Rule: the preview never runs ahead of the lines above it. While
        complete pieces are held (not printed yet), or for ``print_lag_s``
        after answer text was printed (it may not be on screen yet), it is
        "": the tail it would show comes after them."""
        if self._ready or self._clock() - self._printed_at < self._print_lag_s:
            return ""
        line = self._text.tail() or self._reasoning.tail()
        if not line.strip() or width < 2:
            return ""
        tail = " ".join(line.split())
        return tail if len(tail) <= width else "…" + tail[-(width - 1) :]

    def flush_text(self) -> None:
        """Print any pending streamed text (the message ended or was cut)."""
        self._flush_reasoning()
        self._print_text(self._text.rest())
        self._render_ready()

    def flush_due(self) -> None:
        """Render complete blocks held for coalescing once they waited
        ``coalesce_s`` (the REPL calls this from its redraw tick, so a stream
        that pauses still shows what is complete)."""
        if self._ready and self._clock() - self._ready_since >= self._coalesce_s:
            self._render_ready()

    def _render_ready(self) -> None:
        """Render the held pieces: each run of blocks as one markdown document,
        each run of a fence's lines as one highlighted piece."""
        if not self._ready:
            return
        held = self._ready
        self._ready = []
        self._rendering_ready = True
        try:
            run: list[str] = []
            for i, piece in enumerate(held):
                run.append(piece.text)
                if i + 1 < len(held) and held[i + 1].kind == piece.kind:
                    continue
                self._render_piece(piece._replace(text="".join(run)))
                run = []
        finally:
            self._rendering_ready = False

    def _render_piece(self, piece: Piece) -> None:
        if piece.kind == "markdown":
            self.print(render_markdown(piece.text), kind="text")
        elif piece.kind == "fence":
            self._code = CodeLines(piece.lang, self.console.color_system)
            self._fence_opened = True
        elif piece.kind == "code":
            if self._code is None or self._code.lang != piece.lang:
                self._code = CodeLines(piece.lang, self.console.color_system)
            self._emit(
                self._code.paint(plain(piece.text)),
                replace_last=False,
                kind="code",
                gap=True if self._fence_opened else None,
            )
            self._fence_opened = False

    def _flush_reasoning(self) -> None:
        self._print_reasoning(self._reasoning.rest())

    def _print_text(self, pieces: list[Piece]) -> None:
        """Hold answer pieces (blocks, a fence opening, fence lines) and render
        them once they waited ``coalesce_s``."""
        for piece in pieces:
            if piece.kind == "close" or (piece.kind == "markdown" and not piece.text.strip()):
                continue
            if not self._ready:
                self._ready_since = self._clock()
            self._ready.append(piece)
        self.flush_due()

    def _print_reasoning(self, pieces: list[Piece]) -> None:
        """Print reasoning pieces as dim plain text (code lines as they come)."""
        for piece in pieces:
            if piece.kind == "markdown" and piece.text.strip():
                self.print(Text(plain(piece.text).strip("\n"), style="dim italic"), kind="text")
            elif piece.kind == "code":
                text = Text(plain(piece.text).removesuffix("\n"), style="dim italic")
                self.print(text, kind="code")

    def call_line(
        self, name: str, arguments: Any, *, verb: str, style: str, suffix: str = ""
    ) -> Text:
        """``⏺ Calling shell  ls -la`` cut to one terminal row.

        Args:
            name: the tool name.
            arguments: its arguments (summarised by :func:`describe_arguments`).
            verb: ``⏺ Calling``, ``✓ Called``...
            style: the style of the verb and name.
            suffix: dim text kept whole at the end (e.g. the duration); the
                argument summary is cut to make room for it.
        """
        width = max(20, self.console.width - 1)
        head = f"{verb} {plain(name, keep_joiners=False)}"
        room = width - len(head) - 4 - len(suffix)
        summary = describe_arguments(name, arguments, limit=max(1, room))
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(head, style=style)
        if summary:
            line.append("  " + summary, style="default")
        line.truncate(width - len(suffix), overflow="ellipsis")
        if suffix:
            line.append(suffix, style="dim")
        return line

    def _show_call(self, event: ev.ToolCallEvent) -> None:
        self._calls[event.call_id] = (event.name, event.arguments, self._clock())
        if event.already_running is True:
            self._running_calls.add(event.call_id)
        # A command a crash left running is waited for, not called; a call
        # whose outcome is unknown is asked about first (effects.md §4).
        verb = "⏺ Calling"
        if event.already_running is True:
            verb = "⏺ Already running"
        elif event.call_id in self._unknown_calls:
            verb = "⏺ Outcome unknown"
            self._unknown_calls.discard(event.call_id)
        line = self.call_line(event.name, event.arguments, verb=verb, style="bold cyan")
        self.print(line, kind="tool")
        self._last_line_call = event.call_id
        columns = self._terminal_columns()
        # rich's width can exceed the terminal's (an exported COLUMNS): a line
        # on two rows is never replaced (-1 matches no terminal width).
        self._call_width = columns if line.cell_len < columns else -1

    def _terminal_columns(self) -> int:
        """The terminal's width in columns now, read from its device.

        rich's ``console.width`` takes an exported ``COLUMNS`` over the real
        size and keeps it through resizes, so it cannot tell whether the
        terminal re-wrapped a line. Falls back to it when the output has no
        terminal (then nothing is replaced in place anyway).
        """
        try:
            return os.get_terminal_size(self.console.file.fileno()).columns
        except (AttributeError, OSError, ValueError):
            return self.console.width

    def show_approval(self, event: ev.ApprovalRequestedEvent, *, viewed: bool = False) -> None:
        """Print the card of ``event`` (:func:`mind.shell.approval_card.card_lines`)."""
        self.flush_text()
        self.print(*card_lines(event, viewed=viewed), kind="tool")

    def show_approval_text(self, event: ev.ApprovalRequestedEvent) -> None:
        """Print the whole text of an approval (the REPL's ``v``)."""
        self.flush_text()
        self.print(*whole_text_lines(event), kind="tool")

    def show_decision(
        self,
        call_id: str,
        name: str,
        decision: str,
        *,
        grant: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Echo the answer given to an approval prompt
        (:func:`mind.shell.approval_card.decision_line`); the call's clock restarts."""
        line = decision_line(name, decision, grant=grant, reason=reason)
        if call_id in self._calls:
            call_name, arguments, _ = self._calls[call_id]
            self._calls[call_id] = (call_name, arguments, self._clock())
        self.print(line, kind="tool")

    def _show_result(self, event: ev.ToolResultEvent) -> None:
        name, arguments, started = self._calls.pop(event.call_id, ("tool", None, self._clock()))
        self._running_calls.discard(event.call_id)
        elapsed = self._clock() - started
        verb, style, body_style = {
            ev.ToolStatus.ok: ("✓ Called", "bold green", "dim"),
            ev.ToolStatus.error: ("✗ Failed", "bold red", "red"),
            ev.ToolStatus.denied: ("⊘ Refused", "bold yellow", "yellow"),
            ev.ToolStatus.interrupted: ("⊘ Interrupted", "bold yellow", "yellow"),
        }[event.status]
        if event.outcome_unknown is True:  # nothing was interrupted: the model was told
            verb, style, body_style = ("? Outcome unknown", "bold yellow", "yellow")
        took = _took(event, elapsed)
        line = self.call_line(name, arguments, verb=verb, style=style, suffix=took)
        shown, hidden = preview_lines(
            event.output, _RESULT_LINES_BY_TOOL.get(name, RESULT_PREVIEW_LINES)
        )
        width = max(20, self.console.width - 6)
        body: list[RenderableType] = []
        for i, text in enumerate(shown):
            prefix = "  ⎿ " if i == 0 else "    "
            body.append(Text(prefix + shorten(text, width), style=body_style, no_wrap=True))
        if hidden:
            body.append(Text(f"    … +{hidden} lines", style="dim", no_wrap=True))
        if not shown:
            body.append(Text("  ⎿ (no output)", style="dim"))
        # In place only at the terminal width the Calling line was printed at:
        # after a resize the terminal may have re-wrapped it, so the Called
        # line goes below.
        in_place = (
            self._last_line_call == event.call_id and self._call_width == self._terminal_columns()
        )
        self.print(line, *body, replace_last=in_place, kind="tool")

    def _show_end(self, event: ev.TurnCompletedEvent, failure_detail: str = "") -> None:
        elapsed = self._clock() - self.turn_started_at if self.turn_started_at else 0.0
        self.turn_started_at = None
        self.compacting = False
        if event.suspended is True:
            self._show_left_open(event, elapsed)
            return
        for call_id in list(self._calls):  # calls the turn closed without a result event
            status = ev.ToolStatus.interrupted
            if event.status == ev.TurnStatus.failed:
                status = ev.ToolStatus.error
            self._show_result(
                ev.ToolResultEvent(
                    turn_id=event.turn_id, call_id=call_id, status=status, output="(not completed)"
                )
            )
        # A resumed turn began before mind stopped: this process saw only its end.
        took = format_duration(elapsed) + (" since the resume" if self._resumed else "")
        self._resumed = False
        parts = [event.status.value, took, format_tokens(event.usage)]
        line = Text("── " + " · ".join(parts), style=_STATUS_STYLE[event.status])
        if isinstance(event.failure, ev.Failure):
            failed: list[RenderableType] = [Text(f"✗ {event.failure.message}", style="red")]
            detail = " ".join(plain(failure_detail, keep_joiners=False).split())
            if detail:
                width = max(20, self.console.width - 3)
                failed.append(Text("  " + shorten(detail, width), style="red", no_wrap=True))
            self.print(*failed, line, Text(""), kind="end")
        else:
            self.print(line, Text(""), kind="end")
        self._last_kind = None

    def _show_left_open(self, event: ev.TurnCompletedEvent, elapsed: float) -> None:
        """The end of a turn this process left open (``suspended``): nothing
        of it was stopped — a command a crash left running keeps running, an
        unanswered card is asked again — and the next open goes on with it."""
        for call_id in list(self._calls):
            name, arguments, _ = self._calls.pop(call_id)
            if call_id in self._running_calls:
                verb, then = "⏸ Left running", "it keeps running; resuming waits for it again"
            else:
                verb, then = "⏸ Left open", "not answered; resuming asks again"
            self._running_calls.discard(call_id)
            line = self.call_line(name, arguments, verb=verb, style="bold cyan")
            self.print(line, Text(f"  ⎿ {then}", style="dim"), kind="tool")
        took = format_duration(elapsed) + (" since the resume" if self._resumed else "")
        self._resumed = False
        parts = ["left open", took, format_tokens(event.usage)]
        self.print(Text("── " + " · ".join(parts), style="dim"), Text(""), kind="end")
        self._last_kind = None


__all__ = ["TurnView", "render_markdown"]
