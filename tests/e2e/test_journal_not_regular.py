"""A FIFO, device or symlink in place of ``journal.jsonl`` is named with its
fix, like every other state file — never "no such session" (docs/design/state.md §2).

The real ``mind`` command in a subprocess with a timeout (a FIFO must not hang).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.e2e.conftest import RunMind


def _place(journal: Path, kind: str) -> None:
    saved = journal.with_name("saved.jsonl")
    os.rename(journal, saved)
    if kind == "fifo":
        os.mkfifo(journal, 0o600)
    elif kind == "device":
        os.mknod(journal, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
    else:
        journal.symlink_to(saved)


@pytest.mark.parametrize("kind", ["fifo", "device", "symlink"])
def test_a_journal_that_is_not_a_regular_file_is_named_with_its_fix(
    tmp_path: Path, run_mind: RunMind, kind: str
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("- text: ok\n- text: again\n", encoding="utf-8")
    common = ("--provider", "scripted", "--script", str(script), "--cwd", str(tmp_path))
    first = run_mind("exec", *common, "--new-session", "s1", "hi", timeout=20)
    assert first.returncode == 0, first.stderr
    journal = tmp_path / "mind-home" / "sessions" / "s1" / "journal.jsonl"
    _place(journal, kind)
    again = run_mind("exec", *common, "--session", "s1", "hi", timeout=20)
    assert again.returncode != 0
    assert "no such session" not in again.stderr, again.stderr
    assert str(journal) in again.stderr and "remove it" in again.stderr, again.stderr
    listing = run_mind("sessions", timeout=20)
    assert "s1" in listing.stdout and str(journal) in listing.stdout, listing.stdout
    assert os.path.lexists(journal) and not stat.S_ISREG(os.lstat(journal).st_mode)
