"""One shell tool command, confined: argv, environment and private temp dir.

Rule (``docs/design/boundary.md`` "Sandbox"): a command runs inside the
session's :class:`~mind.effects.boundary.Boundary` through the selected
backend; when no backend works it is refused with a message naming
``--sandbox danger-full-access`` — never run unsandboxed silently.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mind.effects.boundary import Boundary, SandboxMode
from mind.shell import private_files
from mind.shell.sandbox.backend import Backend, BackendProbe
from mind.shell.sandbox.plan import SCAN_MAX_DIRS, plan_writes, within

# launch and seccomp (ctypes) are imported by the first confined command, not
# at session start: mind exec's first request needs neither.
_LAUNCHER = str(Path(__file__).resolve().with_name("launch.py"))


@dataclass(frozen=True, slots=True)
class Confined:
    """A command ready to start.

    Attributes:
        argv: what to execute (the backend's wrapper, then the command).
        env: the command's whole environment (``TMPDIR`` = :attr:`tmpdir`).
        tmpdir: the private temp dir; the caller removes it with
            :func:`release` after the command ends.
        pass_fds: file descriptors the command must inherit (bubblewrap's
            ``--seccomp FD``); :func:`release` closes them.
    """

    argv: list[str]
    env: dict[str, str]
    tmpdir: str
    pass_fds: tuple[int, ...] = ()


_BACKEND_NAMES: dict[Backend, str] = {"bwrap": "bubblewrap", "landlock": "Landlock", "none": "none"}


class Sandbox:
    """The sandbox of one session.

    Attributes:
        boundary: mode and roots (real paths).
        scan_max_dirs: most directories searched per writable root for
            nested ``.git`` / ``.mind`` (:data:`plan.SCAN_MAX_DIRS`).

    ``backend`` is given, or a :class:`BackendProbe` still running: then
    :attr:`backend`, :attr:`why_none` and everything built on them wait for
    its answer (a command never runs, nor is the sandbox described, before
    the backend is known).
    """

    __slots__ = ("_backend", "_probe", "_why_none", "boundary", "scan_max_dirs")

    def __init__(
        self,
        boundary: Boundary,
        backend: Backend | BackendProbe,
        why_none: str = "",
        scan_max_dirs: int = SCAN_MAX_DIRS,
    ) -> None:
        self.boundary = boundary
        self.scan_max_dirs = scan_max_dirs
        self._probe: BackendProbe | None = None
        self._backend: Backend = "none"
        if isinstance(backend, BackendProbe):
            self._probe = backend
        else:
            self._backend = backend
        self._why_none = why_none

    def __repr__(self) -> str:
        backend = self._backend if self._probe is None else "(probing)"
        return f"Sandbox(mode={self.boundary.mode!r}, backend={backend!r})"

    def wait(self) -> None:
        """Block until the backend is known (at once when it is); for a worker
        thread (``anyio.to_thread.run_sync(sandbox.wait)``)."""
        if self._probe is not None:
            self._backend, self._why_none = self._probe.result()
            self._probe = None

    @property
    def backend(self) -> Backend:
        """The working backend, or ``none``; waits for the probe."""
        self.wait()
        return self._backend

    @property
    def why_none(self) -> str:
        """For ``none``, why no backend works; waits for the probe."""
        self.wait()
        return self._why_none

    @property
    def label(self) -> str:
        """The mode as an approval card says it: ``workspace-write`` etc."""
        return self.boundary.mode

    def describe(self) -> str:
        """One line for the banner and ``/status``: the mode and what enforces
        it, e.g. ``workspace-write (bubblewrap)``,
        ``danger-full-access (no sandbox)``, or ``workspace-write — no backend
        works (…): commands are refused``."""
        mode = self.boundary.mode
        if mode == "danger-full-access":
            return f"{mode} (no sandbox: commands run as you)"
        if self.backend == "none":
            return f"{mode} — no backend works ({self.why_none}): commands are refused"
        return f"{mode} ({_BACKEND_NAMES[self.backend]})"

    def in_mode(self, mode: SandboxMode) -> Sandbox:
        """This sandbox confining to ``mode`` instead (same roots and
        backend): ``read-only`` for a known-safe command under ``untrusted``
        (:attr:`mind.effects.policy.ShellDecision.mode`)."""
        if mode == self.boundary.mode:
            return self
        boundary = dataclasses.replace(self.boundary, mode=mode)
        backend = self._probe if self._probe is not None else self._backend
        return Sandbox(boundary, backend, self._why_none, self.scan_max_dirs)

    def refusal(self) -> str | None:
        """Why no sandboxed command can run here, or None (fail closed)."""
        if self.backend != "none":
            return None
        return (
            f"Refused without running: the {self.boundary.mode} sandbox is not available "
            f"({self.why_none}). Commands are never run unsandboxed silently; the user can "
            "install bubblewrap, or rerun mind with --sandbox danger-full-access to run "
            "commands without a sandbox."
        )

    def confine(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]) -> Confined:
        """Wrap ``argv`` for the backend and make its private temp dir.

        Raises:
            RuntimeError: the backend is ``none`` (check :meth:`refusal` first).
            SandboxRefused: the command cannot be confined safely (a root
                too big to search for nested ``.git``); nothing was made.
            OSError: the temp dir cannot be made.
        """
        if self.backend == "none":
            raise RuntimeError("no sandbox backend")
        from mind.shell.sandbox import launch
        from mind.shell.sandbox.bwrap import bwrap_argv

        plan = plan_writes(
            self.boundary, overlay=self.backend == "bwrap", max_dirs=self.scan_max_dirs
        )
        tmpdir = os.path.realpath(tempfile.mkdtemp(prefix="mind-sandbox-"))
        command_env = {**env, "TMPDIR": tmpdir}
        b = self.boundary
        # A state root holding a writable root (a workspace inside MIND_HOME)
        # stays visible: hiding it would hide the workspace.
        hidden = [
            r
            for r in b.state_roots
            if os.path.isdir(r) and not any(within(w, r) for w in b.writable_roots)
        ]
        if self.backend == "bwrap":
            fds: tuple[int, ...] = () if b.network else (_filter_fd(),)
            wrapped = bwrap_argv(
                plan,
                argv,
                cwd=str(cwd),
                tmpdir=tmpdir,
                hidden=hidden,
                network=b.network,
                seccomp_fd=fds[0] if fds else None,
            )
            return Confined(argv=wrapped, env=command_env, tmpdir=tmpdir, pass_fds=fds)
        options = launch.launcher_args(
            [*plan.directories, tmpdir],
            list(plan.files),
            network=b.network,
            hidden=hidden,
            # No --parent: the launcher's parent is the command's supervisor
            # (docs/design/processes.md §1), whose pid is not known here; its
            # death signal is armed against the supervisor all the same.
        )
        wrapped = [sys.executable, "-I", "-S", _LAUNCHER, *options, "--", *argv]
        return Confined(argv=wrapped, env=command_env, tmpdir=tmpdir)


def _filter_fd() -> int:
    """A pipe's read end holding :func:`seccomp.program` (bwrap reads it
    whole before starting the command; the program is far below a pipe's
    buffer, so writing never blocks)."""
    from mind.shell.sandbox import seccomp

    code = seccomp.program()
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, code)
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    return read_fd


def release(confined: Confined) -> None:
    """Remove the command's private temp dir (whatever it left there) and
    close the descriptors it was given."""
    for fd in confined.pass_fds:
        os.close(fd)
    shutil.rmtree(confined.tmpdir, ignore_errors=True)


def session_sandbox(boundary: Boundary, *, environ: Mapping[str, str]) -> Sandbox:
    """The sandbox of a session over ``boundary`` (real paths, see
    :func:`mind.shell.tools.session_boundary`), its backend being probed in a
    worker thread (:class:`BackendProbe`; not for ``danger-full-access``,
    which never runs sandboxed).

    mind's state roots are created first (0700) so that they exist to be
    mounted read-only or left out of every grant.

    Raises:
        PrivateStateError: a state root exists but is not private and owned.
        OSError: a state root cannot be created.
    """
    for root in boundary.state_roots:
        private_files.private_dir(Path(root))  # parents 0700 too, whatever the umask
    if boundary.mode == "danger-full-access":
        return Sandbox(boundary=boundary, backend="none", why_none="danger-full-access")
    return Sandbox(boundary=boundary, backend=BackendProbe(environ))
