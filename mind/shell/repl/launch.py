"""Starting and ending the REPL process: ``run_repl`` (README.md).

Owns what surrounds one :class:`~mind.shell.repl.app.Repl` run: the terminal
check, the input-history file, holding SIGHUP/SIGTERM until the REPL handles
them, opening or creating the first session, and on the way out deleting the
sessions nothing was sent to and printing how to resume; and, when ``mind
resume`` finds no provider configured, what the session last ran with
(:func:`resume_hint`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from prompt_toolkit.patch_stdout import patch_stdout
from rich.console import Console
from rich.text import Text

from mind.errors import ConfigError, MindError
from mind.generated import journal as jr
from mind.shell import private_files
from mind.shell.config import ResolvedConfig
from mind.shell.journal import read_records
from mind.shell.repl.app import Repl
from mind.shell.runtime import Runtime, Session
from mind.shell.store import SessionSummary, mind_home, resolve_session_id

HANGUP_HOLD_MAX_S: Final = 5.0
"""Longest time (seconds) start-up holds SIGHUP/SIGTERM back while the REPL
installs its handling; after it they are let through whatever happened."""


def history_file(env: Mapping[str, str]) -> Path:
    """``$MIND_HOME/history``, created empty with mode 0600 (dir 0700) if missing.

    Past prompts can hold secrets: the config root and the file must be
    private and owned (``docs/design/state.md``).

    Raises:
        PrivateStateError: the root or file is a symlink, FIFO, directory,
            another user's, or group/world-writable (left untouched).
        OSError: it cannot be created.
    """
    home = private_files.resolve_root(mind_home(env))
    private_files.private_dir(home)
    path = home / "history"
    os.close(private_files.open_file(path, os.O_WRONLY | os.O_APPEND, create=True))
    return path


def _work_dir(cwd: str | None) -> Path:
    """The working directory of a new session; raises ConfigError if not a directory."""
    work_dir = Path(cwd).expanduser() if cwd else Path.cwd()
    if not work_dir.is_dir():
        raise ConfigError(f"--cwd {work_dir} is not a directory")
    return work_dir


async def run_repl(
    config: ResolvedConfig, cwd: str | None, session_id: str | None, *, latest: bool = False
) -> int:
    """Run the interactive REPL until the person exits.

    Args:
        config: provider settings and approval policy.
        cwd: working directory of a new session (default: the current one);
            with ``latest``, the directory whose most recent session is opened.
        session_id: open this existing session (or the one session whose id
            starts with it) instead of creating one.
        latest: open the most recent session of ``cwd`` (``mind resume``).

    Returns:
        The exit code: 0 after a normal exit.

    Raises:
        ConfigError: not a terminal, ``cwd`` is not a directory, or ``latest``
            and the directory has no session.
        SessionError: ``session_id`` does not exist or is ambiguous.
        MountRefused: another live process holds the session (``occupied by pid N``).
        SessionOccupiedError: another live process holds the session's lease.
        StateDirError: the state root is unusable.
    """
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise ConfigError(
            "the interactive REPL needs a terminal; use `mind exec PROMPT` in scripts and pipes"
        )
    work_dir = _work_dir(cwd)
    try:
        history_path: Path | None = history_file(os.environ)
    except OSError as exc:  # a read-only MIND_HOME: keep input history in memory only
        history_path = None
        Console(stderr=True).print(
            Text(
                f"mind: input history is not saved ({exc.strerror}: {exc.filename})", style="yellow"
            )
        )
    # rich takes an exported COLUMNS/LINES over the real terminal size and
    # keeps it through resizes; the REPL must follow the terminal itself.
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    console = Console(highlight=False, _environ=environ)
    dropped: list[Session] = []
    hangups = {signal.SIGHUP, signal.SIGTERM}
    # Held from here until the REPL handles them, so that a terminal closed
    # during start-up still ends like /exit instead of killing mind before it
    # can remove the session it just created.
    signal.pthread_sigmask(signal.SIG_BLOCK, hangups)
    _release_when_handled(hangups, time.monotonic() + HANGUP_HOLD_MAX_S)
    try:
        async with Runtime.open() as rt:
            if latest:
                session_id = _latest_session(rt.list_sessions(), work_dir)
            elif session_id:
                rows = rt.list_sessions()
                session_id = resolve_session_id(session_id, [r.session_id for r in rows])
            if session_id:
                session = await rt.open_session(session_id, config=config, interactive=True)
            else:
                session = await rt.create_session(cwd=work_dir, config=config, interactive=True)
            repl = Repl(rt, session, config, history_path, console)
            if not session_id:
                repl.created.add(session.session_id)
            repl.greet()
            try:
                with patch_stdout(raw=True):
                    code = await repl.run()
            finally:
                # Also when the run ended by an error, e.g. EIO from a closed
                # terminal: a session nothing was sent to is never left behind. A second SIGHUP (the
                # terminal's, then its owner's) waits until this cleanup is done.
                signal.pthread_sigmask(signal.SIG_BLOCK, hangups)
                dropped = [s for s in repl.hosted if s.session_id in repl.created and s.untouched]
                for s in dropped:
                    _drop_records(s)
            kept = [s for s in repl.hosted if s not in dropped]
            final = repl.session.session_id if repl.session in kept else None
            left_open = _left_open(repl.session)
            # Input a turn claimed is that turn's, sent already: not "waiting".
            claimed = left_open or frozenset()
            waiting = sum(m.message_id not in claimed for m in repl.session.waiting)
            others = [s.session_id for s in kept if s.session_id != final]
    finally:
        for s in dropped:
            directory = s.journal.path.parent
            with contextlib.suppress(OSError):  # only an empty directory; anything new stays
                if not s.journal.path.exists():  # nobody created it again since
                    (directory / "lease.lock").unlink(missing_ok=True)
                directory.rmdir()
        signal.pthread_sigmask(signal.SIG_UNBLOCK, hangups)
    if final is None:
        console.print(Text("Nothing was sent: no session was kept.", style="dim"))
        if others:
            console.print(Text(f"Used in this run: {', '.join(others)}", style="dim"))
        return code
    if waiting:
        console.print(
            Text(
                f"{waiting} message(s) wait in this session (saved); "
                "they are sent when you resume it.",
                style="yellow",
            )
        )
    if left_open is not None:
        console.print(Text(f"The open turn goes on with: mind resume {final}", style="dim"))
    else:
        console.print(Text(f"Resume this session with: mind resume {final}", style="dim"))
    if others:
        console.print(Text(f"Also used in this run: {', '.join(others)}", style="dim"))
    return code


def _release_when_handled(hangups: set[signal.Signals], deadline: float) -> None:
    """Unblock ``hangups`` as soon as each has a handler (the REPL's signal
    receiver; an inherited SIG_IGN counts), checked on the running event loop
    every 5 ms, or at ``deadline`` (``time.monotonic()`` seconds) at the latest.
    One that arrived meanwhile is then delivered to that handler."""
    import asyncio

    handled = all(signal.getsignal(s) not in (signal.SIG_DFL, None) for s in hangups)
    if handled or time.monotonic() >= deadline:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, hangups)
        return
    asyncio.get_running_loop().call_later(0.005, _release_when_handled, hangups, deadline)


def _left_open(session: Session) -> frozenset[str] | None:
    """The input ids of ``session``'s turn this process left open for
    recovery (its ``turn.completed`` is ``suspended``: the next open goes on
    with it and them), or None when it left no turn open."""
    turn = session.current
    if turn is None or not turn.done or turn.outcome.event.suspended is not True:
        return None
    return frozenset(m.message_id for m in turn.inputs)


def _drop_records(session: Session) -> None:
    """Delete an untouched session's journal and inbox while its lease is held,
    so no other process can open it half-deleted; ``mind sessions`` lists only
    directories with a journal. A session is kept only once input reaches it."""
    directory = session.journal.path.parent
    for name in ("journal.jsonl", "inbox.json"):
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def _latest_session(rows: list[SessionSummary], work_dir: Path) -> str:
    """The most recently active session whose cwd is ``work_dir`` and that has
    at least one turn (one nothing was ever sent to, left by kill -9, is
    skipped; an unindexed one, whose turns are unknown, counts).

    Raises:
        ConfigError: no such session in that directory.
    """
    here = str(work_dir.resolve())
    mine = [r for r in rows if r.cwd == here and (r.last_status or not r.indexed)]
    if not mine:
        raise ConfigError(
            f"no session with a turn in {here} yet; `mind` starts one, `mind sessions` lists all"
        )
    return max(mine, key=lambda r: r.updated_at_ms).session_id


async def resume_hint(cwd: str | None, session_id: str | None) -> str | None:
    """What ``mind resume`` would open last ran with, and the command that
    resumes it the same way — for a refusal that found no provider configured
    (the session's last ``turn_started`` records provider, model and approval
    policy; not a script's path, a base URL or a key).

    Args:
        cwd: ``--cwd`` (the directory whose latest session is meant), or None.
        session_id: the id or prefix given, or None (the latest of ``cwd``).

    Returns:
        One or two sentences, or None when the session cannot be found or
        never ran a turn (the caller's refusal then stands alone).
    """
    try:
        async with Runtime.open() as rt:
            rows = rt.list_sessions()
            ids = [r.session_id for r in rows]
            sid = (
                resolve_session_id(session_id, ids)
                if session_id
                else _latest_session(rows, _work_dir(cwd))
            )
            records, _report = read_records(rt.store.session_dir(sid) / "journal.jsonl")
    except (MindError, OSError):
        return None
    started = next((r for r in reversed(records) if isinstance(r, jr.TurnStarted)), None)
    return None if started is None else _ran_with(sid, started)


def _ran_with(session_id: str, started: jr.TurnStarted) -> str:
    """The sentences of :func:`resume_hint` for ``started``."""
    scripted = started.provider == "scripted"
    flags = ["--script FILE"] if scripted else [f"--provider {started.provider}"]
    if not scripted and started.model:
        flags.append(f"--model {started.model}")
    flags.append(f"--approval {started.approval.value}")
    note = " (its script file is not recorded)" if scripted else " (its API key in the environment)"
    return (
        f"Session {session_id} last ran with provider {started.provider} (model "
        f"{started.model or '-'}, approval {started.approval.value}): resume it with "
        f"`mind resume {session_id} {' '.join(flags)}`{note}."
    )
