"""Which real paths a sandboxed command may write: one plan, two backends.

Rule (``docs/design/boundary.md`` "Sandbox"): a writable root is writable
except the protected paths :class:`~mind.effects.boundary.Boundary` names,
plus ``.git`` / ``.mind`` found deeper (:func:`nested_protected`, bounded).
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

SCAN_DEPTH = 3
"""Directory levels below a writable root searched for ``.git`` / ``.mind``."""

SCAN_MAX_DIRS = 2000
"""Most directories the search opens per root (a huge tree is searched partly;
its deeper repositories keep only what their top-level protection gives)."""

_SKIP_SCAN = frozenset({"node_modules", ".venv", "__pycache__", *PROTECTED_DIR_NAMES})


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


def nested_protected(root: str) -> list[str]:
    """``.git`` / ``.mind`` entries beneath ``root`` down to :data:`SCAN_DEPTH`
    levels, at most :data:`SCAN_MAX_DIRS` directories opened; symlinks are not
    followed. Unreadable directories are skipped."""
    found: list[str] = []
    frontier = [(root, 0)]
    opened = 0
    while frontier and opened < SCAN_MAX_DIRS:
        directory, depth = frontier.pop()
        opened += 1
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if entry.name in PROTECTED_DIR_NAMES:
                found.append(entry.path)
            elif (
                depth < SCAN_DEPTH
                and entry.name not in _SKIP_SCAN
                and entry.is_dir(follow_symlinks=False)
            ):
                frontier.append((entry.path, depth + 1))
    return found


def plan_writes(boundary: Boundary, *, overlay: bool) -> WritePlan:
    """The write plan of ``boundary`` for a backend that can (``overlay``,
    bubblewrap) or cannot (Landlock) mount a path read-only over a writable one.

    Reads the file system (existence, directory listings) at call time.
    ``read-only`` and ``danger-full-access`` plans are empty (the latter
    never runs sandboxed).
    """
    if boundary.mode != "workspace-write":
        return WritePlan((), (), (), ())
    directories: list[str] = []
    files: list[str] = []
    read_only: list[str] = []
    closed: list[str] = []
    startup = [os.path.join(boundary.home, name) for name in HOME_PROTECTED]
    for root in boundary.writable_roots:
        protected = [
            p for p in (*boundary.protected_paths(), *nested_protected(root)) if within(p, root)
        ]
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
