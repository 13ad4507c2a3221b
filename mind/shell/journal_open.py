"""Opening a journal through its checkpoint (docs/design/checkpoints.md §4, §5).

:func:`open_scan` reads the journal open on a descriptor through its
``checkpoint.json`` when that proves itself (then only the tail after it),
else whole, keeping what :class:`~mind.context.retention.Retention` retains.

The open proves the covered prefix by its first and last lines only; a
:class:`PrefixCheck` then verifies the rest in the background: the running
CRC-32 of the prefix's bytes against the one the checkpoint stored, and on a
mismatch the first damaged line (the reading rules of
:mod:`mind.shell.journal_read`), so resuming never waits for the prefix.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

from mind.context.retention import CHECKPOINT_TAIL_BYTES, Retention
from mind.errors import DAMAGED_JOURNAL_NEXT_STEP, CheckpointRefused, JournalCorruptError
from mind.shell import checkpoint, private_files
from mind.shell.journal_read import Scan, open_reader, scan_journal

__all__ = [
    "SYNC_VERIFY_BYTES",
    "VERIFY_CHUNK_BYTES",
    "VERIFY_THREAD_NAME",
    "PrefixCheck",
    "checked_in_background",
    "checkpoint_due_at_open",
    "open_scan",
    "prefix_crc32",
]

SYNC_VERIFY_BYTES = 32 << 20
"""A covered prefix up to this long (bytes) is verified in the open itself
(its CRC-32 costs ~40-85 ms on the shared machine); a longer one in the
background (:class:`PrefixCheck`), so resuming never waits for it. Not
``Final``: tests lower it to check small journals in the background."""

VERIFY_CHUNK_BYTES: Final = 4 << 20
"""Bytes a background check reads at a time (``zlib.crc32`` releases the GIL
on buffers this large, so the event loop keeps running)."""

VERIFY_THREAD_NAME: Final = "mind-journal-verify"

_log = logging.getLogger(__name__)


def checkpoint_due_at_open(scan: Scan) -> bool:
    """Whether an open should write a checkpoint at once: it read more than
    a checkpoint's tail (:data:`~mind.context.retention.CHECKPOINT_TAIL_BYTES`)
    of journal (a session from before checkpoints, or one that crashed
    before its next one)."""
    return scan.size - scan.start >= CHECKPOINT_TAIL_BYTES


def open_scan(
    fd: int, path: Path, session_id: str | None
) -> tuple[Scan, checkpoint.Checkpoint | None]:
    """Read the journal open on ``fd`` through its checkpoint when one
    proves itself, else whole, keeping what :class:`Retention` retains.
    The scan's running CRC-32 continues from the checkpoint's.

    A covered prefix of at most :data:`SYNC_VERIFY_BYTES` is verified here
    (its running CRC-32): when it differs the checkpoint is not used and
    the journal is read whole, so damage raises at its line.

    Returns:
        The scan (``checkpoint`` says how it went) and the checkpoint read
        (None without one): its prefix is still to be verified
        (:class:`PrefixCheck`) when it is longer than
        :data:`SYNC_VERIFY_BYTES` (:func:`checked_in_background`).

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
    if found is not None and found.offset <= SYNC_VERIFY_BYTES:
        crc = prefix_crc32(fd, found.offset)
        if crc != found.crc32:
            # Read whole instead: damage is refused at its line exactly as a
            # full read refuses it, and a sound journal is taken as it is.
            refused = (
                f"{checkpoint.CHECKPOINT_NAME}: the journal's first {found.offset} bytes "
                "are not the ones it covered"
            )
            found = None
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
            scan = scan_journal(reader, path, keep=retention.add, start=start, crc=found.crc32)
            scan.checkpoint = "used"
            scan.first_line = found.first_line
            scan.first_tag = "session_started"  # the checkpoint proved it
            if scan.count == found.next_seq:
                scan.last_proof = found.last_line  # nothing after it: its proof stands
    scan.records = retention.records()
    scan.folded = retention.folded
    return scan, found


def checked_in_background(found: checkpoint.Checkpoint) -> bool:
    """Whether the prefix ``found`` covers is left to a :class:`PrefixCheck`
    (longer than :data:`SYNC_VERIFY_BYTES`; a shorter one the open verified)."""
    return found.offset > SYNC_VERIFY_BYTES


class _Stopped(Exception):
    """The check was stopped (the journal is closing)."""


def prefix_crc32(fd: int, end: int, stop: threading.Event | None = None) -> int | None:
    """The running CRC-32 of the bytes ``[0, end)`` of the file open on
    ``fd``, read with ``pread`` in chunks of :data:`VERIFY_CHUNK_BYTES`
    (the descriptor's offset is not touched); None when the file is shorter.

    Raises:
        _Stopped: ``stop`` was set first.
        OSError: reading failed.
    """
    buffer = bytearray(min(VERIFY_CHUNK_BYTES, max(1, end)))
    view = memoryview(buffer)
    crc, pos = 0, 0
    while pos < end:
        if stop is not None and stop.is_set():
            raise _Stopped
        got = os.preadv(fd, [view[: end - pos]], pos)
        if got == 0:
            return None
        crc = zlib.crc32(view[:got], crc)
        pos += got
    return crc


class _Prefix(io.RawIOBase):
    """The journal's bytes ``[0, end)`` as a stream, read with ``pread``
    (the descriptor's offset is not touched) until the check is stopped."""

    def __init__(self, fd: int, end: int, stop: threading.Event) -> None:
        super().__init__()
        self._fd, self._end, self._stop, self._pos = fd, end, stop, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self._stop.is_set():
            raise _Stopped
        want = min(len(buffer), self._end - self._pos)
        got = os.preadv(self._fd, [buffer[:want]], self._pos) if want > 0 else 0
        self._pos += got
        return got


CheckState = Literal["running", "clean", "damaged", "stopped"]


class PrefixCheck:
    """Verifies, on a worker thread, the journal prefix a checkpoint covers
    (docs/design/checkpoints.md §5): reads ``[0, offset)`` in chunks of
    :data:`VERIFY_CHUNK_BYTES` with ``pread`` at the lowest CPU priority and
    compares their running CRC-32 with the checkpoint's. On a mismatch (or a
    read error: a check that cannot be made fails closed) it scans the
    prefix with the reading rules for the first damaged line, then, holding
    :attr:`lock`, sets :attr:`damage` and removes ``checkpoint.json`` so the
    next open reads the journal whole (and refuses it with path and line);
    the reason is logged once (a warning: stderr without other logging).

    Attributes:
        lock: held while :attr:`damage` is set and the checkpoint removed; a
            writer of checkpoints holds it to check :attr:`damage` and write.
        damage: why the prefix is not the one covered (``path:line: reason``
            when a line is damaged), None while it is not known to be.
        damaged_at: the same as an error: the journal's path, the first
            damaged line (0 when none is: a read error, or every line passes
            its own check) and why; None while :attr:`damage` is.
    """

    def __init__(
        self,
        path: Path,
        fd: int,
        offset: int,
        crc32: int,
        on_damage: Callable[[JournalCorruptError], None] | None = None,
    ) -> None:
        """Start checking ``offset`` bytes of the journal at ``path`` open on
        ``fd`` (duplicated: the check owns its descriptor) against ``crc32``;
        ``on_damage`` is called (on the check's thread, after the checkpoint
        is removed; it must not raise) with the damage it finds.

        Raises:
            OSError: the descriptor cannot be duplicated.
        """
        self.lock = threading.Lock()
        self.damage: str | None = None
        self.damaged_at: JournalCorruptError | None = None
        self._path, self._offset, self._want = path, offset, crc32
        self._on_damage = on_damage
        self._state: CheckState = "running"
        self._stop = threading.Event()
        self._fd = os.dup(fd)
        # A daemon: an interpreter exit without close() is not held up.
        self._thread = threading.Thread(target=self._run, name=VERIFY_THREAD_NAME, daemon=True)
        self._thread.start()

    @property
    def state(self) -> CheckState:
        """``running``; ``clean`` (the prefix is the one covered),
        ``damaged`` (:attr:`damage` says why) or ``stopped`` (closed first)."""
        return self._state

    def wait(self, timeout_s: float | None) -> bool:
        """Block up to ``timeout_s`` seconds (None: until it ends) for the
        check to end; whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def stop(self) -> None:
        """Stop the check and wait for its thread (at most one chunk's read)."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def _run(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # not on every platform
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            found = self._verify()
        except _Stopped:
            found = None
            self._state = "stopped"
        except OSError as exc:  # cannot be checked: fail closed
            found = JournalCorruptError(
                self._path, 0, f"its checkpoint's prefix could not be verified: {exc.strerror}"
            )
        finally:
            os.close(self._fd)
        if found is None:
            if self._state == "running":
                self._state = "clean"
            return
        self._invalidate(found)

    def _verify(self) -> JournalCorruptError | None:
        """None when the prefix has the checkpoint's running CRC, else why not.

        Raises:
            _Stopped: stopped first.
            OSError: reading failed.
        """
        crc = prefix_crc32(self._fd, self._offset, self._stop)
        if crc is None:
            return JournalCorruptError(
                self._path, 0, f"shorter than the {self._offset} bytes its checkpoint covered"
            )
        if crc == self._want:
            return None
        return self._locate(crc)

    def _locate(self, crc: int) -> JournalCorruptError:
        """The first damaged line of the prefix, by the reading rules."""
        with io.BufferedReader(_Prefix(self._fd, self._offset, self._stop), 1 << 20) as reader:
            try:
                scan = scan_journal(reader, self._path, lambda _tag, _bytes: None)
            except JournalCorruptError as exc:
                return exc
        if scan.tail_bytes:
            return JournalCorruptError(self._path, scan.tail_line, scan.tail_reason)
        return JournalCorruptError(
            self._path,
            0,
            f"its first {self._offset} bytes are not the ones its checkpoint "
            f"covered (running CRC-32 {crc:08x}, not {self._want:08x}), yet every line "
            "passes its own check (a line rewritten with a valid CRC)",
        )

    def _invalidate(self, found: JournalCorruptError) -> None:
        target = checkpoint.path_for(self._path)
        damage = str(found)
        with self.lock:
            self.damage, self.damaged_at = damage, found
            self._state = "damaged"
            try:
                target.unlink(missing_ok=True)
                private_files.fsync_dir(target.parent)
                gone = "removed its checkpoint; the next open reads it whole"
            except OSError as exc:  # the next open's check finds it again
                gone = f"its checkpoint could not be removed ({exc})"
        if self._on_damage is not None:
            self._on_damage(found)
        _log.warning(
            "journal damaged inside its checkpoint's prefix: %s; %s; the journal is left as "
            "it is and nothing more starts in this session: %s",
            damage,
            gone,
            DAMAGED_JOURNAL_NEXT_STEP,
        )
