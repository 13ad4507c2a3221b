"""The session lease: one writer per session (docs/design/lease.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mind.errors import SessionOccupiedError
from mind.shell.lease import SessionLease, read_holder

_HOLD = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_take_release_and_take_again(tmp_path: Path) -> None:
    lease = SessionLease.acquire(tmp_path / "lease", "s")
    assert read_holder(tmp_path / "lease") == lease.record
    lease.release()
    assert not (tmp_path / "lease").exists()
    SessionLease.acquire(tmp_path / "lease", "s").release()


def test_a_dead_owner_leaves_a_lease_that_is_reclaimed(tmp_path: Path) -> None:
    (tmp_path / "lease").write_text(
        json.dumps({"pid": _dead_pid(), "start_identity": "x", "owner_id": "own_dead"})
    )
    lease = SessionLease.acquire(tmp_path / "lease", "s")
    assert lease.record.pid == os.getpid()
    lease.release()


def test_a_live_pid_with_another_start_identity_is_a_reused_pid(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "lease").write_text(
            json.dumps({"pid": sleeper.pid, "start_identity": "boot:1", "owner_id": "own_old"})
        )
        lease = SessionLease.acquire(tmp_path / "lease", "s")  # reclaimed: not that process
        lease.release()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_an_owner_the_pid_check_cannot_see_still_blocks(tmp_path: Path) -> None:
    """An owner in another PID namespace (a container sharing the state dir)
    has a pid that looks dead here; its flock on the session directory does
    not (found by a fresh-user test: two writers corrupted a journal)."""
    dead = _dead_pid()
    (tmp_path / "lease").write_text(
        json.dumps({"pid": dead, "start_identity": "", "owner_id": "own_elsewhere"})
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(SessionOccupiedError, match=f"occupied by pid {dead}"):
            SessionLease.acquire(tmp_path / "lease", "s")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
    SessionLease.acquire(tmp_path / "lease", "s").release()  # the kernel dropped it


def test_a_late_release_never_deletes_a_newer_owners_lease(tmp_path: Path) -> None:
    old = SessionLease.acquire(tmp_path / "lease", "s")
    old.release()
    new = SessionLease.acquire(tmp_path / "lease", "s")
    old.release()  # late, second time
    assert read_holder(tmp_path / "lease") == new.record
    new.release()
