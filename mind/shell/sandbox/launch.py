"""The launcher of a Landlock-sandboxed command (``python -I -S launch.py
[--write DIR]... [--file PATH]... [--hide DIR]... [--parent PID]
--network on|off -- PROGRAM ARGS...``).

It stays the parent of the command (``docs/design/boundary.md`` "Sandbox"):
it makes itself a child subreaper (``PR_SET_CHILD_SUBREAPER``: every orphaned
descendant, ``setsid`` or not, is reparented to it) and asks for SIGTERM
when mind dies (``PR_SET_PDEATHSIG``; ``--parent`` closes the race with a
mind already gone). Then it forks; the child applies the Landlock ruleset
and, with the network off, the seccomp filter (:mod:`seccomp`), drops
every capability (root's included), and ``execve``s the command. When the
command exits, the launcher SIGKILLs every descendant left (read from
``/proc/self/task/TID/children``, again until none is left) and exits
with the command's status: nothing a tool call started outlives it.
SIGTERM, SIGINT and SIGHUP are forwarded to the command;
:data:`KILL_GRACE_S` later the command is killed.

Standard library only and loaded by path (never ``preexec_fn``: mind's
runtime has threads, and forking a threaded process into Python code is
unsafe); it imports little (startup is paid by every sandboxed command).
When the ruleset cannot be applied the command does not run: the child
prints ``mind sandbox: ...`` to stderr and exits :data:`REFUSED_EXIT`
(fail closed).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from types import ModuleType

REFUSED_EXIT = 126
"""Exit status when the sandbox could not be applied or the program not started."""

KILL_GRACE_S = 1.0
"""Seconds between forwarding SIGTERM/SIGINT/SIGHUP and SIGKILL of the
command (shorter than mind's own grace before it kills the group)."""

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _sibling(name: str) -> ModuleType:
    """``NAME.py`` beside this file, executed as a module (importlib's
    machinery would double the launcher's startup)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    module = ModuleType(f"_mind_{name}")
    module.__file__ = path
    with open(path, encoding="utf-8") as source:
        code = compile(source.read(), path, "exec")
    exec(code, module.__dict__)
    return module


def launcher_args(
    writable: list[str],
    files: list[str],
    *,
    network: bool,
    hidden: list[str] = [],  # noqa: B006 - never mutated
    parent: int | None = None,
) -> list[str]:
    """The launcher's options for a ruleset (everything before ``--``):
    ``hidden`` directories are not readable (mind's state roots), ``parent``
    is mind's pid (the launcher refuses to start once it is gone)."""
    out: list[str] = []
    for path in writable:
        out += ["--write", path]
    for path in files:
        out += ["--file", path]
    for path in hidden:
        out += ["--hide", path]
    if parent is not None:
        out += ["--parent", str(parent)]
    return [*out, "--network", "on" if network else "off"]


def main(args: list[str]) -> int:
    """Start the command the options describe, confined, and wait for it.

    Returns:
        The command's exit status (``128 + N`` if signal N killed it and
        re-raising it failed), or :data:`REFUSED_EXIT` on failure.
    """
    writable: list[str] = []
    files: list[str] = []
    hidden: list[str] = []
    parent: int | None = None
    network: bool | None = None
    rest = list(args)
    while len(rest) >= 2 and rest[0] != "--":
        option, value = rest[0], rest[1]
        rest = rest[2:]
        if option == "--write":
            writable.append(value)
        elif option == "--file":
            files.append(value)
        elif option == "--hide":
            hidden.append(value)
        elif option == "--parent" and value.isdecimal():
            parent = int(value)
        elif option == "--network" and value in ("on", "off"):
            network = value == "on"
        else:
            rest = []
    if network is None or len(rest) < 2 or rest[0] != "--":
        print(
            "mind sandbox: usage: launch.py [--write DIR]... [--file PATH]... [--hide DIR]... "
            "[--parent PID] --network on|off -- PROGRAM [ARGS...]",
            file=sys.stderr,
        )
        return REFUSED_EXIT
    libc = ctypes.CDLL(None, use_errno=True)
    if (
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0
        or libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0
    ):
        print("mind sandbox: refused to run the command: prctl failed", file=sys.stderr)
        return REFUSED_EXIT
    if parent is not None and os.getppid() != parent:
        return REFUSED_EXIT  # mind died before the death signal was armed
    # Blocked across fork until the parent forwards them (a signal before
    # would kill the launcher uncleaned); the child unblocks before exec.
    forwarded = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:
        # The command dies with its launcher too (not inherited by its children:
        # those the launcher kills, or, if it was SIGKILLed, nothing can).
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != launcher:
            os._exit(REFUSED_EXIT)  # the launcher died before the signal was armed
        signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
        os._exit(_confine_and_exec(rest[1:], writable, files, hidden, network))
    _forward_signals(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
    status = _wait(pid)
    _kill_descendants()
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        return 128 + number
    return os.waitstatus_to_exitcode(status)


def _confine_and_exec(
    argv: list[str], writable: list[str], files: list[str], hidden: list[str], network: bool
) -> int:
    """In the forked child: confine, then exec (returns only on failure)."""
    try:
        _sibling("landlock").restrict_self(
            writable=writable, writable_files=files, hidden=hidden, network=network
        )
        if not network:  # after restrict_self, which set PR_SET_NO_NEW_PRIVS
            _sibling("seccomp").deny_host_sockets()
        _drop_capabilities()
    except OSError as exc:
        print(f"mind sandbox: refused to run the command: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"mind sandbox: cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
    return REFUSED_EXIT


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def _drop_capabilities() -> None:
    """Give up every capability for good (``capabilities(7)``): as root the
    command could otherwise load a kernel module, reboot or rename the host,
    which no file rule covers. The bounding and ambient sets are emptied
    where allowed; the permitted set is emptied always, and with
    ``PR_SET_NO_NEW_PRIVS`` set no ``execve`` can raise it again.

    Raises:
        OSError: ``capset`` failed (the command must not run).
    """
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as last:
            last_cap = int(last.read())
    except (OSError, ValueError):
        last_cap = 63
    for cap in range(last_cap + 1):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"capset: {os.strerror(err)}")


def _forward_signals(pid: int) -> None:
    """SIGTERM/SIGINT/SIGHUP go to the command; SIGKILL follows after the grace."""

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        signal.signal(signal.SIGALRM, lambda _s, _f: _kill(pid))
        signal.setitimer(signal.ITIMER_REAL, KILL_GRACE_S)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)


def _wait(pid: int) -> int:
    """The wait status of ``pid``, reaping any orphan that ends meanwhile."""
    while True:
        done, status = os.waitpid(-1, 0)
        if done == pid:
            return status


def _children() -> list[int]:
    """This process's live children (orphans are reparented to it): from
    ``/proc/self/task/TID/children``, or, on a kernel without that file
    (``CONFIG_PROC_CHILDREN``), every ``/proc/PID/stat`` naming it parent."""
    pids: list[int] = []
    tids = os.listdir("/proc/self/task")
    try:
        for tid in tids:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as listing:
                pids += [int(word) for word in listing.read().split()]
    except FileNotFoundError:
        return _children_by_scan()
    return pids


def _children_by_scan() -> list[int]:
    me = str(os.getpid())
    pids: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdecimal():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rpartition(")")[2].split()
        except OSError:
            continue  # ended meanwhile
        if len(fields) >= 2 and fields[1] == me:  # after "pid (comm)": state, ppid
            pids.append(int(name))
    return pids


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # reaped already


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        return  # reaped by _wait already


def _kill_descendants() -> None:
    """SIGKILL every child, reap it, repeat: each killed process's own
    children are reparented here and killed in the next round."""
    while True:
        children = _children()
        for pid in children:
            _kill(pid)
        for pid in children:
            _reap(pid)
        if children:
            continue
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                continue  # a child appeared after the listing: list again
        except ChildProcessError:
            return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
