"""The session journal: ``sessions/<session_id>/journal.jsonl`` (docs/design/journal.md).

Size: writing and the open rules (CRC, seq, torn tail, first record) must
agree byte for byte, so the one writer and every reader of the file — the
strict open, :func:`read_records`, and the read-only scans the session index
uses (:func:`check_journal`, :func:`check_piece`, :func:`head_record`,
:func:`decode_record`) — live together here.

The journal is the authority of a session: an append-only file, one
:data:`~mind.generated.journal.JournalRecord` per line, ``seq`` numbered
0, 1, 2, ... without gaps, every line carrying its own integrity check. This
module is the only reader and writer of the file.

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

One module (over 500 lines) because the writer and the reader of the
file format (per-line CRC, torn tails, the first record) must agree byte
for byte; they change together.
"""

from __future__ import annotations

import io
import logging
import os
import re
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, final

import msgspec

from mind.context.retention import CHECKPOINT_TAIL_BYTES, Folded, Retention, checkpoint_due
from mind.errors import (
    CheckpointRefused,
    JournalCorruptError,
    JournalError,
    JournalRecordTooLarge,
    JournalReplacedError,
    JournalWriteError,
    PrivateStateError,
    os_error_detail,
)
from mind.generated.journal import JournalRecord, SessionStarted
from mind.shell import checkpoint, private_files

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

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest line (without its newline) written or accepted, in bytes."""

_CRC_KEY: Final = b',"crc32":"'
_CRC_SUFFIX_LEN: Final = len(_CRC_KEY) + 8 + 2  # ,"crc32":"HHHHHHHH"}
# Unambiguous: no record type has a top-level ``torn`` key, and a nested
# object always ends in ``}}`` before the removed closing brace.
_TORN_RE: Final = re.compile(rb',"torn":\{"bytes":(0|[1-9][0-9]{0,18}),"crc32":"([0-9a-f]{8})"\}\Z')
_HEX8_RE: Final = re.compile(rb"[0-9a-f]{8}\Z")
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_READ_BUFFER_BYTES: Final = 1 << 20
SAME_FILE_CHECK_MS: Final = 50
"""An append checks that the path still names the open file when it syncs,
or when this many ms (by the journal's clock) passed since the last check:
one ``lstat`` per append would double :meth:`Journal.append`'s cost."""
_SEPARATOR: Final = b"~\n"
"""Ends an unterminated torn line; ``~`` keeps it failing its check."""

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final[msgspec.json.Decoder[JournalRecord]] = msgspec.json.Decoder(JournalRecord)

RecordSink = Callable[[str, bytes], None]
"""``(record type, record JSON bytes)`` of each sound record, in file order:
what the read-only scans hand out instead of decoded records (the caller
decodes the few types it needs with :func:`decode_record`)."""


class JournalOpenReport(msgspec.Struct, frozen=True, kw_only=True):
    """What opening a journal found.

    Attributes:
        torn_tail_dropped: True when bytes after the last verified line were
            dropped (a torn tail; the file itself is unchanged).
        torn_tail_bytes: size of the dropped tail in bytes (0 when none).
        records: number of verified records loaded.
        torn_tail_line: 1-based line number where the dropped tail starts
            (0 when none).
        earlier_torn_spans: number of historic torn tails inside the file that
            later records vouch for (informational; they are skipped).
        checkpoint: how the journal was read (docs/design/checkpoints.md §4):
            ``"used"`` (a checkpoint, then the tail), ``""`` (read whole; no
            checkpoint was due yet), or why a checkpoint could not be used
            (the journal was read whole: correct, slower).
    """

    torn_tail_dropped: bool
    torn_tail_bytes: int
    records: int
    torn_tail_line: int = 0
    earlier_torn_spans: int = 0
    checkpoint: str = ""


class _Scan:
    """Result of reading a journal file (internal)."""

    __slots__ = (
        "all_lines",
        "checkpoint",
        "count",
        "earlier_torn_spans",
        "ends_with_newline",
        "first_line",
        "first_tag",
        "folded",
        "last_line",
        "last_proof",
        "lines",
        "records",
        "size",
        "start",
        "tail_bytes",
        "tail_crc",
        "tail_line",
        "tail_reason",
    )

    def __init__(self) -> None:
        self.records: list[JournalRecord] = []
        self.start = 0  # where the scan began (a checkpoint's offset, or 0)
        self.checkpoint = ""
        self.folded = Folded()
        self.first_line: checkpoint.LineProof | None = None
        self.last_line = b""  # the last verified line, without its newline
        self.last_proof: checkpoint.LineProof | None = None  # a checkpoint's, when no line followed
        self.all_lines = 0  # lines read, a torn tail's included
        self.size = 0
        self.lines = 0  # verified lines up to the last one (torn ones included)
        self.tail_bytes = 0
        self.tail_crc = 0
        self.tail_line = 0
        self.tail_reason = ""
        self.count = 0
        self.first_tag = ""
        self.ends_with_newline = True
        self.earlier_torn_spans = 0

    def report(self) -> JournalOpenReport:
        return JournalOpenReport(
            torn_tail_dropped=self.tail_bytes > 0,
            torn_tail_bytes=self.tail_bytes,
            records=self.count,
            torn_tail_line=self.tail_line,
            earlier_torn_spans=self.earlier_torn_spans,
            checkpoint=self.checkpoint,
        )


class _Sound(msgspec.Struct, frozen=True):
    """A line whose integrity check passed: its record bytes and vouch."""

    record_bytes: bytes
    torn_bytes: int | None
    torn_crc: int | None


def _check_line(line: bytes) -> _Sound | str:
    """Verify one complete line (without its newline).

    Returns:
        The sound line, or a short reason why the line is damaged (the check
        fails: such a line may be a torn write).
    """
    if len(line) > MAX_LINE_BYTES:
        return f"line longer than {MAX_LINE_BYTES} bytes"
    if len(line) < _CRC_SUFFIX_LEN + 2 or not line.startswith(b"{"):
        return "not a journal line"
    if line[-_CRC_SUFFIX_LEN : -_CRC_SUFFIX_LEN + len(_CRC_KEY)] != _CRC_KEY or line[-2:] != b'"}':
        return "missing integrity field"
    hex8 = line[-10:-2]
    if _HEX8_RE.match(hex8) is None:
        return "malformed integrity field"
    body = line[:-_CRC_SUFFIX_LEN]
    if zlib.crc32(body) != int(hex8, 16):
        return "integrity check failed"
    match = _TORN_RE.search(body)
    if match is None:
        return _Sound(body + b"}", None, None)
    return _Sound(body[: match.start()] + b"}", int(match[1]), int(match[2], 16))


def line_damage(line: bytes) -> str:
    """Why one complete journal line (without its newline) fails its
    integrity check, or "" when it passes (framing only, no schema decode)."""
    checked = _check_line(line)
    return checked if isinstance(checked, str) else ""


def _decode(record_bytes: bytes) -> JournalRecord:
    """Decode record bytes with the typed decoder.

    Raises:
        ValueError: the bytes do not hold a schema record (message says why).
    """
    try:
        return _DECODER.decode(record_bytes)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a valid journal record: {exc}") from None
    except RecursionError:
        raise ValueError("not a valid journal record: nested too deeply") from None


def _read_line(stream: IO[bytes], crc_seed: int) -> tuple[bytes | None, int, int, bool] | None:
    """Read one line, never holding more than ``MAX_LINE_BYTES + 2`` bytes.

    Args:
        stream: the journal, positioned at the start of a line.
        crc_seed: CRC-32 to continue (of the damaged bytes before this line).

    Returns:
        ``None`` at end of file, else ``(content, length, crc, terminated)``:
        the line without its newline (``None`` when too long to be a journal
        line), its length in bytes including the newline, the CRC-32 of those
        bytes continued from ``crc_seed``, and whether it ended with ``\\n``.
    """
    chunk = stream.readline(MAX_LINE_BYTES + 2)
    if not chunk:
        return None
    length = len(chunk)
    crc = zlib.crc32(chunk, crc_seed)
    if chunk.endswith(b"\n"):
        return chunk[:-1], length, crc, True
    if length <= MAX_LINE_BYTES + 1:
        return chunk, length, crc, False
    # Too long to be a journal line: consume it without keeping it.
    while chunk := stream.readline(_READ_BUFFER_BYTES):
        length += len(chunk)
        crc = zlib.crc32(chunk, crc)
        if chunk.endswith(b"\n"):
            return None, length, crc, True
    return None, length, crc, False


def _scan(
    stream: IO[bytes],
    path: Path,
    on_record: RecordSink | None = None,
    *,
    keep: Callable[[JournalRecord], None] | None = None,
    start: tuple[int, int, int] = (0, 0, 0),
) -> _Scan:
    """Read and verify a journal (see the module docstring for rules).

    With ``on_record`` the records are not decoded with the schema (only
    their ``type`` and ``seq``) nor kept: each sound record's type and JSON
    bytes are passed to it instead (:func:`check_journal`). Otherwise each
    decoded record goes to ``keep`` (default: appended to ``records``), so a
    caller decides what stays in memory.

    ``start`` is ``(byte offset, seq, lines before)`` of a verified line
    boundary to begin at (a checkpoint's): ``stream`` is positioned there;
    the bytes before it are not read.

    Raises:
        JournalCorruptError: damage other than a torn tail, with the 1-based
            line of the first damaged line.
        OSError: reading failed.
    """
    scan = _Scan()
    scan.start, scan.count, line_no = start
    scan.lines = line_no
    if keep is None:
        keep = scan.records.append
    offset = scan.start  # start of the current line
    span_start = offset  # end of the last verified line
    span_crc = 0  # CRC-32 of the damaged bytes [span_start, offset)
    span_line = 0  # first line of the damaged run (0: none)
    span_reason = ""
    terminated = True
    # An unvouched damaged run may only be the torn tail: its last line, plus
    # lines our own appends ended with the separator ``~``. The first other
    # damaged line that turns out not to be last is remembered here.
    not_last: tuple[int, str] | None = None
    previous: tuple[int, str, bool] | None = None  # latest damaged line of the run
    while (got := _read_line(stream, span_crc)) is not None:
        content, length, crc, terminated = got
        line_no += 1
        checked: _Sound | str
        if not terminated:
            checked = "last line has no newline (torn write)"
        elif content is None:
            checked = f"line longer than {MAX_LINE_BYTES} bytes"
        else:
            checked = _check_line(content)
        if isinstance(checked, str):
            if span_line == 0:
                span_line, span_reason = line_no, checked
            if previous is not None and not previous[2] and not_last is None:
                not_last = previous[:2]
            previous = (line_no, checked, content is not None and content.endswith(b"~"))
            span_crc = crc
            offset += length
            continue
        # A sound line: everything about it must now hold.
        damaged = offset - span_start
        if damaged:
            if checked.torn_bytes != damaged or checked.torn_crc != span_crc:
                raise JournalCorruptError(path, span_line, span_reason)
            scan.earlier_torn_spans += 1
        elif checked.torn_bytes is not None:
            raise JournalCorruptError(
                path,
                line_no,
                f"line vouches for {checked.torn_bytes} torn bytes that are not there",
            )
        expected = scan.count
        if on_record is None:
            try:
                record = _decode(checked.record_bytes)
            except ValueError as exc:
                raise JournalCorruptError(path, line_no, str(exc)) from None
            seq = record.seq
            if expected == 0:
                scan.first_tag = str(type(record).__struct_config__.tag)
        else:  # the light check: framing and order only, no schema decode
            seq, tag = _light(checked.record_bytes, path, line_no)
            if expected == 0:
                scan.first_tag = tag
            on_record(tag, checked.record_bytes)
        if seq != expected:
            raise JournalCorruptError(path, line_no, f"seq {seq} where {expected} was expected")
        assert content is not None  # a sound line has content
        if on_record is None:
            keep(record)
        if expected == 0:
            scan.first_line = checkpoint.LineProof.of(content + b"\n")
        scan.count += 1
        scan.last_line = content  # kept by reference: the proof is hashed when needed
        scan.lines = line_no
        offset += length
        span_start, span_crc, span_line, span_reason = offset, 0, 0, ""
        not_last = previous = None
    if not_last is not None:
        raise JournalCorruptError(path, not_last[0], f"{not_last[1]} (not the last line)")
    scan.size = offset
    scan.all_lines = line_no
    scan.tail_bytes = offset - span_start
    scan.tail_crc = span_crc
    scan.tail_line = span_line
    scan.tail_reason = span_reason
    scan.ends_with_newline = terminated
    return scan


def _require_start(scan: _Scan, path: Path) -> None:
    """A session journal begins with its ``session_started`` record (docs/design/journal.md §1).

    A file without one — empty (the session was never started), nothing but
    damage, or another first record — is not a session: refusing keeps a
    caller from "recovering" it into an empty session with a made-up cwd.

    Raises:
        JournalCorruptError: line 1 (or the first damaged line), with why.
    """
    if not scan.count:
        if scan.size == 0:
            raise JournalCorruptError(path, 1, "empty journal: no session_started record")
        raise JournalCorruptError(
            path, scan.tail_line or 1, f"no session_started record: {scan.tail_reason}"
        )
    if scan.first_tag != "session_started":
        raise JournalCorruptError(
            path, 1, f"first record is {scan.first_tag!r}, not 'session_started'"
        )


def _require_session(scan: _Scan, path: Path, session_id: str | None) -> None:
    """The journal's ``session_started`` names ``session_id`` (when given).

    Raises:
        JournalReplacedError: it names another session (line 1).
    """
    if session_id is None or not scan.records:
        return
    first = scan.records[0]
    if isinstance(first, SessionStarted) and first.session_id != session_id:
        raise JournalReplacedError(
            path, 1, f"belongs to session {first.session_id!r}, not {session_id!r} (replaced)"
        )


class _Head(msgspec.Struct):
    """The two fields the light check reads from a record."""

    type: str
    seq: int


_HEAD_DECODER: Final = msgspec.json.Decoder(_Head)


# msgspec writes the tag, then ``seq``: a sound line (its CRC matched) starting
# like this needs no JSON parse to be placed.
_HEAD_RE: Final = re.compile(rb'\{"type":"([a-z_]{1,64})","seq":(0|[1-9][0-9]{0,18}),')


def _light(record_bytes: bytes, path: Path, line_no: int) -> tuple[int, str]:
    match = _HEAD_RE.match(record_bytes)
    if match is not None:
        return int(match[2]), match[1].decode()
    try:
        head = _HEAD_DECODER.decode(record_bytes)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise JournalCorruptError(path, line_no, f"not a valid journal record: {exc}") from None
    return head.seq, head.type


def check_journal(path: Path, on_record: RecordSink) -> JournalOpenReport:
    """Verify a journal's framing without decoding its records (for listing).

    Checks what :func:`read_records` checks — every line's CRC-32, vouched
    torn spans, the torn tail being the last line only, ``seq`` order and the
    first record being ``session_started`` — except the schema of each
    record, about 8 times faster. Reads the file once, front to back.

    Args:
        path: the journal.
        on_record: called with the type and JSON bytes of each sound
            record, in order.

    Returns:
        The open report (records counted, torn tail).

    Raises:
        JournalError: the file cannot be opened or read (line 0).
        JournalCorruptError: the journal is damaged or has no
            ``session_started`` first record (path, 1-based line, reason).
    """
    fd = _open_private(path, os.O_RDONLY)
    try:
        with _open_reader(fd) as reader:
            scan = _scan(reader, path, on_record)
    except OSError as exc:
        raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
    finally:
        os.close(fd)
    _require_start(scan, path)
    return scan.report()


def check_piece(data: bytes, *, starts_mid_line: bool = False) -> list[tuple[str, bytes]] | None:
    """The sound records in a piece of a journal (bytes appended since a
    known line boundary), checked line by line with the open rules' framing.

    Only complete lines count (the last piece, without its newline, is a torn
    or unfinished write). A damaged complete line is accepted only as the
    torn tail: the last complete line with nothing after it. ``seq`` order
    and vouched spans need the whole file: :func:`check_journal` does that.

    Args:
        data: bytes of the journal starting at a line boundary, or anywhere
            when ``starts_mid_line`` (then the first piece is skipped).
        starts_mid_line: ``data`` may begin inside a line.

    Returns:
        ``(type, record JSON bytes)`` per sound line, in order; ``None`` when
        a damaged line has more after it (only a full check can tell a
        vouched historic tail from corruption).
    """
    lines = data.split(b"\n")
    if starts_mid_line:
        lines = lines[1:]
    complete = lines[:-1]
    out: list[tuple[str, bytes]] = []
    for n, line in enumerate(complete):
        checked = _check_line(line)
        if isinstance(checked, str):
            if n + 1 < len(complete) or lines[-1]:
                return None
            continue
        tag = _tag(checked.record_bytes)
        if tag is None:
            return None
        out.append((tag, checked.record_bytes))
    return out


def head_record(head: bytes, *, whole_file: bool) -> tuple[str, bytes] | str:
    """A journal's first record from its first bytes, or why it would not open.

    Args:
        head: the file's first bytes.
        whole_file: ``head`` is the whole file (it was shorter than asked for).

    Returns:
        ``(type, record JSON bytes)`` of a sound first line that is
        ``session_started``; else the reason the journal would not open
        (``"first record is ..."``, a torn single line, a failed check); ""
        when nothing can be said yet (empty, or no newline in ``head`` and
        more bytes follow).
    """
    first, newline, _ = head.partition(b"\n")
    if not newline:
        if head and whole_file:
            return "no session_started record: last line has no newline (torn write)"
        return ""
    checked = _check_line(first)
    if isinstance(checked, str):
        return checked
    tag = _tag(checked.record_bytes)
    if tag != "session_started":
        return f"first record is {tag!r}, not 'session_started'"
    return tag, checked.record_bytes


def decode_record(record_bytes: bytes) -> JournalRecord | None:
    """A sound record's JSON bytes (from a read-only scan) as its schema type,
    or None when they do not hold one (a listing shows what it can)."""
    try:
        return _decode(record_bytes)
    except ValueError:
        return None


def _tag(record_bytes: bytes) -> str | None:
    """The ``type`` of a sound record's bytes, None when it has none."""
    match = _HEAD_RE.match(record_bytes)
    if match is not None:
        return match[1].decode()
    try:
        return _HEAD_DECODER.decode(record_bytes).type
    except (msgspec.DecodeError, RecursionError):
        return None


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
    return raw, _decode(raw)


def _open_private(path: Path, flags: int, *, create: bool = False) -> int:
    """:func:`~mind.shell.private_files.open_file` with journal errors.

    Raises:
        JournalError: missing (and not ``create``), cannot be opened, or not
            a private regular file (a symlink, FIFO, directory, another owner,
            group/world-writable; never read or written), line 0.
        FileExistsError: ``O_EXCL`` in ``flags`` and it exists.
    """
    try:
        return private_files.open_file(path, flags, create=create)
    except FileNotFoundError:
        raise JournalError(path, 0, "journal does not exist") from None
    except FileExistsError:
        raise
    except PrivateStateError as exc:
        raise JournalError(path, 0, f"refused: {exc.detail}") from None
    except OSError as exc:
        raise JournalError(path, 0, f"cannot open journal: {exc.strerror}") from None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _open_reader(fd: int) -> io.BufferedReader:
    return io.BufferedReader(io.FileIO(fd, "rb", closefd=False), buffer_size=_READ_BUFFER_BYTES)


def read_records(path: Path) -> tuple[list[JournalRecord], JournalOpenReport]:
    """Read and verify a journal without opening it for writing.

    Args:
        path: the ``journal.jsonl`` file.

    Returns:
        The verified records in order and the open report (torn tail).

    Raises:
        JournalError: the file does not exist or cannot be read (line 0).
        JournalCorruptError: damage other than a torn tail (path, 1-based line).
    """
    fd = _open_private(path, os.O_RDONLY)
    try:
        with _open_reader(fd) as reader:
            scan = _scan(reader, path)
    except OSError as exc:
        raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
    finally:
        os.close(fd)
    _require_start(scan, path)
    return scan.records, scan.report()


def checkpoint_due_at_open(scan: _Scan) -> bool:
    """Whether an open should write a checkpoint at once: it read more than
    a checkpoint's tail (:data:`~mind.context.retention.CHECKPOINT_TAIL_BYTES`)
    of journal (a session from before checkpoints, or one that crashed
    before its next one)."""
    return scan.size - scan.start >= CHECKPOINT_TAIL_BYTES


def _open_scan(fd: int, path: Path, session_id: str | None) -> tuple[_Scan, int]:
    """Read the journal open on ``fd`` through its checkpoint when one
    proves itself, else whole, keeping what :class:`Retention` retains.

    Returns:
        The scan (``checkpoint`` says how it went) and the journal bytes the
        checkpoint read covers (0 without one).

    Raises:
        JournalCorruptError: damage other than a torn tail.
        OSError: reading failed.
    """
    size = os.fstat(fd).st_size
    refused = ""
    found: checkpoint.Checkpoint | None = None
    try:
        found = checkpoint.load(path, fd, size, session_id)
    except CheckpointRefused as exc:
        refused = f"{exc.path.name}: {exc.reason}"
    retention = Retention(None if found is None else found.folded)
    with _open_reader(fd) as reader:
        if found is None:
            scan = _scan(reader, path, keep=retention.add)
            if not refused and (retention.compacted or checkpoint_due_at_open(scan)):
                refused = "no checkpoint"  # one is written after every compaction
            scan.checkpoint = refused
            if refused:
                _log.warning("%s: checkpoint not used, read the whole journal: %s", path, refused)
        else:
            retention.extend(found.records)
            reader.seek(found.offset)
            start = (found.offset, found.next_seq, found.lines)
            scan = _scan(reader, path, keep=retention.add, start=start)
            scan.checkpoint = "used"
            scan.first_line = found.first_line
            scan.first_tag = "session_started"  # the checkpoint proved it
            if scan.count == found.next_seq:
                scan.last_proof = found.last_line  # nothing after it: its proof stands
    scan.records = retention.records()
    scan.folded = retention.folded
    return scan, (0 if found is None else found.offset)


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
        scan: _Scan,
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
            fd = _open_private(path, flags)
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
                fd = _open_private(path, flags | os.O_EXCL, create=True)
                created = True
            except FileExistsError:
                fd = _open_private(path, flags)
        try:
            if created:
                os.fsync(fd)
                private_files.fsync_dir(path.parent)
            scan, covered = _open_scan(fd, path, session_id)
            if not created:
                _require_start(scan, path)
                _require_session(scan, path, session_id)
        except OSError as exc:
            os.close(fd)
            raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
        except BaseException:
            os.close(fd)
            raise
        clock = clock_ms or _now_ms
        journal = cls(path, fd, scan, clock, session_id, checkpoints=checkpoints, covered=covered)
        if checkpoints and (scan.checkpoint not in ("", "used") or checkpoint_due_at_open(scan)):
            journal.write_checkpoint()  # reported once: the next open reads this one
        return journal

    def write_checkpoint(self) -> bool:
        """Write a checkpoint of the retained records up to the journal's end
        (fsyncing the journal first: a checkpoint never covers bytes that are
        not durable). Not after a torn tail no append has closed yet.

        A failure to write it is logged and leaves the old checkpoint: it is
        an optimisation, never a reason to fail a turn.

        Returns:
            Whether a checkpoint was written.

        Raises:
            JournalWriteError: the journal's fsync failed (see :meth:`sync`).
        """
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
            records=kept,
            folded=retention.folded,
        )
        # What a compaction superseded leaves memory now, not at the next
        # open; a new list, so a reader holding the old one is not disturbed.
        self.records, self.folded = kept, retention.folded
        try:
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
        data = memoryview(prefix + line + b"\n")
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
        """Close the file descriptor. Idempotent; does not fsync."""
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
