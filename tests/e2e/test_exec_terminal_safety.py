"""Text from a model or a prompt never drives the user's terminal: exec's final answer on a
terminal, the waiting-input notices, ``mind inbox`` and ``mind sessions`` all print through the one
sanitiser; a pipe still gets the answer's exact text."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pexpect
import yaml

from tests.e2e.conftest import RunMind

CONTROLS = "\x1b]0;PT\x07 \x1b[2J"
ANSWER = f"title {CONTROLS} cleared"


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump([{"text": ANSWER}]), encoding="utf-8")
    return path


def _assert_clean(text: str) -> None:
    for control in ("\x1b", "\x07", "\x9b"):
        assert control not in text, repr(text)


def test_answer_on_a_terminal_is_sanitised(tmp_path: Path, mind_env: dict[str, str]) -> None:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mind.shell.cli", "exec", "--script", str(_script(tmp_path)), "hi"],
        env=mind_env,
        encoding="utf-8",
        timeout=30,
    )
    child.expect(pexpect.EOF)
    child.close()
    out = str(child.before)
    assert child.exitstatus == 0, out
    assert "title   cleared" in out, repr(out)
    _assert_clean(out)


def test_answer_on_a_pipe_is_the_exact_text(tmp_path: Path, run_mind: RunMind) -> None:
    r = run_mind("exec", "--script", str(_script(tmp_path)), "hi")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ANSWER + "\n"


def test_prompt_controls_never_reach_notices_inbox_or_listing(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sid = "0193aaaa-0000-7000-8000-00000000c0de"
    base = ["exec", "--provider", "openai-chat", "--base-url", down, "--model", "m"]
    env = {"MIND_MAX_RETRIES": "0"}
    r = run_mind(*base, "--new-session", sid, f"p {CONTROLS} x", env=env)
    assert r.returncode == 1, r.stderr
    assert "1 message waits" in r.stderr, r.stderr
    _assert_clean(r.stderr)
    r = run_mind(*base, "--session", sid, "second", env=env)  # "sent first" notice
    assert "sent first" in r.stderr, r.stderr
    _assert_clean(r.stderr)
    inbox = run_mind("inbox", sid)
    assert inbox.returncode == 0, inbox.stderr
    assert "p   x" in inbox.stdout, inbox.stdout
    _assert_clean(inbox.stdout + inbox.stderr)
    listing = run_mind("sessions")
    assert sid in listing.stdout
    _assert_clean(listing.stdout)
