"""``mind exec``: run one prompt (or recover a session) and print its events.

Loaded by :mod:`mind.shell.cli` only when the command is ``exec``: this is
where the runtime, anyio and the renderer are imported, so that ``mind
--help`` never pays for them. Plain mode prints progress on stderr and the
final answer on stdout; ``--json`` prints one event per line (the rule of
``--json``: a failing run ends with one event giving kind and message). Exit
codes are :mod:`mind.shell.cli`'s.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

import anyio

from mind.conversation import REPLACEMENT_CHARACTER, replace_lone_surrogates
from mind.errors import ConfigError, InputRefused, StorageError
from mind.generated import events as ev
from mind.shell import faults, inbox_cli
from mind.shell.cli import (
    EXIT_BROKEN_PIPE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STORAGE,
    emit_json,
    resolved_config,
)
from mind.shell.inbox import check_fits_alone
from mind.shell.runtime import Runtime, Session
from mind.shell.store import SESSION_ID_RE, resolve_session_id
from mind.shell.terminal_text import plain

WAIT_REPORT_S = 30.0
"""While the model sends nothing, ``exec`` says so on stderr this often (seconds)."""

_STATUS_EXIT = {
    "completed": EXIT_OK,
    "failed": EXIT_FAILED,
    "aborted": EXIT_FAILED,
    "interrupted": EXIT_INTERRUPTED,
}


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


async def run(args: argparse.Namespace) -> int:
    """``mind exec``: run the prompt (or recover the session) and print; the exit code."""
    faults.configure(os.environ)
    config = resolved_config(args)
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
            session = await rt.create_session(cwd=cwd, config=config, session_id=args.new_session)
        elif args.session:
            sid = resolve_session_id(args.session, [r.session_id for r in rt.list_sessions()])
            session = await rt.open_session(sid, config=config, cwd=cwd)
            if args.cwd and session.cwd != cwd.resolve():
                print(
                    f"mind: note: session {session.session_id} keeps its working directory "
                    f"{session.cwd} (--cwd {cwd} ignored)",
                    file=sys.stderr,
                )
        else:
            session = await rt.create_session(cwd=cwd, config=config)
        # Older input waiting now rides along, first: never silently (docs/design/mailbox.md §6).
        replay = session.waiting_event() if not args.json and session.waiting else None
        try:
            # The turn starts (its first request goes out) while a worker waits
            # for the sandbox probe, which the session line names.
            _start(session, prompt)
        finally:
            await anyio.to_thread.run_sync(session.sandbox.wait)
            _print_header(session, prompt, json_mode=args.json, out=out, replay=replay)
        code = await _run_exec_session(session, json_mode=args.json, out=out)
        await _finish_prefix_check(session)
        return code


async def _finish_prefix_check(session: Session) -> None:
    """Let the background check of the prefix the opening checkpoint covered
    end before a one-shot run closes its session (docs/design/checkpoints.md
    §5): a session only ever resumed by short runs would else never be
    checked. Damage is reported by the check (a warning on stderr); Ctrl-C
    abandons the wait (the next open checks again)."""
    check = session.journal.verification
    if check is not None:
        await anyio.to_thread.run_sync(check.wait, None, abandon_on_cancel=True)


def _start(session: Session, prompt: str | None) -> None:
    """Send ``prompt`` (None: go on with what the session recovered)."""
    if prompt is None:
        session.resume_pending()
        return
    try:
        session.send(prompt)
    except InputRefused as exc:
        if isinstance(exc.__cause__, StorageError):
            raise exc.__cause__ from None  # exit 4, like a turn that met it
        raise ConfigError(str(exc)) from exc


def _print_header(
    session: Session,
    prompt: str | None,
    *,
    json_mode: bool,
    out: TextIO,
    replay: ev.InputWaitingEvent | None,
) -> None:
    """What exec says before the session's events: a torn tail dropped, the
    session line (or ``session.started``), what recovery did, older input
    that rides along. The sandbox must be known (``session.sandbox.wait``)."""
    report = session.journal.report
    if report.torn_tail_dropped:
        print(
            f"mind: note: {session.journal.path}: dropped a torn last record "
            f"({report.torn_tail_bytes} bytes) left by an interrupted write",
            file=sys.stderr,
        )
    if json_mode:
        emit_json(out, session.started_event())
        if session.instructions_sources:  # which files the requests carry (context.md §4)
            emit_json(out, session.instructions_event())
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
        or recovered.resumed_turns
        or recovered.synthetic_results
        or recovered.replayed_inputs
    ):
        if json_mode:
            emit_json(out, recovered)
        else:
            print(
                f"recovered: {recovered.aborted_turns} aborted turn(s), "
                f"{recovered.completed_turns} answered turn(s) closed, "
                f"{recovered.resumed_turns} turn(s) resumed, "
                f"{recovered.synthetic_results} interrupted tool call(s), "
                f"{recovered.replayed_inputs} input(s) to replay",
                file=sys.stderr,
            )
    if replay is not None:
        inbox_cli.announce_replay(replay, sys.stderr)


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
            if isinstance(event, ev.TurnStartedEvent | ev.TurnResumedEvent):
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
            emit_json(out, held)
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
    # A completed turn may carry a failure too: its answer was journaled but
    # its terminal record could not be written (docs/design/turn.md §2).
    if last.status != ev.TurnStatus.completed or isinstance(last.failure, ev.Failure):
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
    mind's own (docs/design/providers.md §3). Runs until cancelled."""
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
            emit_json(out, held)
        return event
    if isinstance(event, ev.InputWaitingEvent):
        emit_json(out, event)
        if held is not None:
            emit_json(out, held)
        return None
    if held is not None:  # any other event follows the turn it comes after
        emit_json(out, held)
    emit_json(out, event)
    return None


def _human_progress(event: ev.Event) -> None:
    if isinstance(event, ev.TurnWarningEvent):
        print(f"mind: warning: {event.message}", file=sys.stderr)
    if isinstance(event, ev.ContextCompactedEvent):
        from mind.shell.event_text import describe_compaction

        print(f"mind: {describe_compaction(event)}", file=sys.stderr)
        return
    if isinstance(event, ev.ContextCompactionFailedEvent):
        from mind.shell.event_text import describe_compaction_failure

        print(f"mind: warning: {describe_compaction_failure(event)}", file=sys.stderr)
        return
    if isinstance(event, ev.TurnResumedEvent):
        from mind.shell.event_text import describe_resume

        print(f"resuming turn {event.turn_id}: {describe_resume(event)}", file=sys.stderr)
        return
    if isinstance(event, ev.ToolWaitingEvent):
        import time

        from mind.shell.event_text import describe_waiting

        print(f"mind: {describe_waiting(event, round(time.time() * 1000))}", file=sys.stderr)
        return
    if not isinstance(event, ev.ToolCallEvent | ev.ToolResultEvent | ev.TurnRetryingEvent):
        return
    # render (rich, ~50 ms) is imported at the first progress line, after the
    # first request, not at start (benchmarks/cli_start.py: exec.first_request).
    from mind.shell.call_summary import describe_arguments, preview_lines, shorten

    err = sys.stderr
    # Tool and model text goes through the REPL's sanitiser: it must not drive the terminal.
    if isinstance(event, ev.ToolCallEvent):
        # A command a crash left running is waited for, not called (effects.md §4).
        waited = " (already running; waiting for it)" if event.already_running is True else ""
        print(
            f"→ {plain(event.name)} {describe_arguments(event.name, event.arguments, 120)}{waited}",
            file=err,
        )
    elif isinstance(event, ev.ToolResultEvent):
        first = preview_lines(event.output, 1)[0]
        # A collected result says so: it was not seen live.
        status = "outcome unknown" if event.outcome_unknown is True else event.status.value
        if event.collected is True:
            status += " (collected after restart)"
        print(f"  {status}: {shorten(first[0] if first else '', 120)}", file=err)
    elif isinstance(event, ev.TurnRetryingEvent):
        print(f"  retrying in {event.delay_s:.1f}s: {plain(event.failure.message)}", file=err)
