"""Reaching files beneath a workspace root: open, judge, write through fds.

The file tools (:mod:`._files`) never check a path string and then use it.
Each call opens the root once (:func:`workspace_fd`), resolves paths
relative to it (:mod:`._beneath`), judges what was opened by the real path
of its fd with :class:`mind.effects.boundary.Boundary`, and writes, renames
and deletes relative to the parent directory's fd (``docs/design/boundary.md``,
File tools).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from mind.effects.boundary import Boundary, Refusal
from mind.effects.policy import Access
from mind.errors import PathRefused
from mind.shell.tools._beneath import (
    MAX_SYMLINKS,
    describe,
    open_anywhere,
    open_beneath,
    open_root,
    real_path,
    relative_to_root,
)

MAX_PREVIEW_BYTES = 8 * 1024 * 1024
"""Largest current file read to show a change against it (bytes)."""


@dataclass(frozen=True, slots=True)
class Workspace:
    """Where one session's file tools work and what they may touch.

    Attributes:
        root: the session's working directory (absolute); relative paths
            resolve beneath it.
        boundary: the rule on real paths (:class:`mind.effects.boundary.Boundary`).
    """

    root: Path
    boundary: Boundary


@contextmanager
def workspace_fd(ws: Workspace) -> Iterator[int]:
    """The root's directory fd for one call; a vanished root is a refusal."""
    try:
        fd = open_root(ws.root)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise PathRefused(
                str(ws.root), "the workspace directory no longer exists (deleted or moved)"
            ) from None
        raise PathRefused(str(ws.root), f"cannot open the workspace: {describe(exc)}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _open(ws: Workspace, root_fd: int, path: str, flags: int) -> tuple[int, bool]:
    """Open ``path`` beneath the root, else (it escapes) without the beneath
    rule; returns ``(fd, escaped)``. The caller judges the fd's real path."""
    _no_nul(path)
    rel = relative_to_root(ws.root, path)
    if rel is not None:
        try:
            return open_beneath(root_fd, rel, flags), False
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    return open_anywhere(root_fd, path, flags), True


def _no_nul(path: str) -> None:
    """A NUL would end the C string early: the kernel would resolve another path."""
    if "\x00" in path:
        raise OSError(errno.EINVAL, "the path contains a NUL character", path)


def _real(fd: int, path: str) -> str:
    """The fd's real path; the caller still owns (and closes) ``fd``."""
    try:
        return real_path(fd)
    except OSError as exc:
        raise PathRefused(path, f"cannot tell where it resolves ({describe(exc)})") from None


def open_for_read(ws: Workspace, root_fd: int, path: str, flags: int) -> int:
    """An fd of ``path`` for reading, after :meth:`Boundary.read_refusal` of
    its parent's real path plus its name (before opening it: opening a
    ``/proc`` file may fail with the kernel's own error, or have effects),
    then of its own real path.

    Raises:
        PathRefused: a denied root (``/proc``, mind's state), or unknown.
        OSError: the kernel's error resolving it.
    """
    early = _denied_by_parent(ws, root_fd, path)
    if early is not None:
        raise PathRefused(path, f"not read: {early.reason}")
    fd, _ = _open(ws, root_fd, path, flags)
    try:
        refusal = ws.boundary.read_refusal(_real(fd, path))
        if refusal is not None:
            raise PathRefused(path, f"not read: {refusal.reason}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _denied_by_parent(ws: Workspace, root_fd: int, path: str) -> Refusal | None:
    """The read refusal of ``path``'s parent directory's real path plus its
    name; None when allowed, or when the parent cannot be opened (the real
    open reports that)."""
    head, name = os.path.split(path)
    if name in ("", ".", ".."):
        return None
    try:
        parent, _ = _open(ws, root_fd, head or ".", os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        return ws.boundary.read_refusal(os.path.join(_real(parent, path), name))
    finally:
        os.close(parent)


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY
"""How directories are opened: readable (for ``fsync`` and ``scandir``), never O_PATH."""


@dataclass(slots=True)
class Target:
    """A file to write: its parent directory fd, its name there (one
    component), its real path, and whether resolving it left the root."""

    parent_fd: int
    name: str
    real: str
    escaped: bool

    def close(self) -> None:
        """Close the parent directory fd."""
        os.close(self.parent_fd)


def _deepest_dir(ws: Workspace, root_fd: int, head: str, path: str) -> tuple[int, bool, list[str]]:
    """The deepest existing directory on ``head``: ``(fd, escaped, missing names)``.

    Missing names are what must be created; a ``..`` after a missing name
    cancels it (it will be a real directory), and a ``..`` left over applies
    to the existing directory, so the kernel resolves it again.
    """
    for _ in range(path.count("..") + 1):
        try:
            fd, escaped = _open(ws, root_fd, head or ".", DIR_FLAGS)
            return fd, escaped, []
        except FileNotFoundError:
            pass
        parts = [p for p in head.split("/") if p not in ("", ".")]
        done = "/" if head.startswith("/") else "."
        fd, escaped = _open(ws, root_fd, done, DIR_FLAGS)
        for index, part in enumerate(parts):
            step = os.path.join(done, part)
            try:
                next_fd, next_escaped = _open(ws, root_fd, step, DIR_FLAGS)
            except FileNotFoundError:
                ups, names = _fold(parts[index:])
                if not ups:
                    return fd, escaped, names
                os.close(fd)
                head = os.path.join(done, *[".."] * ups, *names)
                break
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
            fd, escaped, done = next_fd, escaped or next_escaped, step
        else:
            return fd, escaped, []  # it appeared meanwhile
    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)


def _fold(names: list[str]) -> tuple[int, list[str]]:
    """Missing names with ``..`` folded: ``(leading ..s left over, names)``.

    The names will be created as real directories, so ``new/..`` is
    lexically exact; a ``..`` with nothing before it to cancel is counted.
    """
    ups = 0
    out: list[str] = []
    for name in names:
        if name != "..":
            out.append(name)
        elif out:
            out.pop()
        else:
            ups += 1
    return ups, out


def _judge(ws: Workspace, real: str, escaped: bool, path: str, consent: bool) -> None:
    """Refuse a write to ``real`` the boundary forbids, unless approved.

    A denied root (:meth:`Boundary.read_refusal`) is refused even when the
    person approved; anything else the boundary refuses needs ``consent``.
    """
    refusal = ws.boundary.write_refusal(real)
    if refusal is None:
        return
    if consent and refusal.kind != "denied":
        return
    where = "resolves outside the workspace" if escaped else "not written"
    raise PathRefused(path, f"{where}: {refusal.reason}")


def open_target(
    ws: Workspace, root_fd: int, path: str, *, consent: bool, follow: bool = True
) -> Target:
    """Resolve where writing ``path`` lands and create missing parent dirs.

    A symlink as the last component is followed by resolving its target
    again (relative to the link's directory, at most :data:`MAX_SYMLINKS`),
    unless ``follow`` is False (to delete or move the name itself: the link
    is judged on its own location, its parent's real path plus its name);
    every directory created and the file itself are judged by
    :func:`_judge` on their real path first.

    Raises:
        PathRefused: the boundary refuses, or the path names no file.
        OSError: the kernel's error (``IsADirectoryError`` for a directory).
    """
    _no_nul(path)
    current = path
    for _ in range(MAX_SYMLINKS):
        head, name = os.path.split(current)
        if name in ("", ".", ".."):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        fd, escaped, missing = _deepest_dir(ws, root_fd, head, path)
        try:
            for part in missing:
                _judge(ws, os.path.join(_real(fd, path), part), escaped, path, consent)
                with suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                child = os.open(part, DIR_FLAGS | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                os.close(fd)
                fd = child
            real = os.path.join(_real(fd, path), name)
            try:
                kind = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                kind = 0
            if stat.S_ISLNK(kind) and follow:
                link = os.readlink(name, dir_fd=fd)
                current = os.path.join(os.path.dirname(current), link)
                os.close(fd)
                continue
            if stat.S_ISDIR(kind):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            _judge(ws, real, escaped, path, consent)
        except BaseException:
            os.close(fd)
            raise
        return Target(fd, name, real, escaped)
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def boundary_reason(ws: Workspace, path: str, access: Access) -> Refusal | None:
    """Why a tool call on ``path`` crosses the boundary, resolved now the way
    the tool will resolve it, or None when it stays inside (for
    :func:`mind.effects.policy.tool_decision`).

    Writes: :meth:`Boundary.write_refusal` of the real path (missing parent
    directories count as the real directories they would be); ``unlink``
    (a delete, a move's source) the same without following a final
    symlink (the name itself goes, not its target). Reads: a
    denied root, or a real path outside every writable root ("outside the
    workspace"). A path the kernel cannot resolve is judged only when that
    is not a plain "does not exist" (the tool reports that), fail closed.
    Nothing is created.
    """
    write = access != "read"
    try:
        with workspace_fd(ws) as root_fd:
            if not write:
                return _read_reason(ws, root_fd, path)
            return _write_reason(ws, root_fd, path, follow=access == "write")
    except PathRefused as exc:
        return Refusal("unresolved", exc.reason)
    except FileNotFoundError:
        # Nothing there to resolve: a read outside (by the string) still asks,
        # so existence outside cannot be probed unasked.
        if write or (relative_to_root(ws.root, path) is not None and ".." not in path):
            return None
        return Refusal("outside", "outside the workspace")
    except OSError as exc:
        return Refusal("unresolved", f"cannot tell where it resolves ({describe(exc)})")


def _read_reason(ws: Workspace, root_fd: int, path: str) -> Refusal | None:
    early = _denied_by_parent(ws, root_fd, path)
    if early is not None:
        return early
    fd, _ = _open(ws, root_fd, path, os.O_PATH)
    try:
        real = _real(fd, path)
    finally:
        os.close(fd)
    refusal = ws.boundary.read_refusal(real)
    if refusal is not None:
        return refusal
    if not any(_is_beneath(real, root) for root in ws.boundary.writable_roots):
        return Refusal("outside", "outside the workspace")
    return None


def _write_reason(ws: Workspace, root_fd: int, path: str, *, follow: bool) -> Refusal | None:
    _no_nul(path)
    current = path
    for _ in range(MAX_SYMLINKS):
        head, name = os.path.split(current)
        if name in ("", ".", ".."):
            return None  # the tool says it is a directory
        fd, _, missing = _deepest_dir(ws, root_fd, head, path)
        try:
            base = _real(fd, path)
            if missing:
                return ws.boundary.write_refusal(os.path.join(base, *missing, name))
            try:
                kind = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except FileNotFoundError:
                kind = 0
            if not stat.S_ISLNK(kind) or not follow:
                return ws.boundary.write_refusal(os.path.join(base, name))
            current = os.path.join(os.path.dirname(current), os.readlink(name, dir_fd=fd))
        finally:
            os.close(fd)
    return Refusal("unresolved", "too many symbolic links")


def _is_beneath(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def exists_at(target: Target) -> bool:
    """Whether the name exists in its parent fd (a symlink counts, not followed)."""
    try:
        os.stat(target.name, dir_fd=target.parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def text_at(target: Target) -> str | None:
    """The text of the file at ``target`` now (``O_NOFOLLOW``), None when absent."""
    try:
        fd = os.open(
            target.name,
            os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            dir_fd=target.parent_fd,
        )
    except FileNotFoundError:
        return None
    return _read_fd(fd, target.name).decode("utf-8")


def read_bytes(ws: Workspace, root_fd: int, path: str) -> bytes | None:
    """The bytes of the regular file ``path`` (read as :func:`open_for_read`),
    or None when it does not exist.

    Raises:
        PathRefused: a denied root, or where it resolves cannot be told.
        IsADirectoryError: it is a directory.
        ValueError: it is larger than :data:`MAX_PREVIEW_BYTES`.
        OSError: not a regular file, or the kernel's error.
    """
    try:
        fd = open_for_read(ws, root_fd, path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    return _read_fd(fd, path)


def _read_fd(fd: int, path: str) -> bytes:
    """All of a regular file's bytes up to :data:`MAX_PREVIEW_BYTES`; closes ``fd``."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        raise OSError(errno.EINVAL, "not a regular file", path)
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_PREVIEW_BYTES + 1)
    if len(raw) > MAX_PREVIEW_BYTES:
        raise ValueError(f"larger than {MAX_PREVIEW_BYTES} bytes")
    return raw


def atomic_write(target: Target, data: bytes) -> None:
    """Write ``data`` as ``target.name`` in its parent fd via a temporary file,
    fsync and ``renameat``; then fsync the parent fd.

    The temporary file is created ``O_EXCL | O_NOFOLLOW`` in the same
    directory fd, and the rename replaces the name itself (a symlink swapped
    in meanwhile is replaced, never followed). An existing file keeps its
    permission bits; a new one gets ``0o666`` minus the umask.

    Raises:
        IsADirectoryError: the name is a directory.
        OSError: the file cannot be written; it is unchanged.
    """
    parent, name = target.parent_fd, target.name
    try:
        found = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
    except FileNotFoundError:
        mode: int | None = None
    else:
        if stat.S_ISDIR(found):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
        mode = stat.S_IMODE(found) if stat.S_ISREG(found) else None
    temporary = f".{name}.{secrets.token_hex(6)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary, dir_fd=parent)
        raise
    with suppress(OSError):  # some file systems cannot fsync a directory; the rename stands
        os.fsync(parent)
