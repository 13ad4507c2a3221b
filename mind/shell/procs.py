"""Process identity and liveness (seed 000 SessionLease; seed 002 §3).

A pid alone is not an identity: after a crash the pid may be reused by an
unrelated process. A process is identified by ``(pid, start identity)``
where the start identity is the kernel boot id plus the process start time
in clock ticks (``/proc/<pid>/stat`` field 22). Where ``/proc`` is absent the
identity is "" and only liveness counts.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

_PROC = Path("/proc")


def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def start_identity(pid: int) -> str:
    """``"<boot id>:<start ticks>"`` of ``pid``, or "" when it cannot be read
    (no such process, or no ``/proc``)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return ""
    # The command name (field 2) may contain spaces and ')': split after the last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        ticks = fields[19]  # field 22 overall: starttime
    except IndexError:
        return ""
    return f"{_boot_id()}:{ticks}"


def is_alive(pid: int) -> bool:
    """Whether ``pid`` exists (signal 0; EPERM counts as alive — seed 002 §3).

    A zombie (exited, not yet reaped) counts as dead.
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.EPERM
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return True
    state = stat[stat.rfind(")") + 2 :].split()[:1]
    return state != ["Z"]


def same_process(pid: int, identity: str) -> bool:
    """Whether ``pid`` is alive and still the process that had ``identity``.

    An empty recorded identity (written where ``/proc`` was absent) matches
    any live process with that pid.
    """
    if not is_alive(pid):
        return False
    if not identity:
        return True
    current = start_identity(pid)
    return current == "" or current == identity
