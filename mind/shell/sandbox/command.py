"""One shell tool command, confined: argv, environment and private temp dir.

Rule (``docs/design/boundary.md`` "Sandbox"): a command runs inside the
session's :class:`~mind.effects.boundary.Boundary` through the selected
backend; when no backend works it is refused with a message naming
``--sandbox danger-full-access`` — never run unsandboxed silently.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mind.effects.boundary import Boundary
from mind.shell import private_files
from mind.shell.sandbox import launch
from mind.shell.sandbox.backend import Backend, select_backend
from mind.shell.sandbox.bwrap import bwrap_argv
from mind.shell.sandbox.plan import plan_writes, within

_LAUNCHER = str(Path(launch.__file__).resolve())


@dataclass(frozen=True, slots=True)
class Confined:
    """A command ready to start.

    Attributes:
        argv: what to execute (the backend's wrapper, then the command).
        env: the command's whole environment (``TMPDIR`` = :attr:`tmpdir`).
        tmpdir: the private temp dir; the caller removes it with
            :func:`release` after the command ends.
    """

    argv: list[str]
    env: dict[str, str]
    tmpdir: str


_BACKEND_NAMES: dict[Backend, str] = {"bwrap": "bubblewrap", "landlock": "Landlock", "none": "none"}


@dataclass(frozen=True, slots=True)
class Sandbox:
    """The sandbox of one session.

    Attributes:
        boundary: mode and roots (real paths).
        backend: the working backend, or ``none``.
        why_none: for ``none``, why no backend works.
    """

    boundary: Boundary
    backend: Backend
    why_none: str = ""

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
            OSError: the temp dir cannot be made.
        """
        if self.backend == "none":
            raise RuntimeError("no sandbox backend")
        tmpdir = os.path.realpath(tempfile.mkdtemp(prefix="mind-sandbox-"))
        command_env = {**env, "TMPDIR": tmpdir}
        b = self.boundary
        if self.backend == "bwrap":
            plan = plan_writes(b, overlay=True)
            # A state root holding a writable root (a workspace inside MIND_HOME)
            # stays visible: hiding it would hide the workspace.
            hidden = [
                r
                for r in b.state_roots
                if os.path.isdir(r) and not any(within(w, r) for w in b.writable_roots)
            ]
            wrapped = bwrap_argv(
                plan, argv, cwd=str(cwd), tmpdir=tmpdir, hidden=hidden, network=b.network
            )
        else:
            plan = plan_writes(b, overlay=False)
            options = launch.launcher_args(
                [*plan.directories, tmpdir], list(plan.files), network=b.network
            )
            wrapped = [sys.executable, "-I", "-S", _LAUNCHER, *options, "--", *argv]
        return Confined(argv=wrapped, env=command_env, tmpdir=tmpdir)


def release(confined: Confined) -> None:
    """Remove the command's private temp dir (whatever it left there)."""
    shutil.rmtree(confined.tmpdir, ignore_errors=True)


def session_sandbox(boundary: Boundary, *, environ: Mapping[str, str]) -> Sandbox:
    """The sandbox of a session over ``boundary`` (real paths, see
    :func:`mind.shell.tools.session_boundary`), backend probed (not for
    ``danger-full-access``, which never runs sandboxed).

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
    backend, why = select_backend(environ)
    return Sandbox(boundary=boundary, backend=backend, why_none=why)
