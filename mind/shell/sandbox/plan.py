"""Which real paths a sandboxed command may write: one plan, two backends.

Rule (``docs/design/boundary.md`` "Sandbox"): a writable root is writable
except the protected paths :class:`~mind.effects.boundary.Boundary` names,
plus ``.git`` / ``.mind`` found at any depth (:func:`nested_protected`; a root
too big to search is refused, never searched partly).
bubblewrap can mount an existing path read-only over a writable one, so a
root stays whole and each existing protected path is overlaid; Landlock only
adds rights over whole hierarchies, so a directory holding a protected path
is split: each other entry is granted, the directory itself is not (new
entries there need approval). Both split around shell startup files that do
not exist yet (no mount can cover a missing file without creating it on the
host). Symbolic links are never granted (a link would grant its target).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from mind.effects.boundary import HOME_PROTECTED, PROTECTED_DIR_NAMES, Boundary
from mind.errors import SandboxRefused

SCAN_MAX_DIRS = 200_000
"""Most directories the search for nested ``.git`` / ``.mind`` opens per
writable root and command (measured: 20k directories take ~150 ms on two
shared cores, so the bound costs ~1.5 s; a large ``node_modules`` tree passes
20k). A root with more is refused (:class:`SandboxRefused`), never searched
partly: an unsearched repository would stay writable."""


@dataclass(frozen=True, slots=True)
class WritePlan:
    """What one sandboxed command may write (real absolute paths).

    Attributes:
        directories: writable throughout (bwrap ``--bind``, Landlock rule).
        files: single non-directories writable in place.
        read_only: existing protected paths beneath ``directories``, to
            overlay read-only (bubblewrap only; empty in a Landlock plan).
        closed: directories left unwritable because they hold a protected
            path: a new entry there needs the person's approval.
    """

    directories: tuple[str, ...]
    files: tuple[str, ...]
    read_only: tuple[str, ...]
    closed: tuple[str, ...]


def nested_protected(root: str, *, max_dirs: int = SCAN_MAX_DIRS) -> list[str]:
    """Every ``.git`` / ``.mind`` entry beneath ``root``, at any depth
    (symlinks are not followed; the inside of a protected directory is not
    searched: it is read-only whole). Unreadable directories are skipped
    (nothing the command could write there either, as the same user).

    Raises:
        SandboxRefused: more than ``max_dirs`` directories to open (fail
            closed: the command would otherwise run with a repository the
            search never reached writable).
    """
    found: list[str] = []
    frontier = [root]
    opened = 0
    while frontier:
        directory = frontier.pop()
        opened += 1
        if opened > max_dirs:
            raise SandboxRefused(
                root,
                f"more than {max_dirs} directories beneath this writable root, so the "
                "sandbox cannot find every nested .git/.mind to keep read-only. Remove "
                "generated trees, make a smaller directory the workspace, or use "
                "--sandbox read-only.",
            )
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    if entry.name in PROTECTED_DIR_NAMES:
                        found.append(entry.path)
                    elif entry.is_dir(follow_symlinks=False):
                        frontier.append(entry.path)
        except OSError:
            continue
    return found


def plan_writes(boundary: Boundary, *, overlay: bool, max_dirs: int = SCAN_MAX_DIRS) -> WritePlan:
    """The write plan of ``boundary`` for a backend that can (``overlay``,
    bubblewrap) or cannot (Landlock) mount a path read-only over a writable one.

    Reads the file system (existence, directory listings) at call time:
    once per command, as the command before may have made directories.
    ``read-only`` and ``danger-full-access`` plans are empty (the latter
    never runs sandboxed).

    Raises:
        SandboxRefused: a root is too big to search (:func:`nested_protected`).
    """
    if boundary.mode != "workspace-write":
        return WritePlan((), (), (), ())
    directories: list[str] = []
    files: list[str] = []
    read_only: list[str] = []
    closed: list[str] = []
    startup = [os.path.join(boundary.home, name) for name in HOME_PROTECTED]
    for root in boundary.writable_roots:
        nested = nested_protected(root, max_dirs=max_dirs)
        protected = [p for p in (*boundary.protected_paths(), *nested) if within(p, root)]
        existing = [p for p in dict.fromkeys(protected) if os.path.lexists(p)]
        if overlay:
            blockers = [p for p in startup if within(p, root) and not os.path.lexists(p)]
            read_only += existing
        else:
            blockers = list(dict.fromkeys([*existing, *(p for p in startup if within(p, root))]))
        _split(root, blockers, directories, files, closed)
    return WritePlan(tuple(directories), tuple(files), tuple(read_only), tuple(closed))


def _split(
    path: str,
    blockers: list[str],
    directories: list[str],
    files: list[str],
    closed: list[str],
) -> None:
    if path in blockers:
        return
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISLNK(mode):
        return
    if not stat.S_ISDIR(mode):
        files.append(path)
        return
    if not any(within(b, path) for b in blockers):
        directories.append(path)
        return
    closed.append(path)
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return
    for name in names:
        _split(os.path.join(path, name), blockers, directories, files, closed)


def within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or beneath it (lexically; both real)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
