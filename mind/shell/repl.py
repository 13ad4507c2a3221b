"""The interactive ``mind`` REPL (DESIGN §7, issue 3 §5).

Size: too large: the session picker (``PickerRow``/``picker_rows``), the
waiting-message list, the status area layout and the key bindings are
separate jobs and should be separate modules; that split is owed (noted on
issue #7) and was not done in this change to keep the REPL stable while six
engineers edited it in parallel.

One prompt_toolkit prompt stays on screen for the whole life of the REPL;
``patch_stdout(raw=True)`` makes everything printed while it is active appear
above it, so the half-typed line survives streamed output.

Input is never the REPL's own: every line goes to the session's durable
input API (:meth:`mind.shell.runtime.Session.send`), which writes it to
``inbox.json`` before accepting it. Only then does the editor let go of the
text; a refusal (:class:`~mind.errors.InputRefused`, e.g. 20 steering
messages waiting) prints the reason and leaves the text in the editor. The
waiting messages listed under the input are read from :attr:`Session.waiting`
at each redraw, so they are exactly what the session holds.

Keys:

- Enter on an idle session sends the line as a prompt (a new turn). While a
  turn runs, Enter *steers* it (:meth:`Session.steer`): the text reaches the
  model at its next step, after the pending tool results. If the turn was
  already finishing (its mailbox sealed) the text waits for the next turn and
  the screen says so.
- Tab while a turn runs queues the line for the next turn (:meth:`Session.queue`);
  on a ``/command`` draft it completes the command name, in every state.
- Esc interrupts the running turn and sends the waiting input at once as the
  next turn (``interrupt(send_pending=True)``; the runtime starts that turn).
- Ctrl+C clears a non-empty draft; otherwise it requests an interrupt of a
  running turn (``interrupt(send_pending=False)``: waiting input stays durable
  and waits) and asks to press it again; twice within 2 s exits.
- Ctrl+D on an empty draft exits. Enter on an empty line of an idle session
  with waiting input sends that input now.
- Down on an empty draft selects a waiting message (the list under the
  input; Down / Up move, Up past the first or Esc leaves): ``e`` takes it back into
  the editor (a durable drop, its text in the draft), ``d`` or Delete drops
  it (:meth:`Session.drop`; the mailbox chart refuses one the running turn
  already took). Typing leaves the list.
- Ctrl+J (or Alt+Enter, or ``\\`` before Enter) inserts a newline in every
  state (Esc is never eager, so Alt+Enter never interrupts); a
  bracketed paste never submits.
- An approval request shows what the call will do (the command, a diff of
  each file against its current content); when part of it is hidden, ``v``
  shows it all and y / a are refused until then.
- An approval request adds a y / n / a question under the input; the draft
  stays in the editor. A y / n / a typed less than ``TYPING_GAP_S`` after
  the previous character of a draft is taken as typing, not as an answer.

Layout: the input line ``› `` comes first; everything that changes while it
is shown (the session picker, the answer's preview, the status line, the
waiting messages, the parked sessions) is drawn under it (see
:meth:`Repl._place_status_area`).

Rendering: one consumer task iterates :meth:`Session.events` while the
session is busy, so turns the runtime starts by itself (queued input, the
steering sent by Esc, recovered input) are rendered like typed ones. A turn's
inputs are echoed (``› text``) from the journal when the turn claims them: at
turn start, and for steering at the model-request boundary that delivers it.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, final

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, is_done, to_filter
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    ConditionalContainer,
    Container,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
    walk,
)
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from mind import __version__
from mind.errors import ConfigError, InputRefused, MindError, MountRefused, SessionError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.mailbox import MailboxMessage
from mind.shell import private_files
from mind.shell.config import ResolvedConfig
from mind.shell.index import format_age
from mind.shell.render import TurnView, format_duration, format_tokens, plain, shorten
from mind.shell.runtime import Decision, InputKind, InputReceipt, Runtime, Session, Turn
from mind.shell.store import INTERRUPTED, SessionSummary, mind_home, resolve_session_id

EXIT_CONFIRM_WINDOW_S: Final = 2.0
"""A second Ctrl+C within this many seconds of the first exits."""

SHUTDOWN_GRACE_S: Final = 5.0
"""How long exit waits for an interrupted turn to write its terminal record."""

TYPING_GAP_S: Final = 0.5
"""An approval key typed within this many seconds of the previous character
of a draft is taken as typing, not as an answer (guards against answering a
question that appeared mid-word)."""

ESC_WAIT_S: Final = 0.025
"""How long a lone Esc waits for a following key, in seconds, twice over:
in the terminal parser (prompt_toolkit's ``ttimeoutlen``, whose 0.5 s default
turned Esc then ``/status`` typed 0.3 s later into Alt+/ ``status``) and in
the key bindings (``timeoutlen``). Esc cannot act at once: Alt+Enter arrives as
Esc then Enter, and must insert a newline, not interrupt. A terminal sends
Alt+key as one write, so both arrive in one read; a person's next key comes
well after 2 x ESC_WAIT_S and is taken as Esc and that key."""

ANSWER_WORDS: Final[Mapping[str, Decision]] = {"yes": "yes", "no": "no", "always": "always"}
"""The answers to an approval question. The first letter answers at once; the
rest of the word (and an Enter) typed right after it belong to the answer and
are swallowed, so ``yes`` never leaves ``es`` in the draft."""

TICK_S: Final = 0.2
"""Redraw period of the status line while something is moving."""

COALESCE_S: Final = 0.05
"""Complete markdown blocks arriving within this many seconds are rendered
together (see :class:`~mind.shell.render.TurnView`); the tick shows held ones."""
PRINT_LAG_S: Final = 0.3
"""How late printed output may reach the screen, in seconds: ``patch_stdout``
waits 0.2 s after each write to bundle the next ones (the streaming preview
stays hidden this long after a print, see :class:`~mind.shell.render.TurnView`)."""
MODEL_QUIET_S: Final = 30.0
"""The status line says "waiting for the model" once it has sent nothing this long."""

PENDING_LINES: Final = 5
"""Waiting messages listed under the input; more are counted on one line."""

PICKER_REFRESH_S: Final = 2.0
"""While the session picker is shown, occupancy and the list are re-read this often
(seed 002 §3.5, §4: the screen's own tick, never a snapshot taken at render time)."""

PICKER_ROWS: Final = 12
"""Sessions shown at once in the picker; the window scrolls with the focus."""

_SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

_STYLE = Style.from_dict(
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

_AFTER_CLAIM: Final = (
    ev.TurnStartedEvent,
    ev.MessageDeltaEvent,
    ev.ReasoningDeltaEvent,
    ev.MessageCompletedEvent,
    ev.ToolCallEvent,
    ev.TurnRetryingEvent,
    ev.TurnCompletedEvent,
)
"""Events that can follow a claim of input (turn start, a model-request
boundary, the final drain): the claimed inputs are echoed before them. Tool
results and approval requests come *before* a boundary, so never trigger it."""


class _Exit(Exception):
    """Raised through ``prompt_async`` to leave the REPL (Ctrl+C twice)."""


@dataclass(frozen=True)
class Command:
    """A slash command: its handler and one line of help."""

    name: str
    help: str
    run: Callable[[str], bool]
    """Called with the rest of the line; returns False to leave the REPL."""
    while_busy: bool = True
    """Whether the command may run while a turn is running."""


def _no_usage() -> ev.Usage:
    return ev.Usage(input_tokens=0, output_tokens=0)


@dataclass(eq=False)
class _Hosted:
    """What the REPL keeps for one session this process hosts (attached or parked).

    A parked session's events are still consumed (its turn must neither stall
    nor lose events); its view is muted, so they update state without printing.
    """

    session: Session
    view: TurnView
    journal_pos: int
    """Journal records already looked at for inputs to echo."""
    approvals: deque[tuple[str, ev.ApprovalRequestedEvent]] = field(default_factory=deque)
    """Questions waiting for y / n / a: ``(turn_id, event)``, oldest first."""
    viewed: set[str] = field(default_factory=set)
    """Call ids whose whole approval text was shown (``v``): only those, and
    calls whose text was never cut, can be approved."""
    recovered: set[str] = field(default_factory=set)
    """Ids of inputs recovered when the session was opened (echoed as such)."""
    tokens: ev.Usage = field(default_factory=_no_usage)
    consuming: bool = False
    """Whether a consumer task is iterating the session's events."""


@dataclass(frozen=True)
class PickerRow:
    """One line of the session picker (``/sessions``).

    Attributes:
        session_id: the session.
        mark: ``●`` attached, ``◐`` parked, ``⊘`` occupied by another process,
            `` `` free.
        state: ``attached``, ``parked``, ``parked · running``, ``occupied by pid N``
            (the runtime's wording) or ``free``.
        age: when it was last active, for people.
        title: its first prompt ("" if none).
        cwd: its working directory.
        group: for sessions without an index entry, the cwd heading printed
            before the first row of its group; else None.
    """

    session_id: str
    mark: str
    state: str
    age: str
    title: str
    cwd: str
    group: str | None = None

    @property
    def occupied(self) -> bool:
        """True when another live process holds the session (entry is refused)."""
        return self.mark == "⊘"


def picker_rows(
    summaries: list[SessionSummary],
    hosted: Mapping[str, Session],
    attached: str,
    holders: Mapping[str, list[int]],
    now_ms: int,
) -> list[PickerRow]:
    """The picker's rows: the attached session, the parked ones, then the others.

    Args:
        summaries: :meth:`Runtime.list_sessions` (indexed most recent first,
            then the unindexed ones grouped by cwd).
        hosted: this process's sessions by id (attached and parked).
        attached: the id of the session shown.
        holders: pids of *other* live processes listing a session, by id
            (sessions this process hosts are never occupied).
        now_ms: the current time, Unix epoch milliseconds.

    Returns:
        Every hosted session and every listed one, once each. A session not
        hosted here is "occupied by pid N" (a live ledger record, else a live
        lease holder), "empty", "damaged (path:line, reason)", "free ·
        interrupted (resume to recover)" (its process died mid-turn) or "free"
        — the same words as ``mind sessions``.
    """
    by_id = {s.session_id: s for s in summaries}
    rows: list[PickerRow] = []

    def row(sid: str, mark: str, state: str, group: str | None = None) -> PickerRow:
        summary = by_id.get(sid)
        session = hosted.get(sid)
        cwd = summary.cwd if summary else str(session.cwd) if session else ""
        return PickerRow(
            session_id=sid,
            mark=mark,
            state=state,
            age=format_age(summary.updated_at_ms, now_ms) if summary else "just now",
            title=summary.title if summary else "",
            cwd=cwd,
            group=group,
        )

    order = [attached] + [sid for sid in hosted if sid != attached]
    for sid in order:
        if sid == attached:
            rows.append(row(sid, "●", "attached"))
        else:
            running = hosted[sid].busy
            rows.append(row(sid, "◐", "parked · running" if running else "parked"))
    last_group: str | None = None
    for summary in summaries:
        sid = summary.session_id
        if sid in hosted:
            continue
        pids = holders.get(sid) or ([summary.holder_pid] if summary.holder_pid else [])
        if pids:  # the ledger's live records, else the session's live lease holder
            mark, state = "⊘", "occupied by pid " + ", ".join(map(str, pids))
        elif summary.empty or summary.damage:
            mark, state = " ", summary.status
        elif summary.status == INTERRUPTED:
            mark, state = " ", f"free · {INTERRUPTED}"
        else:
            mark, state = " ", "free"
        group = None
        if not summary.indexed and summary.cwd != last_group:
            last_group = summary.cwd
            group = summary.cwd or "(unknown cwd)"
        rows.append(row(sid, mark, state, group))
    return rows


def command_word(text: str) -> tuple[str, str] | None:
    """The slash command a submitted line names, as ``(name, rest)``; None for a message.

    Rule: a line is a command when it starts with ``/`` (no leading space) and
    its first word is ``/`` + a name with no further ``/``. So
    ``/tmp/x what is this?`` is a message (a path), while ``/word`` is a
    command — known or not (an unknown one is refused, never sent). A line
    starting with ``//`` or with a space is always a message (``//`` stands for
    a leading ``/``).
    """
    if not text.startswith("/") or text.startswith("//"):
        return None
    word, *rest = text.split(maxsplit=1)
    if "/" in word[1:]:
        return None
    return word[1:], rest[0].strip() if rest else ""


@final
class _CommandCompleter(Completer):
    """Completes ``/command`` names at the start of the line."""

    def __init__(self, commands: Callable[[], Iterable[Command]]) -> None:
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text or "\n" in text:
            return
        for command in self._commands():
            if command.name.startswith(text[1:]):
                yield Completion(
                    "/" + command.name, start_position=-len(text), display_meta=command.help
                )


def history_file(env: Mapping[str, str]) -> Path:
    """``$MIND_HOME/history``, created empty with mode 0600 (dir 0700) if missing.

    Past prompts can hold secrets: the config root and the file must be
    private and owned (``docs/design/state.md``).

    Raises:
        PrivateStateError: the root or file is a symlink, FIFO, directory,
            another user's, or group/world-writable (left untouched).
        OSError: it cannot be created.
    """
    home = private_files.resolve_root(mind_home(env))
    private_files.private_dir(home)
    path = home / "history"
    os.close(private_files.open_file(path, os.O_WRONLY | os.O_APPEND, create=True))
    return path


@final
class Repl:
    """The REPL of one process: one attached session shown, others parked.

    The REPL holds no input of its own: accepted text lives in the session's
    inbox (see the module docstring). Switching sessions (``/new``,
    ``/resume``, the ``/sessions`` picker) parks the shown one: its turn keeps
    running in this process and its events keep being consumed, muted; a
    one-line notice says when a parked session's turn ends (seed 002 §2).

    Args:
        runtime: the open runtime hosting the sessions.
        session: the session attached at start.
        config: the resolved config (``/new`` reuses it).
        history_path: where input history is kept.
        console: the rich console everything is printed with.
        clock: monotonic clock in seconds.
    """

    def __init__(
        self,
        runtime: Runtime,
        session: Session,
        config: ResolvedConfig,
        history_path: Path | None,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.console = console
        self._clock = clock
        self._hosted: dict[str, _Hosted] = {}
        """This process's sessions by id, in the order they were entered."""
        self.created: set[str] = set()
        """Ids of the sessions ``/new`` created in this run (the caller adds the first)."""
        self._cur = self._host(session)
        self._exit_armed_at: float | None = None
        self._last_typed_at = -math.inf
        self._answer_rest: str | None = None
        """The rest of the approval answer just given by its first letter."""
        self._answer_at = -math.inf
        self._leaving = False
        self._greeted = False
        self._tg: anyio.abc.TaskGroup | None = None
        self._picker: list[PickerRow] | None = None
        """The rows of the session picker while it is shown, else None."""
        self._picker_focus: str | None = None
        """The focused row's session id: the one fact the focus is derived from."""
        self._picker_read_at = -math.inf
        self._selected: str | None = None
        """The waiting message selected in the list under the input (its id), else None."""
        self.commands: dict[str, Command] = {}
        for command in (
            Command("help", "show keys and commands", self._cmd_help),
            Command("new", "start a new session (the current one is parked)", self._cmd_new),
            Command(
                "sessions", "pick a session: attached, parked, free, occupied", self._cmd_sessions
            ),
            Command(
                "resume", "enter a session by id (or prefix); no id: the picker", self._cmd_resume
            ),
            Command("status", "show this session's settings and usage", self._cmd_status),
            Command("exit", "leave mind (the session can be resumed)", self._cmd_exit),
            Command("quit", "same as /exit", self._cmd_exit),
        ):
            self.commands[command.name] = command
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            multiline=True,
            prompt_continuation=lambda width, line, wrap: [("class:continuation", "  ")],
            history=FileHistory(str(history_path)) if history_path else InMemoryHistory(),
            key_bindings=self._key_bindings(),
            reserve_space_for_menu=0,
            completer=_CommandCompleter(lambda: self.commands.values()),
            complete_while_typing=True,
            style=_STYLE,
            enable_suspend=True,
        )
        self.prompt.default_buffer.on_text_insert += self._on_typed
        self.prompt.app.timeoutlen = ESC_WAIT_S
        self.prompt.app.ttimeoutlen = ESC_WAIT_S
        self._place_status_area()

    def _place_status_area(self) -> None:
        """Draw :meth:`_status_area` right under the input window.

        Why under: prompt_toolkit erases its previous frame by moving the
        cursor up by the rows it drew *above* the cursor, then erasing down.
        A terminal that re-wraps lines on resize (VTE, iTerm2, kitty) turns a
        narrowed line above the cursor into two rows, so that erase would
        start one row too low and leave a stale row (issue 7 §3); rows under
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
        input_window = self.prompt.layout.current_window
        column, holder = _input_column(self.prompt.layout)
        input_window.dont_extend_height = to_filter(True)
        area = ConditionalContainer(
            Window(FormattedTextControl(self._status_area), dont_extend_height=True),
            filter=Condition(lambda: bool(self._status_area())) & ~is_done,
        )
        at = column.children.index(holder) + 1
        column.children[at:at] = [area, ConditionalContainer(Window(), filter=~is_done)]

    def _on_typed(self, _: object) -> None:
        self._last_typed_at = self._clock()
        self._selected = None  # typing leaves the waiting list

    def _take_line(self, buffer: Buffer) -> str:
        """Take the draft out of the editor (kept in history) once it is accepted."""
        text = buffer.text
        buffer.append_to_history()
        buffer.reset()
        self._last_typed_at = -math.inf
        return text

    # ---- state ---------------------------------------------------------------

    def _host(self, session: Session) -> _Hosted:
        """Start keeping REPL state for a session the runtime now hosts."""
        hosted = self._hosted.get(session.session_id)
        if hosted is None:
            hosted = _Hosted(
                session=session,
                view=TurnView(
                    self.console,
                    self._clock,
                    reserved_rows=self._prompt_rows,
                    coalesce_s=COALESCE_S,
                    print_lag_s=PRINT_LAG_S,
                ),
                journal_pos=len(session.journal.records),
            )
            self._hosted[session.session_id] = hosted
        return hosted

    @property
    def session(self) -> Session:
        """The attached (shown) session."""
        return self._cur.session

    @property
    def view(self) -> TurnView:
        """The attached session's view (the only one that prints)."""
        return self._cur.view

    @property
    def _approvals(self) -> deque[tuple[str, ev.ApprovalRequestedEvent]]:
        return self._cur.approvals

    @property
    def hosted(self) -> list[Session]:
        """Every session this REPL hosts, attached first."""
        return [self.session] + [h.session for h in self._hosted.values() if h is not self._cur]

    @property
    def busy(self) -> bool:
        """True while a turn of the attached session is running."""
        return self.session.busy

    @property
    def turn(self) -> Turn | None:
        """The running turn of the attached session, if any."""
        return self.session.current if self.session.busy else None

    @property
    def approving(self) -> bool:
        """True while an approval question is waiting for y / n / a."""
        return bool(self._approvals)

    def _invalidate(self) -> None:
        self.prompt.app.invalidate()

    def _prompt_rows(self) -> int:
        """Rows the prompt area takes below the output now (the draft, the
        status area under it), plus slack for a wrapped line: output is only
        erased in place above it."""
        area = self._status_area()
        under = "".join(fragment[1] for fragment in area).count("\n") + 1 if area else 0
        return under + self.prompt.default_buffer.document.line_count + 2

    # ---- main loop -------------------------------------------------------------

    async def run(self) -> int:
        """Show the banner (unless :meth:`greet` did), send recovered input,
        read input until exit.

        Returns:
            The process exit code (0).
        """
        if not self._greeted:
            self.greet()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._tick)
            tg.start_soon(self._leave_on_signals)
            if self._cur.recovered:
                self.send_waiting()
            try:
                await self._read_loop()
            finally:
                self._leaving = True
                with anyio.CancelScope(shield=True):
                    await self._stop_turn()
                tg.cancel_scope.cancel()
        return 0

    async def _leave_on_signals(self) -> None:
        """SIGHUP (the terminal closed) and SIGTERM leave like /exit: running
        turns are interrupted (their tool process groups killed, the turns
        closed ``interrupted``) instead of dying mid-call with tools still
        running unobserved."""
        with anyio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM) as signals:
            async for _ in signals:
                self._leaving = True
                app = self.prompt.app
                if app.is_running:
                    app.exit(exception=_Exit())
                return

    async def _read_loop(self) -> None:
        # One prompt for the whole session: Enter hands the line over without
        # leaving it (see _enter), so typed-ahead keys never meet a cooked-mode
        # terminal between two prompts. It returns only to leave, or when a
        # default binding accepted the line (handled the same way).
        while not self._leaving:
            try:
                text = await self.prompt.prompt_async()
            except (EOFError, _Exit):
                return
            if not self._leaving and not self.handle_line(text):
                return

    def handle_line(self, text: str) -> bool:
        """Run a command or send the line (steering while a turn runs).

        A refused line is put back into the editor. Returns False to leave
        the REPL.
        """
        if not text.strip():
            return True
        named = command_word(text)
        if named is not None:
            return self._run_command(text, *named)
        if not self.send(text, "steer" if self.busy else "prompt"):
            buffer = self.prompt.default_buffer
            if not buffer.text:
                buffer.set_document(Document(text, len(text)))
        return True

    def _run_command(self, text: str, name: str, rest: str) -> bool:
        command = self.commands.get(name)
        if command is None:  # a unique prefix names its command (/he -> /help)
            matches = [c for c in self.commands.values() if name and c.name.startswith(name)]
            command = matches[0] if len(matches) == 1 else None
        if command is None:
            self.view.note(
                f"Unknown command /{name}. /help lists commands; to send text that starts "
                "with /, start it with // or a space.",
                style="yellow",
            )
            self.prompt.default_buffer.set_document(Document(text, len(text)))
            return True
        if self.busy and not command.while_busy:
            self.view.note(
                f"/{name} is not available while a turn runs (Esc interrupts it).",
                style="yellow",
            )
            return True
        return command.run(rest)

    def send(self, text: str, kind: InputKind, *, reopen: bool = True) -> bool:
        """Hand ``text`` to the session (durable before accepted) and render the result.

        Args:
            text: the line as typed; a leading ``//`` stands for ``/`` (a leading
                space is kept: it is how a message starts with `` /``).
            kind: ``prompt`` (a new turn when idle), ``steer`` (the running
                turn) or ``queue`` (the next turn).

        Returns:
            True when the session accepted the text; False when it refused it
            (the reason was printed; the caller keeps the text in the editor).
        """
        if reopen and self.session.journal.broken is not None and not self.session.busy:
            # A journal write failed earlier: once space is freed, this Enter
            # reopens the session (recovered input first) and sends; opening
            # runs as a task so the prompt never waits on it.
            self._soon(self._reopen_then_send, text, kind)
            return True
        if text.startswith("//"):
            text = text[1:]
        try:
            receipt = self.session.send(text, kind=kind)
        except InputRefused as exc:
            why = exc.message.rstrip(".")
            if exc.reason == "storage" and self.session.journal.broken is not None:
                why = (
                    f"the session's journal could not be written ({self.session.journal.broken}); "
                    f"free space, then /resume {self.session.session_id} (or press Enter again): "
                    "nothing accepted is lost"
                )
            self.view.note(f"Not sent: {why}. Your text is still in the editor.", "yellow")
            self._invalidate()
            return False
        self._accepted(receipt, kind)
        return True

    def _soon(self, fn: Callable[..., Coroutine[Any, Any, object]], *args: object) -> None:
        """Run ``fn(*args)`` as a task of the running REPL: opening a session
        (``Runtime.open_session`` / ``create_session`` are async) never
        blocks a key handler or the prompt."""
        assert self._tg is not None, "the REPL is not running"
        self._tg.start_soon(fn, *args)

    async def _reopen_then_send(self, text: str, kind: InputKind) -> None:
        """:meth:`send` after reopening a broken session; a refusal puts the
        text back into an empty editor."""
        await self._reopen(self._cur, quiet=True)
        if not self.send(text, kind, reopen=False):
            buffer = self.prompt.default_buffer
            if not buffer.text:
                buffer.set_document(Document(text, len(text)))

    def _accepted(self, receipt: InputReceipt, kind: InputKind) -> None:
        if receipt.disposition == "next_turn" and kind == "steer":
            self.view.note("The turn was already finishing: your message goes to the next turn.")
        self._ensure_consumer()
        self._invalidate()

    def send_waiting(self) -> None:
        """Start a turn with the input waiting in an idle session, if any."""
        if self.session.resume_pending() is not None:
            self._ensure_consumer()
        self._invalidate()

    def interrupt(self, *, send_pending: bool = True) -> None:
        """Interrupt the running turn, if any (it ends ``interrupted``).

        Args:
            send_pending: start the next turn at once with the waiting input
                (Esc); False leaves it waiting, durable (Ctrl+C).
        """
        turn = self.turn
        if turn is not None:
            turn.interrupt(send_pending=send_pending)
            self._invalidate()

    def greet(self) -> None:
        """Print the banner and what opening the session repaired.

        ``run_repl`` calls it before ``patch_stdout`` takes over stdout, so
        these lines are on the terminal before the prompt draws its first
        frame: written through the proxy, they raced that frame and could
        land below it, leaving a stale ``Working`` line and ``›`` above the
        banner. The recovered input is sent by :meth:`run`."""
        self._greeted = True
        self._banner()
        self._say_recovered()

    def _say_recovered(self, *, after_storage: bool = False) -> None:
        """Say what opening the attached session repaired; mark its recovered input.

        ``after_storage``: it was reopened after a failed write of its state
        (not after mind stopped), and the wording says so."""
        recovery = self.session.recovery
        if recovery is None:
            return
        if recovery.aborted_turns or recovery.synthetic_results:
            calls = recovery.synthetic_results
            why = (
                "a write of the session's state failed during a turn"
                if after_storage
                else "mind stopped during a turn last time"
            )
            self.view.note(
                f"{why}: {recovery.aborted_turns} turn(s) closed "
                f"as aborted, {calls} tool call(s) marked interrupted (not run again).",
                style="yellow",
            )
        waiting = self.session.waiting
        if recovery.replayed_inputs and waiting:
            self._cur.recovered = {m.message_id for m in waiting}
            self.view.note(
                f"{len(waiting)} message(s) accepted earlier were never answered; "
                "sending them now.",
                style="yellow",
            )

    # ---- the event consumers -----------------------------------------------------

    def _ensure_consumer(self, hosted: _Hosted | None = None) -> None:
        """Start consuming a hosted session's events (default: the attached one)
        unless already doing so. Parked sessions are consumed too, muted."""
        h = hosted or self._cur
        if h.consuming or not h.session.busy or self._tg is None:
            return
        h.consuming = True
        self._tg.start_soon(self._consume, h)

    async def _consume(self, h: _Hosted) -> None:
        """Take every event of ``h.session`` until it is idle (all of its turns)."""
        try:
            while True:
                async for event in h.session.events():
                    self._on_event(h, event)
                if not h.session.busy:  # events() ended at idle; nothing can start in between
                    return
        finally:
            h.consuming = False
            self._invalidate()

    def _on_event(self, h: _Hosted, event: ev.Event) -> None:
        shown = h is self._cur
        if isinstance(event, _AFTER_CLAIM):
            self._echo_claimed(h, at_start=isinstance(event, ev.TurnStartedEvent))
        if isinstance(event, ev.ApprovalRequestedEvent):
            h.view.show_approval(event)
            h.approvals.append((event.turn_id, event))
            if not shown:
                self.view.note(
                    f"session {_short_id(h.session.session_id)} (parked) asks to run "
                    f"{plain(event.name, keep_joiners=False)}: "
                    f"/resume {h.session.session_id} to answer",
                    style="yellow",
                )
        elif isinstance(event, ev.TurnCompletedEvent):
            turn = h.session.current
            mine = turn is not None and turn.turn_id == event.turn_id
            h.view.show(event, failure_detail=turn.failure_detail if mine and turn else "")
        elif not isinstance(event, ev.InputAcceptedEvent | ev.InputWaitingEvent):
            h.view.show(event)  # waiting input is listed under the input instead
        if isinstance(event, ev.TurnCompletedEvent):
            h.approvals = deque(a for a in h.approvals if a[0] != event.turn_id)
            h.viewed.clear()
            h.tokens = ev.Usage(
                input_tokens=h.tokens.input_tokens + event.usage.input_tokens,
                output_tokens=h.tokens.output_tokens + event.usage.output_tokens,
            )
            if not shown:
                self.view.note(
                    f"session {_short_id(h.session.session_id)} (parked) {event.status.value}",
                    style="dim" if event.status == ev.TurnStatus.completed else "yellow",
                )
        self._invalidate()

    def _echo_claimed(self, h: _Hosted, *, at_start: bool) -> None:
        """Echo the inputs journaled (claimed by a turn) since the last look.

        Args:
            h: the session whose journal is looked at (muted when parked).
            at_start: the turn is starting (its inputs are its question);
                otherwise the input is steering delivered mid-turn.
        """
        records = h.session.journal.records
        for record in records[h.journal_pos :]:
            if isinstance(record, jr.UserMessage):
                suffix = "" if at_start else "  (steering)"
                if at_start and record.kind == jr.Kind.queue:
                    suffix = "  (queued)"
                if record.message_id in h.recovered:
                    suffix = "  (recovered)"
                # Mid-turn steering is followed by model output: keep a gap.
                h.view.echo(record.text, suffix, gap_after=record.kind == jr.Kind.steer)
        h.journal_pos = len(records)

    async def _stop_turn(self) -> None:
        """On exit: interrupt every running turn, parked ones too (waiting input
        stays waiting), and wait briefly for their terminal records."""
        with anyio.move_on_after(SHUTDOWN_GRACE_S):
            for session in self.hosted:
                while session.busy and (turn := session.current) is not None:
                    turn.interrupt(send_pending=False)
                    await turn.wait()

    async def _tick(self) -> None:
        """Redraw the status line while a turn runs or an exit is armed; re-read
        the picker's rows every ``PICKER_REFRESH_S`` while it is shown. Runs in
        the REPL's task group: it never keeps the process alive."""
        while True:
            await anyio.sleep(TICK_S)
            if self._exit_armed_at is not None and (
                self._clock() - self._exit_armed_at > EXIT_CONFIRM_WINDOW_S
            ):
                self._exit_armed_at = None
                self._invalidate()
            if self._picker is not None and (
                self._clock() - self._picker_read_at >= PICKER_REFRESH_S
            ):
                self._refresh_picker()
            for hosted in self._hosted.values():
                hosted.view.flush_due()  # a stream that paused shows its complete blocks
            if self.busy or self._picker is not None:
                self._invalidate()

    # ---- approvals ------------------------------------------------------------

    def decide(self, decision: Decision) -> None:
        """Answer the oldest pending approval question.

        A yes (or always) is refused, with the reason on screen, while part
        of the call's text was hidden and not viewed with ``v``: a person
        never approves text they could not see. No is always accepted.
        """
        if not self._approvals:
            return
        turn_id, event = self._approvals[0]
        if decision != "no" and self._hidden(event):
            self.view.note(
                f"Not approved: {event.hidden_chars} characters of this "
                f"{plain(event.name, keep_joiners=False)} call are hidden. "
                "Press v to view all, then y; n refuses.",
                style="yellow",
            )
            self._invalidate()
            return
        self._approvals.popleft()
        turn = self.turn
        if turn is not None and turn.turn_id == turn_id:
            turn.decide(event.call_id, decision)
            self.view.show_decision(event.call_id, plain(event.name, keep_joiners=False), decision)
        self._invalidate()

    def _hidden(self, event: ev.ApprovalRequestedEvent) -> bool:
        """Whether part of the approval text of ``event`` was never shown."""
        return bool(event.hidden_chars) and event.call_id not in self._cur.viewed

    def view_approval_text(self) -> None:
        """Show the whole text of the oldest pending approval (``v``)."""
        if not self._approvals:
            return
        _, event = self._approvals[0]
        self.view.show_approval_text(event)
        self._cur.viewed.add(event.call_id)
        self._invalidate()

    def _on_view_key(self, event: KeyPressEvent) -> None:
        """``v`` while a question waits: show its whole text, unless it is typing."""
        self._answer_rest = None
        if self._clock() - self._last_typed_at < TYPING_GAP_S:
            event.current_buffer.insert_text(event.data)
            return
        self.view_approval_text()

    def _on_answer_key(self, event: KeyPressEvent) -> None:
        """A y / n / a while a question waits: the answer, unless it is typing."""
        if self._swallow(event.data):
            return
        if self._clock() - self._last_typed_at < TYPING_GAP_S:
            # The person was typing a draft when the question appeared: this
            # key belongs to the draft, not to the question.
            event.current_buffer.insert_text(event.data)
            return
        word = next(w for w in ANSWER_WORDS if w[0] == event.data.lower())
        self.decide(ANSWER_WORDS[word])
        self._answer_rest = word[1:]
        self._answer_at = self._clock()

    def _swallowing(self) -> bool:
        """True while keys may still be the rest of the word just answered."""
        return self._answer_rest is not None and self._clock() - self._answer_at < TYPING_GAP_S

    def _swallow(self, key: str) -> bool:
        """Whether ``key`` continues the answer just given (``es`` of ``yes``,
        then Enter): it is dropped. Any other key ends the answer."""
        if not self._swallowing() or self._answer_rest is None:
            self._answer_rest = None
            return False
        if key == "\r" or (self._answer_rest and key.lower() == self._answer_rest[0]):
            self._answer_rest = None if key == "\r" else self._answer_rest[1:]
            self._answer_at = self._clock()
            return True
        self._answer_rest = None
        return False

    # ---- the waiting list -----------------------------------------------------

    def _selectable(self) -> list[MailboxMessage]:
        """The waiting messages shown under the input (the ones a key can pick)."""
        return self.session.waiting[:PENDING_LINES]

    @property
    def selected(self) -> MailboxMessage | None:
        """The selected waiting message, if it still waits (a turn may have taken it)."""
        for msg in self._selectable():
            if msg.message_id == self._selected:
                return msg
        return None

    def move_selection(self, step: int) -> None:
        """Down (``+1``) / Up (``-1``) in the waiting list, which is shown under
        the input: Down from the draft enters it at the oldest message, Up past
        the oldest leaves it (back to the draft)."""
        shown = [m.message_id for m in self._selectable()]
        current = self.selected
        if current is None:
            self._selected = shown[0] if shown and step > 0 else None
        else:
            i = shown.index(current.message_id) + step
            self._selected = shown[min(i, len(shown) - 1)] if i >= 0 else None
        self._invalidate()

    def drop_selected(self, *, edit: bool) -> None:
        """Drop the selected message for good; with ``edit`` put its text in the editor.

        A refusal (the running turn took it meanwhile) is printed and nothing changes.
        """
        msg = self.selected
        if msg is None:
            self._selected = None
            return
        shown = [m.message_id for m in self._selectable()]
        index = shown.index(msg.message_id)
        try:
            dropped = self.session.drop(msg.message_id)
        except MindError as exc:
            self._selected = None
            self.view.note(f"Not dropped: {exc}", style="yellow")
            self._invalidate()
            return
        if edit:
            self._selected = None
            buffer = self.prompt.default_buffer
            buffer.set_document(Document(dropped.text, len(dropped.text)))
        else:
            rest = [m.message_id for m in self._selectable()]
            self._selected = rest[min(index, len(rest) - 1)] if rest else None
            self.view.note(f"Dropped: {shorten(' '.join(dropped.text.split()), 60)}", "dim")
        self._invalidate()

    # ---- prompt pieces --------------------------------------------------------

    def _message(self) -> StyleAndTextTuples:
        """The prompt on the input line: ``› `` (dim while a turn runs)."""
        return [("class:prompt.busy" if self.busy else "class:prompt", "› ")]

    def _status_area(self) -> StyleAndTextTuples:
        """The lines under the input: the picker, the answer's preview, the
        status line, the waiting messages, the parked sessions; ``[]`` when
        there are none (no trailing newline: the last line is the last row)."""
        if self._leaving:  # the last frame stays in the scrollback: keep it clean
            return []
        lines: StyleAndTextTuples = []
        if self._picker is not None:
            lines += self._picker_lines(self._picker)
        status = self._status_line()
        if status:
            preview = self.view.preview(self.console.width - 3) if self.busy else ""
            if preview and not self._approvals:
                lines += [("class:preview", preview), ("", "\n")]
            lines += [*status, ("", "\n")]
        lines += self._pending_lines(self.session.waiting)
        lines += self._parked_line()
        if lines and lines[-1][1].endswith("\n"):
            style, text, *_ = lines[-1]
            lines[-1] = (style, text[:-1])
        return lines

    def _parked_line(self) -> StyleAndTextTuples:
        """``◐ 1 parked session running · /sessions`` while parked turns run."""
        running = sum(1 for h in self._hosted.values() if h is not self._cur and h.session.busy)
        if not running or self._picker is not None:
            return []
        plural = "s" if running != 1 else ""
        return [
            ("class:picker.parked", f"◐ {running} parked session{plural} running"),
            ("class:status.dim", " · /sessions to look\n"),
        ]

    def _picker_lines(self, rows: list[PickerRow]) -> StyleAndTextTuples:
        """The session picker: a title, a window of rows around the focus, the keys."""
        out: StyleAndTextTuples = [("class:picker.title", "Sessions"), ("", "\n")]
        if not rows:
            out += [("class:status.dim", "  no sessions yet\n")]
        focus = self._focus_index(rows)
        first = min(max(0, focus - PICKER_ROWS // 2), max(0, len(rows) - PICKER_ROWS))
        if first:
            out += [("class:status.dim", f"  ↑ {first} more\n")]
        width = max(40, self.console.width)
        state_width = max([22, *(len(row.state) + 2 for row in rows)])
        here = str(self.session.cwd)
        for i, row in enumerate(rows[first : first + PICKER_ROWS], start=first):
            if row.group is not None:
                out += [("class:picker.group", f"  not in the index · {row.group}\n")]
            style = {
                "●": "class:picker.attached",
                "◐": "class:picker.parked",
                "⊘": "class:picker.occupied",
            }.get(row.mark, "")
            state_style = style or "class:status.dim"
            head = f"{'›' if i == focus else ' '} {row.mark} {row.session_id}  "
            state = row.state.ljust(state_width)
            age = f"{row.age:<13}"
            room = width - len(head) - len(state) - len(age) - 2
            tail = " ".join((row.title or "(no prompt yet)").split())
            if row.cwd and row.cwd != here:
                tail += f" · {row.cwd}"
            tail = shorten(tail, max(10, room))
            focus_style = " class:picker.focus" if i == focus else ""
            out += [
                (style + focus_style, head),
                (state_style + focus_style, state),
                ("class:status.dim" + focus_style, age),
                (focus_style.strip(), tail),
                ("", "\n"),
            ]
        rest = len(rows) - first - PICKER_ROWS
        if rest > 0:
            out += [("class:status.dim", f"  ↓ {rest} more\n")]
        out += [
            (
                "class:status.dim",
                "  ↑↓ move · Enter enters · Esc closes · Ctrl+L re-lists"
                " · ● attached ◐ parked ⊘ occupied\n",
            )
        ]
        return out

    def _pending_lines(self, waiting: list[MailboxMessage]) -> StyleAndTextTuples:
        """One line per waiting message: where it goes, then its text; the
        selected one marked ``›``; then the keys of the list."""
        out: StyleAndTextTuples = []
        width = max(20, self.console.width - 16)
        hinted = False
        selected = self.selected
        for msg in waiting[:PENDING_LINES]:
            hint = ""
            if msg.state == "queued":
                label, style = "steer    ", "class:pending.steer"
                if not hinted:  # said once: every steering line means the same
                    hint, hinted = "  reaches the model next", True
            elif self.busy:
                label, style = "next turn", "class:pending.next"
            else:
                label, style = "waiting  ", "class:pending.next"
            text = shorten(" ".join(msg.text.split()), max(10, width - len(hint)))
            mark = "  ↳ "
            if selected is not None and msg.message_id == selected.message_id:
                mark, style = "  › ", "class:picker.focus"
            out += [
                ("class:pending", mark),
                (style, label + " "),
                ("class:picker.focus" if mark == "  › " else "", text),
                ("class:status.dim", hint),
                ("", "\n"),
            ]
        if len(waiting) > PENDING_LINES:
            out += [("class:pending", f"  … {len(waiting) - PENDING_LINES} more waiting\n")]
        if waiting and selected is not None:
            keys = "  ↑↓ choose · e edit (back into the editor) · d drop · Esc back\n"
            out += [("class:status.dim", keys)]
        elif waiting and not self.prompt.default_buffer.text:
            out += [("class:status.dim", "  ↓ to edit or drop a waiting message\n")]
        return out

    def _status_line(self) -> StyleAndTextTuples:
        if self._exit_armed_at is not None:
            warn: StyleAndTextTuples = [("class:status.warn", "Press Ctrl+C again to exit")]
            if self.busy:
                warn.append(("class:status.dim", " · interrupting the turn"))
            if self.session.waiting:
                warn.append(("class:status.dim", " · waiting messages are kept"))
            return warn
        if self._approvals:
            return self._approval_footer(self._approvals[0][1], self.console.width - 1)
        if self.busy:
            started = self.view.turn_started_at
            elapsed = self._clock() - started if started is not None else 0.0
            frame = _SPINNER[int(self._clock() / 0.1) % len(_SPINNER)]
            esc = "Esc: interrupt + send waiting" if self.session.waiting else "Esc interrupts"
            working: StyleAndTextTuples = [
                ("class:status.busy", f"{frame} Working {format_duration(elapsed)}")
            ]
            turn = self.turn
            quiet_since = turn.model_quiet_since if turn is not None else None
            if quiet_since is not None and time.monotonic() - quiet_since >= MODEL_QUIET_S:
                quiet = format_duration(time.monotonic() - quiet_since)
                working.append(("class:status.warn", f" · waiting for the model {quiet}"))
            return [*working, ("class:status.dim", f" · {esc} · Enter steers · Tab queues")]
        if self.session.waiting:
            return [
                ("class:status.warn", f"{len(self.session.waiting)} waiting"),
                (
                    "class:status.dim",
                    " · Enter sends now · or it goes first with your next message",
                ),
            ]
        return []

    def _approval_footer(self, event: ev.ApprovalRequestedEvent, width: int) -> StyleAndTextTuples:
        """``Allow shell?  v view all…  y yes  n no  a always…`` in at most
        ``width`` columns: the longest wording that fits, the keys always kept
        (explanations are dropped before a key would be cut)."""
        name = plain(event.name, keep_joiners=False)
        hidden = self._hidden(event)
        for long in (True, False):
            for keep_draft in (True, False) if long else (False,):
                view: StyleAndTextTuples = []
                if hidden:
                    what = f"view all ({event.hidden_chars} characters hidden) first"
                    view = [("class:approval.key", " v "), ("", f" {what if long else 'view'}  ")]
                parts: StyleAndTextTuples = [
                    ("class:approval", f"Allow {name}? "),
                    *view,
                    ("class:approval.key", " y "),
                    ("", " yes  "),
                    ("class:approval.key", " n "),
                    ("", " no  "),
                    ("class:approval.key", " a "),
                    ("", " always (this session)" if long else " always"),
                ]
                if keep_draft:
                    parts.append(("class:status.dim", "  (your draft is kept)"))
                if sum(cell_len(text) for _, text, *_ in parts) <= width:
                    return parts
        return parts

    def _key_bindings(self) -> KeyBindings:
        kb = KeyBindings()
        busy = Condition(lambda: self.busy)
        approving = Condition(lambda: self.approving)
        empty = Condition(lambda: not self.prompt.default_buffer.text)
        picking = Condition(lambda: self._picker is not None)
        selecting = Condition(lambda: self.selected is not None) & ~picking
        has_waiting = Condition(lambda: bool(self.session.waiting))

        @kb.add("up", filter=selecting)
        def _select_up(event: KeyPressEvent) -> None:
            self.move_selection(-1)

        @kb.add("down", filter=~picking & ~approving & empty & has_waiting & ~selecting)
        @kb.add("down", filter=selecting)
        def _select_down(event: KeyPressEvent) -> None:
            self.move_selection(1)

        @kb.add("e", filter=selecting & ~approving)
        def _edit_selected(event: KeyPressEvent) -> None:
            self.drop_selected(edit=True)

        @kb.add("d", filter=selecting & ~approving)
        @kb.add("delete", filter=selecting & ~approving)
        def _drop_selected(event: KeyPressEvent) -> None:
            self.drop_selected(edit=False)

        @kb.add("escape", filter=selecting)
        def _leave_selection(event: KeyPressEvent) -> None:
            self._selected = None
            self._invalidate()

        @kb.add("up", filter=picking)
        def _up(event: KeyPressEvent) -> None:
            self._move_focus(-1)

        @kb.add("down", filter=picking)
        def _down(event: KeyPressEvent) -> None:
            self._move_focus(1)

        @kb.add("pageup", filter=picking)
        def _page_up(event: KeyPressEvent) -> None:
            self._move_focus(-PICKER_ROWS)

        @kb.add("pagedown", filter=picking)
        def _page_down(event: KeyPressEvent) -> None:
            self._move_focus(PICKER_ROWS)

        # Enter on an empty line enters the focused session; a typed line runs as usual.
        @kb.add("enter", filter=picking & empty & ~approving)
        def _pick(event: KeyPressEvent) -> None:
            rows = self._picker or []
            if rows:
                self._soon(self.enter_session, rows[self._focus_index(rows)].session_id)

        # Esc is never eager: Alt+Enter arrives as Esc then Enter, and must
        # reach the newline binding below (a lone Esc fires after ESC_WAIT_S).
        @kb.add("escape", filter=picking)
        def _close_picker(event: KeyPressEvent) -> None:
            self.close_picker()

        @kb.add("c-l", filter=picking)
        def _relist(event: KeyPressEvent) -> None:
            self._refresh_picker()
            event.app.renderer.clear()

        @kb.add("enter", filter=~approving & ~(picking & empty))
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            self.close_picker()
            self._selected = None
            if buffer.complete_state is not None and buffer.complete_state.current_completion:
                # One Enter accepts the completion and runs the completed line.
                buffer.apply_completion(buffer.complete_state.current_completion)
            text = buffer.text
            if not text.strip():
                if not self.busy and self.session.waiting:
                    self.send_waiting()
                return
            if command_word(text) is not None:
                line = self._take_line(buffer)
                self.view.echo(line)
                if not self.handle_line(line):
                    self._leaving = True
                    event.app.exit(result="")
                return
            # Sent first, taken from the editor only once durable (a refusal keeps it).
            if self.send(text, "steer" if self.busy else "prompt"):
                self._take_line(buffer)

        # A draft that is a command being typed completes (the default Tab),
        # never queues: "/sta" is not a message for the model.
        command_draft = Condition(lambda: command_word(self.prompt.default_buffer.text) is not None)

        @kb.add("tab", filter=busy & ~approving & ~empty & ~picking & ~command_draft)
        def _tab(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if self.send(buffer.text, "queue"):
                self._take_line(buffer)

        @kb.add("c-j")
        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.reset()
                self._exit_armed_at = None
                return
            now = self._clock()
            if (
                self._exit_armed_at is not None
                and now - self._exit_armed_at <= EXIT_CONFIRM_WINDOW_S
            ):
                self._exit_armed_at = None  # the last frame left on screen stays clean
                self._leaving = True
                event.app.exit(exception=_Exit())
                return
            self._exit_armed_at = now
            self.interrupt(send_pending=False)

        @kb.add("c-d", filter=empty)
        def _ctrl_d(event: KeyPressEvent) -> None:
            self._leaving = True
            event.app.exit(exception=EOFError())

        @kb.add("escape", filter=busy & ~picking & ~selecting)
        def _escape(event: KeyPressEvent) -> None:
            self.interrupt(send_pending=True)

        for word in ANSWER_WORDS:
            for variant in (word[0], word[0].upper()):
                kb.add(variant, filter=approving)(self._on_answer_key)
        for variant in ("v", "V"):
            kb.add(variant, filter=approving)(self._on_view_key)

        @kb.add("enter", filter=approving)
        def _enter_while_asked(event: KeyPressEvent) -> None:
            """Enter neither answers nor submits while a question waits."""

        # \ then Enter is a newline in every state (an approval, the picker),
        # like Ctrl+J: added after the other Enter bindings, so it wins.
        continued = Condition(
            lambda: self.prompt.default_buffer.document.text_before_cursor.endswith("\\")
        )

        @kb.add("enter", filter=continued)
        def _continue_line(event: KeyPressEvent) -> None:
            event.current_buffer.delete_before_cursor(1)
            event.current_buffer.insert_text("\n")

        swallowing = Condition(self._swallowing)

        # Added last: for the same key the last binding wins, so the rest of
        # an answer word is taken here before any other binding sees it.
        @kb.add(Keys.Any, filter=swallowing)
        @kb.add("enter", filter=swallowing)
        def _rest_of_answer(event: KeyPressEvent) -> None:
            if not self._swallow(event.data):
                event.current_buffer.insert_text(event.data)

        return kb

    # ---- commands ---------------------------------------------------------------

    def _banner(self) -> None:
        s = self.session
        resumed = any(isinstance(r, jr.TurnStarted) for r in s.journal.records)
        lines = [
            Text.assemble(("mind ", "bold"), (__version__, "dim")),
            Text.assemble(
                ("session   ", "dim"), s.session_id, (" (resumed)" if resumed else "", "dim")
            ),
            Text.assemble(("provider  ", "dim"), self._provider_label()),
            Text.assemble(("cwd       ", "dim"), str(s.cwd)),
            Text.assemble(("sandbox   ", "dim"), s.sandbox.describe()),
            Text.assemble(("approval  ", "dim"), str(s.approval)),
            Text(
                "Enter sends (steers a running turn) · Tab queues · Esc interrupts · /help",
                style="dim",
            ),
        ]
        recap = self._recap()
        self.view.print(*lines[:-1], *recap, lines[-1], Text(""))
        self.view.reset_spacing()

    def _recap(self) -> list[Text]:
        """For a resumed session: how many turns, the last prompt and answer."""
        records = self.session.journal.records
        turns = sum(1 for r in records if isinstance(r, jr.TurnStarted))
        if not turns:
            return []
        prompt = next((r.text for r in reversed(records) if isinstance(r, jr.UserMessage)), "")
        answer = next(
            (r.text for r in reversed(records) if isinstance(r, jr.ModelRound) and r.text), ""
        )
        width = max(20, self.console.width - 12)
        out = [Text.assemble(("history   ", "dim"), f"{turns} turn{'s' if turns != 1 else ''}")]
        if prompt:
            out.append(
                Text.assemble(("last      ", "dim"), ("› ", "cyan"), _one_line(prompt, width))
            )
        if answer:
            out.append(Text.assemble(("          ", "dim"), (_one_line(answer, width), "dim")))
        return out

    def _provider_label(self) -> Text:
        label = self.session.provider.label
        if self.config.provider.kind == "scripted":  # never mistaken for a real model
            return Text(label, style="bold magenta")
        return Text(label)

    def _cmd_help(self, _: str) -> bool:
        rows = [
            ("Enter", "send; while a turn runs: steer it (reaches the model at its next step)"),
            ("Tab", "while a turn runs: queue the message for the next turn"),
            ("Enter on an empty line", "send the waiting messages now (when idle)"),
            ("Ctrl+J, Alt+Enter, \\ Enter", "new line"),
            ("// or a leading space", "send text that starts with / (a path alone is sent)"),
            ("Esc", "interrupt the turn and send the waiting messages at once"),
            ("Down on an empty line", "select a waiting message: e edit, d / Del drop, Esc back"),
            ("Ctrl+C", "clear the draft, else interrupt (waiting messages are kept); twice exits"),
            ("Ctrl+D", "exit (on an empty line)"),
            ("y / n / a", "answer an approval: yes once, no, always (yes / no / always too)"),
            ("v", "at an approval: view the whole text (needed before y when part is hidden)"),
        ]
        out = [Text("Keys", style="bold")]
        out += [Text.assemble(("  " + k.ljust(28), "cyan"), v) for k, v in rows]
        out.append(Text("Commands", style="bold"))
        out += [
            Text.assemble(("  /" + c.name.ljust(27), "cyan"), c.help)
            for c in self.commands.values()
        ]
        self.view.flush_text()
        self.view.print(*out)
        return True

    def _cmd_new(self, _: str) -> bool:
        self._soon(self._new_session)  # opening never blocks the prompt
        return True

    async def _new_session(self) -> None:
        old = self._cur
        old.session.park()
        try:
            session = await self.runtime.create_session(
                cwd=old.session.cwd, config=self.config, interactive=True
            )
        except MindError as exc:
            old.session.attach()
            self.view.note(f"Could not start a new session: {exc}", style="red")
            return
        self.created.add(session.session_id)
        self._switch_to(self._host(session))
        running = " (its turn keeps running)" if old.session.busy else ""
        lines = [
            Text.assemble(("new session ", "bold"), session.session_id),
            Text(
                f"parked {old.session.session_id}{running} · /resume goes back",
                style="dim",
            ),
        ]
        if old.session.waiting and not old.session.busy:
            lines.append(
                Text(
                    f"{len(old.session.waiting)} message(s) still wait in the previous session; "
                    "they are sent when you go back to it.",
                    style="yellow",
                )
            )
        self.view.print(*lines)

    def _cmd_sessions(self, _: str) -> bool:
        self.open_picker()
        return True

    def _cmd_resume(self, arg: str) -> bool:
        if not arg:
            self.open_picker()
            return True
        candidates = [s.session_id for s in self.runtime.list_sessions()] + list(self._hosted)
        try:
            sid = resolve_session_id(arg.split()[0], candidates)
        except SessionError as exc:
            self.view.note(f"Cannot resume {exc.session_id}: {exc.detail}", style="yellow")
            return True
        self._soon(self.enter_session, sid)
        return True

    # ---- hosting several sessions ---------------------------------------------------

    async def enter_session(self, session_id: str) -> bool:
        """Show ``session_id``: switch to it if hosted here, else open it (the
        shown session is parked; its turn keeps running).

        Entry of a session another live process holds is refused with the
        runtime's wording (``occupied by pid N``, seed 002 §3.5, §6.8); the
        picker's pre-check only says it earlier, the runtime decides.

        Returns:
            True when ``session_id`` is now the attached session.
        """
        hosted = self._hosted.get(session_id)
        broken = hosted is not None and hosted.session.journal.broken is not None
        if hosted is not None and broken and not hosted.session.busy:
            return await self._reopen(hosted)  # a write failed earlier: open it afresh
        if hosted is self._cur:
            self.close_picker()
            self.view.note(f"Already in session {session_id}.")
            return True
        if hosted is None:
            holders = self.runtime.mounts.holders(session_id)
            if holders:
                pids = ", ".join(str(h.pid) for h in holders)
                self._refuse(session_id, f"occupied by pid {pids}")
                return False
            old = self.session
            old.park()
            try:
                session = await self.runtime.open_session(
                    session_id, config=self.config, interactive=True
                )
            except MountRefused as exc:
                old.attach()
                self._refuse(session_id, exc.reason)
                return False
            except SessionError as exc:
                old.attach()
                self._refuse(session_id, exc.detail)
                return False
            except MindError as exc:
                old.attach()
                self._refuse(session_id, str(exc))
                return False
            hosted = self._host(session)
            self._switch_to(hosted)
            self._show_entered("resumed")
            self._say_recovered()
            if self._cur.recovered:
                self.send_waiting()
        else:
            self._switch_to(hosted)
            self._show_entered("back from parked")
        return True

    async def _reopen(self, hosted: _Hosted, *, quiet: bool = False) -> bool:
        """Open afresh a hosted session whose journal refuses appends (a write
        failed: disk full, quota, I/O error) and show it: the runtime closes
        the broken handle and opens the session by its open rules (the failed
        turn closed, accepted input waiting, issue #8 item 6).

        Args:
            hosted: the session's REPL state (attached or parked).
            quiet: say nothing when it still cannot be opened (the caller
                reports the refusal), e.g. an Enter while the disk is still full.

        Returns:
            True when the session is now open again and attached.
        """
        sid = hosted.session.session_id
        old = self._cur
        if old is not hosted:
            old.session.park()
        try:
            session = await self.runtime.open_session(sid, config=self.config, interactive=True)
        except MountRefused as exc:
            why = exc.reason
        except SessionError as exc:
            why = exc.detail
        except MindError as exc:
            why = str(exc)
        else:
            hosted.session = session
            hosted.journal_pos = len(session.journal.records)
            hosted.approvals.clear()  # the broken handle's questions died with it
            self._switch_to(hosted)
            self._show_entered("reopened")
            self._say_recovered(after_storage=True)
            if self._cur.recovered and not quiet:
                self.send_waiting()
            return True
        if old is not hosted:
            old.session.attach()
        if not quiet:
            self._refuse(sid, why)
        return False

    def _refuse(self, session_id: str, why: str) -> None:
        """Say why a session cannot be entered (the picker stays open)."""
        self.view.note(f"Cannot enter session {session_id}: {why}", style="red")
        if self._picker is not None:
            self._refresh_picker()
        self._invalidate()

    def _switch_to(self, hosted: _Hosted) -> None:
        """Park the attached session (its turn keeps running, muted) and attach ``hosted``."""
        old = self._cur
        self.close_picker()
        if old is hosted:
            return
        old.view.muted = True
        old.session.park()
        self._ensure_consumer(old)  # keeps taking its events while parked
        hosted.session.attach()
        hosted.view.muted = False
        self._cur = hosted
        self._exit_armed_at = None
        self._selected = None
        self._ensure_consumer(hosted)
        self._invalidate()

    def _show_entered(self, how: str) -> None:
        """Print the header of the session just entered: id, cwd, history, a running turn."""
        s = self.session
        missed, dropped = self.view.take_missed()
        lines = [
            Text.assemble(("session ", "bold"), s.session_id, (f" ({how})", "dim")),
            Text.assemble(("cwd       ", "dim"), str(s.cwd)),
            *([] if missed else self._recap()),
        ]
        if missed:
            earlier = f" (… {dropped} earlier lines not kept)" if dropped else ""
            lines.append(Text(f"while it was parked:{earlier}", style="dim"))
        self.view.print(*lines)
        self.view.write_ansi(missed)
        if s.busy:
            started = self.view.turn_started_at
            since = f" for {format_duration(self._clock() - started)}" if started else ""
            self.view.note(f"a turn is running{since}; its output continues here", "cyan")
        if not missed or s.busy:
            self.view.print(Text(""))
        self.view.reset_spacing()
        for _, event in self._approvals:  # asked while parked: ask again here
            self.view.show_approval(event, viewed=event.call_id in self._cur.viewed)

    # ---- the session picker ----------------------------------------------------------

    def open_picker(self) -> None:
        """Show the session picker under the input (focus on the attached session)."""
        self._picker_focus = self.session.session_id
        self._refresh_picker()

    def close_picker(self) -> None:
        """Hide the session picker."""
        if self._picker is not None:
            self._picker = None
            self._invalidate()

    def _refresh_picker(self) -> None:
        """Re-read the session list and who holds what (lenient ledger read, no write)."""
        holders: dict[str, list[int]] = {}
        for record in self.runtime.mounts.snapshot():
            if not record.is_self:
                for sid in record.session_ids:
                    holders.setdefault(sid, []).append(record.pid)
        try:
            summaries = self.runtime.list_sessions()
        except MindError as exc:  # the hosted sessions are still shown
            self.view.note(f"Could not list sessions: {exc}", style="yellow")
            summaries = []
        hosted = {sid: h.session for sid, h in self._hosted.items()}
        self._picker = picker_rows(
            summaries, hosted, self.session.session_id, holders, time.time_ns() // 1_000_000
        )
        self._picker_read_at = self._clock()
        self._invalidate()

    def _focus_index(self, rows: list[PickerRow]) -> int:
        """The focused row, derived from the focused session id (first row if gone)."""
        for i, row in enumerate(rows):
            if row.session_id == self._picker_focus:
                return i
        return 0

    def _move_focus(self, step: int) -> None:
        rows = self._picker or []
        if not rows:
            return
        index = min(max(0, self._focus_index(rows) + step), len(rows) - 1)
        self._picker_focus = rows[index].session_id
        self._invalidate()

    def _cmd_status(self, _: str) -> bool:
        s = self.session
        state = "running a turn" if self.busy else "idle"
        waiting = len(s.waiting)
        if self.approving:
            state = "waiting for approval"
        allowed = ", ".join(sorted(s.always_allowed)) or "none"
        pairs = [
            ("session", s.session_id),
            ("provider", s.provider.label),
            ("model", self.config.provider.model),
            ("cwd", str(s.cwd)),
            ("sandbox", s.sandbox.describe()),
            ("approval", f"{s.approval} (always allowed: {allowed})"),
            ("state", state + (f", {waiting} waiting" if waiting else "")),
            ("usage", format_tokens(self._cur.tokens)),
        ]
        self.view.print(*(Text.assemble((k.ljust(10), "dim"), v) for k, v in pairs))
        return True

    def _cmd_exit(self, _: str) -> bool:
        return False


def _input_column(layout: Layout) -> tuple[HSplit, Container]:
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


def _short_id(session_id: str) -> str:
    """The first 13 characters of a session id (a UUIDv7's time part), for notices."""
    return session_id[:13] + "…" if len(session_id) > 13 else session_id


def _one_line(text: str, width: int) -> str:
    """``text`` (journaled model or user text) sanitised, on one line, cut to ``width``."""
    return shorten(" ".join(plain(text).split()), width)


def _work_dir(cwd: str | None) -> Path:
    """The working directory of a new session; raises ConfigError if not a directory."""
    work_dir = Path(cwd).expanduser() if cwd else Path.cwd()
    if not work_dir.is_dir():
        raise ConfigError(f"--cwd {work_dir} is not a directory")
    return work_dir


async def run_repl(
    config: ResolvedConfig, cwd: str | None, session_id: str | None, *, latest: bool = False
) -> int:
    """Run the interactive REPL until the person exits.

    Args:
        config: provider settings and approval policy.
        cwd: working directory of a new session (default: the current one);
            with ``latest``, the directory whose most recent session is opened.
        session_id: open this existing session (or the one session whose id
            starts with it) instead of creating one.
        latest: open the most recent session of ``cwd`` (``mind resume``).

    Returns:
        The exit code: 0 after a normal exit.

    Raises:
        ConfigError: not a terminal, ``cwd`` is not a directory, or ``latest``
            and the directory has no session.
        SessionError: ``session_id`` does not exist or is ambiguous.
        MountRefused: another live process holds the session (``occupied by pid N``).
        SessionOccupiedError: another live process holds the session's lease.
        StateDirError: the state root is unusable.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError(
            "the interactive REPL needs a terminal; use `mind exec PROMPT` in scripts and pipes"
        )
    work_dir = _work_dir(cwd)
    try:
        history_path: Path | None = history_file(os.environ)
    except OSError as exc:  # a read-only MIND_HOME: keep input history in memory only
        history_path = None
        Console(stderr=True).print(
            Text(
                f"mind: input history is not saved ({exc.strerror}: {exc.filename})", style="yellow"
            )
        )
    # rich takes an exported COLUMNS/LINES over the real terminal size and
    # keeps it through resizes; the REPL must follow the terminal itself.
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    console = Console(highlight=False, _environ=environ)
    dropped: list[Session] = []
    hangups = {signal.SIGHUP, signal.SIGTERM}
    # Held from here until the REPL handles them, so that a terminal closed
    # during start-up still ends like /exit instead of killing mind before it
    # can remove the session it just created (issue 7 item 10).
    signal.pthread_sigmask(signal.SIG_BLOCK, hangups)
    _release_when_handled(hangups, time.monotonic() + HANGUP_HOLD_MAX_S)
    try:
        async with Runtime.open() as rt:
            if latest:
                session_id = _latest_session(rt.list_sessions(), work_dir)
            elif session_id:
                rows = rt.list_sessions()
                session_id = resolve_session_id(session_id, [r.session_id for r in rows])
            if session_id:
                session = await rt.open_session(session_id, config=config, interactive=True)
            else:
                session = await rt.create_session(cwd=work_dir, config=config, interactive=True)
            repl = Repl(rt, session, config, history_path, console)
            if not session_id:
                repl.created.add(session.session_id)
            repl.greet()
            try:
                with patch_stdout(raw=True):
                    code = await repl.run()
            finally:
                # Also when the run ended by an error, e.g. EIO from a closed
                # terminal: a session nothing was sent to is never left behind
                # (issue 7 item 10). A second SIGHUP (the terminal's, then its
                # owner's) waits until this cleanup is done.
                signal.pthread_sigmask(signal.SIG_BLOCK, hangups)
                dropped = [s for s in repl.hosted if s.session_id in repl.created and _untouched(s)]
                for s in dropped:
                    _drop_records(s)
            kept = [s for s in repl.hosted if s not in dropped]
            final = repl.session.session_id if repl.session in kept else None
            waiting = len(repl.session.waiting)
            others = [s.session_id for s in kept if s.session_id != final]
    finally:
        for s in dropped:
            directory = s.journal.path.parent
            with contextlib.suppress(OSError):  # only an empty directory; anything new stays
                if not s.journal.path.exists():  # nobody created it again since
                    (directory / "lease.lock").unlink(missing_ok=True)
                directory.rmdir()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, hangups)
    if final is None:
        console.print(Text("Nothing was sent: no session was kept.", style="dim"))
        if others:
            console.print(Text(f"Used in this run: {', '.join(others)}", style="dim"))
        return code
    if waiting:
        console.print(
            Text(
                f"{waiting} message(s) wait in this session (saved); "
                "they are sent when you resume it.",
                style="yellow",
            )
        )
    console.print(Text(f"Resume this session with: mind resume {final}", style="dim"))
    if others:
        console.print(Text(f"Also used in this run: {', '.join(others)}", style="dim"))
    return code


HANGUP_HOLD_MAX_S: Final = 5.0
"""Longest time (seconds) start-up holds SIGHUP/SIGTERM back while the REPL
installs its handling; after it they are let through whatever happened."""


def _release_when_handled(hangups: set[signal.Signals], deadline: float) -> None:
    """Unblock ``hangups`` as soon as each has a handler (the REPL's signal
    receiver; an inherited SIG_IGN counts), checked on the running event loop
    every 5 ms, or at ``deadline`` (``time.monotonic()`` seconds) at the latest.
    One that arrived meanwhile is then delivered to that handler."""
    import asyncio

    handled = all(signal.getsignal(s) not in (signal.SIG_DFL, None) for s in hangups)
    if handled or time.monotonic() >= deadline:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, hangups)
        return
    asyncio.get_running_loop().call_later(0.005, _release_when_handled, hangups, deadline)


def _untouched(session: Session) -> bool:
    """True when nothing was ever sent to ``session``: its journal holds only
    ``session_started`` and its inbox is empty (a start without input)."""
    records = session.journal.records
    return (
        len(records) == 1
        and isinstance(records[0], jr.SessionStarted)
        and not session.inbox.entries
        and not session.busy
    )


def _drop_records(session: Session) -> None:
    """Delete an untouched session's journal and inbox while its lease is held,
    so no other process can open it half-deleted; ``mind sessions`` lists only
    directories with a journal. A session is kept only once input reaches it."""
    directory = session.journal.path.parent
    for name in ("journal.jsonl", "inbox.json"):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def _latest_session(rows: list[SessionSummary], work_dir: Path) -> str:
    """The most recently active session whose cwd is ``work_dir`` and that has
    at least one turn (one nothing was ever sent to, left by kill -9, is
    skipped; an unindexed one, whose turns are unknown, counts).

    Raises:
        ConfigError: no such session in that directory.
    """
    here = str(work_dir.resolve())
    mine = [r for r in rows if r.cwd == here and (r.last_status or not r.indexed)]
    if not mine:
        raise ConfigError(
            f"no session with a turn in {here} yet; `mind` starts one, `mind sessions` lists all"
        )
    return max(mine, key=lambda r: r.updated_at_ms).session_id


__all__ = [
    "Command",
    "PickerRow",
    "Repl",
    "history_file",
    "picker_rows",
    "run_repl",
]
