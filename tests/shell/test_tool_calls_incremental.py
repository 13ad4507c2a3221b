"""The tool-call hot paths read each journal record a bounded number of
times per turn (issue #10; issue #11's checkpoints build on it): naming a
call and finding what the journal holds of it (``SessionEffects.propose``)
and re-driving a resumed round (``turn_resume.redrive_round``) follow the
records appended since the last call, never rescan the turn for each call.

Real runtime, scripted provider, real tools (``list_dir``: read-only and
fast); the journal's record list counts what is read (``CountingRecords``)."""

from __future__ import annotations

from pathlib import Path

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support import records as rec
from tests.support.counting import CountingRecords
from tests.support.sessions import crashed_turn_session, scripted_config

CALLS = 60
DEADLINE_S = 20
READS_PER_RECORD = 8
"""The bound: the model rounds' requests read the whole journal once each
(two rounds), the calls read each new record a few times; a rescan per call
would read ``CALLS`` times the turn."""


def test_a_round_of_many_calls_reads_each_record_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    calls = [{"name": "list_dir", "arguments": {"path": "."}}] * CALLS
    config = scripted_config(
        tmp_path, [{"tool_calls": calls}, {"text": "listed"}], approval="never"
    )

    async def main() -> tuple[int, list[jr.JournalRecord]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            counted = CountingRecords(s.journal.records)
            s.journal.records = counted
            with anyio.fail_after(DEADLINE_S):
                outcome = await s.submit("list it many times").wait()
            assert outcome.event.status == ev.TurnStatus.completed
            return counted.read, list(counted)

    read, records = anyio.run(main)
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    assert [r.status for r in results] == [jr.ToolStatus.ok] * CALLS
    assert read <= READS_PER_RECORD * len(records), (read, len(records))


def test_a_resumed_round_of_many_calls_reads_each_record_a_bounded_number_of_times(
    tmp_path: Path,
) -> None:
    calls = [rec.call(f"c{i}", "list_dir", '{"path": "."}') for i in range(CALLS)]
    config = scripted_config(tmp_path, [{"tool_calls": []}, {"text": "listed"}], approval="never")
    state, sid = crashed_turn_session(tmp_path, config, calls)

    async def main() -> tuple[int, list[jr.JournalRecord]]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            # The resumed turn's task has not run yet: it starts at the next await.
            counted = CountingRecords(s.journal.records)
            s.journal.records = counted
            assert s.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                outcome = await s.resumed_turn.wait()
            assert outcome.event.status == ev.TurnStatus.completed
            return counted.read, list(counted)

    read, records = anyio.run(main)
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    assert [(r.call_id, r.status) for r in results] == [
        (f"c{i}", jr.ToolStatus.ok) for i in range(CALLS)
    ]
    assert read <= READS_PER_RECORD * len(records), (read, len(records))
