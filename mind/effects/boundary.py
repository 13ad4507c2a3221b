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
  (``MIND_HOME``, ``MIND_STATE_HOME``), and the home directory's files that
  run code or grant access later, outside any sandbox (:data:`HOME_PROTECTED`:
  shell startup files, git config, ssh/gpg, PATH directories, login
  autostart, package tool config, credentials stores).
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

HOME_PROTECTED_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Run by the person's next login or interactive shell.
    (
        "a shell startup file",
        (
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
        ),
    ),
    # git runs programs its config names (core.fsmonitor, hooksPath,
    # aliases) on the next `git status` in any repository.
    ("git configuration", (".gitconfig", ".config/git")),
    # authorized_keys grants logins; gpg.conf and agent config run programs.
    ("ssh and gpg keys and configuration", (".ssh", ".gnupg")),
    # Early on PATH: a file there shadows a program the person runs.
    ("a directory on PATH", (".local/bin", "bin")),
    # Started by the desktop or systemd at the next login.
    (
        "started at login",
        (".config/autostart", ".config/systemd/user", ".config/environment.d", ".xprofile"),
    ),
    # Package tools read these on every run: a changed index or script shell
    # runs someone else's code; they also hold upload tokens.
    ("package tool configuration", (".npmrc", ".pypirc", ".config/pip", ".pip")),
    # Credentials and the helper programs that produce them (docker
    # credHelpers and kubeconfig exec plugins run commands).
    ("a credentials store", (".netrc", ".docker/config.json", ".aws", ".kube")),
)
"""Paths relative to the home directory kept read-only for tools, grouped by
why: each runs code or grants access later, outside any sandbox."""

HOME_PROTECTED: tuple[str, ...] = tuple(n for _, names in HOME_PROTECTED_GROUPS for n in names)
"""Every path of :data:`HOME_PROTECTED_GROUPS` (relative to the home directory)."""

DENIED_ROOTS: tuple[str, ...] = ("/proc", "/sys", "/dev")
"""Kernel file systems no file tool reads or writes."""

RefusalKind = Literal["denied", "protected", "outside", "read-only", "unresolved"]
"""Why the boundary refuses a path; what could allow it depends on it:

- ``denied``: a denied root or mind's state; nothing allows it.
- ``protected``: a protected path inside a writable root; only
  ``--sandbox danger-full-access`` (or the person's approval).
- ``outside``: beyond every writable root; ``--add-dir`` or
  ``--sandbox danger-full-access`` (or approval).
- ``read-only``: the sandbox mode is ``read-only``.
- ``unresolved``: where it resolves cannot be told (fail closed).
"""


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the boundary refuses one path.

    Attributes:
        kind: what kind of refusal (:data:`RefusalKind`).
        reason: one line for the model and the approval card.
    """

    kind: RefusalKind
    reason: str


@dataclass(frozen=True, slots=True)
class Boundary:
    """One session's boundary: roots and mode, all as real absolute paths.

    Attributes:
        mode: the sandbox mode.
        writable_roots: the workspace first, then each ``--add-dir``.
        home: the user's home directory (for :data:`HOME_PROTECTED`).
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
        or not: the state roots, :data:`HOME_PROTECTED` and each root's
        top-level ``.git`` / ``.mind`` (deeper ones are found by the caller,
        which can list directories)."""
        paths: list[str] = [*self.state_roots]
        paths += [os.path.join(self.home, name) for name in HOME_PROTECTED]
        for root in self.writable_roots:
            paths += [os.path.join(root, name) for name in PROTECTED_DIR_NAMES]
        return tuple(dict.fromkeys(paths))

    def read_refusal(self, real_path: str) -> Refusal | None:
        """Why a file tool may not read ``real_path`` (always kind ``denied``),
        or None when it may.

        Args:
            real_path: absolute path with every symlink resolved.
        """
        for root in DENIED_ROOTS:
            if _beneath(real_path, root):
                return Refusal(
                    "denied",
                    f"{root} is outside every workspace (it holds process state and secrets)",
                )
        for root in self.state_roots:
            if _beneath(real_path, root):
                return Refusal("denied", "mind's own state is outside every workspace")
        return None

    def write_refusal(self, real_path: str) -> Refusal | None:
        """Why a tool may not write ``real_path`` in this mode, or None.

        Args:
            real_path: absolute path with every symlink resolved (for a path
                that does not exist yet: its parent resolved, then the name).

        Returns:
            None when writable; else the refusal (the person may still
            approve it, except kind ``denied``).
        """
        denied = self.read_refusal(real_path)
        if denied is not None:
            return denied
        if self.mode == "danger-full-access":
            return None
        if self.mode == "read-only":
            return Refusal("read-only", "the sandbox is read-only")
        root = next((r for r in self.writable_roots if _beneath(real_path, r)), None)
        if root is None:
            return Refusal("outside", "outside the workspace's writable roots")
        for why, names in HOME_PROTECTED_GROUPS:
            for name in names:
                if _beneath(real_path, os.path.join(self.home, name)):
                    return Refusal("protected", f"~/{name} is {why} (protected)")
        relative = os.path.relpath(real_path, root)
        parts = [] if relative == "." else relative.split(os.sep)
        for name in PROTECTED_DIR_NAMES:
            if name in parts:
                return Refusal("protected", f"{name}/ is protected (read-only for tools)")
        return None


def _beneath(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
