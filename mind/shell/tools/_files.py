"""File tools: read_file, write_file, list_dir, apply_patch (blocking; run in a worker thread).

Every function returns ``(ok, text)`` for the model and raises nothing but
programming errors: a missing file, a bad patch, a path that resolves
outside the workspace or a refused write is a failed result with a message
that names the path.

Every path is reached through a directory fd of the workspace root opened
once per call (:mod:`._workspace`, :mod:`._beneath`): resolved beneath it by the kernel, and
written, renamed and deleted relative to its parent directory's fd, so no
check-then-use race exists. What may be read or written is decided on the
real path of that fd by :class:`mind.effects.boundary.Boundary`
(``docs/design/boundary.md``, File tools).
"""

from __future__ import annotations

import codecs
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from mind.conversation import replace_lone_surrogates
from mind.effects.patch import (
    AddFile,
    DeleteFile,
    PatchOp,
    UpdateFile,
    apply_hunks,
    parse_patch,
)
from mind.effects.review import FileChange, change_summary
from mind.errors import PatchError, PathRefused
from mind.shell.tools._beneath import describe, relative_to_root
from mind.shell.tools._text import REPLACEMENT, cap_text
from mind.shell.tools._workspace import (
    DIR_FLAGS,
    Target,
    Workspace,
    boundary_reason,
    exists_at,
    open_for_read,
    open_target,
    read_bytes,
    text_at,
    workspace_fd,
)
from mind.shell.tools._workspace import atomic_write as _atomic_write

MAX_LINE_CHARS = 2000
"""Longest line ``read_file`` shows; the rest of the line is cut with a note."""

MAX_DIR_ENTRIES = 1000
"""Most entries ``list_dir`` shows."""

_BINARY_SNIFF_BYTES = 8192

Result = tuple[bool, str]
"""``(ok, text)``: whether the tool succeeded and what the model is told."""


def read_file(ws: Workspace, path: str, offset: int, limit: int, max_bytes: int) -> Result:
    """Lines ``offset .. offset+limit-1`` of a file, numbered like ``cat -n``.

    Lines are split on ``\\n`` only (U+2028 and other Unicode line breaks are
    kept inside their line). Undecodable bytes and NUL become U+FFFD and a
    note says so. Output stops before ``max_bytes`` (UTF-8) with a note
    giving the offset to continue from; lines longer than
    :data:`MAX_LINE_CHARS` are cut (memory stays bounded however long the
    line). Only regular files are read: a FIFO or device could block or
    never end (it is opened ``O_NONBLOCK`` to find out). The file is opened
    beneath the workspace root (:mod:`._beneath`) and refused when its real
    path is a denied root (``/proc``, mind's state).
    """
    try:
        with workspace_fd(ws) as root_fd:
            fd = open_for_read(ws, root_fd, path, os.O_RDONLY | os.O_NONBLOCK)
    except PathRefused as exc:
        return False, str(exc)
    except FileNotFoundError:
        return False, f"{path}: no such file"
    except OSError as exc:
        return False, f"{path}: cannot read: {describe(exc)}"
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            return False, f"{path}: is a directory (use list_dir)"
        return False, f"{path}: not a regular file (a device, FIFO or socket); not read"
    with os.fdopen(fd, "rb") as handle:
        undecodable = b"\x00" in handle.read(_BINARY_SNIFF_BYTES)
        handle.seek(0)
        lines: list[str] = []
        used = 0
        number = 0
        next_offset: int | None = None
        for raw, was_cut in _raw_lines(handle, MAX_LINE_CHARS * 4):
            number += 1
            if number < offset:
                continue
            if number >= offset + limit:
                next_offset = number
                break
            text, clean = _decode(raw, partial_end=was_cut)
            undecodable = undecodable or not clean
            text = text.replace("\x00", REPLACEMENT)
            if was_cut or len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + f" [... line cut at {MAX_LINE_CHARS} characters]"
            line = f"{number:6d}\t{text}\n"
            size = len(line.encode("utf-8"))
            if lines and used + size > max_bytes:
                next_offset = number
                break
            lines.append(line)
            used += size
    notes: list[str] = []
    if undecodable:
        notes.append("[the file is not valid UTF-8 text; undecodable bytes are shown as U+FFFD]")
    if next_offset is not None:
        notes.append(f"[more lines follow; continue with offset={next_offset}]")
    if not lines:
        if number == 0:
            return True, f"{path}: empty file"
        return True, f"{path}: no lines at offset {offset}; the file has {number} lines"
    body = cap_text("".join(lines), max_bytes)
    return True, body + "".join(f"{note}\n" for note in notes)


def _raw_lines(handle: BinaryIO, max_line_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Lines without their ``\\n``, at most ``max_line_bytes`` each; True when cut."""
    while True:
        chunk = handle.readline(max_line_bytes)
        if not chunk:
            return
        if chunk.endswith(b"\n"):
            yield chunk[:-1], False
            continue
        if len(chunk) < max_line_bytes:
            yield chunk, False  # last line, no final newline
            continue
        cut = False
        while more := handle.readline(max_line_bytes):
            cut = cut or more != b"\n"
            if more.endswith(b"\n"):
                break
        yield chunk, cut


def _decode(raw: bytes, *, partial_end: bool) -> tuple[str, bool]:
    """UTF-8 text of ``raw`` and whether it was valid; a cut line may end mid-character."""
    try:
        text, _ = codecs.utf_8_decode(raw, "strict", not partial_end)
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), False
    return text, True


def write_file(
    ws: Workspace,
    path: str,
    content: str,
    approved: Sequence[FileChange] | None = None,
    *,
    consent: bool = False,
) -> Result:
    """Replace or create a whole file atomically; report the bytes written and
    the lines added and removed (``+N −M``, when the old file was readable text).

    The file is reached through fds beneath the workspace root; missing
    parent directories are created (never the root itself: a deleted root
    is an error).

    Args:
        approved: the change the person approved (its ``before`` read at
            approval time); when the file no longer holds that, nothing is
            written.
        consent: the person approved this call, so a path the boundary
            refuses (outside the writable roots, protected) may be written;
            a denied root (``/proc``, mind's state) never is.
    """
    data = content.encode("utf-8", errors="replace")
    try:
        with workspace_fd(ws) as root_fd:
            target = open_target(ws, root_fd, path, consent=consent)
            try:
                return _write_target(target, path, data, approved)
            finally:
                target.close()
    except PathRefused as exc:
        return False, str(exc)
    except IsADirectoryError:
        return False, f"{path}: is a directory"
    except OSError as exc:
        return False, f"{path}: cannot write: {describe(exc)}"


def _write_target(
    target: Target, path: str, data: bytes, approved: Sequence[FileChange] | None
) -> Result:
    existed = exists_at(target)
    try:
        before = text_at(target)
    except (OSError, UnicodeDecodeError, ValueError):
        before = ""  # unreadable or too large: no line counts, the write goes on
        stat_known = False
    else:
        stat_known = True
    if approved and (not stat_known or approved[0].before != before):
        return False, f"{path} was not written: {_changed_since_approval(path)}"
    _atomic_write(target, data)
    verb = "overwrote" if existed else "created"
    change = FileChange(path, before, data.decode("utf-8"))
    counts = "; " + change_summary(change).rsplit("  ", 1)[1] if stat_known else ""
    return True, f"{verb} {path} ({len(data)} bytes{counts})"


def current_text(ws: Workspace, path: str) -> str | None:
    """The text of ``path`` now, read as the tools read (beneath the root),
    or None when it does not exist.

    Raises:
        PathRefused: a denied root, or where it resolves cannot be told.
        IsADirectoryError: it is a directory.
        ValueError: it is larger than :data:`MAX_PREVIEW_BYTES`.
        UnicodeDecodeError: it is not UTF-8 text.
        OSError: it cannot be read.
    """
    with workspace_fd(ws) as root_fd:
        return _read_text(ws, root_fd, path)


def _read_text(ws: Workspace, root_fd: int, path: str) -> str | None:
    raw = read_bytes(ws, root_fd, path)
    return None if raw is None else raw.decode("utf-8")


def preview_changes(
    ws: Workspace, name: str, args: dict[str, Any]
) -> tuple[list[FileChange], str | None]:
    """How a file tool call would change files, read from the files now.

    Returns:
        ``(changes, problem)``: every file as the call would leave it, and
        None; or ``[]`` and why the change cannot be shown (a patch that does
        not apply, a file that is not text, a refused path). Other tools:
        ``([], None)``.
    """
    try:
        if name == "write_file":
            before = current_text(ws, str(args["path"]))
            return [FileChange(str(args["path"]), before, str(args["content"]))], None
        if name == "apply_patch":
            return _plan_patch(ws, parse_patch(str(args["patch"]))).changes, None
    except PatchError as exc:
        return [], f"the patch does not apply: {exc}"
    except PathRefused as exc:
        return [], str(exc)
    except IsADirectoryError as exc:
        return [], f"{exc.filename or args.get('path')}: is a directory"
    except UnicodeDecodeError:
        return [], "the current file is not UTF-8 text"
    except ValueError as exc:
        return [], f"the current file is {exc}"
    except OSError as exc:
        return [], f"cannot read the current file: {describe(exc)}"
    return [], None


def list_dir(ws: Workspace, path: str, max_bytes: int) -> Result:
    """Entries of one directory, sorted by name, dirs with ``/``, links as
    ``name -> target``; the directory is opened beneath the workspace root
    and refused when its real path is a denied root (``/proc``)."""
    try:
        with workspace_fd(ws) as root_fd:
            fd = open_for_read(ws, root_fd, path, DIR_FLAGS)
    except PathRefused as exc:
        return False, str(exc)
    except FileNotFoundError:
        return False, f"{path}: no such directory"
    except NotADirectoryError:
        return False, f"{path}: not a directory (use read_file)"
    except OSError as exc:
        return False, f"{path}: cannot list: {describe(exc)}"
    try:
        with os.scandir(fd) as scan:
            entries = sorted(scan, key=lambda e: e.name)
        lines: list[str] = []
        for entry in entries[:MAX_DIR_ENTRIES]:
            # A name that is not UTF-8 arrives surrogate-escaped; U+FFFD keeps it printable.
            name = replace_lone_surrogates(entry.name)
            try:
                if entry.is_symlink():
                    link = os.readlink(entry.name, dir_fd=fd)
                    name = f"{name} -> {replace_lone_surrogates(link)}"
                elif entry.is_dir():
                    name += "/"
            except OSError:
                pass
            lines.append(name + "\n")
    except OSError as exc:
        return False, f"{path}: cannot list: {describe(exc)}"
    finally:
        os.close(fd)
    if not entries:
        return True, f"{path}: empty directory"
    text = cap_text("".join(lines), max_bytes)
    if len(entries) > MAX_DIR_ENTRIES:
        text += f"[... {len(entries) - MAX_DIR_ENTRIES} more entries not shown]\n"
    return True, text


@dataclass
class _Plan:
    """A patch computed in memory: what each path holds now and will hold.

    Keys are the paths as the patch names them, joined to the root without
    folding ``..`` (``link/..`` is the kernel's to resolve).
    """

    originals: dict[str, bytes | None] = field(default_factory=dict)
    planned: dict[str, str | None] = field(default_factory=dict)
    changes: list[FileChange] = field(default_factory=list)


def _key(ws: Workspace, path: str) -> str:
    return path if os.path.isabs(path) else os.path.join(ws.root, path)


def _shown(ws: Workspace, key: str) -> str:
    """A plan key as the patch named it (relative when beneath the root)."""
    rel = relative_to_root(ws.root, str(key))
    return key if rel is None else rel


def _plan_patch(ws: Workspace, ops: list[PatchOp]) -> _Plan:
    """Read the files a parsed patch touches and compute every change in memory.

    Raises:
        PatchError: the patch does not apply (path named).
        PathRefused: a path the boundary never lets a tool read.
        IsADirectoryError: a path is a directory.
        OSError: a file cannot be read.
    """
    plan = _Plan()
    originals, planned = plan.originals, plan.planned
    with workspace_fd(ws) as root_fd:

        def current(key: str) -> str | None:
            if key in planned:
                return planned[key]
            if key not in originals:
                originals[key] = read_bytes(ws, root_fd, key)
            raw = originals[key]
            if raw is None:
                return None
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                raise PatchError(f"{key}: not UTF-8 text; cannot patch it") from None

        for op in ops:
            target = _key(ws, op.path)
            if isinstance(op, AddFile):
                if current(target) is not None:
                    raise PatchError(f"{op.path}: already exists (use Update File to change it)")
                planned[target] = op.content
                plan.changes.append(FileChange(op.path, None, op.content))
            elif isinstance(op, DeleteFile):
                old = current(target)
                if old is None:
                    raise PatchError(f"{op.path}: cannot delete, no such file")
                planned[target] = None
                plan.changes.append(FileChange(op.path, old, None))
            elif isinstance(op, UpdateFile):
                old = current(target)
                if old is None:
                    raise PatchError(f"{op.path}: cannot update, no such file")
                new = apply_hunks(op.path, old, op.hunks)
                if op.move_to is not None and _key(ws, op.move_to) != target:
                    destination = _key(ws, op.move_to)
                    if current(destination) is not None:
                        raise PatchError(f"{op.move_to}: cannot move there, the file exists")
                    planned[target] = None
                    planned[destination] = new
                    plan.changes.append(FileChange(op.path, old, new, move_to=op.move_to))
                else:
                    planned[target] = new
                    plan.changes.append(FileChange(op.path, old, new))
    return plan


def _changed_since_approval(path: str) -> str:
    return (
        f"{path} changed after the approval was asked, so the change shown is not the "
        "one that would be made; ask again if it is still wanted"
    )


def apply_patch(
    ws: Workspace,
    patch: str,
    approved: Sequence[FileChange] | None = None,
    *,
    consent: bool = False,
) -> Result:
    """Apply an ``apply_patch`` envelope all-or-nothing.

    Every operation is computed in memory first (files read, hunks matched,
    existence checked) and every path to write is resolved and judged by the
    boundary; only when all succeed are files written (atomically, one by
    one, through their parent directory fds). If a write fails midway, files
    already changed are put back as they were. The result lists each file
    with the lines it gained and lost (``M path  +3 −1``).

    Args:
        approved: the changes the person approved (computed at approval
            time); when the patch would now change anything differently,
            nothing is written.
        consent: as for :func:`write_file`.
    """
    try:
        ops = parse_patch(patch)
    except PatchError as exc:
        return False, f"patch not applied: {exc}"
    try:
        plan = _plan_patch(ws, ops)
    except (PatchError, PathRefused) as exc:
        return False, f"patch not applied (no file was changed): {exc}"
    except IsADirectoryError as exc:
        return False, f"patch not applied (no file was changed): {exc.filename}: is a directory"
    except OSError as exc:
        shown = exc.filename or "a file"
        return False, f"patch not applied (no file was changed): {shown}: {describe(exc)}"
    if approved is not None and plan.changes != list(approved):
        differs = next(
            (a.path for a, b in zip(approved, plan.changes, strict=False) if a != b),
            plan.changes[0].path if plan.changes else "a file",
        )
        return False, f"patch not applied (no file was changed): {_changed_since_approval(differs)}"
    try:
        with workspace_fd(ws) as root_fd:
            return _apply_plan(ws, root_fd, plan, consent)
    except PathRefused as exc:
        return False, f"patch not applied (no file was changed): {exc}"


def _apply_plan(ws: Workspace, root_fd: int, plan: _Plan, consent: bool) -> Result:
    if not consent:
        # Judge every path before any directory is made for the first one.
        for key, content in plan.planned.items():
            refusal = boundary_reason(ws, key, "write" if content is not None else "unlink")
            if refusal is not None:
                shown = _shown(ws, key)
                return False, f"patch not applied (no file was changed): {shown}: {refusal.reason}"
    targets: dict[str, Target] = {}
    try:
        try:
            for key, content in plan.planned.items():
                # A name deleted or moved away goes itself: a link is not followed.
                follow = content is not None
                targets[key] = open_target(ws, root_fd, key, consent=consent, follow=follow)
        except PathRefused as exc:
            shown = _shown(ws, exc.path)
            return False, f"patch not applied (no file was changed): {shown}: {exc.reason}"
        except OSError as exc:
            shown = _shown(ws, exc.filename or key)
            return False, f"patch not applied (no file was changed): {shown}: {describe(exc)}"
        done: list[str] = []
        try:
            for key, content in plan.planned.items():
                target = targets[key]
                if content is None:
                    if plan.originals.get(key) is not None:
                        os.unlink(target.name, dir_fd=target.parent_fd)
                        os.fsync(target.parent_fd)
                else:
                    _atomic_write(target, content.encode("utf-8", errors="replace"))
                done.append(key)
        except OSError as exc:
            _restore([targets[k] for k in done], [plan.originals.get(k) for k in done])
            return False, f"patch not applied (changes were rolled back): {exc}"
    finally:
        for target in targets.values():
            target.close()
    summary = [change_summary(c) for c in plan.changes]
    return True, "applied patch:\n" + "\n".join(summary) + "\n"


def _restore(targets: list[Target], originals: list[bytes | None]) -> None:
    for target, before in reversed(list(zip(targets, originals, strict=True))):
        try:
            if before is None:
                os.unlink(target.name, dir_fd=target.parent_fd)
            else:
                _atomic_write(target, before)
        except OSError:
            continue
