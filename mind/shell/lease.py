"""The session lease ``sessions/<id>/lease``: one writer per session (docs/design/lease.md).

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

from mind.errors import (
    PrivateStateError,
    SessionOccupiedError,
    StateDirError,
    as_storage_error,
)
from mind.shell import private_files, procs
from mind.shell.ids import new_id

_MAX_LEASE_BYTES = 4096
"""A lease record is under 200 bytes; a larger file is not read whole."""


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

        Blocks while another process holds that ``flock`` (its check-and-write
        takes milliseconds; a stopped holder holds it until it goes on or
        dies). Safe to call from a worker thread — it installs no signal
        handler and touches no event-loop object; threads of one process
        exclude each other through the same ``flock`` (one open file
        description each) — so async code calls it through
        ``anyio.to_thread.run_sync``.

        Raises:
            SessionOccupiedError: a live process (pid + start identity) holds it.
            StateDirError: the lease cannot be written.
        PrivateStateError: the session directory, ``lease`` or
            ``lease.lock`` is not private and owned (a symlink, FIFO,
            directory, another owner, group/world-writable); left untouched.
        """
        pid = os.getpid()
        record = LeaseRecord(
            pid=pid, start_identity=procs.start_identity(pid), owner_id=new_id("own")
        )
        try:
            private_files.private_dir(path.parent)
            # Never follows a link: a dangling one must not create a file elsewhere.
            lock_fd = private_files.open_file(
                path.with_name(path.name + ".lock"), os.O_RDWR, create=True
            )
        except OSError as exc:
            lock = path.with_name(path.name + ".lock")
            raise as_storage_error(exc, lock, "create lease lock") or StateDirError(
                path.parent, f"cannot lock the lease: {exc.strerror}"
            ) from exc
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
            held_fd = private_files.lock_dir(path.parent)
            if held_fd is None:
                raise SessionOccupiedError(session_id, holder.pid if holder else None)
            tmp = path.with_name(f".{path.name}.{record.owner_id}")
            try:
                private_files.write_atomic(
                    path, msgspec.json.encode(record), tmp=tmp, sync_dir=False
                )
            except OSError as exc:
                os.close(held_fd)
                raise as_storage_error(exc, path, "write lease") or StateDirError(
                    path.parent, f"cannot write lease: {exc.strerror}"
                ) from exc
            lease = cls(path, record, session_id)
            lease._held_fd = held_fd
            return lease
        finally:
            os.close(lock_fd)  # also releases the flock

    def release(self) -> None:
        """Delete the lease if it still names this owner, and drop the
        directory flock (idempotent)."""
        with contextlib.suppress(PrivateStateError):  # not ours to delete then
            if _read(self.path) == self.record:
                with contextlib.suppress(FileNotFoundError):
                    self.path.unlink()
        if self._held_fd is not None:
            os.close(self._held_fd)  # also releases the flock
            self._held_fd = None


def read_holder(path: Path) -> LeaseRecord | None:
    """The live holder of the lease at ``path``, or None (free, stale,
    unreadable, or not a private regular file: a listing never blocks on it)."""
    try:
        holder = _read(path)
    except PrivateStateError:
        return None
    if holder is not None and procs.same_process(holder.pid, holder.start_identity):
        return holder
    return None


def _read(path: Path) -> LeaseRecord | None:
    """The lease record, None when missing or not a lease.

    Raises:
        PrivateStateError: the lease is not a private regular file.
    """
    try:
        data = private_files.read_file(path, _MAX_LEASE_BYTES)
        return None if data is None else msgspec.json.decode(data, type=LeaseRecord)
    except (OSError, msgspec.DecodeError):
        return None
