"""The interactive ``mind`` REPL (DESIGN §7).

One prompt_toolkit prompt stays on screen for the whole life of the REPL;
``patch_stdout(raw=True)`` makes everything printed while it is active appear
above it, so the half-typed line survives streamed output. A turn runs in a
background task that consumes the turn's typed events and hands them to
:class:`mind.shell.render.TurnView`.

Keys:

- Enter submits when idle. While a turn runs, Enter on a non-empty line goes
  to :meth:`Repl.on_input_while_busy` — today that *queues* the text as the
  next turn (Tab does the same); the steering issue replaces it with a
  handler that steers the running turn, Tab keeps queueing.
- Ctrl+C clears a non-empty draft; otherwise interrupts a running turn;
  otherwise asks to press it again, and twice within 2 s exits.
- Esc interrupts a running turn. Ctrl+D on an empty draft exits.
- Ctrl+J (or Alt+Enter, or ``\\`` before Enter) inserts a newline; a
  bracketed paste never submits.
- An approval request adds a y / n / a question above the prompt; the draft
  stays in the editor. A y / n / a typed less than ``TYPING_GAP_S`` after
  the previous character of a draft is taken as typing, not as an answer.

Queued text is kept in memory only (the durable steering inbox arrives with
the steering issue). When a turn ends ``interrupted`` the queue is not sent:
it is put back into the editor so the person decides.
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
from mind.errors import ConfigError, SessionBusyError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.config import ResolvedConfig
from mind.shell.render import TurnView, format_duration, format_tokens, shorten
from mind.shell.runtime import Decision, Runtime, Session, Turn
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
    }
)


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
        self.turn: Turn | None = None
        self._turn_ended = anyio.Event()
        self._turn_ended.set()
        self.queued: deque[str] = deque()
        self._approvals: deque[tuple[Turn, ev.ApprovalRequestedEvent]] = deque()
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
        self.on_input_while_busy: Callable[[str], None] = self.queue_input
        """What Enter does with a non-empty line while a turn runs (queue today)."""
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
        """Take the draft out of the editor (kept in history) for a submission."""
        text = buffer.text
        buffer.append_to_history()
        buffer.reset()
        self._last_typed_at = -math.inf
        return text

    # ---- state ---------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """True while a turn of the attached session is running."""
        return self.turn is not None

    @property
    def approving(self) -> bool:
        """True while an approval question is waiting for y / n / a."""
        return bool(self._approvals)

    def _invalidate(self) -> None:
        self.prompt.app.invalidate()

    # ---- main loop -------------------------------------------------------------

    async def run(self) -> int:
        """Show the banner, read input until exit, print the resume hint.

        Returns:
            The process exit code (0).
        """
        self._banner()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._tick)
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
        """Run a command or submit a prompt; returns False to leave the REPL."""
        stripped = text.strip()
        if not stripped:
            return True
        if stripped.startswith("/") and not stripped.startswith("//"):
            name, _, rest = stripped[1:].partition(" ")
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
        if stripped.startswith("//"):
            text = text.replace("//", "/", 1)
        if self.busy:  # the line was accepted by a path other than Enter (e.g. a race)
            self.on_input_while_busy(text)
        else:
            self.start_turn(text)
        return True

    def start_turn(self, text: str) -> None:
        """Submit ``text`` as a new turn of the attached session and render it."""
        assert self._tg is not None, "start_turn before run()"
        try:
            turn = self.session.submit(text)
        except SessionBusyError:
            self.queue_input(text)
            return
        self.turn = turn
        self._turn_ended = anyio.Event()
        self._tg.start_soon(self._consume, turn, self._turn_ended)
        self._invalidate()

    def queue_input(self, text: str) -> None:
        """Keep ``text`` to submit as the next turn when the running one ends."""
        self.queued.append(text)
        self.view.echo(text, "  (queued: sent when this turn ends)")
        self._invalidate()

    def interrupt(self) -> None:
        """Interrupt the running turn, if any (it ends ``interrupted``)."""
        if self.turn is not None and not self.turn.done:
            self.turn.interrupt()
            self._invalidate()

    async def _consume(self, turn: Turn, ended: anyio.Event) -> None:
        status: ev.TurnStatus | None = None
        try:
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    self.view.show_approval(event)
                    self._approvals.append((turn, event))
                    self._invalidate()
                    continue
                self.view.show(event)
                if isinstance(event, ev.TurnCompletedEvent):
                    status = event.status
                    self._tokens = ev.Usage(
                        input_tokens=self._tokens.input_tokens + event.usage.input_tokens,
                        output_tokens=self._tokens.output_tokens + event.usage.output_tokens,
                    )
        finally:
            self._approvals = deque(a for a in self._approvals if a[0] is not turn)
            if self.turn is turn:
                self.turn = None
            ended.set()
            self._invalidate()
        self._after_turn(status)

    def _after_turn(self, status: ev.TurnStatus | None) -> None:
        if not self.queued:
            return
        if self._leaving:  # never drop typed text silently
            for text in self.queued:
                self.view.note(f"Not sent (was queued): {text}", style="yellow")
            self.queued.clear()
            return
        if status == ev.TurnStatus.interrupted:
            restored = "\n".join(self.queued)
            self.queued.clear()
            buffer = self.prompt.default_buffer
            draft = buffer.text
            combined = restored if not draft.strip() else restored + "\n" + draft
            buffer.set_document(Document(combined, len(combined)))
            self.view.note("Queued messages were put back in the editor (turn interrupted).")
            return
        text = self.queued.popleft()
        self.view.echo(text)
        self.start_turn(text)

    async def _stop_turn(self) -> None:
        """On exit: interrupt a running turn and wait briefly for its terminal record."""
        if self.turn is None:
            return
        self.interrupt()
        with anyio.move_on_after(SHUTDOWN_GRACE_S):
            await self._turn_ended.wait()

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
        turn, event = self._approvals.popleft()
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
        """The prompt: a status line above ``› `` while something needs attention."""
        prompt: StyleAndTextTuples = [("class:prompt.busy" if self.busy else "class:prompt", "› ")]
        status = self._status_line()
        if not status:
            return prompt
        lines: StyleAndTextTuples = []
        preview = self.view.preview(self.console.width - 3) if self.busy else ""
        if preview and not self._approvals:
            lines += [("class:preview", preview), ("", "\n")]
        return [*lines, *status, ("", "\n"), *prompt]

    def _status_line(self) -> StyleAndTextTuples:
        if self._exit_armed_at is not None:
            return [("class:status.warn", "Press Ctrl+C again to exit")]
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
        if self.turn is not None:
            started = self.view.turn_started_at
            elapsed = self._clock() - started if started is not None else 0.0
            frame = _SPINNER[int(self._clock() / 0.1) % len(_SPINNER)]
            parts: StyleAndTextTuples = [
                ("class:status.busy", f"{frame} Working {format_duration(elapsed)}"),
                ("class:status.dim", " · Esc interrupts · Enter queues a message"),
            ]
            if self.queued:
                parts.append(("class:status.dim", f" · {len(self.queued)} queued"))
            return parts
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
                return
            is_command = text.lstrip().startswith("/") and not text.lstrip().startswith("//")
            line = self._take_line(buffer)
            if self.busy and not is_command:
                self.on_input_while_busy(line)
                return
            self.view.echo(line)
            if not self.handle_line(line):
                self._leaving = True
                event.app.exit(result="")

        @kb.add("tab", filter=busy & ~approving & ~empty)
        def _tab(event: KeyPressEvent) -> None:
            self.queue_input(self._take_line(event.current_buffer))

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
            if self.busy:
                self.interrupt()
                return
            now = self._clock()
            if (
                self._exit_armed_at is not None
                and now - self._exit_armed_at <= EXIT_CONFIRM_WINDOW_S
            ):
                self._exit_armed_at = None  # the last frame left on screen stays clean
                event.app.exit(exception=_Exit())
                return
            self._exit_armed_at = now

        @kb.add("c-d", filter=empty)
        def _ctrl_d(event: KeyPressEvent) -> None:
            event.app.exit(exception=EOFError())

        @kb.add("escape", eager=True, filter=busy)
        def _escape(event: KeyPressEvent) -> None:
            self.interrupt()

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
                "Enter sends · Ctrl+J newline · Esc or Ctrl+C interrupts · /help · Ctrl+D exits",
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
            ("Enter", "send (while a turn runs: queue the message for the next turn)"),
            ("Tab", "queue the message for the next turn (while a turn runs)"),
            ("Ctrl+J, Alt+Enter, \\ Enter", "new line"),
            ("Esc", "interrupt the running turn"),
            ("Ctrl+C", "clear the draft, else interrupt the turn, else twice to exit"),
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
        old = self.session.session_id
        self.session = self.runtime.create_session(
            cwd=self.session.cwd, config=self.config, interactive=True
        )
        self._tokens = ev.Usage(input_tokens=0, output_tokens=0)
        self.view.print(
            Text.assemble(("new session ", "bold"), self.session.session_id),
            Text(f"previous session {old} — resume it with: mind --session {old}", style="dim"),
        )
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
        if self.approving:
            state = "waiting for approval"
        allowed = ", ".join(sorted(s.always_allowed)) or "none"
        pairs = [
            ("session", s.session_id),
            ("provider", s.provider.label),
            ("model", self.config.provider.model),
            ("cwd", str(s.cwd)),
            ("approval", f"{s.approval} (always allowed: {allowed})"),
            ("state", state + (f", {len(self.queued)} queued" if self.queued else "")),
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
    console.print(Text(f"Resume this session with: mind --session {final}", style="dim"))
    return code


__all__ = ["Command", "Repl", "history_file", "run_repl"]
