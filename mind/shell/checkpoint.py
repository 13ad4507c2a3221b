"""``sessions/<id>/checkpoint.json``: the retained records of a journal prefix.

Design: docs/design/checkpoints.md.

A checkpoint lets a startup read only the journal's tail: it holds the
records :mod:`mind.context.retention` keeps from the journal's first
``next_seq`` records, the byte offset where they end, and what proves the
journal still holds those bytes there — the length and SHA-256 of its first
line (the same journal, not one begun again) and of the last covered line
(read back with two ``pread`` calls, never the whole prefix), and the
journal's running CRC-32 at its offset, against which the prefix is verified
in the background after the open (:mod:`mind.shell.journal_open`). It is an
optimisation only: :func:`load` refuses anything it cannot prove
(:class:`~mind.errors.CheckpointRefused`), and the caller then reads the whole
journal (correct, slower).

Format: the header (``specs/schemas/checkpoint.schema.json``) on the first
line, the body — a JSON array of journal records — on the second. Written
whole with :func:`mind.shell.private_files.write_atomic` (tmp, fsync, rename,
directory fsync), so a crash leaves the old checkpoint or the new one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from mind.context.retention import Folded
from mind.errors import CheckpointRefused, PrivateStateError
from mind.generated.checkpoint import CheckpointHeader
from mind.generated.journal import JournalRecord, SessionStarted
from mind.shell import faults, private_files

__all__ = ["CHECKPOINT_NAME", "MAX_CHECKPOINT_BYTES", "Checkpoint", "LineProof", "load", "write"]

CHECKPOINT_NAME: Final = "checkpoint.json"
"""The checkpoint's file name, beside ``journal.jsonl``."""

MAX_CHECKPOINT_BYTES: Final = 512 * 1024 * 1024
"""A larger checkpoint file is refused (the retained records follow the
model context, far below this)."""

_HEADER_MAX: Final = 4096
_HEADER_DECODER: Final = msgspec.json.Decoder(CheckpointHeader)
_ENCODER: Final = msgspec.json.Encoder()


class _Body(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The body line: the retained records, then what the dropped ones left
    (:class:`mind.context.retention.Folded`)."""

    records: list[JournalRecord]
    settled: list[str]
    closed_turns: int


_BODY_DECODER: Final = msgspec.json.Decoder(_Body)


class LineProof(msgspec.Struct, frozen=True):
    """One journal line a checkpoint names: its length in bytes (newline
    included) and its SHA-256 (hex)."""

    length: int
    sha256: str

    @classmethod
    def of(cls, line: bytes) -> LineProof:
        """The proof of ``line`` (its bytes with the newline)."""
        return cls(len(line), hashlib.sha256(line).hexdigest())


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """A checkpoint that :func:`load` proved against the journal.

    Attributes:
        offset: bytes of the journal covered (a line boundary).
        next_seq: seq of the first record after ``offset``.
        lines: journal lines before ``offset`` (torn ones included).
        first_line: proof of the journal's first line.
        last_line: proof of the line ending at ``offset``.
        crc32: the journal's running CRC-32 (``zlib.crc32`` chained from 0)
            of its bytes ``[0, offset)``.
        records: the retained records of the covered prefix, in seq order.
        folded: what the prefix's dropped records still say.
    """

    offset: int
    next_seq: int
    lines: int
    first_line: LineProof
    last_line: LineProof
    crc32: int
    records: list[JournalRecord]
    folded: Folded


def path_for(journal_path: Path) -> Path:
    """The checkpoint file of the journal at ``journal_path``."""
    return journal_path.with_name(CHECKPOINT_NAME)


def write(journal_path: Path, session_id: str, checkpoint: Checkpoint) -> None:
    """Replace the journal's checkpoint with ``checkpoint``, atomically and
    durably (the journal's bytes up to ``checkpoint.offset`` must already be
    fsynced). Stale tmp files of an interrupted earlier write are removed.

    The crash boundary ``checkpoint_written`` is reached after the new file
    is written and fsynced, before it replaces the old one.

    Raises:
        OSError: the write, fsync or rename failed (the old file stands).
        PrivateStateError: the session directory is not private.
    """
    folded = checkpoint.folded
    body = _ENCODER.encode(_Body(checkpoint.records, sorted(folded.settled), folded.closed_turns))
    header = CheckpointHeader(
        version=1,
        session_id=session_id,
        journal_offset=checkpoint.offset,
        next_seq=checkpoint.next_seq,
        journal_lines=checkpoint.lines,
        first_line_bytes=checkpoint.first_line.length,
        first_line_sha256=checkpoint.first_line.sha256,
        last_line_bytes=checkpoint.last_line.length,
        last_line_sha256=checkpoint.last_line.sha256,
        journal_crc32=checkpoint.crc32,
        records=len(checkpoint.records),
        body_bytes=len(body),
        body_sha256=hashlib.sha256(body).hexdigest(),
    )
    target = path_for(journal_path)
    for stale in target.parent.glob(f".{CHECKPOINT_NAME}.*.tmp"):
        with contextlib.suppress(OSError):
            stale.unlink()
    private_files.write_atomic(
        target,
        _ENCODER.encode(header) + b"\n" + body + b"\n",
        before_replace=lambda: faults.boundary("checkpoint_written"),
    )


def load(journal_path: Path, fd: int, size: int, session_id: str | None) -> Checkpoint | None:
    """The journal's checkpoint, proved against the open journal.

    Args:
        journal_path: the journal (its checkpoint is beside it).
        fd: the journal, open for reading (read with ``pread`` only).
        size: the journal's size in bytes.
        session_id: the session the journal must belong to (None: the
            checkpoint's own, checked against its ``session_started``).

    Returns:
        The checkpoint, or None when there is none.

    Raises:
        CheckpointRefused: it cannot be used (unreadable, not private,
            truncated, another session's, without the running CRC, its offset
            past the journal's end, the journal's bytes at its offset or its
            first line differ); the
            reason says which. The caller reads the whole journal.
    """
    path = path_for(journal_path)
    try:
        data = private_files.read_file(path, MAX_CHECKPOINT_BYTES)
    except PrivateStateError as exc:
        # No fix for the person: the opener that reports it writes a new one.
        why = exc.detail.removesuffix(f" (fix: {exc.fix})")
        raise CheckpointRefused(path, f"not a private file: {why}") from None
    except OSError as exc:
        raise CheckpointRefused(path, f"cannot be read: {exc.strerror}") from None
    if data is None:
        return None
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise CheckpointRefused(path, f"larger than {MAX_CHECKPOINT_BYTES} bytes")
    head, newline, _ = data[:_HEADER_MAX].partition(b"\n")
    if not newline:
        raise CheckpointRefused(path, "truncated: no header line")
    try:
        header = _HEADER_DECODER.decode(head)
    except msgspec.DecodeError as exc:
        raise CheckpointRefused(path, f"bad header: {exc}") from None
    if session_id is not None and header.session_id != session_id:
        raise CheckpointRefused(path, f"belongs to session {header.session_id!r}")
    body = data[len(head) + 1 :]
    if len(body) != header.body_bytes + 1 or not body.endswith(b"\n"):
        raise CheckpointRefused(path, "truncated: the body is not the length its header says")
    body = body[:-1]
    if hashlib.sha256(body).hexdigest() != header.body_sha256:
        raise CheckpointRefused(path, "the body does not match its hash")
    running = header.journal_crc32
    if not isinstance(running, int):
        # Without it the covered prefix could never be verified (the blind
        # spot of two line proofs): one full read writes a checkpoint with it.
        raise CheckpointRefused(path, "written before checkpoints kept the journal's running CRC")
    if header.journal_offset > size:
        raise CheckpointRefused(
            path, f"covers {header.journal_offset} bytes; the journal has {size} (older journal)"
        )
    first = LineProof(header.first_line_bytes, header.first_line_sha256)
    last = LineProof(header.last_line_bytes, header.last_line_sha256)
    if not _proves(fd, first, first.length) or not _proves(fd, last, header.journal_offset):
        raise CheckpointRefused(path, "the journal's bytes differ from the ones it covers")
    try:
        decoded = _BODY_DECODER.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise CheckpointRefused(path, f"bad body: {exc}") from None
    records = decoded.records
    _check_records(path, records, header)
    return Checkpoint(
        offset=header.journal_offset,
        next_seq=header.next_seq,
        lines=header.journal_lines,
        first_line=first,
        last_line=last,
        crc32=running,
        records=records,
        folded=Folded(frozenset(decoded.settled), decoded.closed_turns),
    )


def _proves(fd: int, proof: LineProof, end: int) -> bool:
    """Whether the journal's bytes ``[end - proof.length, end)`` are the line
    ``proof`` names (a newline-ended line starting at a line boundary)."""
    start = end - proof.length
    if start < 0:
        return False
    try:
        got = os.pread(fd, proof.length, start)
        before = os.pread(fd, 1, start - 1) if start else b"\n"
    except OSError:
        return False
    return before == b"\n" and got.endswith(b"\n") and LineProof.of(got) == proof


def _check_records(path: Path, records: Sequence[JournalRecord], header: CheckpointHeader) -> None:
    """The body is what a writer of this format writes: the count its
    header says, the session's ``session_started`` first, seqs increasing
    below ``next_seq``."""
    if len(records) != header.records:
        raise CheckpointRefused(path, f"holds {len(records)} records, not {header.records}")
    first = records[0] if records else None
    if not isinstance(first, SessionStarted) or first.seq != 0:
        raise CheckpointRefused(path, "its first record is not session_started")
    if first.session_id != header.session_id:
        raise CheckpointRefused(path, "its session_started names another session")
    previous = -1
    for record in records:
        if not previous < record.seq < header.next_seq:
            raise CheckpointRefused(path, f"record seq {record.seq} out of order")
        previous = record.seq
