"""The workspace boundary: which real paths a tool may write or read.

Pure: decided from real (symlink-free, absolute) paths the shell has already
resolved with the kernel — the file tools resolve beneath a directory fd,
the sandbox mounts or rules the same roots. This module is the one owner of
the protected-path fact; the sandbox (:mod:`mind.shell.sandbox`) and the file
tools (:mod:`mind.shell.tools`) both ask it (``docs/design/boundary.md``).

Rules (sandbox modes as Codex CLI names them):

- ``read-only``: nothing is writable.
- ``workspace-write``: paths beneath a writable root (the workspace and each
  ``--add-dir``) are writable, except protected paths: a ``.git`` or
  ``.mind`` directory at any depth, mind's own config and state roots
  (``MIND_HOME``, ``MIND_STATE_HOME``), and the shell startup files in the
  home directory (they run on the person's next login, outside any sandbox).
- ``danger-full-access``: everything the user can write is writable.

Whatever the mode, ``/proc``, ``/sys``, ``/dev`` and mind's state roots are
outside every workspace: no file tool reads or writes them (``/proc`` holds
mind's own environment, which holds its API keys).
"""

from __future__ import annotations

import os.path
from dataclasses import dataclass, field
from typing import Literal, get_args

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
"""What a tool may change (see the module rules)."""

SANDBOX_MODES: tuple[SandboxMode, ...] = get_args(SandboxMode)

PROTECTED_DIR_NAMES: tuple[str, ...] = (".git", ".mind")
"""Directory names read-only at any depth beneath a writable root."""

SHELL_STARTUP_FILES: tuple[str, ...] = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish",
)
"""Paths relative to the home directory that a login or interactive shell runs."""

DENIED_ROOTS: tuple[str, ...] = ("/proc", "/sys", "/dev")
"""Kernel file systems no file tool reads or writes."""


@dataclass(frozen=True, slots=True)
class Boundary:
    """One session's boundary: roots and mode, all as real absolute paths.

    Attributes:
        mode: the sandbox mode.
        writable_roots: the workspace first, then each ``--add-dir``.
        home: the user's home directory (for :data:`SHELL_STARTUP_FILES`).
        state_roots: ``MIND_HOME`` and ``MIND_STATE_HOME`` (may be equal).
        network: whether sandboxed commands may use the network.
    """

    mode: SandboxMode
    writable_roots: tuple[str, ...]
    home: str
    state_roots: tuple[str, ...] = field(default=())
    network: bool = False

    def protected_paths(self) -> tuple[str, ...]:
        """Absolute paths kept read-only inside the writable roots, existing
        or not: the state roots, the shell startup files and each root's
        top-level ``.git`` / ``.mind`` (deeper ones are found by the caller,
        which can list directories)."""
        paths: list[str] = [*self.state_roots]
        paths += [os.path.join(self.home, name) for name in SHELL_STARTUP_FILES]
        for root in self.writable_roots:
            paths += [os.path.join(root, name) for name in PROTECTED_DIR_NAMES]
        return tuple(dict.fromkeys(paths))

    def read_refusal(self, real_path: str) -> str | None:
        """Why a file tool may not read ``real_path``, or None when it may.

        Args:
            real_path: absolute path with every symlink resolved.
        """
        for root in DENIED_ROOTS:
            if _beneath(real_path, root):
                return f"{root} is outside every workspace (it holds process state and secrets)"
        for root in self.state_roots:
            if _beneath(real_path, root):
                return "mind's own state is outside every workspace"
        return None

    def write_refusal(self, real_path: str) -> str | None:
        """Why a tool may not write ``real_path`` in this mode, or None.

        Args:
            real_path: absolute path with every symlink resolved (for a path
                that does not exist yet: its parent resolved, then the name).

        Returns:
            None when writable; else one line for the model and the approval
            card (the person may still approve it, except a read refusal).
        """
        denied = self.read_refusal(real_path)
        if denied is not None:
            return denied
        if self.mode == "danger-full-access":
            return None
        if self.mode == "read-only":
            return "the sandbox is read-only"
        root = next((r for r in self.writable_roots if _beneath(real_path, r)), None)
        if root is None:
            return "outside the workspace's writable roots"
        for startup in SHELL_STARTUP_FILES:
            if _beneath(real_path, os.path.join(self.home, startup)):
                return f"~/{startup} is a shell startup file (protected)"
        relative = os.path.relpath(real_path, root)
        parts = [] if relative == "." else relative.split(os.sep)
        for name in PROTECTED_DIR_NAMES:
            if name in parts:
                return f"{name}/ is protected (read-only for tools)"
        return None


def _beneath(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
