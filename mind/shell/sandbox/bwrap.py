"""The bubblewrap command line of one sandboxed command (``bwrap(1)``).

Pure: builds argv from a :class:`~mind.shell.sandbox.plan.WritePlan`.
Layout (``docs/design/boundary.md`` "Sandbox"): the whole file system
read-only (``--ro-bind / /``), a fresh ``/dev`` and a ``/proc`` of a new pid
namespace (mind's processes and their ``environ`` are not in it), no network
namespace shared and the seccomp filter (no unix socket, so no host service
listening on a pathname socket) when the network is off, each planned path bound writable,
then each protected path bound read-only over it, mind's state roots hidden
under an empty read-only tmpfs, a private writable temp dir as ``TMPDIR``.
No capability is kept (``--cap-drop ALL``: as root bwrap keeps the host's).
``--die-with-parent`` ends the sandbox with mind. No ``--new-session``: the
command must stay in the process group mind kills (bwrap killed in its first
milliseconds leaves the namespace's init alive, which ignores SIGTERM from
outside and is reached only by the group SIGKILL — measured: 3 of 40 early
kills survived with ``--new-session``); it has no terminal anyway (the tool
starts bwrap in a new session, stdin ``/dev/null``, a fresh ``/dev``).
"""

from __future__ import annotations

from collections.abc import Sequence

from mind.shell.sandbox.plan import WritePlan

BWRAP = "bwrap"
"""Program name, looked up on PATH."""


def bwrap_argv(
    plan: WritePlan,
    argv: Sequence[str],
    *,
    cwd: str,
    tmpdir: str,
    hidden: Sequence[str],
    network: bool,
    seccomp_fd: int | None = None,
    program: str = BWRAP,
) -> list[str]:
    """argv that runs ``argv`` inside bubblewrap.

    Args:
        plan: what may be written (``plan_writes(..., overlay=True)``).
        argv: the command (program first).
        cwd: working directory inside the sandbox (same path as outside).
        tmpdir: an existing private directory, writable inside.
        hidden: existing directories replaced by an empty read-only tmpfs
            (mind's state roots).
        network: False gives the command its own empty network namespace.
        seccomp_fd: an inherited descriptor holding the seccomp program
            (:func:`mind.shell.sandbox.seccomp.program`; with the network
            off: no unix socket of the host is reachable).
        program: the bubblewrap executable.
    """
    # --cap-drop ALL: as root bwrap would keep the host capabilities
    # (CAP_SYS_MODULE, CAP_SYS_BOOT, ...), which no mount covers.
    out = [program, "--die-with-parent", "--unshare-pid", "--cap-drop", "ALL"]
    if not network:
        out.append("--unshare-net")
    if seccomp_fd is not None:
        out += ["--seccomp", str(seccomp_fd)]
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in (*plan.directories, *plan.files):
        out += ["--bind", path, path]
    for path in plan.read_only:
        out += ["--ro-bind", path, path]
    for path in hidden:
        out += ["--tmpfs", path, "--remount-ro", path]
    out += ["--bind", tmpdir, tmpdir, "--setenv", "TMPDIR", tmpdir, "--chdir", cwd, "--", *argv]
    return out
