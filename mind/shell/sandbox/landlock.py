"""Landlock rulesets through ctypes (``landlock(7)``, kernel doc
``userspace-api/landlock``).

Standard library only: the launcher (:mod:`mind.shell.sandbox.launch`) loads
this file by path in a ``python -I -S`` child, before ``execve`` of the
command, so it must not import mind or anything outside the standard library.

Rule (``docs/design/boundary.md`` "Sandbox"): every file-system right the
running kernel's ABI knows is *handled* (denied unless a rule grants it);
reading and executing are granted beneath ``/`` except mind's state roots
(``hidden``); writing only beneath the granted paths. With the network off,
TCP bind and connect are handled with no port granted (ABI >= 4). Abstract
unix sockets and signals are scoped to the sandbox (ABI >= 6).

Measured as root on kernel 6.18 (ABI 7): Landlock's ptrace scoping hides
``/proc/PID/exe`` of outside processes but *not* ``/proc/PID/environ``. So
reading is granted beneath each top-level directory except ``/proc``, and
within ``/proc`` beneath each entry that is not a process (``cpuinfo``,
``meminfo``, ...) plus the launcher's own process directory (the command
keeps its pid across ``execve``; its children cannot read ``/proc/self``).
Listing ``/`` itself is not granted (a rule on ``/`` would cover ``/proc``).
"""

from __future__ import annotations

import ctypes
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the launcher's startup must not pay for collections.abc
    from collections.abc import Sequence

_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
"""Syscall numbers; the same on every architecture (added after the unified table)."""

_PR_SET_NO_NEW_PRIVS = 38
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

NET_BIND_TCP = 1 << 0
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a non-directory may carry (others are EINVAL)."""


def _fs_rights(abi: int) -> int:
    """Every file-system right the ABI knows (ABI 1: bits 0-12; 2 adds REFER,
    3 TRUNCATE, 5 IOCTL_DEV)."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel struct is __attribute__((packed))
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class LandlockError(OSError):
    """A Landlock call failed (errno and the step named)."""


def _check(result: int, step: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockError(errno, f"landlock {step}: {os.strerror(errno)}")
    return result


def abi_version() -> int:
    """The running kernel's Landlock ABI (>= 1), or 0 when Landlock is
    unavailable (not built in, disabled at boot, or a seccomp filter refuses it)."""
    result = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(result), 0)


def restrict_self(
    *,
    writable: Sequence[str],
    writable_files: Sequence[str] = (),
    hidden: Sequence[str] = (),
    network: bool,
) -> int:
    """Confine this process (and every child it starts) for good.

    Args:
        writable: directories beneath which every right is granted.
        writable_files: non-directories granted write and truncate (a
            protected sibling keeps their directory unwritable).
        hidden: real paths of directories left unreadable (mind's state
            roots): a directory holding one is split like a write grant
            around a protected path (each other entry granted, itself not).
        network: False handles TCP bind/connect with no port granted (ABI >= 4).

    Returns:
        The ABI used.

    Raises:
        LandlockError: Landlock is unavailable or a step failed; the caller
            must not run the command (fail closed). A path that cannot be
            opened is skipped only when it no longer exists.
    """
    abi = abi_version()
    if abi < 1:
        raise LandlockError(0, "landlock is not available in this kernel")
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = ctypes.sizeof(_RulesetAttr)
    if abi < 6:
        size -= 8  # no `scoped` field before ABI 6
    else:
        attr.scoped = SCOPE_SIGNAL | (0 if network else SCOPE_ABSTRACT_UNIX_SOCKET)
    if abi < 4:
        size -= 8  # no `handled_access_net` before ABI 4
    elif not network:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
    ruleset = _check(
        _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0),
        "create_ruleset",
    )
    try:
        for path in _readable_paths(hidden):
            _add_path(ruleset, path, READ_RIGHTS & handled)
        for device in ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty"):
            _add_path(ruleset, device, (READ_FILE | WRITE_FILE | IOCTL_DEV) & handled)
        for path in writable:
            _add_path(ruleset, path, handled)
        for path in writable_files:
            _add_path(ruleset, path, (WRITE_FILE | TRUNCATE | READ_FILE | EXECUTE) & handled)
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _readable_paths(hidden: Sequence[str]) -> list[str]:
    """Real paths to grant read/execute beneath: every top-level path but
    ``/proc``, split around each ``hidden`` directory; ``/proc`` entries that
    are not processes; this process's own ``/proc`` directory."""
    paths: list[str] = []
    seen: set[str] = set()
    for name in os.listdir("/"):
        if name != "proc":
            _split_read(os.path.join("/", name), hidden, paths, seen)
    try:
        names = os.listdir("/proc")
    except OSError:
        names = []
    paths += [
        os.path.join("/proc", name)
        for name in names
        if not name.isdecimal() and name not in ("self", "thread-self")
    ]
    paths.append(f"/proc/{os.getpid()}")
    return paths


def _split_read(path: str, hidden: Sequence[str], paths: list[str], seen: set[str]) -> None:
    """Append ``path``'s real path unless it is (beneath) a hidden directory;
    one that holds a hidden directory is replaced by its entries (a rule
    opens its path following symlinks, so judge the real path)."""
    real = os.path.realpath(path)
    if real in seen or real.startswith("/proc/") or real == "/proc":
        return
    seen.add(real)
    if any(_within(real, h) for h in hidden):
        return
    if not any(_within(h, real) for h in hidden):
        paths.append(real)
        return
    try:
        names = os.listdir(real)
    except OSError:
        return
    for name in names:
        _split_read(os.path.join(real, name), hidden, paths, seen)


def _within(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def _add_path(ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to grant (a device this system lacks, a path removed since)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _check(
            _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0),
            f"add_rule {path}",
        )
    finally:
        os.close(fd)
