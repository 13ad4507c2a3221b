"""`mind exec` end to end with the scripted provider driving the real tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind


def _git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def _script(path: Path, replies: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return path


PATCH = """*** Begin Patch
*** Update File: hello.py
@@
-print("hello")
+print("hello, patched")
*** End Patch
"""


def test_scripted_turn_drives_real_tools_in_a_git_repo(tmp_path: Path, run_mind: RunMind) -> None:
    repo = _git_repo(tmp_path / "repo")
    script = _script(
        tmp_path / "s.yaml",
        [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {"path": "hello.py", "content": 'print("hello")\n'},
                    }
                ]
            },
            {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": PATCH}}]},
            {
                "tool_calls": [
                    {
                        "name": "shell",
                        "arguments": {"command": "python3 hello.py && git status --short"},
                    }
                ]
            },
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "hello.py"}}]},
            {"text": "Done: hello.py prints the patched greeting."},
        ],
    )
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--approval",
        "never",
        "--cwd",
        str(repo),
        "write and run hello.py",
    )
    assert r.returncode == 0, r.stderr
    types = [e["type"] for e in r.events]
    assert types[0] == "session.started"
    assert types[1] == "turn.started"
    assert types[-1] == "turn.completed"
    assert types.count("tool.call") == 4 and types.count("tool.result") == 4
    results = r.of_type("tool.result")
    assert [x["status"] for x in results] == ["ok"] * 4, results
    assert "hello, patched" in results[2]["output"]
    assert "?? hello.py" in results[2]["output"]
    assert "hello, patched" in results[3]["output"]
    assert (repo / "hello.py").read_text() == 'print("hello, patched")\n'
    done = r.events[-1]
    assert done["status"] == "completed"
    assert set(done["usage"]) == {"input_tokens", "output_tokens"}
    assert (
        r.of_type("message.completed")[-1]["text"] == "Done: hello.py prints the patched greeting."
    )
    calls = r.of_type("tool.call")
    assert calls[0]["arguments"] == {"path": "hello.py", "content": 'print("hello")\n'}
    assert [c["call_id"] for c in calls] == [x["call_id"] for x in results]


def test_exec_refuses_a_call_that_needs_approval(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(
        tmp_path / "s.yaml",
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch created-by-tool"}}]},
            {"text": "I could not run it."},
        ],
    )
    # untrusted: a command that is not known-safe asks even inside the sandbox.
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--approval",
        "untrusted",
        "--cwd",
        str(tmp_path),
        "make a file",
    )
    assert r.returncode == 0, r.stderr
    (result,) = r.of_type("tool.result")
    assert result["status"] == "denied"
    assert "approval" in result["output"]
    assert not (tmp_path / "created-by-tool").exists()
    # Nobody can answer in exec: the question is declined (durably), never
    # accepted, and no card is shown (docs/design/interactions.md §2).
    assert r.of_type("approval.requested") == []
    (requested,) = r.of_type("interaction.requested")
    (resolved,) = r.of_type("interaction.resolved")
    assert requested["interaction_id"] == resolved["interaction_id"]
    assert requested["cwd"] == str(tmp_path) and requested["kind"] == "approval"
    assert (resolved["decision"], resolved["by"]) == ("declined", "headless")
    assert resolved["interaction_id"].startswith("ia_")


def test_plain_exec_prints_the_final_answer(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "Forty-two."}])
    r = run_mind(
        "exec",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--cwd",
        str(tmp_path),
        "the answer?",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Forty-two.\n"
    assert "scripted" in r.stderr
    assert "sandbox workspace-write (bubblewrap)" in r.stderr  # where commands run


def test_bad_tool_arguments_and_unknown_tools_reach_the_model(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = _script(
        tmp_path / "s.yaml",
        [
            {
                "tool_calls": [
                    {"name": "no_such_tool", "arguments": {}},
                    {"name": "read_file", "arguments": {"nope": 1}},
                ]
            },
            {"text": "ok"},
        ],
    )
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--approval",
        "never",
        "--cwd",
        str(tmp_path),
        "try",
    )
    assert r.returncode == 0, r.stderr
    statuses = [x["status"] for x in r.of_type("tool.result")]
    assert statuses == ["error", "error"]
    outputs = [x["output"] for x in r.of_type("tool.result")]
    assert "no_such_tool" in outputs[0]
    assert "read_file" in outputs[1]


def test_session_continues_and_is_listed(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "first"}, {"text": "second"}])
    common = ["--provider", "scripted", "--script", str(script), "--cwd", str(tmp_path)]
    r1 = run_mind("exec", "--json", *common, "one")
    sid = r1.events[0]["session_id"]
    r2 = run_mind("exec", "--json", *common, "--session", sid, "two")
    assert r2.returncode == 0, r2.stderr
    assert r2.events[0] == {"type": "session.started", "session_id": sid}
    assert r2.of_type("message.completed")[-1]["text"] == "second"
    listing = run_mind("sessions")
    assert sid in listing.stdout and "completed" in listing.stdout and "one" in listing.stdout


def test_unconfigured_mind_explains_how_to_configure(tmp_path: Path, run_mind: RunMind) -> None:
    r = run_mind("exec", "hello")
    assert r.returncode == 2
    assert "OPENAI_API_KEY" in r.stderr and "--provider scripted --script FILE" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_exec_reads_the_prompt_from_stdin(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "got it"}])
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--cwd",
        str(tmp_path),
        "-",
        input="from stdin\n",
    )
    assert r.returncode == 0, r.stderr
    journal = next((tmp_path / "mind-home" / "sessions").iterdir()) / "journal.jsonl"
    texts = [json.loads(line).get("text") for line in journal.read_text().splitlines()]
    assert "from stdin\n" in texts


def test_a_session_held_by_a_live_process_is_refused_with_its_pid(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    import os
    import signal
    import sys
    import time

    script = _script(
        tmp_path / "s.yaml",
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 29.5"}}]},
            {"text": "x"},
        ],
    )
    common = ["--provider", "scripted", "--script", str(script), "--cwd", str(tmp_path)]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mind.shell.cli",
            "exec",
            "--json",
            "--approval",
            "never",
            *common,
            "--new-session",
            "held",
            "hold it",
        ],
        env=mind_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert holder.stdout is not None
        for line in holder.stdout:  # wait until the holder is inside its tool call
            if json.loads(line)["type"] == "tool.call":
                break
        r = run_mind("exec", *common, "--session", "held", "me too")
        assert r.returncode == 3
        assert f"occupied by pid {holder.pid}" in r.stderr
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    # The holder died without cleanup; its command runs on under its
    # supervisor (docs/design/processes.md) until it is killed here: its end
    # is recorded, so the reopen collects it as the call's result.
    subprocess.run(["pkill", "-KILL", "-f", r"^sleep 29\.5$"], check=False)
    # Its lease is stale and the session opens; the killed turn's round is
    # answered, so the turn goes on with its next model round.
    deadline = time.monotonic() + 30
    while True:
        r = run_mind("exec", "--json", *common, "--approval", "never", "--session", "held")
        if r.returncode != 3 or time.monotonic() > deadline:
            break
    assert r.returncode == 0, r.stderr
    recovered = r.of_type("session.recovered")
    assert recovered and recovered[0]["resumed_turns"] == 1
    assert recovered[0]["aborted_turns"] == 0 and recovered[0]["replayed_inputs"] == 0
    # No synthetic result: the supervisor's exit record answered the call.
    assert recovered[0]["synthetic_results"] == 0
    assert r.events[-1]["type"] == "turn.completed"


def test_exec_without_prompt_on_a_clean_session_reports_and_exits_0(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "hi"}])
    common = ["--provider", "scripted", "--script", str(script), "--cwd", str(tmp_path)]
    sid = run_mind("exec", "--json", *common, "hello").events[0]["session_id"]
    r = run_mind("exec", "--json", *common, "--session", sid)
    assert r.returncode == 0, r.stderr
    assert r.events == [
        {"type": "session.started", "session_id": sid},
        {
            "type": "session.recovered",
            "session_id": sid,
            "aborted_turns": 0,
            "completed_turns": 0,
            "resumed_turns": 0,
            "synthetic_results": 0,
            "replayed_inputs": 0,
        },
    ]


def test_debug_boundaries_lists_every_durable_boundary(run_mind: RunMind) -> None:
    from mind.shell.faults import BOUNDARIES

    r = run_mind("debug", "boundaries")
    assert r.returncode == 0
    assert r.stdout.splitlines() == list(BOUNDARIES)
