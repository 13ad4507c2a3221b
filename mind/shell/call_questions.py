"""The questions one tool call asks the person (docs/design/interactions.md
§2, §5, §6; docs/design/effects.md §4): approval of a call (or the session
grant that answers it), the ``running`` question about a command a crash
left running (``kill``), the ``reconcile`` question about an effect whose
outcome is unknown; their ``interaction_requested`` records (the card:
command or diff, cwd, reason, choices) and the events that publish them.

Size: just over 500 lines because the three questions share one record
builder, one card text and one set of publishing hooks; split, each would
carry its own copy of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, final

import anyio
import anyio.lowlevel
import msgspec

from mind.conversation import (
    ToolCall,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.effects.grants import GrantScope, covers, describe, grant_scope
from mind.effects.identity import Purpose, interaction_id
from mind.effects.policy import written_paths
from mind.effects.review import FileChange, approval_text, cut_for_display
from mind.effects.tools import parse_arguments
from mind.errors import InteractionTooLarge, ToolArgumentsError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.effect import Collect, person_answers, running_choices
from mind.machines.effect import Resolution as EffectResolution
from mind.machines.turn import RefuseCall, RunGranted, TurnMachine
from mind.shell.effect_records import MIND_STOPPED, Invocation, UnknownEffect
from mind.shell.interactions import APPROVAL_CHOICES, Resolution
from mind.shell.running_effects import running_effects
from mind.shell.turn_handle import Turn

if TYPE_CHECKING:
    from mind.shell.session import Session

__all__ = [
    "Asking",
    "CallQuestions",
    "display_arguments",
    "expect_running_questions",
    "reconcile_resolution",
    "running_question",
]


@final
class CallQuestions:
    """Asks the questions of one session's tool calls (one instance per
    :class:`~mind.shell.tool_calls.ToolCalls`), through its interactions
    (:mod:`mind.shell.interactions`: journaled before the card is shown,
    the first answer wins)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def approve(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        args: dict[str, Any],
        asking: Asking,
        changes: list[FileChange],
        problem: str | None,
    ) -> str | None:
        """Approve one call through a session grant or an interaction
        (docs/design/interactions.md §2, §5). Returns None when it may run,
        else the denial the model sees."""
        where = self.where(call.name, asking.sandboxed)
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
            resolution = await self._ask(
                turn,
                call,
                request,
                can_answer=can_answer,
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
        self, turn: Turn, resolution: Resolution, asking: Asking, scope: GrantScope | None
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

    def where(self, name: str, sandboxed: bool) -> str | None:
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
        asking: Asking,
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

    async def _ask(
        self,
        turn: Turn,
        call: ToolCall,
        request: jr.InteractionRequested,
        *,
        can_answer: bool,
        explicit_stop: Callable[[], bool],
        stop_by: Callable[[], jr.InteractionBy] = lambda: jr.InteractionBy.person,
    ) -> Resolution:
        """:meth:`mind.shell.interactions.Interactions.ask` of ``request``
        about ``call``, published on ``turn`` (card, durable request,
        resolution).

        Raises:
            InteractionTooLarge: the question is too large to journal.
            JournalWriteError: the question or its answer could not be made durable.
        """
        return await self.session.interactions.ask(
            request,
            can_answer=can_answer,
            show=lambda r, again: self._show(turn, call, r, again),
            resolved=lambda r: self._resolved(turn, call, r),
            announce=lambda r, again: self._announce(turn, r, again),
            explicit_stop=explicit_stop,
            stop_by=stop_by,
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
                arguments=display_arguments(call.arguments),
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

    async def ask_running(
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
            resolution = await self._ask(
                turn,
                call,
                request,
                can_answer=person_answers(found.choices),
                # Leaving (hang-up, /exit) keeps it open: the next open asks again.
                explicit_stop=lambda: ended() or turn.stops_commands,
                stop_by=lambda: jr.InteractionBy.recovery if ended() else jr.InteractionBy.person,
            )
        except InteractionTooLarge:
            return None
        return resolution.decision

    async def ask_reconcile(
        self, turn: Turn, machine: TurnMachine, call: ToolCall, facts: UnknownEffect
    ) -> EffectResolution:
        """The resolution of an ``unknown`` effect, asked as a ``reconcile``
        interaction (id ``facts.interaction_id``, purpose ``unknown_outcome``,
        the choices ``facts.choices``): journaled before its card is shown,
        the first answer wins, offered again under the same id after a crash
        (docs/design/interactions.md §6). Where nobody can answer (the
        choices are ``tell_model`` alone) it is ``declined`` and the model is
        told; a question too large to ask is told too — never a re-run
        without a person's word (docs/design/effects.md §4). While a person
        is asked the turn chart is at the card (``question_asked``), so a
        hang-up or leaving there leaves the question for the next open.

        Raises:
            JournalWriteError: the question or its answer could not be made durable.
        """
        asks = person_answers(facts.choices)
        if asks:
            machine.question_asked()
        try:
            resolution = await self._ask(
                turn,
                call,
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
                can_answer=asks,
                explicit_stop=lambda: turn.stopped_by_person,
            )
        except InteractionTooLarge:
            resolution = None
        # Only an answer (or a refusal) leaves the card: a cancelled wait
        # stays there, so the chart decides what a hang-up, leaving or Stop means.
        if asks:
            machine.approval_answered()
        if resolution is None:
            return "tell_model"
        return reconcile_resolution(resolution.decision, facts.choices)


@dataclass(frozen=True)
class Asking:
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
    the journal and its supervisor: :func:`mind.shell.running_effects.running_effects`)
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
    still running gets the ``running`` question instead
    (:meth:`mind.shell.tool_calls.ToolCalls._collect`)."""
    for choice in choices:
        if decision.value == choice:
            return choice
    return "tell_model"


def display_arguments(raw: str) -> Any:
    """Arguments for events: the parsed JSON value when valid, else the raw text
    (lone surrogates replaced: an event must always encode as UTF-8)."""
    try:
        return without_lone_surrogates(json.loads(raw or "{}"))
    except ValueError:
        return replace_lone_surrogates(raw)
