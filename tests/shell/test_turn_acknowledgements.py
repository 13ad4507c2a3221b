"""One rule for what a turn acknowledges, live and in recovery (docs/design/turn.md §3).

The turn machine owns the turn's input list: the driver sends the ids it
claimed (``inputs_claimed`` at the start and at the boundary after the tool
results, ``steering_claimed`` at drain-or-seal), and the terminal it names
carries the ids to acknowledge. Recovery replays the same ``user_message``
records into a fresh machine (``mind.machines.turn_replay``), so the receipt
a crash-closed turn gets names the same ids the live turn wrote. The real
runtime (scripted provider held at gates, real journal and inbox) runs two
turns with steering claimed at both points, a dropped steer and a queued
input; for each turn, replaying its records without its terminal must
acknowledge exactly what the live terminal did.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.generated.turn_chart import TurnChart
from mind.machines.turn_replay import recovered_closing
from mind.shell.journal import Journal
from tests.support.gate import Gate
from tests.support.transition_coverage import TransitionCoverage


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


def test_live_and_recovered_acknowledgements_agree_for_steered_queued_and_dropped_inputs(
    tmp_path: Path,
) -> None:
    with Gate() as tools_gate, Gate() as answer_gate:
        replies = [
            {
                "tool_calls": [{"name": "shell", "arguments": {"command": "true"}}],
                "pause": str(tools_gate.path),
            },
            {"text": "first answer", "pause": str(answer_gate.path)},
            {"text": "steered answer"},
            {"text": "queued answer"},
        ]
        script = tmp_path / "script.yaml"
        script.write_text(yaml.safe_dump(replies), encoding="utf-8")
        config = mind.resolve_config(
            provider="scripted", script=str(script), approval="never", env={}
        )
        coverage = TransitionCoverage(TurnChart)

        async def main() -> tuple[Path, list[ev.InputClaimedEvent]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.turn_observers.append(coverage)

                async def steer_at_the_gates() -> None:
                    # The tool round is paused: steering now waits for the
                    # boundary after its result.
                    assert await anyio.to_thread.run_sync(tools_gate.wait_reached)
                    s.steer("after the tools", message_id="m2")
                    s.steer("never mind", message_id="m3")
                    s.drop("m3")
                    s.queue("for the next turn", message_id="q1")
                    tools_gate.release()
                    # The final answer is out, its round not ended: drain-or-seal claims it.
                    assert await anyio.to_thread.run_sync(answer_gate.wait_reached)
                    s.steer("one more thing", message_id="m4")
                    answer_gate.release()

                claims: list[ev.InputClaimedEvent] = []
                async with anyio.create_task_group() as tg:
                    s.send("first", message_id="m1")
                    tg.start_soon(steer_at_the_gates)
                    async for e in s.events():
                        if isinstance(e, ev.InputClaimedEvent):
                            claims.append(e)
                return s.journal.path, claims

        path, claims = anyio.run(main)
    records = _records(path)
    turns = [r.turn_id for r in records if isinstance(r, jr.TurnStarted)]
    assert len(turns) == 2
    live = {r.turn_id: r for r in records if isinstance(r, jr.TurnCompleted)}
    assert [live[t].acknowledged for t in turns] == [["m1", "m2", "m4"], ["q1"]]
    assert [(c.message_ids, str(c.at)) for c in claims] == [
        (["m1"], "start"),
        (["m2"], "boundary"),
        (["m4"], "drain"),
        (["q1"], "start"),
    ]
    assert [r.message_id for r in records if isinstance(r, jr.InputDropped)] == ["m3"]
    for turn_id in turns:
        # The same records, as a crash before the terminal would leave them.
        crashed = [r for r in records if r is not live[turn_id]]
        closing = recovered_closing(crashed, turn_id)
        assert (closing.status, list(closing.acknowledged)) == (
            live[turn_id].status,
            live[turn_id].acknowledged,
        )
    taken = {f"{e.source} --{e.event}--> {e.target}" for e, n in coverage.hits.items() if n}
    # The boundary drain is a chart event of the runtime's own machine.
    assert "requesting --inputs_claimed--> requesting" in taken
    assert "running_tools --tools_done--> sampling" in taken
    assert "draining --steering_claimed--> sampling" in taken
