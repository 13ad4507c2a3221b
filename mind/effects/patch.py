"""The ``apply_patch`` envelope: a pure parser and a pure hunk applier.

The format is the one Codex CLI models are trained on (openai/codex,
``apply_patch`` tool)::

    *** Begin Patch
    *** Add File: path/new.txt
    +first line
    +second line
    *** Delete File: path/old.txt
    *** Update File: path/src.py
    *** Move to: path/dst.py            (optional rename)
    @@ def f():                         (optional: a line to seek to first)
     context line
    -removed line
    +added line
    *** End of File                     (optional: the hunk ends the file)
    *** End Patch

Leniency, kept small on purpose: marker lines may carry surrounding
whitespace; a completely empty line inside a hunk counts as an empty context
line; the first hunk of an update may omit its ``@@`` line.

Nothing here touches the file system: :func:`parse_patch` turns text into
operations and :func:`apply_hunks` turns one file's old text into its new text.
The shell (:mod:`mind.shell.tools`) reads, validates every operation, and
only then writes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from mind.errors import PatchError

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File:"
DELETE = "*** Delete File:"
UPDATE = "*** Update File:"
MOVE = "*** Move to:"
END_OF_FILE = "*** End of File"

_SHOWN_LINES = 8
"""Lines of a failing hunk quoted back in an error message."""


HunkLine = tuple[Literal[" ", "-", "+"], str]
"""One hunk line: its kind (context, removed, added) and its text."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One ``@@`` block of an update.

    Attributes:
        anchor: the text after ``@@`` (a line to find before matching), or None.
        lines: the hunk's lines in order.
        end_of_file: the hunk was followed by ``*** End of File``.
        line: 1-based line of the hunk's first line in the patch text.
    """

    anchor: str | None
    lines: tuple[HunkLine, ...]
    end_of_file: bool
    line: int

    @property
    def old_lines(self) -> tuple[str, ...]:
        """Context and removed lines, in order: what must match the file."""
        return tuple(text for kind, text in self.lines if kind != "+")

    @property
    def new_lines(self) -> tuple[str, ...]:
        """Context and added lines, in order: what replaces the match."""
        return tuple(text for kind, text in self.lines if kind != "-")


@dataclass(frozen=True, slots=True)
class AddFile:
    """Create ``path`` with ``content`` (``""`` or text ending in a newline)."""

    path: str
    content: str


@dataclass(frozen=True, slots=True)
class DeleteFile:
    """Remove the file ``path``."""

    path: str


@dataclass(frozen=True, slots=True)
class UpdateFile:
    """Apply ``hunks`` to ``path`` in order, then rename it to ``move_to`` if set."""

    path: str
    move_to: str | None
    hunks: tuple[Hunk, ...]


PatchOp = AddFile | DeleteFile | UpdateFile


def parse_patch(text: str) -> list[PatchOp]:
    """Parse an ``apply_patch`` envelope.

    Args:
        text: the whole patch, from ``*** Begin Patch`` to ``*** End Patch``.

    Returns:
        The operations in patch order (at least one).

    Raises:
        PatchError: the envelope is malformed; the message names the 1-based
            patch line and what was expected there.
    """
    lines = text.strip().split("\n")
    lines = [line.removesuffix("\r") for line in lines]
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with {BEGIN!r}")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchError(f"the patch must end with {END!r}")
    body = lines[1:-1]
    ops: list[PatchOp] = []
    i = 0
    while i < len(body):
        number = i + 2  # 1-based line in the patch text
        header = body[i].strip()
        if header.startswith(ADD):
            path = _path(header, ADD, number)
            i += 1
            added: list[str] = []
            while i < len(body) and not _is_header(body[i]):
                if not body[i].strip() and _only_blank_until_header(body, i):
                    i = _next_header(body, i)
                    break
                if not body[i].startswith("+"):
                    raise PatchError(
                        f"patch line {i + 2}: every line of an added file must start with '+'"
                    )
                added.append(body[i][1:])
                i += 1
            ops.append(AddFile(path, "".join(f"{line}\n" for line in added)))
        elif header.startswith(DELETE):
            ops.append(DeleteFile(_path(header, DELETE, number)))
            i += 1
        elif header.startswith(UPDATE):
            path = _path(header, UPDATE, number)
            i += 1
            move_to: str | None = None
            if i < len(body) and body[i].strip().startswith(MOVE):
                move_to = _path(body[i].strip(), MOVE, i + 2)
                i += 1
            start = i
            while i < len(body) and not _is_header(body[i]):
                i += 1
            hunks = _parse_hunks(body[start:i], first_line=start + 2)
            if not hunks and move_to is None:
                raise PatchError(f"patch line {number}: update of {path!r} has no hunks")
            ops.append(UpdateFile(path, move_to, tuple(hunks)))
        elif not header:
            i += 1  # blank line between file sections
        else:
            raise PatchError(
                f"patch line {number}: expected {ADD!r}, {DELETE!r} or {UPDATE!r}, got {body[i]!r}"
            )
    if not ops:
        raise PatchError("the patch contains no file operations")
    return ops


def patch_paths(ops: Sequence[PatchOp]) -> list[str]:
    """Every path an operation list writes, deletes or moves to, in order, without repeats."""
    paths: list[str] = []
    for op in ops:
        for path in (op.path, op.move_to if isinstance(op, UpdateFile) else None):
            if path is not None and path not in paths:
                paths.append(path)
    return paths


def apply_hunks(path: str, original: str, hunks: Sequence[Hunk]) -> str:
    """Apply an update's hunks to one file's text.

    Each hunk is searched from the end of the previous one: first an exact
    match of its old lines, then a match ignoring trailing whitespace
    (which also absorbs CRLF line ends). An ``@@ anchor`` is found first and
    the hunk is searched after it; an ``*** End of File`` hunk is tried at
    the end of the file first. A hunk without old lines inserts after its
    anchor, or at the end of the file when it has none.

    Context lines keep the file's own text (a tolerant match does not strip
    the file's trailing whitespace). CRLF files keep CRLF line ends; the
    presence or absence of a final newline is kept (an empty file gains one).

    Args:
        path: the file's path as written in the patch (for messages only).
        original: the file's current text.
        hunks: the hunks, in patch order.

    Returns:
        The new text of the file.

    Raises:
        PatchError: a hunk or anchor does not match; the message names the
            file, the hunk's number and patch line, and quotes the lines sought.
    """
    eol = "\r\n" if "\r\n" in original else "\n"
    final_newline = original == "" or original.endswith("\n")
    lines = original.split("\n")
    if lines[-1] == "":
        lines.pop()
    if eol == "\r\n":
        lines = [line.removesuffix("\r") for line in lines]

    edits: list[tuple[int, int, list[str]]] = []
    cursor = 0
    for number, hunk in enumerate(hunks, 1):
        where = f"{path}: hunk {number} (patch line {hunk.line})"
        if hunk.anchor is not None:
            found = _find(lines, (hunk.anchor,), cursor, end_of_file=False, strip=True)
            if found is None:
                raise PatchError(f"{where}: the '@@ {hunk.anchor}' line was not found")
            cursor = found + 1
        body = list(hunk.lines)
        old = [text for kind, text in body if kind != "+"]
        if not old:
            at = cursor if hunk.anchor is not None else len(lines)
            edits.append((at, 0, [text for _, text in body]))
            cursor = at
            continue
        found = _find(lines, old, cursor, end_of_file=hunk.end_of_file)
        if found is None and body[-1] == (" ", ""):
            # Trailing blank context lines the model added after the file's last line.
            while body and body[-1] == (" ", ""):
                body.pop()
            old = [text for kind, text in body if kind != "+"]
            if old:
                found = _find(lines, old, cursor, end_of_file=hunk.end_of_file)
        if found is None:
            shown = "\n".join(f"  {line}" for line in hunk.old_lines[:_SHOWN_LINES])
            more = "\n  ..." if len(hunk.old_lines) > _SHOWN_LINES else ""
            raise PatchError(
                f"{where} did not match the file; expected these lines:\n{shown}{more}"
            )
        edits.append((found, len(old), _replacement(lines, found, body)))
        cursor = found + len(old)

    for start, length, new in reversed(edits):
        lines[start : start + length] = new
    if not lines:
        return ""
    text = eol.join(lines)
    return text + eol if final_newline else text


def _replacement(lines: Sequence[str], at: int, body: Sequence[HunkLine]) -> list[str]:
    """The new lines for a match at ``at``: context from the file, additions from the hunk."""
    out: list[str] = []
    position = at
    for kind, text in body:
        if kind == " ":
            out.append(lines[position])
            position += 1
        elif kind == "-":
            position += 1
        else:
            out.append(text)
    return out


def _is_header(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith((ADD, DELETE, UPDATE)) or stripped == END


def _next_header(body: list[str], i: int) -> int:
    while i < len(body) and not _is_header(body[i]):
        i += 1
    return i


def _only_blank_until_header(body: list[str], i: int) -> bool:
    return all(not line.strip() for line in body[i : _next_header(body, i)])


def _path(header: str, marker: str, number: int) -> str:
    path = header[len(marker) :].strip()
    if not path:
        raise PatchError(f"patch line {number}: {marker!r} needs a path")
    return path


def _parse_hunks(body: list[str], *, first_line: int) -> list[Hunk]:
    hunks: list[Hunk] = []
    anchor: str | None = None
    lines: list[HunkLine] = []
    start = first_line
    open_hunk = False

    def close(end_of_file: bool) -> None:
        if not lines:
            raise PatchError(f"patch line {start}: empty hunk")
        hunks.append(Hunk(anchor, tuple(lines), end_of_file, start))

    for offset, line in enumerate(body):
        number = first_line + offset
        if line.startswith("@@"):
            if open_hunk:
                close(end_of_file=False)
            anchor = _anchor(line)
            lines = []
            start, open_hunk = number, True
            continue
        if line.strip() == END_OF_FILE:
            if not open_hunk:
                raise PatchError(f"patch line {number}: {END_OF_FILE!r} outside a hunk")
            close(end_of_file=True)
            anchor, lines, open_hunk = None, [], False
            continue
        if not open_hunk:
            anchor, lines = None, []
            start, open_hunk = number, True
        if line == "":
            lines.append((" ", ""))
        elif line[0] in " -+":
            lines.append((_kind(line[0]), line[1:]))
        else:
            raise PatchError(
                f"patch line {number}: a hunk line must start with ' ', '-' or '+', got {line!r}"
            )
    if open_hunk:
        close(end_of_file=False)
    return hunks


def _kind(char: str) -> Literal[" ", "-", "+"]:
    return "-" if char == "-" else "+" if char == "+" else " "


_UNIFIED_RANGE = re.compile(r"-\d+(,\d+)? \+\d+(,\d+)? @@.*")


def _anchor(line: str) -> str | None:
    """The text after ``@@``; None when empty or a unified-diff range (``@@ -1,2 +1,3 @@``)."""
    text = line[2:].strip()
    if not text or _UNIFIED_RANGE.fullmatch(text):
        return None
    return text


def _find(
    lines: Sequence[str],
    sought: Sequence[str],
    start: int,
    *,
    end_of_file: bool,
    strip: bool = False,
) -> int | None:
    """First index >= ``start`` where ``sought`` matches.

    Passes, each over every candidate position: exact, then ignoring
    trailing whitespace, then (``strip``, for ``@@`` anchors) ignoring
    whitespace at both ends.
    """
    n = len(sought)
    last = len(lines) - n
    if last < 0:
        return None
    candidates = [last] if end_of_file and last >= start else []
    candidates += range(start, last + 1)
    passes = (_exact, _same_rstrip, _same_strip) if strip else (_exact, _same_rstrip)
    for same in passes:
        for at in candidates:
            if all(same(lines[at + k], sought[k]) for k in range(n)):
                return at
    return None


def _exact(a: str, b: str) -> bool:
    return a == b


def _same_rstrip(a: str, b: str) -> bool:
    return a.rstrip() == b.rstrip()


def _same_strip(a: str, b: str) -> bool:
    return a.strip() == b.strip()
