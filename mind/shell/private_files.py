"""Private, owned state files: the one owner of how mind opens its own files.

Every file and directory under mind's config root (``MIND_HOME``) and state
root (``MIND_STATE_HOME``) goes through here (rules: ``docs/design/state.md``):

- **Owned and private.** A directory or file must be owned by this process's
  effective uid and not group- or world-writable; else
  :class:`~mind.errors.PrivateStateError` names the path and the fix
  (``chmod 700 PATH`` / ``chown``). Another user able to write there could
  forge a journal, an inbox entry (a prompt) or a config.
- **Never follow, never block.** Files are opened with ``O_NOFOLLOW |
  O_NONBLOCK | O_NOCTTY`` and ``fstat``-checked to be regular files before a
  byte is read or written; ``O_NONBLOCK`` is then cleared. A FIFO, device,
  directory or symlink in place of a state file is refused at once and left
  untouched (``open(2)``: ``O_NONBLOCK`` makes opening a FIFO return
  immediately; ``ELOOP`` for a final symlink under ``O_NOFOLLOW``).
- **Created private whatever the umask.** Directories 0700 (``chmod`` after
  ``mkdir``: the umask only narrows a mode), files 0600.
- **Roots resolved once.** :func:`resolve_root` takes the ``realpath`` of a
  root at start, so a symlink *above* it (``~/.mind -> /data/mind``) works;
  anything inside it is checked with ``lstat`` and a symlink is refused.
- **Atomic replace.** :func:`write_atomic`: tmp (0600, ``O_EXCL``) + write +
  ``fsync`` + ``rename`` (+ ``fsync`` of the directory).

All sizes are bytes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from mind.errors import PrivateStateError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "check_owned",
    "fsync_dir",
    "kind_name",
    "lock_dir",
    "open_dir",
    "open_file",
    "private_dir",
    "read_file",
    "resolve_root",
    "same_file",
    "write_atomic",
]

DIR_MODE: Final = 0o700
"""Mode of every directory mind creates in its roots."""
FILE_MODE: Final = 0o600
"""Mode of every file mind creates in its roots."""
_UNSAFE_BITS: Final = stat.S_IWGRP | stat.S_IWOTH
_OPEN_FLAGS: Final = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def resolve_root(root: Path) -> Path:
    """``root`` with every symlink resolved (``realpath``), once, at start.

    The symlinks above and at the root are the user's own layout choice; what
    is inside the returned path is checked without following links.
    """
    return Path(os.path.realpath(os.path.expanduser(root)))


def kind_name(mode: int) -> str:
    """What a ``st_mode`` names, for messages: "a symbolic link", "a FIFO", ..."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_owned(info: os.stat_result, path: Path, *, directory: bool) -> None:
    """Refuse ``info`` (of ``path``) unless owned by this euid and not group/world-writable.

    Raises:
        PrivateStateError: another owner (fix: ``chown``) or writable by group
            or others (fix: ``chmod 700``/``chmod 600``).
    """
    uid = os.geteuid()
    if info.st_uid != uid:
        raise PrivateStateError(
            path,
            f"is owned by uid {info.st_uid}, not by this user (uid {uid})",
            f"chown {uid} {path}, or remove it",
        )
    if info.st_mode & _UNSAFE_BITS:
        mode = DIR_MODE if directory else FILE_MODE
        raise PrivateStateError(
            path,
            f"is writable by other users (mode {stat.S_IMODE(info.st_mode):04o})",
            f"chmod {mode:o} {path}",
        )


def private_dir(path: Path, *, create: bool = True) -> None:
    """Make sure ``path`` is a private directory owned by this user.

    Missing directories (and missing parents) are created 0700 when
    ``create``; an existing one is checked with ``lstat`` (never followed).

    Raises:
        PrivateStateError: ``path`` is a symlink or not a directory, another
            user owns it, or it is group/world-writable.
        FileNotFoundError: missing and not ``create``.
        OSError: it cannot be created.
    """
    if create:
        missing: list[Path] = []
        current = path
        while not os.path.lexists(current):
            missing.append(current)
            current = current.parent
        for d in reversed(missing):
            try:
                os.mkdir(d, DIR_MODE)
            except FileExistsError:
                continue
            os.chmod(d, DIR_MODE, follow_symlinks=False)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise PrivateStateError(
            path,
            f"is {kind_name(info.st_mode)}, not a directory",
            f"remove it (mkdir -m 700 {path})",
        )
    check_owned(info, path, directory=True)


def open_file(path: Path, flags: int, *, create: bool = False) -> int:
    """Open a state file without following a symlink or blocking; check it.

    Args:
        path: the file.
        flags: ``os.O_RDONLY``/``O_WRONLY``/``O_RDWR`` plus e.g. ``O_APPEND``,
            ``O_EXCL``, ``O_TRUNC`` (``O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
            O_CLOEXEC`` are added).
        create: add ``O_CREAT`` with mode 0600.

    Returns:
        A blocking descriptor of a regular file owned by this user and not
        group/world-writable. The caller closes it.

    Raises:
        PrivateStateError: a symlink, FIFO, directory, device or socket is in
            its place, or ownership/mode is wrong; the file is not read or
            written.
        FileNotFoundError: missing and not ``create``.
        FileExistsError: ``O_EXCL`` and it exists.
        OSError: any other failure to open.
    """
    full = flags | _OPEN_FLAGS | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, full, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PrivateStateError(path, "is a symbolic link", f"remove it ({path})") from None
        if exc.errno == errno.EISDIR:
            raise PrivateStateError(path, "is a directory", f"remove it ({path})") from None
        if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise PrivateStateError(path, "is not a regular file", f"remove it ({path})") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PrivateStateError(
                path, f"is {kind_name(info.st_mode)}, not a regular file", f"remove it ({path})"
            )
        check_owned(info, path, directory=False)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of a state file, at most ``max_bytes + 1`` (the caller
    compares with its cap); ``None`` when it does not exist.

    Raises:
        PrivateStateError: see :func:`open_file`.
        OSError: it cannot be read.
    """
    try:
        fd = open_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def open_dir(directory: Path) -> int:
    """Open a directory read-only without following a symlink in its place
    (for ``fsync``, and for an ``flock`` on it that dies with its holder).

    Returns:
        The descriptor; the caller closes it.

    Raises:
        PrivateStateError: a symlink or a non-directory is in its place.
        FileNotFoundError: it does not exist.
        OSError: it cannot be opened.
    """
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        # O_DIRECTORY | O_NOFOLLOW on a symlink: ELOOP or ENOTDIR, by kernel.
        link = exc.errno == errno.ELOOP or os.path.islink(directory)
        what = "is a symbolic link" if link else "is not a directory"
        raise PrivateStateError(directory, what, f"remove it ({directory})") from None


def lock_dir(directory: Path) -> int | None:
    """Take ``flock(LOCK_EX)`` on ``directory`` without waiting.

    The kernel drops the lock when the descriptor is closed or its holder
    dies (even by SIGKILL, even in another PID namespace), so it never goes
    stale and adds no file.

    Returns:
        The descriptor holding the lock (close it to release), or None when
        another open file description holds it.

    Raises:
        PrivateStateError: a symlink or a non-directory is in its place.
        OSError: it cannot be opened or locked.
    """
    fd = open_dir(directory)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or create in it is durable.

    Raises:
        PrivateStateError: a symlink or a non-directory is in its place.
        OSError: it cannot be opened or synced.
    """
    fd = open_dir(directory)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    tmp: Path | None = None,
    sync_dir: bool = True,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` so a crash leaves the old file or the new one.

    tmp (created 0600 with ``O_EXCL | O_NOFOLLOW``) + write all + ``fsync`` +
    ``rename`` over ``path`` (+ ``fsync`` of the directory when ``sync_dir``).
    The tmp file is removed on any failure.

    Args:
        path: the file replaced; a symlink in its place is replaced, never
            followed (``rename(2)`` replaces the link itself).
        data: the whole new content.
        tmp: the tmp file (default ``.<name>.<random>.tmp`` beside it).
        sync_dir: fsync the directory after the rename.
        before_replace: called after the fsync, before the rename; may raise
            to abandon the write (a lock was lost).

    Raises:
        OSError: the write, fsync or rename failed.
    """
    tmp = tmp or path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    try:
        fd = open_file(tmp, os.O_WRONLY | os.O_EXCL, create=True)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
    if sync_dir:
        fsync_dir(path.parent)


def same_file(path: Path, fd: int) -> bool:
    """Whether ``path`` (not followed) is still the file open on ``fd``
    (same device and inode): false once it was replaced or removed.

    Raises:
        OSError: ``fd`` is not open.
    """
    held = os.fstat(fd)
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)
