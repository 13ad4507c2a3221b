"""Compaction goes on working after a turn that ended on a tool round (#11).

A turn can end right after a tool round: Esc while a command runs, or the
round limit. The compaction after it checkpoints the journal, and the records
a session retains then used to keep that round without the results that
answered it: every later cut fell before the compaction ("nothing to compact
yet") and automatic compaction was skipped silently, in the same process and
after a resume. Real parts: the loopback model, real commands, the real
journal and checkpoint (docs/design/checkpoints.md §1, context.md §5).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.compaction import CompactionOutcome
from tests.support.fake_model import FakeModel

# While ``hold`` exists the command marks itself running and waits (an
# interrupt kills it there); each result is ~6 KB (~1.5k tokens).
COMMAND = (
    "if [ -e hold ]; then touch running; while [ -e hold ]; do sleep 0.05; done; fi; "
    "echo {call_id} >> {effects}; printf '%06000d' 0"
)
LATER_TURNS = 5


def _config(model: FakeModel, tmp_path: Path, **env: str) -> mind.ResolvedConfig:
    # gpt-3.5-turbo plans against 16,385 tokens: at 30% a compaction is due
    # after about three of the later turns.
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model="gpt-3.5-turbo",
        approval="never",
        env={"MIND_HOME": str(tmp_path / "home"), "MIND_AUTO_COMPACT_PERCENT": "30", **env},
    )


def _wait_for(path: Path, deadline_s: float = 20.0) -> bool:
    end = time.monotonic() + deadline_s
    while not path.exists():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)  # polling a condition under a deadline
    return True


async def _esc_during_a_command(s: mind.Session, tmp_path: Path) -> ev.TurnStatus:
    (tmp_path / "hold").touch()
    turn = s.submit("TOOLS=2 first")
    async for event in turn:
        if isinstance(event, ev.ToolCallEvent):
            assert await anyio.to_thread.run_sync(_wait_for, tmp_path / "running")
            turn.interrupt(send_pending=False)
    (tmp_path / "hold").unlink()
    return turn.outcome.event.status


@pytest.mark.parametrize("ending", ["esc during a command", "round limit, then resume"])
def test_compaction_works_again_after_a_turn_that_ended_on_a_tool_round(
    tmp_path: Path, ending: str
) -> None:
    with FakeModel(context_window=16_385, command=COMMAND) as model:

        async def main() -> tuple[ev.TurnStatus, list[ev.Event], CompactionOutcome]:
            limited = ending.startswith("round limit")
            first_config = (
                _config(model, tmp_path, MIND_MAX_ROUNDS="1")
                if limited
                else _config(model, tmp_path)
            )
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=first_config)
                if limited:
                    status = (await s.run("TOOL first")).event.status
                else:
                    status = await _esc_during_a_command(s, tmp_path)
                assert (await s.compact()).completed
                session_id = s.session_id
                events: list[ev.Event] = []
                if not limited:
                    await _later_turns(s, events)
                    return status, events, await s.compact()
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.open_session(session_id, config=_config(model, tmp_path))
                await _later_turns(s, events)
                return status, events, await s.compact()

        status, events, last = anyio.run(main)
    expected = ev.TurnStatus.failed if ending.startswith("round") else ev.TurnStatus.interrupted
    assert status == expected
    auto = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    assert auto and all(e.trigger == ev.CompactionTrigger.auto for e in auto)
    assert last.completed, last.reason


async def _later_turns(s: mind.Session, events: list[ev.Event]) -> None:
    for i in range(LATER_TURNS):
        turn = s.submit(f"TOOL step {i}")
        async for event in turn:
            events.append(event)
        assert turn.outcome.event.status == ev.TurnStatus.completed, turn.outcome
    assert any(isinstance(r, jr.ToolResult) for r in s.history())
