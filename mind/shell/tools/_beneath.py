"""Open paths relative to a workspace directory fd, resolved by the kernel.

The file tools never check a path string and then use it: they open a
directory fd of the workspace root once per call and resolve every path
relative to it (``docs/design/boundary.md``, File tools):

- With ``openat2(2)`` (Linux 5.6+, syscall 437) and
  ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS``: the kernel refuses, with
  ``EXDEV``, any resolution that leaves the root (``..`` above it, an
  absolute symlink, a rename race) and any ``/proc`` magic link.
- Without it (``ENOSYS``, or ``EPERM`` from a seccomp filter; probed once): a walker
  opens one component at a time with ``O_NOFOLLOW``; ``..`` pops a stack of
  directory fds (never above the root), and a symlink is followed only by
  walking its target again beneath the root (at most :data:`MAX_SYMLINKS`).

Outside-the-root resolution (:func:`open_anywhere`) is for calls the
person approved; it still refuses magic links when ``openat2`` exists.
Callers decide what a resolved fd may be used for from its real path
(:func:`real_path`) with :class:`mind.effects.boundary.Boundary`.

Errors are :class:`OSError` with the kernel's errno; :func:`describe` turns
one into a line for the model.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from mind.effects.boundary import Boundary, SandboxMode
from mind.shell.store import mind_home, state_home

RESOLVE_NO_MAGICLINKS = 0x02
"""openat2(2): refuse ``/proc/<pid>/fd/N``-style magic links."""

RESOLVE_BENEATH = 0x08
"""openat2(2): refuse any resolution that leaves the directory fd."""

SYS_OPENAT2 = 437
"""openat2's syscall number (the same on every Linux architecture)."""

MAX_SYMLINKS = 40
"""Most symlinks one resolution follows (the kernel's own limit, path_resolution(7))."""

_EAGAIN_RETRIES = 8
"""openat2 returns EAGAIN when a concurrent rename may have raced the walk."""

_libc = ctypes.CDLL(None, use_errno=True)


class _OpenHow(ctypes.Structure):
    """``struct open_how`` of openat2(2): three u64 fields."""

    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_state: dict[str, bool | None] = {"openat2": None}
"""Whether openat2 is used: None until probed once, False when the kernel or
a seccomp filter refuses it (or a test forces the walker)."""


def use_openat2(enabled: bool) -> None:
    """Switch between openat2 (True, default when the kernel has it) and the walker.

    The walker is the fallback for kernels or seccomp filters without
    openat2; tests force it to prove both give the same results.
    """
    _state["openat2"] = None if enabled else False


def _has_openat2() -> bool:
    """Whether openat2 works here, probed once on ``/`` (``ENOSYS`` on old
    kernels, ``EPERM`` from a seccomp filter mean: use the walker)."""
    known = _state["openat2"]
    if known is None:
        try:
            fd = _syscall_openat2(-100, "/", os.O_PATH, 0, RESOLVE_NO_MAGICLINKS)
        except OSError as exc:
            known = exc.errno not in (errno.ENOSYS, errno.EPERM)
        else:
            os.close(fd)
            known = True
        _state["openat2"] = known
    return known


def _syscall_openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    """openat2(2): ``EAGAIN`` (a concurrent rename raced the lookup) is retried.

    Raises:
        OSError: the kernel's errno; ``EINVAL`` for a NUL in ``path``.
    """
    raw = os.fsencode(path)
    if b"\x00" in raw:  # the C string would end early: another path
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), path)
    how = _OpenHow(flags | os.O_CLOEXEC, mode, resolve)
    for _ in range(_EAGAIN_RETRIES):
        fd = int(_libc.syscall(SYS_OPENAT2, dir_fd, raw, ctypes.byref(how), ctypes.sizeof(how)))
        if fd >= 0:
            return fd
        code = ctypes.get_errno()
        if code != errno.EAGAIN:
            raise OSError(code, os.strerror(code), path)
    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN), path)


def open_root(root: Path) -> int:
    """A directory fd of the workspace root (``O_RDONLY | O_DIRECTORY``).

    Raises:
        OSError: ``ENOENT`` when the root was deleted, ``ENOTDIR``, ``EACCES``.
    """
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def relative_to_root(root: Path, path: str) -> str | None:
    """``path`` relative to ``root`` when it is relative or lexically beneath
    ``root``; None for an absolute path elsewhere (it cannot resolve beneath)."""
    if not os.path.isabs(path):
        return path
    for base in dict.fromkeys((os.path.abspath(root), os.path.realpath(root))):
        if path == base:
            return "."
        prefix = base.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix) :]  # not relpath: it would fold ``link/..``
    return None


def open_beneath(root_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """Open ``path`` (relative) beneath ``root_fd``, following symlinks only
    while they stay beneath it.

    Raises:
        OSError: ``EXDEV`` when the path leaves the root (``..`` above it, an
            absolute symlink, a symlink out); ``ELOOP`` for more than
            :data:`MAX_SYMLINKS` links, or a link as the last component with
            ``O_NOFOLLOW``; any other errno the kernel gives.
    """
    if os.path.isabs(path):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), path)
    if _has_openat2():
        return _syscall_openat2(
            root_fd, path or ".", flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
        )
    return _walk(root_fd, path, flags, mode)


def open_anywhere(root_fd: int, path: str, flags: int, mode: int = 0) -> int:
    """Open ``path`` relative to ``root_fd`` (or absolute) without the beneath
    rule, for a call the person approved; magic links are still refused when
    openat2 exists. The caller must check :func:`real_path` of the result.

    Raises:
        OSError: as the kernel gives.
    """
    if _has_openat2():
        return _syscall_openat2(root_fd, path or ".", flags, mode, RESOLVE_NO_MAGICLINKS)
    return os.open(path or ".", flags | os.O_CLOEXEC, mode, dir_fd=root_fd)


def _walk(root_fd: int, path: str, flags: int, mode: int) -> int:
    """The fallback for :func:`open_beneath`: one component at a time."""
    pending = [p for p in path.split("/") if p not in ("", ".")]
    stack: list[int] = []  # fds of directories below the root, deepest last
    links = 0
    try:
        while pending:
            name = pending.pop(0)
            here = stack[-1] if stack else root_fd
            if name == "..":
                if not stack:
                    raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), path)
                os.close(stack.pop())
                continue
            last = not pending
            if last:
                if flags & os.O_NOFOLLOW or not _is_link(name, here):
                    # A link swapped in after the check fails with ELOOP: closed.
                    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=here)
            else:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=here)
                kind = os.fstat(fd).st_mode
                if stat.S_ISDIR(kind):
                    stack.append(fd)
                    continue
                os.close(fd)
                if not stat.S_ISLNK(kind):
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
            links += 1
            if links > MAX_SYMLINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            target = os.readlink(name, dir_fd=here)
            if target.startswith("/"):
                raise OSError(errno.EXDEV, os.strerror(errno.EXDEV), path)
            pending[:0] = [p for p in target.split("/") if p not in ("", ".")]
        # The path named the root itself (or a directory reached by ``..``).
        here = stack[-1] if stack else root_fd
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=here)
    finally:
        for fd in stack:
            os.close(fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def real_path(fd: int) -> str:
    """The absolute path the kernel has for an open fd (``/proc/self/fd/N``).

    Raises:
        OSError: ``/proc`` is not mounted (the caller refuses: it cannot tell
            where the fd is); the fd's file was deleted (``ENOENT``).
    """
    target = os.readlink(f"/proc/self/fd/{fd}")
    if not target.startswith("/") or target.endswith(" (deleted)"):
        raise OSError(errno.ENOENT, "the file was deleted while it was resolved", target)
    return target


_MESSAGES: Mapping[int, str] = {
    errno.EXDEV: "resolves outside the workspace",
    errno.ELOOP: "too many symbolic links, or a symbolic link where none may be",
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "a component of the path is not a directory",
    errno.ENAMETOOLONG: "the path or a name in it is too long",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EINVAL: "not a valid path here",
    errno.EISDIR: "is a directory",
    errno.EROFS: "the file system is read-only",
    errno.ENOSPC: "no space left on the device",
}


def describe(exc: OSError) -> str:
    """One lowercase phrase for a path error, for the model's tool result."""
    if exc.errno is not None and exc.errno in _MESSAGES:
        return _MESSAGES[exc.errno]
    return str(exc.strerror or exc)


def session_boundary(
    cwd: Path,
    env: Mapping[str, str],
    *,
    mode: SandboxMode = "workspace-write",
    add_dirs: Sequence[str] = (),
    state_roots: Sequence[Path] = (),
    network: bool = False,
) -> Boundary:
    """The boundary of a session in ``cwd`` (``docs/design/boundary.md``):
    ``mode``, the workspace then each of ``add_dirs`` as writable roots, the
    home directory (``$HOME``) and mind's state roots
    (:func:`mind.shell.store.mind_home`, ``state_home`` of ``env``, plus
    ``state_roots``: the runtime's own root when it was given explicitly),
    all as real paths; ``network`` lets sandboxed commands use the network. The
    file tools and the sandbox share this one value.
    """
    home = env.get("HOME") or str(Path.home())
    states = (mind_home(env), state_home(env), *state_roots)
    return Boundary(
        mode=mode,
        writable_roots=tuple(dict.fromkeys(os.path.realpath(p) for p in (str(cwd), *add_dirs))),
        home=os.path.realpath(home),
        state_roots=tuple(dict.fromkeys(os.path.realpath(p) for p in states)),
        network=network,
    )
