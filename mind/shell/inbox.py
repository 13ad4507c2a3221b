"""The steering sidecar ``sessions/<id>/inbox.json`` (docs/design/inbox.md).

Input accepted but not yet acknowledged lives here, so a crash between
"accepted" and "consumed by a completed turn" loses nothing. The file is one
JSON document, :class:`~mind.generated.inbox.InboxFile` (``version: 1``, entries
in arrival order, unique message ids; schema ``specs/schemas/inbox.schema.json``).

Rules:

- Durable before accepted: :meth:`Inbox.add` returns only once the new file is
  in place — written to ``.inbox.json.tmp`` (mode 0600), fsynced, renamed over
  ``inbox.json``, and the directory fsynced. A crash at any point leaves either
  the old file or the new one, never a mix.
- Hard cap: the serialised file never exceeds :data:`MAX_INBOX_BYTES` (8 MiB);
  an input that would cross it is refused with
  :class:`~mind.errors.InputRefused` (``inbox_full``) and nothing is written.
- Fail closed: a file that is not valid JSON, does not match the schema, has
  another ``version``, repeats a message id, is not a regular file or is over
  8 MiB makes :meth:`Inbox.open` raise :class:`~mind.errors.InboxCorruptError`
  naming the path; the file is not touched (byte-identical) for inspection.
- Filtered on open: entries whose id the journal acknowledges
  (``turn_completed.acknowledged``) are dropped in memory — the file is
  rewritten without them only on the next write — and the rest are marked
  ``recovered`` (docs/design/inbox.md §5). The acknowledgement is written to the
  journal *before* the ids are removed here (docs/design/inbox.md §4), so a crash in
  between is repaired by this filter.
- Idempotent: adding an id already held, acknowledged at open or removed since
  is a success that writes nothing (callers reuse ids on retry).

Concurrency: one process owns a session (the lease), and calls come from its
one asyncio thread, synchronously (no ``await`` inside), so there is no lock
here; the writes are deliberately blocking (small, local, ordered).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Final, final

import msgspec

from mind.errors import (
    InboxCorruptError,
    InputRefused,
    PrivateStateError,
    StorageError,
    os_error_detail,
)
from mind.generated.inbox import InboxEntry, InboxFile, InboxKind
from mind.shell import private_files

__all__ = ["INBOX_VERSION", "MAX_INBOX_BYTES", "Inbox", "InboxEntry"]

MAX_INBOX_BYTES: Final = 8 * 1024 * 1024
"""Hard cap on the serialised ``inbox.json`` in bytes (docs/design/inbox.md §3)."""

INBOX_VERSION: Final = 1
"""The only file format version this code reads and writes."""

_ENCODER: Final = msgspec.json.Encoder()
_DECODER: Final[msgspec.json.Decoder[InboxFile]] = msgspec.json.Decoder(InboxFile)


class _Header(msgspec.Struct):
    """Just the version, read leniently so a newer format gets a clear message."""

    version: object = None


_HEADER_DECODER: Final[msgspec.json.Decoder[_Header]] = msgspec.json.Decoder(_Header)


def _read_capped(path: Path, max_bytes: int) -> bytes | None:
    """The file's bytes, ``None`` if it does not exist; never follows a symlink
    nor blocks (:func:`~mind.shell.private_files.read_file`).

    Raises:
        InboxCorruptError: a symlink, not a private regular file (FIFO,
            directory, another owner, group/world-writable), or over ``max_bytes``.
        OSError: the file cannot be read (e.g. permissions).
    """
    try:
        data = private_files.read_file(path, max_bytes)
    except PrivateStateError as error:
        raise InboxCorruptError(path, error.detail) from error
    if data is not None and len(data) > max_bytes:
        raise InboxCorruptError(path, f"is over the {max_bytes}-byte cap")
    return data


def _decode(path: Path, data: bytes) -> list[InboxEntry]:
    """Entries of a file's bytes, checked against the schema and for unique ids.

    Raises:
        InboxCorruptError: bad JSON, unknown version, schema mismatch or a
            duplicate id.
    """
    try:
        header = _HEADER_DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as error:
        raise InboxCorruptError(path, f"not a JSON object: {error}") from error
    if type(header.version) is not int or header.version != INBOX_VERSION:
        raise InboxCorruptError(
            path, f"unsupported version {header.version!r} (this mind reads {INBOX_VERSION})"
        )
    try:
        document = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError) as error:
        raise InboxCorruptError(path, f"does not match the inbox schema: {error}") from error
    seen: set[str] = set()
    for entry in document.entries:
        if entry.message_id in seen:
            raise InboxCorruptError(path, f"duplicate message id {entry.message_id!r}")
        seen.add(entry.message_id)
    return list(document.entries)


def encode_inbox(entries: Iterable[InboxEntry]) -> bytes:
    """The exact bytes :class:`Inbox` writes for ``entries`` (version 1, in order)."""
    return _ENCODER.encode(InboxFile(version=INBOX_VERSION, entries=list(entries)))


def _too_large(size: int, max_bytes: int) -> str:
    return (
        f"the input is too large: {size} bytes stored, over the inbox cap of {max_bytes} "
        "bytes; shorten it, or save it to a file and refer to that"
    )


def check_fits_alone(text: str, *, max_bytes: int = MAX_INBOX_BYTES) -> None:
    """Refuse, before any session exists, an input that no inbox could hold.

    The size is that of a one-entry ``inbox.json`` with a message id and
    timestamp of the usual length (the same encoding :meth:`Inbox.add` checks),
    so ``mind exec`` can refuse a huge prompt without leaving an empty session.

    Raises:
        InputRefused: ``inbox_full`` — the input alone exceeds ``max_bytes``
            (the message says so; ``message_id`` is ``"prompt"``).
    """
    entry = InboxEntry(
        message_id="msg_" + "0" * 16,
        text=text,
        kind=InboxKind.prompt,
        accepted_at_ms=time.time_ns() // 1_000_000,
        recovered=False,
    )
    size = len(encode_inbox([entry]))
    if size > max_bytes:
        raise InputRefused("inbox_full", _too_large(size, max_bytes), message_id="prompt")


@final
class Inbox:
    """One session's ``inbox.json``: accepted, unacknowledged inputs in arrival order.

    Create with :meth:`open`. Not thread-safe; one owner process (the lease).
    """

    def __init__(
        self,
        path: Path,
        entries: list[InboxEntry],
        *,
        settled: set[str],
        stale: bool,
        max_bytes: int,
    ) -> None:
        """Use :meth:`open`."""
        self._path = path
        self._entries = entries
        self._ids = {e.message_id for e in entries}
        self._settled = settled
        self._stale = stale
        self._max_bytes = max_bytes

    @classmethod
    def open(
        cls, path: Path, *, acknowledged: Collection[str], max_bytes: int = MAX_INBOX_BYTES
    ) -> Inbox:
        """Read ``path`` (missing = empty), drop acknowledged entries, mark the rest recovered.

        Nothing is written, even when entries are dropped: the file is
        rewritten without them on the next :meth:`add` or :meth:`remove`.

        Args:
            path: ``sessions/<id>/inbox.json``; its directory must exist before
                the first write.
            acknowledged: message ids acknowledged by the journal's terminal
                records (and abort receipts); they are filtered out and stay
                known, so adding one again writes nothing.
            max_bytes: the file cap (8 MiB; smaller only in tests).

        Returns:
            The inbox; every entry has ``recovered=True``.

        Raises:
            InboxCorruptError: the file is damaged (not JSON, another
                ``version``, schema mismatch, duplicate ids), not a regular
                file, or over ``max_bytes``; the file is left untouched.
            OSError: the file exists but cannot be read.
        """
        data = _read_capped(path, max_bytes)
        settled = set(acknowledged)
        if data is None:
            return cls(path, [], settled=settled, stale=False, max_bytes=max_bytes)
        found = _decode(path, data)
        kept = [
            msgspec.structs.replace(e, recovered=True) for e in found if e.message_id not in settled
        ]
        return cls(path, kept, settled=settled, stale=len(kept) != len(found), max_bytes=max_bytes)

    @property
    def path(self) -> Path:
        """The inbox file."""
        return self._path

    @property
    def tmp_path(self) -> Path:
        """The temporary file each write goes through (``.inbox.json.tmp`` beside it)."""
        return self._path.with_name(f".{self._path.name}.tmp")

    @property
    def max_bytes(self) -> int:
        """The cap on the serialised file, in bytes."""
        return self._max_bytes

    @property
    def entries(self) -> list[InboxEntry]:
        """Held entries in arrival order (a copy)."""
        return list(self._entries)

    def __contains__(self, message_id: object) -> bool:
        return message_id in self._ids

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, entry: InboxEntry) -> bool:
        """Make ``entry`` durable, appended after the held entries.

        Args:
            entry: the input (``recovered`` should be ``False``).

        Returns:
            ``True`` once the new file is durable; ``False`` (nothing
            written) when the id is held, was acknowledged or was removed.

        Raises:
            InputRefused: ``inbox_full`` — the serialised file would exceed
                :attr:`max_bytes`; nothing written, the caller keeps the text.
            StorageError: the write, fsync or rename failed (e.g. disk full); the
                input is not accepted and the inbox is unchanged in memory
                (the old file stays in place unless the rename itself
                happened and only the directory fsync failed).
        """
        if entry.message_id in self._ids or entry.message_id in self._settled:
            return False
        entries = [*self._entries, entry]
        data = encode_inbox(entries)
        if len(data) > self._max_bytes:
            alone = len(encode_inbox([entry]))
            if not self._entries or alone > self._max_bytes:
                # Waiting would not help: the input is too large even in an empty inbox.
                detail = _too_large(alone, self._max_bytes)
            else:
                detail = (
                    f"the inbox would be {len(data)} bytes (cap {self._max_bytes}); "
                    f"wait until the {len(self._entries)} input(s) before it are taken by a turn"
                )
            raise InputRefused("inbox_full", detail, message_id=entry.message_id)
        self._write(data)
        self._entries = entries
        self._ids.add(entry.message_id)
        self._stale = False
        return True

    def remove(self, ids: Collection[str]) -> None:
        """Rewrite the file atomically without ``ids`` (after the journal acknowledged them).

        The removed ids stay known: adding one again writes nothing. No write
        when none is held and the file holds no entries filtered at open.

        Raises:
            StorageError: the write failed (path, errno); the inbox is unchanged in memory.
        """
        drop = set(ids)
        kept = [e for e in self._entries if e.message_id not in drop]
        if len(kept) != len(self._entries) or self._stale:
            self._write(encode_inbox(kept))
            self._entries = kept
            self._ids -= drop
            self._stale = False
        self._settled |= drop

    def _write(self, data: bytes) -> None:
        """tmp (0600) + write + fsync + rename + fsync(dir); the tmp is removed on failure.

        Raises:
            StorageError: a step failed (path and errno); the old file is intact.
        """
        try:
            self._replace(data)
        except OSError as exc:
            raise StorageError(
                self._path, exc.errno, os_error_detail("cannot write", exc)
            ) from None

    def _replace(self, data: bytes) -> None:
        tmp = self.tmp_path
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # a leftover of a crash; never written through
        private_files.write_atomic(self._path, data, tmp=tmp)
