"""What a person reviews before approving a tool call (docs/design/turn.md §7).

Pure: the shell reads the files; this module turns what it read into text.

Rule: a person must never approve text they could not see. Every approval
carries the *full* text of what the call will do (:func:`approval_text`): the
exact shell command, a unified diff of every file change against the file's
content at approval time, or the call's arguments. A display that cannot
show it all shows a head and a tail (:func:`cut_for_display`) and says how
many characters it hides; the approval must then be refused until the whole
text was viewed (the REPL's ``v``). Characters that would not show on a
terminal (control and format characters, e.g. ``\\r`` or a bidi override)
are shown escaped by :func:`visible`, never dropped.
"""

from __future__ import annotations

import difflib
import json
import shlex
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

SHOWN_CHARS: Final = 3000
"""Longest approval text shown whole, in characters."""
SHOWN_LINES: Final = 60
"""Most lines of an approval text shown whole."""
HEAD_CHARS: Final = 2000
HEAD_LINES: Final = 40
TAIL_CHARS: Final = 800
TAIL_LINES: Final = 12
"""Bounds of the head and tail shown of a longer text."""

TextFormat = Literal["command", "diff", "arguments"]
"""What an approval text is: a shell command, unified diffs, or JSON arguments."""


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file as a call would change it.

    Attributes:
        path: the path as the call names it.
        before: its text now (None: it does not exist).
        after: its text after the call (None: it is deleted).
        move_to: the new path of a renamed file, else None.
    """

    path: str
    before: str | None
    after: str | None
    move_to: str | None = None


@dataclass(frozen=True, slots=True)
class DisplayCut:
    """How much of a text a bounded display shows.

    Attributes:
        head_chars: characters shown from the start.
        tail_chars: characters shown from the end (0 when nothing is hidden).
        hidden_chars: characters between them that are not shown (0: all shown).
        hidden_lines: line breaks among the hidden characters.
    """

    head_chars: int
    tail_chars: int
    hidden_chars: int
    hidden_lines: int


def cut_for_display(
    text: str,
    *,
    shown_chars: int = SHOWN_CHARS,
    shown_lines: int = SHOWN_LINES,
    head: tuple[int, int] = (HEAD_CHARS, HEAD_LINES),
    tail: tuple[int, int] = (TAIL_CHARS, TAIL_LINES),
) -> DisplayCut:
    """The head and tail of ``text`` a bounded display shows.

    A text within ``shown_chars`` characters and ``shown_lines`` lines is
    shown whole. Otherwise the head is at most ``head`` = (characters, lines)
    and the tail at most ``tail``, cut at line ends where a line fits.

    Returns:
        The cut; ``text[:head_chars]`` and ``text[len(text) - tail_chars:]``
        are what is shown.
    """
    if len(text) <= shown_chars and text.count("\n") < shown_lines:
        return DisplayCut(head_chars=len(text), tail_chars=0, hidden_chars=0, hidden_lines=0)
    head_n = _head_length(text, *head)
    tail_n = _tail_length(text[head_n:], *tail)
    hidden = text[head_n : len(text) - tail_n]
    return DisplayCut(
        head_chars=head_n,
        tail_chars=tail_n,
        hidden_chars=len(hidden),
        hidden_lines=hidden.count("\n"),
    )


def _head_length(text: str, max_chars: int, max_lines: int) -> int:
    """Characters of the first whole lines of ``text`` within both bounds
    (the bound in characters when even the first line is longer)."""
    end = 0
    for _ in range(max_lines):
        nl = text.find("\n", end)
        stop = len(text) if nl < 0 else nl + 1
        if stop > max_chars:
            break
        end = stop
        if nl < 0:
            break
    return end or min(len(text), max_chars)


def _tail_length(text: str, max_chars: int, max_lines: int) -> int:
    """Characters of the last whole lines of ``text`` within both bounds
    (the bound in characters when even the last line is longer)."""
    start = len(text)
    pos = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(max_lines):
        nl = text.rfind("\n", 0, pos)
        begin = nl + 1
        if len(text) - begin > max_chars:
            break
        start = begin
        if nl < 0:
            break
        pos = nl
    return (len(text) - start) or min(len(text), max_chars)


_ESCAPED_CATEGORIES: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cn"})


def visible(text: str) -> str:
    """``text`` with every character a terminal would not show as itself
    escaped (``\\x1b``, ``\\u202e``); newlines and tabs are kept.

    Unlike stripping, nothing that will run is made invisible: a ``\\r`` that
    would hide the start of a line on screen shows as ``\\r``.
    """
    out: list[str] = []
    for ch in text:
        if ch == "\n" or ch == "\t":
            out.append(ch)
        elif unicodedata.category(ch) in _ESCAPED_CATEGORIES or _variation_selector(ch):
            code = ord(ch)
            if code < 0x100:
                out.append(f"\\x{code:02x}")
            else:
                out.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "".join(out)


def _variation_selector(ch: str) -> bool:
    """U+FE00–FE0F and U+E0100–E01EF: they change how the character before
    them is drawn without showing themselves (category Mn, so not caught by
    :data:`_ESCAPED_CATEGORIES`)."""
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


BIDI_AND_ZERO_WIDTH: Final = frozenset(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u2060\ufeff"
)
"""Characters that reorder or hide text on a terminal without showing
themselves: the bidi embeddings, overrides, isolates and marks, and the
zero-width space, word joiner and byte-order mark."""
JOINERS: Final = frozenset("\u200c\u200d")
"""Zero-width (non-)joiners: prose needs them (emoji sequences, scripts)."""


def mark_hidden(text: str, *, keep_joiners: bool = True) -> str:
    """``text`` with each of :data:`BIDI_AND_ZERO_WIDTH` (and, unless
    ``keep_joiners``, :data:`JOINERS` and the variation selectors) shown as
    ``⟨U+202E⟩``: the one rule for making them visible in terminal output
    (tool names, arguments, output)."""
    hidden = BIDI_AND_ZERO_WIDTH if keep_joiners else BIDI_AND_ZERO_WIDTH | JOINERS

    def shown(ch: str) -> bool:
        # Variation selectors are like joiners: prose (emoji) needs them,
        # a name or a card must show them.
        return ch not in hidden and (keep_joiners or not _variation_selector(ch))

    if all(shown(ch) for ch in text):
        return text
    return "".join(ch if shown(ch) else f"⟨U+{ord(ch):04X}⟩" for ch in text)


def unified_diff(change: FileChange) -> str:
    """The unified diff of one change (``/dev/null`` for a missing side).

    Lines without a final newline are marked ``\\ No newline at end of file``,
    as ``diff -u`` does, so the diff shows exactly what is written.
    """
    old_name = f"a/{change.path}" if change.before is not None else "/dev/null"
    new_path = change.move_to or change.path
    new_name = f"b/{new_path}" if change.after is not None else "/dev/null"
    lines = difflib.unified_diff(
        _lines(change.before or ""),
        _lines(change.after or ""),
        fromfile=old_name,
        tofile=new_name,
    )
    out: list[str] = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    if not out:  # same content (a rename, or a write of identical text)
        same = f"rename {change.path} -> {new_path}" if change.move_to else change.path
        out.append(f"{same}: no change to the content\n")
    return "".join(out)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def diff_stat(change: FileChange) -> tuple[int, int]:
    """``(added, removed)`` lines of one change."""
    added = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(
        a=_lines(change.before or ""), b=_lines(change.after or ""), autojunk=False
    ).get_opcodes():
        if op in ("replace", "delete"):
            removed += i2 - i1
        if op in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def change_summary(change: FileChange) -> str:
    """``M path  +3 −1`` (A added, D deleted, R renamed, M modified)."""
    added, removed = diff_stat(change)
    if change.before is None:
        kind, path = "A", change.path
    elif change.after is None:
        kind, path = "D", change.path
    elif change.move_to is not None:
        kind, path = "R", f"{change.path} -> {change.move_to}"
    else:
        kind, path = "M", change.path
    return f"{kind} {path}  +{added} −{removed}"


def approval_text(
    name: str,
    args: Mapping[str, Any],
    changes: Sequence[FileChange] | None = None,
    problem: str | None = None,
) -> tuple[str, TextFormat]:
    """The full text a person approves for one call, and its format.

    Args:
        name: the tool name.
        args: its checked arguments.
        changes: for file tools, every file as the call would change it,
            computed from the files at approval time.
        problem: for file tools whose changes could not be computed (a patch
            that does not apply, an unreadable file): why; the arguments are
            shown instead, after it.

    Returns:
        ``(text, format)``: the exact command (an argv is shell-quoted), the
        unified diffs, or the arguments (``key: value``, strings unescaped).
    """
    if name == "shell":
        command = args.get("command")
        text = shlex.join(command) if isinstance(command, list) else str(command)
        return text, "command"
    if changes is not None and problem is None:
        return "".join(unified_diff(c) for c in changes), "diff"
    body = _arguments(args)
    if problem is not None:
        body = f"(the change cannot be shown: {problem})\n{body}"
    return body, "arguments"


def _arguments(args: Mapping[str, Any]) -> str:
    """``key: value`` per argument; a string with newlines follows its key
    on its own lines, unescaped (a patch reads as a patch); others as JSON."""
    out: list[str] = []
    for key, value in args.items():
        if isinstance(value, str) and "\n" in value:
            out.append(f"{key}:\n{value}" + ("" if value.endswith("\n") else "\n"))
        elif isinstance(value, str):
            out.append(f"{key}: {value}\n")
        else:
            out.append(f"{key}: {json.dumps(value, ensure_ascii=False)}\n")
    return "".join(out)


__all__ = [
    "BIDI_AND_ZERO_WIDTH",
    "HEAD_CHARS",
    "HEAD_LINES",
    "JOINERS",
    "SHOWN_CHARS",
    "SHOWN_LINES",
    "TAIL_CHARS",
    "TAIL_LINES",
    "DisplayCut",
    "FileChange",
    "TextFormat",
    "approval_text",
    "change_summary",
    "cut_for_display",
    "diff_stat",
    "mark_hidden",
    "unified_diff",
    "visible",
]
