"""Opening a journal through its checkpoint (docs/design/checkpoints.md §4).

:func:`open_scan` reads the journal open on a descriptor through its
``checkpoint.json`` when that proves itself (then only the tail after it),
else whole, keeping what :class:`~mind.context.retention.Retention` retains.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from mind.context.retention import CHECKPOINT_TAIL_BYTES, Retention
from mind.errors import CheckpointRefused
from mind.shell import checkpoint
from mind.shell.journal_read import Scan, open_reader, scan_journal

__all__ = ["checkpoint_due_at_open", "open_scan"]

_log = logging.getLogger(__name__)


def checkpoint_due_at_open(scan: Scan) -> bool:
    """Whether an open should write a checkpoint at once: it read more than
    a checkpoint's tail (:data:`~mind.context.retention.CHECKPOINT_TAIL_BYTES`)
    of journal (a session from before checkpoints, or one that crashed
    before its next one)."""
    return scan.size - scan.start >= CHECKPOINT_TAIL_BYTES


def open_scan(fd: int, path: Path, session_id: str | None) -> tuple[Scan, int]:
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
    with open_reader(fd) as reader:
        if found is None:
            scan = scan_journal(reader, path, keep=retention.add)
            if not refused and (retention.compacted or checkpoint_due_at_open(scan)):
                refused = "no checkpoint"  # one is written after every compaction
            scan.checkpoint = refused
            if refused:
                _log.warning("%s: checkpoint not used, read the whole journal: %s", path, refused)
        else:
            retention.extend(found.records)
            reader.seek(found.offset)
            start = (found.offset, found.next_seq, found.lines)
            scan = scan_journal(reader, path, keep=retention.add, start=start)
            scan.checkpoint = "used"
            scan.first_line = found.first_line
            scan.first_tag = "session_started"  # the checkpoint proved it
            if scan.count == found.next_seq:
                scan.last_proof = found.last_line  # nothing after it: its proof stands
    scan.records = retention.records()
    scan.folded = retention.folded
    return scan, (0 if found is None else found.offset)
