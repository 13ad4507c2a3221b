"""Approval policy: which tool calls may run without asking the person.

Pure: decided from the policy, the tool name, the checked arguments and the
session's working directory — no file system, no environment. Where a file
tool path really lands is asked of the shell through ``crossing``, which
resolves it with the kernel the way the tool will (``docs/design/boundary.md``);
without it paths are compared lexically (``os.path.normpath``) only.

Policies (DESIGN §6, the same names as Codex CLI's ``--ask-for-approval``):

===============  ===============  ======================  ==========================
policy           read-only tools  shell (sandboxed mode)  write_file / apply_patch
===============  ===============  ======================  ==========================
``never``        run              run in the sandbox      run
``on-request``   run              run in the sandbox      run inside cwd, else ask
``untrusted``    run inside cwd,  ask unless known-safe   ask
                 else ask
===============  ===============  ======================  ==========================

Shell and sandbox (:func:`shell_decision`, ``docs/design/boundary.md``
"Sandbox"): in ``read-only`` / ``workspace-write`` mode every command runs
inside the sandbox; it leaves the sandbox only with the person's approval —
when the model asks for it (``"sandbox": "escalated"``, refused outright
under ``never``) or when a sandboxed command failed on what looks like a
sandbox denial (:func:`rerun_reason`). Under ``danger-full-access`` nothing
is sandboxed, so under ``on-request`` and ``untrusted`` every command asks:
known-safe commands are free only because they run sandboxed.

"Inside cwd" for writes is the boundary's rule (writable roots minus
protected paths: ``.git/``, ``.mind/``, shell startup files, mind's state).
Under ``never`` nothing asks; the file tools themselves refuse a write the
boundary refuses, since no person approved it.

"Known-safe" is :func:`is_known_safe_command`: a small allowlist of commands
that only read, checked conservatively (a command string with any shell
metacharacter is never known-safe).
"""

from __future__ import annotations

import os.path
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from mind.effects.boundary import SandboxMode
from mind.effects.patch import parse_patch, patch_paths
from mind.effects.tools import BUILTIN_TOOLS
from mind.errors import PatchError

ApprovalPolicy = Literal["untrusted", "on-request", "never"]
"""When tool calls need the person's approval (see the module table)."""

APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = get_args(ApprovalPolicy)

_PLAIN_SAFE = frozenset(
    {
        "basename",
        "cat",
        "df",
        "dirname",
        "du",
        "echo",
        "egrep",
        "fgrep",
        "grep",
        "head",
        "id",
        "ls",
        "nl",
        "pwd",
        "realpath",
        "stat",
        "tail",
        "true",
        "uname",
        "wc",
        "which",
        "whoami",
    }
)
"""Commands that only read, whatever their arguments."""

_FIND_UNSAFE = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf"}
)
"""``find`` actions that run commands or write files."""

_RG_UNSAFE = frozenset({"--pre", "--hostname-bin", "--search-zip"})
"""``rg`` options that run other programs (``-z`` is checked separately)."""

_GIT_READ = frozenset({"status", "log", "diff", "show"})
"""``git`` subcommands that only read (checked further for ``--output``)."""

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "/bin/sh", "/bin/bash"})

_METACHARACTERS = frozenset(";|&<>$`\\(){}[]*?#!\n\r")
"""Characters that make a command string more than one plain command.

Conservative on purpose: besides separators, pipes, redirections and
expansions, glob characters are refused too (a file named ``--output=x``
would otherwise become an option).
"""

_SHOWN_CHARS = 120
"""Longest command quoted in an approval reason."""


ShellAction = Literal["run", "ask", "refuse"]


@dataclass(frozen=True, slots=True)
class ShellDecision:
    """What to do with one ``shell`` call.

    Attributes:
        action: ``run`` without asking, ``ask`` the person first, or
            ``refuse`` (a tool result says why; nothing runs).
        sandboxed: whether it runs inside the sandbox (if it runs).
        reason: one line for the approval card or the refusal; None for
            ``run``.
        mode: the sandbox mode it runs in when sandboxed, None outside:
            the session's, except ``read-only`` for a known-safe command
            run unasked under ``untrusted`` (free only because nothing it
            starts — a planted ``core.fsmonitor`` — can write).
    """

    action: ShellAction
    sandboxed: bool
    reason: str | None = None
    mode: SandboxMode | None = None


def shell_decision(
    policy: ApprovalPolicy, mode: SandboxMode, args: dict[str, Any]
) -> ShellDecision:
    """Decide one ``shell`` call under ``policy`` and sandbox ``mode`` (the
    module rules).

    Args:
        args: checked arguments; ``sandbox == "escalated"`` asks to run
            outside the sandbox, ``justification`` says why.

    Raises:
        ValueError: ``policy`` is not an :data:`ApprovalPolicy` (misuse).
    """
    if policy not in APPROVAL_POLICIES:
        raise ValueError(f"unknown approval policy {policy!r}")
    command = args.get("command")
    if mode == "danger-full-access":
        if policy == "never":
            return ShellDecision("run", sandboxed=False)
        return ShellDecision(
            "ask", sandboxed=False, reason=f"runs `{_shown(command)}` OUTSIDE any sandbox"
        )
    if args.get("sandbox") == "escalated":
        why = _one_line(str(args.get("justification") or "no reason given"))
        if policy == "never":
            return ShellDecision(
                "refuse",
                sandboxed=False,
                reason=(
                    "Refused without running: this command asked to run outside the sandbox, "
                    "and approval policy `never` never leaves it. Run it inside the sandbox "
                    "(drop `sandbox`), or tell the user what you need."
                ),
            )
        return ShellDecision(
            "ask", sandboxed=False, reason=f"asks to run OUTSIDE the {mode} sandbox: {why}"
        )
    if policy == "untrusted":
        if is_known_safe_command(command):
            return ShellDecision("run", sandboxed=True, mode="read-only")
        return ShellDecision(
            "ask",
            sandboxed=True,
            reason=f"runs `{_shown(command)}`, which is not a known read-only command",
            mode=mode,
        )
    return ShellDecision("run", sandboxed=True, mode=mode)


_DENIAL_SIGNS = (
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
    "Network is unreachable",
    "Connection refused",
    "Temporary failure in name resolution",
    "Could not resolve host",
    "EROFS",
    "EPERM",
    "EACCES",
)
"""Text a command prints when the sandbox stopped it (strerror of EROFS,
EACCES, EPERM, ENETUNREACH; resolver and curl wording without a network)."""


def looks_like_sandbox_denial(status: str, output: str) -> bool:
    """Whether a failed command's output suggests the sandbox stopped it.

    A heuristic (the kernel does not say which layer refused): an error
    status and one of :data:`_DENIAL_SIGNS` in the output.
    """
    return status == "error" and any(sign in output for sign in _DENIAL_SIGNS)


def rerun_reason(policy: ApprovalPolicy, mode: SandboxMode, status: str, output: str) -> str | None:
    """Whether to offer running a sandboxed command again OUTSIDE the sandbox.

    Returns:
        The approval card's reason, or None (no offer: policy ``never``,
        nothing was sandboxed, or the failure does not look like a denial).
    """
    if policy == "never" or mode == "danger-full-access":
        return None
    if not looks_like_sandbox_denial(status, output):
        return None
    return (
        f"failed inside the {mode} sandbox (it looks like a sandbox denial); "
        "run it again OUTSIDE the sandbox?"
    )


def approval_reason(
    policy: ApprovalPolicy,
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    crossing: Callable[[str, bool], str | None] | None = None,
    sandbox: SandboxMode = "workspace-write",
) -> str | None:
    """Decide whether one tool call needs approval.

    Args:
        policy: the session's approval policy.
        name: the tool name.
        args: the arguments, already checked by
            :func:`mind.effects.tools.parse_arguments`.
        cwd: the session's working directory (absolute).
        crossing: ``crossing(path, write)`` says why a file tool reading
            (``write=False``) or writing ``path`` (as the model gave it)
            crosses the workspace boundary, or None when it stays inside;
            supplied by the shell, which resolves it with the kernel
            (:meth:`mind.shell.tools.ToolRunner.boundary_reason`). Without
            it the check is lexical only, so a symlink inside ``cwd``
            pointing outside would count as inside.
        sandbox: the session's sandbox mode (``shell``: :func:`shell_decision`;
            a refusal counts as needing approval here).

    Returns:
        None when the call runs without asking; otherwise one line saying
        why the person must approve it.

    Raises:
        ValueError: ``policy`` is not an :data:`ApprovalPolicy` (misuse).
    """
    if policy not in APPROVAL_POLICIES:
        raise ValueError(f"unknown approval policy {policy!r}")
    if name == "shell":
        return shell_decision(policy, sandbox, args).reason
    if policy == "never":
        return None
    contract = BUILTIN_TOOLS.get(name)
    if contract is None:
        return f"unknown tool {name!r}"
    if contract.read_only:
        if policy != "untrusted" or name not in ("read_file", "list_dir"):
            return None
        path = args.get("path", ".")
        reason = _crossing(path, cwd, crossing, write=False) if isinstance(path, str) else None
        if reason is None:
            return None
        return f"reads {_one_line(path)}: {reason} (untrusted mode asks before reading there)"
    paths = _written_paths(name, args)
    crossed = crossing_reason(name, args, cwd=cwd, crossing=crossing)
    if policy == "untrusted":
        what = ", ".join(_one_line(p) for p in paths) if paths else "files"
        why = f"; {crossed}" if crossed else ""
        return f"changes {what} (untrusted mode asks before every change){why}"
    return crossed


def crossing_reason(
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    crossing: Callable[[str, bool], str | None] | None = None,
) -> str | None:
    """Why a ``write_file`` / ``apply_patch`` call writes across the workspace
    boundary (``docs/design/boundary.md``), or None (also for other tools and
    an unparseable patch, which the runner refuses before writing).

    The same text :func:`approval_reason` gives under ``on-request``; the
    shell also uses it to scope an "always" answer, so approving writes
    inside the workspace never approves a later write across the boundary.

    Args:
        crossing: as for :func:`approval_reason`; without it, lexical.
    """
    if name not in ("write_file", "apply_patch"):
        return None
    paths = _written_paths(name, args)
    if paths is None:
        return None
    if crossing is None:
        outside = [path for path in paths if not _inside(path, cwd)]
        if outside:
            shown = ", ".join(_one_line(p) for p in outside)
            return f"writes outside the working directory: {shown}"
        return None
    crossed = [(p, r) for p in paths if (r := crossing(p, True)) is not None]
    if crossed:
        return "writes " + "; ".join(f"{_one_line(p)}: {r}" for p, r in crossed)
    return None


def is_known_safe_command(command: object) -> bool:
    """Whether a shell command only reads, by a small conservative allowlist.

    Args:
        command: an argv list of strings, or a command string for
            ``/bin/sh -c``. Anything else is not safe.

    Returns:
        True for commands such as ``ls -la``, ``cat a.txt``, ``grep -n x f``,
        ``rg foo`` (without ``--pre``/``--search-zip``), ``find . -name x``
        (without ``-exec``/``-delete``/``-fprint``), ``sed -n 1,20p f``,
        ``git status|log|diff|show`` (without ``--output``), and
        ``bash -c``/``-lc`` wrappers around one such command. A string is
        safe only when it has no shell metacharacter (``; | & < > $ `` and
        friends, globs included) and splits into such an argv. Program
        names must be bare (``/tmp/x/ls`` is not ``ls``).
    """
    if isinstance(command, str):
        if not command.strip() or any(c in _METACHARACTERS for c in command):
            return False
        try:
            argv = shlex.split(command)
        except ValueError:
            return False
        return _safe_argv(argv)
    if isinstance(command, list) and all(isinstance(a, str) for a in command):
        return _safe_argv(command)
    return False


def _safe_argv(argv: Sequence[str]) -> bool:
    if not argv:
        return False
    program, args = argv[0], argv[1:]
    if program in _SHELLS:
        return len(args) == 2 and args[0] in ("-c", "-lc") and is_known_safe_command(args[1])
    if program in _PLAIN_SAFE:
        return True
    if program == "find":
        return not any(a in _FIND_UNSAFE for a in args)
    if program == "rg":
        return not any(
            a.split("=", 1)[0] in _RG_UNSAFE
            or (a.startswith("-") and not a.startswith("--") and "z" in a)
            for a in args
        )
    if program == "sed":
        return (
            len(args) >= 2
            and args[0] == "-n"
            and _is_print_range(args[1])
            and all(not a.startswith("-") for a in args[2:])
        )
    if program == "git":
        return (
            bool(args)
            and args[0] in _GIT_READ
            and not any(a.startswith(("--output", "--ext-diff")) for a in args[1:])
        )
    return False


def _is_print_range(script: str) -> bool:
    """``Np`` or ``N,Mp`` with decimal line numbers."""
    if not script.endswith("p"):
        return False
    parts = script[:-1].split(",")
    return 1 <= len(parts) <= 2 and all(p.isdecimal() and p.isascii() for p in parts)


def _written_paths(name: str, args: dict[str, Any]) -> list[str] | None:
    """Paths a file tool writes, or None when they cannot be told (bad patch)."""
    if name == "write_file":
        path = args.get("path")
        return [path] if isinstance(path, str) else None
    patch = args.get("patch")
    if not isinstance(patch, str):
        return None
    try:
        return patch_paths(parse_patch(patch))
    except PatchError:
        return None


def _inside(path: str, cwd: str) -> bool:
    """Lexical only: for callers without a kernel resolver (pure tests)."""
    root = os.path.normpath(cwd)
    target = os.path.normpath(os.path.join(root, path))
    return target == root or target.startswith(root.rstrip("/") + "/")


def _crossing(
    path: str, cwd: str, crossing: Callable[[str, bool], str | None] | None, *, write: bool
) -> str | None:
    if crossing is not None:
        return crossing(path, write)
    return None if _inside(path, cwd) else "outside the working directory"


def _one_line(path: str) -> str:
    """A path for a one-line reason: control characters (newlines) shown escaped."""
    if path.isprintable():
        return path
    return repr(path)[1:-1]


def _shown(command: object) -> str:
    text = shlex.join(command) if isinstance(command, list) else str(command)
    # Newlines separate commands for the shell: show them, never fold them
    # into spaces (an approval must show everything that will run).
    text = " ⏎ ".join(" ".join(line.split()) for line in text.splitlines())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
