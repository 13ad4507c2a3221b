"""Turn resume with real processes (docs/design/recovery.md §8): ``mind exec``
against the fake model, killed by ``MIND_CRASH_AT`` inside a tool round, then
``mind exec --session ID --json`` until nothing is left to recover.

Resumed: a read-only call that started, a shell call that never started —
each runs once after the restart and the same turn ends with the model's
answer; so does a shell call whose start is durable but whose supervisor
never ran it (effects.md §4). Closed as before: a crash while sampling.
Every request the model received stays valid (each call answered exactly
once): :func:`tests.crash.harness.check`.
"""

from __future__ import annotations

from typing import Any

import pytest

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.crash.harness import Case, Input, check, json_lines, recover, run
from tests.support.fake_model import EFFECTS_FILE, read_requests

pytestmark = pytest.mark.slow


def _crash(case: Case, prompt: str, crash_at: str) -> list[jr.JournalRecord]:
    proc = run(case.exec_argv(prompt, new=True), case.env(crash_at))
    assert proc.returncode == -9, proc.stderr[-800:]
    return _records(case)


def _records(case: Case) -> list[jr.JournalRecord]:
    records, _ = read_records(case.session_dir / "journal.jsonl")
    return records


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == kind]


def _results(records: list[jr.JournalRecord]) -> list[tuple[str, str, bool]]:
    return [(r.name, r.status.value, r.synthetic) for r in records if isinstance(r, jr.ToolResult)]


def test_a_started_read_only_call_is_resumed_run_once_and_answered(case: Case) -> None:
    prompt = "LIST: what is here?"
    before = _crash(case, prompt, "effect_prepared:1")
    (call,) = [c for r in before if isinstance(r, jr.ModelRound) for c in r.tool_calls]
    (turn_id,) = [r.turn_id for r in before if isinstance(r, jr.TurnStarted)]
    assert call.name == "list_dir"
    recovery = recover(case)
    assert recovery.recovered[0]["resumed_turns"] == 1
    assert recovery.recovered[0]["synthetic_results"] == 0
    assert _of(recovery.events, "turn.resumed") == [
        {"type": "turn.resumed", "turn_id": turn_id, "call_ids": [call.call_id]}
    ]
    assert [e["call_id"] for e in _of(recovery.events, "tool.call")] == [call.call_id]
    assert [e["status"] for e in _of(recovery.events, "turn.completed")] == ["completed"]
    (answer,) = _of(recovery.events, "message.completed")
    assert answer["text"] == f"saw 1 user message(s): {prompt}"
    records = _records(case)
    assert _results(records) == [("list_dir", "ok", False)]
    # One turn: resumed, not replayed as a second one.
    assert sum(isinstance(r, jr.TurnStarted) for r in records) == 1
    report = check(case, [Input(prompt, "durable")], recovery)
    assert report.violations == [], report.violations
    # The answering request carried the call and its one real result.
    last = read_requests(case.requests_path)[-1]["messages"]
    assert [m["tool_call_id"] for m in last if m.get("role") == "tool"] == [call.call_id]


def test_a_shell_call_that_never_started_is_resumed_and_runs_once(case: Case) -> None:
    prompt = "TOOL: run it"
    _crash(case, prompt, "after_tool_call:1")
    assert not (case.cwd / EFFECTS_FILE).exists()
    recovery = recover(case)
    assert recovery.recovered[0]["resumed_turns"] == 1
    assert [e["status"] for e in _of(recovery.events, "turn.completed")] == ["completed"]
    assert len((case.cwd / EFFECTS_FILE).read_text().split()) == 1
    assert _results(_records(case)) == [("shell", "ok", False)]
    report = check(case, [Input(prompt, "durable")], recovery, tools_never_started=True)
    assert report.violations == [], report.violations


def test_a_prepared_shell_call_whose_supervisor_never_started_is_resumed_and_runs_once(
    case: Case,
) -> None:
    """Its start is durable but no supervisor ever ran it (no effect
    directory): provably never ran, so the effect chart re-drives it
    (effects.md §4) — run once, the same turn answered."""
    prompt = "TOOL: change something"
    _crash(case, prompt, "effect_prepared:1")
    assert not (case.cwd / EFFECTS_FILE).exists()
    recovery = recover(case)
    first = recovery.recovered[0]
    assert (first["resumed_turns"], first["aborted_turns"], first["synthetic_results"]) == (1, 0, 0)
    statuses = [r.status for r in _records(case) if isinstance(r, jr.TurnCompleted)]
    assert statuses == [jr.TurnStatus.completed]
    assert len((case.cwd / EFFECTS_FILE).read_text().split()) == 1
    assert _results(_records(case)) == [("shell", "ok", False)]
    report = check(case, [Input(prompt, "durable")], recovery)
    assert report.violations == [], report.violations


def test_a_crash_after_every_result_resumes_with_the_next_round(case: Case) -> None:
    """All results in, the next round not journaled: the turn goes on with
    its next model round (recovery.md §8), no input is replayed."""
    prompt = "TOOL: then answer"
    _crash(case, prompt, "after_tool_result:1")
    recovery = recover(case)
    first = recovery.recovered[0]
    assert (first["resumed_turns"], first["aborted_turns"], first["replayed_inputs"]) == (1, 0, 0)
    assert [e["call_ids"] for e in _of(recovery.events, "turn.resumed")] == [[]]
    assert [e["status"] for e in _of(recovery.events, "turn.completed")] == ["completed"]
    report = check(case, [Input(prompt, "durable")], recovery)
    assert report.violations == [], report.violations


def test_exec_without_json_says_the_turn_resumes(case: Case) -> None:
    _crash(case, "LIST: again", "after_tool_call:1")
    argv = [a for a in case.exec_argv(None) if a != "--json"]
    proc = run(argv, case.env())
    assert proc.returncode == 0, proc.stderr[-800:]
    assert "1 turn(s) resumed" in proc.stderr
    assert "resuming turn " in proc.stderr and "1 tool call(s) to run" in proc.stderr
    assert proc.stdout.strip() == "saw 1 user message(s): LIST: again"
    assert json_lines(proc.stdout) == []
