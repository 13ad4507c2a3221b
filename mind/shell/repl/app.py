"""The :class:`Repl` object: its parts, the run loop, and sending input.

How input, keys and rendering work is in the package docstring
(:mod:`mind.shell.repl`). The parts, each in its own module, hold a
reference to the Repl and read its state when asked: ``layout.StatusArea``,
``keys.key_bindings``, ``picker.Picker``, ``waiting.WaitingList``,
``approvals.Approvals``, ``commands.SlashCommands``, ``hosting.Hosting``
(which sessions are hosted and which is attached), ``feed.EventFeed``.
The state they share lives here, public: the clock, ``leaving``,
``exit_armed_at``, ``last_typed_at``, :meth:`Repl.invalidate`.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Final, final

import anyio
from prompt_toolkit import PromptSession
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, InMemoryHistory
from rich.console import Console

from mind.errors import InputRefused, LeaveRepl
from mind.shell.config import ResolvedConfig
from mind.shell.render import TurnView
from mind.shell.repl.approvals import Approvals
from mind.shell.repl.banner import banner_lines
from mind.shell.repl.commands import CommandCompleter, SlashCommands, command_word
from mind.shell.repl.feed import EventFeed
from mind.shell.repl.hosting import Hosting
from mind.shell.repl.keys import ESC_WAIT_S, EXIT_CONFIRM_WINDOW_S, key_bindings
from mind.shell.repl.layout import STYLE, StatusArea
from mind.shell.repl.picker import Picker
from mind.shell.repl.waiting import WaitingList
from mind.shell.runtime import InputKind, InputReceipt, Runtime, Session, Turn

SHUTDOWN_GRACE_S: Final = 5.0
"""How long exit waits for an interrupted turn to write its terminal record."""

TICK_S: Final = 0.2
"""Redraw period of the status line while something is moving."""


@final
class Repl:
    """The REPL of one process: one attached session shown, others parked.

    The REPL holds no input of its own: accepted text lives in the session's
    inbox (see the module docstring). Switching sessions (``/new``,
    ``/resume``, the ``/sessions`` picker) parks the shown one: its turn keeps
    running in this process and its events keep being consumed, muted; a
    one-line notice says when a parked session's turn ends (docs/design/mounts.md §1).

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
        self.clock = clock
        """Monotonic clock in seconds (every REPL timing reads it)."""
        self.created: set[str] = set()
        """Ids of the sessions ``/new`` created in this run (the caller adds the first)."""
        self.exit_armed_at: float | None = None
        """When the first Ctrl+C of an exit was pressed (``clock`` seconds), else None."""
        self.last_typed_at = -math.inf
        """When a character was last typed into the draft (``clock`` seconds)."""
        self.leaving = False
        self.hung_up = False
        """The terminal closed (SIGHUP) or SIGTERM came: leaving is not a Stop."""
        self._tg: anyio.abc.TaskGroup | None = None
        """Set once the REPL is on its way out (no further frame is drawn)."""
        self._greeted = False
        self.status = StatusArea(self)
        self.feed = EventFeed(self)
        self.waiting = WaitingList(self)
        self.picker = Picker(self)
        self.approvals = Approvals(self)
        self.hosting = Hosting(self, session)
        self.commands = SlashCommands(self)
        self.prompt: PromptSession[str] = PromptSession(
            message=self.status.message,
            multiline=True,
            prompt_continuation=lambda width, line, wrap: [("class:continuation", "  ")],
            history=FileHistory(str(history_path)) if history_path else InMemoryHistory(),
            key_bindings=key_bindings(self),
            reserve_space_for_menu=0,
            completer=CommandCompleter(lambda: self.commands.table.values()),
            complete_while_typing=True,
            style=STYLE,
            enable_suspend=True,
        )
        self.prompt.default_buffer.on_text_insert += self._on_typed
        self.prompt.app.timeoutlen = ESC_WAIT_S
        self.prompt.app.ttimeoutlen = ESC_WAIT_S
        self.status.place()

    def _on_typed(self, _: object) -> None:
        self.last_typed_at = self.clock()
        self.waiting.clear()  # typing leaves the waiting list

    def take_line(self, buffer: Buffer) -> str:
        """Take the draft out of the editor (kept in history) once it is accepted."""
        text = buffer.text
        buffer.append_to_history()
        buffer.reset()
        self.last_typed_at = -math.inf
        return text

    # ---- state ---------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The attached (shown) session."""
        return self.hosting.current.session

    @property
    def view(self) -> TurnView:
        """The attached session's view (the only one that prints)."""
        return self.hosting.current.view

    @property
    def hosted(self) -> list[Session]:
        """Every session this REPL hosts, attached first."""
        return [self.session] + [h.session for h in self.hosting.parked()]

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
        """True while an approval question is waiting for y / n / a (not
        while a refusal's reason is typed: its keys are text)."""
        return bool(self.approvals.pending) and not self.approvals.refusing

    def invalidate(self) -> None:
        """Ask prompt_toolkit to redraw the prompt and the status area."""
        self.prompt.app.invalidate()

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
            self.feed.task_group = tg
            self._tg = tg
            tg.start_soon(self._tick)
            tg.start_soon(self._leave_on_signals)
            self.feed.ensure()  # a turn resumed at open (recovery.md §8) already runs
            if self.hosting.current.recovered:
                self.send_waiting()
            try:
                await self._read_loop()
            finally:
                self.leaving = True
                with anyio.CancelScope(shield=True):
                    await self._stop_turn()
                tg.cancel_scope.cancel()
        return 0

    async def _leave_on_signals(self) -> None:
        """SIGHUP (the terminal closed) and SIGTERM leave like /exit: running
        turns are interrupted (their tool process groups killed, the turns
        closed ``interrupted``) instead of dying mid-call with tools still
        running unobserved — except a turn waiting at an approval card, which
        is left for ``mind resume`` to show again (``Turn.hang_up``)."""
        with anyio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM) as signals:
            async for _ in signals:
                self.hung_up = True
                self.leaving = True
                app = self.prompt.app
                if app.is_running:
                    app.exit(exception=LeaveRepl())
                return

    async def _read_loop(self) -> None:
        # One prompt for the whole session: Enter hands the line over without
        # leaving it (see keys._enter), so typed-ahead keys never meet a
        # cooked-mode terminal between two prompts. It returns only to leave,
        # or when a default binding accepted the line (handled the same way).
        while not self.leaving:
            try:
                text = await self.prompt.prompt_async()
            except (EOFError, LeaveRepl):
                return
            if not self.leaving and not self.handle_line(text):
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
            return self.commands.run(text, *named)
        if not self.send(text, "steer" if self.busy else "prompt"):
            buffer = self.prompt.default_buffer
            if not buffer.text:
                buffer.set_document(Document(text, len(text)))
        return True

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
        if reopen and not self.session.reusable:
            # A journal write failed earlier: once space is freed, this Enter
            # reopens the session (recovered input first) and sends; opening
            # runs as a task so the prompt never waits on it.
            self.soon(self._reopen_then_send, text, kind)
            return True
        if text.startswith("//"):
            text = text[1:]
        try:
            receipt = self.session.send(text, kind=kind)
        except InputRefused as exc:
            why = exc.message.rstrip(".")
            broken = self.session.storage_broken
            if exc.reason == "storage" and broken is not None:
                why = (
                    f"the session's journal could not be written ({broken}); "
                    f"free space, then /resume {self.session.session_id} (or press Enter again): "
                    "nothing accepted is lost"
                )
            self.view.note(f"Not sent: {why}. Your text is still in the editor.", "yellow")
            self.invalidate()
            return False
        self._accepted(receipt, kind)
        return True

    def soon(self, fn: Callable[..., Coroutine[Any, Any, object]], *args: object) -> None:
        """Run ``fn(*args)`` as a task of the running REPL: opening a session
        (``Runtime.open_session`` / ``create_session`` are async) never
        blocks a key handler or the prompt."""
        assert self._tg is not None, "the REPL is not running"
        self._tg.start_soon(fn, *args)

    async def _reopen_then_send(self, text: str, kind: InputKind) -> None:
        """:meth:`send` after reopening a broken session; a refusal puts the
        text back into an empty editor."""
        await self.hosting.reopen(self.hosting.current, quiet=True)
        if not self.send(text, kind, reopen=False):
            buffer = self.prompt.default_buffer
            if not buffer.text:
                buffer.set_document(Document(text, len(text)))

    def _accepted(self, receipt: InputReceipt, kind: InputKind) -> None:
        if receipt.disposition == "next_turn" and kind == "steer":
            self.view.note("The turn was already finishing: your message goes to the next turn.")
        self.feed.ensure()
        self.invalidate()

    def send_waiting(self) -> None:
        """Start a turn with the input waiting in an idle session, if any."""
        if self.session.resume_pending() is not None:
            self.feed.ensure()
        self.invalidate()

    def interrupt(self, *, send_pending: bool = True) -> None:
        """Interrupt the running turn, if any (it ends ``interrupted``).

        Args:
            send_pending: start the next turn at once with the waiting input
                (Esc); False leaves it waiting, durable (Ctrl+C).
        """
        turn = self.turn
        if turn is not None:
            turn.interrupt(send_pending=send_pending)
            self.invalidate()

    def greet(self) -> None:
        """Print the banner and what opening the session repaired.

        ``run_repl`` calls it before ``patch_stdout`` takes over stdout, so
        these lines are on the terminal before the prompt draws its first
        frame: written through the proxy, they raced that frame and could
        land below it, leaving a stale ``Working`` line and ``›`` above the
        banner. The recovered input is sent by :meth:`run`."""
        self._greeted = True
        self.view.print(*banner_lines(self.session, self.config, self.console.width))
        self.view.reset_spacing()
        self.hosting.say_recovered()

    async def _stop_turn(self) -> None:
        """On exit: interrupt every running turn, parked ones too (waiting input
        stays waiting), and wait briefly for their terminal records."""
        with anyio.move_on_after(SHUTDOWN_GRACE_S):
            for session in self.hosted:
                while session.busy and (turn := session.current) is not None:
                    if self.hung_up:  # not the person's Stop (docs/design/interactions.md §3)
                        turn.hang_up()
                    else:  # leaving is no Stop either for a command a crash left running
                        turn.leave()
                    await turn.wait()

    async def _tick(self) -> None:
        """Redraw the status line while a turn runs or an exit is armed; re-read
        the picker's rows every ``PICKER_REFRESH_S`` while it is shown. Runs in
        the REPL's task group: it never keeps the process alive."""
        while True:
            await anyio.sleep(TICK_S)
            if self.exit_armed_at is not None and (
                self.clock() - self.exit_armed_at > EXIT_CONFIRM_WINDOW_S
            ):
                self.exit_armed_at = None
                self.invalidate()
            self.picker.refresh_if_due()
            for hosted in self.hosting.by_id.values():
                hosted.view.flush_due()  # a stream that paused shows its complete blocks
            if self.busy or self.picker.shown:
                self.invalidate()
