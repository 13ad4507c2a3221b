"""One tool call of a turn: validate the arguments, apply the approval
policy, ask the person through the session's interactions (or a standing
session grant: docs/design/interactions.md §5), run it (sandboxed or not) as
a prepared effect, journal its result (docs/design/effects.md §3).

One module (over 500 lines) because one tool call's steps share its
invocation (ids, decision, effect); the approval part (``_approve``,
``_request``, ``_show``) is a candidate to move out, noted for a later change.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import anyio.lowlevel
import msgspec

from mind.conversation import (
    ToolCall,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.effects.boundary import Refusal, SandboxMode
from mind.effects.grants import GrantScope, covers, describe, grant_scope
from mind.effects.identity import Purpose, interaction_id
from mind.effects.policy import (
    Access,
    crossing_reason,
    rerun_reason,
    standing_question,
    tool_decision,
    written_paths,
)
from mind.effects.review import FileChange, approval_text, cut_for_display
from mind.effects.tools import parse_arguments
from mind.errors import InteractionTooLarge, ToolArgumentsError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.effect import Collect, ProcessFact, person_answers, running_choices
from mind.machines.effect import Resolution as EffectResolution
from mind.machines.turn import RefuseCall, RunGranted, TurnMachine
from mind.shell import faults
from mind.shell.effects import (
    MIND_STOPPED,
    Invocation,
    SessionEffects,
    UnknownEffect,
    running_effects,
)
from mind.shell.interactions import APPROVAL_CHOICES, Resolution
from mind.shell.tools import ToolOutcome
from mind.shell.turn_handle import Turn

if TYPE_CHECKING:
    from mind.shell.session import Session
    from mind.shell.supervision import Handle
    from mind.shell.tools._process import StartHook


@final
class ToolCalls:
    """Runs the tool calls of one session's turns (one instance per turn driver)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.effects = SessionEffects(
            session.session_id, session.journal, session.tools.effects_dir, session.secrets
        )
        """The session's effect records, one for every call of the turn: its
        index of the turn's records follows the journal, so a call reads the
        records appended since the last one, not the whole turn again."""

    async def run(self, turn: Turn, machine: TurnMachine, call: ToolCall) -> None:
        """Run one call of the round and journal its one result
        (docs/design/effects.md §3): the effect is prepared (``tool_started``,
        fsynced) before the tool runs and committed (``tool_result``, fsynced)
        after. A call the journal shows prepared before a crash (a resumed
        turn re-drives it) is reconciled, never blindly run again (§4)."""
        effects = self.effects
        inv = effects.propose(turn.turn_id, call)
        # Replayed from the journal (a crash came after its start): what its
        # supervisor's directory says, read once — a command still running is
        # announced as already running, never as called again.
        process = effects.process(inv) if inv.machine.prepared else None
        turn._emit(call_event(turn.turn_id, call, already_running=process == "running"))
        faults.boundary("after_tool_call")
        if process is not None:
            result = await self._redrive(turn, machine, effects, inv, process)
        else:
            status, output = await self._execute(turn, machine, call, effects, inv)
            if inv.machine.prepared:
                faults.boundary("effect_executing")
            # commit redacts the result: mind's own keys never enter a result.
            result = effects.commit(inv, status, output)
        faults.boundary("after_tool_result")
        turn._emit(result_event(result))

    async def _redrive(
        self,
        turn: Turn,
        machine: TurnMachine,
        effects: SessionEffects,
        inv: Invocation,
        process: ProcessFact,
    ) -> jr.ToolResult:
        """A call prepared before a crash, with no result, ``process`` being
        what its supervisor's directory says (:meth:`SessionEffects.process`):
        its supervisor's exit record is collected (waiting while it still
        runs); else a rerun-safe one (or one that provably never started)
        runs again; an ``unknown`` one is resolved first — by a person when
        one can answer, else ``tell_model`` (docs/design/effects.md §4)."""
        can_ask = self.session.interactive
        found = effects.recover(inv, can_ask=can_ask, process=process)
        killed = False
        if isinstance(found, Collect):
            # The chart knows the turn waits for a command a crash left
            # running: leaving now (hang-up, /exit) leaves it running.
            machine.command_waited()
            collected, killed = await self._collect(turn, effects, inv, found)
            machine.command_ended()
            if isinstance(collected, jr.ToolResult):
                return collected
            found = collected
        if isinstance(found, UnknownEffect):
            # Killed on the person's word and no exit record left (its
            # directory was gone): journaled as their kill, one account of it
            # in the result; never re-run.
            resolution: EffectResolution = (
                "killed" if killed else await self._ask_reconcile(turn, inv.call, found)
            )
            written = effects.resolve(inv, found, resolution)
            if written is not None:
                return written
        try:
            args = parse_arguments(inv.call.name, inv.call.arguments)
        except ToolArgumentsError as exc:  # prepared calls passed this: a changed contract
            return effects.commit(inv, "error", str(exc))
        # Again with no more than the defaults: inside the sandbox, no boundary consent.
        outcome = await self.session.tools.run(
            inv.call.name, args, effect_id=inv.effect_id, on_started=self._running(effects, inv)
        )
        faults.boundary("effect_executing")
        return effects.commit(inv, outcome.status, outcome.output)

    async def _collect(
        self, turn: Turn, effects: SessionEffects, inv: Invocation, found: Collect
    ) -> tuple[jr.ToolResult | UnknownEffect, bool]:
        """Collect a command a crash left (:meth:`SessionEffects.collect`:
        waiting while it still runs). While it is waited for and the chart
        offers choices (``found.choices``: ``kill`` where a person can
        answer), a ``running`` question asks whether to stop it; ``kill``
        (journaled first, like every answer) stops its whole tree and its
        result says so. The question is cancelled (by ``recovery``) when the
        command ends on its own first; headless only waits.

        Returns:
            What the collect gave, and whether the person's kill stopped it.

        Raises:
            JournalWriteError: a record could not be made durable.
        """
        can_ask = self.session.interactive

        def stop() -> bool:  # an explicit Stop kills it; leaving leaves it running
            return turn.stops_commands

        if not person_answers(found.choices):
            # Nobody to ask: still, a wait that may last the command's
            # timeout is said, never silent.
            turn._emit(
                ev.ToolWaitingEvent(
                    turn_id=turn.turn_id,
                    call_id=inv.call.call_id,
                    name=inv.call.name,
                    started_at_ms=inv.started.recorded_at_ms if inv.started is not None else 0,
                )
            )
            return await effects.collect(inv, can_ask=can_ask, stop=stop), False
        got: list[jr.ToolResult | UnknownEffect] = []
        state = {"ended": False, "killed": False}

        def note() -> str:
            return _KILLED_NOTE if state["killed"] else ""

        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                got.append(await effects.collect(inv, can_ask=can_ask, note=note, stop=stop))
                state["ended"] = True
                tg.cancel_scope.cancel()  # the question is moot now

            async def ask() -> None:
                decision = await self._ask_running(turn, inv, found, ended=lambda: state["ended"])
                if decision == jr.InteractionDecision.kill:
                    state["killed"] = effects.kill(inv)  # False: it ended meanwhile

            tg.start_soon(wait)
            tg.start_soon(ask)
        return got[0], state["killed"]

    async def _ask_running(
        self, turn: Turn, inv: Invocation, found: Collect, *, ended: Callable[[], bool]
    ) -> jr.InteractionDecision | None:
        """The ``running`` question about ``inv``'s command (id
        ``interaction_id(effect, "still_running")``, the same after every
        restart): its command text and since when it runs, the choices
        ``found.choices``. Returns the decision, or None when the question
        is too large to ask (the command is then only waited for).
        Cancelled, it is resolved ``cancelled`` — by ``recovery`` when
        ``ended()`` (the command ended on its own), by the person when they
        stopped the turn — and stays open when the process stops."""
        call = inv.call
        started_ms = inv.started.recorded_at_ms if inv.started is not None else 0
        request = running_question(
            str(self.session.cwd), turn.turn_id, call, inv.effect_id, started_ms, found.choices
        )
        try:
            resolution = await self.session.interactions.ask(
                request,
                can_answer=person_answers(found.choices),
                show=lambda r, again: self._show(turn, call, r, again),
                resolved=lambda r: self._resolved(turn, call, r),
                announce=lambda r, again: self._announce(turn, r, again),
                # Leaving (hang-up, /exit) keeps it open: the next open asks again.
                explicit_stop=lambda: ended() or turn.stops_commands,
                stop_by=lambda: jr.InteractionBy.recovery if ended() else jr.InteractionBy.person,
            )
        except InteractionTooLarge:
            return None
        return resolution.decision

    async def _ask_reconcile(
        self, turn: Turn, call: ToolCall, facts: UnknownEffect
    ) -> EffectResolution:
        """The resolution of an ``unknown`` effect, asked as a ``reconcile``
        interaction (id ``facts.interaction_id``, purpose ``unknown_outcome``,
        the choices ``facts.choices``): journaled before its card is shown,
        the first answer wins, offered again under the same id after a crash
        (docs/design/interactions.md §6). Where nobody can answer (the
        choices are ``tell_model`` alone) it is ``declined`` and the model is
        told; a question too large to ask is told too — never a re-run
        without a person's word (docs/design/effects.md §4).

        Raises:
            JournalWriteError: the question or its answer could not be made durable.
        """
        try:
            resolution = await self.session.interactions.ask(
                _effect_question(
                    str(self.session.cwd),
                    turn.turn_id,
                    call,
                    effect_id=facts.effect_id,
                    iid=facts.interaction_id,
                    kind=jr.InteractionKind.reconcile,
                    purpose=jr.Purpose.unknown_outcome,
                    reason=_known(facts),
                    choices=[jr.InteractionDecision(c) for c in facts.choices],
                ),
                can_answer=person_answers(facts.choices),
                show=lambda r, again: self._show(turn, call, r, again),
                resolved=lambda r: self._resolved(turn, call, r),
                announce=lambda r, again: self._announce(turn, r, again),
                explicit_stop=lambda: turn._interrupt_requested,
            )
        except InteractionTooLarge:
            return "tell_model"
        return reconcile_resolution(resolution.decision, facts.choices)

    async def _execute(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        effects: SessionEffects,
        inv: Invocation,
    ) -> tuple[str, str]:
        """Validate, ask if required, prepare, run. Returns ``(status, output)``."""
        try:
            args = parse_arguments(call.name, call.arguments)
        except ToolArgumentsError as exc:
            return "error", str(exc)
        decision = tool_decision(
            self.session.approval,
            call.name,
            args,
            cwd=str(self.session.cwd),
            crossing=self._crossing,
            sandbox=self.session.config.sandbox,
            sandbox_available=self.session.sandbox.backend != "none",
        )
        # A question journaled for this invocation before a restart is answered
        # first, whatever this process's policy says (fail closed).
        standing = self.session.interactions.log.requested.get(interaction_id(inv.effect_id, "run"))
        if standing is not None:
            recorded = standing.sandbox
            asked_where = recorded.value if isinstance(recorded, jr.Sandbox) else None
            decision = standing_question(
                decision,
                standing.reason,
                asked_where=asked_where,
                now_where=self._where(call.name, call.name == "shell" and decision.sandboxed),
            )
        if decision.action == "refuse":
            # Every branch passes through the turn chart (issue #9): an
            # outright refusal is its call_refused event.
            refused = machine.call_refused(
                call_id=call.call_id, reason=decision.reason or "refused"
            )
            return "denied", next(e.reason for e in refused if isinstance(e, RefuseCall))
        reason = decision.reason if decision.action == "ask" else None
        sandboxed = call.name == "shell" and decision.sandboxed
        run_mode: SandboxMode | None = decision.mode if call.name == "shell" else None
        approved: list[FileChange] | None = None
        crossed = crossing_reason(
            call.name, args, cwd=str(self.session.cwd), crossing=self._crossing
        )
        if reason is not None:
            # What the person approves, read from the files now: a diff for
            # file tools, never only a path (docs/design/turn.md §7).
            changes, problem = await self.session.tools.preview(call.name, args)
            if changes and problem is None:
                approved = changes  # what is written must be what was shown
            refusal = await self._approve(
                turn,
                machine,
                call,
                args,
                _Asking(
                    "run",
                    reason,
                    decision.remedy,
                    sandboxed,
                    crossed is not None,
                    effect_id=inv.effect_id,
                ),
                changes,
                problem,
            )
            if refusal is not None:
                return "denied", refusal
        # Durable before the tool starts: a call without this record provably
        # never ran (its synthetic result after an interrupt or crash says so).
        effects.prepare(inv)
        # Past this point a call with a reason was approved (now or by a
        # session grant): the file tools may then cross the boundary (never
        # into a denied root).
        result: ToolOutcome = await self.session.tools.run(
            call.name,
            args,
            approved,
            consent=reason is not None,
            sandboxed=sandboxed,
            sandbox_mode=run_mode,
            effect_id=inv.effect_id,
            on_started=self._running(effects, inv),
        )
        if call.name == "shell" and sandboxed:
            offer = rerun_reason(
                self.session.approval, self.session.config.sandbox, result.status, result.output
            )
            if offer is not None:
                refusal = await self._approve(
                    turn,
                    machine,
                    call,
                    args,
                    _Asking("rerun_outside", offer, None, False, False, effect_id=inv.effect_id),
                    [],
                    None,
                )
                if refusal is None:
                    result = await self.session.tools.run(
                        call.name,
                        args,
                        sandboxed=False,
                        effect_id=inv.effect_id,
                        on_started=self._running(effects, inv),
                    )
                # refused or nobody can be asked: the sandboxed result stands
        return result.status, result.output

    @staticmethod
    def _running(effects: SessionEffects, inv: Invocation) -> StartHook:
        """The start hook of ``inv``'s command: ``effect_running`` (the
        supervisor's pid + start identity) fsynced while it runs, so a crash
        of mind leaves a record of where its exit status will be
        (docs/design/effects.md §4)."""

        async def started(handle: Handle) -> None:
            effects.running(inv, handle.pid, handle.start_identity, handle.proof_sha256)

        return started

    def _crossing(self, path: str, access: Access) -> Refusal | None:
        """The policy's view of where a file tool path lands (kernel-resolved)."""
        return self.session.tools.boundary_reason(path, access)

    async def _approve(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        args: dict[str, Any],
        asking: _Asking,
        changes: list[FileChange],
        problem: str | None,
    ) -> str | None:
        """Approve one call through a session grant or an interaction
        (docs/design/interactions.md §2, §5). Returns None when it may run,
        else the denial the model sees."""
        where = self._where(call.name, asking.sandboxed)
        written = written_paths(call.name, args)
        interactions = self.session.interactions
        journaled = interaction_id(asking.effect_id, asking.purpose) in interactions.log.requested
        granted = (
            None
            if journaled
            else covers(  # a journaled question is answered, not skipped
                [g.scope for g in interactions.grants()],
                call.name,
                args,
                sandbox=where,
                written=written,
                crossed=asking.crossed,
            )
        )
        asked = machine.approval_needed(
            call_id=call.call_id,
            can_ask=self.session.interactive,
            reason=asking.reason,
            granted=granted is not None,
        )
        if any(isinstance(e, RunGranted) for e in asked):
            return None  # approved for this session (a durable grant)
        scope = grant_scope(call.name, args, sandbox=where, written=written, crossed=asking.crossed)
        can_answer = not any(isinstance(e, RefuseCall) for e in asked)
        request = self._request(turn, call, args, asking, where, changes, problem, scope)
        try:
            resolution = await interactions.ask(
                request,
                can_answer=can_answer,
                show=lambda r, again: self._show(turn, call, r, again),
                resolved=lambda r: self._resolved(turn, call, r),
                announce=lambda r, again: self._announce(turn, r, again),
                explicit_stop=lambda: turn.stopped_by_person,
            )
        except InteractionTooLarge as exc:
            refused: str | None = str(exc)
        else:
            refused = None
        # Only an answer (or a refusal) leaves awaiting_approval here: a cancelled
        # wait stays there, so the chart decides what a hang-up or Stop at the card means.
        if can_answer:
            machine.approval_answered()
        if refused is not None:
            return refused
        if resolution.stop_turn:
            # The chart's StopTurn (an abort): the interrupt ends the turn now
            # (its open calls get their "never approved" results), not after
            # another model round.
            turn.interrupt(send_pending=False)
            await anyio.lowlevel.checkpoint()
        return self._applied(turn, resolution, asking, scope)

    def _applied(
        self, turn: Turn, resolution: Resolution, asking: _Asking, scope: GrantScope | None
    ) -> str | None:
        """What a resolution means for the call: None (run), or its denial."""
        d = jr.InteractionDecision
        if resolution.decision == d.approve_session and scope is not None:
            self.session.interactions.grant(resolution.interaction_id, scope)
        if resolution.decision in (d.approve_once, d.approve_session):
            return None
        if resolution.decision == d.declined:
            # Nobody can be asked. The policy names only flags that really allow it.
            return (
                f"Refused without running: this call needs approval ({asking.reason}) and this "
                "session cannot ask (nobody answers it here, approval policy "
                f"{self.session.approval}). "
                "Do not retry it; tell the user what you wanted to run. "
                f"{asking.remedy or ''}"
            ).rstrip()
        if resolution.decision == d.cancelled:
            return "The turn was stopped while this call waited for approval; it was not run."
        said = f" Their reason: {resolution.reason}" if resolution.reason else ""
        return "The user refused this tool call; it was not run." + said

    def _where(self, name: str, sandboxed: bool) -> str | None:
        """Where a shell command runs: its sandbox mode, or ``outside``."""
        if name != "shell":
            return None
        mode = self.session.config.sandbox
        return mode if sandboxed and mode != "danger-full-access" else "outside"

    def _request(
        self,
        turn: Turn,
        call: ToolCall,
        args: dict[str, Any],
        asking: _Asking,
        where: str | None,
        changes: list[FileChange],
        problem: str | None,
        scope: GrantScope | None,
    ) -> jr.InteractionRequested:
        """The ``interaction_requested`` record of this question (the card:
        command or diff, cwd, reason, choices). Its id is bound to the
        invocation (mind.effects.identity), so it is the same after a restart."""
        text, text_format = approval_text(call.name, args, changes, problem)
        reason = asking.reason
        if where is not None:
            reason += (
                " (runs OUTSIDE the sandbox)"
                if where == "outside"
                else (f" (runs in the {where} sandbox)")
            )
        effect = asking.effect_id
        choices = [c for c in APPROVAL_CHOICES if scope is not None or c.value != "approve_session"]
        return _question(
            turn.turn_id,
            call,
            effect_id=effect,
            iid=interaction_id(effect, asking.purpose),
            kind=jr.InteractionKind.approval,
            purpose=jr.Purpose(asking.purpose),
            reason=reason,
            text=text,
            text_format=text_format,
            cwd=str(self.session.cwd),
            choices=choices,
            sandbox=jr.Sandbox(where) if where is not None else msgspec.UNSET,
            grant=describe(scope) if scope is not None else msgspec.UNSET,
        )

    def _show(
        self, turn: Turn, call: ToolCall, request: jr.InteractionRequested, again: bool
    ) -> None:
        """Publish a durable request (the machine named ``ShowRequest``)."""
        sandbox = request.sandbox
        where = ev.Sandbox(sandbox.value) if isinstance(sandbox, jr.Sandbox) else msgspec.UNSET
        turn._emit(
            ev.ApprovalRequestedEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                arguments=_display_arguments(call.arguments),
                reason=request.reason,
                text=request.text,
                text_format=ev.TextFormat(request.text_format.value),
                head_chars=request.head_chars,
                tail_chars=request.tail_chars,
                hidden_chars=request.hidden_chars,
                hidden_lines=request.hidden_lines,
                sandbox=where,
                interaction_id=request.interaction_id,
                choices=[ev.Choice(c.value) for c in request.choices],
                grant=request.grant,
                cwd=request.cwd,
                offered_again=again,
                kind=ev.Kind(request.kind.value),
            )
        )

    def _announce(self, turn: Turn, request: jr.InteractionRequested, again: bool) -> None:
        """Publish that a request is durable (``interaction.requested``)."""
        turn._emit(
            ev.InteractionRequestedEvent(
                turn_id=turn.turn_id,
                call_id=request.call_id,
                interaction_id=request.interaction_id,
                kind=ev.Kind(request.kind.value),
                purpose=ev.Purpose(request.purpose.value),
                name=request.name,
                reason=request.reason,
                cwd=request.cwd,
                choices=[ev.Choice(c.value) for c in request.choices],
                offered_again=again,
            )
        )

    def _resolved(self, turn: Turn, call: ToolCall, record: jr.InteractionResolved) -> None:
        """Publish a durable resolution."""
        turn._emit(
            ev.InteractionResolvedEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                interaction_id=record.interaction_id,
                decision=ev.Decision(record.decision.value),
                by=ev.By(record.by.value),
                reason=record.reason,
            )
        )


def _effect_question(
    cwd: str,
    turn_id: str,
    call: ToolCall,
    *,
    effect_id: str,
    iid: str,
    kind: jr.InteractionKind,
    purpose: jr.Purpose,
    reason: str,
    choices: list[jr.InteractionDecision],
) -> jr.InteractionRequested:
    """The ``interaction_requested`` record of a question about an effect
    a crash left (``reconcile``: its outcome is unknown; ``running``: it
    still runs): the call's text (the command, or its arguments) and, as
    its reason, what is known — when it started, how it stands."""
    try:
        args = parse_arguments(call.name, call.arguments)
        text, text_format = approval_text(call.name, args, [], None)
    except ToolArgumentsError:  # prepared calls passed this: a changed contract
        text, text_format = call.arguments, "arguments"
    return _question(
        turn_id,
        call,
        effect_id=effect_id,
        iid=iid,
        kind=kind,
        purpose=purpose,
        reason=reason,
        text=text,
        text_format=text_format,
        cwd=cwd,
        choices=choices,
    )


def _question(
    turn_id: str,
    call: ToolCall,
    *,
    effect_id: str,
    iid: str,
    kind: jr.InteractionKind,
    purpose: jr.Purpose,
    reason: str,
    text: str,
    text_format: str,
    cwd: str,
    choices: list[jr.InteractionDecision],
    sandbox: jr.Sandbox | msgspec.UnsetType = msgspec.UNSET,
    grant: str | msgspec.UnsetType = msgspec.UNSET,
) -> jr.InteractionRequested:
    """One ``interaction_requested`` record (docs/design/interactions.md §2):
    the full ``text`` the person reviews with what a display may cut of it
    (:func:`mind.effects.review.cut_for_display`), the ``choices`` offered."""
    cut = cut_for_display(text)
    return jr.InteractionRequested(
        seq=0,
        recorded_at_ms=0,
        interaction_id=iid,
        turn_id=turn_id,
        call_id=call.call_id,
        effect_id=effect_id,
        kind=kind,
        purpose=purpose,
        name=call.name,
        reason=reason,
        text=text,
        text_format=jr.TextFormat(text_format),
        head_chars=cut.head_chars,
        tail_chars=cut.tail_chars,
        hidden_chars=cut.hidden_chars,
        hidden_lines=cut.hidden_lines,
        sandbox=sandbox,
        cwd=cwd,
        choices=choices,
        grant=grant,
    )


def running_question(
    cwd: str,
    turn_id: str,
    call: ToolCall,
    effect_id: str,
    started_ms: int,
    choices: tuple[str, ...],
) -> jr.InteractionRequested:
    """The ``running`` question about ``call``'s command, which a crash left
    running (id ``interaction_id(effect_id, "still_running")``, the same
    after every restart): its text, since when it runs (``started_ms``,
    Unix epoch ms), ``choices`` (:func:`mind.machines.effect.running_choices`)."""
    return _effect_question(
        cwd,
        turn_id,
        call,
        effect_id=effect_id,
        iid=interaction_id(effect_id, "still_running"),
        kind=jr.InteractionKind.running,
        purpose=jr.Purpose.still_running,
        reason=(
            f"this {call.name} call was started at {_utc(started_ms)} UTC, before mind "
            "stopped, and is still running; the turn waits for it to end"
        ),
        choices=[jr.InteractionDecision(c) for c in choices],
    )


def expect_running_questions(session: Session, turn_id: str) -> int:
    """At open, before the resumed turn ``turn_id`` runs: the ``running``
    question of each command of that turn a crash left running (known from
    the journal and its supervisor: :func:`mind.shell.effects.running_effects`)
    is journaled now (:meth:`Interactions.expect`), so a library caller sees
    it in ``pending_interactions()`` and may answer it before iterating the
    turn. Only where a person can answer (the chart's ``running_choices``
    offer ``kill``); headless only waits.

    Returns:
        How many were journaled.

    Raises:
        JournalWriteError: a question could not be made durable.
    """
    choices = running_choices("running", can_ask=session.interactive)
    effects_dir = session.tools.effects_dir
    if effects_dir is None or not person_answers(choices):
        return 0
    records = session.journal.records
    starts = {
        r.effect_id: r
        for r in records
        if isinstance(r, jr.ToolStarted) and r.turn_id == turn_id and isinstance(r.effect_id, str)
    }
    journaled = 0
    for found in running_effects(records, session.session_id, effects_dir):
        started = starts.get(found.effect_id)
        if found.turn_id != turn_id or started is None:
            continue
        call = ToolCall(call_id=found.call_id, name=started.name, arguments=found.arguments)
        request = running_question(
            str(session.cwd), turn_id, call, found.effect_id, started.recorded_at_ms, choices
        )
        journaled += session.interactions.expect(request)
    return journaled


@dataclass(frozen=True)
class _Asking:
    """Why one call is asked.

    Attributes:
        purpose: ``run`` or ``rerun_outside`` (mind.effects.identity.Purpose).
        reason: the policy's words.
        remedy: the flags that would let it run without asking (for a
            session that cannot ask), or None.
        sandboxed: a shell command runs inside the sandbox.
        crossed: it crosses the workspace boundary (never covered by a grant).
        effect_id: the invocation's effect id (docs/design/effects.md §1),
            which the interaction id is derived from.
    """

    purpose: Purpose
    reason: str
    remedy: str | None
    sandboxed: bool
    crossed: bool
    effect_id: str


_KILLED_NOTE: Final = (
    "[killed at the user's request: this command was still running after mind restarted, "
    "and the user stopped it and every process it started]\n"
)
"""What the model reads before a command's own output when the person
stopped it with ``kill`` at a ``running`` question."""


def _utc(ms: int) -> str:
    """Unix epoch ms as ``YYYY-MM-DD HH:MM:SS`` (UTC)."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _known(facts: UnknownEffect) -> str:
    """A reconcile card's reason: what is known of the unknown effect."""
    when = _utc(facts.prepared_at_ms)
    why = facts.reason or MIND_STOPPED
    return (
        f"this {facts.name} call started at {when} UTC and {why}, so it left no exit "
        "status or output mind can trust; it may have run fully, in part or not at all"
    )


def reconcile_resolution(
    decision: jr.InteractionDecision, choices: tuple[EffectResolution, ...]
) -> EffectResolution:
    """What a reconcile question's resolution does to its effect: the
    person's choice when it was one of ``choices``; anything else —
    ``declined`` (nobody could answer), a decision not offered — is
    ``tell_model``: an unknown effect is never re-run without that word
    (docs/design/effects.md §4). ``kill`` is never among them: a command
    still running gets the ``running`` question instead (:meth:`ToolCalls._collect`)."""
    for choice in choices:
        if decision.value == choice:
            return choice
    return "tell_model"


def call_event(
    turn_id: str, call: jr.RecordedToolCall | ToolCall, *, already_running: bool = False
) -> ev.ToolCallEvent:
    """``tool.call`` for ``call`` of turn ``turn_id`` (arguments parsed when
    valid JSON, else the raw string); ``already_running`` for a command a
    crash left running (waited for, not called again)."""
    return ev.ToolCallEvent(
        turn_id=turn_id,
        call_id=call.call_id,
        name=call.name,
        arguments=_display_arguments(call.arguments),
        already_running=True if already_running else msgspec.UNSET,
    )


def result_event(result: jr.ToolResult) -> ev.ToolResultEvent:
    """``tool.result`` for the journaled ``result``: its status and output,
    ``collected`` when its supervisor's exit record gave it after a restart
    (evidence ``supervisor``) with ``ran_s``, the command's own run time,
    when recorded; ``outcome_unknown`` when the effect's outcome is unknown
    (the model is told so: nothing was interrupted)."""
    collected = result.evidence == jr.EffectEvidence.supervisor
    ran_ms = result.ran_ms
    return ev.ToolResultEvent(
        turn_id=result.turn_id,
        call_id=result.call_id,
        status=ev.ToolStatus(result.status),
        output=result.output,
        collected=True if collected else msgspec.UNSET,
        ran_s=ran_ms / 1000 if isinstance(ran_ms, int) else msgspec.UNSET,
        outcome_unknown=(
            True if result.effect_outcome == jr.EffectOutcome.unknown else msgspec.UNSET
        ),
    )


def _display_arguments(raw: str) -> Any:
    """Arguments for events: the parsed JSON value when valid, else the raw text
    (lone surrogates replaced: an event must always encode as UTF-8)."""
    try:
        return without_lone_surrogates(json.loads(raw or "{}"))
    except ValueError:
        return replace_lone_surrogates(raw)
