"""``mind exec`` refuses state that is not private and owned (docs/design/state.md)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind


def test_exec_with_a_world_writable_state_root_says_one_line(
    tmp_path: Path, run_mind: RunMind
) -> None:
    root = tmp_path / "state"
    root.mkdir()
    os.chmod(root, 0o777)
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([{"text": "hi"}]), encoding="utf-8")
    r = run_mind(
        "exec",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--cwd",
        str(tmp_path),
        "hello",
        env={"MIND_STATE_HOME": str(root)},
        timeout=20,
    )
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    (line,) = [line for line in r.stderr.splitlines() if str(root) in line]
    assert "writable by other users" in line and f"chmod 700 {root}" in line
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o777 and not (root / "sessions").exists()
