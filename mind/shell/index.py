"""The session index: ``<state root>/index.db`` (DESIGN §4, issue 4 §5).

Size: the SQLite schema, journal scanning for rows and the unusable-index
fallback share one connection's lifecycle; scanning (``scan_journal`` /
catch-up fingerprints) is the piece to split out next.

A derived table of sessions — id, cwd, title, created/updated time, last
status — so that listing sessions never parses journals. Journals stay the
authority: the whole file can be deleted or damaged at any time and is then
recreated (missing) or rebuilt from the journals (damaged); a session whose
directory has no row is still listed by the caller from a head peek.

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
(at most :data:`CATCH_UP_MAX_BYTES`, the end of them) — see :func:`catch_up`.
A journal that shrank, or changed without growing (its mtime moved), is no
longer what the row describes and is checked again in full
(:func:`scan_journal`). So is one that grew but whose accounted prefix
changed: ``journal_tail_crc`` fingerprints the last
:data:`FINGERPRINT_BYTES` of the prefix, verified before the new bytes are
trusted (a duplicated middle line or CRLF line endings shift those bytes;
issue 7 item 9). The damage columns say why a journal cannot be opened
(:func:`mind.shell.journal.check_journal`: the same framing rules as opening,
without the schema decode).

Who writes
----------

- :meth:`SessionIndex.note` — the runtime's hook at session creation, turn
  start and turn end. It never raises for index trouble (logged; the next
  listing or rebuild repairs the row).
- :meth:`SessionIndex.rebuild` — ``mind sessions --rebuild-index`` and the
  repair of a damaged file: reads every journal once, sequentially.
- :meth:`SessionIndex.store_caught_up` — a listing saving what it caught up,
  only ever moving a row forward (``journal_size_bytes`` grows).

Display values here come from a lenient decode of journal lines (no integrity
check); nothing in the index is ever used to grant, replay or recover.
"""

from __future__ import annotations

import errno
import logging
import os
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final, Protocol, final

import apsw
import msgspec

from mind.errors import JournalCorruptError, JournalError, PrivateStateError, StateDirError
from mind.shell import journal, private_files

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CATCH_UP_MAX_BYTES",
    "FINGERPRINT_BYTES",
    "HEAD_PEEK_MAX_BYTES",
    "INDEX_FILE",
    "QUICK_BUSY_TIMEOUT_MS",
    "SCHEMA_VERSION",
    "TITLE_MAX_CHARS",
    "IndexEntry",
    "ReadRange",
    "SessionIndex",
    "SessionSource",
    "catch_up",
    "format_age",
    "peek_head",
    "read_range",
    "scan_journal",
    "title_of",
]

log = logging.getLogger("mind.index")

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
TITLE_MAX_CHARS: Final = 80
"""Longest title kept, in characters (whitespace collapsed first)."""
HEAD_PEEK_MAX_BYTES: Final = 64 * 1024
"""Most bytes read to find a journal's first record (its ``session_started``)."""
CATCH_UP_MAX_BYTES: Final = 256 * 1024
"""Most bytes a listing reads from the end of a journal that grew past its row."""
FINGERPRINT_BYTES: Final = 4096
"""How many bytes before a row's offset its ``journal_tail_crc`` covers."""

_FILE_MODE: Final = 0o600
_FIRST_PEEK_BYTES: Final = 4096
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
VALUES (:session_id, :cwd, :title, :at, :at, :status, :size, :mtime, :crc, 0, '')
ON CONFLICT (session_id) DO UPDATE SET
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

ReadRange = Callable[[Path, int, int], bytes]
"""``(path, offset, max_bytes) -> bytes``: read up to ``max_bytes`` from ``offset``.

Every journal read of a listing goes through one (default :func:`read_range`);
tests inject a counting wrapper to prove listing never reads whole journals.
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


class IndexEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One row of the index.

    Attributes:
        session_id: directory name under ``sessions/``.
        cwd: the session's frozen working directory ("" if unknown).
        title: first prompt, whitespace collapsed, at most
            :data:`TITLE_MAX_CHARS` characters ("" if none yet).
        created_at_ms: session start, Unix epoch milliseconds (0 if unknown).
        updated_at_ms: last known activity, Unix epoch milliseconds.
        last_status: "" (no turn yet), "running", or the status of the last
            terminal record ("completed", "interrupted", "failed", "aborted").
        journal_size_bytes: length of the journal prefix this row accounts
            for, in bytes.
        journal_mtime_ns: the journal's modification time at that size, ns
            (0: unknown).
        journal_tail_crc: CRC-32 of the last :data:`FINGERPRINT_BYTES` (or
            fewer) of that prefix (:func:`tail_fingerprint`).
        damage_line: 1-based line where the journal is damaged so that it
            cannot be opened (0: not damaged as far as read).
        damage_reason: why ("" when not damaged).
    """

    session_id: str
    cwd: str = ""
    title: str = ""
    created_at_ms: int = 0
    updated_at_ms: int = 0
    last_status: str = ""
    journal_size_bytes: int = 0
    journal_mtime_ns: int = 0
    journal_tail_crc: int = 0
    damage_line: int = 0
    damage_reason: str = ""

    def row(self) -> tuple[str, str, str, int, int, str, int, int, int, int, str]:
        """The values in :data:`_COLUMNS` order."""
        return (
            self.session_id,
            self.cwd,
            self.title,
            self.created_at_ms,
            self.updated_at_ms,
            self.last_status,
            self.journal_size_bytes,
            self.journal_mtime_ns,
            self.journal_tail_crc,
            self.damage_line,
            self.damage_reason,
        )


class _Peek(msgspec.Struct):
    """The few fields of a journal line the index uses (others are skipped)."""

    type: str = ""
    recorded_at_ms: int = 0
    cwd: str = ""
    text: str = ""
    kind: str = ""
    status: str = ""


_PEEK_DECODER: Final = msgspec.json.Decoder(_Peek)
# msgspec writes the tag first, so a line's type is known from its prefix and
# the big records (model rounds, tool results) are never decoded.
_WANTED: Final = (
    b'{"type":"session_started"',
    b'{"type":"turn_started"',
    b'{"type":"user_message"',
    b'{"type":"turn_completed"',
)


def _peek(line: bytes) -> _Peek | None:
    if not line.startswith(_WANTED):
        return None
    try:
        return _PEEK_DECODER.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None


def title_of(text: str) -> str:
    """A prompt as a title: whitespace collapsed, at most :data:`TITLE_MAX_CHARS` chars."""
    return " ".join(text.split())[:TITLE_MAX_CHARS]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Fold:
    """Folds peeked journal lines into an entry (rebuild and catch-up)."""

    __slots__ = (
        "created_at_ms",
        "cwd",
        "damage_line",
        "damage_reason",
        "status",
        "title",
        "updated_at_ms",
    )

    def __init__(self, base: IndexEntry) -> None:
        self.cwd = base.cwd
        self.title = base.title
        self.status = base.last_status
        self.created_at_ms = base.created_at_ms
        self.updated_at_ms = base.updated_at_ms
        self.damage_line = base.damage_line
        self.damage_reason = base.damage_reason

    def feed(self, line: bytes) -> None:
        rec = _peek(line)
        if rec is None:
            return
        self.updated_at_ms = max(self.updated_at_ms, rec.recorded_at_ms)
        if rec.type == "session_started":
            self.cwd = self.cwd or rec.cwd
            self.created_at_ms = self.created_at_ms or rec.recorded_at_ms
        elif rec.type == "turn_started":
            self.status = "running"
        elif rec.type == "user_message" and rec.kind == "prompt" and not self.title:
            self.title = title_of(rec.text)
        elif rec.type == "turn_completed" and rec.status:
            self.status = rec.status

    def entry(self, session_id: str, size: int, mtime_ns: int = 0, crc: int = 0) -> IndexEntry:
        return IndexEntry(
            session_id=session_id,
            cwd=self.cwd,
            title=self.title,
            created_at_ms=self.created_at_ms,
            updated_at_ms=self.updated_at_ms,
            last_status=self.status,
            journal_size_bytes=size,
            journal_mtime_ns=mtime_ns,
            journal_tail_crc=crc,
            damage_line=self.damage_line,
            damage_reason=self.damage_reason,
        )


def read_range(path: Path, offset: int, max_bytes: int) -> bytes:
    """Read up to ``max_bytes`` bytes of ``path`` starting at byte ``offset``.

    Raises:
        OSError: the file cannot be opened or read, or is not a private
            regular file (a symlink, FIFO, another owner: ``EPERM``; never
            blocks, :func:`~mind.shell.private_files.open_file`).
    """
    try:
        fd = private_files.open_file(path, os.O_RDONLY)
    except PrivateStateError as exc:
        raise OSError(errno.EPERM, str(exc)) from exc
    try:
        parts: list[bytes] = []
        got = 0
        while got < max_bytes:
            chunk = os.pread(fd, max_bytes - got, offset + got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def tail_fingerprint(path: Path, size: int, read: ReadRange = read_range) -> int:
    """CRC-32 of the last :data:`FINGERPRINT_BYTES` (fewer in a shorter file)
    of the first ``size`` bytes of ``path`` (one read).

    Raises:
        OSError: the file cannot be read.
    """
    start = max(0, size - FINGERPRINT_BYTES)
    return zlib.crc32(read(path, start, size - start))


def scan_journal(session_id: str, path: Path) -> IndexEntry:
    """Derive a row from a whole journal, reading it once, front to back.

    The journal is checked as opening would check it, without the schema
    decode (:func:`mind.shell.journal.check_journal`): damage fills
    ``damage_line``/``damage_reason`` and the display values come from the
    records before it. ``updated_at_ms`` is the latest ``recorded_at_ms``
    seen, else the file's modification time.

    Raises:
        OSError: the journal cannot be opened or read.
    """
    fold = _Fold(IndexEntry(session_id=session_id))
    st = os.stat(path, follow_symlinks=False)
    try:
        journal.check_journal(path, fold.feed)
    except JournalCorruptError as exc:
        fold.damage_line, fold.damage_reason = exc.line, exc.detail
    except JournalError as exc:
        raise OSError(exc.detail) from exc
    if fold.updated_at_ms == 0:
        fold.updated_at_ms = st.st_mtime_ns // 1_000_000
    crc = tail_fingerprint(path, st.st_size)
    return fold.entry(session_id, st.st_size, st.st_mtime_ns, crc)


def peek_head(session_id: str, path: Path, read: ReadRange = read_range) -> IndexEntry:
    """A row for a session with no index entry, from its first record only.

    Reads at most :data:`HEAD_PEEK_MAX_BYTES` (usually one 4 KiB read) and
    takes ``cwd`` and ``created_at_ms`` from the ``session_started`` record;
    ``updated_at_ms`` is the journal's modification time, title and status
    stay "" and ``journal_size_bytes`` 0 (nothing accounted for). A missing
    head gives blanks; a first line that fails its check, is not a
    ``session_started`` record or is a torn write with nothing after it
    fills ``damage_line`` (1) and ``damage_reason`` (the journal would not
    open).
    """
    fold = _Fold(IndexEntry(session_id=session_id))
    try:
        mtime_ms = os.stat(path).st_mtime_ns // 1_000_000
        head = read(path, 0, _FIRST_PEEK_BYTES)
        if b"\n" not in head and len(head) == _FIRST_PEEK_BYTES:
            head += read(path, len(head), HEAD_PEEK_MAX_BYTES - len(head))
    except OSError:
        return fold.entry(session_id, 0)
    first, newline, _ = head.partition(b"\n")
    damage = ""
    if newline:
        damage = journal.line_damage(first)
        if not damage and not first.startswith(_WANTED[0]):
            damage = "first record is not 'session_started'"
        if not damage:
            fold.feed(first)
    elif head and len(head) < HEAD_PEEK_MAX_BYTES:  # one unterminated line, nothing after it
        damage = "no session_started record: last line has no newline (torn write)"
    return IndexEntry(
        session_id=session_id,
        cwd=fold.cwd,
        created_at_ms=fold.created_at_ms,
        updated_at_ms=mtime_ms,
        damage_line=1 if damage else 0,
        damage_reason=damage,
    )


def catch_up(
    entry: IndexEntry,
    path: Path,
    size: int,
    read: ReadRange = read_range,
    *,
    mtime_ns: int = 0,
) -> IndexEntry | None:
    """Bring a row forward over the bytes appended since it was written.

    First verifies the row's fingerprint: the :data:`FINGERPRINT_BYTES` before
    ``entry.journal_size_bytes`` must still have ``journal_tail_crc`` (else
    the accounted prefix changed and only a full check can tell how). Then
    reads the journal bytes ``[entry.journal_size_bytes, size)``, or only the
    last :data:`CATCH_UP_MAX_BYTES` of them (from the first line that starts
    inside that window) when more were appended — never the whole journal.
    Each complete line read is checked (CRC only): a damaged one with more
    lines after it may be corruption, which only a full check can tell from a
    vouched torn tail, so the caller is told to do one.

    Args:
        entry: the row as stored.
        path: the session's journal.
        size: the journal's current size in bytes (from ``stat``).
        read: how bytes are read (see :data:`ReadRange`).
        mtime_ns: the journal's modification time (from ``stat``), ns.

    Returns:
        The row with ``journal_size_bytes == size``; unchanged on a read
        error; ``None`` when the fingerprint does not match or the appended
        bytes hold a damaged line that is not the last (check the whole
        journal with :func:`scan_journal`).
    """
    start = entry.journal_size_bytes
    before = min(start, FINGERPRINT_BYTES)
    clipped = size - start > CATCH_UP_MAX_BYTES
    try:
        prefix_end = read(path, start - before, before) if before else b""
        if zlib.crc32(prefix_end) != entry.journal_tail_crc:
            return None
        if clipped:
            start = size - CATCH_UP_MAX_BYTES
        data = read(path, start, size - start)
    except OSError:
        return entry
    lines = data.split(b"\n")
    if clipped:
        lines = lines[1:]  # the first piece may be the end of a line
    fold = _Fold(entry)
    complete = lines[:-1]  # the last piece has no newline: torn or empty
    for n, line in enumerate(complete):
        if journal.line_damage(line) and (n + 1 < len(complete) or lines[-1]):
            return None
        fold.feed(line)
    tail = data if clipped else prefix_end + data  # contiguous, ending at ``size``
    return fold.entry(entry.session_id, size, mtime_ns, zlib.crc32(tail[-FINGERPRINT_BYTES:]))


def format_age(then_ms: int, now_ms: int) -> str:
    """How long ago ``then_ms`` was, for people: "just now", "3 min ago", "2 h ago".

    Args:
        then_ms: a past time, Unix epoch milliseconds (0: unknown).
        now_ms: the current time, Unix epoch milliseconds.

    Returns:
        "just now" (< 1 min), "N min ago", "N h ago", "N days ago" (< 30
        days), else the local date ``YYYY-MM-DD``; "unknown" for 0.
    """
    if then_ms <= 0:
        return "unknown"
    seconds = max(0, now_ms - then_ms) // 1000
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86_400:
        return f"{seconds // 3600} h ago"
    days = seconds // 86_400
    if days < 30:
        return "1 day ago" if days == 1 else f"{days} days ago"
    return time.strftime("%Y-%m-%d", time.localtime(then_ms / 1000))


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
    """An open ``index.db`` (one apsw connection; safe to share between threads).

    Obtain one with :meth:`open`. Several processes may have the same file
    open; writes serialize through ``IMMEDIATE`` transactions.

    The index is derived, so trouble with it never fails a command: when the
    file cannot be opened, read or written (another process holds its lock
    past the wait, read-only or full disk, a directory in its place) the
    index becomes *unavailable* for this process — said once, as a warning
    on ``mind.index`` — and then :meth:`entries` is empty, :meth:`note` and
    :meth:`store_caught_up` do nothing, and listing falls back to the
    session directories (:meth:`~mind.shell.store.Store.summaries`).

    Attributes:
        path: the ``index.db`` file.
        unavailable: why the index cannot be used in this process ("" while
            it can).
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
        self.unavailable = unavailable

    @classmethod
    def open(cls, source: SessionSource) -> SessionIndex:
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

        Args:
            source: the store whose state root holds the index and whose
                journals a rebuild reads.
        """
        path = source.root / INDEX_FILE
        try:
            try:
                con, outcome = cls._connect(path)
            except _DAMAGED as exc:
                log.warning("%s is damaged (%s); rebuilding it from the journals", path, exc)
                _remove_files(path)
                con, _ = cls._connect(path)
                outcome = "rebuild"
        except _UNUSABLE as exc:
            return cls._given_up(path, source, str(exc))
        except _DAMAGED as exc:
            return cls._given_up(path, source, f"stays damaged: {exc}")
        except OSError as exc:
            return cls._given_up(path, source, str(exc.strerror or exc))
        index = cls(path, con, source)
        if outcome == "rebuild":
            try:
                index.rebuild(source)
            except StateDirError as exc:
                index._give_up(exc.detail)
        return index

    @classmethod
    def _given_up(cls, path: Path, source: SessionSource, detail: str) -> SessionIndex:
        index = cls(path, None, source)
        index._give_up(detail)
        return index

    def _give_up(self, detail: str) -> None:
        """Stop using the file in this process; say so once."""
        if self.unavailable:
            return
        self.unavailable = detail or "unknown error"
        log.warning(
            "%s cannot be used (%s); sessions are listed from their directories",
            self.path,
            self.unavailable,
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
            con.transaction_mode = "IMMEDIATE"
            outcome = "ok"
            # Read first: a current file needs no write lock to open, so a
            # writer elsewhere (even one stuck holding its lock) cannot stall us.
            if con.pragma("user_version") != SCHEMA_VERSION:
                with con:
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
        """Close the connection. Idempotent."""
        con, self._con = self._con, None
        if con is not None:
            con.close()

    def note(
        self,
        session_id: str,
        *,
        cwd: str | None = None,
        title: str | None = None,
        status: str | None = None,
        updated_at_ms: int | None = None,
    ) -> bool:
        """Record what the runtime just journaled (the cheap update hook).

        Call it after the journal record is appended: at session creation
        (``cwd=``), turn start (``title=`` the prompt, ``status="running"``)
        and turn end (``status=`` the terminal status). Creates the row when
        missing (taking ``cwd`` from the journal's first record when not
        given). One ``stat`` of the journal and one small ``IMMEDIATE``
        transaction; a concurrent note from another process waits for it
        (up to :data:`QUICK_BUSY_TIMEOUT_MS`) and both updates are kept. A
        lock held longer, or a file that cannot be written, makes the index
        :attr:`unavailable` for this process (said once; later notes return
        False at once).

        Merge rules: ``cwd`` and ``title`` only fill a blank (the first prompt
        stays the title; ``title`` is collapsed and cut to
        :data:`TITLE_MAX_CHARS`); ``status`` replaces the last status; ``None``
        leaves a field as it is; ``updated_at_ms`` and the accounted journal
        size never decrease.

        Args:
            session_id: the session (a valid session id).
            cwd: the session's absolute working directory.
            title: the prompt text that started a turn.
            status: "running" or a terminal turn status ("completed",
                "interrupted", "failed", "aborted").
            updated_at_ms: time of the change, Unix epoch milliseconds
                (default: now).

        Returns:
            True when the row was written; False when the index could not be
            written (logged on ``mind.index``; never raised — the journal is
            the authority and the next listing or rebuild repairs the row).
        """
        at = _now_ms() if updated_at_ms is None else updated_at_ms
        con = self._con
        if con is None:
            return False
        try:
            con.set_busy_timeout(QUICK_BUSY_TIMEOUT_MS)
            path = self._source.journal_path(session_id)
            try:
                st = os.stat(path)
                size, mtime_ns = st.st_size, st.st_mtime_ns
                crc = tail_fingerprint(path, size)
            except OSError:
                size = mtime_ns = crc = 0
            if cwd is None and size:
                known = con.execute(
                    "SELECT cwd FROM sessions WHERE session_id = ?", (session_id,)
                ).fetchall()
                if not known or not known[0][0]:
                    cwd = peek_head(session_id, path).cwd
            with con:
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
                    },
                )
        except _UNUSABLE as exc:
            self._give_up(str(exc))
            return False
        except (apsw.Error, OSError, ValueError) as exc:
            log.warning("index note for session %s not written: %s", session_id, exc)
            return False
        finally:
            if self._con is not None:
                self._con.set_busy_timeout(BUSY_TIMEOUT_MS)
        return True

    def entries(self) -> dict[str, IndexEntry]:
        """Every row, by session id; empty when the index is :attr:`unavailable`.

        A damaged file is rebuilt from the journals first (then its rows are
        returned). Never raises: a file that cannot be read, or stays damaged
        or unwritable, makes the index unavailable (said once).
        """
        try:
            try:
                return self._select()
            except _DAMAGED as exc:
                log.warning("%s is damaged (%s); rebuilding it from the journals", self.path, exc)
            self._reset()
            self.rebuild(self._source)
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
        """Replace a damaged file by an empty, current one."""
        self.close()
        _remove_files(self.path)
        try:
            self._con, _ = self._connect(self.path)
        except (*_UNUSABLE, *_DAMAGED) as exc:
            raise StateDirError(self._source.root, f"{INDEX_FILE}: {exc}") from exc

    def rebuild(self, source: SessionSource) -> int:
        """Replace every row by one derived from each journal of ``source``.

        Reads each journal once, front to back (:func:`scan_journal`), outside
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
        con = self._con
        if con is None:
            raise StateDirError(source.root, f"{INDEX_FILE} cannot be used: {self.unavailable}")
        rows = list(self._scan_all(source))
        try:
            with con:
                con.execute("DELETE FROM sessions")
                con.executemany(
                    _REPLACE_SQL,
                    [r.row() for r in rows],
                )
        except _DAMAGED:
            self._reset()
            return self.rebuild(source)
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
        """Save rows a listing brought forward with :func:`catch_up`, and rows
        it derived again with :func:`scan_journal` (``rescanned``: their
        journal shrank or changed in place, so they replace the stored row).

        A caught-up row is only replaced when the stored one accounts for
        fewer journal bytes, so a newer :meth:`note` is never overwritten. Best effort: it
        does not wait for another process's lock (a listing never stalls on
        the index; the next one saves them).

        Returns:
            True when written; False on index trouble or a held lock (logged,
            never raised).
        """
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
            with con:
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
