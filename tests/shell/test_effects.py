"""A tool call's effect, prepared, run once, committed, reconciled after a
crash (docs/design/effects.md §3, §4). Real ``mind exec`` subprocesses with
the scripted provider, killed by ``MIND_CRASH_AT`` at the effect boundaries;
a counter file shows how often a command really ran."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import yaml

from mind.effects.identity import arguments_sha256, effect_id
from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.support.child_env import without_prefixes

SESSION = "effects"
COUNT = "echo ran >> count.log"


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


def _setup(tmp: Path, replies: list[dict[str, Any]]) -> None:
    for d in ("home", "state", "cwd"):
        (tmp / d).mkdir()
    (tmp / "s.yaml").write_text(yaml.safe_dump(replies), encoding="utf-8")


def _exec(tmp: Path, prompt: str | None, *, new: bool = False, crash_at: str = "") -> list[Any]:
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(MIND_HOME=str(tmp / "home"), MIND_STATE_HOME=str(tmp / "state"))
    if crash_at:
        env["MIND_CRASH_AT"] = crash_at
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--script", str(tmp / "s.yaml")]
    argv += ["--approval", "never", "--cwd", str(tmp / "cwd"), "--json"]
    argv += ["--new-session" if new else "--session", SESSION]
    proc = subprocess.run(
        argv + ([prompt] if prompt is not None else []),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == (-9 if crash_at else 0), proc.stderr[-800:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def _records(tmp: Path) -> list[jr.JournalRecord]:
    records, _ = read_records(tmp / "state" / "sessions" / SESSION / "journal.jsonl")
    return records


def _of(records: list[jr.JournalRecord], kind: type[Any]) -> list[Any]:
    return [r for r in records if isinstance(r, kind)]


def _runs(tmp: Path) -> int:
    path = tmp / "cwd" / "count.log"
    return len(path.read_text().split()) if path.exists() else 0


def test_a_shell_command_sees_its_effect_id_and_its_records_carry_it(tmp_path: Path) -> None:
    args = {"command": 'printf %s "$MIND_EFFECT_ID" > id.txt; exit 3'}
    _setup(
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
    _exec(tmp_path, "go", new=True)
    records = _records(tmp_path)
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
    _setup(
        tmp_path,
        [
            {"tool_calls": [_call("c1", "shell", {"command": COUNT + "; echo hi"})]},
            {"text": "done"},
        ],
    )
    _exec(tmp_path, "go", new=True, crash_at="effect_executing")
    assert _runs(tmp_path) == 1
    events = _exec(tmp_path, None)
    assert _runs(tmp_path) == 1  # never run again
    assert not any(e.get("type") == "tool.call" for e in events)
    (recovered,) = [e for e in events if e.get("type") == "session.recovered"]
    assert recovered["synthetic_results"] == 0
    records = _records(tmp_path)
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
    _setup(
        tmp_path,
        [{"tool_calls": [_call("c1", "shell", {"command": COUNT})]}, {"text": "done"}],
    )
    _exec(tmp_path, "go", new=True, crash_at="effect_committed_not_delivered")
    _exec(tmp_path, None)
    records = _records(tmp_path)
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
    _setup(
        tmp_path,
        [{"tool_calls": [_call("c1", "list_dir", {})]}, {"text": "done"}],
    )
    _exec(tmp_path, "go", new=True, crash_at="effect_prepared")
    _exec(tmp_path, None)
    records = _records(tmp_path)
    assert _of(records, jr.EffectReconciled) == []
    (result,) = _of(records, jr.ToolResult)
    (started,) = _of(records, jr.ToolStarted)
    assert (result.effect_id, result.synthetic, result.effect_outcome, result.evidence) == (
        started.effect_id,
        False,
        jr.EffectOutcome.committed,
        jr.EffectEvidence.ran,
    )
