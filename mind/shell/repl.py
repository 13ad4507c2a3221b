"""The interactive ``mind`` REPL (DESIGN §7, issue 3 §5).

One prompt_toolkit prompt stays on screen for the whole life of the REPL;
``patch_stdout(raw=True)`` makes everything printed while it is active appear
above it, so the half-typed line survives streamed output.

Input is never the REPL's own: every line goes to the session's durable
input API (:meth:`mind.shell.runtime.Session.send`), which writes it to
``inbox.json`` before accepting it. Only then does the editor let go of the
text; a refusal (:class:`~mind.errors.InputRefused`, e.g. 20 steering
messages waiting) prints the reason and leaves the text in the editor. The
lines shown above the prompt are read from :attr:`Session.waiting` at each
redraw, so they are exactly what the session holds.

Keys:

- Enter on an idle session sends the line as a prompt (a new turn). While a
  turn runs, Enter *steers* it (:meth:`Session.steer`): the text reaches the
  model at its next step, after the pending tool results. If the turn was
  already finishing (its mailbox sealed) the text waits for the next turn and
  the screen says so.
- Tab while a turn runs queues the line for the next turn (:meth:`Session.queue`).
- Esc interrupts the running turn and sends the waiting input at once as the
  next turn (``interrupt(send_pending=True)``; the runtime starts that turn).
- Ctrl+C clears a non-empty draft; otherwise it requests an interrupt of a
  running turn (``interrupt(send_pending=False)``: waiting input stays durable
  and waits) and asks to press it again; twice within 2 s exits.
- Ctrl+D on an empty draft exits. Enter on an empty line of an idle session
  with waiting input sends that input now.
- Ctrl+J (or Alt+Enter, or ``\\`` before Enter) inserts a newline; a
  bracketed paste never submits.
- An approval request adds a y / n / a question above the prompt; the draft
  stays in the editor. A y / n / a typed less than ``TYPING_GAP_S`` after
  the previous character of a draft is taken as typing, not as an answer.

Rendering: one consumer task iterates :meth:`Session.events` while the
session is busy, so turns the runtime starts by itself (queued input, the
steering sent by Esc, recovered input) are rendered like typed ones. A turn's
inputs are echoed (``› text``) from the journal when the turn claims them: at
turn start, and for steering at the model-request boundary that delivers it.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.patch_stdout import patch_stdout
from prompt_toolkit.styles import Style
from rich.console import Console
from rich.text import Text

from mind import __version__
from mind.errors import ConfigError, InputRefused
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.mailbox import MailboxMessage
from mind.shell.config import ResolvedConfig
from mind.shell.render import TurnView, format_duration, format_tokens, shorten
from mind.shell.runtime import Decision, InputKind, InputReceipt, Runtime, Session, Turn
from mind.shell.store import mind_home

EXIT_CONFIRM_WINDOW_S: Final = 2.0
"""A second Ctrl+C within this many seconds of the first exits."""

SHUTDOWN_GRACE_S: Final = 5.0
"""How long exit waits for an interrupted turn to write its terminal record."""

TYPING_GAP_S: Final = 0.5
"""An approval key typed within this many seconds of the previous character
of a draft is taken as typing, not as an answer (guards against answering a
question that appeared mid-word)."""

TICK_S: Final = 0.2
"""Redraw period of the status line while something is moving."""

PENDING_LINES: Final = 5
"""Waiting messages listed above the prompt; more are counted on one line."""

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

    An existing file with wider permissions is narrowed to 0600: past prompts
    can hold secrets.
    """
    home = mind_home(env)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / "history"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return path


@final
class Repl:
    """The REPL of one process: one attached session, at most one running turn.

    The REPL holds no input of its own: accepted text lives in the session's
    inbox (see the module docstring).

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
        history_path: Path,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.session = session
        self.config = config
        self.console = console
        self.view = TurnView(console, clock)
        self._clock = clock
        self._approvals: deque[tuple[str, ev.ApprovalRequestedEvent]] = deque()
        """Questions waiting for y / n / a: ``(turn_id, event)``, oldest first."""
        self._consuming: Session | None = None
        """The session whose events the consumer task is rendering, if any."""
        self._journal_pos = len(session.journal.records)
        """Journal records already looked at for inputs to echo."""
        self._recovered: set[str] = set()
        """Ids of inputs recovered when the session was opened (echoed as such)."""
        self._exit_armed_at: float | None = None
        self._last_typed_at = -math.inf
        self._leaving = False
        self._tokens = ev.Usage(input_tokens=0, output_tokens=0)
        self._tg: anyio.abc.TaskGroup | None = None
        self.commands: dict[str, Command] = {}
        for command in (
            Command("help", "show keys and commands", self._cmd_help),
            Command("new", "start a new session with the same settings", self._cmd_new, False),
            Command("sessions", "list sessions, most recent first", self._cmd_sessions),
            Command("status", "show this session's settings and usage", self._cmd_status),
            Command("exit", "leave mind (the session can be resumed)", self._cmd_exit),
            Command("quit", "same as /exit", self._cmd_exit),
        ):
            self.commands[command.name] = command
        self.prompt: PromptSession[str] = PromptSession(
            message=self._message,
            multiline=True,
            prompt_continuation=lambda width, line, wrap: [("class:continuation", "  ")],
            history=FileHistory(str(history_path)),
            key_bindings=self._key_bindings(),
            reserve_space_for_menu=0,
            completer=_CommandCompleter(lambda: self.commands.values()),
            complete_while_typing=True,
            style=_STYLE,
            enable_suspend=True,
        )
        self.prompt.default_buffer.on_text_insert += self._on_typed

    def _on_typed(self, _: object) -> None:
        self._last_typed_at = self._clock()

    def _take_line(self, buffer: Buffer) -> str:
        """Take the draft out of the editor (kept in history) once it is accepted."""
        text = buffer.text
        buffer.append_to_history()
        buffer.reset()
        self._last_typed_at = -math.inf
        return text

    # ---- state ---------------------------------------------------------------

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

    # ---- main loop -------------------------------------------------------------

    async def run(self) -> int:
        """Show the banner, resume recovered input, read input until exit.

        Returns:
            The process exit code (0).
        """
        self._banner()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._tick)
            self._resume_recovered()
            try:
                await self._read_loop()
            finally:
                self._leaving = True
                with anyio.CancelScope(shield=True):
                    await self._stop_turn()
                tg.cancel_scope.cancel()
        return 0

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
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith("/") and not stripped.startswith("//"):
            return self._run_command(text)
        if not self.send(text, "steer" if self.busy else "prompt"):
            buffer = self.prompt.default_buffer
            if not buffer.text:
                buffer.set_document(Document(text, len(text)))
        return True

    def _run_command(self, text: str) -> bool:
        name, _, rest = text.strip()[1:].partition(" ")
        command = self.commands.get(name)
        if command is None:  # a unique prefix names its command (/he -> /help)
            matches = [c for c in self.commands.values() if name and c.name.startswith(name)]
            command = matches[0] if len(matches) == 1 else None
        if command is None:
            self.view.note(
                f"Unknown command /{name}. /help lists commands; start a message with // "
                "to send a leading slash.",
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
        return command.run(rest.strip())

    def send(self, text: str, kind: InputKind) -> bool:
        """Hand ``text`` to the session (durable before accepted) and render the result.

        Args:
            text: the line as typed; a leading ``//`` stands for ``/``.
            kind: ``prompt`` (a new turn when idle), ``steer`` (the running
                turn) or ``queue`` (the next turn).

        Returns:
            True when the session accepted the text; False when it refused it
            (the reason was printed; the caller keeps the text in the editor).
        """
        if text.lstrip().startswith("//"):
            text = text.replace("//", "/", 1)
        try:
            receipt = self.session.send(text, kind=kind)
        except InputRefused as exc:
            self.view.note(
                f"Not sent: {exc.message.rstrip('.')}. Your text is still in the editor.", "yellow"
            )
            self._invalidate()
            return False
        self._accepted(receipt, kind)
        return True

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

    def _resume_recovered(self) -> None:
        """Say what opening the session repaired and run its recovered input."""
        recovery = self.session.recovery
        if recovery is None:
            return
        if recovery.aborted_turns or recovery.synthetic_results:
            calls = recovery.synthetic_results
            self.view.note(
                f"mind stopped during a turn last time: {recovery.aborted_turns} turn(s) closed "
                f"as aborted, {calls} tool call(s) marked interrupted (not run again).",
                style="yellow",
            )
        waiting = self.session.waiting
        if recovery.replayed_inputs and waiting:
            self._recovered = {m.message_id for m in waiting}
            self.view.note(
                f"{len(waiting)} message(s) accepted earlier were never answered; "
                "sending them now.",
                style="yellow",
            )
            self.send_waiting()

    # ---- the event consumer ------------------------------------------------------

    def _ensure_consumer(self) -> None:
        """Start rendering the attached session's events unless already doing so."""
        if self._consuming is self.session or not self.session.busy or self._tg is None:
            return
        self._consuming = self.session
        self._tg.start_soon(self._consume, self.session)

    async def _consume(self, session: Session) -> None:
        """Render every event of ``session`` until it is idle (all of its turns)."""
        try:
            while True:
                async for event in session.events():
                    self._on_event(session, event)
                if not session.busy:  # events() ended at idle; nothing can start in between
                    return
        finally:
            if self._consuming is session:
                self._consuming = None
            self._invalidate()

    def _on_event(self, session: Session, event: ev.Event) -> None:
        if session is not self.session:  # detached meanwhile: not shown
            return
        if isinstance(event, _AFTER_CLAIM):
            self._echo_claimed(at_start=isinstance(event, ev.TurnStartedEvent))
        if isinstance(event, ev.ApprovalRequestedEvent):
            self.view.show_approval(event)
            self._approvals.append((event.turn_id, event))
        elif not isinstance(event, ev.InputAcceptedEvent):
            self.view.show(event)
        if isinstance(event, ev.TurnCompletedEvent):
            self._approvals = deque(a for a in self._approvals if a[0] != event.turn_id)
            self._tokens = ev.Usage(
                input_tokens=self._tokens.input_tokens + event.usage.input_tokens,
                output_tokens=self._tokens.output_tokens + event.usage.output_tokens,
            )
        self._invalidate()

    def _echo_claimed(self, *, at_start: bool) -> None:
        """Echo the inputs journaled (claimed by a turn) since the last look.

        Args:
            at_start: the turn is starting (its inputs are its question);
                otherwise the input is steering delivered mid-turn.
        """
        records = self.session.journal.records
        for record in records[self._journal_pos :]:
            if isinstance(record, jr.UserMessage):
                suffix = "" if at_start else "  (steering)"
                if at_start and record.kind == jr.Kind.queue:
                    suffix = "  (queued)"
                if record.message_id in self._recovered:
                    suffix = "  (recovered)"
                # Mid-turn steering is followed by model output: keep a gap.
                self.view.echo(record.text, suffix, gap_after=record.kind == jr.Kind.steer)
        self._journal_pos = len(records)

    async def _stop_turn(self) -> None:
        """On exit: interrupt a running turn (waiting input stays waiting) and
        wait briefly for its terminal record."""
        with anyio.move_on_after(SHUTDOWN_GRACE_S):
            while (turn := self.turn) is not None:
                turn.interrupt(send_pending=False)
                await turn.wait()

    async def _tick(self) -> None:
        """Redraw the status line while a turn runs or an exit is armed."""
        while True:
            await anyio.sleep(TICK_S)
            if self._exit_armed_at is not None and (
                self._clock() - self._exit_armed_at > EXIT_CONFIRM_WINDOW_S
            ):
                self._exit_armed_at = None
                self._invalidate()
            if self.busy:
                self._invalidate()

    # ---- approvals ------------------------------------------------------------

    def decide(self, decision: Decision) -> None:
        """Answer the oldest pending approval question."""
        if not self._approvals:
            return
        turn_id, event = self._approvals.popleft()
        turn = self.turn
        if turn is not None and turn.turn_id == turn_id:
            turn.decide(event.call_id, decision)
            self.view.show_decision(event.call_id, event.name, decision)
        self._invalidate()

    def _answer_with(self, decision: Decision) -> Callable[[KeyPressEvent], None]:
        def answer(event: KeyPressEvent) -> None:
            if self._clock() - self._last_typed_at < TYPING_GAP_S:
                # The person was typing a draft when the question appeared: this
                # key belongs to the draft, not to the question.
                event.current_buffer.insert_text(event.data)
                return
            self.decide(decision)

        return answer

    # ---- prompt pieces --------------------------------------------------------

    def _message(self) -> StyleAndTextTuples:
        """The prompt: preview, status line and waiting messages above ``› ``."""
        prompt: StyleAndTextTuples = [("class:prompt.busy" if self.busy else "class:prompt", "› ")]
        if self._leaving:  # the last frame stays in the scrollback: keep it clean
            return prompt
        lines: StyleAndTextTuples = []
        status = self._status_line()
        if status:
            preview = self.view.preview(self.console.width - 3) if self.busy else ""
            if preview and not self._approvals:
                lines += [("class:preview", preview), ("", "\n")]
            lines += [*status, ("", "\n")]
        lines += self._pending_lines(self.session.waiting)
        return [*lines, *prompt]

    def _pending_lines(self, waiting: list[MailboxMessage]) -> StyleAndTextTuples:
        """One line per waiting message: where it goes, then its text."""
        out: StyleAndTextTuples = []
        width = max(20, self.console.width - 16)
        hinted = False
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
            out += [
                ("class:pending", "  ↳ "),
                (style, label + " "),
                ("", text),
                ("class:status.dim", hint),
                ("", "\n"),
            ]
        if len(waiting) > PENDING_LINES:
            out += [("class:pending", f"  … {len(waiting) - PENDING_LINES} more waiting\n")]
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
            _, event = self._approvals[0]
            return [
                ("class:approval", f"Allow {event.name}? "),
                ("class:approval.key", " y "),
                ("", " yes  "),
                ("class:approval.key", " n "),
                ("", " no  "),
                ("class:approval.key", " a "),
                ("", " always (this session)"),
                ("class:status.dim", "  (your draft is kept)"),
            ]
        if self.busy:
            started = self.view.turn_started_at
            elapsed = self._clock() - started if started is not None else 0.0
            frame = _SPINNER[int(self._clock() / 0.1) % len(_SPINNER)]
            esc = "Esc: interrupt + send waiting" if self.session.waiting else "Esc interrupts"
            return [
                ("class:status.busy", f"{frame} Working {format_duration(elapsed)}"),
                ("class:status.dim", f" · {esc} · Enter steers · Tab queues"),
            ]
        if self.session.waiting:
            return [
                ("class:status.warn", f"{len(self.session.waiting)} waiting"),
                (
                    "class:status.dim",
                    " · Enter sends now · or it goes first with your next message",
                ),
            ]
        return []

    def _key_bindings(self) -> KeyBindings:
        kb = KeyBindings()
        busy = Condition(lambda: self.busy)
        approving = Condition(lambda: self.approving)
        empty = Condition(lambda: not self.prompt.default_buffer.text)

        @kb.add("enter", filter=~approving)
        def _enter(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.complete_state is not None and buffer.complete_state.current_completion:
                buffer.apply_completion(buffer.complete_state.current_completion)
                return
            text = buffer.text
            if buffer.document.text_before_cursor.endswith("\\"):
                buffer.delete_before_cursor(1)
                buffer.insert_text("\n")
                return
            if not text.strip():
                if not self.busy and self.session.waiting:
                    self.send_waiting()
                return
            stripped = text.lstrip()
            if stripped.startswith("/") and not stripped.startswith("//"):
                line = self._take_line(buffer)
                self.view.echo(line)
                if not self.handle_line(line):
                    self._leaving = True
                    event.app.exit(result="")
                return
            # Sent first, taken from the editor only once durable (a refusal keeps it).
            if self.send(text, "steer" if self.busy else "prompt"):
                self._take_line(buffer)

        @kb.add("tab", filter=busy & ~approving & ~empty)
        def _tab(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if self.send(buffer.text, "queue"):
                self._take_line(buffer)

        @kb.add("c-j")
        @kb.add("escape", "enter", filter=~busy)
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

        @kb.add("escape", eager=True, filter=busy)
        def _escape(event: KeyPressEvent) -> None:
            self.interrupt(send_pending=True)

        answers: tuple[tuple[str, Decision], ...] = (("y", "yes"), ("n", "no"), ("a", "always"))
        for key, decision in answers:
            for variant in (key, key.upper()):
                kb.add(variant, filter=approving)(self._answer_with(decision))

        @kb.add("enter", filter=approving)
        def _enter_while_asked(event: KeyPressEvent) -> None:
            """Enter neither answers nor submits while a question waits."""

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
            ("Esc", "interrupt the turn and send the waiting messages at once"),
            ("Ctrl+C", "clear the draft, else interrupt (waiting messages are kept); twice exits"),
            ("Ctrl+D", "exit (on an empty line)"),
            ("y / n / a", "answer an approval: yes once, no, always for this session"),
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
        old = self.session
        self.session = self.runtime.create_session(
            cwd=old.cwd, config=self.config, interactive=True
        )
        # The consumer of the old session (if still draining) stops rendering;
        # the next turn of the new one starts a consumer for it.
        self._journal_pos = len(self.session.journal.records)
        self._approvals.clear()
        self._recovered.clear()
        self._tokens = ev.Usage(input_tokens=0, output_tokens=0)
        lines = [
            Text.assemble(("new session ", "bold"), self.session.session_id),
            Text(
                f"previous session {old.session_id} — resume it with: "
                f"mind --session {old.session_id}",
                style="dim",
            ),
        ]
        if old.waiting:
            lines.append(
                Text(
                    f"{len(old.waiting)} message(s) still wait in the previous session; "
                    "they are sent when you resume it.",
                    style="yellow",
                )
            )
        self.view.print(*lines)
        return True

    def _cmd_sessions(self, _: str) -> bool:
        rows = self.runtime.list_sessions()
        if not rows:
            self.view.note("No sessions yet.")
            return True
        out: list[Text] = []
        for row in rows[:20]:
            mark = "●" if row.session_id == self.session.session_id else " "
            out.append(
                Text.assemble(
                    (f"{mark} ", "cyan"),
                    row.session_id,
                    (f"  {row.last_status or '-':<11}", "dim"),
                    shorten(row.title or "(no prompt yet)", 60),
                    (f"  {row.cwd}", "dim"),
                )
            )
        if len(rows) > 20:
            out.append(Text(f"  … {len(rows) - 20} more (mind sessions lists all)", style="dim"))
        out.append(Text("Resume one with: mind --session <id>", style="dim"))
        self.view.print(*out)
        return True

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
            ("approval", f"{s.approval} (always allowed: {allowed})"),
            ("state", state + (f", {waiting} waiting" if waiting else "")),
            ("usage", format_tokens(self._tokens)),
        ]
        self.view.print(*(Text.assemble((k.ljust(10), "dim"), v) for k, v in pairs))
        return True

    def _cmd_exit(self, _: str) -> bool:
        return False


def _one_line(text: str, width: int) -> str:
    return shorten(" ".join(text.split()), width)


def _work_dir(cwd: str | None) -> Path:
    """The working directory of a new session; raises ConfigError if not a directory."""
    work_dir = Path(cwd).expanduser() if cwd else Path.cwd()
    if not work_dir.is_dir():
        raise ConfigError(f"--cwd {work_dir} is not a directory")
    return work_dir


async def run_repl(config: ResolvedConfig, cwd: str | None, session_id: str | None) -> int:
    """Run the interactive REPL until the person exits.

    Args:
        config: provider settings and approval policy.
        cwd: working directory of a new session (default: the current one).
        session_id: open this existing session instead of creating one.

    Returns:
        The exit code: 0 after a normal exit.

    Raises:
        ConfigError: not a terminal, or ``cwd`` is not a directory.
        SessionError: ``session_id`` does not exist.
        StateDirError: the state root is unusable.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError(
            "the interactive REPL needs a terminal; use `mind exec PROMPT` in scripts and pipes"
        )
    work_dir = _work_dir(cwd)
    history_path = history_file(os.environ)
    console = Console(highlight=False)
    async with Runtime.open() as rt:
        if session_id:
            session = rt.open_session(session_id, config=config, interactive=True)
        else:
            session = rt.create_session(cwd=work_dir, config=config, interactive=True)
        repl = Repl(rt, session, config, history_path, console)
        with patch_stdout(raw=True):
            code = await repl.run()
        final = repl.session.session_id
        waiting = len(repl.session.waiting)
    if waiting:
        console.print(
            Text(
                f"{waiting} message(s) wait in this session (saved); "
                "they are sent when you resume it.",
                style="yellow",
            )
        )
    console.print(Text(f"Resume this session with: mind --session {final}", style="dim"))
    return code


__all__ = ["Command", "Repl", "history_file", "run_repl"]
