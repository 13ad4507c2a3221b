"""Project instructions in the system prompt: caps, order and wording.

Pure (no I/O): :mod:`mind.shell.instructions` finds and reads the files;
this module decides what of them the model sees (docs/design/context.md §4):

- **Order.** The user's own ``AGENTS.md`` (under ``MIND_HOME``) first, then
  the repository's files from its root down to the working directory:
  nearer files come later, and the text tells the model the later one wins.
- **Caps.** Each file at most ``per_file_bytes``; all together at most
  ``total_bytes``. The total is handed out from the working directory
  outwards, then to the user's file: nearer files win anyway, so over the
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
    "PER_FILE_BYTES",
    "TOTAL_BYTES",
    "Assembled",
    "FoundFile",
    "assemble",
]

PER_FILE_BYTES: Final = 32 * 1024
"""Most bytes of one instructions file the model sees (Codex's
``project_doc_max_bytes`` is 32 KiB for all of them together)."""

TOTAL_BYTES: Final = 64 * 1024
"""Most bytes of all instructions files together (about 16k tokens)."""

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
    *,
    per_file_bytes: int = PER_FILE_BYTES,
    total_bytes: int = TOTAL_BYTES,
) -> Assembled:
    """The instructions section of the system prompt and its sources.

    Args:
        files: in the order the model is to read them (user, then root down
            to the working directory).
        per_file_bytes: cap of one file, bytes.
        total_bytes: cap of all files together, bytes.

    Returns:
        :class:`Assembled`; a file is ``cut`` when fewer bytes of it are
        kept than its size (a per-file or total cap, or it changed while
        read), and the text says so after that file.
    """
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
                f"(mind's caps are {per_file_bytes} bytes per file, {total_bytes} in all).]"
            )
        parts.append(part)
    text = "\n\n".join([HEADING, *parts]) if parts else ""
    return Assembled(sources=sources, text=text)
