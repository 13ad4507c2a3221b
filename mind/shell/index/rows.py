"""Index rows derived from journals: the index's only reading of journal files.

Every byte is checked by the journal's own reader (:mod:`mind.shell.journal`:
:func:`~mind.shell.journal.check_journal` for a whole file,
:func:`~mind.shell.journal.check_piece` for appended bytes,
:func:`~mind.shell.journal.head_record` for the first line), and the few
record types a row needs are decoded with the journal schema
(:func:`~mind.shell.journal.decode_record`); the big records (model rounds,
tool results) are skipped by type, never decoded. Nothing here is used to
grant, replay or recover: a row is for display.

Staleness (``docs/design/state.md``): a row accounts for a journal prefix
(``journal_size_bytes``) fingerprinted by the CRC-32 of its last
:data:`FINGERPRINT_BYTES`; a listing reads only bytes appended after it
(:func:`catch_up`), and checks the whole journal again (:func:`scan_journal`)
when the prefix changed. All sizes are bytes, times Unix epoch ms.
"""

from __future__ import annotations

import errno
import os
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final

import msgspec

from mind.errors import JournalCorruptError, JournalError, PrivateStateError
from mind.generated.journal import Kind, SessionStarted, TurnCompleted, TurnStarted, UserMessage
from mind.shell import journal, private_files

__all__ = [
    "CATCH_UP_MAX_BYTES",
    "FINGERPRINT_BYTES",
    "HEAD_PEEK_MAX_BYTES",
    "TITLE_MAX_CHARS",
    "IndexEntry",
    "ReadRange",
    "catch_up",
    "peek_head",
    "read_range",
    "scan_journal",
    "tail_fingerprint",
    "title_of",
]

TITLE_MAX_CHARS: Final = 80
"""Longest title kept, in characters (whitespace collapsed first)."""
HEAD_PEEK_MAX_BYTES: Final = 64 * 1024
"""Most bytes read to find a journal's first record (its ``session_started``)."""
CATCH_UP_MAX_BYTES: Final = 256 * 1024
"""Most bytes a listing reads from the end of a journal that grew past its row."""
FINGERPRINT_BYTES: Final = 4096
"""How many bytes before a row's offset its ``journal_tail_crc`` covers."""

_FIRST_PEEK_BYTES: Final = 4096
_WANTED: Final = frozenset({"session_started", "turn_started", "user_message", "turn_completed"})
"""The record types a row is folded from; every other type is skipped undecoded."""

ReadRange = Callable[[Path, int, int], bytes]
"""``(path, offset, max_bytes) -> bytes``: read up to ``max_bytes`` from ``offset``.

Every journal read of a listing goes through one (default :func:`read_range`);
tests inject a counting wrapper to prove listing never reads whole journals.
"""


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


def title_of(text: str) -> str:
    """A prompt as a title: whitespace collapsed, at most :data:`TITLE_MAX_CHARS` chars."""
    return " ".join(text.split())[:TITLE_MAX_CHARS]


class _Fold:
    """Folds a journal's sound records into an entry (rebuild and catch-up)."""

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

    def feed(self, tag: str, record_bytes: bytes) -> None:
        """Take one sound record (:data:`~mind.shell.journal.RecordSink`)."""
        if tag not in _WANTED:
            return
        rec = journal.decode_record(record_bytes)
        if rec is None:
            return
        self.updated_at_ms = max(self.updated_at_ms, rec.recorded_at_ms)
        if isinstance(rec, SessionStarted):
            self.cwd = self.cwd or rec.cwd
            self.created_at_ms = self.created_at_ms or rec.recorded_at_ms
        elif isinstance(rec, TurnStarted):
            self.status = "running"
        elif isinstance(rec, UserMessage) and rec.kind == Kind.prompt and not self.title:
            self.title = title_of(rec.text)
        elif isinstance(rec, TurnCompleted):
            self.status = rec.status.value

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
    first = journal.head_record(head, whole_file=len(head) < HEAD_PEEK_MAX_BYTES)
    damage = first if isinstance(first, str) else ""
    if not isinstance(first, str):
        fold.feed(*first)
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
    Each complete line read is checked by the journal's reader
    (:func:`~mind.shell.journal.check_piece`): a damaged one with more lines
    after it may be corruption, which only a full check can tell from a
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
    records = journal.check_piece(data, starts_mid_line=clipped)
    if records is None:
        return None
    fold = _Fold(entry)
    for tag, record_bytes in records:
        fold.feed(tag, record_bytes)
    tail = data if clipped else prefix_end + data  # contiguous, ending at ``size``
    return fold.entry(entry.session_id, size, mtime_ns, zlib.crc32(tail[-FINGERPRINT_BYTES:]))
