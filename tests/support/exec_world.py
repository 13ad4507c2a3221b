"""``mind exec`` as a real child process over a scripted provider, for tests
that crash it and run it again: the directories it works in (a home, a state
root, a working directory under one test directory), the script, the run and
the session's journal afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.support.child_env import without_prefixes

EXEC_TIMEOUT_S = 60


def exec_setup(tmp: Path, replies: Sequence[Mapping[str, Any]]) -> None:
    """Make ``tmp/home``, ``tmp/state`` and ``tmp/cwd`` and write the
    scripted provider's ``replies`` (one per model round) to ``tmp/s.yaml``."""
    for d in ("home", "state", "cwd"):
        (tmp / d).mkdir()
    (tmp / "s.yaml").write_text(yaml.safe_dump([dict(r) for r in replies]), encoding="utf-8")


def run_exec(
    tmp: Path, session: str, prompt: str | None, *, new: bool = False, crash_at: str = ""
) -> list[Any]:
    """Run ``mind exec --json --approval never`` on session ``session`` in
    the directories of :func:`exec_setup` (``new``: ``--new-session``;
    ``prompt`` None: no prompt, only what the session resumes), crashed with
    SIGKILL at fault boundary ``crash_at`` when given; asserts it exited 0
    (or was killed there) and returns its JSON events (dicts)."""
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(MIND_HOME=str(tmp / "home"), MIND_STATE_HOME=str(tmp / "state"))
    if crash_at:
        env["MIND_CRASH_AT"] = crash_at
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--script", str(tmp / "s.yaml")]
    argv += ["--approval", "never", "--cwd", str(tmp / "cwd"), "--json"]
    argv += ["--new-session" if new else "--session", session]
    proc = subprocess.run(
        argv + ([prompt] if prompt is not None else []),
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXEC_TIMEOUT_S,
    )
    assert proc.returncode == (-9 if crash_at else 0), proc.stderr[-800:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def exec_records(tmp: Path, session: str) -> list[jr.JournalRecord]:
    """The records of session ``session``'s journal under ``tmp/state``."""
    records, _ = read_records(tmp / "state" / "sessions" / session / "journal.jsonl")
    return records


def exec_killed_at(
    tmp_path: Path,
    replies: Sequence[Mapping[str, Any]],
    crash_at: str,
    prompt: str,
    *options: str,
    cwd: Path,
) -> Path:
    """Run ``mind exec --provider scripted`` with ``replies`` (written to
    ``tmp_path/crash.yaml``) and ``options``, in ``tmp_path/home`` and
    ``tmp_path/state`` (where the REPL of ``tests/e2e`` looks), working in
    ``tmp_path``, and assert it was SIGKILLed at fault boundary ``crash_at``
    (``MIND_CRASH_AT``, e.g. ``effect_prepared:1``). Returns the script's path.
    """
    script = tmp_path / "crash.yaml"
    script.write_text(yaml.safe_dump([dict(r) for r in replies]), encoding="utf-8")
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        MIND_CRASH_AT=crash_at,
    )
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--provider", "scripted"]
    argv += ["--script", str(script), *options, "--cwd", str(tmp_path), prompt]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=EXEC_TIMEOUT_S,
    )
    assert proc.returncode == -9, proc.stderr[-800:]
    return script
