"""An ``exit.json`` the command wrote itself is not evidence, after a restart
too (docs/design/processes.md §10, docs/design/effects.md §4).

An unsandboxed (``danger-full-access``) command can reach its own effect
directory (``$MIND_EFFECT``): it writes a well-formed ``exit.json`` and
``stdout`` there, then SIGKILLs its supervisor. mind was ``kill -9``\\ ed
first, so no wait status is left: only the proof hash journaled in
``effect_running`` can tell the forgery from the supervisor's record. The
restarted mind must not take the forged output as the command's result: the
outcome is unknown, in the journal and in what the model reads.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mind.generated import journal as jr
from mind.shell import procs
from mind.shell.journal import read_records
from tests.crash.harness import PROCESS_TIMEOUT_S, REPO, Case, new_case, recover
from tests.support.fake_model import FakeModel
from tests.support.orphaned_tree import PROMPT, first_running

pytestmark = pytest.mark.slow

_FORGED = {
    "version": 1,
    "exit_code": 0,
    "timed_out": False,
    "killed": False,
    "leftovers_killed": 0,
    "timeout_s": 60,
    "max_output_bytes": 1000,
    "stdout": {"total_bytes": 6, "head_bytes": 6, "cut_bytes": 0},
    "stderr": {"total_bytes": 0, "head_bytes": 0, "cut_bytes": 0},
    "proof": "0" * 32,
}


def _forge_script(cwd: Path) -> None:
    """``forge.sh``: run by ``exec`` from the command, so its parent is the supervisor."""
    (cwd / "forge.sh").write_text(
        'umask 077\nd="$MIND_EFFECT"\n'
        'printf FORGED > "$d/stdout"\n: > "$d/stderr"\n'
        f"printf '%s' '{json.dumps(_FORGED)}' > \"$d/exit.json.tmp\"\n"
        'mv "$d/exit.json.tmp" "$d/exit.json"\n'
        "kill -9 $PPID\n"
    )


def _start_unsandboxed_and_kill(case: Case) -> jr.EffectRunning:
    argv = case.exec_argv(PROMPT, new=True)
    at = argv.index("exec") + 1
    argv[at:at] = ["--sandbox", "danger-full-access", "--approval", "never"]
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=case.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while (running := first_running(case.session_dir / "journal.jsonl")) is None:
            assert proc.poll() is None, "mind ended before its command ran"
            assert time.monotonic() < deadline, "effect_running was never journaled"
            time.sleep(0.01)  # polling a file written by another process
        proc.kill()
    finally:
        proc.wait(timeout=PROCESS_TIMEOUT_S)
    return running


def test_a_forged_exit_record_after_kill_9_is_not_the_commands_result(tmp_path: Path) -> None:
    command = (
        "echo {call_id} >> {effects}; while [ ! -e go ]; do sleep 0.02; done; exec sh forge.sh"
    )
    with FakeModel(record_path=tmp_path / "requests.jsonl", command=command) as model:
        case = new_case(tmp_path, model.base_url)
        _forge_script(case.cwd)
        running = _start_unsandboxed_and_kill(case)
        assert running.proof_sha256, "effect_running does not journal the proof hash"
        (case.cwd / "go").touch()  # mind is dead: now the command forges its record
        deadline = time.monotonic() + 10
        while procs.same_process(running.supervisor_pid, running.supervisor_start):
            assert time.monotonic() < deadline, "the command never killed its supervisor"
            time.sleep(0.01)  # the command kills it on its own
        assert (case.session_dir / "effects" / running.effect_id / "exit.json").exists()
        recover(case)
        requests = (tmp_path / "requests.jsonl").read_text()
    records, _ = read_records(case.session_dir / "journal.jsonl")
    (answer,) = [
        r for r in records if isinstance(r, jr.ToolResult) and r.effect_id == running.effect_id
    ]
    assert "FORGED" not in answer.output
    assert "FORGED" not in requests  # nor did the model read it
    assert answer.effect_outcome == jr.EffectOutcome.unknown
    assert answer.evidence != jr.EffectEvidence.supervisor
    assert "outcome unknown" in answer.output
    assert os.path.lexists(case.session_dir / "effects" / running.effect_id) is False


def test_a_forged_exit_record_in_a_live_run_is_unknown_in_the_journal_and_to_the_model(
    tmp_path: Path,
) -> None:
    # mind lives: the supervisor's wait status says it was killed, so the
    # forged record is not believed — and the journal must say what the model reads.
    with FakeModel(record_path=tmp_path / "requests.jsonl", command="exec sh forge.sh") as model:
        case = new_case(tmp_path, model.base_url)
        _forge_script(case.cwd)
        argv = case.exec_argv(PROMPT, new=True)
        at = argv.index("exec") + 1
        argv[at:at] = ["--sandbox", "danger-full-access", "--approval", "never"]
        subprocess.run(
            argv,
            cwd=REPO,
            env=case.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROCESS_TIMEOUT_S,
            check=False,
        )
        requests = [
            json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()
        ]
    records, _ = read_records(case.session_dir / "journal.jsonl")
    answer = next(r for r in records if isinstance(r, jr.ToolResult))
    assert "FORGED" not in answer.output
    assert answer.effect_outcome == jr.EffectOutcome.unknown
    assert answer.synthetic
    assert "outcome unknown" in answer.output
    # why, as found: the record there is not the supervisor's own
    assert "not proven its supervisor's own" in answer.output
    assert "mind stopped" not in answer.output
    assert any(
        isinstance(r, jr.EffectReconciled) and r.effect_id == answer.effect_id for r in records
    )
    told = [
        m["content"]
        for body in requests
        for m in body.get("messages", [])
        if m.get("role") == "tool" and m.get("tool_call_id") == answer.call_id
    ]
    assert told and all(t == answer.output for t in told)
