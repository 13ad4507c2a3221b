"""Claims on sessions: :class:`MountLedger` (docs/design/mounts.md §5).

A :class:`MountLedger` is this process's view of ``session-mounts.json``
and its claims; each :class:`~mind.shell.mounts.handle.MountHandle` drives one
:class:`~mind.machines.mount.MountMachine` (the machine decides; this module
performs the reads, the locked write and the backoff waits it names). Rules
kept here (:mod:`mind.shell.mounts` lists them all): check and claim are one
locked step; liveness is the process itself (pid + start identity, no
heartbeats); the published set is hosted sessions ∪ claims in flight,
republished every :data:`PUBLISH_INTERVAL_S`; :meth:`MountLedger.close`
removes this process's record.

Threads: one :class:`MountLedger` per process and state root; its methods
(and its handles') are serialised by an internal lock, so a republish timer
thread and the asyncio thread may call it concurrently. Calls block: at most
~1 s in :meth:`MountLedger.claim` under contention (bounded backoff, plain
``time.sleep``), a few file operations otherwise. They use no signal
handlers and no event-loop objects, so async code calls them from a worker
thread (``anyio.to_thread.run_sync``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from mind.errors import MountHolder, MountRefused, as_storage_error
from mind.generated.session_mounts import MountOwner
from mind.machines.mount import (
    BACKOFF_MS,
    Liveness,
    MountMachine,
    backoff_ms,
    holders_of,
    identity_of,
    with_own_record,
)
from mind.shell import procs
from mind.shell.mounts.handle import MountHandle
from mind.shell.mounts.ledger_file import (
    LEDGER_NAME,
    _Unavailable,
    read_ledger_lenient,
    read_ledger_strict,
    replace_ledger,
)
from mind.shell.mounts.lock import LOCK_NAME, STALE_LOCK_S, Held, LedgerLock, _Contended

__all__ = ["PUBLISH_INTERVAL_S", "MountHandle", "MountLedger", "OwnerRecord"]

PUBLISH_INTERVAL_S: Final = 15.0
"""How often the caller republishes the mount set, s (docs/design/mounts.md §7)."""

_log = logging.getLogger("mind.mounts")


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
        self._alive = alive
        self._clock_s = clock_s
        self._sleep_s = sleep_s
        self._stale_lock_s = stale_lock_s
        self._rng = rng if rng is not None else random.Random()
        self._mutex = threading.RLock()
        self._handles: dict[str, MountHandle] = {}
        self._on_disk: frozenset[str] = frozenset()  # our record as last written
        self._seq = 0
        self._closed = False
        self._observers: list[object] = []

    # This process's identity is read on first use — by a claim, in its worker
    # thread — not when the runtime opens on the event loop (psutil, ~15 ms).
    @functools.cached_property
    def started_at_ms(self) -> int:
        """When this process started, Unix epoch milliseconds (the record's ``startedAt``)."""
        return procs.started_at_ms(self.pid, fallback_ms=int(self._clock_s() * 1000))

    @functools.cached_property
    def start_identity(self) -> str:
        """This process's start identity (:func:`mind.shell.procs.start_identity`)."""
        return procs.start_identity(self.pid)

    @functools.cached_property
    def lock(self) -> LedgerLock:
        """``session-mounts.lock`` as this ledger takes it."""
        return LedgerLock(
            self.root,
            pid=self.pid,
            start_identity=self.start_identity,
            alive=self._alive,
            clock_s=self._clock_s,
            stale_lock_s=self._stale_lock_s,
        )

    def __repr__(self) -> str:
        return f"MountLedger({str(self.root)!r}, pid={self.pid}, hosted={sorted(self.hosted())})"

    # ------------------------------------------------------------------ queries

    def hosted(self) -> frozenset[str]:
        """This process's published set: hosted sessions ∪ claims in flight
        (docs/design/mounts.md §5)."""
        with self._mutex:
            return frozenset(sid for sid, h in self._handles.items() if h.hosted)

    def handle(self, session_id: str) -> MountHandle | None:
        """The live handle for a session this process hosts, or ``None``."""
        with self._mutex:
            handle = self._handles.get(session_id)
            return handle if handle is not None and handle.hosted else None

    def holders(self, session_id: str) -> list[MountHolder]:
        """Live *other* processes listing ``session_id``, for display (lenient, no write).

        A damaged ledger reads as empty here (docs/design/mounts.md §2: the screen may
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
        returns the same handle and touches no file (docs/design/mounts.md §5: idempotent
        re-entry, never a dispose). Otherwise (docs/design/mounts.md §5):

        1. a lock-free strict read; a live foreign holder -> ``occupied`` at once;
        2. take ``session-mounts.lock`` (reclaiming it only from a dead holder);
        3. under it: strict re-read, conflict re-check, then write this
           process's record with the session added — or write nothing;
        4. release the lock.

        A contended lock is retried after 25–400 ms waits (five times), then
        refused ``busy``. The waits are plain blocking sleeps (``sleep_s``):
        the call is safe from a worker thread (no signal handler, no
        event-loop object; the ledger's lock serialises concurrent calls), so
        async code calls it through ``anyio.to_thread.run_sync``.

        Args:
            session_id: the session to mount.
            new_session: the id was generated just now (/new, fork, startup):
                ``busy``/``unavailable`` then only mean "could not publish" —
                the handle is returned with :attr:`MountHandle.warning` set and
                a logged warning (docs/design/mounts.md §5); ``occupied`` is still refused.

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
        """Rewrite this process's record from its published set (docs/design/mounts.md §7).

        Called every :data:`PUBLISH_INTERVAL_S` by the caller. Repairs a record
        another writer lost (e.g. the file was deleted), publishes brand-new
        sessions whose claim could not be published, and drops dead records
        (write-path cleanup). Skipped when this process publishes nothing and
        has no record on disk. Never grants anything, and never lists a
        session a live other process lists now (docs/design/mounts.md §7.2):
        that session is left out of the record (its handle reads
        :attr:`~MountHandle.published` ``False``, a warning names the other
        pid) and listed again by the first write after the other's record
        drops it. The session lease decides which of the two writes it.

        Raises:
            MountRefused: ``busy`` or ``unavailable`` (session id None); the
                file is unchanged. Timers should log it and try at the next tick.
        """
        with self._mutex:
            if self._closed:
                return
            self._publish_with_backoff(self.hosted())

    def close(self) -> bool:
        """Give back every claim and remove this process's record (normal exit,
        docs/design/mounts.md §7).

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
        held = self.lock.acquire()
        try:
            owners = read_ledger_strict(self.ledger_path)
            if conflict_for is not None:
                found = holders_of(owners, conflict_for, me=self.pid, alive=self._alive)
                if found:
                    raise _Occupied(found)
            record = with_own_record(
                owners,
                me=self.pid,
                started_at_ms=self.started_at_ms,
                session_ids=sessions,
                alive=self._alive,
                start_identity=self.start_identity,
            )
            self._replace(record.owners, held)
            self._on_disk = record.published
            for handle in self._handles.values():
                handle._published = handle.session_id in record.published
            for sid, found in record.withheld.items():
                _log.warning(
                    "session %s is not published in %s: %s also lists it "
                    "(its session lease decides who writes it; published again once only "
                    "this process claims it)",
                    sid,
                    self.ledger_path,
                    ", ".join(f"pid {h.pid}" for h in found),
                )
            self._sweep_debris()
        finally:
            self.lock.release(held)

    def _replace(self, owners: list[MountOwner], held: Held) -> None:
        """Replace the ledger file (:func:`~.ledger_file.replace_ledger`),
        re-checking right before the tmp file is written and again right
        before the rename that the lock is still this process's.

        Raises:
            _Contended: the lock was lost; nothing replaced.
            _Unavailable: the file cannot be written.
        """
        if not self.lock.still_mine(held):
            raise self.lock.lost()
        self._seq += 1
        ms = int(self._clock_s() * 1000)
        tmp = self.root / f"{LEDGER_NAME}.{self.pid}.{ms}.{self._seq}.tmp"

        def still_mine() -> None:
            if not self.lock.still_mine(held):
                raise self.lock.lost()

        replace_ledger(self.ledger_path, owners, tmp=tmp, before_replace=still_mine)

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
