"""``session-mounts.json``: reading it strictly or leniently, replacing it atomically.

The file (schema ``specs/schemas/session_mounts.schema.json``) is
``{"version": 1, "owners": [{"pid", "startedAt", "sessionIds",
"startIdentity"}]}``: every process's published mount set. Rules kept here
(docs/design/mounts.md; :mod:`mind.shell.mounts` lists them all):

- atomic replace: ``session-mounts.json.<pid>.<ms>.<seq>.tmp`` (0600) +
  fsync + rename (:func:`replace_ledger`); readers never see half a file;
- strict read to grant: only a missing file is "empty"; anything unreadable,
  not JSON, of another version or shape is :class:`_Unavailable` and the file
  is left byte-identical (:func:`read_ledger_strict`);
- lenient read to display: damage reads as empty, never a write
  (:func:`read_ledger_lenient`).

All sizes are bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

import msgspec

from mind.errors import PrivateStateError
from mind.generated.session_mounts import MountOwner, SessionMountsFile
from mind.shell import private_files

__all__ = [
    "LEDGER_NAME",
    "MAX_LEDGER_BYTES",
    "_Unavailable",
    "read_ledger_lenient",
    "read_ledger_strict",
    "replace_ledger",
]

LEDGER_NAME: Final = "session-mounts.json"
"""The ledger's file name in the state root (docs/design/mounts.md §2)."""

MAX_LEDGER_BYTES: Final = 4 * 1024 * 1024
"""A larger ledger is refused as damaged (processes × sessions is small)."""

_ENCODER: Final = msgspec.json.Encoder()


class _Unavailable(Exception):
    """The ledger or its lock cannot be read or written; ``str()`` is the detail.

    Internal to :mod:`mind.shell.mounts`: a claim turns it into
    :class:`~mind.errors.MountRefused` ``unavailable``.
    """


def read_ledger_strict(path: Path) -> list[MountOwner]:
    """Read ``session-mounts.json`` to decide a claim (docs/design/mounts.md §4).

    Only a missing file is an empty ledger. Never writes.

    Returns:
        Every record in file order, dead pids included (the caller filters).

    Raises:
        _Unavailable: unreadable, not a regular file, over
            :data:`MAX_LEDGER_BYTES`, not JSON, another version or another shape.
    """
    try:
        data = private_files.read_file(path, MAX_LEDGER_BYTES)
    except PrivateStateError as exc:
        raise _Unavailable(str(exc)) from exc
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    if data is None:
        return []
    if len(data) > MAX_LEDGER_BYTES:
        raise _Unavailable(f"{path} is larger than {MAX_LEDGER_BYTES} bytes")
    return _decode(path, data).owners


def _decode(path: Path, data: bytes) -> SessionMountsFile:
    damaged = "delete it when no other mind is running"
    try:
        raw = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _Unavailable(f"{path} is damaged (not JSON: {exc}); {damaged}") from exc
    if not isinstance(raw, dict):
        raise _Unavailable(f"{path} is damaged (not a JSON object); {damaged}")
    if raw.get("version") != 1:
        raise _Unavailable(
            f"{path} has unknown version {raw.get('version')!r} (this mind reads 1); {damaged}"
        )
    try:
        return msgspec.convert(raw, SessionMountsFile)
    except msgspec.ValidationError as exc:
        raise _Unavailable(f"{path} is damaged ({exc}); {damaged}") from exc


def read_ledger_lenient(path: Path) -> list[MountOwner]:
    """Read ``session-mounts.json`` for display: any damage reads as empty
    (docs/design/mounts.md §4).

    Never writes and never raises for the file's content or absence.
    """
    try:
        return read_ledger_strict(path)
    except _Unavailable:
        return []


def replace_ledger(
    path: Path,
    owners: Sequence[MountOwner],
    *,
    tmp: Path,
    before_replace: Callable[[], None],
) -> None:
    """Write ``owners`` as the whole ledger: tmp (0600) + write + fsync + rename
    (:func:`mind.shell.private_files.write_atomic`).

    The tmp file is fsynced so a power loss cannot leave an empty or torn
    ledger (which would refuse every claim ``unavailable``). The directory
    is not fsynced: after a power loss every recorded pid is dead, so the
    old and the new file are equally right, and the lock is held shorter.

    Args:
        path: ``session-mounts.json``.
        owners: the records, in file order.
        tmp: the tmp file (named for its writer, so debris can be swept).
        before_replace: called after the fsync, right before the rename; may
            raise to abandon the write (the lock was lost).

    Raises:
        _Unavailable: the write, fsync or rename failed, or a non-private
            file is in the way.
    """
    data = _ENCODER.encode(SessionMountsFile(version=1, owners=list(owners)))
    try:
        private_files.write_atomic(
            path, data, tmp=tmp, sync_dir=False, before_replace=before_replace
        )
    except PrivateStateError as exc:
        raise _Unavailable(str(exc)) from exc
    except OSError as exc:
        raise _Unavailable(f"cannot write {path}: {exc.strerror}") from exc
