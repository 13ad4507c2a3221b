"""The reconcile question (docs/design/effects.md §4, interactions.md §6): a
shell call a crash left prepared, re-driven in a session where a person can
answer, is asked about as a ``reconcile`` interaction — journaled before its
card is shown, answered by id, first answer wins, offered again under the
same id after the asking process stopped — and is re-run only on ``rerun``.
A real hosted session, its journal file and real shell processes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import mind
from mind.conversation import ToolCall
from mind.effects.identity import interaction_id
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.effects import SessionEffects
from mind.shell.interactions import Answered, NotTaken
from mind.shell.journal import read_records
from mind.shell.session import Session
from mind.shell.tool_calls import ToolCalls
from mind.shell.turn_handle import Turn
from tests.support import records as rec

TURN = "turn_reconcile"
D = jr.InteractionDecision
CALL = ToolCall(call_id="c1", name="shell", arguments='{"command": "echo once >> ran"}')


async def _card(turn: Turn) -> ev.ApprovalRequestedEvent:
    async for event in turn:
        if isinstance(event, ev.ApprovalRequestedEvent):
            return event
    raise AssertionError("the turn ended without a card")


def _crashed_session(tmp_path: Path) -> tuple[Path, mind.Config]:
    """A session whose journal holds a prepared shell call without a result
    and without evidence of how it ended."""
    script = tmp_path / "s.yaml"
    script.write_text("- text: unused\n", encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})
    return script, config


async def _redrive(
    session: Session, answer: Callable[[Session, ev.ApprovalRequestedEvent], Any]
) -> tuple[ev.ApprovalRequestedEvent, Any]:
    """Re-drive CALL in ``session`` and answer its card with ``answer``."""
    turn = Turn(session, TURN, [])
    got: list[Any] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ToolCalls(session).run, turn, rec.tools_machine(), CALL)
            card = await _card(turn)
            got.append(answer(session, card))
    return card, got[0]


def _prepare(session: Session) -> str:
    journal = session.journal
    journal.append(rec.turn_started(TURN))
    recorded = jr.RecordedToolCall(call_id=CALL.call_id, name=CALL.name, arguments=CALL.arguments)
    journal.append(rec.model_round(TURN, "", [recorded]))
    effects = SessionEffects(session.session_id, journal)
    inv = effects.propose(TURN, CALL)
    effects.prepare(inv)
    # Its supervisor ran (recorded), then mind "crashed" and the directory
    # with the exit record is gone: no evidence, the outcome is unknown.
    effects.running(inv, supervisor_pid=2**22 + 1, supervisor_start="gone")
    return inv.effect_id


def _journal(tmp_path: Path, session_id: str) -> list[jr.JournalRecord]:
    records, _ = read_records(tmp_path / "state" / "sessions" / session_id / "journal.jsonl")
    return records


def test_rerun_answered_by_a_person_runs_the_command_once_more(tmp_path: Path) -> None:
    _script, config = _crashed_session(tmp_path)

    def rerun(session: Session, card: ev.ApprovalRequestedEvent) -> Any:
        assert isinstance(card.interaction_id, str)
        wrong = session.answer(card.interaction_id, "approve_once")  # not what it offers
        assert isinstance(wrong, NotTaken) and wrong.why == "not_offered"
        return session.answer(card.interaction_id, "rerun")

    async def main() -> tuple[str, str, ev.ApprovalRequestedEvent, Any]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            effect = _prepare(session)
            card, answered = await _redrive(session, rerun)
            return session.session_id, effect, card, answered

    sid, effect, card, answered = anyio.run(main)
    iid = interaction_id(effect, "unknown_outcome")
    assert answered == Answered(iid, D.rerun)
    assert card.kind == ev.Kind.reconcile and card.interaction_id == iid
    assert card.choices == [ev.Choice.rerun, ev.Choice.mark_failed, ev.Choice.tell_model]
    assert "started at" in card.reason and "no exit status" in card.reason
    assert card.text == "echo once >> ran"
    records = _journal(tmp_path, sid)
    kinds = [type(r).__name__ for r in records if not isinstance(r, jr.SessionStarted)]
    # Requested (fsync) before the card; resolved before the re-run; one result.
    at = {k: kinds.index(k) for k in ("InteractionRequested", "InteractionResolved")}
    assert at["InteractionRequested"] < at["InteractionResolved"] < kinds.index("EffectReconciled")
    (asked,) = [r for r in records if isinstance(r, jr.InteractionRequested)]
    assert (asked.kind, asked.purpose, asked.effect_id) == (
        jr.InteractionKind.reconcile,
        jr.Purpose.unknown_outcome,
        effect,
    )
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    assert reconciled.resolution == jr.EffectResolution.rerun
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert (result.status, result.effect_outcome) == (jr.ToolStatus.ok, jr.EffectOutcome.committed)
    assert (tmp_path / "ran").read_text() == "once\n"


@pytest.mark.parametrize("decision", ["mark_failed", "tell_model"])
def test_mark_failed_or_tell_model_never_runs_it(tmp_path: Path, decision: str) -> None:
    _script, config = _crashed_session(tmp_path)

    async def main() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            _prepare(session)
            await _redrive(
                session,
                lambda s, card: s.answer(card.interaction_id, decision),  # type: ignore[arg-type]
            )
            return session.session_id

    records = _journal(tmp_path, anyio.run(main))
    assert not (tmp_path / "ran").exists()
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert reconciled.resolution.value == decision
    assert result.effect_outcome == (
        jr.EffectOutcome.failed if decision == "mark_failed" else jr.EffectOutcome.unknown
    )
    assert "It was not run again" in result.output


def test_an_unanswered_question_is_offered_again_with_its_id(tmp_path: Path) -> None:
    """The asking process stops (not the person): the question stays open; the
    next re-drive offers the same id again, never journaled twice."""
    _script, config = _crashed_session(tmp_path)

    async def main() -> tuple[str, list[ev.ApprovalRequestedEvent]]:
        cards: list[ev.ApprovalRequestedEvent] = []
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            _prepare(session)
            turn = Turn(session, TURN, [])
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ToolCalls(session).run, turn, rec.tools_machine(), CALL)
                    cards.append(await _card(turn))
                    tg.cancel_scope.cancel()  # the process stops; nobody answered
            card, _ = await _redrive(
                session,
                lambda s, c: s.answer(c.interaction_id, "tell_model"),  # type: ignore[arg-type]
            )
            cards.append(card)
            return session.session_id, cards

    sid, cards = anyio.run(main)
    assert cards[0].interaction_id == cards[1].interaction_id
    assert (cards[0].offered_again, cards[1].offered_again) == (False, True)
    records = _journal(tmp_path, sid)
    assert len([r for r in records if isinstance(r, jr.InteractionRequested)]) == 1
    assert len([r for r in records if isinstance(r, jr.InteractionResolved)]) == 1
    assert not (tmp_path / "ran").exists()


def test_nobody_can_answer_declined_and_told(tmp_path: Path) -> None:
    """Headless: the question is journaled and declined; the command never re-runs."""
    _script, config = _crashed_session(tmp_path)

    async def main() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            _prepare(session)
            with anyio.fail_after(10):
                await ToolCalls(session).run(Turn(session, TURN, []), rec.tools_machine(), CALL)
            return session.session_id

    records = _journal(tmp_path, anyio.run(main))
    (asked,) = [r for r in records if isinstance(r, jr.InteractionRequested)]
    (resolved,) = [r for r in records if isinstance(r, jr.InteractionResolved)]
    assert asked.choices == [D.tell_model]
    assert (resolved.decision, resolved.by) == (D.declined, jr.InteractionBy.headless)
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    assert reconciled.resolution == jr.EffectResolution.tell_model
    assert not (tmp_path / "ran").exists()
