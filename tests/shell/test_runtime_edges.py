"""Edges of the turn chart taken by the machines the runtime itself creates
: ``fail`` and ``abort`` from ``active``, ``steering_claimed`` in
``draining``. ``abort`` / ``fail`` from ``accepted`` need ``turn_started``
itself to fail to be written (``fail``: a storage error; ``abort``: never —
``start`` follows the durable start with no await in between, so the
runtime's cancellation cannot land there)."""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated.turn_chart import TurnChart
from tests.support.fake_model import FakeModel
from tests.support.transition_coverage import TransitionCoverage


def _taken(coverage: TransitionCoverage) -> set[str]:
    return {f"{e.source} --{e.event}--> {e.target}" for e, n in coverage.hits.items() if n}


def test_a_script_that_runs_out_mid_turn_fails_it_from_active(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([{"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}]),
        encoding="utf-8",
    )
    config = mind.resolve_config(provider="scripted", script=str(script), env={})
    coverage = TransitionCoverage(TurnChart)

    async def main() -> mind.TurnOutcome:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            s.turn_observers.append(coverage)
            return await s.run("go")

    outcome = anyio.run(main)
    assert outcome.status == "failed"
    assert isinstance(outcome.event.failure, ev.Failure)
    assert outcome.event.failure.kind == ev.FailureKind.internal
    assert "active --fail--> failed" in _taken(coverage)


def test_closing_the_runtime_mid_turn_aborts_it_from_active(tmp_path: Path) -> None:
    with FakeModel(tool_sleep_s=5) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )
        coverage = TransitionCoverage(TurnChart)

        async def main() -> mind.Turn:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.turn_observers.append(coverage)
                turn = s.submit("TOOL go")
                async for event in turn:
                    if isinstance(event, ev.ToolCallEvent):
                        break  # leave the runtime while the tool runs
                return turn

        turn = anyio.run(main)
    assert turn.outcome.status == "aborted"
    assert "active --abort--> aborted" in _taken(coverage)


def test_steering_between_the_last_delta_and_the_seal_is_claimed_in_draining(
    tmp_path: Path,
) -> None:
    with FakeModel(chunk_delay_s=0.005) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )
        coverage = TransitionCoverage(TurnChart)

        async def main() -> list[str]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.turn_observers.append(coverage)
                s.send("hello", message_id="m1")
                answers = []
                async for event in s.events():
                    if isinstance(event, ev.MessageDeltaEvent) and not answers:
                        answers.append("steered")
                        s.steer("one more thing", message_id="m2")
                    elif isinstance(event, ev.MessageCompletedEvent):
                        answers.append(event.text)
                return answers

        answers = anyio.run(main)
    assert "draining --steering_claimed--> sampling" in _taken(coverage)
    assert answers[-1] == "saw 2 user message(s): hello | one more thing"


def test_a_journal_replaced_before_the_turn_starts_fails_it_from_accepted(
    tmp_path: Path,
) -> None:
    """The journal is replaced on disk between accepting the input and the
    turn's start (``turn_started`` cannot be written to it): the turn fails
    from ``accepted`` and its input is not lost (it stays in ``inbox.json``)."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "never asked"}]), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={})
    coverage = TransitionCoverage(TurnChart)

    async def main() -> tuple[str, bytes]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            s.turn_observers.append(coverage)
            path = s.journal.path
            turn = s.submit("go")  # the turn task has not run yet: no await so far
            path.rename(path.with_name("journal.moved"))
            path.write_bytes(b"")
            outcome = await turn.wait()
            return outcome.status, (path.parent / "inbox.json").read_bytes()

    status, inbox = anyio.run(main)
    # The failed turn's terminal cannot be written either: with no durable
    # record of the turn it reports what the next open concludes (aborted).
    assert status == "aborted"
    assert "accepted --fail--> failed" in _taken(coverage)
    assert b'"go"' in inbox
