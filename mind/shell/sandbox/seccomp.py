"""A seccomp filter refusing unix, IPv4 and IPv6 sockets (``seccomp(2)``,
``Documentation/userspace-api/seccomp_filter.rst``).

Standard library only, loaded by path by the launcher like
:mod:`mind.shell.sandbox.landlock`; bubblewrap gets the same program
through ``--seccomp FD``. Landlock covers TCP bind/connect only; with the
network off this filter also refuses ``socket(AF_INET | AF_INET6, ...)``
(UDP: DNS and the like), ``socket(AF_UNIX, ...)`` (a pathname socket of a
host service — docker, ssh-agent, D-Bus — is outside every mount and rule:
connecting to it is a full escape; ``socketpair`` stays allowed) and
``io_uring_setup`` (its socket operations bypass the syscall check) with
``EPERM``. A foreign architecture or the x32
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
_AF_UNIX = 1
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


def program() -> bytes:
    """The filter as ``struct sock_filter[]`` bytes (8 bytes an instruction,
    native byte order), for ``bwrap --seccomp FD`` and :func:`deny_host_sockets`.

    Refuses with ``EPERM``: ``socket(AF_UNIX | AF_INET | AF_INET6, ...)``
    (``socketpair`` stays allowed: in-sandbox IPC keeps working, but no
    pathname or abstract socket of the host can be reached), and
    ``io_uring_setup``; every syscall of a foreign ABI.

    Raises:
        SeccompError: the architecture is not one the filter knows.
    """
    machine = platform.machine()
    if machine not in _ARCHES:
        raise SeccompError(errno.ENOSYS, f"seccomp filter: unsupported architecture {machine}")
    arch, socket_nr, uring_nr = _ARCHES[machine]
    deny = _RET_ERRNO | errno.EPERM
    # Jump offsets count instructions after the current one.
    insns = [
        (_LD_W_ABS, 0, 0, 4),  # 0: arch
        (_JEQ_K, 0, 9, arch),  # 1: foreign -> 11 deny
        (_LD_W_ABS, 0, 0, 0),  # 2: syscall nr
        (_JGE_K, 7, 0, 0x40000000),  # 3: x32 -> 11 deny
        (_JEQ_K, 1, 0, socket_nr),  # 4: socket -> 6
        (_JEQ_K, 5, 4, uring_nr),  # 5: io_uring_setup -> 11 deny, else 10 allow
        (_LD_W_ABS, 0, 0, 16),  # 6: args[0] (domain), low 32 bits (little endian)
        (_JEQ_K, 3, 0, _AF_UNIX),  # 7: -> 11 deny
        (_JEQ_K, 2, 0, _AF_INET),  # 8: -> 11 deny
        (_JEQ_K, 1, 0, _AF_INET6),  # 9: -> 11 deny
        (_RET_K, 0, 0, _RET_ALLOW),  # 10
        (_RET_K, 0, 0, deny),  # 11
    ]
    return b"".join(bytes(_Filter(*insn)) for insn in insns)


def deny_host_sockets() -> None:
    """Install :func:`program` on this thread (inherited across fork and execve).

    Requires ``PR_SET_NO_NEW_PRIVS`` (or CAP_SYS_ADMIN) already set.

    Raises:
        SeccompError: as the class says.
    """
    code = program()
    count = len(code) // ctypes.sizeof(_Filter)
    filters = (_Filter * count).from_buffer_copy(code)
    prog = _Program(len=count, filter=filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp filter: {os.strerror(err)}")
