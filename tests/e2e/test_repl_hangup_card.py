"""Closing the terminal while an approval card is shown is not an explicit
Stop (docs/design/interactions.md §3): the question stays unresolved, the
turn stays open like after a crash, ``mind sessions`` says
``interrupted (resume to recover)``, and ``mind resume`` — here without the
``--approval untrusted`` the session ran with — shows the same card again;
approving runs the command exactly once. Real REPL in a pseudo-terminal,
real SIGHUP, the session's journal checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import REPO, Spawn, exit_cleanly, spawn, words
from tests.support.child_env import without_prefixes
from tests.support.pty_approvals import at_the_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl

REPLIES: list[dict[str, object]] = [
    {"tool_calls": [{"name": "shell", "arguments": {"command": "echo ran >> counter.txt"}}]},
    {"text": "Counted."},
]


def _journal(tmp_path: Path, sid: str) -> list[dict[str, object]]:
    path = tmp_path / "state" / "sessions" / sid / "journal.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _sessions(tmp_path: Path) -> str:
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(MIND_HOME=str(tmp_path / "home"), MIND_STATE_HOME=str(tmp_path / "state"))
    argv = [sys.executable, "-m", "mind.shell.cli", "sessions"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGKILL"])
def test_a_closed_terminal_at_a_card_leaves_it_to_come_back_on_resume(
    spawn: Spawn, tmp_path: Path, sig: str
) -> None:
    """SIGHUP (the terminal closed) ends like ``kill -9`` at the card."""
    child, sid = at_the_card(spawn, "count", REPLIES, "--approval", "untrusted")
    os.kill(child.pid, getattr(signal, sig))
    child.expect(pexpect.EOF)
    child.close()
    kinds = [r["type"] for r in _journal(tmp_path, sid)]
    assert "interaction_requested" in kinds
    assert "interaction_resolved" not in kinds and "turn_completed" not in kinds
    assert "interrupted (resume to recover)" in _sessions(tmp_path)

    again = spawn(REPLIES, "resume")  # on-request now: the card still comes back
    again.expect(words("Allow shell?"))
    assert not (tmp_path / "counter.txt").exists()
    again.send("y")
    again.expect("Counted.")
    again.expect(words("── completed"))
    exit_cleanly(again)
    assert (tmp_path / "counter.txt").read_text("utf-8") == "ran\n"
    records = _journal(tmp_path, sid)
    asked = [r["interaction_id"] for r in records if r["type"] == "interaction_requested"]
    answered = [r for r in records if r["type"] == "interaction_resolved"]
    assert len(asked) == 1 and [(r["interaction_id"], r["decision"]) for r in answered] == [
        (asked[0], "approve_once")
    ]
