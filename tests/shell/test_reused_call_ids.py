"""Servers that reuse tool-call ids (``call_0`` every turn, or one id twice in
a round): a crash before a call ran resumes the turn, which runs exactly that
call once (docs/design/recovery.md §8); an interrupt before a call ran gives
that call its own durable "never ran" result (§5: pairing is per turn and per
occurrence). Crashes: real ``mind exec`` subprocesses killed by
``MIND_CRASH_AT``; interrupts: the library runtime."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.recovery import (
    INTERRUPTED_UNAPPROVED_OUTPUT,
    INTERRUPTED_UNSTARTED_OUTPUT,
)
from tests.support.exec_world import exec_records, exec_setup, run_exec

SESSION = "reused-ids"


def _shell(call_id: str, marker: str) -> dict[str, Any]:
    return {"id": call_id, "name": "shell", "arguments": {"command": f"echo {marker} >> fx.log"}}


def _recovered(events: list[Any]) -> dict[str, Any]:
    found = [e for e in events if e.get("type") == "session.recovered"]
    assert len(found) == 1, events
    return dict(found[0])


def _synthetic(tmp: Path) -> list[jr.ToolResult]:
    records = exec_records(tmp, SESSION)
    return [r for r in records if isinstance(r, jr.ToolResult) and r.synthetic]


def _results(tmp: Path, turn_id: str | None = None) -> list[tuple[str, str, bool]]:
    records = exec_records(tmp, SESSION)
    return [
        (r.call_id, r.output.strip(), r.synthetic)
        for r in records
        if isinstance(r, jr.ToolResult) and turn_id in (None, r.turn_id)
    ]


def test_an_id_reused_across_turns_is_resumed_and_run_once(tmp_path: Path) -> None:
    """Turns 1 and 2 answered ``call_0``; turn 3's ``call_0`` is killed before
    it runs: the reopened session resumes turn 3 and runs it, once."""
    exec_setup(
        tmp_path,
        [
            {"tool_calls": [_shell("call_0", "T1")]},
            {"text": "one done"},
            {"tool_calls": [_shell("call_0", "T2")]},
            {"text": "two done"},
            {"tool_calls": [_shell("call_0", "T3")]},
            {"text": "three done"},
        ],
    )
    run_exec(tmp_path, SESSION, "one", new=True)
    run_exec(tmp_path, SESSION, "two")
    run_exec(tmp_path, SESSION, "three", crash_at="after_tool_call")
    events = run_exec(tmp_path, SESSION, None)
    recovered = _recovered(events)
    assert (recovered["synthetic_results"], recovered["resumed_turns"]) == (0, 1)
    (resumed,) = [e for e in events if e["type"] == "turn.resumed"]
    assert resumed["call_ids"] == ["call_0"]
    assert _synthetic(tmp_path) == []
    assert (tmp_path / "cwd" / "fx.log").read_text().split() == ["T1", "T2", "T3"]
    assert [e["status"] for e in events if e["type"] == "turn.completed"] == ["completed"]
    assert [e["text"] for e in events if e["type"] == "message.completed"] == ["three done"]


def test_an_id_repeated_in_one_round_resumes_with_the_call_that_never_ran(tmp_path: Path) -> None:
    """Two ``dup1`` calls in one round; killed after the first ran, before the
    second: the resumed turn runs the second only (paired per occurrence)."""
    exec_setup(
        tmp_path,
        [
            {"tool_calls": [_shell("dup1", "A"), _shell("dup1", "B")]},
            {"text": "done"},
        ],
    )
    run_exec(tmp_path, SESSION, "go", new=True, crash_at="after_tool_call:2")
    events = run_exec(tmp_path, SESSION, None)
    assert _recovered(events)["synthetic_results"] == 0
    assert [e["call_id"] for e in events if e["type"] == "tool.call"] == ["dup1"]
    assert [(c, synthetic) for c, _, synthetic in _results(tmp_path)] == [
        ("dup1", False),
        ("dup1", False),
    ]
    assert (tmp_path / "cwd" / "fx.log").read_text().split() == ["A", "B"]
    assert [e["status"] for e in events if e["type"] == "turn.completed"] == ["completed"]


def test_an_interrupt_while_asking_marks_only_the_asked_occurrence_unapproved(
    tmp_path: Path,
) -> None:
    """Two ``dup1`` calls; interrupted while the first waits for its approval:
    the first was asked and never approved, the second never started."""
    script = tmp_path / "s.yaml"
    calls = [{"id": "dup1", "name": "shell", "arguments": {"command": f"touch {n}"}} for n in "ab"]
    script.write_text(yaml.safe_dump([{"tool_calls": calls}, {"text": "ok"}]), encoding="utf-8")
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    results: list[ev.ToolResultEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    turn.interrupt()
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event)

    anyio.run(main)
    assert [(r.call_id, r.output) for r in results] == [
        ("dup1", INTERRUPTED_UNAPPROVED_OUTPUT),
        ("dup1", INTERRUPTED_UNSTARTED_OUTPUT),
    ]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
