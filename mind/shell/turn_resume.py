"""Resuming a crashed turn (docs/design/recovery.md §8): its machine rebuilt
from the journal, then the unanswered calls of its tool round run again.

Startup decided the turn goes on (:func:`mind.shell.recovery.resumable_turn`,
the pure guard :func:`mind.machines.turn_replay.resume_plan`) and left the
calls it re-drives unanswered; :class:`mind.shell.turn_driver.TurnDriver`
calls :func:`resumed_machine` in place of a fresh machine and sends it
``resume``: the turn chart then names :class:`~mind.machines.turn.RedriveCalls`
(performed by :func:`redrive_round`) or nothing (the round was fully
answered), and the loop goes on (the next model round gets the real results).

The seam for interactions and effects (issue #10): :func:`redrive_round` is
the one place a resumed call is checked against the journal before it runs
— a call whose result is recorded is skipped, never run again — and every
other call goes through :meth:`mind.shell.tool_calls.ToolCalls.run`, which
owns approvals and effects (an approval already answered, an effect already
prepared: theirs to recognise from the journal).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from mind.call_pairing import PairedCall
from mind.conversation import ToolCall
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.turn_replay import ResumePlan, replayed_turn

if TYPE_CHECKING:
    from mind.machines.turn import TurnMachine
    from mind.shell.session import Session
    from mind.shell.tool_calls import ToolCalls
    from mind.shell.turn_handle import Turn

__all__ = [
    "collected_calls",
    "last_round",
    "redrive_round",
    "resumed_event",
    "resumed_machine",
]


def resumed_machine(session: Session, plan: ResumePlan) -> TurnMachine:
    """The turn machine of ``plan``'s turn rebuilt from the journal (state
    ``running_tools``), with the session's retry policy and round limit.

    The rounds it already had were allowed when they ran: a limit lowered
    since is raised to their number, so the replay still ends inside the
    round and the turn fails on the limit only after the round's calls are
    answered (at its ``tools_done``). A journal the chart refuses gives an
    ``aborted`` machine: :func:`redrive_round` then refuses to run anything.
    """
    records = session.journal.records
    rounds = sum(isinstance(r, jr.ModelRound) and r.turn_id == plan.turn_id for r in records)
    return replayed_turn(
        records,
        plan.turn_id,
        retry=session.retry_policy,
        max_rounds=max(session.config.max_rounds, rounds),
    )


def resumed_event(
    plan: ResumePlan, collected: list[PairedCall], running: Iterable[str] = ()
) -> ev.TurnResumedEvent:
    """``turn.resumed``: published in place of ``turn.started``.

    Args:
        plan: the resumed turn's plan (``call_ids``: its re-driven calls).
        collected: calls whose results were collected after the restart
            (:func:`collected_calls`): ``collected_ids``.
        running: call ids of the turn whose command still runs under its
            supervisor (:meth:`mind.shell.session.Session.running_effects`):
            those of ``call_ids`` are ``running_call_ids`` — waited for, not run.

    ``unknown_call_ids``: the plan's ``asked`` calls (outcome unknown, the
    person asked before anything runs), none of them running.
    """
    call_ids = [p.call.call_id for p in plan.redrive]
    still = set(running)
    waited = [c for c in call_ids if c in still]
    asked = [p.call.call_id for p in plan.asked if p.call.call_id not in still]
    return ev.TurnResumedEvent(
        turn_id=plan.turn_id,
        call_ids=call_ids,
        running_call_ids=waited if waited else msgspec.UNSET,
        unknown_call_ids=asked or msgspec.UNSET,
        # Only when some were: a resume with none reads as before.
        collected_ids=[p.call.call_id for p in collected] or msgspec.UNSET,
    )


def collected_calls(calls: ToolCalls, turn_id: str) -> list[PairedCall]:
    """The calls of ``turn_id``'s last round whose result its command's
    supervisor gave after the restart (evidence ``supervisor``: collected
    at open, effects.md §4), in call order. No live event ever showed them:
    the resumed turn shows each (``tool.call``, ``tool.result``) before it
    goes on — the model gets them, so the person and JSON consumers do too."""
    index = calls.effects.turn_index(turn_id)
    return [
        p
        for p in last_round(index.pairing.calls)
        if p.result is not None and p.result.evidence == jr.EffectEvidence.supervisor
    ]


def last_round(paired: list[PairedCall]) -> list[PairedCall]:
    """The calls of the last ``model_round`` among ``paired`` (a turn's calls
    paired per occurrence, :class:`mind.call_pairing.CallPairing`), in call
    order."""
    if not paired:
        return []
    last = paired[-1].round_at
    return [p for p in paired if p.round_at == last]


async def redrive_round(calls: ToolCalls, turn: Turn, machine: TurnMachine) -> int:
    """Perform :class:`~mind.machines.turn.RedriveCalls`: run the unanswered
    calls of the resumed turn's round, in call order.

    The turn chart decided this (its ``resume`` event, taken only while
    ``executing`` and when the plan re-drives calls). Before each call the
    journal is read again: a call with its ``tool_result`` (answered before
    the crash, or given the synthetic "outcome unknown" result by startup
    because it may have changed something) is skipped — never run twice.
    The caller sends ``tools_done`` afterwards, as after any round.

    Returns:
        How many calls ran.

    Raises:
        What :meth:`ToolCalls.run` raises (a journal write failed: the
        driver fails the turn).
    """
    ran = 0
    # Paired once for the round; each call's result is then read from the
    # records appended since (the effects' index follows the journal).
    index = calls.effects.turn_index(turn.turn_id)
    for paired in last_round(index.pairing.calls):
        calls.effects.turn_index(turn.turn_id)
        if paired.result is not None:
            continue
        recorded = paired.call
        call = ToolCall(
            call_id=recorded.call_id,
            name=recorded.name,
            arguments=recorded.arguments,
            provider_fields=(
                dict(recorded.provider_fields) if isinstance(recorded.provider_fields, dict) else {}
            ),
        )
        await calls.run(turn, machine, call)
        ran += 1
    return ran
