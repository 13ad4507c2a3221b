"""Approval policy: which tool calls may run without asking the person.

Size: file-tool and shell decisions share the remedies and the card text,
so they are one module; the shell part (``shell_decision``, known-safe
commands, denial signs) splits next into ``effects/shell_policy.py``.

Pure: decided from the policy, the tool name, the checked arguments and the
session's working directory — no file system, no environment. Where a file
tool path really lands is asked of the shell through ``crossing``, which
resolves it with the kernel the way the tool will (``docs/design/boundary.md``);
without it paths are compared lexically (``os.path.normpath``) only.

Policies (docs/design/boundary.md §1, the same names as Codex CLI's ``--ask-for-approval``):

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
boundary refuses, since no person approved it. Under every policy a file
tool reaching a denied root (``/proc``, ``/sys``, ``/dev``, mind's state) is
refused outright, never asked: no approval lets it through. Each decision
(:func:`tool_decision`) carries a remedy naming only the flags that would
really let the call run, for a session that cannot ask.

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

from mind.effects.boundary import Refusal, RefusalKind, SandboxMode
from mind.effects.patch import DeleteFile, UpdateFile, parse_patch
from mind.effects.review import mark_hidden
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
            "ask",
            sandboxed=False,
            reason=f"runs `{_shown(command)}` with no sandbox (danger-full-access)",
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
            "ask", sandboxed=False, reason=f"asks to leave the {mode} sandbox: {why}"
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
        "run it again without the sandbox?"
    )


Access = Literal["read", "write", "unlink"]
"""How a file tool reaches a path: ``unlink`` removes the name itself (a
delete, a move's source), so a final symlink is judged where it is, not
where it points."""

Crossing = Callable[[str, Access], Refusal | None]
"""``crossing(path, access)``: why a file tool reaching ``path`` (as the
model gave it) crosses the boundary, or None when it stays inside; supplied
by the shell, which resolves it with the kernel
(:meth:`mind.shell.tools.ToolRunner.boundary_reason`)."""

_REMEDY_RANK: dict[RefusalKind, int] = {
    "read-only": 1,
    "outside": 2,
    "protected": 3,
    "unresolved": 4,
    "denied": 5,
}
"""Which crossing decides the remedy when a call has several (the hardest)."""

_ALLOWED_BY: dict[RefusalKind, str] = {
    "read-only": "--sandbox workspace-write (plus --add-dir DIR for a directory outside the "
    "workspace) or --sandbox danger-full-access",
    "outside": "--add-dir DIR (DIR: the directory to write) or --sandbox danger-full-access",
    "protected": "--sandbox danger-full-access (a protected path is read-only in every "
    "writable root)",
}
"""The flags that make a crossing of each kind writable without asking."""


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """What to do with one tool call, why, and what would allow it.

    Attributes:
        action: ``run`` without asking, ``ask`` the person first, or
            ``refuse`` outright (nothing runs; ``reason`` is the whole tool
            result).
        reason: the approval card's line (``ask``) or the refusal (``refuse``);
            None for ``run``.
        remedy: for ``ask``: one sentence naming the flags under which the call
            would run without asking (for a session that cannot ask); for
            ``refuse``: what could allow it, or that nothing does.
        sandboxed: for ``shell``: whether it runs inside the sandbox.
        mode: for ``shell`` run sandboxed: the sandbox mode it runs in
            (:attr:`ShellDecision.mode`); None otherwise.
    """

    action: ShellAction
    reason: str | None = None
    remedy: str | None = None
    sandboxed: bool = True
    mode: SandboxMode | None = None


def tool_decision(
    policy: ApprovalPolicy,
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    crossing: Crossing | None = None,
    sandbox: SandboxMode = "workspace-write",
    sandbox_available: bool = True,
) -> ToolDecision:
    """Decide one tool call (the module table): run, ask or refuse, with the
    reason and the remedy.

    Rules beyond the table: a file tool call reaching a denied root
    (``/proc``, ``/sys``, ``/dev``, mind's state: a ``denied`` refusal) is
    refused under every policy — no approval could let it through, so the
    person is never asked. A remedy names only flags that would really let
    the call run: ``--approval never`` refuses every crossing too.

    Args:
        policy: the session's approval policy.
        name: the tool name.
        args: the arguments, already checked by
            :func:`mind.effects.tools.parse_arguments`.
        cwd: the session's working directory (absolute).
        crossing: see :data:`Crossing`; without it the check is lexical
            only, so a symlink inside ``cwd`` pointing outside would count
            as inside.
        sandbox: the session's sandbox mode (``shell``: :func:`shell_decision`).
        sandbox_available: whether a sandbox backend works here (without one
            a sandboxed command is refused, so no remedy may promise it).

    Raises:
        ValueError: ``policy`` is not an :data:`ApprovalPolicy` (misuse).
    """
    if policy not in APPROVAL_POLICIES:
        raise ValueError(f"unknown approval policy {policy!r}")
    if name == "shell":
        return _shell_tool_decision(
            shell_decision(policy, sandbox, args), sandbox, sandbox_available
        )
    contract = BUILTIN_TOOLS.get(name)
    if contract is None:
        # The runner answers an unknown tool with an error; `never` never asks.
        if policy == "never":
            return ToolDecision("run")
        return ToolDecision("ask", f"unknown tool {name!r}")
    if contract.read_only:
        if name not in ("read_file", "list_dir"):
            return ToolDecision("run")
        path = args.get("path", ".")
        found = _crossing(path, cwd, crossing, "read") if isinstance(path, str) else None
        if found is not None and found.kind == "denied":
            return _refused([(path, found)])
        if policy != "untrusted" or found is None:
            return ToolDecision("run")
        return ToolDecision(
            "ask",
            f"reads {_one_line(path)}: {found.reason} (untrusted mode asks before reading there)",
            _remedy("--approval on-request", None),
        )
    accesses = _written_paths(name, args)
    crossed = _crossings(accesses, cwd, crossing)
    denied = [(p, r) for p, r in crossed if r.kind == "denied"]
    if denied:
        return _refused(denied)
    if policy == "never":
        return ToolDecision("run")  # the tool refuses any crossing itself
    hardest = max((r.kind for _, r in crossed), key=_REMEDY_RANK.__getitem__, default=None)
    why = _crossed_text(crossed, lexical=crossing is None)
    if policy == "untrusted":
        what = ", ".join(_one_line(p) for p, _ in accesses) if accesses is not None else "files"
        also = f"; {why}" if why else ""
        return ToolDecision(
            "ask",
            f"changes {what} (untrusted mode asks before every change){also}",
            _remedy("--approval on-request", hardest),
        )
    if why is None:
        return ToolDecision("run")
    return ToolDecision("ask", why, _remedy(None, hardest))


def standing_question(
    decision: ToolDecision,
    asked: str | None,
    *,
    asked_where: str | None = None,
    now_where: str | None = None,
) -> ToolDecision:
    """``decision`` once the journal is consulted: a question about this very
    invocation that was journaled earlier (``asked``: its reason, e.g. from a
    process killed while the card was shown) is answered before the call
    runs, whatever the policy says now — fail closed across a ``mind resume``
    with other flags (docs/design/interactions.md §6).

    Rule: ``refuse`` stands (stricter); a shell command that would now run
    somewhere else than the question said (``asked_where`` / ``now_where``:
    a sandbox mode or ``outside``) is refused — the answer asked for does
    not cover that; else ``ask`` stands (the same question comes back) and
    ``run`` becomes ``ask`` with the recorded reason. ``asked`` None (no
    journaled question): ``decision`` unchanged.
    """
    if asked is None or decision.action == "refuse":
        return decision
    if asked_where != now_where:
        return ToolDecision(
            "refuse",
            f"Not run: before mind restarted this command was asked to run "
            f"{_place(asked_where)}, but this session would run it {_place(now_where)}; "
            "that question does not cover it. Ask for it again if it is still needed.",
        )
    if decision.action == "ask":
        return decision
    return ToolDecision(
        "ask",
        asked,
        # Only read where nobody can answer (the headless decline), and that
        # decline closes the question: no card is left to answer later.
        "It was asked before mind restarted; no person could answer it here, so it "
        "was declined and that question is closed. If it is still needed, ask the user "
        "to run it again in a session where they can approve it.",
        sandboxed=decision.sandboxed,
        mode=decision.mode,
    )


def _place(where: str | None) -> str:
    if where == "outside":
        return "outside the sandbox"
    return f"in the {where} sandbox" if where else "here"


def _shell_tool_decision(
    decision: ShellDecision, mode: SandboxMode, available: bool = True
) -> ToolDecision:
    if decision.action != "ask":
        return ToolDecision(
            decision.action, decision.reason, sandboxed=decision.sandboxed, mode=decision.mode
        )
    if not decision.sandboxed:
        # Leaving the sandbox without asking takes both (`never` refuses escalations).
        flags = (
            "--sandbox-network on if it only needs the network (it then runs inside the "
            "sandbox, without `sandbox: escalated`); else --sandbox danger-full-access "
            "--approval never"
        )
        if mode == "danger-full-access":
            flags = "--approval never"
    elif available:
        flags = "--approval on-request (it runs in the sandbox)"
    else:
        flags = (
            "--sandbox danger-full-access --approval never "
            "(or install bubblewrap: no sandbox works here)"
        )
    remedy = f"To allow it, rerun mind with {flags}."
    return ToolDecision(
        "ask", decision.reason, remedy, sandboxed=decision.sandboxed, mode=decision.mode
    )


def _remedy(approval: str | None, kind: RefusalKind | None) -> str:
    """One sentence: the flags under which a call that asks would run."""
    if kind == "unresolved":
        return "No flag allows it while where it resolves cannot be told."
    flags = [f for f in (approval, _ALLOWED_BY.get(kind) if kind else None) if f]
    return "To allow it, rerun mind with " + " and ".join(flags) + "."


def _refused(denied: list[tuple[str, Refusal]]) -> ToolDecision:
    shown = "; ".join(f"{_one_line(p)}: {r.reason}" for p, r in denied)
    remedy = "No flag or approval allows it: tools never reach it."
    return ToolDecision(
        "refuse",
        f"Refused without running: {shown}. {remedy} "
        "Do not retry it; tell the user what you wanted instead.",
        remedy,
    )


def approval_reason(
    policy: ApprovalPolicy,
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    crossing: Crossing | None = None,
    sandbox: SandboxMode = "workspace-write",
) -> str | None:
    """Whether one tool call needs approval: :func:`tool_decision`'s reason
    (a refusal counts as needing it), None when it runs without asking.

    Raises:
        ValueError: ``policy`` is not an :data:`ApprovalPolicy` (misuse).
    """
    return tool_decision(policy, name, args, cwd=cwd, crossing=crossing, sandbox=sandbox).reason


def crossing_reason(
    name: str,
    args: dict[str, Any],
    *,
    cwd: str,
    crossing: Crossing | None = None,
) -> str | None:
    """Why a ``write_file`` / ``apply_patch`` call writes across the workspace
    boundary (``docs/design/boundary.md``), or None (also for other tools and
    an unparseable patch, which the runner refuses before writing).

    The same text :func:`tool_decision` gives under ``on-request``; the
    shell also uses it to scope an "always" answer, so approving writes
    inside the workspace never approves a later write across the boundary.

    Args:
        crossing: as for :func:`tool_decision`; without it, lexical.
    """
    if name not in ("write_file", "apply_patch"):
        return None
    crossed = _crossings(_written_paths(name, args), cwd, crossing)
    return _crossed_text(crossed, lexical=crossing is None)


def _crossings(
    accesses: list[tuple[str, Access]] | None, cwd: str, crossing: Crossing | None
) -> list[tuple[str, Refusal]]:
    if accesses is None:
        return []
    return [(p, r) for p, a in accesses if (r := _crossing(p, cwd, crossing, a)) is not None]


def _crossed_text(crossed: list[tuple[str, Refusal]], *, lexical: bool) -> str | None:
    if not crossed:
        return None
    if lexical:
        shown = ", ".join(_one_line(p) for p, _ in crossed)
        return f"writes outside the working directory: {shown}"
    return "writes " + "; ".join(f"{_one_line(p)}: {r.reason}" for p, r in crossed)


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


def written_paths(name: str, args: dict[str, Any]) -> list[str] | None:
    """The paths a ``write_file`` / ``apply_patch`` call writes or unlinks, as
    the model gave them, in order; None for other tools or when they cannot
    be told (a malformed patch). What a session grant of the call covers
    (mind.effects.grants)."""
    if name not in ("write_file", "apply_patch"):
        return None
    found = _written_paths(name, args)
    return None if found is None else [path for path, _access in found]


def _written_paths(name: str, args: dict[str, Any]) -> list[tuple[str, Access]] | None:
    """Paths a file tool writes or unlinks, in order, without repeats (a path
    both written and unlinked counts as written), or None when they cannot
    be told (bad patch)."""
    if name == "write_file":
        path = args.get("path")
        return [(path, "write")] if isinstance(path, str) else None
    patch = args.get("patch")
    if not isinstance(patch, str):
        return None
    try:
        ops = parse_patch(patch)
    except PatchError:
        return None
    found: dict[str, Access] = {}
    for op in ops:
        moved = isinstance(op, UpdateFile) and op.move_to not in (None, op.path)
        if isinstance(op, DeleteFile) or moved:
            found.setdefault(op.path, "unlink")
        else:
            found[op.path] = "write"
        if isinstance(op, UpdateFile) and op.move_to is not None:
            found[op.move_to] = "write"
    return list(found.items())


def _inside(path: str, cwd: str) -> bool:
    """Lexical only: for callers without a kernel resolver (pure tests)."""
    root = os.path.normpath(cwd)
    target = os.path.normpath(os.path.join(root, path))
    return target == root or target.startswith(root.rstrip("/") + "/")


def _crossing(path: str, cwd: str, crossing: Crossing | None, access: Access) -> Refusal | None:
    if crossing is not None:
        return crossing(path, access)
    return None if _inside(path, cwd) else Refusal("outside", "outside the working directory")


def _one_line(path: str) -> str:
    """Model text for a one-line reason: bidi and zero-width characters shown
    as ``⟨U+202E⟩`` (:func:`~mind.effects.review.mark_hidden`, the rule of every
    approval), other control characters (newlines) escaped."""
    text = mark_hidden(path, keep_joiners=False)
    if text.isprintable():
        return text
    return repr(text)[1:-1]


def _shown(command: object) -> str:
    text = shlex.join(command) if isinstance(command, list) else str(command)
    # Newlines separate commands for the shell: show them, never fold them
    # into spaces (an approval must show everything that will run).
    text = " ⏎ ".join(" ".join(line.split()) for line in text.splitlines())
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"
