"""A tool call's effect, prepared, run once, committed, reconciled after a
crash (docs/design/effects.md §3, §4). Real ``mind exec`` subprocesses with
the scripted provider, killed by ``MIND_CRASH_AT`` at the effect boundaries;
a counter file shows how often a command really ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from mind.effects.identity import arguments_sha256, effect_id
from mind.generated import journal as jr
from tests.support.exec_world import exec_records, exec_setup, run_exec

SESSION = "effects"
COUNT = "echo ran >> count.log"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _of(records: list[jr.JournalRecord], kind: type[Any]) -> list[Any]:
    return [r for r in records if isinstance(r, kind)]


def _runs(tmp: Path) -> int:
    path = tmp / "cwd" / "count.log"
    return len(path.read_text().split()) if path.exists() else 0


def test_a_shell_command_sees_its_effect_id_and_its_records_carry_it(tmp_path: Path) -> None:
    args = {"command": 'printf %s "$MIND_EFFECT_ID" > id.txt; exit 3'}
    exec_setup(
        tmp_path,
        [
            {
                "tool_calls": [
                    _call("c1", "shell", args),
                    _call("c2", "read_file", {"path": "id.txt"}),
                    _call("c3", "shell", {"command": 7}),  # refused: bad arguments
                ]
            },
            {"text": "done"},
        ],
    )
    run_exec(tmp_path, SESSION, "go", new=True)
    records = exec_records(tmp_path, SESSION)
    (turn,) = _of(records, jr.TurnStarted)
    (round_,) = [r for r in _of(records, jr.ModelRound) if r.tool_calls]
    raw = round_.tool_calls[0].arguments
    expected = effect_id(SESSION, turn.turn_id, "c1", 0, arguments_sha256(raw))
    assert (tmp_path / "cwd" / "id.txt").read_text() == expected
    shell, read = _of(records, jr.ToolStarted)
    assert (shell.effect_id, shell.effect_class, shell.arguments_sha256) == (
        expected,
        jr.EffectClass.non_idempotent,
        arguments_sha256(raw),
    )
    assert read.effect_class == jr.EffectClass.read_only
    failed, committed, refused = _of(records, jr.ToolResult)
    assert (failed.effect_id, failed.effect_outcome, failed.evidence) == (
        expected,
        jr.EffectOutcome.failed,
        jr.EffectEvidence.ran,
    )
    assert (committed.effect_id, committed.effect_outcome) == (
        read.effect_id,
        jr.EffectOutcome.committed,
    )
    assert expected in committed.output
    # A refused call never prepares an effect: its result names the effect only.
    assert refused.effect_id.startswith("ef_") and refused.effect_outcome is msgspec.UNSET
    assert refused.status == jr.ToolStatus.error


def test_killed_after_a_command_ran_its_kept_exit_record_becomes_the_result(
    tmp_path: Path,
) -> None:
    """Killed after the command ended, before its result was journaled: the
    effect directory outlives the returned result until that is durable, so
    the next open collects the supervisor's exit record (evidence
    ``supervisor``, the real output) — never run again, never ``unknown``."""
    exec_setup(
        tmp_path,
        [
            {"tool_calls": [_call("c1", "shell", {"command": COUNT + "; echo hi"})]},
            {"text": "done"},
        ],
    )
    run_exec(tmp_path, SESSION, "go", new=True, crash_at="effect_executing")
    assert _runs(tmp_path) == 1
    events = run_exec(tmp_path, SESSION, None)
    assert _runs(tmp_path) == 1  # never run again
    # Shown as collected after the restart (recovery.md §8), not as run.
    results = [e for e in events if e.get("type") == "tool.result"]
    assert [e.get("collected") for e in results] == [True]
    assert len([e for e in events if e.get("type") == "tool.call"]) == 1
    (recovered,) = [e for e in events if e.get("type") == "session.recovered"]
    assert recovered["synthetic_results"] == 0
    records = exec_records(tmp_path, SESSION)
    (started,) = _of(records, jr.ToolStarted)
    (result,) = _of(records, jr.ToolResult)
    assert _of(records, jr.EffectReconciled) == []
    assert (result.effect_id, result.effect_outcome, result.evidence, result.synthetic) == (
        started.effect_id,
        jr.EffectOutcome.committed,
        jr.EffectEvidence.supervisor,
        False,
    )
    assert result.output.startswith("hi\n") and result.output.endswith("\nexit code: 0")
    assert not list((tmp_path / "state").rglob(started.effect_id or "-"))


def test_a_result_committed_but_not_delivered_is_kept_never_recomputed(tmp_path: Path) -> None:
    exec_setup(
        tmp_path,
        [{"tool_calls": [_call("c1", "shell", {"command": COUNT})]}, {"text": "done"}],
    )
    run_exec(tmp_path, SESSION, "go", new=True, crash_at="effect_committed_not_delivered")
    run_exec(tmp_path, SESSION, None)
    records = exec_records(tmp_path, SESSION)
    assert _runs(tmp_path) == 1
    (result,) = _of(records, jr.ToolResult)
    assert (result.effect_outcome, result.evidence, result.synthetic) == (
        jr.EffectOutcome.committed,
        jr.EffectEvidence.ran,
        False,
    )
    assert _of(records, jr.EffectReconciled) == []


def test_a_prepared_read_only_call_is_not_made_unknown(tmp_path: Path) -> None:
    """Rerun-safe: nothing to reconcile; the resumed turn runs it again under
    the same effect (the effect chart's one rule, effects.md §4)."""
    exec_setup(
        tmp_path,
        [{"tool_calls": [_call("c1", "list_dir", {})]}, {"text": "done"}],
    )
    run_exec(tmp_path, SESSION, "go", new=True, crash_at="effect_prepared")
    run_exec(tmp_path, SESSION, None)
    records = exec_records(tmp_path, SESSION)
    assert _of(records, jr.EffectReconciled) == []
    (result,) = _of(records, jr.ToolResult)
    (started,) = _of(records, jr.ToolStarted)
    assert (result.effect_id, result.synthetic, result.effect_outcome, result.evidence) == (
        started.effect_id,
        False,
        jr.EffectOutcome.committed,
        jr.EffectEvidence.ran,
    )
