"""What the REPL prints: streamed markdown, tool calls, approvals, turn ends.

The REPL keeps a prompt_toolkit prompt on screen while a turn runs, so all
output goes through ``patch_stdout(raw=True)`` and appears above the prompt
(DESIGN §7). That proxy only flushes whole lines and nothing printed can be
redrawn later, so rendering is append-only, with two small exceptions:

- streamed assistant text is cut into *complete markdown blocks* (a blank
  line outside a code fence, or a closing fence) and each block is rendered
  with rich as soon as it is complete; the rest waits for the next delta or
  for the end of the message;
- a tool call's ``⏺ Calling`` line is replaced in place by its ``✓ Called``
  line when nothing else was printed in between (one cursor-up + erase-line;
  the ``Calling`` line is always cut to one terminal row so this is exact).

:class:`TurnView` is a projection of one session's event stream: it can be
fed any :data:`mind.generated.events.Event` and keeps no durable state.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, ClassVar, Literal, final

from rich.console import Console, RenderableType
from rich.markdown import Heading, Markdown
from rich.table import Table
from rich.text import Text

from mind.effects.patch import parse_patch, patch_paths
from mind.effects.review import visible
from mind.errors import PatchError
from mind.generated import events as ev

_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ERASE_PREVIOUS_LINE = "\x1b[1A\x1b[2K\r"
MISSED_LINES = 200
"""Lines of a parked session's output kept to show when it is attached again."""
RESULT_PREVIEW_LINES = 2
"""How many lines of a tool's output are shown under its ``Called`` line."""
_RESULT_LINES_BY_TOOL = {"apply_patch": 9}
"""Tools whose result is a per-file summary: more of it is shown."""

_ARGUMENT_KEYS = ("command", "path", "pattern", "query", "url")
"""Argument names whose value alone says what a call does (shown instead of JSON)."""


class _LeftHeading(Heading):
    """A markdown heading aligned left (rich centres ``#`` headings)."""

    LEVEL_ALIGN: ClassVar[dict[str, Literal["left"]]] = {f"h{n}": "left" for n in range(1, 7)}  # type: ignore[assignment]


class _Markdown(Markdown):
    """Rich markdown with left-aligned headings, as terminals agents print it."""

    elements: ClassVar[dict[str, Any]] = {**Markdown.elements, "heading_open": _LeftHeading}


def render_markdown(text: str) -> RenderableType:
    """The rich renderable of one markdown block (code blocks highlighted)."""
    return _Markdown(plain(text), code_theme="ansi_dark", hyperlinks=False)


@final
class MarkdownBlocks:
    """Cuts a stream of markdown text into complete blocks.

    Feed deltas with :meth:`feed`; it returns the text of every block that
    can no longer change (everything up to the last blank line outside a code
    fence, or up to a closing fence). :meth:`rest` returns and forgets what is
    still pending, for the end of a message.
    """

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, delta: str) -> str:
        """Add ``delta``; return the complete blocks now ready ("" if none)."""
        self._pending += delta
        cut = _last_block_boundary(self._pending)
        if cut == 0:
            return ""
        ready, self._pending = self._pending[:cut], self._pending[cut:]
        return ready

    def rest(self) -> str:
        """Return the pending text and start over."""
        pending, self._pending = self._pending, ""
        return pending

    @property
    def pending(self) -> str:
        """Text received but not yet returned."""
        return self._pending


def _last_block_boundary(text: str) -> int:
    """Offset just after the last safe cut in ``text`` (0: no safe cut yet).

    A safe cut follows a blank line outside a fence, or a closing fence line.
    Only whole lines (ending in ``\\n``) are considered.
    """
    cut = 0
    fence: str | None = None
    offset = 0
    for line in text.split("\n")[:-1]:  # the last piece has no newline yet
        offset += len(line) + 1
        if fence is None:
            match = _FENCE_RE.match(line)
            if match:
                fence = match.group(1)
            elif not line.strip():
                cut = offset
        elif _closes_fence(line, fence):
            fence = None
            cut = offset
    return cut


def _closes_fence(line: str, fence: str) -> bool:
    """Whether ``line`` closes a code block opened by ``fence`` (CommonMark rule)."""
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}


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


def describe_arguments(name: str, arguments: Any, limit: int = 200) -> str:
    """A one-line human summary of a tool call's arguments.

    Args:
        name: the tool name (``apply_patch`` is summarised by the files it touches).
        arguments: the parsed JSON arguments (or the raw text if invalid).
        limit: maximum length in characters; longer text ends with ``…``.
    """
    if name == "apply_patch" and isinstance(arguments, dict):
        try:  # the files it touches say what it does; the escaped patch does not
            paths = patch_paths(parse_patch(str(arguments.get("patch", ""))))
        except PatchError:
            paths = []
        if paths:
            return shorten(plain(", ".join(paths)), limit)
    if isinstance(arguments, dict):
        for key in _ARGUMENT_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value:
                text = value
                break
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                text = " ".join(value)
                break
        else:
            text = json.dumps(arguments, ensure_ascii=False) if arguments else ""
    else:
        text = str(arguments)
    return shorten(" ".join(plain(text).split()), limit)


_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def approval_lines(text: str, text_format: str, *, continued: bool = False) -> list[Text]:
    """An approval text as indented lines: a command after ``$``, a diff with
    ``+`` green, ``-`` red and ``@@`` cyan (rich maps the colours to what the
    terminal supports), arguments as they are. Long lines wrap, never crop.
    ``continued``: ``text`` starts mid-text (the tail of a cut one)."""
    out: list[Text] = []
    for i, line in enumerate(visible(text).split("\n")):
        if text_format == "command":
            prefix = "  $ " if i == 0 and not continued else "    "
            out.append(Text(prefix, style="dim") + Text(line, style="bold"))
            continue
        style = ""
        if text_format == "diff":
            style = next((st for mark, st in _DIFF_STYLES if line.startswith(mark)), "")
        out.append(Text("  ") + Text(line, style=style))
    if len(out) > 1 and not out[-1].plain.strip():
        out.pop()  # the text's final newline
    for row in out:
        row.overflow = "fold"
    return out


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a trailing ``…`` when cut."""
    if limit <= 1:
        return text[:limit]
    return text if len(text) <= limit else text[: limit - 1] + "…"


_ANSI_RE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def plain(text: str) -> str:
    """``text`` safe to print: terminal escape sequences and control characters
    removed, tabs expanded (tool output must not drive the terminal)."""
    return _CONTROL_RE.sub("", _ANSI_RE.sub("", text.replace("\r\n", "\n"))).expandtabs(4)


def preview_lines(output: str, max_lines: int = RESULT_PREVIEW_LINES) -> tuple[list[str], int]:
    """The first non-empty lines of a tool output and how many lines were left out."""
    lines = [line.rstrip() for line in plain(output).strip("\n").splitlines()]
    lines = [line for line in lines if line.strip()]
    return lines[:max_lines], max(0, len(lines) - max_lines)


def format_tokens(usage: ev.Usage) -> str:
    """``1.2k in · 340 out`` for a usage record."""
    return f"{_compact(usage.input_tokens)} in · {_compact(usage.output_tokens)} out tokens"


def _compact(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def format_duration(seconds: float) -> str:
    """``0.4s``, ``12s``, ``3m05s``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


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
    """

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self._clock = clock
        self._text = MarkdownBlocks()
        self._reasoning = MarkdownBlocks()
        self._streamed: list[str] = []
        self._calls: dict[str, tuple[str, Any, float]] = {}
        self._last_line_call: str | None = None
        self._last_kind: str | None = None
        self._muted = False
        self._missed: deque[str] = deque(maxlen=MISSED_LINES)
        self._missed_total = 0
        self.turn_started_at: float | None = None

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
        self, *renderables: RenderableType, replace_last: bool = False, kind: str = "note"
    ) -> None:
        """Render ``renderables`` and write them in one piece.

        Args:
            renderables: what to print, each on its own line(s).
            replace_last: erase the previous terminal row first (only honoured
                on a terminal).
            kind: what is printed (``text``, ``tool``, ``note``...): a blank
                line separates output of different kinds and consecutive
                markdown blocks.
        """
        with self.console.capture() as capture:
            for item in renderables:
                self.console.print(item, crop=False, soft_wrap=False)
        data = _tidy(capture.get(), strip_blank_edges=kind == "text")
        if not data:
            return
        if self._muted:
            if (
                not replace_last
                and self._last_kind is not None
                and (kind != self._last_kind or kind == "text")
            ):
                data = "\n" + data
            lines = data.rstrip("\n").split("\n")
            if replace_last and self._missed:  # the Calling line becomes Called
                self._missed.pop()
                self._missed_total -= 1
            self._missed.extend(lines)
            self._missed_total += len(lines)
            self._last_kind = kind
            self._last_line_call = None
            return
        if (
            not replace_last
            and self._last_kind is not None
            and (kind != self._last_kind or kind == "text")
        ):
            data = "\n" + data
        if replace_last and self.console.is_terminal:
            data = _ERASE_PREVIOUS_LINE + data
        self.console.file.write(data)
        self.console.file.flush()
        self._last_line_call = None
        self._last_kind = kind

    def write_ansi(self, data: str, kind: str = "replay") -> None:
        """Write text already rendered (e.g. :meth:`take_missed`) as it is."""
        if data and not self._muted:
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

    def show(self, event: ev.Event) -> None:
        """Print what ``event`` means to the person (approvals are shown by the REPL)."""
        if isinstance(event, ev.TurnStartedEvent):
            self.turn_started_at = self._clock()
            self._streamed.clear()
            self._last_kind = "prompt"  # the prompt line was just echoed: keep a gap after it
        elif isinstance(event, ev.MessageDeltaEvent):
            self._flush_reasoning()
            self._streamed.append(event.text)
            ready = self._text.feed(event.text)
            if ready.strip():
                self.print(render_markdown(ready), kind="text")
        elif isinstance(event, ev.ReasoningDeltaEvent):
            ready = self._reasoning.feed(event.text)
            if ready.strip():
                self.print(Text(plain(ready).rstrip("\n"), style="dim italic"), kind="text")
        elif isinstance(event, ev.MessageCompletedEvent):
            self._flush_reasoning()
            if "".join(self._streamed) == event.text:
                self.flush_text()
            else:  # not streamed (or streamed differently): the completed text wins
                self._text.rest()
                if event.text.strip():
                    self.print(render_markdown(event.text), kind="text")
            self._streamed.clear()
        elif isinstance(event, ev.ToolCallEvent):
            self.flush_text()
            self._show_call(event)
        elif isinstance(event, ev.ToolResultEvent):
            self.flush_text()
            self._show_result(event)
        elif isinstance(event, ev.TurnRetryingEvent):
            self.flush_text()
            self.print(
                Text(
                    f"↻ {event.failure.message} Retrying in {format_duration(event.delay_s)} "
                    f"(attempt {event.attempt}).",
                    style="yellow",
                )
            )
        elif isinstance(event, ev.TurnCompletedEvent):
            self.flush_text()
            self._show_end(event)

    def preview(self, width: int) -> str:
        """The tail of the text still streaming (not yet a complete block), as
        one line of at most ``width`` characters ("" if none). The REPL shows
        it under the output so a long paragraph is visibly arriving."""
        pending = self._text.pending or self._reasoning.pending
        lines = [line for line in pending.split("\n") if line.strip()]
        if not lines or width < 2:
            return ""
        tail = " ".join(lines[-1].split())
        return tail if len(tail) <= width else "…" + tail[-(width - 1) :]

    def flush_text(self) -> None:
        """Print any pending streamed text (the message ended or was cut)."""
        self._flush_reasoning()
        rest = self._text.rest()
        if rest.strip():
            self.print(render_markdown(rest), kind="text")

    def _flush_reasoning(self) -> None:
        rest = self._reasoning.rest()
        if rest.strip():
            self.print(Text(plain(rest).strip("\n"), style="dim italic"), kind="text")

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
        head = f"{verb} {name}"
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
        self.print(
            self.call_line(event.name, event.arguments, verb="⏺ Calling", style="bold cyan"),
            kind="tool",
        )
        self._last_line_call = event.call_id

    def show_approval(self, event: ev.ApprovalRequestedEvent, *, viewed: bool = False) -> None:
        """Print the call waiting for a decision, why it needs one, and what it
        will do: the event's full text, or (when it is longer than a bounded
        display and was not ``viewed``) its head and tail around a line saying
        how much is hidden and that ``v`` shows it all. Control characters are
        shown escaped (:func:`mind.effects.review.visible`), never dropped."""
        self.flush_text()
        lines: list[RenderableType] = [
            Text.assemble(
                ("? ", "bold yellow"), ("Approval needed: ", "bold"), plain(event.reason)
            ),
        ]
        text, fmt = event.text, event.text_format.value
        if event.hidden_chars and not viewed:
            lines += approval_lines(text[: event.head_chars], fmt)
            lines.append(
                Text(
                    f"  … {event.hidden_chars} characters hidden ({event.hidden_lines} line "
                    "breaks) — press v to view all before approving",
                    style="bold yellow",
                )
            )
            lines += approval_lines(text[len(text) - event.tail_chars :], fmt, continued=True)
        else:
            lines += approval_lines(text, fmt)
        self.print(*lines, kind="tool")

    def show_approval_text(self, event: ev.ApprovalRequestedEvent) -> None:
        """Print the whole text of an approval (the REPL's ``v``)."""
        self.flush_text()
        self.print(
            Text(f"  the whole {event.name} call ({len(event.text)} characters):", style="bold"),
            *approval_lines(event.text, event.text_format.value),
            Text(f"  end of the {event.name} call · y approves · n refuses", style="bold"),
            kind="tool",
        )

    def show_decision(self, call_id: str, name: str, decision: str) -> None:
        """Echo the answer given to an approval prompt (the call's clock restarts)."""
        text = {
            "yes": ("  ↳ approved once", "green"),
            "always": (
                f"  ↳ approved; the same {name} call will not ask again this session",
                "green",
            ),
            "no": ("  ↳ refused", "yellow"),
        }[decision]
        if call_id in self._calls:
            call_name, arguments, _ = self._calls[call_id]
            self._calls[call_id] = (call_name, arguments, self._clock())
        self.print(Text(text[0], style=text[1]), kind="tool")

    def _show_result(self, event: ev.ToolResultEvent) -> None:
        name, arguments, started = self._calls.pop(event.call_id, ("tool", None, self._clock()))
        elapsed = self._clock() - started
        verb, style, body_style = {
            ev.ToolStatus.ok: ("✓ Called", "bold green", "dim"),
            ev.ToolStatus.error: ("✗ Failed", "bold red", "red"),
            ev.ToolStatus.denied: ("⊘ Refused", "bold yellow", "yellow"),
            ev.ToolStatus.interrupted: ("⊘ Interrupted", "bold yellow", "yellow"),
        }[event.status]
        took = f"  ({format_duration(elapsed)})" if elapsed >= 1.0 else ""
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
        self.print(line, *body, replace_last=self._last_line_call == event.call_id, kind="tool")

    def _show_end(self, event: ev.TurnCompletedEvent) -> None:
        elapsed = self._clock() - self.turn_started_at if self.turn_started_at else 0.0
        self.turn_started_at = None
        for call_id in list(self._calls):  # calls the turn closed without a result event
            status = ev.ToolStatus.interrupted
            if event.status == ev.TurnStatus.failed:
                status = ev.ToolStatus.error
            self._show_result(
                ev.ToolResultEvent(
                    turn_id=event.turn_id, call_id=call_id, status=status, output="(not completed)"
                )
            )
        parts = [event.status.value, format_duration(elapsed), format_tokens(event.usage)]
        line = Text("── " + " · ".join(parts), style=_STATUS_STYLE[event.status])
        if isinstance(event.failure, ev.Failure):
            self.print(Text(f"✗ {event.failure.message}", style="red"), line, Text(""), kind="end")
        else:
            self.print(line, Text(""), kind="end")
        self._last_kind = None


__all__ = [
    "MarkdownBlocks",
    "TurnView",
    "approval_lines",
    "describe_arguments",
    "format_duration",
    "format_tokens",
    "preview_lines",
    "render_markdown",
    "shorten",
]
