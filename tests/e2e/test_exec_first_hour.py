"""`mind exec` and `mind config` as a new user meets them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import MindResult, RunMind
from tests.support.fake_model import sse_chunks
from tests.support.loopback import LoopbackServer, OwnedServer


def _script(path: Path, replies: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return path


def _sessions(tmp_path: Path) -> list[str]:
    """Session directories under the test's MIND_HOME (see ``mind_env``)."""
    root = tmp_path / "mind-home" / "sessions"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_script_runs_scripted_even_with_an_openai_key(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "scripted reply"}])
    # A dead loopback port: if the real provider ran, the turn would fail.
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    r = run_mind("exec", "--script", str(script), "hello", env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "scripted reply\n"
    assert "scripted (offline script" in r.stderr


def test_script_with_a_real_provider_is_a_usage_error(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "x"}])
    env = {"OPENAI_API_KEY": "sk-test"}
    r = run_mind("exec", "--provider", "openai-chat", "--script", str(script), "hi", env=env)
    assert r.returncode == 2
    assert "--script is only for the scripted provider" in r.stderr
    assert _sessions(tmp_path) == []


def test_config_prints_sources_and_masks_the_key(tmp_path: Path, run_mind: RunMind) -> None:
    home = tmp_path / "mind-home"
    home.mkdir()
    (home / "config.toml").write_text('base_url = "http://file:1/v1"\nmodel = "m1"\n')
    secret = "sk-secret-value-123456"
    env = {"OPENAI_API_KEY": secret, "OPENAI_BASE_URL": "http://env:2/v1"}
    r = run_mind("config", "--model", "m2", env=env)
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split() for line in r.stdout.splitlines()}
    assert lines["base_url"][1:] == ["http://env:2/v1", "env", "OPENAI_BASE_URL"]
    assert lines["model"][1:] == ["m2", "flag", "--model"]
    assert lines["api_key"][1:4] == ["set", "(not", "shown)"]
    assert secret[:8] not in r.stdout + r.stderr


def test_help_documents_every_variable(run_mind: RunMind) -> None:
    r = run_mind("--help")
    assert r.returncode == 0
    for needle in ("MIND_PROVIDER", "MIND_MODEL", "MIND_MAX_RETRIES", "max_retries", "keyring"):
        assert needle in r.stdout


def _three_replies(tmp_path: Path) -> Path:
    return _script(tmp_path / "s.yaml", [{"text": "one"}, {"text": "two"}, {"text": "three"}])


def test_session_prefix_continues_the_one_matching_session(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = str(_three_replies(tmp_path))
    for sid in ("proj-alpha", "proj-beta"):
        r = run_mind("exec", "--script", script, "--new-session", sid, "hi")
        assert r.returncode == 0, r.stderr
    r = run_mind("exec", "--json", "--script", script, "--session", "proj-a", "again")
    assert r.returncode == 0, r.stderr
    assert r.events[0] == {"type": "session.started", "session_id": "proj-alpha"}
    assert r.of_type("message.completed")[-1]["text"] == "two"
    assert _sessions(tmp_path) == ["proj-alpha", "proj-beta"]


def test_session_prefix_ambiguous_or_unknown_exits_2_and_creates_nothing(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = str(_three_replies(tmp_path))
    for sid in ("proj-alpha", "proj-beta"):
        assert run_mind("exec", "--script", script, "--new-session", sid, "hi").returncode == 0
    r = run_mind("exec", "--script", script, "--session", "proj", "again")
    assert r.returncode == 2
    assert "ambiguous" in r.stderr and "proj-alpha" in r.stderr and "proj-beta" in r.stderr
    r = run_mind("exec", "--script", script, "--session", "nosuch", "again")
    assert r.returncode == 2
    assert "no such session" in r.stderr
    assert _sessions(tmp_path) == ["proj-alpha", "proj-beta"]


def test_new_session_refuses_an_existing_id(tmp_path: Path, run_mind: RunMind) -> None:
    script = str(_three_replies(tmp_path))
    assert run_mind("exec", "--script", script, "--new-session", "mine", "hi").returncode == 0
    r = run_mind("exec", "--script", script, "--new-session", "mine", "again")
    assert r.returncode == 2
    assert "already exists" in r.stderr and "--session" in r.stderr


def _last_is_failure(r: MindResult, kind: str, code: int) -> dict[str, object]:
    assert r.returncode == code, r.stderr
    assert r.events, f"nothing on stdout; stderr: {r.stderr}"
    last = r.events[-1]
    assert last["type"] == "exec.failed", r.events
    assert (last["kind"], last["exit_code"]) == (kind, code)
    assert isinstance(last["message"], str) and last["message"]
    assert [e["type"] for e in r.events].count("exec.failed") == 1
    return last


def test_json_usage_failure_ends_stdout_with_one_event(tmp_path: Path, run_mind: RunMind) -> None:
    script = str(_three_replies(tmp_path))
    r = run_mind("exec", "--json", "--script", script, "--session", "nosuch", "hi")
    last = _last_is_failure(r, "usage", 2)
    assert "no such session" in str(last["message"])
    r = run_mind("exec", "--json", "hi")  # nothing configured
    _last_is_failure(r, "usage", 2)


def test_json_turn_failure_ends_with_its_turn_completed(run_mind: RunMind) -> None:
    env = {"MIND_MAX_RETRIES": "0"}
    args = ("--provider", "openai-chat", "--base-url", "http://127.0.0.1:9/v1")
    r = run_mind("exec", "--json", *args, "hi", env=env)
    assert r.returncode == 1
    last = r.events[-1]
    assert (last["type"], last["status"], last["failure"]["kind"]) == (
        "turn.completed",
        "failed",
        "network",
    )
    assert last["failure"]["message"]
    assert not r.of_type("exec.failed")


def test_json_occupied_session_ends_stdout_with_one_event(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    script = _script(
        tmp_path / "s.yaml",
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]}, {"text": "x"}],
    )
    common = ["--script", str(script), "--approval", "never", "--cwd", str(tmp_path)]
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--json", *common]
    holder = subprocess.Popen(
        [*argv, "--new-session", "held", "hold it"],
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
        r = run_mind("exec", "--json", *common, "--session", "held", "me too")
        last = _last_is_failure(r, "occupied", 3)
        assert f"pid {holder.pid}" in str(last["message"])
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()


def test_exec_stderr_never_passes_terminal_controls(tmp_path: Path, run_mind: RunMind) -> None:
    # Clear-screen, an OSC window title, BEL and a C1 CSI, in the output and the arguments.
    command = "printf '\\033[2J\\033]0;pwned\\007\\a\\302\\23331mok\\n' # \x1b[2J\x07"
    script = _script(
        tmp_path / "s.yaml",
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]},
            {"text": "done"},
        ],
    )
    r = run_mind(
        "exec", "--script", str(script), "--approval", "never", "--cwd", str(tmp_path), "go"
    )
    assert r.returncode == 0, r.stderr
    assert "  ok: ok" in r.stderr.splitlines(), r.stderr
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in r.stderr, repr(r.stderr)


class _Replies(LoopbackServer):
    """Serves the given Chat Completions replies in order, one per request."""

    thread_name = "replies-server"

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        super().__init__()
        self.replies = list(replies)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    class handler(BaseHTTPRequestHandler):  # the LoopbackServer hook
        server: OwnedServer

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the access log."""

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = b"".join(sse_chunks(self.server.owner.replies.pop(0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


LONE = "\ud800"  # json.dumps writes it as the escape a server might send: "\\ud800"


def _journal_lines(tmp_path: Path, sid: str) -> list[dict[str, Any]]:
    path = tmp_path / "mind-home" / "sessions" / sid / "journal.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("json_mode", [False, True])
def test_lone_surrogates_from_a_provider_are_replaced(
    tmp_path: Path, run_mind: RunMind, json_mode: bool
) -> None:
    replies = [
        {"tool_call": {"id": "call_1", "name": "shell", "arguments": {"command": f"echo {LONE}"}}},
        {"text": f"bad {LONE} text"},
    ]
    with _Replies(replies) as server:
        args = ["--provider", "openai-chat", "--base-url", server.base_url, "--model", "m"]
        args += ["--approval", "never", "--cwd", str(tmp_path)]
        r = run_mind("exec", *(["--json"] if json_mode else []), *args, "hi", timeout=30)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if json_mode:
        assert r.of_type("message.completed")[-1]["text"] == "bad \ufffd text"
    else:
        assert r.stdout == "bad \ufffd text\n"


def test_lone_surrogates_in_a_script_are_replaced(tmp_path: Path, run_mind: RunMind) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(
        '- tool_calls: [{name: shell, arguments: {command: "echo \\ud800"}}]\n'
        '- text: "bad \\ud800 text"\n',
        encoding="utf-8",
    )
    r = run_mind(
        "exec",
        "--json",
        "--script",
        str(script),
        "--approval",
        "never",
        "--cwd",
        str(tmp_path),
        "hi",
    )
    assert r.returncode == 0, r.stderr
    assert r.of_type("tool.call")[0]["arguments"] == {"command": "echo \ufffd"}
    assert r.of_type("message.completed")[-1]["text"] == "bad \ufffd text"


def _raw_exec(
    mind_env: dict[str, str], args: list[bytes], stdin: bytes | None = None
) -> MindResult:
    proc = subprocess.run(
        [sys.executable.encode(), b"-m", b"mind.shell.cli", b"exec", *args],
        env=mind_env,
        input=stdin,
        capture_output=True,
        timeout=60,
        stdin=None if stdin is not None else subprocess.DEVNULL,
    )
    out = proc.stdout.decode("utf-8")
    return MindResult(proc.returncode, out, proc.stderr.decode("utf-8", "replace"))


def test_invalid_utf8_prompt_is_replaced_and_said(tmp_path: Path, mind_env: dict[str, str]) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "one"}, {"text": "two"}])
    common = [b"--script", os.fsencode(script), b"--new-session", b"bytes"]
    r = _raw_exec(mind_env, [*common, b"caf\xe9 \xff"])
    assert r.returncode == 0, r.stderr
    assert "not valid UTF-8" in r.stderr and "U+FFFD" in r.stderr
    texts = [
        rec.get("text")
        for rec in _journal_lines(tmp_path, "bytes")
        if rec.get("type") == "user_message"
    ]
    assert texts == ["caf\ufffd \ufffd"]
    common[-1] = b"bytes2"
    r = _raw_exec(mind_env, [*common, b"-"], stdin=b"stdin \xc3(\n")
    assert r.returncode == 0, r.stderr
    assert "not valid UTF-8" in r.stderr


def test_a_prompt_over_the_inbox_cap_is_refused_and_leaves_no_session(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = str(_three_replies(tmp_path))
    r = run_mind("exec", "--script", script, "-", input="a" * (9 * 1024 * 1024))
    assert r.returncode == 2
    assert "too large" in r.stderr and "wait for the running turn" not in r.stderr
    assert _sessions(tmp_path) == []


def test_json_bad_flag_ends_stdout_with_one_event(run_mind: RunMind) -> None:
    r = run_mind("exec", "--json", "--no-such-flag", "hi")
    last = _last_is_failure(r, "usage", 2)
    assert "--no-such-flag" in str(last["message"]) and "--no-such-flag" in r.stderr
