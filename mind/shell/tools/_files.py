"""File tools: read_file, write_file, list_dir, apply_patch (blocking; run in a worker thread).

Every function returns ``(ok, text)`` for the model and raises nothing but
programming errors: a missing file, a bad patch or a refused write is a
failed result with a message that names the path.
"""

from __future__ import annotations

import codecs
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
from mind.errors import PatchError
from mind.shell.tools._text import REPLACEMENT, cap_text

MAX_LINE_CHARS = 2000
"""Longest line ``read_file`` shows; the rest of the line is cut with a note."""

MAX_DIR_ENTRIES = 1000
"""Most entries ``list_dir`` shows."""

_BINARY_SNIFF_BYTES = 8192

MAX_PREVIEW_BYTES = 8 * 1024 * 1024
"""Largest current file read to show a change against it (bytes)."""

Result = tuple[bool, str]
"""``(ok, text)``: whether the tool succeeded and what the model is told."""


def resolve(cwd: Path, path: str) -> Path:
    """``path`` as given when absolute, else relative to ``cwd``; ``~`` is not expanded."""
    return cwd / path


def read_file(cwd: Path, path: str, offset: int, limit: int, max_bytes: int) -> Result:
    """Lines ``offset .. offset+limit-1`` of a file, numbered like ``cat -n``.

    Lines are split on ``\\n`` only (U+2028 and other Unicode line breaks are
    kept inside their line). Undecodable bytes and NUL become U+FFFD and a
    note says so. Output stops before ``max_bytes`` (UTF-8) with a note
    giving the offset to continue from; lines longer than
    :data:`MAX_LINE_CHARS` are cut (memory stays bounded however long the
    line). Only regular files are read: a FIFO or device could block or
    never end.
    """
    target = resolve(cwd, path)
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return False, f"{path}: no such file"
    except OSError as exc:
        return False, f"{path}: cannot read: {exc.strerror or exc}"
    if stat.S_ISDIR(mode):
        return False, f"{path}: is a directory (use list_dir)"
    if not stat.S_ISREG(mode):
        return False, f"{path}: not a regular file (a device, FIFO or socket); not read"
    try:
        handle = target.open("rb")
    except OSError as exc:
        return False, f"{path}: cannot read: {exc.strerror or exc}"
    with handle:
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
    cwd: Path, path: str, content: str, approved: Sequence[FileChange] | None = None
) -> Result:
    """Replace or create a whole file atomically; report the bytes written and
    the lines added and removed (``+N −M``, when the old file was readable text).

    ``approved``: the change the person approved (its ``before`` read at
    approval time); when the file no longer holds that, nothing is written.
    """
    target = resolve(cwd, path)
    data = content.encode("utf-8", errors="replace")
    existed = target.exists()
    try:
        before = current_text(target)
    except (OSError, UnicodeDecodeError, ValueError):
        before = ""  # unreadable or too large: no line counts, the write goes on
        stat_known = False
    else:
        stat_known = True
    if approved and (not stat_known or approved[0].before != before):
        return False, f"{path} was not written: {_changed_since_approval(path)}"
    try:
        _atomic_write(target, data)
    except IsADirectoryError:
        return False, f"{path}: is a directory"
    except OSError as exc:
        return False, f"{path}: cannot write: {exc.strerror or exc}"
    verb = "overwrote" if existed else "created"
    change = FileChange(path, before, data.decode("utf-8"))
    counts = "; " + change_summary(change).rsplit("  ", 1)[1] if stat_known else ""
    return True, f"{verb} {path} ({len(data)} bytes{counts})"


def current_text(target: Path) -> str | None:
    """The text of ``target`` now, or None when it does not exist.

    Raises:
        IsADirectoryError: it is a directory.
        ValueError: it is larger than :data:`MAX_PREVIEW_BYTES`.
        UnicodeDecodeError: it is not UTF-8 text.
        OSError: it cannot be read.
    """
    try:
        with target.open("rb") as handle:
            raw = handle.read(MAX_PREVIEW_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(raw) > MAX_PREVIEW_BYTES:
        raise ValueError(f"larger than {MAX_PREVIEW_BYTES} bytes")
    return raw.decode("utf-8")


def preview_changes(
    cwd: Path, name: str, args: dict[str, Any]
) -> tuple[list[FileChange], str | None]:
    """How a file tool call would change files, read from the files now.

    Returns:
        ``(changes, problem)``: every file as the call would leave it, and
        None; or ``[]`` and why the change cannot be shown (a patch that does
        not apply, a file that is not text). Other tools: ``([], None)``.
    """
    try:
        if name == "write_file":
            target = resolve(cwd, str(args["path"]))
            before = current_text(target)
            return [FileChange(str(args["path"]), before, str(args["content"]))], None
        if name == "apply_patch":
            return _plan_patch(cwd, parse_patch(str(args["patch"]))).changes, None
    except PatchError as exc:
        return [], f"the patch does not apply: {exc}"
    except IsADirectoryError as exc:
        return [], f"{exc.filename or args.get('path')}: is a directory"
    except UnicodeDecodeError:
        return [], "the current file is not UTF-8 text"
    except ValueError as exc:
        return [], f"the current file is {exc}"
    except OSError as exc:
        return [], f"cannot read the current file: {exc.strerror or exc}"
    return [], None


def list_dir(cwd: Path, path: str, max_bytes: int) -> Result:
    """Entries of one directory, sorted by name, dirs with ``/``, links as ``name -> target``."""
    target = resolve(cwd, path)
    try:
        with os.scandir(target) as scan:
            entries = sorted(scan, key=lambda e: e.name)
    except FileNotFoundError:
        return False, f"{path}: no such directory"
    except NotADirectoryError:
        return False, f"{path}: not a directory (use read_file)"
    except OSError as exc:
        return False, f"{path}: cannot list: {exc.strerror or exc}"
    if not entries:
        return True, f"{path}: empty directory"
    lines: list[str] = []
    for entry in entries[:MAX_DIR_ENTRIES]:
        # A name that is not UTF-8 arrives surrogate-escaped; U+FFFD keeps it printable.
        name = replace_lone_surrogates(entry.name)
        try:
            if entry.is_symlink():
                name = f"{name} -> {replace_lone_surrogates(os.readlink(entry.path))}"
            elif entry.is_dir():
                name += "/"
        except OSError:
            pass
        lines.append(name + "\n")
    text = cap_text("".join(lines), max_bytes)
    if len(entries) > MAX_DIR_ENTRIES:
        text += f"[... {len(entries) - MAX_DIR_ENTRIES} more entries not shown]\n"
    return True, text


@dataclass
class _Plan:
    """A patch computed in memory: what each path holds now and will hold."""

    originals: dict[Path, bytes | None] = field(default_factory=dict)
    planned: dict[Path, str | None] = field(default_factory=dict)
    changes: list[FileChange] = field(default_factory=list)


def _plan_patch(cwd: Path, ops: list[PatchOp]) -> _Plan:
    """Read the files a parsed patch touches and compute every change in memory.

    Raises:
        PatchError: the patch does not apply (path named).
        IsADirectoryError: a path is a directory.
        OSError: a file cannot be read.
    """
    plan = _Plan()
    originals, planned = plan.originals, plan.planned

    def current(path: Path) -> str | None:
        if path in planned:
            return planned[path]
        if path not in originals:
            try:
                originals[path] = path.read_bytes()
            except FileNotFoundError:
                originals[path] = None
        raw = originals[path]
        if raw is None:
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise PatchError(f"{path}: not UTF-8 text; cannot patch it") from None

    for op in ops:
        target = resolve(cwd, op.path)
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
            if op.move_to is not None and resolve(cwd, op.move_to) != target:
                destination = resolve(cwd, op.move_to)
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


def apply_patch(cwd: Path, patch: str, approved: Sequence[FileChange] | None = None) -> Result:
    """Apply an ``apply_patch`` envelope all-or-nothing.

    Every operation is computed in memory first (files read, hunks matched,
    existence checked); only when all succeed are files written (atomically,
    one by one). If a write fails midway, files already changed are put back
    as they were. The result lists each file with the lines it gained and
    lost (``M path  +3 −1``).

    ``approved``: the changes the person approved (computed at approval
    time); when the patch would now change anything differently, nothing is
    written.
    """
    try:
        ops = parse_patch(patch)
    except PatchError as exc:
        return False, f"patch not applied: {exc}"
    try:
        plan = _plan_patch(cwd, ops)
    except PatchError as exc:
        return False, f"patch not applied (no file was changed): {exc}"
    except IsADirectoryError as exc:
        return False, f"patch not applied (no file was changed): {exc.filename}: is a directory"
    except OSError as exc:
        return False, f"patch not applied (no file was changed): {exc}"
    if approved is not None and plan.changes != list(approved):
        differs = next(
            (a.path for a, b in zip(approved, plan.changes, strict=False) if a != b),
            plan.changes[0].path if plan.changes else "a file",
        )
        return False, f"patch not applied (no file was changed): {_changed_since_approval(differs)}"

    done: list[Path] = []
    try:
        for path, content in plan.planned.items():
            if content is None:
                if plan.originals.get(path) is not None:
                    path.unlink()
            else:
                _atomic_write(path, content.encode("utf-8", errors="replace"))
            done.append(path)
    except OSError as exc:
        _restore(done, plan.originals)
        return False, f"patch not applied (changes were rolled back): {exc}"
    summary = [change_summary(c) for c in plan.changes]
    return True, "applied patch:\n" + "\n".join(summary) + "\n"


def _restore(paths: list[Path], originals: dict[Path, bytes | None]) -> None:
    for path in reversed(paths):
        before = originals.get(path)
        try:
            if before is None:
                path.unlink(missing_ok=True)
            else:
                _atomic_write(path, before)
        except OSError:
            continue


def _atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` via a temporary file, fsync and rename.

    Parent directories are created. A symlink is written through (the link
    stays, its target changes). An existing file keeps its permission bits;
    a new one gets ``0o666`` minus the umask.

    Raises:
        OSError: the file cannot be written; ``target`` is unchanged.
    """
    if target.is_symlink():
        target = Path(os.path.realpath(target))
    if target.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(target))
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None
    temporary = parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_dir(parent)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
