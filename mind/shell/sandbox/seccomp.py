"""A seccomp filter refusing IPv4/IPv6 sockets (``seccomp(2)``,
``Documentation/userspace-api/seccomp_filter.rst``).

Standard library only, loaded by path by the launcher like
:mod:`mind.shell.sandbox.landlock`. Landlock covers TCP bind/connect only;
with the network off this filter also refuses ``socket(AF_INET | AF_INET6,
...)`` (UDP: DNS and the like) and ``io_uring_setup`` (its socket operations
bypass the syscall check) with ``EPERM``. A foreign architecture or the x32
ABI (``nr >= 0x40000000``) gets ``EPERM`` for every syscall: the filter
cannot read its numbers, so it refuses rather than guess.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_AF_INET = 2
_AF_INET6 = 10

_ARCHES: dict[str, tuple[int, int, int]] = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
"""machine -> (AUDIT_ARCH, socket nr, io_uring_setup nr)."""


class _Filter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _Program(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter)))


class SeccompError(OSError):
    """The filter could not be installed (unsupported architecture, or the
    kernel refused it); the caller must not run the command."""


def deny_inet_sockets() -> None:
    """Install the filter on this thread (inherited across fork and execve).

    Requires ``PR_SET_NO_NEW_PRIVS`` (or CAP_SYS_ADMIN) already set.

    Raises:
        SeccompError: as the class says.
    """
    machine = platform.machine()
    if machine not in _ARCHES:
        raise SeccompError(errno.ENOSYS, f"seccomp filter: unsupported architecture {machine}")
    arch, socket_nr, uring_nr = _ARCHES[machine]
    deny = _RET_ERRNO | errno.EPERM
    # Jump offsets count instructions after the current one.
    program = [
        (_LD_W_ABS, 0, 0, 4),  # 0: arch
        (_JEQ_K, 0, 8, arch),  # 1: foreign -> 10 deny
        (_LD_W_ABS, 0, 0, 0),  # 2: syscall nr
        (_JGE_K, 6, 0, 0x40000000),  # 3: x32 -> 10 deny
        (_JEQ_K, 1, 0, socket_nr),  # 4: socket -> 6
        (_JEQ_K, 4, 3, uring_nr),  # 5: io_uring_setup -> 10 deny, else 9 allow
        (_LD_W_ABS, 0, 0, 16),  # 6: args[0] (domain), low 32 bits (little endian)
        (_JEQ_K, 2, 0, _AF_INET),  # 7: -> 10 deny
        (_JEQ_K, 1, 0, _AF_INET6),  # 8: -> 10 deny
        (_RET_K, 0, 0, _RET_ALLOW),  # 9
        (_RET_K, 0, 0, deny),  # 10
    ]
    filters = (_Filter * len(program))(*(_Filter(*insn) for insn in program))
    prog = _Program(len=len(program), filter=filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        code = ctypes.get_errno()
        raise SeccompError(code, f"seccomp filter: {os.strerror(code)}")
