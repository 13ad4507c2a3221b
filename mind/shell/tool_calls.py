"""One tool call of a turn: validate the arguments, apply the approval
policy, ask the person through the session's interactions (or a standing
session grant: docs/design/interactions.md §5), run it (sandboxed or not) as
a prepared effect, journal its result (docs/design/effects.md §3).

One module (over 500 lines) because one tool call's steps share its
invocation (ids, decision, effect); the approval part (``approve``,
``_request``, ``_show``) is a candidate to move out, noted for a later change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

import anyio
import anyio.lowlevel
import msgspec

from mind.conversation import ToolCall
from mind.effects.boundary import Refusal, SandboxMode
from mind.effects.identity import interaction_id
from mind.effects.policy import (
    Access,
    crossing_reason,
    rerun_reason,
    standing_question,
    tool_decision,
)
from mind.effects.review import FileChange
from mind.effects.tools import parse_arguments
from mind.errors import ToolArgumentsError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.effect import Collect, ProcessFact, person_answers
from mind.machines.turn import RefuseCall, TurnMachine
from mind.shell import faults
from mind.shell.call_questions import Asking, CallQuestions, display_arguments
from mind.shell.effect_records import Invocation, UnknownEffect
from mind.shell.effects import SessionEffects
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
        self.questions = CallQuestions(session)
        """What a call asks the person (approval, ``running``, ``reconcile``)."""

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
            status, output, written = await self._execute(turn, machine, call, effects, inv)
            if inv.machine.prepared:
                faults.boundary("effect_executing")
            # commit redacts the result: mind's own keys never enter a result.
            result = effects.commit(inv, status, output, output_bytes=written)
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
        if isinstance(found, Collect):
            # The chart knows the turn waits for a command a crash left
            # running: leaving now (hang-up, /exit) leaves it running.
            machine.command_waited()
            collected = await self._collect(turn, effects, inv, found)
            machine.command_ended()
            if isinstance(collected, jr.ToolResult):
                return collected
            found = collected
        if isinstance(found, UnknownEffect):
            resolution = await self.questions.ask_reconcile(turn, machine, inv.call, found)
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
        return effects.commit(
            inv, outcome.status, outcome.output, output_bytes=outcome.output_bytes
        )

    async def _collect(
        self, turn: Turn, effects: SessionEffects, inv: Invocation, found: Collect
    ) -> jr.ToolResult | UnknownEffect:
        """Collect a command a crash left (:meth:`SessionEffects.collect`:
        waiting while it still runs). While it is waited for and the chart
        offers choices (``found.choices``: ``kill`` where a person can
        answer), a ``running`` question asks whether to stop it; ``kill``
        (journaled first, like every answer) stops its whole tree and its
        result says so. The question is cancelled (by ``recovery``) when the
        command ends on its own first; headless only waits. A kill that left
        no exit record is resolved ``killed`` by the effect chart (told the
        fact by :meth:`SessionEffects.collect`), never asked about.

        Returns:
            What the collect gave: the result, or an ``unknown`` effect's facts.

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
            return await effects.collect(inv, can_ask=can_ask, stop=stop)
        got: list[jr.ToolResult | UnknownEffect] = []
        state = {"ended": False, "killed": False}

        def note() -> str:
            return _KILLED_NOTE if state["killed"] else ""

        async with anyio.create_task_group() as tg:

            async def wait() -> None:
                got.append(
                    await effects.collect(
                        inv, can_ask=can_ask, note=note, stop=stop, killed=lambda: state["killed"]
                    )
                )
                state["ended"] = True
                tg.cancel_scope.cancel()  # the question is moot now

            async def ask() -> None:
                decision = await self.questions.ask_running(
                    turn, inv, found, ended=lambda: state["ended"]
                )
                if decision == jr.InteractionDecision.kill:
                    state["killed"] = effects.kill(inv)  # False: it ended meanwhile

            tg.start_soon(wait)
            tg.start_soon(ask)
        return got[0]

    async def _execute(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        effects: SessionEffects,
        inv: Invocation,
    ) -> tuple[str, str, int | None]:
        """Validate, ask if required, prepare, run. Returns ``(status, output,
        output_bytes)`` (:class:`~mind.shell.tools.ToolOutcome`'s)."""
        try:
            args = parse_arguments(call.name, call.arguments)
        except ToolArgumentsError as exc:
            return "error", str(exc), None
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
                now_where=self.questions.where(
                    call.name, call.name == "shell" and decision.sandboxed
                ),
            )
        if decision.action == "refuse":
            # Every branch passes through the turn chart (issue #9): an
            # outright refusal is its call_refused event.
            refused = machine.call_refused(
                call_id=call.call_id, reason=decision.reason or "refused"
            )
            return "denied", next(e.reason for e in refused if isinstance(e, RefuseCall)), None
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
            refusal = await self.questions.approve(
                turn,
                machine,
                call,
                args,
                Asking(
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
                return "denied", refusal, None
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
                refusal = await self.questions.approve(
                    turn,
                    machine,
                    call,
                    args,
                    Asking("rerun_outside", offer, None, False, False, effect_id=inv.effect_id),
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
        return result.status, result.output, result.output_bytes

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


_KILLED_NOTE: Final = (
    "[killed at the user's request: this command was still running after mind restarted, "
    "and the user stopped it and every process it started]\n"
)
"""What the model reads before a command's own output when the person
stopped it with ``kill`` at a ``running`` question."""


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
        arguments=display_arguments(call.arguments),
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
