"""The round limit (``max_rounds``, docs/design/turn.md §5) decided by the turn
chart's guard ``within_round_limit``, through the real runtime: a tool loop
stops at the limit after its tool results, and steering claimed when the
limit is reached is not answered by another round. Both fail the turn
``round_limit`` (not ``internal``: no bug) with the limit and the setting
that raises it in the message; the inputs are consumed (a replay would meet
the same limit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.errors import ConfigError
from mind.generated import journal as jr
from mind.shell.journal import Journal
from tests.support.gate import Gate


def _config(path: Path, replies: list[dict[str, Any]], rounds: int) -> mind.ResolvedConfig:
    path.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(
        provider="scripted",
        script=str(path),
        approval="never",
        env={"MIND_MAX_ROUNDS": str(rounds)},
    )


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


def _list_dir(call: int) -> dict[str, Any]:
    return {"tool_calls": [{"id": f"c{call}", "name": "list_dir", "arguments": {"path": "."}}]}


def test_a_tool_loop_stops_at_the_round_limit_after_its_results(tmp_path: Path) -> None:
    config = _config(tmp_path / "s.yaml", [_list_dir(1), _list_dir(2), {"text": "never"}], 2)

    async def main() -> tuple[mind.TurnOutcome, Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            outcome = await session.run("loop")
            return outcome, session.journal.path

    outcome, path = anyio.run(main)
    assert outcome.status == "failed"
    failure = outcome.event.failure
    assert (
        failure is not None
        and failure.kind == "round_limit"
        and "limit of 2 model rounds" in failure.message
        and "MIND_MAX_ROUNDS" in failure.message
    )
    records = _records(path)
    assert len([r for r in records if isinstance(r, jr.ModelRound)]) == 2  # the third never asked
    assert [r.call_id for r in records if isinstance(r, jr.ToolResult)] == ["c1", "c2"]
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done.status == "failed" and len(done.acknowledged) == 1


def test_steering_claimed_at_the_round_limit_is_not_answered_by_another_round(
    tmp_path: Path,
) -> None:
    with Gate() as gate:
        replies = [{"text": "the answer", "pause": str(gate.path)}, {"text": "never"}]
        config = _config(tmp_path / "s.yaml", replies, 1)

        async def main() -> tuple[mind.TurnOutcome, Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("first")
                async with anyio.create_task_group() as tg:

                    async def drain() -> None:
                        async for _ in turn:
                            pass

                    tg.start_soon(drain)
                    assert await anyio.to_thread.run_sync(gate.wait_reached)
                    assert session.steer("one more thing").disposition == "steering"
                    gate.release()
                return turn.outcome, session.journal.path

        outcome, path = anyio.run(main)
    assert outcome.status == "failed"
    failure = outcome.event.failure
    assert (
        failure is not None
        and failure.kind == "round_limit"
        and "limit of 1 model round " in failure.message
    )
    records = _records(path)
    assert [r.text for r in records if isinstance(r, jr.ModelRound)] == ["the answer"]
    steered = [r for r in records if isinstance(r, jr.UserMessage) and r.kind == "steer"]
    assert len(steered) == 1  # claimed by this turn, then the limit ended it


def test_a_round_limit_below_one_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MIND_MAX_ROUNDS"):
        _config(tmp_path / "s.yaml", [{"text": "x"}], 0)
