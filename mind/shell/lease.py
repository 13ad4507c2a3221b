"""The session lease ``sessions/<id>/lease``: one writer per session (seed 000
SessionLease; DESIGN §4).

The lease file holds ``{"pid", "start_identity", "owner_id"}``. It blocks a
new owner only while that pid is alive *and* its start identity matches — a
dead pid or a reused pid frees it. Taking it is serialised so two
processes racing for a free session cannot both win (the check and the
write happen under an ``flock`` that dies with its holder); a stale lease is
replaced by atomic rename. Release deletes the file only
if it still names this owner, so a late release never removes a newer
owner's lease.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

import msgspec

from mind.errors import SessionOccupiedError, StateDirError
from mind.shell import procs
from mind.shell.ids import new_id


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The content of a lease file."""

    pid: int
    start_identity: str
    owner_id: str


class SessionLease:
    """A held lease. Create with :meth:`acquire`; give back with :meth:`release`."""

    def __init__(self, path: Path, record: LeaseRecord, session_id: str) -> None:
        self.path = path
        self.record = record
        self.session_id = session_id
        self._held_fd: int | None = None

    @classmethod
    def acquire(cls, path: Path, session_id: str) -> SessionLease:
        """Take the lease at ``path`` for this process.

        The check-and-write runs under ``flock`` on ``<path>.lock`` — the kernel
        drops that lock when its holder dies, so it can never go stale — which
        makes "read the holder, find it dead, write ourselves" one atomic step
        across processes.

        Raises:
            SessionOccupiedError: a live process (pid + start identity) holds it.
            StateDirError: the lease cannot be written.
        """
        pid = os.getpid()
        record = LeaseRecord(
            pid=pid, start_identity=procs.start_identity(pid), owner_id=new_id("own")
        )
        try:
            lock_fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateDirError(path.parent, f"cannot lock the lease: {exc.strerror}") from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            holder = _read(path)
            if holder is not None and procs.same_process(holder.pid, holder.start_identity):
                if holder.pid == pid:  # this process already holds it
                    return cls(path, holder, session_id)
                raise SessionOccupiedError(session_id, holder.pid)
            # The pid check cannot see an owner in another PID namespace (a
            # container sharing the state directory): its pid looks dead here.
            # An flock held on the session directory for the lease's lifetime
            # can — the kernel shares it across namespaces and drops it when
            # the owner dies, even by SIGKILL.
            held_fd = _hold_directory(path.parent)
            if held_fd is None:
                raise SessionOccupiedError(session_id, holder.pid if holder else 0)
            tmp = path.with_name(f".{path.name}.{record.owner_id}")
            try:
                _write(tmp, msgspec.json.encode(record))
                os.replace(tmp, path)
            except OSError as exc:
                os.close(held_fd)
                raise StateDirError(path.parent, f"cannot write lease: {exc.strerror}") from exc
            lease = cls(path, record, session_id)
            lease._held_fd = held_fd
            return lease
        finally:
            os.close(lock_fd)  # also releases the flock

    def release(self) -> None:
        """Delete the lease if it still names this owner, and drop the
        directory flock (idempotent)."""
        if _read(self.path) == self.record:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        if self._held_fd is not None:
            os.close(self._held_fd)  # also releases the flock
            self._held_fd = None


def _hold_directory(directory: Path) -> int | None:
    """An fd holding ``flock(LOCK_EX)`` on ``directory``, or None when another
    open file description holds it (a live owner, possibly in another PID
    namespace)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def read_holder(path: Path) -> LeaseRecord | None:
    """The live holder of the lease at ``path``, or None (free, stale or unreadable)."""
    holder = _read(path)
    if holder is not None and procs.same_process(holder.pid, holder.start_identity):
        return holder
    return None


def _read(path: Path) -> LeaseRecord | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=LeaseRecord)
    except (OSError, msgspec.DecodeError):
        return None


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
