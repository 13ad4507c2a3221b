"""The session mount ledger: which live process hosts which sessions (DESIGN §4; seed 002 §3).

Size: the ledger file, its lock and the reclaim rules are one protocol (seed
002 §3) read and written under one lock; the lock token code is the piece
that can stand alone.

Two files in the state root (``MIND_STATE_HOME``):

- ``session-mounts.json`` — ``{"version": 1, "owners": [{"pid", "startedAt",
  "sessionIds", "startIdentity"}]}`` (schema ``specs/schemas/session_mounts.schema.json``):
  every process publishes its mount set (hosted sessions ∪ claims in flight).
- ``session-mounts.lock`` — the cross-process lock, created exclusively
  (``O_CREAT | O_EXCL``) holding the token ``<pid>-<nonce>@<start identity>``
  (:func:`~mind.machines.mount.parse_token`).

This ledger is the same-machine *visibility* layer and the admission check
for mounting; the per-session lease (:mod:`mind.shell.lease`) stays the write
authority on the journal (seed 002 §3.3, "known cost").

Rules (seed 002 §3.2–3.4, §6), each kept by one function below:

1. Check and claim are one step (§3.4, §6.1): :meth:`MountLedger.claim` takes
   the lock, re-reads the file strictly, re-checks the conflict and writes its
   record, all before releasing the lock. A lock-free strict read first may
   refuse ``occupied`` early (a consistent snapshot naming a live holder); it
   never grants.
2. Atomic replace (§3.2): ``session-mounts.json.<pid>.<ms>.<seq>.tmp`` (0600)
   + fsync + rename; readers never see half a file.
3. A writer that lost its lock does not write (§3.2, §6.5): right before the
   tmp file is written and again right before the rename, the lock file must
   still be the very file this process created (same inode) holding its token;
   otherwise the commit is abandoned and the attempt counts as contended.
   Release deletes the lock only under the same check.
4. Only dead holders are reclaimed (§3.2, §6.5): a lock whose token names a
   live process (signal 0, EPERM alive, and the same start identity) is never
   taken, however old; an unreadable token is taken only after
   :data:`STALE_LOCK_S`. Tokens and records carry the writer's start identity
   (DESIGN §4, beyond seed 002's accepted cost), so a pid reused by an
   unrelated process — or this mind's own pid after a container restart — no
   longer blocks anyone; old-format tokens and records (no identity) keep the
   pid-only rule. Reclaimers are serialised by an
   ``flock`` on the state directory itself (released by the kernel when its
   holder dies, so it never goes stale, and it adds no file): each re-reads
   the lock under it before moving it away, so two reclaimers can never both
   remove a lock, nor remove a live lock created after a dead one was taken.
5. Liveness has one witness, the process — pid plus start identity (§3.3,
   DESIGN §4): no heartbeats. A record of a dead or reused pid is ignored when
   read and dropped at the next write.
6. No write on the read path (§3.3, §6.6): :meth:`MountLedger.holders` and
   :meth:`MountLedger.snapshot` read leniently (damaged -> empty) and never
   write; filtering happens in memory.
7. Strict read to grant (§3.4, §6.6): only a missing file means "empty"; a
   file that cannot be read, is not JSON, has another version or another
   shape makes the claim refuse ``unavailable`` with the detail, and the file
   is left byte-identical (a damaged record may be someone's only claim).
8. Permissions (§3.2): the state directory is created 0700, files 0600; a
   read-only directory is a loud ``unavailable`` refusal — never a fallback
   location (DESIGN §4).
9. Published set = hosted sessions ∪ claims in flight (§3.4), republished by
   :meth:`MountLedger.republish` every :data:`PUBLISH_INTERVAL_S` (the caller
   schedules it, or uses :class:`RepublishTimer`, a daemon thread that never
   keeps the process alive — §4, §6.7); :meth:`MountLedger.close` (normal exit,
   including Ctrl+C) removes this process's record (§3.3).

Threads: one :class:`MountLedger` per process and state root; its methods
(and its handles') are serialised by an internal lock, so a republish timer
thread and the asyncio thread may call it concurrently. Calls block: at most
~1 s in :meth:`MountLedger.claim` under contention (bounded backoff), a few
file operations otherwise — call from a worker thread in async code.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

import msgspec

from mind.errors import MountHolder, MountRefused, PrivateStateError, as_storage_error
from mind.generated.session_mounts import MountOwner, SessionMountsFile
from mind.machines.mount import (
    BACKOFF_MS,
    Liveness,
    MountMachine,
    MountState,
    backoff_ms,
    format_token,
    holders_of,
    identity_of,
    lock_verdict,
    parse_token,
    with_own_record,
)
from mind.shell import private_files, procs

__all__ = [
    "LEDGER_NAME",
    "LOCK_NAME",
    "MAX_LEDGER_BYTES",
    "PUBLISH_INTERVAL_S",
    "STALE_LOCK_S",
    "MountHandle",
    "MountHolder",
    "MountLedger",
    "OwnerRecord",
    "RepublishTimer",
    "read_ledger_lenient",
    "read_ledger_strict",
]

LEDGER_NAME: Final = "session-mounts.json"
"""The ledger's file name in the state root (seed 002 §3.2)."""

LOCK_NAME: Final = "session-mounts.lock"
"""The lock's file name in the state root (seed 002 §3.2)."""

PUBLISH_INTERVAL_S: Final = 15.0
"""How often the caller republishes the mount set, s (seed 002 §4 PUBLISH_INTERVAL_MS)."""

STALE_LOCK_S: Final = 10.0
"""Create-to-write window of the lock, s: a lock whose token cannot be read is
reclaimed only once its file is older than this (seed 002 §3.2 STALE_LOCK_MS)."""

MAX_LEDGER_BYTES: Final = 4 * 1024 * 1024
"""A larger ledger is refused as damaged (processes × sessions is small)."""

_ENCODER: Final = msgspec.json.Encoder()
_log = logging.getLogger("mind.mounts")


class _Unavailable(Exception):
    """The ledger cannot be read or written; ``str()`` is the detail."""


class _Contended(Exception):
    """The lock is held by a live peer, or was lost before the commit; ``str()``
    names the lock file and its holder."""


class _Occupied(Exception):
    def __init__(self, holders: tuple[MountHolder, ...]) -> None:
        super().__init__(holders)
        self.holders = holders


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """One live process's published mount set, as read for display.

    Attributes:
        pid: the process id.
        started_at_ms: when it started, Unix epoch milliseconds.
        session_ids: the sessions it hosts or is claiming, sorted.
        is_self: it is this ledger's process.
    """

    pid: int
    started_at_ms: int
    session_ids: tuple[str, ...]
    is_self: bool


@dataclass(frozen=True, slots=True)
class _Held:
    """A lock this process created: its token and the file's identity."""

    token: bytes
    dev: int
    ino: int


# ---------------------------------------------------------------------- reading


def read_ledger_strict(path: Path) -> list[MountOwner]:
    """Read ``session-mounts.json`` to decide a claim (seed 002 §3.4 readMountLedgerStrict).

    Only a missing file is an empty ledger. Never writes.

    Returns:
        Every record in file order, dead pids included (the caller filters).

    Raises:
        _Unavailable: unreadable, not a regular file, over
            :data:`MAX_LEDGER_BYTES`, not JSON, another version or another shape.
    """
    try:
        data = private_files.read_file(path, MAX_LEDGER_BYTES)
    except PrivateStateError as exc:
        raise _Unavailable(str(exc)) from exc
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    if data is None:
        return []
    if len(data) > MAX_LEDGER_BYTES:
        raise _Unavailable(f"{path} is larger than {MAX_LEDGER_BYTES} bytes")
    return _decode(path, data).owners


def _decode(path: Path, data: bytes) -> SessionMountsFile:
    damaged = "delete it when no other mind is running"
    try:
        raw = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _Unavailable(f"{path} is damaged (not JSON: {exc}); {damaged}") from exc
    if not isinstance(raw, dict):
        raise _Unavailable(f"{path} is damaged (not a JSON object); {damaged}")
    if raw.get("version") != 1:
        raise _Unavailable(
            f"{path} has unknown version {raw.get('version')!r} (this mind reads 1); {damaged}"
        )
    try:
        return msgspec.convert(raw, SessionMountsFile)
    except msgspec.ValidationError as exc:
        raise _Unavailable(f"{path} is damaged ({exc}); {damaged}") from exc


def read_ledger_lenient(path: Path) -> list[MountOwner]:
    """Read ``session-mounts.json`` for display: any damage reads as empty (seed 002 §6.6).

    Never writes and never raises for the file's content or absence.
    """
    try:
        return read_ledger_strict(path)
    except _Unavailable:
        return []


def _started_at_ms(pid: int, fallback_ms: int) -> int:
    """Start time of ``pid``, Unix epoch ms, from ``/proc``; ``fallback_ms`` if unknown."""
    try:
        stat_text = Path(f"/proc/{pid}/stat").read_text()
        ticks = int(stat_text[stat_text.rfind(")") + 2 :].split()[19])
        btime = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        return btime * 1000 + ticks * 1000 // os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return fallback_ms


# ---------------------------------------------------------------------- the ledger


@final
class MountHandle:
    """This process's claim on one session; returned by :meth:`MountLedger.claim`.

    The same object is returned for every re-entry while the session is
    hosted (idempotent, seed 002 §3.4). Methods are thread-safe (the
    ledger's lock).

    Attributes:
        session_id: the claimed session.
        warning: for a brand-new id that could not be published, the refusal
            it would have been (``busy`` or ``unavailable``); else ``None``.
    """

    def __init__(self, ledger: MountLedger, session_id: str, machine: MountMachine) -> None:
        self._ledger = ledger
        self.session_id = session_id
        self._machine = machine
        self._published = False
        self.warning: MountRefused | None = None

    def __repr__(self) -> str:
        return f"MountHandle({self.session_id!r}, state={self.state!r})"

    @property
    def state(self) -> MountState:
        """``reserved | attached | parked | abandoned | released``."""
        return self._machine.state

    @property
    def hosted(self) -> bool:
        """The session is in this process's published set (reserved, attached or parked)."""
        return self._machine.hosted

    @property
    def published(self) -> bool:
        """This process's last successful write of its record listed this session.

        ``False`` for a brand-new id whose claim could not be published, until
        a later write (:meth:`MountLedger.republish`, or another claim or
        release of this process) succeeds; ``False`` once given back.
        """
        with self._ledger._mutex:
            return self.hosted and self._published

    def settle(self, *, attached: bool) -> None:
        """The resume finished: the session is hosted, shown (``attached``) or parked.

        No file I/O: the claim was published at :meth:`MountLedger.claim`.

        Raises:
            IllegalTransition: not ``reserved`` (misuse).
        """
        with self._ledger._mutex:
            self._machine.settle(attached=attached)

    def attach(self) -> None:
        """``parked -> attached`` (this session is shown again). No file I/O.

        Raises:
            IllegalTransition: not ``parked``.
        """
        with self._ledger._mutex:
            self._machine.attach()

    def park(self) -> None:
        """``attached -> parked``: another session is shown; this one keeps running
        in this process and stays published (seed 002 §2, §6.2). No file I/O.

        Raises:
            IllegalTransition: not ``attached``.
        """
        with self._ledger._mutex:
            self._machine.park()

    def abandon(self) -> bool:
        """The resume failed: give the claim back (``reserved -> abandoned``).

        Call only after the session's handles are really closed (seed 002
        §3.4: the claim must not vanish while writes may still happen).

        Returns:
            Whether the ledger now omits the session (``False``: the rewrite was
            refused; the record is corrected by the next republish, or ignored
            once this process exits).

        Raises:
            IllegalTransition: not ``reserved``.
        """
        with self._ledger._mutex:
            self._machine.abandon()
            return self._ledger._forget(self)

    def release(self) -> bool:
        """The session is closed in this process: ``attached | parked -> released``;
        on a ``reserved`` claim this is :meth:`abandon`. Idempotent once released.

        Returns:
            Whether the ledger now omits the session (see :meth:`abandon`).

        Raises:
            IllegalTransition: ``abandoned`` (already given back).
        """
        with self._ledger._mutex:
            if self.state == "released":
                return self.session_id not in self._ledger._on_disk
            if self.state == "reserved":
                return self.abandon()
            self._machine.release()
            return self._ledger._forget(self)


@final
class MountLedger:
    """This process's view of ``session-mounts.json`` and its claims.

    Args:
        root: the state root (``MIND_STATE_HOME``; ``Store.root``). Created
            0700 on the first write if missing; never replaced by another place.
        pid: the pid published and written in lock tokens (tests may pass a
            live child's pid; default this process).
        alive: liveness of a recorded process, ``(pid, start identity)``
            (default :func:`mind.shell.procs.same_process`: signal 0, EPERM
            alive, zombies dead, a differing start identity dead).
        clock_s: wall clock, s since the epoch (compared with file mtimes for
            the stale-token window, and names tmp files).
        sleep_s: waits between lock attempts, s.
        rng: jitter for the backoff.
        stale_lock_s: the unreadable-token window (:data:`STALE_LOCK_S`).
    """

    def __init__(
        self,
        root: Path,
        *,
        pid: int | None = None,
        alive: Liveness = procs.same_process,
        clock_s: Callable[[], float] = time.time,
        sleep_s: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        stale_lock_s: float = STALE_LOCK_S,
    ) -> None:
        self.root = root
        self.ledger_path = root / LEDGER_NAME
        self.lock_path = root / LOCK_NAME
        self.pid = pid if pid is not None else os.getpid()
        self.started_at_ms = _started_at_ms(self.pid, int(clock_s() * 1000))
        self.start_identity = procs.start_identity(self.pid)
        self._alive = alive
        self._clock_s = clock_s
        self._sleep_s = sleep_s
        self._rng = rng if rng is not None else random.Random()
        self._stale_lock_s = stale_lock_s
        self._mutex = threading.RLock()
        self._handles: dict[str, MountHandle] = {}
        self._on_disk: frozenset[str] = frozenset()  # our record as last written
        self._seq = 0
        self._closed = False
        self._observers: list[object] = []

    def __repr__(self) -> str:
        return f"MountLedger({str(self.root)!r}, pid={self.pid}, hosted={sorted(self.hosted())})"

    # ------------------------------------------------------------------ queries

    def hosted(self) -> frozenset[str]:
        """This process's published set: hosted sessions ∪ claims in flight (seed 002 §3.4)."""
        with self._mutex:
            return frozenset(sid for sid, h in self._handles.items() if h.hosted)

    def handle(self, session_id: str) -> MountHandle | None:
        """The live handle for a session this process hosts, or ``None``."""
        with self._mutex:
            handle = self._handles.get(session_id)
            return handle if handle is not None and handle.hosted else None

    def holders(self, session_id: str) -> list[MountHolder]:
        """Live *other* processes listing ``session_id``, for display (lenient, no write).

        A damaged ledger reads as empty here (seed 002 §3.2: the screen may
        show fewer rows, it must not crash); entering still goes through the
        strict :meth:`claim`. Sessions this process hosts are never "occupied".
        """
        owners = read_ledger_lenient(self.ledger_path)
        return list(holders_of(owners, session_id, me=self.pid, alive=self._alive))

    def snapshot(self) -> list[OwnerRecord]:
        """Every live record in file order, this process's included (lenient, no write)."""
        out: list[OwnerRecord] = []
        for owner in read_ledger_lenient(self.ledger_path):
            if self._alive(owner.pid, identity_of(owner)):
                out.append(
                    OwnerRecord(
                        pid=owner.pid,
                        started_at_ms=owner.startedAt,
                        session_ids=tuple(sorted(set(owner.sessionIds))),
                        is_self=owner.pid == self.pid,
                    )
                )
        return out

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener to every future claim's machine (tests)."""
        with self._mutex:
            self._observers.append(listener)

    # ------------------------------------------------------------------ claiming

    def claim(self, session_id: str, *, new_session: bool = False) -> MountHandle:
        """Mount ``session_id`` in this process: check and publish in one locked step.

        A session this process already hosts (reserved, attached or parked)
        returns the same handle and touches no file (seed 002 §3.4: idempotent
        re-entry, never a dispose). Otherwise (seed 002 §3.4 claimMount):

        1. a lock-free strict read; a live foreign holder -> ``occupied`` at once;
        2. take ``session-mounts.lock`` (reclaiming it only from a dead holder);
        3. under it: strict re-read, conflict re-check, then write this
           process's record with the session added — or write nothing;
        4. release the lock.

        A contended lock is retried after 25–400 ms waits (five times), then
        refused ``busy``.

        Args:
            session_id: the session to mount.
            new_session: the id was generated just now (/new, fork, startup):
                ``busy``/``unavailable`` then only mean "could not publish" —
                the handle is returned with :attr:`MountHandle.warning` set and
                a logged warning (seed 002 §3.4); ``occupied`` is still refused.

        Returns:
            The handle, in state ``reserved``: call :meth:`MountHandle.settle`
            when the resume succeeded, :meth:`MountHandle.abandon` if it failed.

        Raises:
            MountRefused: ``occupied`` (holders named), ``busy`` or
                ``unavailable`` (detail). Nothing was written; the lock is not
                left behind.
            StorageError: instead of ``unavailable`` when the storage refused
                the write (full disk, quota, I/O error, read-only; the refusal
                is its ``__cause__``).
            RuntimeError: the ledger was closed.
        """
        with self._mutex:
            if self._closed:
                raise RuntimeError("mount ledger is closed")
            existing = self._handles.get(session_id)
            if existing is not None and existing.hosted:
                existing._machine.reenter()
                return existing
            machine = MountMachine(new_session=new_session)
            for listener in self._observers:
                machine.observe(listener)
            handle = MountHandle(self, session_id, machine)
            machine.claim()
            refusal = self._run_claim(handle)
            if refusal is not None and not machine.hosted:
                if refusal.storage is not None:  # a full disk is storage, not a refusal
                    raise refusal.storage from refusal
                raise refusal
            if refusal is not None:
                handle.warning = refusal
                _log.warning(
                    "new session %s could not be published in %s: %s",
                    session_id,
                    self.ledger_path,
                    refusal.reason,
                )
            self._handles[session_id] = handle
            return handle

    def _run_claim(self, handle: MountHandle) -> MountRefused | None:
        """Drive ``handle``'s machine from ``reserving`` to a decision.

        Returns:
            ``None`` when granted; else the refusal (raised by the caller unless
            the machine reserved anyway for a brand-new id).
        """
        machine = handle._machine
        sid = handle.session_id
        try:
            early = holders_of(
                read_ledger_strict(self.ledger_path), sid, me=self.pid, alive=self._alive
            )
        except _Unavailable:
            early = ()  # decided under the lock, strictly
        if early:
            machine.conflict()
            return MountRefused(sid, "occupied", holders=early)
        while True:
            try:
                self._commit(self.hosted() | {sid}, conflict_for=sid)
            except _Occupied as occupied:
                machine.conflict()
                return MountRefused(sid, "occupied", holders=occupied.holders)
            except _Contended as contended:
                machine.contend()
                if machine.state == "backing_off":
                    self._sleep_s(machine.next_backoff_ms(self._rng.random()) / 1000)
                    machine.retry()
                    continue
                return MountRefused(sid, "busy", detail=str(contended))
            except _Unavailable as unavailable:
                machine.fail()
                storage = as_storage_error(unavailable, self.lock_path, "write the mount lock")
                return MountRefused(sid, "unavailable", detail=str(unavailable), storage=storage)
            machine.grant()
            handle._published = True
            return None

    # ------------------------------------------------------------------ publishing

    def republish(self) -> None:
        """Rewrite this process's record from its published set (seed 002 §3.4, §4).

        Called every :data:`PUBLISH_INTERVAL_S` by the caller. Repairs a record
        another writer lost (e.g. the file was deleted), publishes brand-new
        sessions whose claim could not be published, and drops dead records
        (write-path cleanup). Skipped when this process publishes nothing and
        has no record on disk. Never grants anything: no conflict check.

        Raises:
            MountRefused: ``busy`` or ``unavailable`` (session id None); the
                file is unchanged. Timers should log it and try at the next tick.
        """
        with self._mutex:
            if self._closed:
                return
            self._publish_with_backoff(self.hosted())

    def close(self) -> bool:
        """Give back every claim and remove this process's record (normal exit, seed 002 §3.3).

        Reserved claims are abandoned and hosted sessions released. Idempotent.

        Returns:
            Whether the ledger no longer lists this process (``False``: the
            rewrite was refused; the record is ignored once the pid is gone).
        """
        with self._mutex:
            if not self._closed:
                self._closed = True
                for handle in self._handles.values():
                    if handle.state == "reserved":
                        handle._machine.abandon()
                    elif handle.hosted:
                        handle._machine.release()
            try:
                self._publish_with_backoff(frozenset())
            except MountRefused:
                return False
            return True

    def _forget(self, handle: MountHandle) -> bool:
        """Rewrite the record without a session just abandoned or released."""
        if self._handles.get(handle.session_id) is handle:
            del self._handles[handle.session_id]
        if self._closed:
            return handle.session_id not in self._on_disk
        try:
            self._publish_with_backoff(self.hosted())
        except MountRefused as refused:
            _log.warning("could not unpublish session %s: %s", handle.session_id, refused.reason)
            return False
        return True

    def _publish_with_backoff(self, sessions: frozenset[str]) -> None:
        if not sessions and not self._on_disk:
            return
        attempt = 0
        while True:
            try:
                self._commit(sessions, conflict_for=None)
                return
            except _Contended as contended:
                if attempt >= len(BACKOFF_MS):
                    raise MountRefused(None, "busy", detail=str(contended)) from None
                self._sleep_s(backoff_ms(attempt, self._rng.random()) / 1000)
                attempt += 1
            except _Unavailable as unavailable:
                raise MountRefused(None, "unavailable", detail=str(unavailable)) from None
            except _Occupied:  # pragma: no cover - no conflict check without conflict_for
                raise AssertionError("unreachable") from None

    # ------------------------------------------------------------------ the locked step

    def _commit(self, sessions: frozenset[str], *, conflict_for: str | None) -> None:
        """One locked read-check-write of this process's record.

        Raises:
            _Contended: the lock is held by a live peer, or was lost before the rename.
            _Occupied: ``conflict_for`` has a live foreign holder; nothing written.
            _Unavailable: the ledger or the lock cannot be read or written.
        """
        held = self._acquire()
        try:
            owners = read_ledger_strict(self.ledger_path)
            if conflict_for is not None:
                found = holders_of(owners, conflict_for, me=self.pid, alive=self._alive)
                if found:
                    raise _Occupied(found)
            new_owners = with_own_record(
                owners,
                me=self.pid,
                started_at_ms=self.started_at_ms,
                session_ids=sessions,
                alive=self._alive,
                start_identity=self.start_identity,
            )
            data = _ENCODER.encode(SessionMountsFile(version=1, owners=new_owners))
            self._replace(data, held)
            self._on_disk = sessions
            for handle in self._handles.values():
                handle._published = handle.session_id in sessions
            self._sweep_debris()
        finally:
            self._release(held)

    def _replace(self, data: bytes, held: _Held) -> None:
        """tmp (0600) + write + fsync + rename, re-checking the lock around it.

        The tmp file is fsynced so a power loss cannot leave an empty or torn
        ledger (which would refuse every claim ``unavailable``). The directory
        is not fsynced: after a power loss every recorded pid is dead, so the
        old and the new file are equally right, and the lock is held shorter.
        """
        if not self._still_mine(held):
            raise self._lost()
        self._seq += 1
        ms = int(self._clock_s() * 1000)
        tmp = self.root / f"{LEDGER_NAME}.{self.pid}.{ms}.{self._seq}.tmp"

        def still_mine() -> None:
            if not self._still_mine(held):
                raise self._lost()

        try:
            private_files.write_atomic(
                self.ledger_path, data, tmp=tmp, sync_dir=False, before_replace=still_mine
            )
        except PrivateStateError as exc:
            raise _Unavailable(str(exc)) from exc
        except OSError as exc:
            raise _Unavailable(f"cannot write {self.ledger_path}: {exc.strerror}") from exc

    # ------------------------------------------------------------------ the lock

    def _acquire(self) -> _Held:
        """Create ``session-mounts.lock`` exclusively with a fresh token.

        A lock found in place is reclaimed only from a dead holder (then the
        create is tried once more).

        Raises:
            _Contended: a live holder has it (or another reclaimer is at work).
            _Unavailable: the state directory cannot be created or written.
        """
        try:
            private_files.private_dir(self.root)
        except PrivateStateError as exc:
            raise _Unavailable(str(exc)) from exc
        except OSError as exc:
            raise _Unavailable(f"cannot create {self.root}: {exc.strerror}") from exc
        for _ in range(2):
            token = format_token(self.pid, secrets.token_hex(8), self.start_identity)
            try:
                fd = private_files.open_file(self.lock_path, os.O_WRONLY | os.O_EXCL, create=True)
            except FileExistsError:
                if self._reclaim():
                    continue
                raise _Contended(self._holder_text()) from None
            except OSError as exc:
                raise _Unavailable(f"cannot create {self.lock_path}: {exc.strerror}") from exc
            info: os.stat_result | None = None
            try:
                try:
                    info = os.fstat(fd)
                    os.write(fd, token)
                finally:
                    os.close(fd)
            except BaseException as exc:  # OSError, or Ctrl+C between create and write
                with contextlib.suppress(OSError, _Unavailable):
                    found = _read_lock(self.lock_path)
                    ours = (info.st_dev, info.st_ino) if info is not None else None
                    if found is not None and (found[1], found[2]) == ours:
                        self.lock_path.unlink()  # leave no unreadable token behind
                if isinstance(exc, OSError):
                    detail = f"cannot write {self.lock_path}: {exc.strerror}"
                    raise _Unavailable(detail) from exc
                raise
            held = _Held(token=token, dev=info.st_dev, ino=info.st_ino)
            if not self._still_mine(held):  # reclaimed as unreadable while we were paused
                raise self._lost()
            return held
        raise _Contended(self._holder_text())

    def _lost(self) -> _Contended:
        return _Contended(f"{self.lock_path} was taken over by {self._holder_text(bare=True)}")

    def _holder_text(self, *, bare: bool = False) -> str:
        """Who holds the lock now, for busy messages: the file and the holder's pid."""
        try:
            found = _read_lock(self.lock_path)
        except _Unavailable as exc:
            return str(exc)
        if found is None:
            who = "nobody (it was just released)"
        elif (token := parse_token(found[0])) is None:
            who = f"a holder whose token is not written yet ({found[0][:40]!r})"
        else:
            who = f"pid {token.pid}"
        return who if bare else f"{self.lock_path} is held by {who}"

    def _still_mine(self, held: _Held) -> bool:
        """The lock file is the one this process created and holds its token."""
        found = _read_lock(self.lock_path)
        return (
            found is not None
            and (found[1], found[2]) == (held.dev, held.ino)
            and (found[0] == held.token)
        )

    def _release(self, held: _Held) -> None:
        """Delete the lock only if it is still this process's (seed 002 §3.2, §6.5)."""
        with contextlib.suppress(_Unavailable, FileNotFoundError):
            if self._still_mine(held):
                self.lock_path.unlink()

    def _reclaim(self) -> bool:
        """Remove a lock whose holder is dead (or whose token stayed unreadable too long).

        Serialised by ``flock`` on the state directory (non-blocking: another
        reclaimer at work counts as contention). Under it the lock is read
        again and moved aside by rename; if what was moved is not what was
        judged (a holder finished writing its token meanwhile) it is put back.

        Returns:
            Whether the create should be tried again now (the lock is gone).
        """
        try:
            dfd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise _Unavailable(f"cannot open {self.root}: {exc.strerror}") from exc
        try:
            try:
                fcntl.flock(dfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            except OSError as exc:
                raise _Unavailable(f"cannot lock {self.root}: {exc.strerror}") from exc
            found = _read_lock(self.lock_path)
            if found is None:
                return True
            raw, dev, ino, mtime = found
            verdict = lock_verdict(
                raw,
                age_s=self._clock_s() - mtime,
                stale_after_s=self._stale_lock_s,
                alive=self._alive,
                # Without /proc this process's own tokens carry no identity either.
                me=self.pid if self.start_identity else 0,
            )
            if verdict == "held":
                return False
            grave = self.root / f"{LOCK_NAME}.{self.pid}.{secrets.token_hex(4)}.reclaim"
            try:
                os.rename(self.lock_path, grave)
            except FileNotFoundError:
                return True
            except OSError as exc:
                raise _Unavailable(f"cannot reclaim {self.lock_path}: {exc.strerror}") from exc
            moved = _read_lock(grave)
            if moved is not None and (moved[0], moved[1], moved[2]) != (raw, dev, ino):
                with contextlib.suppress(OSError):  # EEXIST: its writer will see it lost
                    os.link(grave, self.lock_path)
            with contextlib.suppress(OSError):
                grave.unlink()
            _log.info("reclaimed %s from %s holder %r", self.lock_path, verdict, raw[:40])
            return moved is not None and (moved[0], moved[1], moved[2]) == (raw, dev, ino)
        finally:
            os.close(dfd)  # also drops the flock

    def _sweep_debris(self) -> None:
        """Remove tmp and reclaim files left by dead processes (write path only, under the lock)."""
        try:
            names = os.listdir(self.root)
        except OSError:
            return
        for name in names:
            if name.startswith(f"{LEDGER_NAME}.") and name.endswith(".tmp"):
                pid_text = name[len(LEDGER_NAME) + 1 :].split(".", 1)[0]
            elif name.startswith(f"{LOCK_NAME}.") and name.endswith(".reclaim"):
                pid_text = name[len(LOCK_NAME) + 1 :].split(".", 1)[0]
            else:
                continue
            pid = int(pid_text) if pid_text.isdigit() else 0
            if pid and pid != self.pid and not self._alive(pid, ""):
                with contextlib.suppress(OSError):
                    (self.root / name).unlink()


def _read_lock(path: Path) -> tuple[bytes, int, int, float] | None:
    """``(content, st_dev, st_ino, mtime_s)`` of the lock file, ``None`` if it is absent.

    Raises:
        _Unavailable: it exists but cannot be read.
    """
    try:
        fd = private_files.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except PrivateStateError as exc:
        raise _Unavailable(str(exc)) from exc
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        raw = os.read(fd, 128)
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return raw, info.st_dev, info.st_ino, info.st_mtime


# ---------------------------------------------------------------------- timer


@final
class RepublishTimer:
    """Calls :meth:`MountLedger.republish` every ``interval_s`` on a daemon thread.

    A daemon thread never keeps the process alive (seed 002 §4, §6.7: the
    ``.unref()`` rule); :meth:`stop` ends it promptly (part of the exit
    funnel). Failures are logged, never raised.

    Args:
        ledger: the ledger to republish.
        interval_s: seconds between republishes (:data:`PUBLISH_INTERVAL_S`).
    """

    def __init__(self, ledger: MountLedger, *, interval_s: float = PUBLISH_INTERVAL_S) -> None:
        self._ledger = ledger
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mind-mount-republish", daemon=True)

    def start(self) -> RepublishTimer:
        """Start the thread; returns ``self``."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (at most one republish in progress)."""
        self._stop.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._ledger.republish()
            except MountRefused as refused:
                _log.warning("republishing mounts failed: %s", refused.reason)
