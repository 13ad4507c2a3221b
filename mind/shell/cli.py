"""The ``mind`` command: the REPL, ``resume``, ``exec``, ``sessions`` and ``inbox``.

Owns argument parsing (every sub-command's flags), dispatch, the exit-code
table and the classification of the error that ends a run. The commands
live in their own modules, imported when chosen — :mod:`mind.shell.exec_cli`,
:mod:`mind.shell.inbox_cli`, :mod:`mind.shell.repl` — so that ``mind
--version``, ``--help`` and usage errors load no I/O library (httpx, apsw,
rich, prompt_toolkit, yaml, jsonschema); this module imports only the
standard library and pure or light parts of mind at its top.

Exit codes: 0 the turn completed (or nothing was left to run); 1 the turn
failed or was aborted, or a session/journal error; 2 bad usage or
configuration (including a bad --script); 3 the session is held by another
live process; 130 interrupted; 141 stdout was closed by its reader.
``mind inbox`` (:mod:`mind.shell.inbox_cli`): 0 listed or dropped; 1 the
message cannot be dropped; 2 no such session; 3 the session is held elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn, TextIO

from mind._version import __version__

if TYPE_CHECKING:
    from mind.generated import events as ev
    from mind.shell.config import CliOverrides, ResolvedConfig

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_OCCUPIED = 3
EXIT_STORAGE = 4  # mind's own state could not be written (disk full, quota, I/O error)
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a killed writer


def _add_provider_options(p: argparse.ArgumentParser, *, sub: bool = False) -> None:
    # On a sub-command the options default to SUPPRESS so that the same option
    # given before the sub-command (`mind --provider x exec ...`) is kept.
    kw: dict[str, object] = {"default": argparse.SUPPRESS} if sub else {}
    p.add_argument(
        "--provider",
        choices=["openai-chat", "openai-responses", "anthropic", "scripted"],
        help="model provider (default: from config.toml or the API key in the environment)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument("--model", help="model name", **kw)  # type: ignore[arg-type]
    p.add_argument(
        "--base-url",
        help="provider base URL (any OpenAI-compatible server for openai-chat)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--script",
        help="script file of the offline scripted provider (YAML list of replies); "
        "implies --provider scripted",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--approval",
        choices=["untrusted", "on-request", "never"],
        help="when to ask before running a tool (default on-request)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--sandbox",
        choices=["read-only", "workspace-write", "danger-full-access"],
        help="what shell commands may change (default workspace-write; "
        "danger-full-access runs them unsandboxed)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--sandbox-network",
        choices=["off", "on"],
        help="whether sandboxed commands may use the network (default off)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--add-dir",
        action="append",
        metavar="DIR",
        help="another directory sandboxed commands may write (repeatable)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--model-context-window",
        metavar="TOKENS",
        help="the model's context window in tokens (default: known models' published "
        "window, or what the server's context-length error states)",
        **kw,  # type: ignore[arg-type]
    )
    p.add_argument(
        "--cwd",
        help="working directory of a new session (default: current directory)",
        **kw,  # type: ignore[arg-type]
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mind`` (sub-commands ``exec``, ``resume``, ``sessions``)."""
    parser = _Parser(
        prog="mind",
        description="A coding agent whose sessions cannot be lost.",
        epilog=_ENVIRONMENT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mind {__version__}")
    _add_provider_options(parser)
    parser.add_argument("--session", help="open this session in the REPL")
    parser.add_argument(
        "--unconfigured-ok",
        action="store_true",
        help="when no model provider is configured, explain how to configure one and exit 0 "
        "(for wrappers such as `make run`; any other error still fails)",
    )
    sub = parser.add_subparsers(dest="command")
    ex = sub.add_parser("exec", help="run one turn non-interactively and print the final answer")
    _add_provider_options(ex, sub=True)
    which = ex.add_mutually_exclusive_group()
    which.add_argument(
        "--session",
        metavar="ID",
        help="continue this session (its id or a unique prefix; never created)",
        default=argparse.SUPPRESS,
    )
    which.add_argument(
        "--new-session",
        metavar="ID",
        help="create a new session with this id (refused if it exists); without a PROMPT "
        "it is only created",
    )
    ex.add_argument("--json", action="store_true", help="print one JSON event per line on stdout")
    ex.add_argument(
        "prompt",
        nargs="?",
        help="the prompt ('-' reads stdin); omitted with --session: recover the session and "
        "run any input a crash left unacknowledged",
    )
    res = sub.add_parser(
        "resume", help="open the REPL on a session (default: the latest of this directory)"
    )
    _add_provider_options(res, sub=True)
    res.add_argument(
        "session_id",
        nargs="?",
        metavar="ID",
        help="the session id or a unique prefix (default: the most recent session whose "
        "working directory is the current one, or --cwd)",
    )
    ses = sub.add_parser("sessions", help="list sessions, most recent first")
    ses.add_argument(
        "--rebuild-index",
        action="store_true",
        help="rebuild the session index (index.db) from every journal first",
    )
    cfg = sub.add_parser(
        "config",
        help="print the effective settings and where each came from (keys never shown)",
    )
    _add_provider_options(cfg, sub=True)
    inbox = sub.add_parser(
        "inbox",
        help="list the input waiting in a session; --drop ID takes one back for good",
    )
    inbox.add_argument("session_id", metavar="SESSION", help="the session id or a unique prefix")
    inbox.add_argument(
        "--drop",
        metavar="ID",
        help="drop this waiting message (its id or a unique prefix); it is never sent",
    )
    dbg = sub.add_parser("debug", help="maintainer tools")
    dbg_sub = dbg.add_subparsers(dest="debug_command", required=True)
    dbg_sub.add_parser("boundaries", help="print every named durable boundary (MIND_CRASH_AT)")
    return parser


def _overrides(args: argparse.Namespace) -> CliOverrides:
    from mind.shell.config import CliOverrides

    return CliOverrides(
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        script=args.script,
        approval=args.approval,
        sandbox_mode=getattr(args, "sandbox", None),
        sandbox_network=getattr(args, "sandbox_network", None),
        add_dirs=tuple(args.add_dir) if getattr(args, "add_dir", None) else None,
        model_context_window=getattr(args, "model_context_window", None),
    )


def resolved_config(args: argparse.Namespace) -> ResolvedConfig:
    """The settings of this invocation: flags > environment > ``config.toml`` > default.

    Raises:
        ConfigError, NotConfiguredError: see :func:`mind.shell.config.resolve`.
    """
    from mind.shell.config import resolve
    from mind.shell.store import mind_home

    env = os.environ
    return resolve(_overrides(args), env, mind_home(env) / "config.toml")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mind`` console script; returns the exit code."""
    raw = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(raw)
    except _UsageError as exc:
        print(f"{exc.usage}{exc.prog}: error: {exc.message}", file=sys.stderr)
        if "exec" in raw and "--json" in raw[raw.index("exec") :]:
            _emit_failure(EXIT_USAGE, "usage", f"{exc.prog}: {exc.message}")
        return EXIT_USAGE
    json_mode = args.command == "exec" and bool(args.json)
    try:
        return _dispatch(args)
    except BaseException as exc:
        from mind.shell.redact import redact

        leaf = _single_leaf(exc)
        if isinstance(leaf, BrokenPipeError):
            # stdout was closed (`mind sessions | head -1`): stop quietly, like other CLIs.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        failure = _classify(leaf)
        if failure is None:
            if not json_mode or not isinstance(leaf, Exception):
                raise
            # A traceback quotes exception text, which may carry a key or a URL.
            import traceback  # only for a bug: `mind --version` must not pay for it

            trace = "".join(traceback.format_exception(leaf))
            print(redact(trace, _secrets(args)), end="", file=sys.stderr)
            failure = (EXIT_FAILED, "internal")
        code, kind = failure
        message = (
            f"internal error: {type(leaf).__name__}: {leaf}" if kind == "internal" else str(leaf)
        )
        from mind.errors import DAMAGED_JOURNAL_REFUSED, JournalCorruptError

        if isinstance(leaf, JournalCorruptError):  # the refusal says what the person can do
            message = f"{message}\n  {DAMAGED_JOURNAL_REFUSED}"
        message = redact(message, _secrets(args))
        if kind != "internal":
            print(f"mind: {message}", file=sys.stderr)
        if json_mode:
            _emit_failure(code, kind, message)
        from mind.errors import NotConfiguredError

        if isinstance(leaf, NotConfiguredError) and args.unconfigured_ok:
            return EXIT_OK  # mind just explained how to configure a model
        return code


def _secrets(args: argparse.Namespace) -> tuple[str, ...]:
    """The secrets this invocation knows of (keys in the environment, the
    base URL's userinfo and query), for :func:`~mind.shell.redact.redact`."""
    from mind.shell.config import known_secrets

    return known_secrets(os.environ, getattr(args, "base_url", None))


class _UsageError(Exception):
    """argparse's complaint, raised instead of its ``sys.exit(2)`` so that
    ``--json`` runs can still end stdout with an ``exec.failed`` line."""

    def __init__(self, prog: str, usage: str, message: str) -> None:
        super().__init__(message)
        self.prog, self.usage, self.message = prog, usage, message


_ENVIRONMENT_HELP = "\x00environment help\x00"
"""Placeholder epilog of the top parser, replaced by
:func:`mind.shell.config.environment_help` only when help is shown: the
settings table imports config (msgspec, policy), which ``--version`` and
usage errors must not pay for."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.prog, self.format_usage(), message)

    def format_help(self) -> str:
        if self.epilog == _ENVIRONMENT_HELP:
            from mind.shell.config import environment_help

            self.epilog = environment_help()
        return super().format_help()


def _failures() -> tuple[tuple[type[BaseException], int, str], ...]:
    """Exception type → (exit code, ``exec.failed`` kind); the first match wins.
    (Imported when a run ends in an error: ``mind --version`` must not pay
    for the error tree's dataclasses and pathlib, ~10 ms.)"""
    from mind.errors import (
        ConfigError,
        MindError,
        ScriptError,
        SessionLookupError,
        SessionOccupiedError,
        StateDirError,
        StorageError,
    )

    return (
        (ConfigError, EXIT_USAGE, "usage"),
        (SessionLookupError, EXIT_USAGE, "usage"),  # a typed id naming no session, or several
        (ScriptError, EXIT_USAGE, "usage"),  # the offline script is part of the configuration
        (SessionOccupiedError, EXIT_OCCUPIED, "occupied"),
        (StateDirError, EXIT_FAILED, "state_dir"),
        (StorageError, EXIT_STORAGE, "storage"),
        (MindError, EXIT_FAILED, "session"),
    )


def _classify(exc: BaseException) -> tuple[int, str] | None:
    """Exit code and failure kind of an error that ends a run; None for a bug."""
    from mind.errors import MountRefused

    if isinstance(exc, MountRefused):
        return (EXIT_OCCUPIED, "occupied") if exc.kind == "occupied" else (EXIT_FAILED, "session")
    for kind_type, code, kind in _failures():
        if isinstance(exc, kind_type):
            return code, kind
    return None


def _single_leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) task-group groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _emit_failure(code: int, kind: str, message: str) -> None:
    """The last ``--json`` line of a failed run (best effort: stdout may be gone)."""
    from mind.generated import events as ev

    event = ev.ExecFailedEvent(kind=ev.ExecFailureKind(kind), message=message, exit_code=code)
    with contextlib.suppress(BrokenPipeError, ValueError):  # closed by its reader, or closed
        emit_json(sys.stdout, event)


def _skip_httpx_cli() -> None:
    """Keep httpx's own command line (``httpx._main``) out of this process.

    ``import httpx`` imports it, and it imports rich, click and pygments
    (~90 ms before ``mind exec``'s first request; benchmarks/cli_start.py).
    httpx guards that import for installs without its ``cli`` extra, so a
    ``None`` entry in :data:`sys.modules` (the import system's "no such
    module") gives the same httpx minus ``httpx.main``, which mind never
    calls. Only the ``mind`` program does this, not ``import mind`` in
    someone else's process, and never once httpx is already imported.
    """
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


def _dispatch(args: argparse.Namespace) -> int:
    # Each command imports what it needs here, not at the top (see the module docstring).
    _skip_httpx_cli()
    if args.command == "config":
        return _config(args)
    if args.command == "debug":
        from mind.shell import faults

        print("\n".join(faults.BOUNDARIES))
        return EXIT_OK
    import anyio

    if args.command == "exec":
        from mind.shell.providers import prepare_tls_context

        prepare_tls_context()  # built while exec_cli and the runtime are imported
        from mind.shell import exec_cli

        return anyio.run(exec_cli.run, args)
    if args.command == "sessions":
        return anyio.run(_sessions, args)
    if args.command == "inbox":
        from mind.shell import inbox_cli

        return anyio.run(inbox_cli.run, args)
    from mind.shell.repl import run_repl

    if args.command == "resume":
        resume = functools.partial(
            run_repl, _resume_config(args), args.cwd, args.session_id, latest=not args.session_id
        )
        return anyio.run(resume)
    return anyio.run(run_repl, resolved_config(args), args.cwd, args.session)


def _resume_config(args: argparse.Namespace) -> ResolvedConfig:
    """:func:`resolved_config` for ``mind resume``; when no provider is
    configured the refusal also says what the session last ran with and how
    to resume it that way (:func:`mind.shell.repl.launch.resume_hint`).

    Raises:
        ConfigError, NotConfiguredError: as :func:`resolved_config`.
    """
    import anyio

    from mind.errors import NotConfiguredError

    try:
        return resolved_config(args)
    except NotConfiguredError as exc:
        from mind.shell.repl.launch import resume_hint

        hint = anyio.run(resume_hint, args.cwd, args.session_id)
        if hint is None:
            raise
        lead = "No model provider is configured."
        rest = str(exc).removeprefix(lead).strip()
        raise NotConfiguredError(f"{lead} {hint} Otherwise: {rest}") from None


def emit_json(out: TextIO, event: ev.Event | ev.ExecFailedEvent) -> None:
    """Write ``event`` as one JSON line to ``out`` and flush (``--json``).

    Raises:
        BrokenPipeError: ``out`` was closed by its reader.
    """
    import msgspec

    from mind.conversation import without_lone_surrogates

    try:
        line = msgspec.json.encode(event)
    except UnicodeEncodeError:  # a lone surrogate got past the decoders: replace, never crash
        line = msgspec.json.encode(without_lone_surrogates(msgspec.to_builtins(event)))
    out.write(line.decode("utf-8") + "\n")
    out.flush()


def _config(args: argparse.Namespace) -> int:
    """``mind config``: one ``key  value  source`` line per setting; exit 2 with
    the reason when the settings do not resolve (the lines before it still print)."""
    from mind.shell.store import mind_home

    env = os.environ
    path = mind_home(env) / "config.toml"
    from mind.shell.config import describe

    rows, error = describe(_overrides(args), env, path)
    state = "" if path.is_file() else " (absent)"
    width = max(len("config file"), *(len(row.key) for row in rows))
    print(f"{'config file':<{width}}  {path}{state}")
    for row in rows:
        print(f"{row.key:<{width}}  {row.value:<32}  {row.source}")
    if error is not None:
        print(f"mind: {error}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


async def _sessions(args: argparse.Namespace) -> int:
    from mind.errors import StateDirError
    from mind.shell.runtime import Runtime
    from mind.shell.store import listing_lines

    async with Runtime.open() as rt:
        if args.rebuild_index:
            try:
                count = rt.store.rebuild_index()
            except StateDirError as exc:  # the index is derived: still list the sessions
                print(f"mind: the index was not rebuilt: {exc.detail}", file=sys.stderr)
            else:
                print(f"mind: indexed {count} session(s) from their journals", file=sys.stderr)
        rows = rt.list_sessions()
    print("\n".join(listing_lines(rows, time.time_ns() // 1_000_000)))
    return EXIT_OK


if __name__ == "__main__":
    # `python -m mind.shell.cli`: run the importable module's main, so that
    # exec_cli (which imports mind.shell.cli) shares this run's module state.
    from mind.shell import cli

    sys.exit(cli.main())
