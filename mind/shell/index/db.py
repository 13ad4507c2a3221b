"""The session index's SQLite file ``<state root>/index.db`` (docs/design/state.md).

A derived table of sessions — id, cwd, title, created/updated time, last
status — so that listing sessions never parses journals. Journals stay the
authority: the whole file can be deleted or damaged at any time and is then
recreated (missing) or rebuilt from the journals (damaged); a session whose
directory has no row is still listed by the caller from a head peek. Rows
are derived from journals by :mod:`mind.shell.index.rows`.

Size: over 500 lines because the schema's SQL, opening (WAL, version,
rebuild of a damaged file) and giving up share one connection and one lock;
the journal reading and the writer thread are already apart.

File and schema
---------------

SQLite through apsw, WAL journal mode, ``synchronous=NORMAL`` (a power loss
may drop the last commits; the next listing catches up from the journals),
a busy timeout of :data:`BUSY_TIMEOUT_MS`, every write in an ``IMMEDIATE``
transaction so that concurrent writers from several processes serialize
instead of losing updates. ``PRAGMA user_version`` holds
:data:`SCHEMA_VERSION`; any other version is dropped and rebuilt::

    CREATE TABLE sessions (
        session_id         TEXT PRIMARY KEY,
        cwd                TEXT    NOT NULL,  -- '' when unknown
        title              TEXT    NOT NULL,  -- first prompt, <= 80 chars, '' if none
        created_at_ms      INTEGER NOT NULL,  -- Unix epoch ms
        updated_at_ms      INTEGER NOT NULL,  -- Unix epoch ms, never decreases
        last_status        TEXT    NOT NULL,  -- '', 'running' or a turn status
        journal_size_bytes INTEGER NOT NULL,  -- journal prefix the row accounts for
        journal_mtime_ns   INTEGER NOT NULL,  -- the journal's mtime at that size
        journal_tail_crc   INTEGER NOT NULL,  -- CRC-32 of the prefix's last 4 KiB
        damage_line        INTEGER NOT NULL,  -- 1-based line of the damage, 0: none
        damage_reason      TEXT    NOT NULL   -- why that line is damaged, '' if none
    ) WITHOUT ROWID

``journal_size_bytes`` makes staleness cheap: a listing compares it with
``stat().st_size`` and, when the journal grew, reads only the appended bytes
(at most :data:`~mind.shell.index.rows.CATCH_UP_MAX_BYTES`, the end of
them) — see :func:`~mind.shell.index.rows.catch_up`.
A journal that shrank, or changed without growing (its mtime moved), is no
longer what the row describes and is checked again in full
(:func:`~mind.shell.index.rows.scan_journal`). So is one that grew but whose accounted prefix
changed: ``journal_tail_crc`` fingerprints the last
:data:`~mind.shell.index.rows.FINGERPRINT_BYTES` of the prefix, verified before the new bytes are
trusted (a duplicated middle line or CRLF line endings shift those bytes). The damage columns say
why a journal cannot be opened (:func:`mind.shell.journal.check_journal`: the same framing rules as
opening, without the schema decode).

Who writes
----------

- :meth:`SessionIndex.note` — the runtime's hook at session creation, turn
  start and turn end. It only queues the write and returns: one background
  thread (:mod:`mind.shell.index.writer`) performs notes in order, so the
  event loop never waits for SQLite's lock. It never raises for index
  trouble (logged; the next listing or rebuild repairs the row).
- :meth:`SessionIndex.rebuild` — ``mind sessions --rebuild-index`` and the
  repair of a damaged file: reads every journal once, sequentially.
- :meth:`SessionIndex.store_caught_up` — a listing saving what it caught up,
  only ever moving a row forward (``journal_size_bytes`` grows).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final, Protocol, final

import apsw

from mind.errors import PrivateStateError, StateDirError
from mind.shell import private_files
from mind.shell.index.rows import IndexEntry, peek_head, scan_journal, tail_fingerprint, title_of
from mind.shell.index.writer import WriteQueue

__all__ = [
    "BUSY_TIMEOUT_MS",
    "FLUSH_TIMEOUT_S",
    "INDEX_FILE",
    "QUICK_BUSY_TIMEOUT_MS",
    "SCHEMA_VERSION",
    "SessionIndex",
    "SessionSource",
]

log = logging.getLogger("mind.index")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


INDEX_FILE: Final = "index.db"
"""File name of the index inside the state root."""
SCHEMA_VERSION: Final = 3
"""``PRAGMA user_version`` of the current schema."""
BUSY_TIMEOUT_MS: Final = 5_000
"""How long a rebuild or a listing's read waits for another process's lock, in milliseconds."""
QUICK_BUSY_TIMEOUT_MS: Final = 1_000
"""How long opening and :meth:`SessionIndex.note` wait for another process's
lock, in milliseconds (mind's writes hold it for milliseconds; longer means
something else holds it, and the index is then given up for this process)."""
FLUSH_TIMEOUT_S: Final = 5.0
"""How long reading the index (:meth:`SessionIndex.entries`) or closing it
waits for this process's queued notes, s."""

_DAMAGED: Final = (apsw.NotADBError, apsw.CorruptError)
_UNUSABLE: Final = (
    apsw.BusyError,
    apsw.LockedError,
    apsw.CantOpenError,
    apsw.ReadOnlyError,
    apsw.PermissionsError,
    apsw.IOError,
    apsw.FullError,
    apsw.AuthError,
)

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id         TEXT    PRIMARY KEY,
    cwd                TEXT    NOT NULL,
    title              TEXT    NOT NULL,
    created_at_ms      INTEGER NOT NULL,
    updated_at_ms      INTEGER NOT NULL,
    last_status        TEXT    NOT NULL,
    journal_size_bytes INTEGER NOT NULL,
    journal_mtime_ns   INTEGER NOT NULL,
    journal_tail_crc   INTEGER NOT NULL,
    damage_line        INTEGER NOT NULL,
    damage_reason      TEXT    NOT NULL
) WITHOUT ROWID;
"""

_COLUMNS: Final = (
    "session_id, cwd, title, created_at_ms, updated_at_ms, last_status, journal_size_bytes, "
    "journal_mtime_ns, journal_tail_crc, damage_line, damage_reason"
)

_NOTE_SQL: Final = f"""
INSERT INTO sessions ({_COLUMNS})
VALUES (:session_id, :cwd, :title, :at, :at, :status, :size, :mtime, :crc, :line, :reason)
ON CONFLICT (session_id) DO UPDATE SET
    damage_line = CASE WHEN :line THEN :line ELSE damage_line END,
    damage_reason = CASE WHEN :line THEN :reason ELSE damage_reason END,
    journal_mtime_ns = CASE WHEN excluded.journal_size_bytes >= journal_size_bytes
                       THEN excluded.journal_mtime_ns ELSE journal_mtime_ns END,
    journal_tail_crc = CASE WHEN excluded.journal_size_bytes >= journal_size_bytes
                       THEN excluded.journal_tail_crc ELSE journal_tail_crc END,
    cwd = CASE WHEN cwd = '' THEN excluded.cwd ELSE cwd END,
    title = CASE WHEN title = '' THEN excluded.title ELSE title END,
    last_status = CASE WHEN :status_given THEN excluded.last_status ELSE last_status END,
    updated_at_ms = max(updated_at_ms, excluded.updated_at_ms),
    journal_size_bytes = max(journal_size_bytes, excluded.journal_size_bytes)
"""

_FORWARD_SQL: Final = """
UPDATE sessions
SET title = ?, last_status = ?, updated_at_ms = max(updated_at_ms, ?), journal_size_bytes = ?,
    journal_mtime_ns = ?, journal_tail_crc = ?, damage_line = ?, damage_reason = ?
WHERE session_id = ? AND journal_size_bytes < ?
"""

_REPLACE_SQL: Final = f"""
INSERT OR REPLACE INTO sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


class SessionSource(Protocol):
    """Where the session journals are (implemented by :class:`~mind.shell.store.Store`)."""

    @property
    def root(self) -> Path:
        """The state root (the index lives at ``root / INDEX_FILE``)."""
        ...

    def session_ids(self) -> list[str]:
        """Ids of every session directory that holds a journal."""
        ...

    def journal_path(self, session_id: str) -> Path:
        """The ``journal.jsonl`` of a session."""
        ...


@contextlib.contextmanager
def _write_transaction(con: apsw.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any error), run as
    statements.

    Not apsw's ``with con:``: its ``BEGIN`` waits out another process's lock
    (the busy timeout) holding the GIL, which stalls every thread of mind —
    the event loop included — for up to the whole timeout; ``execute``
    releases the GIL while it waits.
    """
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(apsw.Error):  # SQLite may have rolled back already
            con.execute("ROLLBACK")
        raise


def _remove_files(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{path}{suffix}")
        except FileNotFoundError:
            continue


def _switch_to_wal(con: apsw.Connection) -> str:
    """``PRAGMA journal_mode=wal``, retried while another process holds the lock.

    SQLite answers BUSY at once (without the busy handler) when two processes
    switch a new database to WAL together — two minds starting on a fresh
    state root — so the switch is retried for up to :data:`QUICK_BUSY_TIMEOUT_MS`.
    """
    deadline = time.monotonic() + QUICK_BUSY_TIMEOUT_MS / 1000
    delay_s = 0.005
    while True:
        try:
            return str(con.pragma("journal_mode", "wal"))
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(delay_s)
            delay_s = min(delay_s * 2, 0.1)


@final
class SessionIndex:
    """An open ``index.db``: one apsw connection and one background writer.

    Obtain one with :meth:`open`. Several processes may have the same file
    open; writes serialize through ``IMMEDIATE`` transactions. Thread-safe:
    the connection is used under one lock, by the calling threads and by the
    writer thread that performs :meth:`note` (apsw refuses concurrent use of
    a connection rather than waiting). Close it with :meth:`close`, which
    performs the notes still queued.

    The index is derived, so trouble with it never fails a command: when the
    file cannot be opened, read or written (another process holds its lock
    past the wait, read-only or full disk, a directory in its place) the
    index becomes *unavailable* for this process — said once, as a warning
    on ``mind.index`` — and then :meth:`entries` is empty, :meth:`note` and
    :meth:`store_caught_up` do nothing, and listing falls back to the
    session directories (:meth:`~mind.shell.store.Store.summaries`).

    The file is opened lazily, on first use: by the writer thread for the
    first :meth:`note`, by the caller for a read — so ``Store()`` costs a
    command that only runs a turn (``mind exec``) no SQLite work before its
    first request.

    Attributes:
        path: the ``index.db`` file.
    """

    def __init__(
        self,
        path: Path,
        con: apsw.Connection | None,
        source: SessionSource,
        *,
        unavailable: str = "",
    ) -> None:
        """Internal: use :meth:`open`."""
        self.path = path
        self._con = con
        self._source = source
        self._unavailable = unavailable
        self._opened = con is not None or bool(unavailable)
        self._closed = False
        self._lock = threading.RLock()  # guards _con: apsw refuses concurrent use
        self._writer = WriteQueue(name="mind-index-writer")

    @classmethod
    def open(cls, source: SessionSource) -> SessionIndex:
        """The index ``<source.root>/index.db``, opened on first use (no I/O
        here): :meth:`_ensure_open` then opens it by these rules.

        Args:
            source: the store whose state root holds the index and whose
                journals a rebuild reads.
        """
        return cls(source.root / INDEX_FILE, None, source)

    @property
    def unavailable(self) -> str:
        """Why the index cannot be used in this process ("" while it can).
        Opens the file first when it was not yet used."""
        self._ensure_open()
        return self._unavailable

    def _ensure_open(self) -> None:
        """Open the file if not yet done (and not closed); thread-safe."""
        with self._lock:
            if self._opened or self._closed:
                return
            self._opened = True
            self._open_now()

    def _open_now(self) -> None:
        """Open ``<source.root>/index.db``, creating it (0600) when missing.

        A new file starts empty (sessions without a row are listed from their
        journal heads until noted or rebuilt). A file that is not a database,
        is damaged or has another schema version is deleted and rebuilt from
        the journals (it is derived; no session is lost by this).

        Never raises for the file: one that cannot be created, opened or
        written (read-only state directory, a directory in its place, disk
        full, a lock held by another process past :data:`QUICK_BUSY_TIMEOUT_MS`)
        gives an index whose :attr:`unavailable` says why (logged once). No
        other location is tried.
        """
        path = self.path
        try:
            try:
                con, outcome = self._connect(path)
            except _DAMAGED as exc:
                log.warning("%s is damaged (%s); rebuilding it from the journals", path, exc)
                _remove_files(path)
                con, _ = self._connect(path)
                outcome = "rebuild"
        except _UNUSABLE as exc:
            return self._give_up(str(exc))
        except _DAMAGED as exc:
            return self._give_up(f"stays damaged: {exc}")
        except OSError as exc:
            return self._give_up(str(exc.strerror or exc))
        self._con = con
        if outcome == "rebuild":
            try:
                self._rebuild(self._source)
            except StateDirError as exc:
                self._give_up(exc.detail)

    def _give_up(self, detail: str) -> None:
        """Stop using the file in this process; say so once."""
        with self._lock:
            if self._unavailable:
                return
            self._unavailable = detail or "unknown error"
            log.warning(
                "%s cannot be used (%s); sessions are listed from their directories",
                self.path,
                self._unavailable,
            )
            con, self._con = self._con, None
            if con is not None:
                con.close()

    @staticmethod
    def _connect(path: Path) -> tuple[apsw.Connection, str]:
        """Open, switch to WAL and make the schema current.

        Returns:
            The connection and "ok" (current schema), "created" (a new, empty
            file) or "rebuild" (the schema was recreated over another version).
        """
        try:
            os.close(private_files.open_file(path, os.O_RDWR, create=True))
        except PrivateStateError as exc:
            raise apsw.CantOpenError(str(exc)) from None
        con = apsw.Connection(
            str(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_NOFOLLOW
        )
        try:
            con.set_busy_timeout(QUICK_BUSY_TIMEOUT_MS)  # a stuck lock must not stall startup
            if _switch_to_wal(con).lower() != "wal":
                raise apsw.CantOpenError(f"{path}: WAL journal mode refused")
            con.pragma("synchronous", "normal")
            outcome = "ok"
            # Read first: a current file needs no write lock to open, so a
            # writer elsewhere (even one stuck holding its lock) cannot stall us.
            if con.pragma("user_version") != SCHEMA_VERSION:
                with _write_transaction(con):
                    version = con.pragma("user_version")
                    if version != SCHEMA_VERSION:
                        tables = con.execute("SELECT count(*) FROM sqlite_schema").fetchall()
                        outcome = "rebuild" if version or tables[0][0] else "created"
                        con.execute("DROP TABLE IF EXISTS sessions")
                        con.execute(_SCHEMA)
                        con.pragma("user_version", SCHEMA_VERSION)
            con.set_busy_timeout(BUSY_TIMEOUT_MS)
        except BaseException:
            con.close()
            raise
        return con, outcome

    def close(self) -> None:
        """Perform the queued notes (at most :data:`FLUSH_TIMEOUT_S`; the rest
        are dropped and logged), end the writer thread and close the
        connection. Idempotent; later notes return False."""
        self._writer.close(FLUSH_TIMEOUT_S)
        with self._lock:
            self._closed = True
            con, self._con = self._con, None
            if con is not None:
                con.close()

    def flush(self, timeout_s: float = FLUSH_TIMEOUT_S) -> bool:
        """Wait until the notes queued so far are written (or failed, which
        is logged), at most ``timeout_s`` seconds.

        Returns:
            Whether none is left queued.
        """
        return self._writer.flush(timeout_s)

    def note(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        title: str | None = None,
        status: str | None = None,
        updated_at_ms: int | None = None,
        damage: tuple[int, str] | None = None,
    ) -> bool:
        """Record what the runtime just journaled (the cheap update hook); never waits.

        Call it after the journal record is appended: at session creation
        (``cwd=``), turn start (``title=`` the prompt, ``status="running"``)
        and turn end (``status=`` the terminal status). On the caller's
        thread it takes one ``stat`` of the journal (the size and time the
        row will account for) and queues the write; the index's writer
        thread then performs it — creating the row when missing (taking
        ``cwd`` from the journal's first record when not given) in one small
        ``IMMEDIATE`` transaction. Notes are written in the order they were
        made. A concurrent note from another process makes the writer wait
        for it (up to :data:`QUICK_BUSY_TIMEOUT_MS`) and both updates are
        kept; a lock held longer, or a file that cannot be written, makes the
        index :attr:`unavailable` for this process (said once; later notes
        return False at once). :meth:`entries` and :meth:`close` wait for the
        queued notes; :meth:`flush` waits on request.

        Merge rules: ``cwd`` and ``title`` only fill a blank (the first prompt
        stays the title; ``title`` is collapsed and cut to
        :data:`~mind.shell.index.rows.TITLE_MAX_CHARS`); ``status`` replaces
        the last status; ``None`` leaves a field as it is; ``updated_at_ms``
        and the accounted journal size never decrease.

        Args:
            session_id: the session (a valid session id).
            cwd: the session's absolute working directory.
            title: the prompt text that started a turn.
            status: "running" or a terminal turn status ("completed",
                "interrupted", "failed", "aborted").
            updated_at_ms: time of the change, Unix epoch milliseconds
                (default: now, when called).
            damage: ``(1-based line, why)`` of damage found in the journal
                (its prefix check, docs/design/checkpoints.md §5): kept in
                the row, so listing and opening say it until the file
                changes otherwise; later notes leave it (``None``).

        Returns:
            True when the write was queued; False when the index is
            unavailable or closed, the session id is invalid, or the queue is
            full (logged on ``mind.index``; never raised — the journal is the
            authority and the next listing or rebuild repairs the row).
        """
        at = _now_ms() if updated_at_ms is None else updated_at_ms
        if self._closed or self._unavailable:
            return False
        try:
            path = self._source.journal_path(session_id)
        except ValueError as exc:
            log.warning("index note for session %r not written: %s", session_id, exc)
            return False
        try:
            st = os.stat(path)
            size, mtime_ns = st.st_size, st.st_mtime_ns
        except OSError:
            size = mtime_ns = 0
        write = functools.partial(
            self._write_note, session_id, path, size, mtime_ns, cwd, title, status, at, damage
        )
        if self._writer.submit(write):
            return True
        if not self._closed:  # else closed meanwhile: nothing to say
            log.warning("index note for session %s dropped: too many queued", session_id)
        return False

    def _write_note(
        self,
        session_id: str,
        path: Path,
        size: int,
        mtime_ns: int,
        cwd: str | None,
        title: str | None,
        status: str | None,
        at: int,
        damage: tuple[int, str] | None = None,
    ) -> None:
        """Perform one :meth:`note` (on the writer thread, which opens the file first)."""
        with self._lock:
            self._ensure_open()
            con = self._con
            if con is None:
                return
            try:
                con.set_busy_timeout(QUICK_BUSY_TIMEOUT_MS)
                try:
                    # The journal only grows: its first ``size`` bytes are the
                    # ones the caller saw, so the fingerprint can be taken now.
                    crc = tail_fingerprint(path, size) if size else 0
                except OSError:
                    size = mtime_ns = crc = 0
                if cwd is None and size:
                    known = con.execute(
                        "SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)
                    ).fetchall()
                    if not known or not known[0][0]:
                        cwd = peek_head(session_id, path).cwd
                with _write_transaction(con):
                    con.execute(
                        _NOTE_SQL,
                        {
                            "session_id": session_id,
                            "cwd": cwd or "",
                            "title": title_of(title) if title else "",
                            "status": status or "",
                            "status_given": status is not None,
                            "at": at,
                            "size": size,
                            "mtime": mtime_ns,
                            "crc": crc,
                            "line": damage[0] if damage else 0,
                            "reason": damage[1] if damage else "",
                        },
                    )
            except _UNUSABLE as exc:
                self._give_up(str(exc))
            except (apsw.Error, OSError, ValueError) as exc:
                log.warning("index note for session %s not written: %s", session_id, exc)
            finally:
                if self._con is not None:
                    self._con.set_busy_timeout(BUSY_TIMEOUT_MS)

    def entries(self) -> dict[str, IndexEntry]:
        """Every row, by session id; empty when the index is :attr:`unavailable`.

        A damaged file is rebuilt from the journals first (then its rows are
        returned). Never raises: a file that cannot be read, or stays damaged
        or unwritable, makes the index unavailable (said once). Waits first
        (at most :data:`FLUSH_TIMEOUT_S`) for this process's queued notes.
        """
        self.flush()
        with self._lock:
            self._ensure_open()
            return self._entries()

    def _entries(self) -> dict[str, IndexEntry]:
        try:
            try:
                return self._select()
            except _DAMAGED as exc:
                log.warning("%s is damaged (%s); rebuilding it from the journals", self.path, exc)
            self._reset()
            self._rebuild(self._source)
            return self._select()
        except _UNUSABLE as exc:
            self._give_up(str(exc))
        except _DAMAGED as exc:
            self._give_up(f"stays damaged: {exc}")
        except StateDirError as exc:
            self._give_up(exc.detail)
        return {}

    def _select(self) -> dict[str, IndexEntry]:
        if self._con is None:
            return {}
        cursor = self._con.execute(f"SELECT {_COLUMNS} FROM sessions")
        return {
            row[0]: IndexEntry(
                session_id=row[0],
                cwd=row[1],
                title=row[2],
                created_at_ms=row[3],
                updated_at_ms=row[4],
                last_status=row[5],
                journal_size_bytes=row[6],
                journal_mtime_ns=row[7],
                journal_tail_crc=row[8],
                damage_line=row[9],
                damage_reason=row[10],
            )
            for row in cursor
        }

    def _reset(self) -> None:
        """Replace a damaged file by an empty, current one (the writer stays)."""
        with self._lock:
            con, self._con = self._con, None
            if con is not None:
                con.close()
            self._reconnect()

    def _reconnect(self) -> None:
        _remove_files(self.path)
        try:
            self._con, _ = self._connect(self.path)
        except (*_UNUSABLE, *_DAMAGED) as exc:
            raise StateDirError(self._source.root, f"{INDEX_FILE}: {exc}") from exc

    def rebuild(self, source: SessionSource) -> int:
        """Replace every row by one derived from each journal of ``source``.

        Reads each journal once, front to back
        (:func:`~mind.shell.index.rows.scan_journal`), outside
        any transaction, then writes all rows in one ``IMMEDIATE``
        transaction. A journal that cannot be read gets no row (it is still
        listed from its head). Notes that land during the scan may be
        overwritten by older values; the next listing catches those rows up
        because their journal is longer than the row accounts for.

        Returns:
            The number of sessions indexed.

        Raises:
            StateDirError: the index cannot be written, or is
                :attr:`unavailable` in this process (``detail`` says why).
        """
        self.flush()  # this process's notes first: the rows replace them
        self._ensure_open()
        return self._rebuild(source)

    def _rebuild(self, source: SessionSource) -> int:
        if self._con is None:
            raise StateDirError(source.root, f"{INDEX_FILE} cannot be used: {self._unavailable}")
        rows = list(self._scan_all(source))
        with self._lock:
            con = self._con
            if con is None:
                detail = f"{INDEX_FILE} cannot be used: {self._unavailable}"
                raise StateDirError(source.root, detail)
            try:
                with _write_transaction(con):
                    con.execute("DELETE FROM sessions")
                    con.executemany(_REPLACE_SQL, [r.row() for r in rows])
            except _DAMAGED:
                self._reset()
                return self._rebuild(source)
            except apsw.Error as exc:
                raise StateDirError(source.root, f"{INDEX_FILE} cannot be written: {exc}") from exc
        return len(rows)

    @staticmethod
    def _scan_all(source: SessionSource) -> Iterator[IndexEntry]:
        for sid in source.session_ids():
            try:
                yield scan_journal(sid, source.journal_path(sid))
            except OSError as exc:
                log.warning("session %s not indexed: %s", sid, exc)

    def store_caught_up(
        self, entries: Iterable[IndexEntry], rescanned: Iterable[IndexEntry] = ()
    ) -> bool:
        """Save rows a listing brought forward with
        :func:`~mind.shell.index.rows.catch_up`, and rows it derived again
        with :func:`~mind.shell.index.rows.scan_journal` (``rescanned``: their
        journal shrank or changed in place, so they replace the stored row).

        A caught-up row is only replaced when the stored one accounts for
        fewer journal bytes, so a newer :meth:`note` is never overwritten. Best effort: it
        does not wait for another process's lock (a listing never stalls on
        the index; the next one saves them).

        Returns:
            True when written; False on index trouble or a held lock (logged,
            never raised).
        """
        with self._lock:
            self._ensure_open()
            return self._store_caught_up(list(entries), list(rescanned))

    def _store_caught_up(self, entries: list[IndexEntry], rescanned: list[IndexEntry]) -> bool:
        con = self._con
        if con is None:
            return False
        params = [
            (
                e.title,
                e.last_status,
                e.updated_at_ms,
                e.journal_size_bytes,
                e.journal_mtime_ns,
                e.journal_tail_crc,
                e.damage_line,
                e.damage_reason,
                e.session_id,
                e.journal_size_bytes,
            )
            for e in entries
        ]
        try:
            con.set_busy_timeout(0)
            with _write_transaction(con):
                con.executemany(_FORWARD_SQL, params)
                con.executemany(_REPLACE_SQL, [e.row() for e in rescanned])
        except apsw.BusyError:
            return False  # another process is writing: a later listing saves them
        except apsw.Error as exc:
            log.warning("index catch-up not saved: %s", exc)
            return False
        finally:
            if self._con is not None:
                self._con.set_busy_timeout(BUSY_TIMEOUT_MS)
        return True
