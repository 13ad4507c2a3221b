"""What an interrupted or crashed tool call's synthetic result says (docs/design/turn.md §6).

A call that never started (still waiting for approval, or not reached) must
not be reported as "killed, may have completed": the model would check for
effects that cannot exist, or a person would distrust a clean state. The
distinction is made from durable facts: a ``tool_started`` record is
fsynced before any tool runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import Journal
from mind.shell.runtime import CRASHED_OUTPUT
from tests.support import records as rec


def _config(tmp_path: Path, replies: list[dict[str, Any]], approval: str) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval=approval, env={})


def _results(path: Path) -> list[jr.ToolResult]:
    with Journal.open(path) as j:
        return [r for r in j.records if isinstance(r, jr.ToolResult)]


def _interrupt_at(
    tmp_path: Path, command: str, approval: str, at: type[ev.Event]
) -> tuple[ev.ToolResultEvent, jr.ToolResult]:
    config = _config(
        tmp_path,
        [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, {"text": "x"}],
        approval,
    )

    async def main() -> tuple[list[ev.Event], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            events: list[ev.Event] = []
            async for event in turn:
                events.append(event)
                if isinstance(event, at):
                    if at is ev.ToolCallEvent:  # wait until the command really runs
                        with anyio.fail_after(10):
                            # a file a real subprocess creates: no event to wait on
                            while not (tmp_path / "running").exists():  # noqa: ASYNC110
                                await anyio.sleep(0.01)
                    turn.interrupt()
            return events, s.journal.path

    events, path = anyio.run(main)
    (shown,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    (journaled,) = _results(path)
    assert shown.output == journaled.output and journaled.status == "interrupted"
    return shown, journaled


def test_an_interrupt_while_waiting_for_approval_says_the_call_never_ran(tmp_path: Path) -> None:
    shown, _ = _interrupt_at(tmp_path, "touch made", "untrusted", ev.ApprovalRequestedEvent)
    assert "before it was approved" in shown.output and "it never ran" in shown.output
    assert not (tmp_path / "made").exists()


def test_an_interrupt_of_a_running_tool_says_it_was_stopped_mid_run(tmp_path: Path) -> None:
    shown, _ = _interrupt_at(tmp_path, "touch running; sleep 30", "never", ev.ToolCallEvent)
    assert "never ran" not in shown.output and "killed" in shown.output


def _crashed_journal(path: Path, *, started: bool, records_starts: bool = True) -> None:
    """A journal as kill -9 leaves it: a tool call, maybe its start, no result."""
    path.parent.mkdir(parents=True)
    z: dict[str, Any] = {"seq": 0, "recorded_at_ms": 0}
    extra = {"tool_starts": True} if records_starts else {}
    with Journal.open(path, create=True) as j:
        j.append(jr.SessionStarted(**z, session_id="s1", cwd=str(path.parent), mind_version="0"))
        j.append(
            jr.TurnStarted(
                **z,
                turn_id="t1",
                provider="scripted",
                model="m",
                approval=jr.Approval.never,
                **extra,
            )
        )
        j.append(jr.UserMessage(**z, turn_id="t1", message_id="m1", text="go", kind=jr.Kind.prompt))
        j.append(rec.model_round("t1", "", [rec.call("c1")]))
        if started:
            j.append(jr.ToolStarted(**z, turn_id="t1", call_id="c1", name="shell"))


@pytest.mark.parametrize(
    ("started", "records_starts", "expected"),
    [
        # Provably never ran: the turn is resumed and runs it (recovery.md §8).
        (False, True, None),
        (True, True, CRASHED_OUTPUT),
        # A journal from before starts were recorded: absence proves nothing.
        (False, False, CRASHED_OUTPUT),
    ],
)
def test_crash_recovery_tells_a_call_that_never_started_from_one_that_may_have_run(
    tmp_path: Path, started: bool, records_starts: bool, expected: str | None
) -> None:
    state = tmp_path / "state"
    path = state / "sessions" / "s1" / "journal.jsonl"
    _crashed_journal(path, started=started, records_starts=records_starts)
    config = _config(tmp_path, [], "never")

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session("s1", config=config)
            if session.resumed_turn is not None:
                with anyio.fail_after(20):
                    await session.resumed_turn.wait()

    anyio.run(main)
    (result,) = _results(path)
    if expected is None:  # run for real: its arguments are refused by validation
        assert (result.synthetic, result.status) == (False, "error")
        return
    assert result.synthetic and result.output == expected
    assert "never ran" not in expected
