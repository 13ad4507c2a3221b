"""The REPL shows a turn resumed at open (docs/design/recovery.md §8): a real
``mind exec`` killed inside a tool round by ``MIND_CRASH_AT``, then ``mind
resume`` in a pseudo-terminal: the turn goes on, its call runs and the
answer is printed, without a prompt being typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.e2e.test_repl import REPO, Spawn, exit_cleanly, spawn, words
from tests.support.child_env import without_prefixes

__all__ = ["spawn"]  # the fixture, re-used from test_repl

SCRIPT: list[dict[str, object]] = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"text": "Resumed answer."},
]


def test_mind_resume_shows_the_resumed_turn_to_its_end(spawn: Spawn, tmp_path: Path) -> None:
    script = tmp_path / "crash.yaml"
    script.write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        MIND_CRASH_AT="effect_prepared:1",
    )
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--provider", "scripted"]
    argv += ["--script", str(script), "--cwd", str(tmp_path), "look around"]
    proc = subprocess.run(
        argv, cwd=REPO, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60
    )
    assert proc.returncode == -9, proc.stderr[-800:]

    child = spawn(SCRIPT, "resume")
    child.expect(words("that turn goes on"))
    child.expect("look around")  # its input, echoed first as the turn's question
    child.expect(words("resuming the turn mind stopped in: 1 tool call(s) to run"))
    child.expect("list_dir")
    child.expect("Resumed answer.")
    child.expect(words("── completed"))
    exit_cleanly(child)
