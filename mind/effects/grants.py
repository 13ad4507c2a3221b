"""What an "approve for this session" answer covers (docs/design/interactions.md §5).

A grant is scoped to the session (its records live in the session's
journal), the tool, where a shell command runs (inside the sandbox of one
mode, or outside it) and:

- for ``shell``: a *subcommand prefix* (``git commit`` of
  ``git commit -m x``) only for the programs in :data:`PREFIX_PROGRAMS`,
  only when the command is exactly ``program subcommand …`` (no option
  before the subcommand), the subcommand is one that program's rule allows,
  and no argument is an option known to carry code to run (git ``-c``,
  ``--exec``, ``--upload-pack`` …; go ``-toolexec`` …). A later command is
  covered when it passes the same rules and has the same prefix;
- for every other ``shell`` command: that exact command (the text the card
  showed), nothing else — ``touch a`` does not cover ``touch b``, ``make -v``
  does not cover ``make``;
- for ``write_file`` / ``apply_patch``: the workspace paths it patched. A
  later call is covered when every path it writes is one of them.

Fail closed: an allow-list, not a deny-list — a program nobody judged
(``tar``, ``sed``, ``rsync``, an interpreter, ``.``) gets no prefix grant,
and neither does a command string with any shell metacharacter, a leading
environment assignment or a program given by path. A call that crosses the
workspace boundary is never covered by a grant. :func:`describe` is the one
wording of a scope (the card's ``a`` choice and ``/permissions``). Pure: no
I/O.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "PREFIX_PROGRAMS",
    "GrantScope",
    "PrefixRule",
    "command_text",
    "covers",
    "describe",
    "grant_scope",
    "shell_prefix",
]


@dataclass(frozen=True)
class PrefixRule:
    """When one program's commands may be approved by subcommand prefix.

    Attributes:
        subcommands: the subcommands a prefix grant may name (the first
            argument, exactly).
        named: subcommands whose next plain word is part of the prefix
            (``npm run build``: the script); without it, no prefix grant.
        code_options: options that carry code or another program to run, or
            move the command to other code (another repository, config):
            any argument equal to one, or starting with one followed by
            ``=``, means no prefix grant (for a single-dash long option
            such as go's ``-exec`` too). Short options are also matched
            inside a bundle (``-ix`` holds ``-x``).
        assignments: arguments of the form ``NAME=value`` are allowed (make's
            variable overrides can redefine ``SHELL``: not allowed).
    """

    subcommands: frozenset[str]
    code_options: frozenset[str]
    named: frozenset[str] = frozenset()
    assignments: bool = False


_GIT_CODE: Final = frozenset(
    {
        "-c", "-C", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace",
        "--exec", "-x", "--upload-pack", "--receive-pack", "-O",
        "--open-files-in-pager", "--ext-diff", "--extcmd", "--tool", "--template",
        "--strategy", "-s", "--gpg-sign", "-S",
    }
)  # fmt: skip
"""git options that run a command (rebase ``--exec``/``-x``, fetch
``--upload-pack``, grep ``-O``, diff ``--ext-diff``, a merge strategy
program, a signing program) or read other config (``-c``, ``-C``)."""

_GIT_SUBCOMMANDS: Final = frozenset(
    {
        "status", "log", "diff", "show", "add", "commit", "branch", "switch", "checkout",
        "restore", "merge", "rebase", "stash", "tag", "rm", "mv", "reset", "fetch", "pull",
        "push", "blame", "init", "grep", "rev-parse", "ls-files", "describe", "shortlog",
        "cherry-pick", "revert",
    }
)  # fmt: skip

_NODE_CODE: Final = frozenset(
    {
        "-c", "--call", "--script-shell", "--node-options", "--userconfig", "--globalconfig",
        "--prefix", "-C", "--dir", "--registry", "--require", "-r",
    }
)  # fmt: skip

PREFIX_PROGRAMS: Final[Mapping[str, PrefixRule]] = {
    "git": PrefixRule(
        _GIT_SUBCOMMANDS,
        _GIT_CODE,
    ),
    "cargo": PrefixRule(
        frozenset({"build", "check", "test", "fmt", "clippy", "doc", "bench", "clean", "tree"}),
        frozenset({"--config", "-Z", "--manifest-path", "-C", "--target-dir"}),
    ),
    "go": PrefixRule(
        frozenset({"build", "test", "vet", "fmt", "list"}),
        frozenset({"-exec", "-toolexec", "-vettool", "-overlay", "-modfile", "-C"}),
    ),
    "npm": PrefixRule(frozenset({"test", "run", "ci", "ls"}), _NODE_CODE, frozenset({"run"})),
    "pnpm": PrefixRule(frozenset({"test", "run", "ls"}), _NODE_CODE, frozenset({"run"})),
    "yarn": PrefixRule(frozenset({"test", "run"}), _NODE_CODE, frozenset({"run"})),
    "uv": PrefixRule(
        frozenset({"sync", "lock", "tree"}),
        frozenset({"--config-file", "--directory", "--project", "--with", "-w", "--python"}),
    ),
}
"""The programs whose commands may be approved by subcommand prefix, and
each one's rule. Left out on purpose: programs whose arguments are code or
name code (``tar --checkpoint-action``, ``sed -n 1e``, ``find -exec``,
``rsync -e``, ``make --eval``/``SHELL=``, interpreters, shells, wrappers),
subcommands that run a named program or fetch one (``go run``, ``npm
exec``, ``npm install PKG``, ``uv run``, ``cargo install``, ``git config``
which sets what git runs later): their calls get the exact command only."""

_METACHARACTERS: Final = frozenset(";|&<>$`(){}*?[]~!#\n\r\\'\"")
"""Characters after which a command string is more than one plain argv."""


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
    """The subcommand prefix a ``shell`` command may be approved by, or None
    when only the exact command can be (module rules).

    Args:
        command: the tool's ``command`` argument: a string for ``/bin/sh -c``
            or an argv list.

    Returns:
        ``(program, subcommand)`` — or ``(program, subcommand, name)`` for a
        :attr:`PrefixRule.named` subcommand (``npm run build``) — when the
        program is in :data:`PREFIX_PROGRAMS`, the first argument is one of
        its subcommands, and no argument is one of its code options.
    """
    argv = _argv(command)
    if not argv or len(argv) < 2:
        return None
    rule = PREFIX_PROGRAMS.get(argv[0])
    if rule is None or argv[1] not in rule.subcommands:
        return None  # not judged, or an option before the subcommand
    if any(not a or any(c in _METACHARACTERS for c in a) for a in argv):
        return None  # an argv list is not parsed by a shell, but a grant stays conservative
    if any(_code_option(a, rule) for a in argv[2:]):
        return None
    if argv[1] in rule.named:
        if len(argv) < 3 or not _plain(argv[2]) or argv[2].startswith("-"):
            return None
        return (argv[0], argv[1], argv[2])
    return (argv[0], argv[1])


def _code_option(arg: str, rule: PrefixRule) -> bool:
    """Whether ``arg`` is (or, bundled or with ``=value``, holds) one of the
    rule's code options, or an assignment the rule does not allow."""
    if arg == "--":
        return False
    name = arg.split("=", 1)[0]
    if name in rule.code_options:
        return True
    if "=" in arg and not arg.startswith("-") and not rule.assignments:
        return _plain(name)  # NAME=value: an override, not a plain argument
    if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
        # A bundle of short options (``-ix``) or a short option with its
        # value attached (``-cfoo``): any letter may be one of them.
        shorts = {o for o in rule.code_options if len(o) == 2 and o[0] == "-"}
        return any(f"-{c}" in shorts for c in arg[1:])
    return False


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

    A shell command is covered by a prefix grant when it passes the same
    rules (:func:`shell_prefix`) with the same prefix and runs where the
    grant says; by a command grant when it is that exact text, run there; a
    file call when every path it writes is granted. A boundary crossing is
    never covered.
    """
    if crossed:
        return None
    prefix: tuple[str, ...] | None = None
    text: str | None = None
    if name == "shell":
        text = command_text(args.get("command"))
        prefix = shell_prefix(args.get("command"))
    paths = _paths(written) if name in ("write_file", "apply_patch") else None
    for grant in grants:
        if grant.tool != name:
            continue
        if grant.scope == "program" and grant.sandbox == sandbox and prefix == grant.prefix:
            return grant
        if grant.scope == "command" and grant.sandbox == sandbox and grant.command == text:
            return grant
        if grant.scope == "paths" and paths is not None and set(paths) <= set(grant.paths):
            return grant
    return None


def describe(scope: GrantScope) -> str:
    """The one wording of what a grant covers (the card's ``a`` choice and
    ``/permissions``), e.g. ``shell: commands `git commit …` (in the
    workspace-write sandbox)``, ``shell: only this exact command `touch a`
    (outside the sandbox)``, ``apply_patch: writes to a.py``."""
    where = (
        "outside the sandbox" if scope.sandbox == "outside" else f"in the {scope.sandbox} sandbox"
    )
    if scope.scope == "program":
        return f"{scope.tool}: commands `{' '.join(scope.prefix)} …` ({where})"
    if scope.scope == "command":
        return f"{scope.tool}: only this exact command `{_bounded(scope.command or '')}` ({where})"
    return f"{scope.tool}: writes to {', '.join(scope.paths)} only"


_SHOWN_CHARS: Final = 80
"""A command longer than this is named by its start and end: the card hides
a long command's middle until ``v`` (mind.effects.review), and the scope's
words must not show it."""


def _bounded(command: str) -> str:
    if len(command) <= _SHOWN_CHARS:
        return command
    return f"{command[:40]} …({len(command)} characters)… {command[-30:]}"


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
