"""The session journal: ``sessions/<session_id>/journal.jsonl`` (docs/design/journal.md).

Size: the one writer (:class:`Journal`: append, torn-tail vouching, sync,
same-file checks, checkpoints) and the description of the file format it
writes stay together, just over 500 lines. The reading rules are in
:mod:`mind.shell.journal_read` (re-exported here: :func:`read_records`,
:func:`check_journal`, ...), the checkpoint open path in
:mod:`mind.shell.journal_open`.

The journal is the authority of a session: an append-only file, one
:data:`~mind.generated.journal.JournalRecord` per line, ``seq`` numbered
0, 1, 2, ... without gaps, every line carrying its own integrity check. This
module (the writer) and :mod:`mind.shell.journal_read` (the reading rules) are
the only writer and readers of the file.

Line format
-----------

Every line is one JSON object followed by ``\\n``::

    line  = body ',"crc32":"' HEX8 '"}' '\\n'
    body  = record[:-1] [ ',"torn":{"bytes":' N ',"crc32":"' HEX8 '"}' ]

``record`` is the msgspec JSON encoding of the record (a JSON object, so
``record[:-1]`` is the object without its closing brace). ``HEX8`` after
``crc32`` is ``zlib.crc32(body)`` as 8 lowercase hex digits: the check covers
the exact bytes of the line up to the integrity field, including the optional
``torn`` field. A reader verifies the check over the bytes, then decodes
``record[:-1] + b"}"`` with the typed decoder. The whole line stays valid JSON
(the record's fields plus ``torn``/``crc32``), so ``jq`` can read it.

Lines are split on ``b"\\n"`` only. msgspec escapes every control character
inside strings (``\\n``, ``\\r``, NUL as ``\\u0000``), so a string value can
never break a line; U+2028/U+2029 are written as raw UTF-8 and are harmless
because nothing splits on them. Python strings that cannot be encoded as
UTF-8 (lone surrogates, e.g. from ``errors="surrogateescape"`` decoding of
invalid UTF-8 tool output) are sanitized deterministically before encoding:
every surrogate code point U+D800..U+DFFF becomes U+FFFD, in keys and values
at any depth. A line longer than :data:`MAX_LINE_BYTES` is never written.

Torn tails
----------

A crash in the middle of an append leaves a *torn* last line: bytes with no
trailing newline, or a line that fails its check. On open such a tail (all
bytes after the last verified line) is dropped and reported in
:class:`JournalOpenReport`; the file is not modified: nothing is truncated or
overwritten when a journal is opened or read.

The next append must not glue a record onto the torn bytes, and the torn
bytes must stay recognisable as a historic tail once they are no longer last.
So the first append after a torn tail

1. ends the torn bytes with ``~\\n`` when the file does not end with a
   newline (the ``~`` guarantees the torn line keeps failing its check even
   when only its newline was missing, so it is never resurrected), and
2. adds ``"torn":{"bytes":N,"crc32":"HEX8"}`` to its line, *vouching* for
   the exact N bytes between the end of the last verified line and its own
   start (the torn bytes plus the separator), with their CRC-32.

A reader accepts damaged bytes between two verified lines only when the
second line vouches for exactly those bytes (same length, same CRC-32); any
other damage before a verified line raises :class:`JournalCorruptError` with
the 1-based number of the first damaged line. A verified line that vouches
for bytes that are not there, fails the schema, or breaks the ``seq`` order is
corruption too, even when it is the last line (a torn write cannot produce a
valid check). The torn tail may span several lines: a torn line followed by
an interrupted first append leaves two.

Writes go through one ``O_APPEND`` descriptor, one ``os.write`` per record, so
a line is never interleaved with another write. The runtime calls
:meth:`Journal.append` with ``sync=True`` at turn boundaries (``turn_started``,
the terminal record) and ``fsync`` makes them durable. After a failed write
or fsync the :class:`Journal` refuses further appends: the caller reopens it,
and the open path classifies whatever reached the disk.

Files are created 0600 in directories created 0700, opened without
following a symlink or blocking, and must be private regular files
(:mod:`mind.shell.private_files`). An append first checks that the path
still names the open file (one ``lstat``) — every synced append (turn
boundaries) and any append :data:`SAME_FILE_CHECK_MS` after the last check —
so a replaced or removed journal is :class:`~mind.errors.JournalReplacedError`
at the latest at the next turn boundary, never silently lost.

Checkpoints
-----------

:meth:`Journal.open` keeps in memory only the records the runtime retains
(:mod:`mind.context.retention`), folding them as it reads; it starts from
the session's ``checkpoint.json`` (:mod:`mind.shell.checkpoint`) when that
proves itself, verifying only the journal after its offset with the rules
above, and else reads the whole file (docs/design/checkpoints.md).

The journal keeps a running CRC-32 (``zlib.crc32`` chained from 0) of every
byte it holds — computed by a full read, carried over the tail from the
checkpoint's value, continued by each append over the bytes it wrote — and
every checkpoint stores it; after an open through one, the hosting process
checks the covered prefix against it in the background
(:class:`~mind.shell.journal_open.PrefixCheck`, :attr:`Journal.verification`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Final, final

import msgspec

from mind.context.retention import Folded, Retention, checkpoint_due
from mind.errors import (
    JournalCorruptError,
    JournalError,
    JournalRecordTooLarge,
    JournalReplacedError,
    JournalWriteError,
    PrivateStateError,
    os_error_detail,
)
from mind.generated.journal import JournalRecord
from mind.shell import checkpoint, private_files
from mind.shell.journal_open import (
    PrefixCheck,
    checked_in_background,
    checkpoint_due_at_open,
    open_scan,
)
from mind.shell.journal_read import (
    MAX_LINE_BYTES,
    JournalOpenReport,
    RecordSink,
    Scan,
    check_journal,
    check_piece,
    decode,
    decode_record,
    head_record,
    line_damage,
    open_private,
    read_records,
    require_session,
    require_start,
)

__all__ = [
    "MAX_LINE_BYTES",
    "Journal",
    "JournalOpenReport",
    "RecordSink",
    "check_journal",
    "check_piece",
    "decode_record",
    "head_record",
    "line_damage",
    "read_records",
]

_log = logging.getLogger(__name__)

_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
SAME_FILE_CHECK_MS: Final = 50
"""An append checks that the path still names the open file when it syncs,
or when this many ms (by the journal's clock) passed since the last check:
one ``lstat`` per append would double :meth:`Journal.append`'s cost."""
_SEPARATOR: Final = b"~\n"
"""Ends an unterminated torn line; ``~`` keeps it failing its check."""

_ENCODER: Final = msgspec.json.Encoder()


def _sanitize(value: Any) -> Any:
    """Replace every surrogate code point in strings (keys too) by U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_sanitize(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_sanitize(v) for v in value]
    return value


def _encode(record: JournalRecord) -> tuple[bytes, JournalRecord]:
    """Encode a record and prove it reads back.

    Returns:
        ``(json_bytes, record_as_read_back)``; the second differs from the
        input only where encoding is lossy (surrogates → U+FFFD, NaN → null).

    Raises:
        ValueError: the record cannot be encoded or fails the schema.
    """
    try:
        try:
            raw = _ENCODER.encode(record)
        except UnicodeEncodeError:
            raw = _ENCODER.encode(_sanitize(msgspec.to_builtins(record)))
    except (TypeError, ValueError, OverflowError, RecursionError, msgspec.EncodeError) as exc:
        raise ValueError(f"record cannot be encoded: {exc}") from None
    return raw, decode(raw)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@final
class Journal:
    """An open session journal: the retained records in memory, appends to disk.

    Obtain one with :meth:`Journal.open`. One process writes a journal at a
    time (the session lease guarantees it); the object is not thread-safe.

    Attributes:
        path: the ``journal.jsonl`` file.
        records: the records the runtime retains (:mod:`mind.context.retention`:
            what the newest compaction left, an unterminated turn, grants,
            settled inputs…) as opened, then every appended one, in ``seq``
            order; a checkpoint drops what the rule no longer keeps (the list
            is replaced, not changed in place: index by ``seq``, never by
            position). Not the whole history: :func:`read_records` reads that.
        report: what :meth:`open` found (torn tail, record count, checkpoint).
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        scan: Scan,
        clock_ms: Callable[[], int],
        session_id: str | None = None,
        *,
        checkpoints: bool = False,
        covered: int = 0,
    ) -> None:
        """Internal: use :meth:`Journal.open`."""
        self.path = path
        self.session_id = session_id
        held = os.fstat(fd)
        self._dev, self._ino = held.st_dev, held.st_ino
        self._path_str = os.fspath(path)  # appends lstat it: no Path conversion each time
        self._checked_ms = -(1 << 62)  # the first append checks (no extra clock read here)
        self.records: list[JournalRecord] = scan.records
        self.report: JournalOpenReport = scan.report()
        self._fd: int | None = fd
        self._clock_ms = clock_ms
        self._tail_bytes = scan.tail_bytes
        self._tail_crc = scan.tail_crc
        self._crc = scan.crc  # running CRC-32 of the file's bytes [0, _size)
        self._ends_with_newline = scan.ends_with_newline
        self.folded: Folded = scan.folded
        """What the records the runtime let go of still say (input ids they
        settled, turns they closed): add it to any fold over :attr:`records`
        that needs the whole journal (docs/design/checkpoints.md §1)."""
        self.bytes_read = scan.size - scan.start
        """Journal bytes :meth:`open` read and verified (the tail after a checkpoint)."""
        self._next_seq = scan.count
        self._size = scan.size  # the file's length: appends keep it
        self._lines = scan.lines
        self._first_line = scan.first_line
        self._last_line = scan.last_line
        self._last_proof = scan.last_proof  # when _last_line is not read
        self._tail_lines = scan.all_lines - scan.lines  # lines of a torn tail
        self._checkpoints = checkpoints
        self._covered = covered  # journal bytes the newest checkpoint covers
        self.verification: PrefixCheck | None = None
        """The background check of the prefix the opening checkpoint covered
        (docs/design/checkpoints.md §5), when this process hosts the session
        and opened through one; None otherwise."""
        self._broken: str | None = None
        self._broken_as: type[JournalError] = JournalError
        self._broken_errno: int | None = None

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        create: bool = False,
        clock_ms: Callable[[], int] | None = None,
        session_id: str | None = None,
        checkpoints: bool = False,
        on_damage: Callable[[JournalCorruptError], None] | None = None,
    ) -> Journal:
        """Open a journal for appending: read its newest valid checkpoint and
        verify the journal after it, or read and verify all of it; keep the
        records the runtime retains (docs/design/checkpoints.md).

        Args:
            path: the ``sessions/<id>/journal.jsonl`` file.
            create: create the file (0600) and missing directories (0700)
                when it does not exist; the new file and its directory entry
                are fsynced.
            clock_ms: wall clock in Unix epoch milliseconds used to stamp
                ``recorded_at_ms`` (default: the system clock).
            session_id: the session the file must belong to: its
                ``session_started`` record must name it (a journal swapped in
                from another session is damage); None skips the check.
            checkpoints: this process hosts the session (holds its lease):
                write checkpoints (now, when the read was long or fell back;
                later at the points :func:`mind.context.retention.checkpoint_due`
                names). Any opener reads one.
            on_damage: called (on the check's thread; must not raise) with
                the damage the background check of the covered prefix finds
                (docs/design/checkpoints.md §5), when ``checkpoints``.

        Returns:
            The open journal. A torn tail and how the checkpoint served
            are reported in :attr:`report` (a refused checkpoint is also
            logged); the journal file is never modified by opening.

        Raises:
            JournalError: missing and ``create`` is false, or the file cannot
                be opened/read (line 0).
            JournalCorruptError: damage other than a torn tail, with the
                1-based line (docs/design/journal.md §2: fail closed).
            JournalReplacedError: the file names another session.
        """
        flags = os.O_RDWR | os.O_APPEND
        created = False
        try:
            fd = open_private(path, flags)
        except JournalError:
            if not create or os.path.lexists(path):
                raise
            try:
                private_files.private_dir(path.parent)
            except PrivateStateError as exc:
                raise JournalError(path, 0, f"refused: {exc}") from None
            except OSError as exc:
                raise JournalError(path, 0, f"cannot create: {exc.strerror}") from None
            try:
                fd = open_private(path, flags | os.O_EXCL, create=True)
                created = True
            except FileExistsError:
                fd = open_private(path, flags)
        try:
            if created:
                os.fsync(fd)
                private_files.fsync_dir(path.parent)
            scan, found = open_scan(fd, path, session_id)
            if not created:
                require_start(scan, path)
                require_session(scan, path, session_id)
        except OSError as exc:
            os.close(fd)
            raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
        except BaseException:
            os.close(fd)
            raise
        clock = clock_ms or _now_ms
        covered = 0 if found is None else found.offset
        journal = cls(path, fd, scan, clock, session_id, checkpoints=checkpoints, covered=covered)
        if checkpoints and found is not None and checked_in_background(found):
            # Only the host verifies: a damaged prefix removes the checkpoint.
            try:
                journal.verification = PrefixCheck(path, fd, found.offset, found.crc32, on_damage)
            except OSError as exc:
                journal.close()
                raise JournalError(path, 0, f"cannot verify journal: {exc.strerror}") from None
        fell_back = scan.checkpoint not in ("", "used")
        due = checkpoints and (fell_back or checkpoint_due_at_open(scan))
        # Reported once: the next open reads this one. The note says what mind
        # did, so nobody is told to repair a file it already replaced.
        if due and journal.write_checkpoint() and fell_back:
            note = f"{scan.checkpoint}; mind wrote a new private one"
            journal.report = msgspec.structs.replace(journal.report, checkpoint=note)
        return journal

    def write_checkpoint(self) -> bool:
        """Write a checkpoint of the retained records up to the journal's end
        (fsyncing the journal first: a checkpoint never covers bytes that are
        not durable). Not after a torn tail no append has closed yet.

        A failure to write it is logged and leaves the old checkpoint: it is
        an optimisation, never a reason to fail a turn. None is written once
        the background check found the covered prefix damaged
        (docs/design/checkpoints.md §5).

        Returns:
            Whether a checkpoint was written.

        Raises:
            JournalWriteError: the journal's fsync failed (see :meth:`sync`).
        """
        check = self.verification
        if check is not None and check.damage is not None:
            return False
        if self._tail_bytes or self._first_line is None or self.session_id is None:
            return False
        self.sync()
        last = self._last_proof or checkpoint.LineProof.of(self._last_line + b"\n")
        retention = Retention(self.folded)
        retention.extend(self.records)
        kept = retention.records()
        taken = checkpoint.Checkpoint(
            offset=self._size,
            next_seq=self._next_seq,
            lines=self._lines,
            first_line=self._first_line,
            last_line=last,
            crc32=self._crc,
            records=kept,
            folded=retention.folded,
        )
        # What a compaction superseded leaves memory now, not at the next
        # open; a new list, so a reader holding the old one is not disturbed.
        self.records, self.folded = kept, retention.folded
        try:
            with contextlib.nullcontext() if check is None else check.lock:
                if check is not None and check.damage is not None:
                    return False  # found meanwhile: never a checkpoint over it
                checkpoint.write(self.path, self.session_id, taken)
        except (OSError, PrivateStateError) as exc:
            _log.warning("%s: checkpoint not written: %s", self.path, exc)
            return False
        self._covered = self._size
        return True

    @property
    def next_seq(self) -> int:
        """The ``seq`` the next appended record gets (records so far)."""
        return self._next_seq

    def append(self, record: JournalRecord, *, sync: bool = False) -> JournalRecord:
        """Stamp and append one record as one line.

        The record's ``seq`` and ``recorded_at_ms`` are replaced (callers pass
        0 for both) with :attr:`next_seq` and the clock. Strings that are not
        encodable as UTF-8 are sanitized (surrogates → U+FFFD). The record is
        encoded, decoded back with the schema decoder (constraints such as
        ``>= 0`` only apply on decode) and written with one ``os.write`` on
        the ``O_APPEND`` descriptor; after a torn tail the line vouches for it
        (see the module docstring).

        Args:
            record: the record to append.
            sync: fsync the file after writing (turn start and terminal
                records, docs/design/journal.md §3); also always checks that the path
                still names the open file.

        Returns:
            The record exactly as it will read back from the file.

        Raises:
            JournalError: the record cannot be encoded or fails the schema
                (nothing written; the journal stays usable), or the journal
                is closed (line 0).
            JournalRecordTooLarge: the line would be longer than
                :data:`MAX_LINE_BYTES` (nothing written; still usable).
            JournalWriteError: (a JournalError and a StorageError carrying
                path and errno) the write/fsync failed (ENOSPC, EDQUOT, EIO…),
                or an earlier one did. After it the journal refuses appends
                until it is reopened with :meth:`open`; at most the last line
                is torn, which reopening repairs.
            JournalReplacedError: the path no longer names the open file
                (replaced or removed); nothing written, and every later
                append is refused the same way.
        """
        fd = self._usable_fd()
        now_ms = self._clock_ms()
        stamped = msgspec.structs.replace(record, seq=self.next_seq, recorded_at_ms=max(0, now_ms))
        try:
            raw, read_back = _encode(stamped)
        except ValueError as exc:
            raise JournalError(self.path, 0, str(exc)) from None
        prefix = b"" if self._ends_with_newline else _SEPARATOR
        body = raw[:-1]
        if self._tail_bytes:
            span_bytes = self._tail_bytes + len(prefix)
            span_crc = zlib.crc32(prefix, self._tail_crc)
            body += b',"torn":{"bytes":%d,"crc32":"%08x"}' % (span_bytes, span_crc)
        line = body + b',"crc32":"%08x"}' % zlib.crc32(body)
        if len(line) > MAX_LINE_BYTES:
            raise JournalRecordTooLarge(self.path, len(line), MAX_LINE_BYTES)
        whole = prefix + line + b"\n"
        data = memoryview(whole)
        if sync or not 0 <= now_ms - self._checked_ms < SAME_FILE_CHECK_MS:
            self._require_same_file()
            self._checked_ms = now_ms
        try:
            while data:
                written = os.write(fd, data)
                data = data[written:]
        except OSError as exc:
            # A short write leaves at most a torn last line: the one case the
            # open rules repair (module docstring), so reopening recovers.
            self._broken = f"a write failed ({exc.strerror}); reopen the journal"
            self._broken_errno = exc.errno
            raise JournalWriteError(
                self.path, exc.errno, os_error_detail("cannot append", exc)
            ) from None
        self._tail_bytes = 0
        self._tail_crc = 0
        self._crc = zlib.crc32(whole, self._crc)
        self._ends_with_newline = True
        self.records.append(read_back)
        if self._next_seq == 0:
            self._first_line = checkpoint.LineProof.of(line + b"\n")
        self._next_seq += 1
        self._size += len(prefix) + len(line) + 1
        self._lines += self._tail_lines + 1
        self._tail_lines = 0
        self._last_line, self._last_proof = line, None
        if sync:
            self.sync()
        if self._checkpoints and checkpoint_due(read_back, self._size - self._covered):
            self.write_checkpoint()
        return read_back

    @property
    def broken(self) -> str | None:
        """Why appends are refused after a failed write or fsync (None: usable)."""
        return self._broken

    def sync(self) -> None:
        """fsync the file: every appended record is durable on return.

        Raises:
            JournalError: fsync failed (the journal then refuses appends until
                reopened), or the journal is closed or broken.
        """
        fd = self._usable_fd()
        try:
            os.fsync(fd)
        except OSError as exc:
            self._broken = f"fsync failed ({exc.strerror}); reopen the journal"
            self._broken_errno = exc.errno
            raise JournalWriteError(
                self.path, exc.errno, os_error_detail("cannot sync", exc)
            ) from None

    def close(self) -> None:
        """Stop the background check of the prefix (its thread is gone on
        return) and close the file descriptor. Idempotent; does not fsync."""
        if self.verification is not None:
            self.verification.stop()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._fd is None

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _require_same_file(self) -> None:
        """Refuse once :attr:`path` no longer names the open file (one
        ``lstat``, compared with the device and inode taken at open): an
        append there would be lost silently. Later appends are refused too.

        Raises:
            JournalReplacedError: replaced, removed or unreadable.
        """
        try:
            now = os.stat(self._path_str, follow_symlinks=False)
        except FileNotFoundError:
            what = "removed"
        except OSError as exc:
            what = f"made unreadable ({exc.strerror})"
        else:
            if now.st_ino == self._ino and now.st_dev == self._dev:
                return
            what = "replaced by another file"
        self._broken = f"the journal was {what} while this session was open"
        self._broken_as = JournalReplacedError  # later appends say the same
        raise JournalReplacedError(self.path, 0, self._broken)

    def _usable_fd(self) -> int:
        if self._fd is None:
            raise JournalError(self.path, 0, "journal is closed")
        if self._broken is not None:
            if self._broken_as is JournalReplacedError:
                raise JournalReplacedError(self.path, 0, self._broken)
            raise JournalWriteError(self.path, self._broken_errno, self._broken)
        return self._fd
