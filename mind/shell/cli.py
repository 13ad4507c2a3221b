"""The ``mind`` command: the REPL, ``resume``, ``exec``, ``sessions`` and ``inbox``.

Size: argument parsing, exec's printer and the exit-code table; ``inbox``
already lives in :mod:`mind.shell.inbox_cli`, and exec's event printer
(``_run_exec_session`` and the ``--json`` ordering) is the next piece to
move out, to ``exec_cli``.

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
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn, TextIO

import anyio
import msgspec

from mind._version import __version__
from mind.conversation import (
    REPLACEMENT_CHARACTER,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.errors import (
    ConfigError,
    InputRefused,
    MindError,
    MountRefused,
    NotConfiguredError,
    ScriptError,
    SessionLookupError,
    SessionOccupiedError,
    StateDirError,
    StorageError,
)
from mind.generated import events as ev
from mind.shell import faults, inbox_cli
from mind.shell.config import (
    CliOverrides,
    ResolvedConfig,
    describe,
    environment_help,
    known_secrets,
    resolve,
)
from mind.shell.inbox import check_fits_alone
from mind.shell.redact import redact
from mind.shell.render import describe_arguments, plain, preview_lines, shorten
from mind.shell.runtime import Runtime, Session
from mind.shell.store import SESSION_ID_RE, listing_lines, mind_home, resolve_session_id

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_OCCUPIED = 3
EXIT_STORAGE = 4  # mind's own state could not be written (disk full, quota, I/O error)
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a killed writer

WAIT_REPORT_S = 30.0
"""While the model sends nothing, ``exec`` says so on stderr this often (seconds)."""

_STATUS_EXIT = {
    "completed": EXIT_OK,
    "failed": EXIT_FAILED,
    "aborted": EXIT_FAILED,
    "interrupted": EXIT_INTERRUPTED,
}


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
        "--cwd",
        help="working directory of a new session (default: current directory)",
        **kw,  # type: ignore[arg-type]
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``mind`` (sub-commands ``exec``, ``resume``, ``sessions``)."""
    parser = _Parser(
        prog="mind",
        description="A coding agent whose sessions cannot be lost.",
        epilog=environment_help(),
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
    inbox_cli.add_parser(sub)
    dbg = sub.add_parser("debug", help="maintainer tools")
    dbg_sub = dbg.add_subparsers(dest="debug_command", required=True)
    dbg_sub.add_parser("boundaries", help="print every named durable boundary (MIND_CRASH_AT)")
    return parser


def _overrides(args: argparse.Namespace) -> CliOverrides:
    return CliOverrides(
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        script=args.script,
        approval=args.approval,
        sandbox_mode=getattr(args, "sandbox", None),
        sandbox_network=getattr(args, "sandbox_network", None),
        add_dirs=tuple(args.add_dir) if getattr(args, "add_dir", None) else None,
    )


def _resolve(args: argparse.Namespace) -> ResolvedConfig:
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
            trace = "".join(traceback.format_exception(leaf))
            print(redact(trace, _secrets(args)), end="", file=sys.stderr)
            failure = (EXIT_FAILED, "internal")
        code, kind = failure
        message = (
            f"internal error: {type(leaf).__name__}: {leaf}" if kind == "internal" else str(leaf)
        )
        message = redact(message, _secrets(args))
        if kind != "internal":
            print(f"mind: {message}", file=sys.stderr)
        if json_mode:
            _emit_failure(code, kind, message)
        if isinstance(leaf, NotConfiguredError) and args.unconfigured_ok:
            return EXIT_OK  # mind just explained how to configure a model
        return code


def _secrets(args: argparse.Namespace) -> tuple[str, ...]:
    """The secrets this invocation knows of (keys in the environment, the
    base URL's userinfo and query), for :func:`~mind.shell.redact.redact`."""
    return known_secrets(os.environ, getattr(args, "base_url", None))


class _UsageError(Exception):
    """argparse's complaint, raised instead of its ``sys.exit(2)`` so that
    ``--json`` runs can still end stdout with an ``exec.failed`` line."""

    def __init__(self, prog: str, usage: str, message: str) -> None:
        super().__init__(message)
        self.prog, self.usage, self.message = prog, usage, message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self.prog, self.format_usage(), message)


_FAILURES: tuple[tuple[type[BaseException], int, str], ...] = (
    (ConfigError, EXIT_USAGE, "usage"),
    (SessionLookupError, EXIT_USAGE, "usage"),  # a typed id naming no session, or several
    (ScriptError, EXIT_USAGE, "usage"),  # the offline script is part of the configuration
    (SessionOccupiedError, EXIT_OCCUPIED, "occupied"),
    (StateDirError, EXIT_FAILED, "state_dir"),
    (StorageError, EXIT_STORAGE, "storage"),
    (MindError, EXIT_FAILED, "session"),
)
"""Exception type → (exit code, ``exec.failed`` kind); the first match wins."""


def _classify(exc: BaseException) -> tuple[int, str] | None:
    """Exit code and failure kind of an error that ends a run; None for a bug."""
    if isinstance(exc, MountRefused):
        return (EXIT_OCCUPIED, "occupied") if exc.kind == "occupied" else (EXIT_FAILED, "session")
    for kind_type, code, kind in _FAILURES:
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
    event = ev.ExecFailedEvent(kind=ev.ExecFailureKind(kind), message=message, exit_code=code)
    with contextlib.suppress(BrokenPipeError, ValueError):  # closed by its reader, or closed
        _emit_json(sys.stdout, event)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "exec":
        return anyio.run(_exec, args)
    if args.command == "sessions":
        return anyio.run(_sessions, args)
    if args.command == "config":
        return _config(args)
    if args.command == "inbox":
        return anyio.run(inbox_cli.run, args)
    if args.command == "debug":
        print("\n".join(faults.BOUNDARIES))
        return EXIT_OK
    from mind.shell.repl import run_repl

    if args.command == "resume":
        resume = functools.partial(
            run_repl, _resolve(args), args.cwd, args.session_id, latest=not args.session_id
        )
        return anyio.run(resume)
    return anyio.run(run_repl, _resolve(args), args.cwd, args.session)


def _decode_prompt(data: bytes, where: str) -> str:
    """The prompt's text; invalid UTF-8 becomes U+FFFD, and stderr says so."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        bad = text.count(REPLACEMENT_CHARACTER) - data.count(REPLACEMENT_CHARACTER.encode())
        print(
            f"mind: note: the prompt ({where}) is not valid UTF-8: {bad} undecodable "
            "sequence(s) replaced with U+FFFD",
            file=sys.stderr,
        )
        return text


def _read_prompt(args: argparse.Namespace) -> str | None:
    named = bool(args.session or args.new_session)
    if args.prompt not in (None, "-"):
        # argv was decoded with surrogateescape: get the bytes back to decode them honestly.
        return _decode_prompt(os.fsencode(str(args.prompt)), "argument")
    if args.prompt == "-" or not sys.stdin.isatty():
        text = _decode_prompt(sys.stdin.buffer.read(), "stdin")
        if text or args.prompt == "-" or not named:
            return text
        return None  # a named session with an empty, non-interactive stdin: nothing to send
    if named:
        return None
    raise ConfigError("mind exec needs a PROMPT argument (or '-' to read it from stdin)")


async def _exec(args: argparse.Namespace) -> int:
    faults.configure(os.environ)
    config = _resolve(args)
    prompt = _read_prompt(args)
    if prompt is not None and not prompt.strip():
        raise ConfigError("the prompt is empty")
    if prompt is not None:
        try:
            check_fits_alone(prompt)  # refused before a session exists: none is left behind
        except InputRefused as exc:
            raise ConfigError(str(exc)) from exc
    cwd = Path(args.cwd).expanduser() if args.cwd else Path.cwd()
    if not cwd.is_dir():
        raise ConfigError(f"--cwd {cwd} is not a directory")
    for flag, value in (("--session", args.session), ("--new-session", args.new_session)):
        if value is not None and not SESSION_ID_RE.match(value):
            raise ConfigError(f"{flag} {value!r} is not a valid session id")
    out = sys.stdout
    async with Runtime.open() as rt:
        if args.new_session:
            if rt.store.journal_path(args.new_session).exists():
                raise ConfigError(
                    f"session {args.new_session} already exists; continue it with "
                    f"--session {args.new_session}"
                )
            session = rt.create_session(cwd=cwd, config=config, session_id=args.new_session)
        elif args.session:
            sid = resolve_session_id(args.session, [r.session_id for r in rt.list_sessions()])
            session = rt.open_session(sid, config=config, cwd=cwd)
            if args.cwd and session.cwd != cwd.resolve():
                print(
                    f"mind: note: session {session.session_id} keeps its working directory "
                    f"{session.cwd} (--cwd {cwd} ignored)",
                    file=sys.stderr,
                )
        else:
            session = rt.create_session(cwd=cwd, config=config)
        report = session.journal.report
        if report.torn_tail_dropped:
            print(
                f"mind: note: {session.journal.path}: dropped a torn last record "
                f"({report.torn_tail_bytes} bytes) left by an interrupted write",
                file=sys.stderr,
            )
        if args.json:
            _emit_json(out, session.started_event())
        else:
            print(
                f"session {session.session_id} · {session.provider.label} · "
                f"sandbox {session.sandbox.describe()}",
                file=sys.stderr,
            )
        recovered = session.recovery
        if recovered is not None and (
            prompt is None
            or recovered.aborted_turns
            or recovered.completed_turns
            or recovered.synthetic_results
            or recovered.replayed_inputs
        ):
            if args.json:
                _emit_json(out, recovered)
            else:
                print(
                    f"recovered: {recovered.aborted_turns} aborted turn(s), "
                    f"{recovered.completed_turns} answered turn(s) closed, "
                    f"{recovered.synthetic_results} interrupted tool call(s), "
                    f"{recovered.replayed_inputs} input(s) to replay",
                    file=sys.stderr,
                )
        if not args.json and session.waiting:
            # Older input rides along, first: never silently (issue 7 item 11).
            inbox_cli.announce_replay(session.waiting_event(), sys.stderr)
        if prompt is not None:
            try:
                session.send(prompt)
            except InputRefused as exc:
                if isinstance(exc.__cause__, StorageError):
                    raise exc.__cause__ from None  # exit 4, like a turn that met it
                raise ConfigError(str(exc)) from exc
        else:
            session.resume_pending()
        return await _run_exec_session(session, json_mode=args.json, out=out)


async def _run_exec_session(session: Session, *, json_mode: bool, out: TextIO) -> int:
    """Print the session's events until it is idle; exit code of the last turn."""
    last: ev.TurnCompletedEvent | None = None
    final_text = ""
    stdout_closed = False
    waiting_notice: ev.InputWaitingEvent | None = None
    held: ev.TurnCompletedEvent | None = None
    async with anyio.create_task_group() as tg:

        async def on_sigint() -> None:
            with anyio.open_signal_receiver(
                signal.SIGINT, signal.SIGTERM, signal.SIGHUP
            ) as signals:
                async for _ in signals:
                    if session.current is not None:
                        session.current.interrupt(send_pending=False)

        tg.start_soon(on_sigint)
        tg.start_soon(_report_model_waits, session)
        async for event in session.events():
            if isinstance(event, ev.TurnStartedEvent):
                final_text = ""
            elif isinstance(event, ev.MessageCompletedEvent):
                final_text = event.text
            elif isinstance(event, ev.TurnCompletedEvent):
                last = event
            if stdout_closed:
                continue
            try:
                if json_mode:
                    if not isinstance(
                        event, ev.ReasoningDeltaEvent | ev.InputAcceptedEvent | ev.InputClaimedEvent
                    ):
                        held = _emit_json_ordered(out, event, held)
                elif isinstance(event, ev.InputWaitingEvent):
                    waiting_notice = event  # after the final answer and the failure line
                else:
                    _human_progress(event)
            except BrokenPipeError:
                # The reader went away (`mind exec ... | head -1`): nobody is
                # watching, so stop the turn rather than run tools unobserved.
                stdout_closed = True
                if session.current is not None:
                    session.current.interrupt(send_pending=False)
        tg.cancel_scope.cancel()
    if held is not None and not stdout_closed:
        try:
            _emit_json(out, held)
        except BrokenPipeError:
            stdout_closed = True
    if stdout_closed:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush is quiet
        return EXIT_BROKEN_PIPE
    if last is None:
        return EXIT_OK
    if not json_mode and final_text:
        # A terminal gets the one sanitiser (model text must not retitle or clear
        # it); a pipe or file gets the exact text, which scripts rely on.
        text = replace_lone_surrogates(final_text)
        if out.isatty():
            text = plain(text)
        out.write(text.rstrip("\n") + "\n")
        out.flush()
    if last.status != ev.TurnStatus.completed:
        failure = last.failure if isinstance(last.failure, ev.Failure) else None
        line = f"mind: turn {last.status.value}"
        if failure is not None:
            line += f" ({failure.kind.value}): {failure.message}"
            detail = session.current.failure_detail if session.current else ""
            if detail:
                line += f" — {' '.join(plain(detail).split())[:300]}"
        print(line, file=sys.stderr)
        # --json: the turn.completed line just printed already carries status and failure.
    if waiting_notice is not None and not session.busy:
        inbox_cli.announce(session.waiting_event(), sys.stderr)  # as it is now
    if isinstance(last.failure, ev.Failure) and last.failure.kind == ev.FailureKind.storage:
        return EXIT_STORAGE
    return _STATUS_EXIT[last.status.value]


async def _report_model_waits(session: Session) -> None:
    """Print ``waiting for the model… N s`` on stderr after every
    :data:`WAIT_REPORT_S` of silence from the model in an open request, so a
    server that accepted and never answers is not mistaken for a hang of
    mind's own (issue 7 item 12). Runs until cancelled."""
    interval = WAIT_REPORT_S
    last: tuple[float, int] | None = None
    while True:
        await anyio.sleep(min(1.0, interval / 4))
        turn = session.current
        since = turn.model_quiet_since if turn is not None and not turn.done else None
        if since is None:
            continue
        waited = time.monotonic() - since
        due = int(waited // interval)
        if due >= 1 and last != (since, due):
            last = (since, due)
            print(f"mind: waiting for the model… {due * interval:g} s", file=sys.stderr)


def _emit_json_ordered(
    out: TextIO, event: ev.Event, held: ev.TurnCompletedEvent | None
) -> ev.TurnCompletedEvent | None:
    """Print ``event``, keeping a turn's ``turn.completed`` last of that turn.

    The runtime announces waiting input (``input.waiting``) just after the
    turn's terminal event; exec prints it just before, so that a failed run's
    last line is still its ``turn.completed`` with status and failure (the
    rule of ``--json``: a failing run ends with one event giving kind and
    message). Returns the ``turn.completed`` still held back (printed by the
    next call, or by the caller when the stream ends).
    """
    if isinstance(event, ev.TurnCompletedEvent):
        if held is not None:
            _emit_json(out, held)
        return event
    if isinstance(event, ev.InputWaitingEvent):
        _emit_json(out, event)
        if held is not None:
            _emit_json(out, held)
        return None
    if held is not None:  # any other event follows the turn it comes after
        _emit_json(out, held)
    _emit_json(out, event)
    return None


def _emit_json(out: TextIO, event: ev.Event | ev.ExecFailedEvent) -> None:
    try:
        line = msgspec.json.encode(event)
    except UnicodeEncodeError:  # a lone surrogate got past the decoders: replace, never crash
        line = msgspec.json.encode(without_lone_surrogates(msgspec.to_builtins(event)))
    out.write(line.decode("utf-8") + "\n")
    out.flush()


def _human_progress(event: ev.Event) -> None:
    err = sys.stderr
    # Tool and model text goes through the REPL's sanitiser: it must not drive the terminal.
    if isinstance(event, ev.ToolCallEvent):
        print(
            f"→ {plain(event.name)} {describe_arguments(event.name, event.arguments, 120)}",
            file=err,
        )
    elif isinstance(event, ev.ToolResultEvent):
        first = preview_lines(event.output, 1)[0]
        print(f"  {event.status.value}: {shorten(first[0] if first else '', 120)}", file=err)
    elif isinstance(event, ev.TurnRetryingEvent):
        print(f"  retrying in {event.delay_s:.1f}s: {plain(event.failure.message)}", file=err)


def _config(args: argparse.Namespace) -> int:
    """``mind config``: one ``key  value  source`` line per setting; exit 2 with
    the reason when the settings do not resolve (the lines before it still print)."""
    env = os.environ
    path = mind_home(env) / "config.toml"
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
    sys.exit(main())
