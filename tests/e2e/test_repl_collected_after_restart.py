"""What a person (and a ``--json`` consumer) sees of a command that ran
across a ``kill -9`` of mind (docs/design/recovery.md §8, effects.md §4):

- its supervisor's result collected at the restart is shown like a live
  one — the call, its exit status and output head — marked collected after
  the restart, with the command's own run time from its supervisor's
  records (never the time since the resume); ``turn.resumed`` names it
  (``collected_ids``) and ``tool.call`` / ``tool.result`` (``collected``,
  ``ran_s``) follow;
- ``mind exec --session`` waiting for a command still running says so
  (``tool.waiting``; one stderr line in human mode);
- a running card whose command ended says it ended; the "Outcome unknown"
  card that follows shows only its own choices, and ``t`` on it is shown
  as an unknown outcome the model was told, not as an interruption.

Commands wait on a gate file the test creates, so nothing depends on timing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mind.shell.event_text import format_duration
from tests.e2e.test_repl import ENTER, REPO, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.e2e.test_repl_approval_restarts import _kill_9, _of, _shell
from tests.e2e.test_repl_steering import journal, session_dir
from tests.support.process_trees import wait_until

__all__ = ["spawn"]  # the fixture, re-used from test_repl

EXEC_TIMEOUT_S = 30


def _gated(gate: Path) -> str:
    """A command that ends (printing ``finished-output``) once ``gate`` exists."""
    return f"while [ ! -e {gate} ]; do sleep 0.02; done; echo finished-output"


def _gone(pid: int) -> bool:
    """Whether ``pid`` ended (reaped, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _killed_mid_command(spawn: Spawn, tmp_path: Path, script: list[dict[str, object]]) -> str:
    """Start the REPL on ``script``, ask it to run, SIGKILL it once the
    command's ``effect_running`` is durable; returns the session id."""
    child = spawn(script, "--approval", "never")
    sid = session_id_of(child)
    child.send("run it" + ENTER)
    wait_until(
        lambda: _of(journal(tmp_path, sid), "effect_running"), "effect_running never durable"
    )
    _kill_9(child)
    return sid


def _finished_run_s(tmp_path: Path, sid: str, gate: Path) -> float:
    """Open ``gate``, wait until the command's supervisor ended; return the
    run time its ``exit.json`` records, seconds."""
    (running,) = _of(journal(tmp_path, sid), "effect_running")
    gate.touch()
    wait_until(lambda: _gone(running["supervisor_pid"]), "the supervisor never ended")
    exit_json = session_dir(tmp_path, sid) / "effects" / running["effect_id"] / "exit.json"
    record = json.loads(exit_json.read_text())
    return float(record["ended_at_ms"] - record["started_at_ms"]) / 1000


def _exec(tmp_path: Path, sid: str, *flags: str) -> subprocess.Popen[str]:
    """``mind exec --session sid`` on the REPL's state and script (no prompt:
    only what the session resumes)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_"))}
    env.update(MIND_HOME=str(tmp_path / "home"), MIND_STATE_HOME=str(tmp_path / "state"))
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--provider", "scripted"]
    argv += ["--script", str(tmp_path / "script0.yaml"), "--approval", "never"]
    argv += ["--cwd", str(tmp_path), *flags, "--session", sid]
    return subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_a_result_collected_at_the_restart_is_shown_with_its_own_run_time(
    spawn: Spawn, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "It printed finished-output."}]
    sid = _killed_mid_command(spawn, tmp_path, script)
    ran_s = _finished_run_s(tmp_path, sid, gate)

    child = spawn(script, "--approval", "never", "resume", sid)
    child.expect(words("› run it"))  # the turn's input first, as at a start
    child.expect(words("↻ resuming the turn mind stopped in: 1 result(s) collected after"))
    child.expect(words("✓ Called shell"))
    child.expect(words(f"({format_duration(ran_s)}, collected after restart)"))
    child.expect(words("⎿ finished-output"))
    child.expect(words("It printed finished-output."))
    child.expect(words("── completed"))
    child.expect(words("since the resume"))
    screen = exit_cleanly(child)
    assert "0 tool call(s)" not in screen
    (result,) = _of(journal(tmp_path, sid), "tool_result")
    assert (result["effect_outcome"], result["evidence"]) == ("committed", "supervisor")
    assert result["ran_ms"] == round(ran_s * 1000)


def test_exec_json_resuming_a_collected_result_emits_its_call_and_result(
    spawn: Spawn, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "It printed finished-output."}]
    sid = _killed_mid_command(spawn, tmp_path, script)
    ran_s = _finished_run_s(tmp_path, sid, gate)

    proc = _exec(tmp_path, sid, "--json")
    out, err = proc.communicate(timeout=EXEC_TIMEOUT_S)
    assert proc.returncode == 0, err[-800:]
    events = _events(out)
    (resumed,) = [e for e in events if e["type"] == "turn.resumed"]
    (call,) = [e for e in events if e["type"] == "tool.call"]
    (result,) = [e for e in events if e["type"] == "tool.result"]
    assert resumed["call_ids"] == []
    assert resumed["collected_ids"] == [call["call_id"]]
    assert call["name"] == "shell" and call["arguments"] == {"command": _gated(gate)}
    assert (result["call_id"], result["status"], result["collected"]) == (
        call["call_id"],
        "ok",
        True,
    )
    assert result["ran_s"] == pytest.approx(ran_s, abs=0.001)
    assert "finished-output" in result["output"]
    order = [e["type"] for e in events]
    assert order.index("turn.resumed") < order.index("tool.call") < order.index("tool.result")
    assert order.index("tool.result") < order.index("message.completed")


def test_exec_resuming_a_collected_result_says_so_on_stderr(spawn: Spawn, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "It printed finished-output."}]
    sid = _killed_mid_command(spawn, tmp_path, script)
    _finished_run_s(tmp_path, sid, gate)

    proc = _exec(tmp_path, sid)
    out, err = proc.communicate(timeout=EXEC_TIMEOUT_S)
    assert proc.returncode == 0, err[-800:]
    assert ": 1 result(s) collected after the restart\n" in err
    assert "0 tool call(s)" not in err
    assert "→ shell while" in err
    assert "  ok (collected after restart): finished-output\n" in err
    assert "It printed finished-output." in out


@pytest.mark.parametrize("mode", ["--json", "human"])
def test_exec_waiting_for_a_command_left_running_says_so(
    spawn: Spawn, tmp_path: Path, mode: str
) -> None:
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "Done waiting."}]
    sid = _killed_mid_command(spawn, tmp_path, script)
    proc = _exec(tmp_path, sid, *([mode] if mode == "--json" else []))
    assert proc.stdout is not None and proc.stderr is not None
    stream = proc.stdout if mode == "--json" else proc.stderr
    seen: list[str] = []

    def said(line: str) -> bool:
        if mode == "--json":
            return line.startswith("{") and json.loads(line)["type"] == "tool.waiting"
        return "waiting for shell, already running" in line

    deadline = time.monotonic() + EXEC_TIMEOUT_S
    try:
        while not (seen and said(seen[-1])):
            assert time.monotonic() < deadline, f"no waiting notice: {seen}"
            line = stream.readline()  # blocks until exec says more (or ends)
            assert line, f"exec ended without a waiting notice: {seen}"
            seen.append(line)
        assert not gate.exists()  # said while the command still runs
    finally:
        gate.touch()
    out, err = proc.communicate(timeout=EXEC_TIMEOUT_S)
    assert proc.returncode == 0, err[-800:]
    if mode == "--json":
        waiting = json.loads(seen[-1])
        (started,) = _of(journal(tmp_path, sid), "tool_started")
        assert (waiting["name"], waiting["started_at_ms"]) == ("shell", started["recorded_at_ms"])
        (result,) = [e for e in _events(out) if e["type"] == "tool.result"]
        assert result["call_id"] == waiting["call_id"] and result["collected"] is True
    else:
        assert "started" in seen[-1] and "before mind stopped" in seen[-1]


def test_a_running_card_whose_command_ended_says_so_and_t_is_an_unknown_outcome(
    spawn: Spawn, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "Told."}]
    sid = _killed_mid_command(spawn, tmp_path, script)
    (running,) = _of(journal(tmp_path, sid), "effect_running")

    child = spawn(script, "--approval", "never", "resume", sid)
    child.expect(words("Already running:"))
    child.expect(words("k kill it"))
    # Its records gone, then it ends: how it ended is unknown.
    shutil.rmtree(session_dir(tmp_path, sid) / "effects" / running["effect_id"])
    gate.touch()
    child.expect(words("↳ it ended on its own; its result follows"))
    child.expect(words("Outcome unknown:"))
    child.expect(words("r re-run it"))
    assert "a is not offered" not in str(child.before)
    child.send("t")
    child.expect(words("the model is told the outcome is unknown"))
    child.expect(words("? Outcome unknown shell"))
    before = str(child.before)
    child.expect(words("Told."))
    exit_cleanly(child)
    assert "Interrupted" not in before + str(child.before)
    (result,) = _of(journal(tmp_path, sid), "tool_result")
    assert result["effect_outcome"] == "unknown"


def test_a_command_waited_for_after_the_restart_shows_its_own_run_time(
    spawn: Spawn, tmp_path: Path
) -> None:
    """The "Already running" card waits; the command ends on its own: the
    card says it ended, the result's time is the command's own run (from
    its supervisor's records), not the time since the resume."""
    gate = tmp_path / "gate"
    script = [_shell(_gated(gate)), {"text": "Waited."}]
    sid = _killed_mid_command(spawn, tmp_path, script)

    child = spawn(script, "--approval", "never", "resume", sid)
    child.expect(words("k kill it"))
    gate.touch()
    child.expect(words("↳ it ended on its own; its result follows"))
    child.expect(words("✓ Called shell"))
    child.expect(r"\(([0-9.]+s), collected after restart\)")
    shown = child.match.group(1)
    child.expect(words("⎿ finished-output"))
    child.expect(words("Waited."))
    child.expect(words("since the resume"))
    exit_cleanly(child)
    (result,) = _of(journal(tmp_path, sid), "tool_result")
    assert result["evidence"] == "supervisor"
    assert shown == format_duration(result["ran_ms"] / 1000)
