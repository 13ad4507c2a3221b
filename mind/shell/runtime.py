"""The library API: a runtime hosting sessions, and the turn loop.

Size: too large: the turn loop, session opening/recovery and the event fan-
out are separate jobs; issue #9 moves turn and recovery decisions into the
charts and is where this splits (``turn_loop``, ``session_open``).

``mind exec``, the REPL and embedders all use this one code path::

    async with Runtime.open() as rt:                       # state root from MIND_STATE_HOME
        session = rt.create_session(cwd=Path.cwd(), config=resolved)
        turn = session.submit("fix the failing test")
        async for event in turn:                            # typed mind.generated.events structs
            if isinstance(event, ApprovalRequestedEvent):
                turn.decide(event.call_id, "yes")
        print(turn.outcome.status)

Input (issue 3, seed 000): every input — a prompt, steering for the running
turn, or text queued for the next turn — is durable in the session's
``inbox.json`` before it is accepted (:meth:`Session.send`). The pure
:class:`~mind.machines.mailbox.Mailbox` decides where it goes; a turn claims
its inputs when it opens, takes steering at each model-request boundary
(after the pending tool results) and finally drains-or-seals.

A turn is driven by :class:`mind.machines.turn.TurnMachine` (the machine
decides which transitions are legal; this module performs the I/O and feeds
results back as events). Durable boundaries (DESIGN §3.1, §4; named in
:mod:`mind.shell.faults`): ``turn_started`` and the turn's inputs are fsynced
before the first model request; every model round and tool result is
journaled as it completes; the terminal ``turn_completed`` record — which
also acknowledges the inputs the turn consumed — is fsynced, and only then
are those inputs removed from the inbox. An aborted turn, or one that failed
on a transient error, acknowledges nothing: its inputs replay.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, final

import anyio
import msgspec

from mind._version import __version__
from mind.conversation import (
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    TextDelta,
    ToolCall,
    has_lone_surrogates,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.conversation import Usage as RoundUsage
from mind.effects.boundary import Refusal, SandboxMode
from mind.effects.policy import (
    Access,
    ApprovalPolicy,
    crossing_reason,
    rerun_reason,
    tool_decision,
)
from mind.effects.retry import RetryPolicy
from mind.effects.review import FileChange, approval_text, cut_for_display
from mind.effects.tools import parse_arguments, tool_specs
from mind.errors import (
    CANONICAL_MESSAGES,
    DropRefused,
    InputRefused,
    JournalRecordTooLarge,
    MountRefused,
    ProviderError,
    ScriptError,
    SessionBusyError,
    SessionError,
    StorageError,
    ToolArgumentsError,
)
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.generated.vocabulary import DispositionName
from mind.history import build_messages, unstarted_calls
from mind.machines.mailbox import Mailbox, MailboxMessage, MailboxRefused
from mind.machines.turn import TurnMachine, acknowledges, within_output_cap
from mind.shell import faults
from mind.shell.config import ResolvedConfig, known_secrets
from mind.shell.ids import new_id, new_session_id
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from mind.shell.lease import SessionLease
from mind.shell.mounts import PUBLISH_INTERVAL_S, MountHandle, MountLedger
from mind.shell.providers import Provider, make_provider
from mind.shell.redact import redact, redact_round, url_secrets
from mind.shell.sandbox.command import session_sandbox
from mind.shell.store import SessionSummary, Store, state_home
from mind.shell.tool_env import tool_environment
from mind.shell.tools import ToolOutcome, ToolRunner, session_boundary

InputKind = Literal["prompt", "steer", "queue"]
"""How an input is meant: a prompt (start a turn when idle), steering for the
running turn, or text queued for the next turn."""

Disposition = DispositionName
"""Where an accepted input went (one definition: ``events.schema.json``)."""

log = logging.getLogger("mind.runtime")

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
class InputReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to :meth:`Session.send`: the input is durable.

    Attributes:
        message_id: the input's id (the caller's, or a fresh one).
        disposition: where it went (see :data:`Disposition`).
        duplicate: True when this id was already accepted — an idempotent
            success that changed nothing (callers reuse ids on retry).
    """

    message_id: str
    disposition: Disposition
    duplicate: bool = False


class _EventBuffer:
    """An unbounded single-consumer event queue: the producer never waits."""

    def __init__(self) -> None:
        self._items: deque[ev.Event] = deque()
        self._wakeup = anyio.Event()
        self.closed = False

    def put(self, event: ev.Event) -> None:
        self._items.append(event)
        self._wakeup.set()

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()

    async def get(self) -> ev.Event | None:
        """The next event, or None once closed and drained."""
        while not self._items:
            if self.closed:
                return None
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
        return self._items.popleft()


@final
class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended: the terminal event plus the final answer text.

    Attributes:
        event: the ``turn.completed`` event (status, usage, failure).
        final_text: the last answer text ("" if none).
        error: for a turn that failed because mind's own state could not be
            written (failure kind ``storage``: disk full, quota, I/O error),
            the typed error with ``path`` and ``errno``; else None. The
            turn's inputs are then not acknowledged: reopen the session once
            space is freed and they replay (issue #8 item 6).
    """

    event: ev.TurnCompletedEvent
    final_text: str
    error: StorageError | None = None

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

    def __init__(self, session: Session, turn_id: str, inputs: list[MailboxMessage]) -> None:
        self.session = session
        self.turn_id = turn_id
        self.inputs = inputs
        """The inputs the turn claimed when it opened, in order."""
        self._events = _EventBuffer()
        self._scope = anyio.CancelScope()
        self._interrupt_requested = False
        self._send_pending = True
        self._decisions: dict[str, Decision] = {}
        self._decision_events: dict[str, anyio.Event] = {}
        self._done = anyio.Event()
        self._outcome: TurnOutcome | None = None
        # Progress kept on the handle so an interrupted turn still reports it.
        self.failure_detail = ""
        """The provider's own words for a failure (redacted, for stderr and
        logs only: never journaled, never in events)."""
        self._usage = RoundUsage()
        self._final_text = ""
        self._storage_error: StorageError | None = None
        self.model_quiet_since: float | None = None
        """While a model request is open: the monotonic time (seconds) of the
        last sign of life from the model (the request sent, or the last stream
        item); ``None`` otherwise. ``exec`` reports long waits from it."""

    # ---- consumer side -----------------------------------------------------

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ev.Event]:
        while (event := await self._events.get()) is not None:
            yield event

    def decide(self, call_id: str, decision: Decision) -> None:
        """Answer the approval request of ``call_id``. The first decision wins.

        Raises:
            ValueError: ``decision`` is not ``yes`` | ``no`` | ``always``, or
                ``call_id`` has no approval request in this turn (misuse; an
                approval never fails open).
        """
        if decision not in ("yes", "no", "always"):
            raise ValueError(f"decision must be 'yes', 'no' or 'always', not {decision!r}")
        if call_id not in self._decision_events and call_id not in self._decisions:
            raise ValueError(f"turn {self.turn_id} has no approval request for {call_id!r}")
        if call_id in self._decisions:
            return
        self._decisions[call_id] = decision
        waiter = self._decision_events.get(call_id)
        if waiter is not None:
            waiter.set()

    def interrupt(self, *, send_pending: bool = True) -> None:
        """Stop the turn as soon as possible; it ends with status ``interrupted``.

        A running tool's process group is killed; a streaming model response is
        dropped (partial text is journaled). Idempotent.

        Args:
            send_pending: start the next turn at once with the input still
                waiting (steering not yet delivered, queued text) — the REPL's
                Esc (DESIGN §7). False leaves it waiting, durable, for the next
                prompt.
        """
        self._interrupt_requested = True
        self._send_pending = self._send_pending and send_pending
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
        self._events.put(event)
        self.session._events.put(event)

    async def _await_decision(self, call_id: str) -> Decision:
        if call_id not in self._decisions:
            waiter = self._decision_events.setdefault(call_id, anyio.Event())
            await waiter.wait()
        return self._decisions[call_id]

    def _finish(self, outcome: TurnOutcome) -> None:
        self._outcome = outcome
        self._emit(outcome.event)
        self._events.close()
        self._done.set()


@final
class Session:
    """One session: its journal, inbox, settings and at most one running turn.

    Create with :meth:`Runtime.create_session` or :meth:`Runtime.open_session`;
    the session holds its lease until the runtime closes.
    """

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        journal: Journal,
        inbox: Inbox,
        lease: SessionLease,
        cwd: Path,
        config: ResolvedConfig,
        *,
        interactive: bool,
        provider: Provider | None = None,
        mount: MountHandle | None = None,
    ) -> None:
        self.runtime = runtime
        self.mount = mount if mount is not None else runtime.mounts.claim(session_id)
        self.session_id = session_id
        self.journal = journal
        self.inbox = inbox
        self.lease = lease
        self.cwd = cwd
        self.config = config
        self.interactive = interactive
        self.provider: Provider = provider or make_provider(config.provider)
        boundary = session_boundary(
            cwd,
            os.environ,
            mode=config.sandbox,
            add_dirs=config.add_dirs,
            state_roots=(runtime.store.root,),
            network=config.sandbox_network,
        )
        # One boundary for both: the file tools judge paths by it, the sandbox confines by it.
        self.sandbox = session_sandbox(boundary, environ=os.environ)
        self.tools = ToolRunner(
            cwd,
            env=tool_environment(os.environ, config.shell_environment),
            sandbox=self.sandbox,
        )
        self.secrets = (
            config.provider.api_key,
            *url_secrets(config.provider.base_url),
            *known_secrets(os.environ),
        )
        """What :func:`~mind.shell.redact.redact` masks in this session's
        messages and tool results: the API key, the base URL's secrets and
        every provider key in mind's environment."""
        self.always_allowed: set[str] = set()
        self.retry_policy = RetryPolicy(
            max_retries=config.max_retries, max_retry_s=config.max_retry_s
        )
        self.current: Turn | None = None
        self.mailbox = Mailbox()
        self._acknowledged: set[str] = settled_inputs(journal.records)
        """Ids no turn may take again: acknowledged by a terminal record, or dropped."""
        self.mailbox.restore(
            [(e.message_id, e.text, e.kind.value) for e in inbox.entries],
            acknowledged=self._acknowledged,
        )
        self.recovery: ev.SessionRecoveredEvent | None = None
        """What opening the session repaired (None for a new session)."""
        self._events = _EventBuffer()
        self._consuming = False
        self._dispositions: dict[str, Disposition] = {}

    @property
    def approval(self) -> ApprovalPolicy:
        """The session's approval policy."""
        return self.config.approval

    @property
    def busy(self) -> bool:
        """True while a turn is running."""
        return self.current is not None and not self.current.done

    @property
    def waiting(self) -> list[MailboxMessage]:
        """Accepted input not yet claimed by a turn, in order (shown under the prompt)."""
        return self.mailbox.waiting()

    def waiting_event(self) -> ev.InputWaitingEvent:
        """The ``input.waiting`` event for the input that waits now (may list none).

        ``first_line`` is the first non-empty line of each text, at most 120
        characters; ``accepted_at_ms`` comes from ``inbox.json``.
        """
        accepted = {e.message_id: e.accepted_at_ms for e in self.inbox.entries}
        return ev.InputWaitingEvent(
            session_id=self.session_id,
            messages=[
                ev.WaitingInput(
                    message_id=m.message_id,
                    kind=ev.WaitingKind(m.kind),
                    accepted_at_ms=accepted.get(m.message_id, 0),
                    first_line=first_line(m.text),
                )
                for m in self.mailbox.waiting()
            ],
            drop_command=f"mind inbox {self.session_id} --drop ID",
        )

    def drop(self, message_id: str) -> MailboxMessage:
        """Take back one waiting input for good (issue 7 item 11).

        The mailbox charts decide what can be dropped: a message waiting for
        a turn (``queued`` steering, ``next_turn``, or ``returned`` by a turn
        that failed or was aborted) — never one the running turn has claimed.
        The drop is durable before this returns: an ``input_dropped`` journal
        record (fsync) — so recovery filters the id like an acknowledgement
        and the model never sees the earlier ``user_message`` records of a
        failed turn — then ``inbox.json`` rewritten without it (fsync).

        Args:
            message_id: the message id, or a prefix matching exactly one
                message held (waiting or claimed).

        Returns:
            The dropped message (its text, e.g. for the REPL's editor).

        Raises:
            DropRefused: no such message, an ambiguous prefix, or claimed by
                the running turn; nothing was written.
            StorageError: a write failed (path, errno); the message still waits (and
                replays, unless the journal record made it).
        """
        held = [m for m in self.mailbox.messages() if m.state != "acknowledged"]
        matches = [m for m in held if m.message_id == message_id] or [
            m for m in held if message_id and m.message_id.startswith(message_id)
        ]
        if not matches:
            raise DropRefused(self.session_id, message_id, f"no waiting message {message_id!r}")
        if len(matches) > 1:
            names = ", ".join(m.message_id for m in matches[:5])
            raise DropRefused(
                self.session_id, message_id, f"{message_id!r} matches several: {names}"
            )
        mid = matches[0].message_id
        try:
            self.mailbox.check_drop(mid)
        except MailboxRefused as exc:
            detail = str(exc).removeprefix("mailbox: 'drop' ")
            raise DropRefused(self.session_id, message_id, detail) from exc
        self.journal.append(jr.InputDropped(seq=0, recorded_at_ms=0, message_id=mid), sync=True)
        self._acknowledged.add(mid)
        self.inbox.remove([mid])
        return self.mailbox.drop(mid)

    def park(self) -> None:
        """Another session is shown; this one stays hosted and its turn keeps running."""
        if self.mount.state == "attached":
            self.mount.park()

    def attach(self) -> None:
        """This session is shown again."""
        if self.mount.state == "parked":
            self.mount.attach()

    def started_event(self) -> ev.SessionStartedEvent:
        """The ``session.started`` event for this session."""
        return ev.SessionStartedEvent(session_id=self.session_id)

    # ---- input ---------------------------------------------------------------

    def send(
        self, text: str, *, kind: InputKind = "prompt", message_id: str | None = None
    ) -> InputReceipt:
        """Accept one input: durable in ``inbox.json`` first, then routed.

        Idle session: the input starts a turn (``started``), or — when older
        recovered input waits — a turn that takes the older input first
        (``pending``; it never jumps ahead). Running turn: ``steer`` input
        steers it while its mailbox is open (``steering``); anything else, or
        steering after the seal, waits for the next turn (``next_turn``).

        Args:
            text: the text, kept verbatim.
            kind: ``prompt`` | ``steer`` | ``queue``.
            message_id: caller-chosen id; sending the same id again is an
                idempotent success (``duplicate=True``).

        Raises:
            InputRefused: empty text, text with lone surrogates (``not_text``),
                a mailbox limit (20 steering messages), the 8 MiB inbox cap,
                or ``storage``: the inbox write failed (disk full, quota, I/O
                error; the StorageError is the ``__cause__``) or the journal
                failed earlier (reopen the session). Nothing was accepted;
                keep the text.
        """
        mid = message_id or new_id("msg")
        known = self._dispositions.get(mid)
        if known is not None or mid in self._acknowledged:
            return InputReceipt(message_id=mid, disposition=known or "started", duplicate=True)
        if not text.strip():
            raise InputRefused("empty", "the input is empty", message_id=mid)
        if has_lone_surrogates(text):
            raise InputRefused(
                "not_text",
                "the input holds lone surrogates (undecodable bytes); replace them first, "
                "e.g. with mind.conversation.replace_lone_surrogates",
                message_id=mid,
            )
        if self.journal.broken is not None:
            raise InputRefused(
                "storage",
                f"the session's journal could not be written ({self.journal.broken}); "
                f"free space, then reopen session {self.session_id} "
                "(Runtime.open_session: nothing accepted is lost)",
                message_id=mid,
            )
        self.mailbox.admit(mid, text, kind=kind)
        try:
            self.inbox.add(
                InboxEntry(
                    message_id=mid,
                    text=text,
                    kind=InboxKind(kind),
                    accepted_at_ms=time.time_ns() // 1_000_000,
                    recovered=False,
                )
            )
        except StorageError as exc:
            why = exc.errno_name or "I/O error"
            raise InputRefused(
                "storage",
                f"could not save the input to {exc.path} ({why}); free space and send it again",
                message_id=mid,
            ) from exc
        faults.boundary("after_inbox_write")
        routed = self.mailbox.enqueue(mid, text, kind=kind)
        disposition: Disposition
        if self.busy:
            disposition = routed
        else:
            older = len(self.mailbox.waiting()) > 1
            self._start_turn()
            disposition = "pending" if older else "started"
        self._dispositions[mid] = disposition
        self._events.put(
            ev.InputAcceptedEvent(message_id=mid, disposition=ev.Disposition(disposition))
        )
        return InputReceipt(message_id=mid, disposition=disposition)

    def steer(self, text: str, *, message_id: str | None = None) -> InputReceipt:
        """:meth:`send` with ``kind="steer"``: reach the running turn if it still listens."""
        return self.send(text, kind="steer", message_id=message_id)

    def queue(self, text: str, *, message_id: str | None = None) -> InputReceipt:
        """:meth:`send` with ``kind="queue"``: wait for the next turn."""
        return self.send(text, kind="queue", message_id=message_id)

    def submit(self, text: str, *, message_id: str | None = None) -> Turn:
        """Start a turn for ``text`` and return its handle at once.

        Raises:
            SessionBusyError: a turn of this session is still running (use
                :meth:`steer` or :meth:`queue`).
            InputRefused: as :meth:`send`.
        """
        if self.busy:
            raise SessionBusyError(self.session_id, "a turn is already running")
        self.send(text, kind="prompt", message_id=message_id)
        assert self.current is not None
        return self.current

    def resume_pending(self) -> Turn | None:
        """Start a turn with the input that waits (recovered after a crash,
        or returned by a failed turn), if any and if idle."""
        if self.busy or not self.mailbox.waiting():
            return None
        return self._start_turn()

    async def run(self, text: str) -> TurnOutcome:
        """Submit ``text`` and wait for the end of the turn, dropping events."""
        turn = self.submit(text)
        async for _ in turn:
            pass
        return turn.outcome

    async def events(self) -> AsyncIterator[ev.Event]:
        """Every event of this session (all turns, accepted inputs), in order,
        until the session is idle: no turn running and none about to start.

        Raises:
            RuntimeError: another ``events()`` iteration of this session is
                still running (one consumer at a time; a second would silently
                steal events).
        """
        if self._consuming:
            raise RuntimeError(f"session {self.session_id}: events() already has a consumer")
        self._consuming = True
        try:
            while True:
                if not self.busy and not self._events._items:
                    return
                event = await self._events.get()
                if event is None:
                    return
                yield event
        finally:
            self._consuming = False

    # ---- the turn ------------------------------------------------------------

    def _start_turn(self) -> Turn:
        # Claiming happens here, synchronously, so input sent right after
        # this call already sees an open mailbox.
        turn = Turn(self, new_id("turn"), self.mailbox.open_turn())
        self.current = turn
        self.runtime._spawn(self._run_turn, turn)
        return turn

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
                # A broken journal: recovery closes the calls when the session reopens.
                with contextlib.suppress(StorageError):
                    self._close_open_calls(turn, ABORTED_OUTPUT, ABORTED_UNSTARTED_OUTPUT)
                machine.abort()
            self._end(turn, machine, None)
            raise
        except StorageError as exc:  # a journal write failed: disk full, quota, I/O error
            if not machine.is_terminal:
                machine.fail()
            turn._storage_error = exc
            failure = storage_failure(exc, self.session_id)
        except ScriptError as exc:  # the offline script cannot answer
            if not machine.is_terminal:
                machine.fail()
            failure = ev.Failure(kind=ev.FailureKind.internal, message=f"scripted provider: {exc}")
        except Exception as exc:  # a bug or an I/O failure: the turn still gets its terminal
            if not machine.is_terminal:
                machine.fail()
            # The text of an unexpected exception may carry a URL or a key.
            text = redact(f"internal error: {exc}", self.secrets)
            failure = ev.Failure(kind=ev.FailureKind.internal, message=text)
        if not machine.is_terminal:  # only an interrupt leaves the loop without a terminal
            self._close_open_calls(turn, INTERRUPTED_OUTPUT, INTERRUPTED_UNSTARTED_OUTPUT)
            machine.interrupt()
        self._end(turn, machine, failure)

    def _journal_inputs(self, turn: Turn, messages: list[MailboxMessage], *, sync: bool) -> None:
        for i, msg in enumerate(messages):
            self.journal.append(
                jr.UserMessage(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id=turn.turn_id,
                    message_id=msg.message_id,
                    text=msg.text,
                    kind=jr.Kind(msg.kind if msg.kind in ("prompt", "steer", "queue") else "queue"),
                ),
                sync=sync and i == len(messages) - 1,
            )

    def _begin(self, turn: Turn) -> None:
        """Make the turn's start and its inputs durable (fsync) before any model request."""
        self.journal.append(
            jr.TurnStarted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                provider=self.provider.name,
                model=self.config.provider.model,
                approval=jr.Approval(self.approval),
                tool_starts=True,
            ),
            sync=not turn.inputs,
        )
        self._journal_inputs(turn, turn.inputs, sync=True)
        faults.boundary("after_turn_started")
        self.runtime.store.index.note(
            self.session_id,
            title=turn.inputs[0].text if turn.inputs else None,
            status="running",
        )
        turn._emit(ev.TurnStartedEvent(turn_id=turn.turn_id))

    def _end(
        self,
        turn: Turn,
        machine: TurnMachine,
        failure: ev.Failure | None,
    ) -> None:
        """Write the one terminal record (fsync), then clean the inbox, then
        publish ``turn.completed`` and start the next turn if input waits.

        Acknowledged (consumed for good): the inputs of a completed or
        interrupted turn, and of one that failed for a reason a replay would
        meet again. Not acknowledged (replayed on the next start): aborted
        turns, transient failures and an answer cut at the output cap — the
        rule is :func:`mind.machines.turn.acknowledges`.
        """
        usage = turn._usage
        assert machine.status is not None
        status = ev.TurnStatus(machine.status)
        acknowledge = acknowledges(status.value, failure.kind.value if failure else None)
        faults.boundary("before_terminal")
        # The ids the record will acknowledge, in order; the mailbox settles
        # only once the record is durable (a failed write acknowledges nothing).
        acknowledged = [m.message_id for m in self.mailbox.claimed()] if acknowledge else []
        extra: dict[str, Any] = {}
        if failure is not None:
            extra["failure"] = jr.Failure(
                kind=jr.FailureKind(failure.kind.value), message=failure.message
            )
        try:
            self.journal.append(
                jr.TurnCompleted(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id=turn.turn_id,
                    status=jr.TurnStatus(status.value),
                    usage=jr.Usage(
                        input_tokens=usage.input_tokens, output_tokens=usage.output_tokens
                    ),
                    acknowledged=acknowledged,
                    **extra,
                ),
                sync=True,
            )
        except StorageError as exc:
            # No durable terminal: the turn stays open on disk and recovery
            # closes it when the session is reopened (issue #8 item 6).
            turn._storage_error = turn._storage_error or exc
            status, acknowledged = ev.TurnStatus.failed, []
            failure = failure if failure and failure.kind.value == "storage" else None
            failure = failure or storage_failure(exc, self.session_id)
        self.mailbox.end_turn(acknowledge=bool(acknowledged))
        faults.boundary("after_terminal")
        self.runtime.store.index.note(self.session_id, status=status.value)
        self._acknowledged.update(acknowledged)
        try:
            self.inbox.remove(acknowledged)
        except StorageError as exc:
            # The terminal record is durable, so the inputs are consumed; the
            # stale entries are filtered out when the session is next opened.
            log.warning("%s", exc)
        self.mailbox.forget(acknowledged)
        done = ev.TurnCompletedEvent(
            turn_id=turn.turn_id,
            status=status,
            usage=ev.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
            **({"failure": failure} if failure is not None else {}),
        )
        turn._finish(
            TurnOutcome(event=done, final_text=turn._final_text, error=turn._storage_error)
        )
        runs_on = status == ev.TurnStatus.completed or (
            status == ev.TurnStatus.interrupted and turn._send_pending
        )
        if runs_on and self.mailbox.waiting() and not self.runtime.closing:
            self._start_turn()
        elif self.mailbox.waiting():
            # Input stays waiting after this turn: say so, with how to drop
            # it, or it goes silently into the next turn (issue 7 item 11).
            self._events.put(self.waiting_event())

    async def _loop(self, turn: Turn, machine: TurnMachine) -> ev.Failure | None:
        """Model rounds and tool calls until the turn is sealed or fails.

        Returns the failure of a failed turn (None when sealed ``completed``).
        Raises the cancellation of ``turn._scope`` on interrupt.
        """
        rounds = 0
        first_failure_at: float | None = None  # monotonic s: the retry time starts here
        output_used = 0  # bytes of model output in this turn's journaled rounds
        while True:
            rounds += 1
            if rounds > DEFAULT_MAX_ROUNDS:
                machine.fail()
                return ev.Failure(
                    kind=ev.FailureKind.internal,
                    message=f"the turn exceeded {DEFAULT_MAX_ROUNDS} model rounds",
                )
            if rounds > 1:
                # A model-request boundary after the tool results: steering
                # sent meanwhile reaches the model now, never between a call
                # and its result.
                self._journal_inputs(turn, self.mailbox.drain(), sync=False)
            request = ModelRequest(
                model=self.config.provider.model,
                system=SYSTEM_PROMPT.format(cwd=self.cwd),
                messages=build_messages(self.journal.records),
                tools=tool_specs(),
                # The turn's cap, less what earlier rounds streamed (issue #8 item 5).
                max_output_bytes=max(0, self.config.max_output_bytes - output_used),
            )
            done: StreamDone | None = None
            partial: list[str] = []
            try:
                opened = False
                turn.model_quiet_since = time.monotonic()
                async for item in self.provider.stream(request):
                    turn.model_quiet_since = time.monotonic()
                    if not opened:
                        opened = True
                        machine.stream_opened()
                    if isinstance(item, TextDelta):
                        partial.append(item.text)
                        turn._emit(ev.MessageDeltaEvent(turn_id=turn.turn_id, text=item.text))
                    elif isinstance(item, ReasoningDelta):
                        turn._emit(ev.ReasoningDeltaEvent(turn_id=turn.turn_id, text=item.text))
                    elif isinstance(item, StreamDone):
                        # Every string of the round, masked once: what is
                        # journaled, shown and answered (the call ids too).
                        done = redact_round(item, self.secrets)
                if done is None:
                    raise ProviderError("stream_cut", detail="stream ended without a final event")
            except ProviderError as exc:
                turn.model_quiet_since = None
                failure = ev.Failure(kind=ev.FailureKind(exc.kind), message=exc.message)
                turn.failure_detail = exc.detail[:500]
                now = time.monotonic()
                first_failure_at = now if first_failure_at is None else first_failure_at
                delay_s = self.retry_policy.delay_s(machine.retries_used + 1, exc.retry_after_s)
                in_time = self.retry_policy.within_time(now - first_failure_at, delay_s)
                if machine.round_failed(transient=exc.transient, in_time=in_time):
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
                turn.model_quiet_since = None
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
            finally:
                turn.model_quiet_since = None  # also on any other error (the turn fails)
            turn._usage = turn._usage + done.usage
            output_used += output_bytes(done)
            if not within_output_cap(output_used, self.config.max_output_bytes):
                # A provider that does not stop at the cap itself (the
                # scripted one): the round is not kept and its calls never run.
                machine.round_failed(transient=False)
                return ev.Failure(
                    kind=ev.FailureKind.output_limit, message=CANONICAL_MESSAGES["output_limit"]
                )
            try:
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
            except JournalRecordTooLarge as exc:
                # An answer too large to keep is not an answer: the round
                # fails like one past the output cap, and the input waits.
                machine.round_failed(transient=False)
                turn.failure_detail = exc.detail
                return ev.Failure(kind=ev.FailureKind.output_limit, message=exc.failure_message())
            if done.text:
                turn._final_text = done.text
                turn._emit(ev.MessageCompletedEvent(turn_id=turn.turn_id, text=done.text))
            faults.boundary("after_model_round")
            if not done.tool_calls:
                machine.round_final()
                # Drain-or-seal is one step with no await inside: either the
                # steering that arrived is claimed (another round answers it)
                # or the mailbox is sealed and later input waits for the next
                # turn (seed 000 ActiveTurnMailbox.drainOrSeal).
                steering = self.mailbox.drain_or_seal()
                if steering:
                    self._journal_inputs(turn, steering, sync=False)
                    machine.steering_claimed()
                    continue
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
        faults.boundary("after_tool_call")
        status, output = await self._execute(turn, machine, call)
        # Behind the sandbox: mind's own keys never enter a result (journal, model).
        outcome = (status, redact(output, self.secrets, shapes=False))
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
        faults.boundary("after_tool_result")
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
        decision = tool_decision(
            self.approval,
            call.name,
            args,
            cwd=str(self.cwd),
            crossing=self._crossing,
            sandbox=self.config.sandbox,
            sandbox_available=self.sandbox.backend != "none",
        )
        if decision.action == "refuse":
            return "denied", decision.reason or "refused"
        reason = decision.reason if decision.action == "ask" else None
        sandboxed = call.name == "shell" and decision.sandboxed
        run_mode: SandboxMode | None = decision.mode if call.name == "shell" else None
        approved: list[FileChange] | None = None
        key = _always_key(call.name, args, sandboxed)
        if crossed := crossing_reason(call.name, args, cwd=str(self.cwd), crossing=self._crossing):
            key += "|" + crossed  # "always" inside never covers a later boundary crossing
        if reason is not None and key not in self.always_allowed:
            if not self.interactive:
                # The policy names only flags that really allow it (issue 8 review).
                return "denied", (
                    f"Refused without running: this call needs approval ({reason}) and this "
                    f"session cannot ask (non-interactive, approval policy {self.approval}). "
                    "Do not retry it; tell the user what you wanted to run. "
                    f"{decision.remedy or ''}"
                ).rstrip()
            # What the person approves, read from the files now: a diff for
            # file tools, never only a path (issue 7 §7).
            changes, problem = await self.tools.preview(call.name, args)
            if changes and problem is None:
                approved = changes  # what is written must be what was shown
            decision_text = await self._ask(
                turn, machine, call, args, reason, changes, problem, sandboxed
            )
            if decision_text != "yes" and decision_text != "always":
                return "denied", "The user refused this tool call; it was not run."
            if decision_text == "always":
                self.always_allowed.add(key)
        # Durable before the tool starts: a call without this record provably
        # never ran (its synthetic result after an interrupt or crash says so).
        self.journal.append(
            jr.ToolStarted(
                seq=0, recorded_at_ms=0, turn_id=turn.turn_id, call_id=call.call_id, name=call.name
            ),
            sync=True,
        )
        # Past this point a call with a reason was approved (now or "always"):
        # the file tools may then cross the boundary (never into a denied root).
        result: ToolOutcome = await self.tools.run(
            call.name,
            args,
            approved,
            consent=reason is not None,
            sandboxed=sandboxed,
            sandbox_mode=run_mode,
        )
        if call.name == "shell" and sandboxed:
            offer = rerun_reason(self.approval, self.config.sandbox, result.status, result.output)
            if offer is not None and self.interactive:
                # "always" here covers this exact command outside the sandbox.
                outside_key = _always_key(call.name, args, sandboxed=False)
                answer: Decision = "always"
                if outside_key not in self.always_allowed:
                    answer = await self._ask(turn, machine, call, args, offer, [], None, False)
                if answer == "always":
                    self.always_allowed.add(outside_key)
                if answer == "yes" or answer == "always":
                    result = await self.tools.run(call.name, args, sandboxed=False)
        return result.status, result.output

    def _crossing(self, path: str, access: Access) -> Refusal | None:
        """The policy's view of where a file tool path lands (kernel-resolved)."""
        return self.tools.boundary_reason(path, access)

    async def _ask(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        args: dict[str, Any],
        reason: str,
        changes: list[FileChange],
        problem: str | None,
        sandboxed: bool,
    ) -> Decision:
        """Publish one approval request and wait for the person's answer.

        The card says where a shell command will run (inside the session's
        sandbox or OUTSIDE it); the event carries it as ``sandbox``.
        """
        machine.approval_needed()
        text, text_format = approval_text(call.name, args, changes, problem)
        cut = cut_for_display(text)
        where: ev.Sandbox | msgspec.UnsetType = msgspec.UNSET
        if call.name == "shell":
            mode = self.config.sandbox
            if sandboxed and mode != "danger-full-access":
                where = ev.Sandbox(mode)
                reason = f"{reason} (runs in the {mode} sandbox)"
            else:
                where = ev.Sandbox.outside
                reason = f"{reason} (runs OUTSIDE the sandbox)"
        # A call may be asked twice (run, then re-run outside after a sandbox
        # denial): each request waits for its own answer.
        turn._decisions.pop(call.call_id, None)
        turn._decision_events[call.call_id] = anyio.Event()
        turn._emit(
            ev.ApprovalRequestedEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                arguments=_display_arguments(call.arguments),
                reason=reason,
                text=text,
                text_format=ev.TextFormat(text_format),
                head_chars=cut.head_chars,
                tail_chars=cut.tail_chars,
                hidden_chars=cut.hidden_chars,
                hidden_lines=cut.hidden_lines,
                sandbox=where,
            )
        )
        decision = await turn._await_decision(call.call_id)
        machine.approval_answered()
        return decision

    def _close_open_calls(self, turn: Turn, output: str, unstarted: str) -> None:
        """Synthetic results for the calls the turn leaves unanswered, each
        also published as a ``tool.result`` event.

        Args:
            output: the text for a call that may have run (a start is recorded).
            unstarted: the text for a call that provably never ran; a call
                still waiting for its approval gets
                :data:`INTERRUPTED_UNAPPROVED_OUTPUT` instead.
        """
        asked = {c for c in turn._decision_events if c not in turn._decisions}

        def text(call_id: str, started: bool) -> str:
            if started:
                return output
            return INTERRUPTED_UNAPPROVED_OUTPUT if call_id in asked else unstarted

        for result in close_open_calls(self.journal, turn.turn_id, text):
            turn._emit(
                ev.ToolResultEvent(
                    turn_id=turn.turn_id,
                    call_id=result.call_id,
                    status=ev.ToolStatus.interrupted,
                    output=result.output,
                )
            )


def _discard_new_session(directory: Path) -> None:
    """Remove the directory of a session whose creation failed (disk full, a
    refused lease…), so no ``empty`` session is listed once space is freed.
    Called only for a directory this process made for a brand-new id, after
    its lease and mount claim were given back; best effort (a leftover is
    listed ``empty``, as after a crash)."""
    try:
        shutil.rmtree(directory)
    except OSError as exc:
        log.warning("could not remove the failed new session %s: %s", directory, exc)


def storage_failure(exc: StorageError, session_id: str) -> ev.Failure:
    """The ``storage`` failure of a turn whose journal write failed: one line
    naming the file and the errno, and how to go on."""
    why = exc.errno_name or "I/O error"
    return ev.Failure(
        kind=ev.FailureKind.storage,
        message=f"could not write {exc.path} ({why}); the input is kept: free space, "
        f"then resume session {session_id}",
    )


def output_bytes(done: StreamDone) -> int:
    """UTF-8 bytes of a round's model output: answer text, reasoning and tool
    arguments (what ``max_output_mib`` caps per turn)."""
    parts = [done.text, done.reasoning, *(c.arguments for c in done.tool_calls)]
    return sum(len(p.encode("utf-8", "replace")) for p in parts)


def _always_key(name: str, args: Mapping[str, Any], sandboxed: bool = False) -> str:
    """What an "always" answer covers: the exact command for ``shell``
    (approving ``rm x`` must not approve ``rm -rf /``) and where it runs
    (approving it in the sandbox must not approve it outside), the tool
    otherwise."""
    if name == "shell":
        where = "sandboxed" if sandboxed else "outside"
        return f"shell:{where}:" + json.dumps(args.get("command"), sort_keys=True)
    return name


def _display_arguments(raw: str) -> Any:
    """Arguments for events: the parsed JSON value when valid, else the raw text
    (lone surrogates replaced: an event must always encode as UTF-8)."""
    try:
        return without_lone_surrogates(json.loads(raw or "{}"))
    except ValueError:
        return replace_lone_surrogates(raw)


@final
class Runtime:
    """Hosts sessions of one state root and runs their turns in a task group.

    Use :meth:`open` as an async context manager; leaving it cancels running
    turns (they end ``aborted``: their inputs replay next time), closes
    providers and journals, and releases the session leases.
    """

    def __init__(self, store: Store, tg: anyio.abc.TaskGroup) -> None:
        self.store = store
        self._tg = tg
        self._sessions: dict[str, Session] = {}
        self.closing = False
        self.mounts = MountLedger(store.root)
        """This process's record in ``session-mounts.json`` (seed 002): which
        sessions it hosts, published for other mind processes to see."""

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
            tg.start_soon(rt._republish_forever)
            try:
                yield rt
            except BaseException as exc:  # re-raised below, unwrapped by the task group
                body_error = exc
            finally:
                rt.closing = True
                tg.cancel_scope.cancel()
        for s in rt._sessions.values():
            with anyio.CancelScope(shield=True):
                await s.provider.aclose()
            s.journal.close()
            s.lease.release()
        try:
            rt.mounts.close()  # normal exit clears this process's record (seed 002 §3.4)
        except MountRefused as exc:  # a dead pid's record is ignored by readers anyway
            log.warning("could not clear this process's session mounts: %s", exc)
        store.close()
        if body_error is not None:
            raise body_error

    def _close_broken(self, session: Session) -> None:
        """Stop hosting a session whose journal refuses appends, so it can be
        opened afresh: the journal is closed before the lease and the mount
        claim are given back (no write may follow the claim's release, seed
        002 §3.4); the provider is closed in the background."""
        del self._sessions[session.session_id]
        session.journal.close()
        session.lease.release()
        if not session.mount.release():
            log.warning("could not clear session %s from session mounts", session.session_id)
        self._tg.start_soon(session.provider.aclose)

    def _spawn(self, fn: Callable[[Turn], Any], turn: Turn) -> None:
        self._tg.start_soon(fn, turn)

    async def _republish_forever(self) -> None:
        """Rewrite this process's ledger record every 15 s (seed 002 §4), so a
        record lost to a concurrent writer's crash comes back. Runs in the
        runtime's task group: it never keeps the process alive."""
        while True:
            await anyio.sleep(PUBLISH_INTERVAL_S)
            try:
                await anyio.to_thread.run_sync(self.mounts.republish)
            except MountRefused as exc:  # busy or damaged ledger: try again next time
                log.warning("could not republish session mounts: %s", exc)

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions this runtime hosts, by id (attached or parked)."""
        return dict(self._sessions)

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
        """Create a new session (lease, journal + ``session_started``) and host it.

        Args:
            cwd: working directory, frozen for the session (made absolute).
            config: provider settings and approval policy.
            session_id: caller-chosen id (default: a fresh UUIDv7).
            interactive: whether approvals can be asked (False: refused).

        Raises:
            SessionError: a session with that id already exists.
            SessionOccupiedError: another live process is creating it.
            ValueError: the id is not a safe directory name.
        """
        sid = session_id or new_session_id()
        directory = self.store.session_dir(sid)
        # A bad script or provider setting fails here, before anything is written.
        provider = make_provider(config.provider)
        existed = os.path.lexists(directory)  # only a directory made here is removed on failure
        mount = self.mounts.claim(sid, new_session=True)
        try:
            lease = SessionLease.acquire(directory / "lease", sid)  # creates it private
        except BaseException:
            mount.abandon()
            if not existed:
                _discard_new_session(directory)
            raise
        created: Journal | None = None
        try:
            path = directory / "journal.jsonl"
            if path.exists():
                raise SessionError(sid, "already exists")
            journal = created = Journal.open(path, create=True, session_id=sid)
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
            inbox = Inbox.open(directory / "inbox.json", acknowledged=())
        except BaseException:
            if created is not None:
                created.close()
            lease.release()
            mount.abandon()
            if not existed:
                _discard_new_session(directory)
            raise
        self.store.index.note(sid, cwd=str(cwd.resolve()))
        session = Session(
            self,
            sid,
            journal,
            inbox,
            lease,
            cwd.resolve(),
            config,
            interactive=interactive,
            provider=provider,
            mount=mount,
        )
        mount.settle(attached=True)
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
        provider: Provider | None = None,
    ) -> Session:
        """Open an existing session (or create it when ``create``), recovering it.

        Startup order (seed 000 SessionRuntime.initialize, issue 3 §4): take
        the lease; give each orphan tool call a durable synthetic result (it
        is never re-run); close each unterminated turn as ``aborted``; open
        the inbox filtered by the journal's acknowledgements (rewriting the
        file when a crash left acknowledged input in it) — what remains
        is recovered input that replays, in order, with the next turn
        (:meth:`Session.resume_pending` or the next :meth:`Session.send`).
        A failure part-way releases the lease. Re-opening a session this
        runtime already hosts returns the same handle — unless its journal
        is broken (a write failed: disk full, quota, I/O error) and no turn
        runs: then that handle is closed (journal, lease, mount claim given
        back, in that order) and the session is opened afresh by these same
        rules, so after space is freed it goes on in this process with
        nothing lost (issue #8 item 6). ``provider`` replaces
        the one ``config`` describes (``mind inbox --drop`` opens a session
        that runs no turn).

        Raises:
            SessionError: no such session and not ``create``.
            SessionOccupiedError: another live process holds the session.
            JournalCorruptError: the journal is damaged (path and line named).
            InboxCorruptError: the inbox is damaged or oversized (path named).
        """
        hosted = self._sessions.get(session_id)
        if hosted is not None:
            if hosted.journal.broken is None or hosted.busy:
                return hosted
            self._close_broken(hosted)
        directory = self.store.session_dir(session_id)
        path = directory / "journal.jsonl"
        if not path.exists():
            if create:
                return self.create_session(
                    cwd=cwd or Path.cwd(),
                    config=config,
                    session_id=session_id,
                    interactive=interactive,
                )
            raise SessionError(session_id, "no such session")
        provider = provider or make_provider(config.provider)
        mount = self.mounts.claim(session_id)
        try:
            lease = SessionLease.acquire(directory / "lease", session_id)
        except BaseException:
            mount.abandon()
            raise
        try:
            journal = Journal.open(path, session_id=session_id)
            aborted, completed, synthetic = recover_journal(journal)
            acknowledged = settled_inputs(journal.records)
            inbox = Inbox.open(directory / "inbox.json", acknowledged=acknowledged)
            # The file too: a crash after the terminal record, before the
            # cleanup, left acknowledged input in it (issue 3 §3).
            inbox.remove(acknowledged)
        except BaseException:
            lease.release()
            mount.abandon()
            raise
        started = next((r for r in journal.records if isinstance(r, jr.SessionStarted)), None)
        session_cwd = Path(started.cwd) if started else (cwd or Path.cwd())
        session = Session(
            self,
            session_id,
            journal,
            inbox,
            lease,
            session_cwd,
            config,
            interactive=interactive,
            provider=provider,
            mount=mount,
        )
        mount.settle(attached=True)
        session.recovery = ev.SessionRecoveredEvent(
            session_id=session_id,
            aborted_turns=aborted,
            completed_turns=completed,
            synthetic_results=synthetic,
            replayed_inputs=len(inbox.entries),
        )
        self._sessions[session_id] = session
        return session


INTERRUPTED_OUTPUT = (
    "[interrupted by the user: the call was stopped (its process group killed) and was not "
    "run again]"
)
INTERRUPTED_UNAPPROVED_OUTPUT = "[interrupted by the user before it was approved: it never ran]"
INTERRUPTED_UNSTARTED_OUTPUT = "[interrupted by the user before it started: it never ran]"
ABORTED_OUTPUT = "[the turn was aborted while this call was pending; it was not run again]"
ABORTED_UNSTARTED_OUTPUT = "[the turn was aborted before this call started: it never ran]"
CRASHED_OUTPUT = (
    "[mind stopped while this call was pending: whether it ran to the end is unknown (it may "
    "have completed); it was not run again — check its effects before repeating it]"
)
CRASHED_UNSTARTED_OUTPUT = "[mind stopped before this call started: it never ran]"
"""Outputs of synthetic tool results (the model reads them; never a re-run).
The ``*_UNSTARTED`` / ``UNAPPROVED`` texts are used only when the journal
proves the call never started (:func:`mind.history.unstarted_calls`)."""


def close_open_calls(
    journal: Journal, turn_id: str, output: str | Callable[[str, bool], str]
) -> list[jr.ToolResult]:
    """Give every unanswered tool call of ``turn_id`` a durable synthetic
    ``interrupted`` result (never re-running it).

    Args:
        journal: the session's journal (appended to).
        turn_id: the turn whose calls are closed.
        output: the result text, or ``output(call_id, started)`` where
            ``started`` is False only when the journal proves the call never
            started (no ``tool_started`` record in a turn that records them).

    Returns:
        The records written, in call order.
    """
    unstarted = unstarted_calls(journal.records, turn_id)
    answered = {r.call_id for r in journal.records if isinstance(r, jr.ToolResult)}
    written: list[jr.ToolResult] = []
    for rec in list(journal.records):
        if isinstance(rec, jr.ModelRound) and rec.turn_id == turn_id:
            for call in rec.tool_calls:
                if call.call_id in answered:
                    continue
                answered.add(call.call_id)
                result = journal.append(
                    jr.ToolResult(
                        seq=0,
                        recorded_at_ms=0,
                        turn_id=turn_id,
                        call_id=call.call_id,
                        name=call.name,
                        status=jr.ToolStatus.interrupted,
                        output=(
                            output
                            if isinstance(output, str)
                            else output(call.call_id, call.call_id not in unstarted)
                        ),
                        synthetic=True,
                    )
                )
                assert isinstance(result, jr.ToolResult)
                written.append(result)
    return written


def settled_inputs(records: Iterable[jr.JournalRecord]) -> set[str]:
    """Input ids no turn may take again: acknowledged by a ``turn_completed``,
    or dropped (``input_dropped``). ``inbox.json`` is filtered by them on open."""
    settled: set[str] = set()
    for r in records:
        if isinstance(r, jr.TurnCompleted):
            settled.update(r.acknowledged)
        elif isinstance(r, jr.InputDropped):
            settled.add(r.message_id)
    return settled


def first_line(text: str, limit: int = 120) -> str:
    """The first non-empty line of ``text``, stripped, cut to ``limit`` characters (with …)."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def recover_journal(journal: Journal) -> tuple[int, int, int]:
    """Close what a crash left open (seed 000 PersistentStore.recoverInterruptedTurn).

    For each turn without a terminal record: first a durable synthetic result
    for each orphan tool call (:data:`CRASHED_OUTPUT`, or
    :data:`CRASHED_UNSTARTED_OUTPUT` when the journal proves it never
    started), then the terminal:

    - ``completed``, acknowledging the turn's journaled inputs, when its last
      model round was a final answer (text, no tool calls): the answer was
      already given, so asking the model again would answer twice (seed 000:
      a final-ready turn is closed by a host-owned receipt, never by calling
      the provider again);
    - otherwise ``aborted`` with no acknowledgement: its inputs replay.

    Idempotent.

    Returns:
        ``(aborted_turns, completed_turns, synthetic_results)``.
    """
    started = [r.turn_id for r in journal.records if isinstance(r, jr.TurnStarted)]
    closed = {r.turn_id for r in journal.records if isinstance(r, jr.TurnCompleted)}
    aborted = completed = synthetic = 0
    for turn_id in started:
        if turn_id in closed:
            continue
        synthetic += len(
            close_open_calls(
                journal,
                turn_id,
                lambda _, started: CRASHED_OUTPUT if started else CRASHED_UNSTARTED_OUTPUT,
            )
        )
        rounds = [
            r for r in journal.records if isinstance(r, jr.ModelRound) and r.turn_id == turn_id
        ]
        final_ready = bool(rounds) and not rounds[-1].tool_calls and bool(rounds[-1].text.strip())
        inputs = [
            r.message_id
            for r in journal.records
            if isinstance(r, jr.UserMessage) and r.turn_id == turn_id
        ]
        usage = jr.Usage(
            input_tokens=sum(r.usage.input_tokens for r in rounds),
            output_tokens=sum(r.usage.output_tokens for r in rounds),
        )
        journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                status=jr.TurnStatus.completed if final_ready else jr.TurnStatus.aborted,
                usage=usage,
                acknowledged=list(dict.fromkeys(inputs)) if final_ready else [],
            ),
            sync=True,
        )
        if final_ready:
            completed += 1
        else:
            aborted += 1
    return aborted, completed, synthetic


__all__ = [
    "ABORTED_OUTPUT",
    "ABORTED_UNSTARTED_OUTPUT",
    "CRASHED_OUTPUT",
    "CRASHED_UNSTARTED_OUTPUT",
    "INTERRUPTED_OUTPUT",
    "INTERRUPTED_UNAPPROVED_OUTPUT",
    "INTERRUPTED_UNSTARTED_OUTPUT",
    "Decision",
    "Disposition",
    "InputKind",
    "InputReceipt",
    "Runtime",
    "Session",
    "Turn",
    "TurnOutcome",
    "close_open_calls",
    "first_line",
    "recover_journal",
    "settled_inputs",
]
