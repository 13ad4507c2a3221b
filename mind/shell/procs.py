"""Process identity and liveness: the one place mind reads them (docs/design/state.md).

A pid alone is not an identity: after a crash the pid may be reused by an
unrelated process. A process is identified by ``(pid, start identity)``.
Everything here reads the process table through psutil, so the session
lease and the mount ledger work wherever psutil does (Linux, macOS).

The start identity is the string written into lease files and ledger
records and compared for equality later, so its format is fixed:

- Linux: ``"<kernel boot id>:<start time in clock ticks since boot>"`` —
  the format earlier minds wrote from ``/proc/<pid>/stat`` field 22. The
  ticks are recovered exactly from psutil's start time (seconds since the
  epoch = boot time + ticks / ``SC_CLK_TCK``; both are whole numbers).
- elsewhere: ``"start:<start time in µs since the epoch>"`` (the kernel
  keeps it at µs resolution and never rewrites it).
- ``""`` when it cannot be read (no such process, no permission, no process
  table): then only liveness counts.

All functions are thread-safe and may be called from worker threads.
psutil (~15 ms to import) is imported by the first function that reads a
process, not with this module: the lease, the ledger and the store import it
on paths (``mind --version``, ``Runtime.open``) that read none.
"""

from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import psutil

__all__ = [
    "STRAY_ROUNDS",
    "is_alive",
    "kill_strays",
    "pidfd",
    "same_process",
    "start_identity",
    "started_at_ms",
    "terminate",
    "wait_ended",
]

_LINUX: Final = sys.platform.startswith("linux")
STRAY_ROUNDS: Final = 50
"""Scans :func:`kill_strays` makes at most: a stray may fork between a scan
and its SIGKILL, so it scans again until one finds none."""
_BOOT_ID: Final = Path("/proc/sys/kernel/random/boot_id")
"""A kernel value, not a process table read: psutil has no boot id."""


def _boot_id() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return ""


def _create_time_s(pid: int) -> float | None:
    """psutil's start time of ``pid``, s since the epoch; None when unknown."""
    if pid <= 0:
        return None
    import psutil  # here, not at import: see the module docstring

    try:
        return psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return None


def start_identity(pid: int) -> str:
    """The start identity of ``pid`` (module docstring for the format), or ""
    when it cannot be read."""
    created = _create_time_s(pid)
    if created is None:
        return ""
    if not _LINUX:
        return f"start:{round(created * 1_000_000)}"
    import psutil

    try:
        since_boot_s = created - psutil.boot_time()
    except (psutil.Error, OSError, RuntimeError):
        return ""
    return f"{_boot_id()}:{round(since_boot_s * os.sysconf('SC_CLK_TCK'))}"


def started_at_ms(pid: int, *, fallback_ms: int) -> int:
    """When ``pid`` started, Unix epoch milliseconds; ``fallback_ms`` if unknown.

    For display (the ledger's ``startedAt``), never for identity: the wall
    clock may be set after the process started.
    """
    created = _create_time_s(pid)
    return fallback_ms if created is None else round(created * 1000)


def is_alive(pid: int) -> bool:
    """Whether ``pid`` exists: a process of another user counts (EPERM on
    signal 0 is alive), a zombie (exited, not yet reaped) is dead."""
    import psutil  # here, not at import: see the module docstring

    if pid <= 0 or not psutil.pid_exists(pid):
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError):
        return True  # it exists (pid_exists) and cannot be inspected


def same_process(pid: int, identity: str) -> bool:
    """Whether ``pid`` is alive and still the process that had ``identity``.

    An empty recorded identity (written where none could be read) matches
    any live process with that pid, and so does a live process whose
    identity cannot be read now (fail toward "held": a live owner is never
    taken over).
    """
    if not is_alive(pid):
        return False
    if not identity:
        return True
    current = start_identity(pid)
    return current == "" or current == identity


def pidfd(pid: int, identity: str) -> int | None:
    """A pidfd (Linux 5.3+) of the live process ``(pid, identity)``
    (:func:`same_process`), or None when it is not alive, is another process
    now, or no pidfd can be had. Opened before the identity is checked, so
    the descriptor names that very process: waiting on it (readable once it
    ends) and signalling through it never reach a later process given its
    pid. The caller closes it."""
    if pid <= 0:
        return None
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):  # gone, or no pidfd here
        return None
    if same_process(pid, identity):
        return fd
    os.close(fd)
    return None


def terminate(pid: int, identity: str, *, signum: int = signal.SIGTERM) -> bool:
    """``signum`` (SIGTERM unless told) to the live process ``(pid, identity)``
    through its :func:`pidfd`. Returns True when that process was signalled,
    False when it is gone or another process holds its pid (nothing is signalled)."""
    fd = pidfd(pid, identity)
    if fd is None:
        return False
    try:
        signal.pidfd_send_signal(fd, signum)
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)
    return True


def wait_ended(pid: int, identity: str, timeout_s: float) -> bool:
    """Block until the process ``(pid, identity)`` has ended, at most
    ``timeout_s`` seconds (a poll on its :func:`pidfd`, woken by the kernel
    at its end: no polling loop). Returns True when it has ended (or was
    gone, or another process holds its pid), False when it still runs after
    ``timeout_s``. Blocking: call it off the event loop."""
    fd = pidfd(pid, identity)
    if fd is None:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(max(0, round(timeout_s * 1000))))
    finally:
        os.close(fd)


def kill_strays(marker: str, *, session_id: int | None = None) -> int:
    """SIGKILL every process of this user whose environment holds the entry
    ``marker`` (``NAME=value``, exactly) or, when ``session_id`` is given,
    that belongs to that session; scan again until a scan finds none (at
    most :data:`STRAY_ROUNDS`). For the tree a dead supervisor could not
    kill (docs/design/processes.md §6.7). mind itself is never signalled.

    Only ever pass a ``session_id`` mind knows from its own spawn: a
    session id read from a file the command could write might name any.

    Returns:
        How many processes were signalled (0: none found).
    """
    import psutil  # here, not at import: see the module docstring

    entry = marker.encode() + b"\0"
    me = os.getpid()
    uid = os.getuid()
    killed = 0
    for _ in range(STRAY_ROUNDS):
        found = 0
        for process in psutil.process_iter():
            pid = process.pid
            if pid == me or not _is_stray(process, pid, uid, entry, session_id):
                continue
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                continue
            found += 1
        killed += found
        if not found:
            break
    return killed


def _is_stray(
    process: psutil.Process, pid: int, uid: int, entry: bytes, session_id: int | None
) -> bool:
    """Whether ``pid`` (live, this user's) carries ``entry`` or is in ``session_id``."""
    import psutil

    try:
        if process.uids().real != uid or process.status() == psutil.STATUS_ZOMBIE:
            return False
        if session_id is not None and os.getsid(pid) == session_id:
            return True
        # psutil's environ() splits on "=" and drops malformed entries; the raw
        # file is what the kernel holds, read where there is one.
        if _LINUX:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                return (b"\0" + environ.read()).find(b"\0" + entry) >= 0
        name, _, value = entry[:-1].decode().partition("=")
        return process.environ().get(name) == value
    except (psutil.Error, OSError):
        return False  # gone, or not readable: not ours to judge
