"""Sessions nothing was ever sent to: a
closed terminal removes them like /exit; ``mind resume`` without an id skips
them; ``mind sessions`` lists one left by kill -9 as ``new (nothing sent)``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.e2e.test_repl_sessions import one_env

__all__ = ["spawn"]  # the fixture, re-used from test_repl


def _session_dirs(tmp_path: Path) -> list[str]:
    root = tmp_path / "state" / "sessions"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def _mind(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", *args],
        env=one_env(tmp_path),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )


def _draft_echoed(child: pexpect.spawn) -> None:
    """Type a draft (never sent) and wait for its echo: the REPL's loop is
    then running, with its signal handling in place."""
    child.send("draft")
    child.expect("draft")


@pytest.mark.parametrize("when", ["at the first prompt", "after a draft"])
def test_sighup_removes_a_session_nothing_was_sent_to(
    spawn: Spawn, tmp_path: Path, when: str
) -> None:
    child = spawn([{"text": "never"}])
    assert _session_dirs(tmp_path) == [session_id_of(child)]
    if when == "after a draft":
        _draft_echoed(child)
    os.kill(child.pid, signal.SIGHUP)  # at once: start-up must not be a window
    child.expect(pexpect.EOF)
    child.close()
    assert _session_dirs(tmp_path) == []


def test_a_closed_terminal_removes_a_session_nothing_was_sent_to(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([{"text": "never"}])
    _draft_echoed(child)
    # The terminal goes away: the kernel sends SIGHUP and writes fail; close()
    # returns once the process has ended.
    child.close(force=False)
    deadline = time.monotonic() + 10  # the cleanup runs as the process ends
    while _session_dirs(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _session_dirs(tmp_path) == []


def test_resume_skips_and_listing_names_a_session_left_empty_by_kill_9(
    spawn: Spawn, tmp_path: Path
) -> None:
    used = spawn([{"text": "First answer."}, {"text": "Second answer."}])
    first = session_id_of(used)
    used.send("remember this" + ENTER)
    used.expect(words("── completed"))
    exit_cleanly(used)
    empty = spawn([{"text": "never"}])
    left = session_id_of(empty)
    empty.kill(signal.SIGKILL)
    empty.expect(pexpect.EOF)
    empty.close()
    assert sorted(_session_dirs(tmp_path)) == sorted([first, left])

    listing = _mind(tmp_path, "sessions")
    row = next(line for line in listing.stdout.splitlines() if line.startswith(left))
    assert "new (nothing sent)" in row, listing.stdout

    again = spawn([{"text": "First answer."}, {"text": "Second answer."}], "resume")
    assert session_id_of(again) == first
    exit_cleanly(again)
