"""kill -9 while an approval card is shown (docs/design/interactions.md §2, §6):
the request the person saw is on disk with its id (it was fsynced before the
event), nothing was resolved, the call never ran; reopening the session
resumes that turn (docs/design/recovery.md §8), which offers the same
question again under its id; approving runs the call once."""

from __future__ import annotations

from pathlib import Path

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.interactions import Answered
from mind.shell.journal import read_records
from tests.support.killed_at_card import killed_at_the_card


def test_a_card_shown_then_kill_9_is_on_disk_unresolved_and_never_ran(tmp_path: Path) -> None:
    session_id, interaction_id, script = killed_at_the_card(tmp_path, "touch ran")
    path = tmp_path / "state" / "sessions" / session_id / "journal.jsonl"
    records, _report = read_records(path)
    (asked,) = [r for r in records if isinstance(r, jr.InteractionRequested)]
    assert asked.interaction_id == interaction_id and asked.text == "touch ran"
    assert asked.cwd == str(tmp_path)
    assert not any(isinstance(r, jr.InteractionResolved) for r in records)
    assert not any(isinstance(r, jr.ToolStarted) for r in records)
    assert not (tmp_path / "ran").exists()
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )

    async def reopen() -> tuple[ev.ApprovalRequestedEvent, object]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(session_id, config=config, interactive=True)
            assert [r.interaction_id for r in s.interactions.log.recoverable()] == [interaction_id]
            turn = s.resumed_turn
            assert turn is not None
            cards: list[tuple[ev.ApprovalRequestedEvent, object]] = []
            with anyio.fail_after(20):
                async for event in turn:  # to the turn's end
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        cards.append((event, s.answer(interaction_id, "approve_once")))
            (only,) = cards
            return only

    card, answered = anyio.run(reopen)
    assert (card.interaction_id, card.offered_again) == (interaction_id, True)
    assert answered == Answered(interaction_id, jr.InteractionDecision.approve_once)
    assert (tmp_path / "ran").exists()
    records, _report = read_records(path)
    assert len([r for r in records if isinstance(r, jr.InteractionRequested)]) == 1
    assert len([r for r in records if isinstance(r, jr.ToolStarted)]) == 1
