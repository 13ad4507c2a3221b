"""The REPL on a full disk says so in one line and keeps running (issue #8 item 6).

The state root is a real 2 MiB tmpfs (root only); the scripted model's tool
call carries 256 KiB of arguments, so its round cannot be journaled once the
disk is filled. The REPL prints the turn's ``storage`` failure, refuses the
next input with the reason (the text stays in the editor), never a traceback.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import yaml

from tests.e2e.test_repl import _SCRUB, _SESSION_RE, ENTER, REPO, TIMEOUT_S, words
from tests.shell.test_full_disk import fill, small_disk

__all__ = ["small_disk"]  # the fixture, used by name below


def test_repl_reports_a_full_disk_in_one_line_and_refuses_input(
    tmp_path: Path, small_disk: Path
) -> None:
    script = tmp_path / "script.yaml"
    big = {"command": "echo " + "y" * (256 * 1024)}
    script.write_text(
        yaml.safe_dump([{"tool_calls": [{"name": "shell", "arguments": big}]}]), encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(small_disk / "state"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    argv = ["-m", "mind.shell.cli", "--provider", "scripted", "--script", str(script)]
    child = pexpect.spawn(
        sys.executable,
        [*argv, "--cwd", str(tmp_path)],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )
    try:
        child.expect(_SESSION_RE)
        child.expect("› ")
        fill(small_disk)
        child.send("go" + ENTER)
        child.expect(words("could not write"))
        child.expect(r"journal\.jsonl(?:\x1b\[[0-9;?]*[A-Za-z])* \(ENOSPC\)")
        child.expect(words("── failed"))
        child.send("again" + ENTER)
        child.expect(words("Not sent:"))
        child.expect(words("Your text is still in the editor."))
        assert child.isalive()
        assert "Traceback" not in str(child.before)
    finally:
        child.terminate(force=True)
