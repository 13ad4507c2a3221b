"""``session-mounts.lock``: the cross-process lock of the mount ledger (docs/design/mounts.md §2).

The lock is a file created exclusively (``O_CREAT | O_EXCL``, 0600) holding
its owner's token ``<pid>-<nonce>@<start identity>``
(:func:`~mind.machines.mount.format_token`). Rules kept here
(:mod:`mind.shell.mounts` lists them all):

- a writer that lost its lock does not write: before the ledger's tmp file
  is written and again right before its rename, the lock file must still be
  the very file this process created (same inode) holding its token
  (:meth:`LedgerLock.still_mine`); release deletes it only under the same
  check;
- only dead holders are reclaimed: a token naming a live process (pid and
  start identity, :func:`mind.shell.procs.same_process`) is never taken,
  however old; an unreadable token only after :data:`STALE_LOCK_S`.
  Reclaimers are serialised by an ``flock`` on the state directory (dropped
  by the kernel when its holder dies), and each re-reads the lock under it
  before moving it away (:func:`~mind.machines.mount.lock_verdict` decides).

Thread-safe to call from a worker thread (no signal handlers, no event-loop
objects); :class:`~mind.shell.mounts.MountLedger` serialises its own calls.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from mind.errors import PrivateStateError
from mind.machines.mount import Liveness, format_token, lock_verdict, parse_token
from mind.shell import private_files
from mind.shell.mounts.ledger_file import _Unavailable

__all__ = ["LOCK_NAME", "STALE_LOCK_S", "Held", "LedgerLock", "_Contended", "read_lock"]

LOCK_NAME: Final = "session-mounts.lock"
"""The lock's file name in the state root (docs/design/mounts.md §2)."""

STALE_LOCK_S: Final = 10.0
"""Create-to-write window of the lock, s: a lock whose token cannot be read is
reclaimed only once its file is older than this (docs/design/mounts.md §3)."""

_log = logging.getLogger("mind.mounts")


class _Contended(Exception):
    """The lock is held by a live peer, or was lost before the commit; ``str()``
    names the lock file and its holder. Internal: a claim backs off, then
    refuses :class:`~mind.errors.MountRefused` ``busy``."""


@dataclass(frozen=True, slots=True)
class Held:
    """A lock this process created: its token and the file's identity.

    Attributes:
        token: the bytes written into the lock file.
        dev: ``st_dev`` of the lock file created.
        ino: ``st_ino`` of the lock file created.
    """

    token: bytes
    dev: int
    ino: int


@final
class LedgerLock:
    """``<root>/session-mounts.lock`` as taken by one process.

    Args:
        root: the state root (created 0700 on :meth:`acquire` if missing).
        pid: the pid written in tokens.
        start_identity: this process's start identity ("" if unknown: its
            tokens then carry none).
        alive: liveness of a recorded ``(pid, start identity)``.
        clock_s: wall clock, s since the epoch (compared with the lock
            file's mtime for the stale-token window).
        stale_lock_s: the unreadable-token window, s (:data:`STALE_LOCK_S`).
    """

    def __init__(
        self,
        root: Path,
        *,
        pid: int,
        start_identity: str,
        alive: Liveness,
        clock_s: Callable[[], float],
        stale_lock_s: float = STALE_LOCK_S,
    ) -> None:
        self._root = root
        self.lock_path = root / LOCK_NAME
        self.pid = pid
        self.start_identity = start_identity
        self._alive = alive
        self._clock_s = clock_s
        self._stale_lock_s = stale_lock_s

    def acquire(self) -> Held:
        """Create ``session-mounts.lock`` exclusively with a fresh token.

        A lock found in place is reclaimed only from a dead holder (then the
        create is tried once more).

        Raises:
            _Contended: a live holder has it (or another reclaimer is at work).
            _Unavailable: the state directory cannot be created or written.
        """
        try:
            private_files.private_dir(self._root)
        except PrivateStateError as exc:
            raise _Unavailable(str(exc)) from exc
        except OSError as exc:
            raise _Unavailable(f"cannot create {self._root}: {exc.strerror}") from exc
        for _ in range(2):
            token = format_token(self.pid, secrets.token_hex(8), self.start_identity)
            try:
                fd = private_files.open_file(self.lock_path, os.O_WRONLY | os.O_EXCL, create=True)
            except FileExistsError:
                if self._reclaim():
                    continue
                raise _Contended(self.holder_text()) from None
            except OSError as exc:
                raise _Unavailable(f"cannot create {self.lock_path}: {exc.strerror}") from exc
            info: os.stat_result | None = None
            try:
                try:
                    info = os.fstat(fd)
                    os.write(fd, token)
                finally:
                    os.close(fd)
            except BaseException as exc:  # OSError, or Ctrl+C between create and write
                with contextlib.suppress(OSError, _Unavailable):
                    found = read_lock(self.lock_path)
                    ours = (info.st_dev, info.st_ino) if info is not None else None
                    if found is not None and (found[1], found[2]) == ours:
                        self.lock_path.unlink()  # leave no unreadable token behind
                if isinstance(exc, OSError):
                    detail = f"cannot write {self.lock_path}: {exc.strerror}"
                    raise _Unavailable(detail) from exc
                raise
            held = Held(token=token, dev=info.st_dev, ino=info.st_ino)
            if not self.still_mine(held):  # reclaimed as unreadable while we were paused
                raise self.lost()
            return held
        raise _Contended(self.holder_text())

    def lost(self) -> _Contended:
        return _Contended(f"{self.lock_path} was taken over by {self.holder_text(bare=True)}")

    def holder_text(self, *, bare: bool = False) -> str:
        """Who holds the lock now, for busy messages: the file and the holder's pid."""
        try:
            found = read_lock(self.lock_path)
        except _Unavailable as exc:
            return str(exc)
        if found is None:
            who = "nobody (it was just released)"
        elif (token := parse_token(found[0])) is None:
            who = f"a holder whose token is not written yet ({found[0][:40]!r})"
        else:
            who = f"pid {token.pid}"
        return who if bare else f"{self.lock_path} is held by {who}"

    def still_mine(self, held: Held) -> bool:
        """The lock file is the one this process created and holds its token."""
        found = read_lock(self.lock_path)
        return (
            found is not None
            and (found[1], found[2]) == (held.dev, held.ino)
            and (found[0] == held.token)
        )

    def release(self, held: Held) -> None:
        """Delete the lock only if it is still this process's (docs/design/mounts.md §3)."""
        with contextlib.suppress(_Unavailable, FileNotFoundError):
            if self.still_mine(held):
                self.lock_path.unlink()

    def _reclaim(self) -> bool:
        """Remove a lock whose holder is dead (or whose token stayed unreadable too long).

        Serialised by ``flock`` on the state directory (non-blocking: another
        reclaimer at work counts as contention). Under it the lock is read
        again and moved aside by rename; if what was moved is not what was
        judged (a holder finished writing its token meanwhile) it is put back.

        Returns:
            Whether the create should be tried again now (the lock is gone).
        """
        try:
            dfd = private_files.lock_dir(self._root)
        except PrivateStateError as exc:
            raise _Unavailable(str(exc)) from exc
        except OSError as exc:
            raise _Unavailable(f"cannot lock {self._root}: {exc.strerror}") from exc
        if dfd is None:
            return False  # another reclaimer is at work
        try:
            found = read_lock(self.lock_path)
            if found is None:
                return True
            raw, dev, ino, mtime = found
            verdict = lock_verdict(
                raw,
                age_s=self._clock_s() - mtime,
                stale_after_s=self._stale_lock_s,
                alive=self._alive,
                # Without a readable identity this process's own tokens carry none either.
                me=self.pid if self.start_identity else 0,
            )
            if verdict == "held":
                return False
            grave = self._root / f"{LOCK_NAME}.{self.pid}.{secrets.token_hex(4)}.reclaim"
            try:
                os.rename(self.lock_path, grave)
            except FileNotFoundError:
                return True
            except OSError as exc:
                raise _Unavailable(f"cannot reclaim {self.lock_path}: {exc.strerror}") from exc
            moved = read_lock(grave)
            if moved is not None and (moved[0], moved[1], moved[2]) != (raw, dev, ino):
                with contextlib.suppress(OSError):  # EEXIST: its writer will see it lost
                    os.link(grave, self.lock_path)
            with contextlib.suppress(OSError):
                grave.unlink()
            _log.info("reclaimed %s from %s holder %r", self.lock_path, verdict, raw[:40])
            return moved is not None and (moved[0], moved[1], moved[2]) == (raw, dev, ino)
        finally:
            os.close(dfd)  # also drops the flock


def read_lock(path: Path) -> tuple[bytes, int, int, float] | None:
    """``(content, st_dev, st_ino, mtime_s)`` of the lock file, ``None`` if it is absent.

    Raises:
        _Unavailable: it exists but cannot be read.
    """
    try:
        fd = private_files.open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except PrivateStateError as exc:
        raise _Unavailable(str(exc)) from exc
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        raw = os.read(fd, 128)
    except OSError as exc:
        raise _Unavailable(f"cannot read {path}: {exc.strerror}") from exc
    finally:
        os.close(fd)
    return raw, info.st_dev, info.st_ino, info.st_mtime
