"""The library API: a runtime hosting sessions, and the turn loop.

``mind exec``, the REPL and embedders all use this one code path::

    async with Runtime.open() as rt:                       # state root from MIND_STATE_HOME
        session = rt.create_session(cwd=Path.cwd(), config=resolved)
        turn = session.submit("fix the failing test")
        async for event in turn:                            # typed mind.generated.events structs
            if isinstance(event, ApprovalRequestedEvent):
                turn.decide(event.call_id, "yes")
        print(turn.outcome.status)

A turn is driven by :class:`mind.machines.turn.TurnMachine` (the machine
decides which transitions are legal; this module performs the I/O and feeds
results back as events). Durable boundaries (DESIGN §3.1, §4): ``turn_started``
and the user's message are fsynced before the first model request; every model
round and tool result is journaled as it completes; the terminal
``turn_completed`` record (which also acknowledges the consumed inputs) is
fsynced last.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, final

import anyio
import msgspec

from mind._version import __version__
from mind.conversation import ModelRequest, ReasoningDelta, StreamDone, TextDelta, ToolCall
from mind.conversation import Usage as RoundUsage
from mind.effects.policy import ApprovalPolicy, approval_reason
from mind.effects.retry import RetryPolicy
from mind.effects.tools import parse_arguments, tool_specs
from mind.errors import ProviderError, SessionBusyError, SessionError, ToolArgumentsError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.history import build_messages
from mind.machines.turn import TurnMachine
from mind.shell.config import ResolvedConfig
from mind.shell.ids import new_id, new_session_id
from mind.shell.journal import Journal
from mind.shell.providers import Provider, make_provider
from mind.shell.store import SessionSummary, Store, state_home
from mind.shell.tools import ToolOutcome, ToolRunner

Decision = Literal["yes", "no", "always"]
"""An answer to an approval request: run once, refuse, or run and stop asking
for this tool for the rest of the session."""

SYSTEM_PROMPT = """\
You are mind, a coding agent working in a terminal on the user's machine.
The working directory is {cwd}. Use the tools to inspect and change files and to run
commands; prefer apply_patch for edits to existing files. Keep answers short and concrete,
and say what you changed. Never claim to have run something you did not run."""

DEFAULT_MAX_ROUNDS = 200
"""Model rounds per turn before the turn fails (guards a tool loop that never ends)."""


@final
class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended: the terminal event plus the final answer text."""

    event: ev.TurnCompletedEvent
    final_text: str

    @property
    def status(self) -> str:
        """``completed`` | ``interrupted`` | ``failed`` | ``aborted``."""
        return str(self.event.status)


@final
class Turn:
    """A running turn: async-iterate its events; decide approvals; interrupt.

    Iteration yields :data:`mind.generated.events.Event` structs in order and
    ends after the ``turn.completed`` event. Created by :meth:`Session.submit`.
    """

    def __init__(self, session: Session, turn_id: str, text: str, message_id: str) -> None:
        self.session = session
        self.turn_id = turn_id
        self._text = text
        self._message_id = message_id
        # Unbounded so a slow consumer never stalls the turn; one consumer.
        self._events: deque[ev.Event] = deque()
        self._wakeup = anyio.Event()
        self._closed = False
        self._scope = anyio.CancelScope()
        self._interrupt_requested = False
        self._decisions: dict[str, Decision] = {}
        self._decision_events: dict[str, anyio.Event] = {}
        self._done = anyio.Event()
        self._outcome: TurnOutcome | None = None
        # Progress kept on the handle so an interrupted turn still reports it.
        self._usage = RoundUsage()
        self._final_text = ""

    # ---- consumer side -----------------------------------------------------

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ev.Event]:
        while True:
            if self._events:
                yield self._events.popleft()
            elif self._closed:
                return
            else:
                await self._wakeup.wait()
                self._wakeup = anyio.Event()

    def decide(self, call_id: str, decision: Decision) -> None:
        """Answer the approval request of ``call_id``. The first decision wins."""
        if call_id in self._decisions:
            return
        self._decisions[call_id] = decision
        waiter = self._decision_events.get(call_id)
        if waiter is not None:
            waiter.set()

    def interrupt(self) -> None:
        """Stop the turn as soon as possible; it ends with status ``interrupted``.

        A running tool's process group is killed; a streaming model response is
        dropped (partial text is journaled). Idempotent.
        """
        self._interrupt_requested = True
        self._scope.cancel()

    @property
    def done(self) -> bool:
        """True once the terminal record is durable."""
        return self._done.is_set()

    async def wait(self) -> TurnOutcome:
        """Wait for the end of the turn (without consuming events)."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome

    @property
    def outcome(self) -> TurnOutcome:
        """The outcome; raises RuntimeError before the turn has ended."""
        if self._outcome is None:
            raise RuntimeError(f"turn {self.turn_id} has not ended")
        return self._outcome

    # ---- producer side -----------------------------------------------------

    def _emit(self, event: ev.Event) -> None:
        self._events.append(event)
        self._wakeup.set()

    async def _await_decision(self, call_id: str) -> Decision:
        if call_id not in self._decisions:
            waiter = self._decision_events.setdefault(call_id, anyio.Event())
            await waiter.wait()
        return self._decisions[call_id]

    def _finish(self, outcome: TurnOutcome) -> None:
        self._outcome = outcome
        self._emit(outcome.event)
        self._closed = True
        self._wakeup.set()
        self._done.set()


@final
class Session:
    """One session: its journal, settings and at most one running turn.

    Create with :meth:`Runtime.create_session` or :meth:`Runtime.open_session`.
    """

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        journal: Journal,
        cwd: Path,
        config: ResolvedConfig,
        *,
        interactive: bool,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.journal = journal
        self.cwd = cwd
        self.config = config
        self.interactive = interactive
        self.provider: Provider = make_provider(config.provider)
        self.tools = ToolRunner(cwd, env=tool_environment(os.environ))
        self.always_allowed: set[str] = set()
        self.retry_policy = RetryPolicy(max_retries=config.max_retries)
        self.current: Turn | None = None

    @property
    def approval(self) -> ApprovalPolicy:
        """The session's approval policy."""
        return self.config.approval

    def started_event(self) -> ev.SessionStartedEvent:
        """The ``session.started`` event for this session."""
        return ev.SessionStartedEvent(session_id=self.session_id)

    def submit(self, text: str, *, message_id: str | None = None) -> Turn:
        """Start a turn for ``text`` and return its handle at once.

        Args:
            text: the user's prompt (kept verbatim).
            message_id: caller-chosen id of the input (default: a fresh id).

        Raises:
            SessionBusyError: a turn of this session is still running.
        """
        if self.current is not None and not self.current.done:
            raise SessionBusyError(self.session_id, "a turn is already running")
        turn = Turn(self, new_id("turn"), text, message_id or new_id("msg"))
        self.current = turn
        self.runtime._spawn(self._run_turn, turn)
        return turn

    async def run(self, text: str) -> TurnOutcome:
        """Submit ``text`` and wait for the end of the turn, dropping events."""
        turn = self.submit(text)
        async for _ in turn:
            pass
        return turn.outcome

    # ---- the turn loop -----------------------------------------------------

    async def _run_turn(self, turn: Turn) -> None:
        machine = TurnMachine(max_retries=self.retry_policy.max_retries)
        failure: ev.Failure | None = None
        try:
            self._begin(turn)
            machine.start()
            with turn._scope:
                failure = await self._loop(turn, machine)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (the runtime is closing): the turn ends
            # aborted — its input is not acknowledged and replays later.
            if not machine.is_terminal:  # synchronous: nothing here can be cancelled
                self._close_open_calls(turn.turn_id, "the turn was aborted")
                machine.abort()
            self._end(turn, machine, None)
            raise
        except Exception as exc:  # a bug or an I/O failure: the turn still gets its terminal
            if not machine.is_terminal:
                machine.fail()
            failure = ev.Failure(kind=ev.FailureKind.internal, message=f"internal error: {exc}")
        if not machine.is_terminal:  # only an interrupt leaves the loop without a terminal
            self._close_open_calls(turn.turn_id, "interrupted by the user")
            machine.interrupt()
        self._end(turn, machine, failure)

    def _begin(self, turn: Turn) -> None:
        """Make the turn's start and its input durable (fsync) before any model request."""
        self.journal.append(
            jr.TurnStarted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                provider=self.provider.name,
                model=self.config.provider.model,
                approval=jr.Approval(self.approval),
            )
        )
        self.journal.append(
            jr.UserMessage(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                message_id=turn._message_id,
                text=turn._text,
                kind=jr.Kind.prompt,
            ),
            sync=True,
        )
        turn._emit(ev.TurnStartedEvent(turn_id=turn.turn_id))

    def _end(
        self,
        turn: Turn,
        machine: TurnMachine,
        failure: ev.Failure | None,
    ) -> None:
        """Write the one terminal record (fsync), then publish ``turn.completed``."""
        usage = turn._usage
        assert machine.status is not None
        status = ev.TurnStatus(machine.status)
        acknowledged = [turn._message_id] if status == ev.TurnStatus.completed else []
        extra: dict[str, Any] = {}
        if failure is not None:
            extra["failure"] = jr.Failure(
                kind=jr.FailureKind(failure.kind.value), message=failure.message
            )
        self.journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                status=jr.TurnStatus(status.value),
                usage=jr.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
                acknowledged=acknowledged,
                **extra,
            ),
            sync=True,
        )
        done = ev.TurnCompletedEvent(
            turn_id=turn.turn_id,
            status=status,
            usage=ev.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
            **({"failure": failure} if failure is not None else {}),
        )
        turn._finish(TurnOutcome(event=done, final_text=turn._final_text))

    async def _loop(self, turn: Turn, machine: TurnMachine) -> ev.Failure | None:
        """Model rounds and tool calls until the turn is sealed or fails.

        Returns the failure of a failed turn (None when sealed ``completed``).
        Raises the cancellation of ``turn._scope`` on interrupt.
        """
        rounds = 0
        while True:
            rounds += 1
            if rounds > DEFAULT_MAX_ROUNDS:
                machine.fail()
                return ev.Failure(
                    kind=ev.FailureKind.internal,
                    message=f"the turn exceeded {DEFAULT_MAX_ROUNDS} model rounds",
                )
            request = ModelRequest(
                model=self.config.provider.model,
                system=SYSTEM_PROMPT.format(cwd=self.cwd),
                messages=build_messages(self.journal.records),
                tools=tool_specs(),
            )
            done: StreamDone | None = None
            partial: list[str] = []
            try:
                opened = False
                async for item in self.provider.stream(request):
                    if not opened:
                        opened = True
                        machine.stream_opened()
                    if isinstance(item, TextDelta):
                        partial.append(item.text)
                        turn._emit(ev.MessageDeltaEvent(turn_id=turn.turn_id, text=item.text))
                    elif isinstance(item, ReasoningDelta):
                        turn._emit(ev.ReasoningDeltaEvent(turn_id=turn.turn_id, text=item.text))
                    elif isinstance(item, StreamDone):
                        done = item
                if done is None:
                    raise ProviderError("stream_cut", detail="stream ended without a final event")
            except ProviderError as exc:
                failure = ev.Failure(kind=ev.FailureKind(exc.kind), message=exc.message)
                if machine.round_failed(transient=exc.transient):
                    delay_s = self.retry_policy.delay_s(machine.retries_used, exc.retry_after_s)
                    turn._emit(
                        ev.TurnRetryingEvent(
                            turn_id=turn.turn_id,
                            attempt=machine.retries_used,
                            delay_s=delay_s,
                            failure=failure,
                        )
                    )
                    await anyio.sleep(delay_s)
                    machine.retry_due()
                    continue
                return failure
            except anyio.get_cancelled_exc_class():
                if partial:  # keep what the person already saw
                    self._journal_round(
                        turn.turn_id,
                        rounds - 1,
                        "".join(partial),
                        "",
                        [],
                        "other",
                        RoundUsage(),
                        [],
                    )
                raise
            turn._usage = turn._usage + done.usage
            self._journal_round(
                turn.turn_id,
                rounds - 1,
                done.text,
                done.reasoning,
                done.tool_calls,
                done.finish,
                done.usage,
                done.provider_items,
            )
            if done.text:
                turn._final_text = done.text
                turn._emit(ev.MessageCompletedEvent(turn_id=turn.turn_id, text=done.text))
            if not done.tool_calls:
                machine.round_final()
                machine.seal()
                return None
            machine.round_tools()
            for call in done.tool_calls:
                await self._run_tool_call(turn, machine, call)
            machine.tools_done()

    def _journal_round(
        self,
        turn_id: str,
        index: int,
        text: str,
        reasoning: str,
        calls: list[ToolCall],
        finish: str,
        usage: RoundUsage,
        provider_items: list[dict[str, Any]],
    ) -> None:
        self.journal.append(
            jr.ModelRound(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                round=index,
                text=text,
                reasoning=reasoning,
                tool_calls=[
                    jr.RecordedToolCall(
                        call_id=c.call_id,
                        name=c.name,
                        arguments=c.arguments,
                        provider_fields=dict(c.provider_fields),
                    )
                    for c in calls
                ],
                finish=jr.Finish(finish),
                usage=jr.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
                provider=self.provider.name,
                provider_items=list(provider_items),
            )
        )

    async def _run_tool_call(self, turn: Turn, machine: TurnMachine, call: ToolCall) -> None:
        turn._emit(
            ev.ToolCallEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                arguments=_display_arguments(call.arguments),
            )
        )
        outcome = await self._execute(turn, machine, call)
        self.journal.append(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                status=jr.ToolStatus(outcome[0]),
                output=outcome[1],
                synthetic=False,
            )
        )
        turn._emit(
            ev.ToolResultEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                status=ev.ToolStatus(outcome[0]),
                output=outcome[1],
            )
        )

    async def _execute(self, turn: Turn, machine: TurnMachine, call: ToolCall) -> tuple[str, str]:
        """Validate, ask if required, run. Returns ``(status, output)``."""
        try:
            args = parse_arguments(call.name, call.arguments)
        except ToolArgumentsError as exc:
            return "error", str(exc)
        reason = approval_reason(self.approval, call.name, args, cwd=str(self.cwd))
        key = _always_key(call.name, args)
        if reason is not None and key not in self.always_allowed:
            if not self.interactive:
                return "denied", (
                    f"Refused without running: this call needs approval ({reason}) and this "
                    f"session cannot ask (non-interactive, approval policy {self.approval}). "
                    "Do not retry it; tell the user what you wanted to run, or rerun mind "
                    "with --approval never to allow it."
                )
            machine.approval_needed()
            turn._emit(
                ev.ApprovalRequestedEvent(
                    turn_id=turn.turn_id,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=_display_arguments(call.arguments),
                    reason=reason,
                )
            )
            decision = await turn._await_decision(call.call_id)
            machine.approval_answered()
            if decision == "no":
                return "denied", "The user refused this tool call; it was not run."
            if decision == "always":
                self.always_allowed.add(key)
        result: ToolOutcome = await self.tools.run(call.name, args)
        return result.status, result.output

    def _close_open_calls(self, turn_id: str, why: str) -> None:
        """Give every unanswered call of ``turn_id`` a durable synthetic result."""
        answered = {r.call_id for r in self.journal.records if isinstance(r, jr.ToolResult)}
        for rec in list(self.journal.records):
            if isinstance(rec, jr.ModelRound) and rec.turn_id == turn_id:
                for call in rec.tool_calls:
                    if call.call_id not in answered:
                        self.journal.append(
                            jr.ToolResult(
                                seq=0,
                                recorded_at_ms=0,
                                turn_id=turn_id,
                                call_id=call.call_id,
                                name=call.name,
                                status=jr.ToolStatus.interrupted,
                                output=f"[not completed: {why}; the call was not run again]",
                                synthetic=True,
                            )
                        )


_SECRET_MARKERS = ("KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL")


def tool_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment tool processes run with: mind's own, minus secrets.

    Variables whose name contains KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL
    (case-insensitive) are dropped so a model-run command cannot print an API
    key into the journal (the same default as Codex's
    ``shell_environment_policy``).
    """
    return {k: v for k, v in environ.items() if not any(m in k.upper() for m in _SECRET_MARKERS)}


def _always_key(name: str, args: Mapping[str, Any]) -> str:
    """What an "always" answer covers: the exact command for ``shell``
    (approving ``rm x`` must not approve ``rm -rf /``), the tool otherwise."""
    if name == "shell":
        return "shell:" + json.dumps(args.get("command"), sort_keys=True)
    return name


def _display_arguments(raw: str) -> Any:
    """Arguments for events: the parsed JSON value when valid, else the raw text."""
    try:
        return json.loads(raw or "{}")
    except ValueError:
        return raw


@final
class Runtime:
    """Hosts sessions of one state root and runs their turns in a task group.

    Use :meth:`open` as an async context manager; leaving it cancels running
    turns (they end ``aborted``) and closes providers.
    """

    def __init__(self, store: Store, tg: anyio.abc.TaskGroup) -> None:
        self.store = store
        self._tg = tg
        self._sessions: dict[str, Session] = {}

    @classmethod
    @asynccontextmanager
    async def open(
        cls, *, state_root: Path | None = None, env: Mapping[str, str] | None = None
    ) -> AsyncIterator[Runtime]:
        """Open the runtime on ``state_root`` (default from ``MIND_STATE_HOME``).

        Raises:
            StateDirError: the state root cannot be created or written.
        """
        root = state_root if state_root is not None else state_home(env or os.environ)
        store = Store(root)
        body_error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            rt = cls(store, tg)
            try:
                yield rt
            except BaseException as exc:  # re-raised below, unwrapped by the task group
                body_error = exc
            finally:
                tg.cancel_scope.cancel()
                for s in rt._sessions.values():
                    with anyio.CancelScope(shield=True):
                        await s.provider.aclose()
        if body_error is not None:
            raise body_error

    def _spawn(self, fn: Callable[[Turn], Any], turn: Turn) -> None:
        self._tg.start_soon(fn, turn)

    def list_sessions(self) -> list[SessionSummary]:
        """Summaries of every session of the state root, most recent first."""
        return self.store.summaries()

    def create_session(
        self,
        *,
        cwd: Path,
        config: ResolvedConfig,
        session_id: str | None = None,
        interactive: bool = False,
    ) -> Session:
        """Create a new session (journal + ``session_started``) and host it.

        Args:
            cwd: working directory, frozen for the session (made absolute).
            config: provider settings and approval policy.
            session_id: caller-chosen id (default: a fresh UUIDv7).
            interactive: whether approvals can be asked (False: refused).

        Raises:
            SessionError: a session with that id already exists.
            ValueError: the id is not a safe directory name.
        """
        sid = session_id or new_session_id()
        path = self.store.journal_path(sid)
        if path.exists():
            raise SessionError(sid, "already exists")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        journal = Journal.open(path, create=True)
        journal.append(
            jr.SessionStarted(
                seq=0,
                recorded_at_ms=0,
                session_id=sid,
                cwd=str(cwd.resolve()),
                mind_version=__version__,
            ),
            sync=True,
        )
        session = Session(self, sid, journal, cwd.resolve(), config, interactive=interactive)
        self._sessions[sid] = session
        return session

    def open_session(
        self,
        session_id: str,
        *,
        config: ResolvedConfig,
        interactive: bool = False,
        create: bool = False,
        cwd: Path | None = None,
    ) -> Session:
        """Open an existing session (or create it when ``create``).

        Unterminated turns left by a crash are closed as ``aborted`` and
        orphan tool calls get a synthetic result (never re-run).

        Raises:
            SessionError: no such session and not ``create``.
            JournalCorruptError: the journal is damaged (path and line named).
        """
        if session_id in self._sessions:
            return self._sessions[session_id]
        path = self.store.journal_path(session_id)
        if not path.exists():
            if create:
                return self.create_session(
                    cwd=cwd or Path.cwd(),
                    config=config,
                    session_id=session_id,
                    interactive=interactive,
                )
            raise SessionError(session_id, "no such session")
        journal = Journal.open(path)
        started = next((r for r in journal.records if isinstance(r, jr.SessionStarted)), None)
        session_cwd = Path(started.cwd) if started else (cwd or Path.cwd())
        session = Session(self, session_id, journal, session_cwd, config, interactive=interactive)
        _recover(session)
        self._sessions[session_id] = session
        return session


def _recover(session: Session) -> None:
    """Close what a crash left open (seed 000 recoverInterruptedTurn, minimal form).

    Orphan tool calls get a durable synthetic result; a turn without a
    terminal record is closed ``aborted`` (its input is not acknowledged).
    """
    records = session.journal.records
    open_turns = [r.turn_id for r in records if isinstance(r, jr.TurnStarted)]
    closed = {r.turn_id for r in records if isinstance(r, jr.TurnCompleted)}
    for turn_id in open_turns:
        if turn_id in closed:
            continue
        session._close_open_calls(turn_id, "mind stopped before the call finished")
        session.journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                status=jr.TurnStatus.aborted,
                usage=jr.Usage(input_tokens=0, output_tokens=0),
                acknowledged=[],
            ),
            sync=True,
        )


__all__ = ["Decision", "Runtime", "Session", "Turn", "TurnOutcome"]
