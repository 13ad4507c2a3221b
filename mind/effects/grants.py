"""What an "approve for this session" answer covers (docs/design/interactions.md §5).

A grant is scoped to the session (its records live in the session's
journal), the tool, where a shell command runs (inside the sandbox of one
mode, or outside it) and:

- for ``shell``: the command's *program prefix* — the program and its
  leading subcommand words (``git commit`` of ``git commit -m x``; ``ls`` of
  ``ls -la``). A later command is covered when its argv starts with the
  prefix and is itself judgeable;
- for a ``shell`` command without a judgeable prefix: that exact command
  (the text the card showed), nothing else;
- for ``write_file`` / ``apply_patch``: the workspace paths it patched. A
  later call is covered when every path it writes is one of them.

Fail closed: a command whose prefix cannot be judged safely grants only
itself — any other command is asked again (:func:`shell_prefix` returns
None) — a
string with any shell metacharacter (``; | & < > $ ` ( ) { } * ? [ ] ~``,
newlines, quotes that do not split), a leading environment assignment
(``FOO=1 cmd``), a program given by path, a wrapper that runs another
command (``sh -c``, ``bash``, ``env``, ``sudo``, ``xargs``, ``nohup``,
``timeout``, ``exec`` …), a program in :data:`NO_SESSION_GRANT` (``rm``,
``dd`` …: every call asked), an interpreter given code (``python -c``).
A call that crosses the workspace boundary is never covered by a grant.
Pure: no I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "NO_SESSION_GRANT",
    "WRAPPERS",
    "GrantScope",
    "command_text",
    "covers",
    "grant_scope",
    "shell_prefix",
]

WRAPPERS: Final[frozenset[str]] = frozenset(
    {
        "sh", "bash", "zsh", "dash", "ksh", "fish", "env", "sudo", "su", "doas", "xargs",
        "nohup", "timeout", "time", "nice", "ionice", "exec", "eval", "command", "builtin",
        "setsid", "stdbuf", "chroot", "unshare", "nsenter", "flock", "watch", "script",
        "busybox", "parallel", "ssh", "strace", "ltrace", "gdb",
    }
)  # fmt: skip
"""Programs whose arguments are another command: their scope is that command,
which a prefix cannot bound."""

NO_SESSION_GRANT: Final[frozenset[str]] = frozenset(
    {
        "rm", "rmdir", "dd", "mkfs", "shred", "truncate", "chmod", "chown", "chgrp", "kill",
        "pkill", "killall", "reboot", "shutdown", "mount", "umount", "python", "python3",
        "node", "perl", "ruby", "php", "lua", "deno", "bun", "awk", "gawk", "find",
    }
)  # fmt: skip
"""Programs never approved for the session (each call is asked): destructive
ones whose harm lies in their arguments, and interpreters (their arguments
are programs)."""

_METACHARACTERS: Final = frozenset(";|&<>$`(){}*?[]~!#\n\r\\'\"")
"""Characters after which a command string is more than one plain argv."""

_MAX_SUBCOMMANDS: Final = 2
"""Leading plain words kept after the program (``git remote add``)."""


@dataclass(frozen=True)
class GrantScope:
    """What one session grant covers.

    Attributes:
        tool: the tool's name.
        scope: ``program`` (shell prefix), ``command`` (one exact shell
            command) or ``paths`` (file tools).
        sandbox: where covered shell commands run (``read-only`` |
            ``workspace-write`` | ``outside``); None for file tools.
        prefix: scope ``program``: the argv words a covered command starts with.
        command: scope ``command``: the exact command text.
        paths: scope ``paths``: the workspace-relative paths covered (normalised).
    """

    tool: str
    scope: Literal["program", "command", "paths"]
    sandbox: str | None = None
    prefix: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    command: str | None = None


def shell_prefix(command: object) -> tuple[str, ...] | None:
    """The program prefix of a ``shell`` command, or None when its scope
    cannot be judged safely (module rules: ask again).

    Args:
        command: the tool's ``command`` argument: a string for ``/bin/sh -c``
            or an argv list.

    Returns:
        The program and up to :data:`_MAX_SUBCOMMANDS` leading words that are
        plain subcommands (letters, digits, ``-`` ``_`` ``.``, not starting
        with ``-``, no ``/`` or ``=``), e.g. ``("git", "commit")``.
    """
    argv = _argv(command)
    if not argv:
        return None
    program = argv[0]
    if not _plain(program) or program in WRAPPERS or program in NO_SESSION_GRANT:
        return None
    if any(not a or any(c in _METACHARACTERS for c in a) for a in argv):
        return None  # an argv list is not parsed by a shell, but a grant stays conservative
    words = [program]
    for word in argv[1 : 1 + _MAX_SUBCOMMANDS]:
        if not _plain(word) or word.startswith("-"):
            break
        words.append(word)
    return tuple(words)


def grant_scope(
    name: str,
    args: Mapping[str, Any],
    *,
    sandbox: str | None,
    written: Sequence[str] | None,
    crossed: bool,
) -> GrantScope | None:
    """The scope an "approve for this session" answer to this call would grant,
    or None when none can be judged (the call is then approved once only).

    Args:
        name: the tool.
        args: its checked arguments.
        sandbox: where a shell command runs (``read-only`` | ``workspace-write``
            | ``outside``), None for other tools.
        written: the paths a file tool writes (None: cannot be told).
        crossed: the call crosses the workspace boundary (never granted).
    """
    if crossed:
        return None
    if name == "shell":
        if sandbox is None:
            return None
        prefix = shell_prefix(args.get("command"))
        if prefix is None:
            text = command_text(args.get("command"))
            if text is None:
                return None
            return GrantScope(name, "command", sandbox=sandbox, command=text)
        return GrantScope(name, "program", sandbox=sandbox, prefix=prefix)
    if name in ("write_file", "apply_patch"):
        paths = _paths(written)
        return None if paths is None else GrantScope(name, "paths", paths=paths)
    return None


def covers(
    grants: Iterable[GrantScope],
    name: str,
    args: Mapping[str, Any],
    *,
    sandbox: str | None,
    written: Sequence[str] | None,
    crossed: bool,
) -> GrantScope | None:
    """The first grant that covers this call, or None (ask).

    A shell command is covered when it is judgeable (:func:`shell_prefix`
    is not None), runs where the grant says, and its argv starts with the
    grant's prefix; a file call when every path it writes is granted. A
    boundary crossing is never covered.
    """
    if crossed:
        return None
    argv: list[str] | None = None
    text: str | None = None
    if name == "shell":
        text = command_text(args.get("command"))
        if shell_prefix(args.get("command")) is not None:
            argv = _argv(args.get("command"))
    paths = _paths(written) if name in ("write_file", "apply_patch") else None
    for grant in grants:
        if grant.tool != name:
            continue
        if (
            grant.scope == "program"
            and argv is not None
            and grant.sandbox == sandbox
            and tuple(argv[: len(grant.prefix)]) == grant.prefix
        ):
            return grant
        if grant.scope == "command" and grant.sandbox == sandbox and grant.command == text:
            return grant
        if grant.scope == "paths" and paths is not None and set(paths) <= set(grant.paths):
            return grant
    return None


def command_text(command: object) -> str | None:
    """A shell command as one exact text (an argv shell-quoted, as the card
    shows it), or None when it is neither a string nor a list of strings."""
    if isinstance(command, str) and command:
        return command
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return shlex.join(command)
    return None


def _argv(command: object) -> list[str] | None:
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return list(command)
    if not isinstance(command, str) or not command.strip():
        return None
    if any(c in _METACHARACTERS for c in command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _plain(word: str) -> bool:
    """A bare word: no path, no assignment, nothing a shell would expand."""
    return (
        bool(word)
        and "/" not in word
        and "=" not in word
        and all(c.isalnum() or c in "-_.+" for c in word)
        and word.isascii()
    )


def _paths(written: Sequence[str] | None) -> tuple[str, ...] | None:
    if not written:
        return None
    out: list[str] = []
    for path in written:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not parts or ".." in parts or path.startswith("/"):
            return None  # absolute or climbing paths: judged per call
        out.append("/".join(parts))
    return tuple(sorted(set(out)))
