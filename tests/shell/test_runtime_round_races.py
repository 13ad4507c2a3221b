"""A turn's rarer paths, driven through the real runtime (scripted provider,
real journal and inbox): input arriving between a round's last delta and its
end, the runtime closing in the middle of a round, a script with no reply
left. The scripted provider's ``pause`` step (``tests/support/gate.py``)
holds the round exactly where the race is, so each test is deterministic."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import Journal
from tests.support.gate import Gate


def _config(path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    path.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(path), approval="never", env={})


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


async def _drain(turn: mind.Turn) -> None:
    async for _ in turn:
        pass


def test_steering_sent_after_the_last_delta_is_answered_by_the_same_turn(tmp_path: Path) -> None:
    with Gate() as gate:
        replies = [{"text": "a first answer", "pause": str(gate.path)}, {"text": "steered answer"}]
        config = _config(tmp_path / "script.yaml", replies)

        async def main() -> tuple[mind.InputReceipt, mind.TurnOutcome, Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("first")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, turn)
                    # Every delta of the answer is out; the round has not ended.
                    assert await anyio.to_thread.run_sync(gate.wait_reached)
                    receipt = session.steer("and one more thing")
                    gate.release()
                return receipt, turn.outcome, session.journal.path

        receipt, outcome, path = anyio.run(main)
    assert receipt.disposition == "steering"
    assert outcome.status == "completed" and outcome.final_text == "steered answer"
    records = _records(path)
    assert len([r for r in records if isinstance(r, jr.TurnStarted)]) == 1  # one turn for both
    inputs = [r for r in records if isinstance(r, jr.UserMessage)]
    assert [(r.text, r.kind) for r in inputs] == [
        ("first", "prompt"),
        ("and one more thing", "steer"),
    ]
    assert [r.text for r in records if isinstance(r, jr.ModelRound)] == [
        "a first answer",
        "steered answer",
    ]
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done.acknowledged == [r.message_id for r in inputs]


def test_closing_the_runtime_mid_round_aborts_the_turn_and_its_input_replays_once(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with Gate() as gate:
        config = _config(tmp_path / "a.yaml", [{"text": "cut short", "pause": str(gate.path)}])

        async def close_mid_round() -> tuple[str, mind.Turn]:
            async with mind.Runtime.open(state_root=state) as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("do it")
                assert await anyio.to_thread.run_sync(gate.wait_reached)
                return session.session_id, turn  # leaving the block closes the runtime

        session_id, aborted = anyio.run(close_mid_round)
    assert aborted.outcome.status == "aborted"

    # Whether or not the cut round counts as a reply, the next one is this text.
    again = _config(tmp_path / "b.yaml", [{"text": "replayed"}, {"text": "replayed"}])

    async def reopen() -> tuple[list[str], mind.TurnOutcome, Path]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session(session_id, config=again, cwd=tmp_path)
            waiting = [m.text for m in session.waiting]
            turn = session.resume_pending()
            assert turn is not None
            return waiting, await turn.wait(), session.journal.path

    waiting, outcome, path = anyio.run(reopen)
    assert waiting == ["do it"]
    assert outcome.status == "completed" and outcome.final_text == "replayed"
    records = _records(path)
    ends = [(r.status, r.acknowledged) for r in records if isinstance(r, jr.TurnCompleted)]
    (prompt_id,) = {r.message_id for r in records if isinstance(r, jr.UserMessage)}
    assert ends == [("aborted", []), ("completed", [prompt_id])]  # consumed exactly once


def test_a_script_with_no_reply_left_fails_the_turn_and_consumes_its_input(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path / "script.yaml", [])

    async def main() -> tuple[mind.TurnOutcome, Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            return await session.run("anything?"), session.journal.path

    outcome, path = anyio.run(main)
    assert outcome.status == "failed"
    failure = outcome.event.failure
    assert failure is not None and failure.kind == ev.FailureKind.internal
    assert "script exhausted" in failure.message
    records = _records(path)
    (prompt,) = [r for r in records if isinstance(r, jr.UserMessage)]
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    # A replay would meet the same empty script: the input is consumed, not kept.
    assert done.status == "failed" and done.acknowledged == [prompt.message_id]


def test_steering_dropped_while_the_round_runs_never_reaches_the_model(tmp_path: Path) -> None:
    with Gate() as gate:
        config = _config(tmp_path / "script.yaml", [{"text": "only", "pause": str(gate.path)}])

        async def main() -> tuple[str, mind.TurnOutcome, Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("first")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, turn)
                    assert await anyio.to_thread.run_sync(gate.wait_reached)
                    receipt = session.steer("never mind")
                    dropped = session.drop(receipt.message_id)
                    gate.release()
                return dropped.text, turn.outcome, session.journal.path

        dropped, outcome, path = anyio.run(main)
    assert dropped == "never mind"
    assert outcome.status == "completed" and outcome.final_text == "only"
    records = _records(path)
    assert [r.text for r in records if isinstance(r, jr.UserMessage)] == ["first"]
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert len(done.acknowledged) == 1


def test_steering_sent_before_an_interrupt_is_answered_by_the_next_turn(tmp_path: Path) -> None:
    with Gate() as gate:
        replies = [{"text": "cut", "pause": str(gate.path)}, {"text": "next"}, {"text": "next"}]
        config = _config(tmp_path / "script.yaml", replies)

        async def main() -> tuple[list[str], Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("first")
                assert await anyio.to_thread.run_sync(gate.wait_reached)
                assert session.steer("then this").disposition == "steering"
                turn.interrupt()  # send_pending: what waits starts the next turn
                statuses = []
                async for event in session.events():
                    if isinstance(event, ev.TurnCompletedEvent):
                        statuses.append(str(event.status))
                return statuses, session.journal.path

        statuses, path = anyio.run(main)
    assert statuses == ["interrupted", "completed"]
    records = _records(path)
    turns = [r.turn_id for r in records if isinstance(r, jr.TurnStarted)]
    steer = [r for r in records if isinstance(r, jr.UserMessage) and r.text == "then this"]
    assert len(steer) == 1 and steer[0].turn_id == turns[1]  # the second turn, not the cut one
    ends = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert ends[1].acknowledged == [steer[0].message_id]


def test_input_of_an_answer_cut_at_the_output_cap_is_taken_again_by_the_next_turn(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "y" * (1024 * 1024 + 1)}]), encoding="utf-8")
    config = mind.resolve_config(
        provider="scripted", script=str(script), env={"MIND_MAX_OUTPUT_MIB": "1"}
    )

    async def main() -> tuple[list[str], list[str], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            first = await session.run("write a lot")
            turn = session.resume_pending()  # the input waits: the next turn claims it again
            assert turn is not None
            second = await turn.wait()
            return (
                [first.status, second.status],
                [m.text for m in session.waiting],
                (session.journal.path),
            )

    statuses, waiting, path = anyio.run(main)
    assert statuses == ["failed", "failed"]  # the same script meets the same cap
    assert waiting == ["write a lot"]  # never consumed, never lost
    ends = [r for r in _records(path) if isinstance(r, jr.TurnCompleted)]
    assert [(r.status, r.acknowledged) for r in ends] == [("failed", []), ("failed", [])]


def test_leaving_while_an_ordinary_round_streams_interrupts_the_turn(tmp_path: Path) -> None:
    """The turn chart's ``leave`` (the REPL's /exit, Ctrl+D) in a turn that is
    not waiting for a command a crash left running is an interrupt: the turn
    ends ``interrupted`` with its terminal record (docs/design/turn.md)."""
    with Gate() as gate:
        replies = [{"text": "a slow answer", "pause": str(gate.path)}]
        config = _config(tmp_path / "script.yaml", replies)

        async def main() -> tuple[mind.TurnOutcome, Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("first")
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_drain, turn)
                    assert await anyio.to_thread.run_sync(gate.wait_reached)
                    turn.leave()
                    gate.release()
                return turn.outcome, session.journal.path

        outcome, path = anyio.run(main)
    assert outcome.status == "interrupted"
    terminals = [r for r in _records(path) if isinstance(r, jr.TurnCompleted)]
    assert [t.status for t in terminals] == [jr.TurnStatus.interrupted]
