"""Project instructions in the system prompt: caps, order and wording.

Pure (no I/O): :mod:`mind.shell.instructions` finds and reads the files;
this module decides what of them the model sees (docs/design/context.md §4):

- **Order.** The user's own ``AGENTS.md`` (under ``MIND_HOME``) first, then
  the repository's files from its root down to the working directory:
  nearer files come later, and the text tells the model the later one wins.
- **Caps.** Each file at most ``per_file_bytes``; all together at most
  ``total_bytes``. With a known window the caps shrink to a quarter of it
  (:func:`caps_for_window`), so the instructions alone never fill it. The
  total is handed out from the working directory outwards, then to the
  user's file: nearer files win anyway, so over the
  total the farther ones are cut first. A cut falls between UTF-8
  characters and is said after the text, in words the model reads.
- **Text.** Undecodable bytes become U+FFFD; each file's text follows a
  heading naming its path.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from typing import Final

import msgspec

from mind.generated import events as ev

__all__ = [
    "MIN_TOTAL_BYTES",
    "PER_FILE_BYTES",
    "TOTAL_BYTES",
    "Assembled",
    "Caps",
    "FoundFile",
    "assemble",
    "caps_for_window",
    "describe_sources",
]

PER_FILE_BYTES: Final = 32 * 1024
"""Most bytes of one instructions file the model sees (Codex's
``project_doc_max_bytes`` is 32 KiB for all of them together)."""

TOTAL_BYTES: Final = 64 * 1024
"""Most bytes of all instructions files together (about 16k tokens)."""

MIN_TOTAL_BYTES: Final = 1024
"""The smallest total a window scales the caps to, bytes (a tiny window
still shows the start of the nearest file)."""

_WINDOW_BYTES_PER_TOKEN: Final = 4
"""Bytes per token the window-scaled caps assume (mind's own estimate,
:data:`mind.context.usage.BYTES_PER_TOKEN`)."""


class Caps(msgspec.Struct, frozen=True, kw_only=True):
    """The caps of the instructions files, bytes of the files' UTF-8.

    Attributes:
        per_file_bytes: most bytes of one file.
        total_bytes: most bytes of all files together.
        window: the context window in tokens the caps were scaled down to
            (None: the fixed caps hold; the window is unknown or large).
    """

    per_file_bytes: int = PER_FILE_BYTES
    total_bytes: int = TOTAL_BYTES
    window: int | None = None


def caps_for_window(window: int | None) -> Caps:
    """The caps a request to a model with ``window`` tokens uses.

    Rule (docs/design/context.md §4): the fixed caps are upper bounds; with a
    known window all files together get at most a quarter of it, at 4 bytes
    per token (never below :data:`MIN_TOTAL_BYTES`), and one file at most
    that total, so the instructions leave the window's rest to the
    conversation, as tool output's budgets do (context.md §3).

    Args:
        window: the context window in tokens, or None (unknown).

    Returns:
        :class:`Caps`; its ``window`` is set only when it lowered a cap.
    """
    if window is None or window <= 0:
        return Caps()
    total = min(TOTAL_BYTES, max(MIN_TOTAL_BYTES, window * _WINDOW_BYTES_PER_TOKEN // 4))
    if total == TOTAL_BYTES:
        return Caps()
    return Caps(per_file_bytes=min(PER_FILE_BYTES, total), total_bytes=total, window=window)


def describe_sources(sources: Sequence[ev.InstructionSource]) -> str:
    """The files read, for a person: ``path (N bytes)`` or ``path (N bytes,
    M shown)`` each, joined by ``; `` ("" when none was read)."""
    parts = []
    for source in sources:
        if source.skipped:
            continue
        shown = f", {source.included_bytes:,} shown" if source.cut else ""
        parts.append(f"{source.path} ({source.size_bytes:,} bytes{shown})")
    return "; ".join(parts)


HEADING: Final = (
    "# Instructions files\n\n"
    "The files below hold instructions for working here (AGENTS.md and similar: "
    "conventions, commands, what to avoid). They are listed from the most general "
    "(the user's own, then the repository root) to the most specific (the working "
    "directory); where two disagree, the later one wins. Follow them unless the "
    "user says otherwise."
)
"""What the model reads before the files."""


class FoundFile(msgspec.Struct, frozen=True, kw_only=True):
    """One instructions file as the shell found it.

    Attributes:
        path: its absolute path.
        scope: ``user`` (under ``MIND_HOME``) or ``project``.
        size_bytes: its size, bytes (``fstat``).
        data: its first bytes as read (at most the per-file cap; the shell
            reads no more), or None when it was not read.
        skipped: why it was not read (None when read).
    """

    path: str
    scope: ev.InstructionScope
    size_bytes: int = 0
    data: bytes | None = None
    skipped: str | None = None


class Assembled(msgspec.Struct, frozen=True, kw_only=True):
    """What the model sees of the instructions files, and the account of it.

    Attributes:
        sources: one per file found, in the order given (read, cut or skipped).
        text: the section for the system prompt ("" when nothing was read).
    """

    sources: list[ev.InstructionSource]
    text: str


def _budgets(files: Sequence[FoundFile], per_file: int, total: int) -> list[int]:
    """Bytes each file may keep: nearest project file first, the user's last."""
    budgets = [0] * len(files)
    order = [i for i in reversed(range(len(files))) if files[i].scope == "project"]
    order += [i for i in range(len(files)) if files[i].scope == "user"]
    left = total
    for i in order:
        data = files[i].data
        if data is None:
            continue
        budgets[i] = min(len(data), per_file, left)
        left -= budgets[i]
    return budgets


def assemble(
    files: Sequence[FoundFile],
    caps: Caps | None = None,
) -> Assembled:
    """The instructions section of the system prompt and its sources.

    Args:
        files: in the order the model is to read them (user, then root down
            to the working directory).
        caps: the caps (None: the fixed ones, :class:`Caps`).

    Returns:
        :class:`Assembled`; a file is ``cut`` when fewer bytes of it are
        kept than its size (a per-file or total cap, or it changed while
        read), and the text says so after that file.
    """
    caps = caps or Caps()
    per_file_bytes, total_bytes = caps.per_file_bytes, caps.total_bytes
    why = (
        f", a quarter of the model's {caps.window:,}-token context window"
        if caps.window is not None
        else ""
    )
    budgets = _budgets(files, per_file_bytes, total_bytes)
    sources: list[ev.InstructionSource] = []
    parts: list[str] = []
    for found, budget in zip(files, budgets, strict=True):
        if found.data is None:
            sources.append(
                ev.InstructionSource(
                    path=found.path,
                    scope=found.scope,
                    size_bytes=found.size_bytes,
                    included_bytes=0,
                    cut=False,
                    skipped=found.skipped or "not read",
                )
            )
            continue
        size = max(found.size_bytes, len(found.data))
        cut = min(budget, len(found.data)) < size
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        text = decoder.decode(found.data[:budget], final=not cut)
        # A cut never ends inside a character: the decoder holds back its bytes.
        kept = len(found.data[:budget]) - len(decoder.getstate()[0])
        sources.append(
            ev.InstructionSource(
                path=found.path,
                scope=found.scope,
                size_bytes=size,
                included_bytes=kept,
                cut=cut,
            )
        )
        if not text.strip() and not cut:
            continue  # an empty file says nothing
        where = " (the user's own)" if found.scope == "user" else ""
        part = f"## {found.path}{where}\n\n{text.rstrip()}"
        if cut:
            part += (
                f"\n\n[This file is cut: {kept} of its {size} bytes are shown "
                f"(mind's caps are {per_file_bytes} bytes per file, {total_bytes} in all{why}).]"
            )
        parts.append(part)
    text = "\n\n".join([HEADING, *parts]) if parts else ""
    return Assembled(sources=sources, text=text)
