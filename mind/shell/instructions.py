"""The system instructions of a session: mind's own prompt plus the
instructions files found for its working directory (docs/design/context.md §4).

Which files, in the order the model reads them:

1. ``$MIND_HOME/AGENTS.md`` (the user's own; scope ``user``).
2. From the repository root (the nearest ancestor of the working directory,
   itself included, holding ``.git``; no repository: the working directory
   alone) down to the working directory, in each directory its
   ``AGENTS.md``, or its ``CLAUDE.md`` when it has no ``AGENTS.md``
   (scope ``project``).

Each is read safely: resolved beneath its root (the repository root, or
``MIND_HOME``) by the file tools' resolver (:func:`mind.shell.tools._beneath.open_beneath`),
so a symbolic link out of it is refused; opened non-blocking and checked to
be a regular file before a byte is read (a FIFO, device or directory is
skipped with the reason); at most the per-file cap read. What the model sees
(caps, order, notices) is :func:`mind.context.instructions.assemble`; the
text is redacted with the session's secrets before it joins the prompt. The
instructions' text is never journaled or logged; events and ``/status`` give
paths and sizes only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from mind.context.instructions import (
    PER_FILE_BYTES,
    Assembled,
    Caps,
    FoundFile,
    assemble,
    caps_for_window,
)
from mind.generated import events as ev
from mind.shell.private_files import kind_name, resolve_root
from mind.shell.redact import redact
from mind.shell.store import mind_home
from mind.shell.tools._beneath import describe, open_beneath

__all__ = [
    "FILE_NAMES",
    "SYSTEM_PROMPT",
    "Instructions",
    "find_files",
    "project_root",
]

SYSTEM_PROMPT: Final = """\
You are mind, a coding agent working in a terminal on the user's machine.
The working directory is {cwd}. Use the tools to inspect and change files and to run
commands; prefer apply_patch for edits to existing files. Keep answers short and concrete,
and say what you changed. Never claim to have run something you did not run."""
"""mind's own instructions; ``{cwd}`` is the session's working directory."""

FILE_NAMES: Final = ("AGENTS.md", "CLAUDE.md")
"""The instructions file of a directory: the first of these it has."""


def project_root(cwd: Path) -> Path | None:
    """The nearest of ``cwd`` and its ancestors holding ``.git`` (a directory,
    or the file of a worktree), or None outside any repository."""
    for directory in (cwd, *cwd.parents):
        if os.path.lexists(directory / ".git"):
            return directory
    return None


def _read(root: Path, relative: str, scope: ev.InstructionScope, where: str) -> FoundFile | None:
    """One file beneath ``root``; None when it does not exist.

    ``where`` names the root in a refusal ("the repository", "MIND_HOME").
    """
    path = str(root / relative)
    try:
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fd = open_beneath(root_fd, relative, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    except OSError as exc:
        reason = f"a symbolic link out of {where}" if exc.errno == errno.EXDEV else describe(exc)
        return FoundFile(path=path, scope=scope, skipped=reason)
    finally:
        os.close(root_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = kind_name(info.st_mode)
            return FoundFile(path=path, scope=scope, skipped=f"{kind}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size < PER_FILE_BYTES:
            chunk = os.read(fd, PER_FILE_BYTES - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        return FoundFile(path=path, scope=scope, skipped=f"cannot be read: {describe(exc)}")
    finally:
        os.close(fd)
    return FoundFile(path=path, scope=scope, size_bytes=info.st_size, data=b"".join(chunks))


def find_files(cwd: Path, env: Mapping[str, str]) -> list[FoundFile]:
    """The instructions files for ``cwd``, in reading order (module docstring).

    Args:
        cwd: the session's absolute working directory.
        env: the environment (``MIND_HOME``).

    Returns:
        One :class:`FoundFile` per file that exists: read (its first
        :data:`~mind.context.instructions.PER_FILE_BYTES`), or skipped with
        the reason. Never raises for a file it cannot use.
    """
    found: list[FoundFile] = []
    home = resolve_root(mind_home(env))
    user = _read(home, FILE_NAMES[0], ev.InstructionScope.user, "MIND_HOME")
    if user is not None:
        found.append(user)
    repository = project_root(cwd)
    root = repository or cwd
    where = "the repository" if repository else "the working directory"
    relative = cwd.relative_to(root).parts
    for depth in range(len(relative) + 1):
        directory = Path(*relative[:depth]) if depth else Path()
        for name in FILE_NAMES:
            if os.path.lexists(root / directory / name):
                got = _read(root, str(directory / name), ev.InstructionScope.project, where)
                if got is not None:
                    found.append(got)
                break  # AGENTS.md present: CLAUDE.md of this directory is not read
    return found


class Instructions:
    """A session's system instructions, read at open and again at each turn start.

    ``system_prompt`` is what a request carries; ``sources`` say which files
    it holds (path, bytes, cut or skipped) for ``/status``, the library and
    the ``instructions.loaded`` event.

    ``window`` gives the context window (tokens, or None) the session plans
    with at each read: the caps scale to it
    (:func:`mind.context.instructions.caps_for_window`).
    """

    def __init__(
        self,
        cwd: Path,
        env: Mapping[str, str],
        secrets: Sequence[str | None],
        *,
        window: Callable[[], int | None] = lambda: None,
    ) -> None:
        self._cwd = cwd
        self._env = env
        self._secrets = secrets
        self._window = window
        self._assembled = Assembled(sources=[], text="")
        self.caps = Caps()
        """The caps of the last read (their ``window`` set when it lowered them)."""
        self.refresh()

    def refresh(self) -> bool:
        """Read the files again; True when what the model sees or the sources changed."""
        self.caps = caps_for_window(self._window())
        assembled = assemble(find_files(self._cwd, self._env), self.caps)
        text = redact(assembled.text, self._secrets) if assembled.text else ""
        assembled = Assembled(sources=assembled.sources, text=text)
        changed = assembled != self._assembled
        self._assembled = assembled
        return changed

    @property
    def sources(self) -> list[ev.InstructionSource]:
        """The files found at the last read, in reading order (a copy)."""
        return list(self._assembled.sources)

    @property
    def system_prompt(self) -> str:
        """mind's prompt for this working directory, then the files' section."""
        base = SYSTEM_PROMPT.format(cwd=self._cwd)
        return f"{base}\n\n{self._assembled.text}" if self._assembled.text else base
