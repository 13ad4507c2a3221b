"""Reading a session journal: the open rules every reader applies (docs/design/journal.md).

The line format and the rules are described in :mod:`mind.shell.journal`
(the one writer); this module holds the reading side of them, shared by the
strict open (:meth:`mind.shell.journal.Journal.open`, through
:mod:`mind.shell.journal_open`), :func:`read_records` and the read-only scans
the session index uses (:func:`check_journal`, :func:`check_piece`,
:func:`head_record`, :func:`decode_record`).

Size: one module (over 500 lines) because every reader must apply the same
rules — per-line CRC, vouched torn spans, the torn tail being last, ``seq``
order, the first record — in one scan; splitting the scan from its checks
would let two readers disagree about the same bytes.
"""

from __future__ import annotations

import io
import os
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import IO, Final

import msgspec

from mind.context.retention import Folded
from mind.errors import JournalCorruptError, JournalError, JournalReplacedError, PrivateStateError
from mind.generated.journal import JournalRecord, SessionStarted
from mind.shell import checkpoint, private_files

__all__ = [
    "MAX_LINE_BYTES",
    "JournalOpenReport",
    "RecordSink",
    "Scan",
    "check_journal",
    "check_piece",
    "decode",
    "decode_record",
    "head_record",
    "line_damage",
    "open_private",
    "open_reader",
    "read_records",
    "require_session",
    "require_start",
    "scan_journal",
]

MAX_LINE_BYTES: Final = 16 * 1024 * 1024
"""Longest line (without its newline) written or accepted, in bytes."""

_CRC_KEY: Final = b',"crc32":"'
_CRC_SUFFIX_LEN: Final = len(_CRC_KEY) + 8 + 2  # ,"crc32":"HHHHHHHH"}
# Unambiguous: no record type has a top-level ``torn`` key, and a nested
# object always ends in ``}}`` before the removed closing brace.
_TORN_RE: Final = re.compile(rb',"torn":\{"bytes":(0|[1-9][0-9]{0,18}),"crc32":"([0-9a-f]{8})"\}\Z')
_HEX8_RE: Final = re.compile(rb"[0-9a-f]{8}\Z")
_READ_BUFFER_BYTES: Final = 1 << 20
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


class Scan:
    """Result of reading a journal file (internal)."""

    __slots__ = (
        "all_lines",
        "checkpoint",
        "count",
        "crc",
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
        self.crc = 0  # running CRC-32 of the journal's bytes [0, size)
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


def decode(record_bytes: bytes) -> JournalRecord:
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


def _read_line(
    stream: IO[bytes], crc_seed: int, running: int
) -> tuple[bytes | None, int, int | None, int, bool] | None:
    """Read one line, never holding more than ``MAX_LINE_BYTES + 2`` bytes.

    Args:
        stream: the journal, positioned at the start of a line.
        crc_seed: CRC-32 to continue (of the damaged bytes before this line).
        running: the journal's running CRC-32 up to this line.

    Returns:
        ``None`` at end of file, else ``(content, length, crc, running,
        terminated)``: the line without its newline (``None`` when too long
        to be a journal line), its length in bytes including the newline, the
        CRC-32 of those bytes continued from ``crc_seed`` (only for a line too
        long to keep, else None: the caller computes it for a damaged line,
        the one kind that needs it), the running CRC-32 continued over them,
        and whether it ended with ``\\n``.
    """
    chunk = stream.readline(MAX_LINE_BYTES + 2)
    if not chunk:
        return None
    length = len(chunk)
    running = zlib.crc32(chunk, running)
    if chunk.endswith(b"\n"):
        return chunk[:-1], length, None, running, True
    if length <= MAX_LINE_BYTES + 1:
        return chunk, length, None, running, False
    # Too long to be a journal line: consume it without keeping it.
    crc = zlib.crc32(chunk, crc_seed)
    while chunk := stream.readline(_READ_BUFFER_BYTES):
        length += len(chunk)
        crc = zlib.crc32(chunk, crc)
        running = zlib.crc32(chunk, running)
        if chunk.endswith(b"\n"):
            return None, length, crc, running, True
    return None, length, crc, running, False


def scan_journal(
    stream: IO[bytes],
    path: Path,
    on_record: RecordSink | None = None,
    *,
    keep: Callable[[JournalRecord], None] | None = None,
    start: tuple[int, int, int] = (0, 0, 0),
    crc: int = 0,
) -> Scan:
    """Read and verify a journal (the rules: the docstring of :mod:`mind.shell.journal`).

    With ``on_record`` the records are not decoded with the schema (only
    their ``type`` and ``seq``) nor kept: each sound record's type and JSON
    bytes are passed to it instead (:func:`check_journal`). Otherwise each
    decoded record goes to ``keep`` (default: appended to ``records``), so a
    caller decides what stays in memory.

    ``start`` is ``(byte offset, seq, lines before)`` of a verified line
    boundary to begin at (a checkpoint's): ``stream`` is positioned there;
    the bytes before it are not read; ``crc`` is the journal's running
    CRC-32 of them (a checkpoint's), continued over what is read.

    Raises:
        JournalCorruptError: damage other than a torn tail, with the 1-based
            line of the first damaged line.
        OSError: reading failed.
    """
    scan = Scan()
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
    running = crc
    while (got := _read_line(stream, span_crc, running)) is not None:
        content, length, line_crc, running, terminated = got
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
            if line_crc is None:  # the line is in hand: ``content`` (+ its newline)
                assert content is not None
                line_crc = zlib.crc32(content + b"\n" if terminated else content, span_crc)
            span_crc = line_crc
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
                record = decode(checked.record_bytes)
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
    scan.crc = running
    scan.all_lines = line_no
    scan.tail_bytes = offset - span_start
    scan.tail_crc = span_crc
    scan.tail_line = span_line
    scan.tail_reason = span_reason
    scan.ends_with_newline = terminated
    return scan


def require_start(scan: Scan, path: Path) -> None:
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


def require_session(scan: Scan, path: Path, session_id: str | None) -> None:
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
    fd = open_private(path, os.O_RDONLY)
    try:
        with open_reader(fd) as reader:
            scan = scan_journal(reader, path, on_record)
    except OSError as exc:
        raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
    finally:
        os.close(fd)
    require_start(scan, path)
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
        return decode(record_bytes)
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


def open_private(path: Path, flags: int, *, create: bool = False) -> int:
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


def open_reader(fd: int) -> io.BufferedReader:
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
    fd = open_private(path, os.O_RDONLY)
    try:
        with open_reader(fd) as reader:
            scan = scan_journal(reader, path)
    except OSError as exc:
        raise JournalError(path, 0, f"cannot read journal: {exc.strerror}") from None
    finally:
        os.close(fd)
    require_start(scan, path)
    return scan.records, scan.report()
