"""Process identity and liveness in one place (:mod:`mind.shell.procs`, psutil).

The start identity recorded by earlier minds in lease and ledger files is
``"<boot id>:<start ticks>"`` read from ``/proc``; for the same live process
the psutil-based reading must give the very same string, or a live owner
would look like a reused pid (and lose its lease).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mind.shell import procs

_LINUX = sys.platform.startswith("linux")
_MIND = Path(__file__).resolve().parents[2] / "mind"


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _recorded_format(pid: int) -> str:
    """What earlier minds wrote: boot id + ``/proc/<pid>/stat`` field 22."""
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    stat = Path(f"/proc/{pid}/stat").read_text()
    return f"{boot}:{stat[stat.rfind(')') + 2 :].split()[19]}"


@pytest.mark.skipif(not _LINUX, reason="the recorded format is Linux's")
def test_start_identity_equals_what_earlier_minds_recorded(
    child: subprocess.Popen[bytes],
) -> None:
    for pid in (os.getpid(), child.pid):
        assert procs.start_identity(pid) == _recorded_format(pid) != ""
        assert procs.same_process(pid, _recorded_format(pid))


@pytest.mark.skipif(not _LINUX, reason="compares with /proc/stat btime")
def test_started_at_ms_is_the_process_start_in_epoch_ms(child: subprocess.Popen[bytes]) -> None:
    btime = next(
        int(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    ticks = int(_recorded_format(child.pid).rsplit(":", 1)[1])
    expected = btime * 1000 + ticks * 1000 // os.sysconf("SC_CLK_TCK")
    assert procs.started_at_ms(child.pid, fallback_ms=-1) == expected


def test_started_at_ms_of_a_missing_pid_is_the_fallback() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert procs.started_at_ms(dead.pid, fallback_ms=1234) == 1234


def test_a_reused_pid_is_not_the_same_process(child: subprocess.Popen[bytes]) -> None:
    assert procs.same_process(child.pid, procs.start_identity(child.pid))
    assert not procs.same_process(child.pid, "another-boot:1")
    assert procs.same_process(child.pid, "")  # an old record without identity: pid only


def test_a_zombie_and_a_reaped_pid_are_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        proc.stdout = None
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        assert not procs.is_alive(proc.pid)
        assert procs.start_identity(proc.pid) == procs.start_identity(proc.pid)
    finally:
        proc.wait()
    assert not procs.is_alive(proc.pid)
    assert procs.start_identity(proc.pid) == ""
    assert not procs.is_alive(0) and not procs.is_alive(-1)


def test_a_process_of_another_user_is_alive() -> None:
    """EPERM on signal 0 still means the process exists (pid 1 is root's)."""
    if os.geteuid() == 0:
        pytest.skip("root may signal every process")
    assert procs.is_alive(1)


def test_process_identity_is_read_in_one_place() -> None:
    """No module of mind's storage parses ``/proc/<pid>`` itself: procs.py
    (psutil) is the one reader, so the lease and the ledger port to macOS."""
    readers = [
        str(path.relative_to(_MIND))
        for path in _MIND.rglob("*.py")
        if re.search(r"""["']/proc/(\{|stat\b|sys/kernel)""", path.read_text())
        or 'Path("/proc")' in path.read_text()
    ]
    # The sandbox reads /proc for Linux-only kernel mechanisms (landlock rules, its init);
    # the supervisor, a stdlib-only program that cannot import procs.py, walks its
    # subreaper's tree and writes its own start identity in procs.py's format.
    allowed = {
        "shell/procs.py",
        "shell/sandbox/launch.py",
        "shell/sandbox/landlock.py",
        "sidecars/supervisor.py",
    }
    assert set(readers) <= allowed, readers


def test_wait_ended_is_bounded_while_the_process_runs_and_true_once_it_ended(
    child: subprocess.Popen[bytes],
) -> None:
    identity = procs.start_identity(child.pid)
    assert not procs.wait_ended(child.pid, identity, 0.05)  # still running: bounded
    assert procs.wait_ended(child.pid, "another:1", 10)  # another identity: not this one
    child.kill()
    assert procs.wait_ended(child.pid, identity, 10)  # woken by its end (a zombie counts)
    child.wait()
    assert procs.wait_ended(child.pid, identity, 10)  # gone: at once
