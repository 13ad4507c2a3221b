"""An approval left unanswered by ``kill -9`` across a reopen with other
flags (docs/design/interactions.md §6): the durable question is answered
before the call runs, whatever the reopening policy says — offered again with
its id where someone can answer, ``declined`` where nobody can — and it is
listed as pending right after ``open_session``.

Real parts: a child process asks (``--approval untrusted``) and is killed
with SIGKILL while the card is shown; the session is reopened in a fresh
runtime with ``--approval on-request``, under which the command would run
unasked."""

from __future__ import annotations

from pathlib import Path

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.interactions import Answered
from mind.shell.journal import read_records
from tests.support.killed_at_card import killed_at_the_card

DEADLINE_S = 20
COMMAND = "echo ran >> counter.txt"


def _killed_at_the_card(tmp_path: Path) -> tuple[str, str, Path]:
    """A session killed (SIGKILL) while the approval of :data:`COMMAND` was
    shown: its id, the question's id, and the script."""
    return killed_at_the_card(tmp_path, COMMAND)


def _on_request(script: Path) -> mind.ResolvedConfig:
    # What `mind resume --script s.yaml` resolves without --approval: on-request,
    # under which a workspace-write `echo >> file` runs in the sandbox unasked.
    return mind.resolve_config(provider="scripted", script=str(script), env={})


def _records(tmp_path: Path, session_id: str) -> list[jr.JournalRecord]:
    records, _report = read_records(tmp_path / "state" / "sessions" / session_id / "journal.jsonl")
    return records


def test_reopened_headless_with_a_laxer_policy_the_question_is_declined_not_run(
    tmp_path: Path,
) -> None:
    session_id, interaction_id, script = _killed_at_the_card(tmp_path)

    async def reopen() -> list[ev.Event]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(session_id, config=_on_request(script), interactive=False)
            assert s.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                return [e async for e in s.resumed_turn]

    events = anyio.run(reopen)
    assert not (tmp_path / "counter.txt").exists()
    resolved = [r for r in _records(tmp_path, session_id) if isinstance(r, jr.InteractionResolved)]
    assert [(r.interaction_id, r.decision, r.by) for r in resolved] == [
        (interaction_id, jr.InteractionDecision.declined, jr.InteractionBy.headless)
    ]
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert result.status == "denied"
    # What is true here: declined because nobody could answer; it is resolved,
    # so `mind resume` shows no card to answer (the old text promised one).
    assert "no person could answer" in result.output
    assert "ask the user to run it again" in result.output
    assert "mind resume" not in result.output and "never answered" not in result.output


def test_reopened_with_a_laxer_policy_the_same_card_comes_back_and_runs_once(
    tmp_path: Path,
) -> None:
    session_id, interaction_id, script = _killed_at_the_card(tmp_path)
    asked: list[ev.ApprovalRequestedEvent] = []

    async def reopen() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(session_id, config=_on_request(script), interactive=True)
            assert s.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                async for event in s.resumed_turn:
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        asked.append(event)
                        assert not (tmp_path / "counter.txt").exists()  # not before the answer
                        assert isinstance(s.answer(event.interaction_id, "yes"), Answered)

    anyio.run(reopen)
    assert [(a.interaction_id, a.offered_again) for a in asked] == [(interaction_id, True)]
    assert (tmp_path / "counter.txt").read_text() == "ran\n"


def test_right_after_open_the_crashed_question_is_pending_and_can_be_answered(
    tmp_path: Path,
) -> None:
    session_id, interaction_id, script = _killed_at_the_card(tmp_path)

    async def reopen() -> list[str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            config = mind.resolve_config(
                provider="scripted", script=str(script), approval="untrusted", env={}
            )
            s = await rt.open_session(session_id, config=config, interactive=True)
            waiting = [r.interaction_id for r in s.pending_interactions()]
            assert isinstance(s.answer(interaction_id, "approve_once"), Answered)
            assert s.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                async for event in s.resumed_turn:
                    assert not isinstance(event, ev.ApprovalRequestedEvent)  # answered already
            return waiting

    assert anyio.run(reopen) == [interaction_id]
    assert (tmp_path / "counter.txt").read_text() == "ran\n"


def test_reopened_to_run_it_elsewhere_the_old_question_does_not_cover_it(tmp_path: Path) -> None:
    session_id, _iid, script = _killed_at_the_card(tmp_path)  # asked for the sandbox
    config = mind.resolve_config(
        provider="scripted",
        script=str(script),
        approval="untrusted",
        sandbox="danger-full-access",
        env={},
    )

    async def reopen() -> list[ev.Event]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(session_id, config=config, interactive=True)
            assert s.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                return [e async for e in s.resumed_turn]

    events = anyio.run(reopen)
    assert not any(isinstance(e, ev.ApprovalRequestedEvent) for e in events)
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert result.status == "denied" and "outside the sandbox" in result.output
    assert not (tmp_path / "counter.txt").exists()
