"""The turn loop: model rounds, tool calls, retries, drain-or-seal, and the
one terminal record of a turn.

Size: over 500 lines because the loop performs every effect the turn chart
names, and those share the turn's durable-record order (docs/design/turn.md
§2); one tool call already lives in ``tool_calls``; sampling one round
(``_sample``, the frozen request) is the part to move next.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

import anyio
import msgspec

from mind.context.compaction import turn_input_bytes
from mind.context.instructions import describe_sources
from mind.context.tool_output import limits_for_window
from mind.context.usage import estimate_tokens, event_usage, journal_usage, refused_window
from mind.conversation import (
    Message,
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    TextDelta,
    ToolCall,
)
from mind.conversation import Usage as RoundUsage
from mind.effects.tools import tool_specs
from mind.errors import (
    IllegalTransition,
    JournalError,
    JournalRecordTooLarge,
    ProviderError,
    ScriptError,
    StorageError,
)
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.history import build_messages
from mind.machines.mailbox import MailboxMessage
from mind.machines.turn import (
    FAIL_SAFE,
    AnnounceWaiting,
    Compact,
    DrainOrSeal,
    DrainSteering,
    Effect,
    LeaveForRecovery,
    RebuildRequest,
    RedriveCalls,
    RunTools,
    StartBackoff,
    StartNextTurn,
    TurnMachine,
    WriteTerminal,
)
from mind.machines.turn_replay import ResumePlan, recovered_closing
from mind.shell import compaction, faults
from mind.shell.recovery import (
    ABORTED_OUTPUT,
    ABORTED_UNSTARTED_OUTPUT,
    INTERRUPTED_AT_RERUN_OUTPUT,
    INTERRUPTED_OUTPUT,
    INTERRUPTED_UNAPPROVED_OUTPUT,
    INTERRUPTED_UNSTARTED_OUTPUT,
    close_open_calls,
)
from mind.shell.redact import redact, redact_round
from mind.shell.round_warnings import finish_warning
from mind.shell.tool_calls import ToolCalls, call_event, result_event
from mind.shell.turn_handle import Turn, TurnOutcome
from mind.shell.turn_resume import (
    collected_calls,
    redrive_round,
    resumed_event,
    resumed_machine,
)

if TYPE_CHECKING:
    from mind.shell.session import Session

log = logging.getLogger("mind.runtime")


def request_overhead_bytes(session: Session) -> int:
    """UTF-8 bytes every model request of ``session`` carries besides its
    messages (the instructions and the tool specs, JSON-encoded): what a
    compaction adds to its estimate of the context it leaves."""
    system = session.instructions.system_prompt
    return len(system.encode("utf-8", "replace")) + len(msgspec.json.encode(tool_specs()))


@final
class TurnDriver:
    """Drives one turn of a session from its start to its one terminal record."""

    def __init__(self, session: Session, resume: ResumePlan | None = None) -> None:
        self.session = session
        self.resume = resume
        """The crashed turn this driver resumes (docs/design/recovery.md §8;
        :mod:`mind.shell.turn_resume`), or None: a new turn."""
        self.calls = ToolCalls(session)
        self._first_failure_at: float | None = None
        """Monotonic seconds of the turn's first failed attempt: its total
        retry time (``max_retry_seconds``) counts from here."""

    async def run(self, turn: Turn) -> None:
        """Drive ``turn`` to its one terminal record.

        The turn machine decides every branch (round outcome, retry, approval,
        drain-or-seal, which terminal, what it acknowledges, whether the next
        turn starts); this loop sends it facts and performs the effects it
        names. A transition a chart refuses (:class:`~mind.errors.IllegalTransition`
        from the turn or the mailbox chart) is a bug in mind, never the person's: the
        turn fails safe — it ends ``aborted``, so its inputs (steering it
        claimed included) are not acknowledged and replay on the next start
        — and the chart, state and event are logged.
        """
        machine = (
            TurnMachine(retry=self.session.retry_policy, max_rounds=self.session.config.max_rounds)
            if self.resume is None
            else resumed_machine(self.session, self.resume)
        )
        for observer in self.session.turn_observers:
            machine.observe(observer)
        terminal: WriteTerminal | LeaveForRecovery
        try:
            terminal = await self._drive(turn, machine)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (the runtime is closing): the turn ends
            # aborted — its input is not acknowledged and replays later.
            # Synchronous from here: nothing can be cancelled.
            self._end(turn, machine, self._abort(turn, machine))
            raise
        except IllegalTransition as exc:
            terminal = self._refused(turn, machine, exc)
        if isinstance(terminal, LeaveForRecovery):
            self._leave(turn)
        else:
            self._end(turn, machine, terminal)

    async def _drive(self, turn: Turn, machine: TurnMachine) -> WriteTerminal | LeaveForRecovery:
        """The turn from its start to a final state of ``machine``; returns
        the terminal record it named, or :class:`LeaveForRecovery` (a
        hang-up at an approval card). Raises cancellation (runtime closing)
        and chart refusals; every other error is sent as ``fail``."""
        try:
            if self.resume is None:
                self._begin(turn)
                machine.start()
                machine.inputs_claimed(m.message_id for m in turn.inputs)
            else:  # the replay fed the machine the inputs the turn journaled
                self._begin_resumed(turn, self.resume)
            with turn._scope:
                if self.resume is not None:
                    # The chart decides how the turn goes on: re-drive its
                    # round's calls, or its next model round (recovery.md §8).
                    for effect in machine.resume(redrive=len(self.resume.redrive)):
                        if isinstance(effect, RedriveCalls):
                            await redrive_round(self.calls, turn, machine)
                            self._tools_done(turn, machine)
                    if machine.terminal is not None:  # out of rounds
                        return machine.terminal
                return await self._loop(turn, machine)
        except (anyio.get_cancelled_exc_class(), IllegalTransition):
            raise
        except StorageError as exc:  # a journal write failed: disk full, quota, I/O error
            turn._storage_error = exc
            failure = storage_failure(exc, self.session.session_id)
            return _terminal(machine, machine.fail(kind="storage", message=failure.message))
        except ScriptError as exc:  # the offline script cannot answer
            return _terminal(machine, machine.fail(message=f"scripted provider: {exc}"))
        except Exception as exc:  # a bug or an I/O failure: the turn still gets its terminal
            # The text of an unexpected exception may carry a URL or a key.
            text = redact(f"internal error: {exc}", self.session.secrets)
            return _terminal(machine, machine.fail(message=text))
        # Only an interrupt leaves the cancel scope without a terminal.
        if turn._hung_up or turn._left:
            effects = machine.hang_up() if turn._hung_up else machine.leave()
            left = [e for e in effects if isinstance(e, LeaveForRecovery)]
            if left:
                return left[0]
        else:
            effects = machine.interrupt(send_pending=turn._send_pending)
        self._close_open_calls(turn, INTERRUPTED_OUTPUT, INTERRUPTED_UNSTARTED_OUTPUT)
        return _terminal(machine, effects)

    def _leave(self, turn: Turn) -> None:
        """Perform :class:`LeaveForRecovery`: nothing is journaled. The
        mailbox gives the box up with the turn's inputs unacknowledged
        (``inbox.json`` keeps them; the next open resumes the turn with them),
        the index keeps the session ``running`` (listed ``interrupted (resume
        to recover)`` once no process holds it), and the handle ends
        ``interrupted``: this process is leaving."""
        self.session.mailbox.end_turn(acknowledge=False)
        usage = turn._usage
        done = ev.TurnCompletedEvent(
            turn_id=turn.turn_id,
            status=ev.TurnStatus.interrupted,
            usage=event_usage(usage),
            suspended=True,
        )
        turn._finish(TurnOutcome(event=done, final_text=turn._final_text, error=None))

    def _abort(self, turn: Turn, machine: TurnMachine) -> WriteTerminal:
        """Close the turn's open calls as aborted, then end it as the machine's
        :meth:`~mind.machines.turn.TurnMachine.fail_safe` says; returns the
        terminal to write."""
        if machine.terminal is None:
            # A broken journal: recovery closes the calls when the session reopens.
            with contextlib.suppress(StorageError):
                self._close_open_calls(turn, ABORTED_OUTPUT, ABORTED_UNSTARTED_OUTPUT)
        terminal = machine.fail_safe()
        if terminal is FAIL_SAFE:
            log.error(
                "turn %s of session %s: the Turn chart refused 'abort' in state %s too",
                turn.turn_id,
                self.session.session_id,
                machine.state,
            )
        return terminal

    def _refused(self, turn: Turn, machine: TurnMachine, exc: IllegalTransition) -> WriteTerminal:
        """Fail safe after a refused transition: log it, end the turn ``aborted``."""
        chart, state = exc.chart, exc.state
        log.error(
            "turn %s of session %s: the %s chart refused event %r in state %s; "
            "the turn ends aborted and its inputs replay on the next start",
            turn.turn_id,
            self.session.session_id,
            chart,
            exc.event,
            state,
        )
        return self._abort(turn, machine)

    def _journal_inputs(self, turn: Turn, messages: list[MailboxMessage], *, sync: bool) -> None:
        for i, msg in enumerate(messages):
            self.session.journal.append(
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
        self.session.journal.append(
            jr.TurnStarted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                provider=self.session.provider.name,
                model=self.session.config.provider.model,
                approval=jr.Approval(self.session.approval),
                tool_starts=True,
            ),
            sync=not turn.inputs,
        )
        self._journal_inputs(turn, turn.inputs, sync=True)
        faults.boundary("after_turn_started")
        self.session.runtime.store.index.note(
            self.session.session_id,
            title=turn.inputs[0].text if turn.inputs else None,
            status="running",
        )
        turn._emit(ev.TurnStartedEvent(turn_id=turn.turn_id))
        self._announce_claim(turn, turn.inputs, ev.ClaimPoint.start)

    def _begin_resumed(self, turn: Turn, plan: ResumePlan) -> None:
        """A resumed turn's records are durable already: announce it
        (``turn.resumed``, then the inputs it claimed again, then each result
        collected from a supervisor at open: ``tool.call``, ``tool.result``)."""
        self.session.runtime.store.index.note(self.session.session_id, status="running")
        running = [e.call_id for e in self.session.running_effects() if e.turn_id == plan.turn_id]
        collected = collected_calls(self.calls, turn.turn_id)
        turn._emit(resumed_event(plan, collected, running))
        self._announce_claim(turn, turn.inputs, ev.ClaimPoint.start)
        # After the claim: the REPL echoes the turn's inputs first, as at a start.
        for paired in collected:
            assert paired.result is not None
            turn._emit(call_event(turn.turn_id, paired.call))
            turn._emit(result_event(paired.result))

    def _announce_claim(
        self, turn: Turn, messages: list[MailboxMessage], at: ev.ClaimPoint
    ) -> None:
        """Publish ``input.claimed`` for inputs the turn just took (none: nothing)."""
        if messages:
            turn._emit(
                ev.InputClaimedEvent(
                    turn_id=turn.turn_id, message_ids=[m.message_id for m in messages], at=at
                )
            )

    def _end(self, turn: Turn, machine: TurnMachine, terminal: WriteTerminal) -> None:
        """Write the terminal record the machine named (fsync), then clean the
        inbox, then publish ``turn.completed``, then do what the machine says
        about the input that waits (start the next turn, or announce it).

        ``terminal.acknowledged`` names the ids the record acknowledges: the
        turn machine's inputs when the ending acknowledges them
        (:func:`mind.machines.turn.acknowledges`), the same rule recovery
        replays (``turn_replay``), else none: they replay.
        """
        usage = turn._usage
        status = ev.TurnStatus(terminal.status)
        failure = (
            ev.Failure(kind=ev.FailureKind(terminal.failure.kind), message=terminal.failure.message)
            if terminal.failure is not None
            else None
        )
        faults.boundary("before_terminal")
        # The mailbox settles only once the record is durable.
        acknowledged = list(terminal.acknowledged)
        extra: dict[str, Any] = {}
        if failure is not None:
            extra["failure"] = jr.Failure(
                kind=jr.FailureKind(failure.kind.value), message=failure.message
            )
        written = True
        try:
            self.session.journal.append(
                jr.TurnCompleted(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id=turn.turn_id,
                    status=jr.TurnStatus(status.value),
                    usage=journal_usage(usage),
                    acknowledged=acknowledged,
                    **extra,
                ),
                sync=True,
            )
        except (StorageError, JournalError) as exc:
            written = False
            status, acknowledged, failure = self._unwritten(turn, exc)
        self.session.mailbox.end_turn(acknowledge=bool(acknowledged), only=acknowledged)
        faults.boundary("after_terminal")
        self.session.runtime.store.index.note(self.session.session_id, status=status.value)
        if written:  # inbox.json keeps an input until a durable record acknowledges it
            try:
                self.session.inbox.remove(acknowledged)
            except StorageError as exc:
                # The terminal record is durable, so the inputs are consumed; the
                # stale entries are filtered out when the session is next opened.
                log.warning("%s", exc)
            self.session.mailbox.forget(acknowledged)
        done = ev.TurnCompletedEvent(
            turn_id=turn.turn_id,
            status=status,
            usage=event_usage(usage),
            failure=failure if failure is not None else msgspec.UNSET,
        )
        turn._finish(
            TurnOutcome(event=done, final_text=turn._final_text, error=turn._storage_error)
        )
        after = machine.next_turn(
            input_waiting=bool(self.session.mailbox.waiting()),
            closing=self.session.runtime.closing,
            written=written,
            damaged=self.session.checkpoint_damage is not None,
        )
        if isinstance(after, StartNextTurn):
            self.session._start_turn()
        elif isinstance(after, AnnounceWaiting):
            # Input stays waiting after this turn: say so, with how to drop
            # it, or it goes silently into the next turn (docs/design/turn.md §6).
            self.session._events.put(self.session.waiting_event())

    def _unwritten(
        self, turn: Turn, exc: StorageError | JournalError
    ) -> tuple[ev.TurnStatus, list[str], ev.Failure]:
        """The terminal record could not be made durable (a full disk, a journal
        replaced underneath): the turn is what its durable records say, and the
        chart decides it as the next open will — they are replayed into a fresh
        turn machine that is sent ``recover``
        (:func:`mind.machines.turn_replay.recovered_closing`) — so this process
        reports what that open writes (docs/design/turn.md §2).

        Returns:
            The status, the ids the reopen's receipt will acknowledge (settled
            in the mailbox now, left in ``inbox.json`` until then) and the
            failure to report (``storage``, or ``internal`` for a replaced journal).
        """
        closing = recovered_closing(self.session.journal.records, turn.turn_id)
        acknowledged = list(closing.acknowledged)
        cause = turn._storage_error or (exc if isinstance(exc, StorageError) else None)
        if cause is not None:
            turn._storage_error = cause
            kept = any(m.message_id not in acknowledged for m in self.session.mailbox.claimed())
            failure = storage_failure(cause, self.session.session_id, kept=kept)
        else:
            text = redact(f"could not write the terminal record: {exc}", self.session.secrets)
            failure = ev.Failure(kind=ev.FailureKind.internal, message=text)
        return ev.TurnStatus(closing.status), acknowledged, failure

    async def _loop(self, turn: Turn, machine: TurnMachine) -> WriteTerminal:
        """Model rounds and tool calls until the machine names the terminal.

        Raises the cancellation of ``turn._scope`` on interrupt.
        """
        output_used = 0  # bytes of model output in this turn's rounds
        # Instructions files are read again at each turn start (docs/design/context.md §4).
        if self.session.instructions.refresh():
            turn._emit(self.session.instructions_event())
        while True:
            # The projected context, before the request is built: the chart
            # decides whether to compact first (docs/design/context.md §5).
            await self._perform_compactions(
                turn,
                machine,
                machine.context_measured(
                    projected=self.session.context_usage.projected_tokens,
                    window=compaction.session_window(self.session),
                    percent=self.session.config.auto_compact_percent,
                    input_tokens=self._input_tokens(turn),
                ),
            )
            if machine.terminal is not None:
                return machine.terminal
            # Built once per round: every retry of the round sends this same
            # request (docs/design/providers.md §8); input that arrives meanwhile waits for the
            # next round boundary.
            request = ModelRequest(
                model=self.session.config.provider.model,
                system=self.session.instructions.system_prompt,
                messages=self._messages(),
                tools=tool_specs(),
                # The turn's cap, less what earlier rounds streamed (docs/design/turn.md §5).
                max_output_bytes=max(0, self.session.config.max_output_bytes - output_used),
            )
            frozen = _FrozenRequest(request, request_digest(request), machine.rounds_done)
            sampled = await self._sample(turn, machine, frozen)
            if isinstance(sampled, WriteTerminal):
                return sampled
            if sampled is None:  # rebuilt for a learned window, or compacted: build it again
                continue
            done = sampled
            turn._usage = turn._usage + done.usage
            output_used += output_bytes(done)
            # A provider that does not stop at the cap itself (the scripted
            # one) makes the machine fail the round: it is not kept and its
            # calls never run.
            effects = machine.round_done(
                tool_calls=len(done.tool_calls),
                output_bytes=output_used,
                output_limit=self.session.config.max_output_bytes,
            )
            if machine.terminal is not None:
                return machine.terminal
            try:
                self._journal_round(
                    turn.turn_id,
                    frozen,
                    done.text,
                    done.reasoning,
                    done.tool_calls,
                    done.finish,
                    done.usage,
                    done.provider_items,
                )
            except JournalRecordTooLarge as exc:
                # An answer too large to keep is not an answer: the turn
                # fails like one past the output cap, and the input waits.
                turn.failure_detail = exc.detail
                return _terminal(
                    machine, machine.fail(kind="output_limit", message=exc.failure_message())
                )
            if done.text:
                turn._final_text = done.text
                turn._emit(ev.MessageCompletedEvent(turn_id=turn.turn_id, text=done.text))
            if (warning := finish_warning(turn.turn_id, done.finish)) is not None:
                turn._emit(warning)  # a cut answer is kept, and said to be cut
            turn._emit(self.session.context_usage_event(turn.turn_id))
            faults.boundary("after_model_round")
            for effect in effects:
                if isinstance(effect, RunTools):
                    for call in done.tool_calls:
                        await self.calls.run(turn, machine, call)
                    self._tools_done(turn, machine)
                elif isinstance(effect, DrainOrSeal):
                    # One step with no await inside: either the steering that
                    # arrived is claimed (another round answers it) or the
                    # mailbox is sealed and later input waits for the next
                    # turn (docs/design/mailbox.md §4).
                    steering = self.session.mailbox.drain_or_seal()
                    if steering:
                        self._journal_inputs(turn, steering, sync=False)
                        self._announce_claim(turn, steering, ev.ClaimPoint.drain)
                        machine.steering_claimed(m.message_id for m in steering)
                    else:
                        machine.seal()
            if machine.terminal is not None:
                return machine.terminal

    def _input_tokens(self, turn: Turn) -> int:
        """Estimated tokens of the turn's own input alone: its user messages,
        the instructions and the tool specs (what no compaction removes)."""
        own = turn_input_bytes(self.session.journal.records, turn.turn_id)
        return estimate_tokens(own + request_overhead_bytes(self.session))

    def _messages(self) -> list[Message]:
        """The messages of the next request: the journal's view, tool output
        cut to the budgets of the window the session plans with (context.md §3)."""
        limits = limits_for_window(
            self.session.config.tool_output, compaction.session_window(self.session)
        )
        return build_messages(self.session.journal.records, output_limits=limits)

    async def _perform_compactions(
        self,
        turn: Turn,
        machine: TurnMachine,
        effects: list[Effect],
        *,
        sent_tokens: int | None = None,
    ) -> bool:
        """Perform the :class:`Compact` effects the machine named: one
        compaction, then ``compaction_done`` with whether it completed (a
        failed one leaves the old context standing; the chart decides what
        follows, :attr:`TurnMachine.terminal` once it failed the turn) and
        the facts the failure's advice needs. ``sent_tokens``: estimated
        tokens of the request that overflowed (its ``before_tokens``).
        Returns whether one ran."""
        ran = False
        planned = compaction.session_window(self.session)
        for effect in effects:
            if isinstance(effect, Compact):
                ran = True
                outcome = await compaction.compact(
                    self.session,
                    trigger=effect.trigger,
                    turn_id=turn.turn_id,
                    emit=turn._emit,
                    overhead_bytes=request_overhead_bytes(self.session),
                    sent_tokens=sent_tokens,
                )
                machine.compaction_done(
                    shrank=outcome.completed,
                    reason=outcome.reason,
                    # The REPL opens its sessions interactive; exec and the
                    # library have no slash commands.
                    repl=self.session.interactive,
                    session_id=self.session.session_id,
                    message_tokens=sent_tokens if outcome.message_alone else None,
                    # The advice names the window that refused the request:
                    # the server's, when it stated a smaller one than planned.
                    window=min(
                        (w for w in (planned, self.session.stated_window) if w is not None),
                        default=None,
                    ),
                    **self._instructions_share(sent_tokens),
                )
        return ran

    def _instructions_share(self, sent_tokens: int | None) -> dict[str, Any]:
        """``instructions`` (paths and sizes) and ``instructions_tokens`` for
        ``compaction_done`` when the instructions files are at least half of
        the ``sent_tokens`` of the request that overflowed; else {}."""
        sources = self.session.instructions.sources
        tokens = estimate_tokens(sum(s.included_bytes for s in sources))
        if sent_tokens is None or tokens == 0 or 2 * tokens < sent_tokens:
            return {}
        return {"instructions": describe_sources(sources), "instructions_tokens": tokens}

    def _tools_done(self, turn: Turn, machine: TurnMachine) -> None:
        """Every result of the round is journaled: send ``tools_done`` and
        perform the drain it names (a fresh round's and a resumed one's)."""
        if any(isinstance(e, DrainSteering) for e in machine.tools_done()):
            # The model-request boundary after the tool results:
            # steering sent meanwhile reaches the model now, never
            # between a call and its result.
            claimed = self.session.mailbox.drain()
            self._journal_inputs(turn, claimed, sync=False)
            self._announce_claim(turn, claimed, ev.ClaimPoint.boundary)
            machine.inputs_claimed(m.message_id for m in claimed)

    async def _sample(
        self, turn: Turn, machine: TurnMachine, frozen: _FrozenRequest
    ) -> StreamDone | WriteTerminal | None:
        """Send the round's frozen request until it answers, retrying transient
        failures with backoff; the same request object every attempt.

        Returns the round's redacted ``StreamDone``, the terminal of the
        turn the machine failed, or None: the request overflowed the window
        and the machine had it rebuilt with a learned window's budgets
        (:class:`RebuildRequest`) or compacted (the caller builds it again). Raises
        the cancellation of ``turn._scope`` on interrupt (after journaling
        what the person already saw).
        """
        while True:
            frozen.attempts += 1
            done: StreamDone | None = None
            partial: list[str] = []
            try:
                opened = False
                turn.model_quiet_since = time.monotonic()
                async for item in self.session.provider.stream(frozen.request):
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
                        done = redact_round(item, self.session.secrets)
                if done is None:
                    raise ProviderError("stream_cut", detail="stream ended without a final event")
                # A failure this round recovered from is not the turn's to report.
                turn.failure_detail = ""
                return done
            except ProviderError as exc:
                turn.model_quiet_since = None
                turn.failure_detail = exc.detail[:500]
                planned = compaction.session_window(self.session)
                if exc.context_window is not None:  # the server said its window: keep it
                    learned = refused_window(exc.context_window, exc.request_tokens)
                    read = self.session.instructions.sources
                    self.session.learn_window(learned, turn.turn_id)
                    if self.session.instructions.sources != read:  # re-cut to the new window
                        turn._emit(self.session.instructions_event())
                    warning = self.session.window_warning(turn.turn_id)
                    if warning is not None:  # the configured window is kept: say so once
                        turn._emit(warning)
                now = time.monotonic()
                if self._first_failure_at is None:
                    self._first_failure_at = now  # the turn's retry time starts here
                # The refused request's size: never below what the server counted.
                sent = max(
                    estimate_tokens(len(msgspec.json.encode(frozen.request))),
                    exc.request_tokens or 0,
                )
                effects = machine.round_failed(
                    kind=exc.kind,
                    message=exc.message,
                    retry_after_s=exc.retry_after_s,
                    elapsed_s=now - self._first_failure_at,
                    # A new window whose budgets change what the request carries.
                    window_learned=compaction.session_window(self.session) != planned
                    and (
                        self._messages() != frozen.request.messages
                        or self.session.instructions.system_prompt != frozen.request.system
                    ),
                    # The turn's own input alone, the least any request carries.
                    input_tokens=self._input_tokens(turn),
                    sent_tokens=sent,
                    window=compaction.session_window(self.session),
                )
                if machine.terminal is not None:
                    return machine.terminal
                if any(isinstance(e, RebuildRequest) for e in effects):
                    return None  # built again with the learned window's budgets
                if await self._perform_compactions(turn, machine, effects, sent_tokens=sent):
                    # None: build the request again from the compacted view;
                    # the terminal: nothing shrank the context (the chart's call).
                    return machine.terminal
                backoff = next((e for e in effects if isinstance(e, StartBackoff)), None)
                if backoff is None:
                    return _terminal(machine, effects)
                turn._emit(
                    ev.TurnRetryingEvent(
                        turn_id=turn.turn_id,
                        attempt=backoff.attempt,
                        delay_s=backoff.delay_s,
                        failure=ev.Failure(
                            kind=ev.FailureKind(backoff.failure.kind),
                            message=backoff.failure.message,
                        ),
                    )
                )
                await anyio.sleep(backoff.delay_s)
                machine.retry_due()
            except anyio.get_cancelled_exc_class():
                turn.model_quiet_since = None
                if partial:  # keep what the person already saw
                    self._journal_round(
                        turn.turn_id, frozen, "".join(partial), "", [], "other", RoundUsage(), []
                    )
                raise
            finally:
                turn.model_quiet_since = None  # also on any other error (the turn fails)

    def _journal_round(
        self,
        turn_id: str,
        frozen: _FrozenRequest,
        text: str,
        reasoning: str,
        calls: list[ToolCall],
        finish: str,
        usage: RoundUsage,
        provider_items: list[dict[str, Any]],
    ) -> None:
        self.session.journal.append(
            jr.ModelRound(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                round=frozen.index,
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
                usage=journal_usage(usage),
                provider=self.session.provider.name,
                provider_items=list(provider_items),
                request_sha256=frozen.digest,
                attempts=frozen.attempts,
            )
        )

    def _close_open_calls(self, turn: Turn, output: str, unstarted: str) -> None:
        """Synthetic results for the calls the turn leaves unanswered, each
        also published as a ``tool.result`` event.

        Args:
            output: the text for a call that may have run (a start is recorded).
            unstarted: the text for a call that provably never ran; a call
                still waiting for its approval gets
                :data:`INTERRUPTED_UNAPPROVED_OUTPUT` instead.
        """
        # Calls run one by one in call order, so the call waiting for its
        # approval is the first unanswered one with its id: only that
        # occurrence was asked (an id may repeat in a round).
        asked = set(turn.unanswered_approvals)

        log = self.session.interactions.log
        reruns = {
            r.call_id
            for r in log.requested.values()
            if r.turn_id == turn.turn_id
            and r.purpose == jr.Purpose.rerun_outside
            and r.call_id in asked
        }

        def text(call_id: str, started: bool) -> str:
            if started and call_id in reruns:
                # Stopped at "run it again without the sandbox?": its
                # sandboxed run had ended, no process was running.
                reruns.discard(call_id)
                return INTERRUPTED_AT_RERUN_OUTPUT
            if started:
                return output
            if call_id in asked:
                asked.discard(call_id)
                return INTERRUPTED_UNAPPROVED_OUTPUT
            return unstarted

        for result in close_open_calls(self.session.journal, turn.turn_id, text):
            turn._emit(
                ev.ToolResultEvent(
                    turn_id=turn.turn_id,
                    call_id=result.call_id,
                    status=ev.ToolStatus.interrupted,
                    output=result.output,
                )
            )


@dataclass
class _FrozenRequest:
    """One round's request, built once and sent unchanged by every attempt.

    Attributes:
        request: the request every attempt of the round sends.
        digest: :func:`request_digest` of it (journaled on the round).
        index: the round's 0-based number in the turn.
        attempts: how many times it was sent so far.
    """

    request: ModelRequest
    digest: str
    index: int
    attempts: int = 0


def request_digest(request: ModelRequest) -> str:
    """SHA-256 (64 hex characters) of ``request`` encoded as msgspec JSON:
    names the frozen request a round sent (``model_round.request_sha256``).

    The providers encode the body from the request alone, so one digest
    means one body on the wire. Pure; never raises.
    """
    return hashlib.sha256(msgspec.json.encode(request)).hexdigest()


def _terminal(machine: TurnMachine, effects: list[Effect]) -> WriteTerminal:
    """The terminal record among ``effects`` (the machine's, once terminal).

    Raises:
        IllegalTransition: the event named no terminal (a chart that does
            not end where the loop expects is a bug: fail safe).
    """
    for effect in effects:
        if isinstance(effect, WriteTerminal):
            return effect
    raise IllegalTransition(
        "turn", "(expected a terminal)", machine.state, configuration=machine.configuration
    )


def storage_failure(exc: StorageError, session_id: str, *, kept: bool = True) -> ev.Failure:
    """The ``storage`` failure of a turn whose journal write failed: one line
    naming the file and the errno, whether input is kept (it replays), and
    how to go on."""
    why = exc.errno_name or "I/O error"
    return ev.Failure(
        kind=ev.FailureKind.storage,
        message=f"could not write {exc.path} ({why}); "
        + ("the input is kept: " if kept else "")
        + f"free space, then resume session {session_id}",
    )


def output_bytes(done: StreamDone) -> int:
    """UTF-8 bytes of a round's model output: answer text, reasoning and tool
    arguments (what ``max_output_mib`` caps per turn)."""
    parts = [done.text, done.reasoning, *(c.arguments for c in done.tool_calls)]
    return sum(len(p.encode("utf-8", "replace")) for p in parts)
