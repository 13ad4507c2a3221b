"""Tool commands run under the supervisor, and what its files say afterwards.

The client of :mod:`mind.sidecars.supervisor` (rules: ``docs/design/processes.md``):
:func:`start` makes the effect directory and starts the supervisor beside
mind (§1), :func:`wait` gives the command's :class:`ProcessResult` once it
ends (a cancellation stops the whole tree first, §4), :func:`inspect` reads
a directory any process left — after a crash too — as :class:`Finished`,
:class:`Running`, :class:`NeverStarted` or :class:`Lost` (§6), and
:func:`kill_tree` stops a running one (§4); after a restart :func:`collect`
waits for one a crashed mind left and :func:`discard` removes a directory
whose result is durable (§7).

One module (over 500 lines) because it is the client of one on-disk
protocol (``supervisor.json``, ``exit.json``, the lock, the proof): start,
wait, inspect and collect must read it by the same rules.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import hmac
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from mind.errors import (
    PrivateStateError,
    SupervisorIdentityUnknown,
    SupervisorRecordError,
    SupervisorUnsupported,
)
from mind.shell import private_files, procs, spare_supervisors
from mind.shell.spare_supervisors import SpareProcess
from mind.shell.tools._text import StreamText, split_budget

__all__ = [
    "KILL_GRACE_S",
    "Finished",
    "Handle",
    "Lost",
    "NeverStarted",
    "ProcessResult",
    "Running",
    "State",
    "collect",
    "collect_strays",
    "discard",
    "handle_of",
    "inspect",
    "kill_tree",
    "proven",
    "settle",
    "start",
    "stop",
    "supervisor_argv",
    "unrecorded_reason",
    "wait",
]

KILL_GRACE_S: Final = 2.0
"""Seconds between SIGTERM and SIGKILL to every process of the tree (§4)."""

SUPERVISOR: Final = str(Path(__file__).resolve().parent.parent / "sidecars" / "supervisor.py")
"""The supervisor program (it imports nothing from mind)."""

_LAUNCH: Final = (
    f"import sys; sys.path.insert(0, {str(Path(SUPERVISOR).parent)!r}); "
    "import supervisor; sys.exit(supervisor.main(sys.argv[1:]))"
)
"""How the supervisor is started (``python -I -S -c``): imported as the
top-level module ``supervisor`` from its own directory, never as a script,
so it runs from its cached bytecode (``__pycache__``) instead of being
compiled again at every command (§9)."""

SUPERVISOR_FILE: Final = "supervisor.json"
EXIT_FILE: Final = "exit.json"
NEVER_STARTED_FILE: Final = "never_started"
LOG_FILE: Final = "supervisor.log"
STREAM_FILES: Final = ("stdout", "stderr")
MARKER: Final = "MIND_EFFECT"
"""Environment variable every supervised command gets, its effect
directory's path as value: how the processes of a command whose supervisor
died are still found (§6.7)."""
PROOF_ENV: Final = "MIND_SUPERVISOR_PROOF"
"""How the token reaches the supervisor, which takes it out of the
command's environment at once (§10)."""
REFUSED_EXIT: Final = 125
"""The supervisor's exit status when it refused (``supervisor.log`` says why)."""

_RECORD_MAX_BYTES: Final = 64 * 1024
_LOG_MAX_BYTES: Final = 4096


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How one command ended and what it printed.

    Attributes:
        text: the output for the model: stdout, then ``[stderr]`` and stderr,
            then a final status line (``exit code: N``, ``killed by signal``,
            ``timed out`` or ``stopped``).
        ok: True only for exit code 0 within the timeout.
        ran_ms: the command's own run time in milliseconds (``exit.json``'s
            ``started_at_ms`` to ``ended_at_ms``); None when not recorded.
        output_bytes: bytes (UTF-8) of stdout and stderr the command wrote
            when ``text`` keeps only their head and tail (more than
            ``max_output_bytes`` together); None when ``text`` holds them whole.
    """

    text: str
    ok: bool
    ran_ms: int | None = None
    output_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Handle:
    """A started supervisor.

    Attributes:
        directory: its effect directory.
        pid: the supervisor's pid (its process group and session id too).
        start_identity: its start identity (:func:`mind.shell.procs.start_identity`);
            with ``pid`` what the effect record keeps.
        proof_sha256: hex SHA-256 of the token handed to the supervisor alone,
            which its ``exit.json`` carries back (:func:`proven`, §10); ""
            when unknown (a record that did not keep it): then unchecked.
    """

    directory: Path
    pid: int
    start_identity: str
    _process: anyio.abc.Process | SpareProcess | None = field(
        default=None, repr=False, compare=False
    )
    proof_sha256: str = ""


@dataclass(frozen=True, slots=True)
class Finished:
    """``exit.json`` is durable: the command ended with ``result``."""

    result: ProcessResult


@dataclass(frozen=True, slots=True)
class Running:
    """The supervisor holds the directory's lock; ``pid`` is None in its first
    milliseconds, before ``supervisor.json`` is written."""

    pid: int | None


@dataclass(frozen=True, slots=True)
class NeverStarted:
    """No supervisor ran the command, and none ever will (§6)."""


@dataclass(frozen=True, slots=True)
class Lost:
    """A supervisor ran (``supervisor.json``) but ended without ``exit.json``
    (it was SIGKILLed, or the machine went down): the outcome is unknown."""

    pid: int


State: TypeAlias = Finished | Running | NeverStarted | Lost


async def start(
    directory: Path,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout_s: float,
    max_output_bytes: int,
    pass_fds: Sequence[int] = (),
    kill_grace_s: float = KILL_GRACE_S,
    on_started: Callable[[Handle], Awaitable[None]] | None = None,
) -> Handle:
    """Start ``argv`` under a supervisor working in ``directory`` (§1, §2).

    ``directory`` is created 0700 (parents too); it must not have been used
    by another command. The supervisor runs in its own session with stdin
    and stdout ``/dev/null`` and stderr ``supervisor.log`` — no pipe to
    mind, so it outlives mind's death unharmed.

    Args:
        directory: the effect directory (``<session dir>/effects/<id>``).
        argv: the command (non-empty), possibly a sandbox wrapper's argv.
        cwd: the command's working directory (a missing one is a start
            failure in the result, not an error here).
        env: the command's whole environment, or None for mind's.
        timeout_s: seconds after which the supervisor stops the tree (> 0).
        max_output_bytes: bytes of head and of tail kept per stream (> 0).
        pass_fds: descriptors the command inherits (the seccomp program).
        kill_grace_s: seconds between SIGTERM and SIGKILL (§4).
        on_started: awaited with the handle (pid, start identity, proof
            hash) where the caller makes it durable (``effect_running``):
            for a spare before it is handed the job, so its
            ``supervisor.json`` need not be fsynced (§9.4); for a cold start
            once it runs (its ``supervisor.json`` is fsynced, as nothing
            durable names it before).

    Returns:
        The handle (pid and start identity: the effect record's evidence).

    Raises:
        SupervisorUnsupported: not Linux (checked first: nothing is made).
        SupervisorIdentityUnknown: with ``on_started``, the cold-started
            supervisor's start identity cannot be read (its tree was stopped;
            ``on_started`` is never handed a handle without one).
        PrivateStateError: ``directory`` or its log is not private and owned.
        OSError: the directory cannot be made or the supervisor not started.
        Exception: what ``on_started`` raised — the command was not started
            (a spare) or its tree was stopped (a cold start).
    """
    if not sys.platform.startswith("linux"):
        raise SupervisorUnsupported(sys.platform)
    # The marker that finds the command's processes if its supervisor dies
    # (§6.7); the token only the supervisor sees, proof of its exit.json (§10).
    proof = secrets.token_hex(16)
    env = {**(os.environ if env is None else env), MARKER: _marker_value(directory)}
    env[PROOF_ENV] = proof
    private_files.private_dir(directory)
    log_fd = private_files.open_file(directory / LOG_FILE, os.O_WRONLY | os.O_APPEND, create=True)

    def args_for(journaled: bool) -> list[str]:
        return supervisor_argv(
            argv,
            cwd=cwd,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            pass_fds=pass_fds,
            kill_grace_s=kill_grace_s,
            journaled=journaled,
        )

    if not pass_fds:  # a spare cannot receive descriptors: those start cold
        # Journaled (on_started) before the hand-over, or journaled nowhere:
        # either way its supervisor.json need not be durable (§9.4).
        job = args_for(True)[5:]
        taken = spare_supervisors.claim(directory, dict(env), job)
        if taken is not None and on_started is not None and not taken.start_identity:
            # No record may name it without its identity: it never had the job.
            spare_supervisors.give_up(taken)
            taken = None
        if taken is not None:
            handle = Handle(directory, taken.pid, taken.start_identity, None, _sha256(proof))
            if on_started is not None:
                try:
                    await on_started(handle)
                except BaseException:
                    spare_supervisors.give_up(taken)  # it never had the job
                    os.close(log_fd)
                    raise
            spare = spare_supervisors.hand_over(taken)
            if spare is not None:
                os.close(log_fd)  # the spare opens the log itself, in the directory
                return Handle(directory, spare.pid, spare.start_identity, spare, _sha256(proof))
            # It died before taking the job (nothing ran): cold, journaled again.
    args = args_for(on_started is None)
    try:
        # Shielded: a cancellation while it starts would leave it unseen;
        # delivered at the next checkpoint, inside wait(), which stops it.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                args,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_fd,
                cwd=directory,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                pass_fds=pass_fds,
            )
    finally:
        os.close(log_fd)
    handle = Handle(
        directory, process.pid, procs.start_identity(process.pid), process, _sha256(proof)
    )
    if on_started is not None and not handle.start_identity:
        # Fail closed: its record would name a bare pid (any later process).
        with anyio.CancelScope(shield=True):
            await stop(handle)
        raise SupervisorIdentityUnknown(process.pid)
    if on_started is not None:
        try:
            await on_started(handle)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await stop(handle)
            raise
    return handle


def supervisor_argv(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    max_output_bytes: int,
    pass_fds: Sequence[int] = (),
    kill_grace_s: float = KILL_GRACE_S,
    journaled: bool = False,
) -> list[str]:
    """The supervisor's own command line for ``argv`` (arguments as :func:`start`'s).

    ``journaled``: mind made the supervisor's pid + start identity durable
    before it got the job (or keeps no record of it), so it does not fsync
    ``supervisor.json`` (§9.4). To be run with the effect directory as
    working directory (``start`` does).
    """
    args = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _LAUNCH,
        "--cwd",
        str(cwd),
        "--timeout",
        repr(float(timeout_s)),
        "--max-output",
        str(max_output_bytes),
        "--grace",
        repr(float(kill_grace_s)),
    ]
    for fd in pass_fds:
        args += ["--fd", str(fd)]
    if journaled:
        args += ["--journaled", "1"]
    return [*args, "--", *argv]


async def wait(handle: Handle) -> ProcessResult:
    """The command's result once its supervisor has ended (§5).

    A handle from :func:`start` waits for the supervisor process; one built
    from a record (after a restart) waits for the directory's lock.

    Raises:
        anyio.get_cancelled_exc_class(): the caller was cancelled; the whole
            tree was stopped first (SIGTERM, grace, SIGKILL; shielded).
        SupervisorRecordError: a file of the directory is damaged.
    """
    try:
        if handle._process is not None:
            await handle._process.wait()
        else:
            await _wait_unlocked(handle.directory)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await stop(handle)
        raise
    code = handle._process.returncode if handle._process is not None else None
    if code == REFUSED_EXIT:
        log = private_files.read_file(handle.directory / LOG_FILE, _LOG_MAX_BYTES) or b""
        why = log.decode("utf-8", errors="replace").strip() or "no reason given"
        return ProcessResult(f"cannot start: {why}", False)
    # exit.json is believed only from a supervisor that exited 0 (§6.6): one
    # killed by the command itself leaves whatever the command wrote there.
    state = inspect(handle.directory) if code in (0, None) else None
    if isinstance(state, Finished) and proven(handle.directory, handle.proof_sha256):
        return state.result
    await anyio.to_thread.run_sync(collect_strays, handle)
    why = unrecorded_reason(handle.directory, proof_sha256=handle.proof_sha256)
    return ProcessResult(
        f"the command's supervisor ended (exit status {code}) and {why}; its outcome is unknown",
        False,
    )


def proven(directory: Path, proof_sha256: str) -> bool:
    """Whether ``directory``'s ``exit.json`` is its supervisor's own (§10):
    its ``proof`` hashes (SHA-256, hex) to ``proof_sha256``. True when
    ``proof_sha256`` is "" (not known: nothing to check against); False
    when ``exit.json`` is missing, unreadable or without a matching proof.
    Call it beside :func:`inspect` wherever a :class:`Finished` is believed."""
    if not proof_sha256:
        return True
    try:
        record = _record(directory / EXIT_FILE)
    except SupervisorRecordError:
        return False
    proof = record.get("proof") if record is not None else None
    return isinstance(proof, str) and hmac.compare_digest(_sha256(proof), proof_sha256)


def unrecorded_reason(directory: Path | None, *, proof_sha256: str = "") -> str:
    """Why no exit record of ``directory``'s command is believed: one clause
    naming what was found there (the one classification of that evidence,
    for every "outcome unknown" result and card — processes.md §6, §10):

    - no directory (None, or removed): "its effect directory was gone";
    - ``supervisor.json`` but no ``exit.json``: its supervisor was killed
      before it wrote one;
    - an ``exit.json`` not proven its supervisor's (:func:`proven` with
      ``proof_sha256``): the command can write there;
    - an output file that does not hold what ``exit.json`` accounts for: it
      was replaced or changed;
    - any other damaged or not private file: which, and why.

    Never raises: reading a damaged directory is what it describes.
    """
    if directory is None or not os.path.lexists(directory):
        where = f" ({directory})" if directory is not None else ""
        return f"its effect directory was gone{where}, so no exit record was left"
    try:
        finished = _finished(directory)
        if finished is None:
            if _record(directory / SUPERVISOR_FILE) is None:
                return "its supervisor left no record in its directory"
            return "its supervisor ended without writing an exit record (it was killed)"
    except SupervisorRecordError as exc:
        if exc.path.name in STREAM_FILES:
            return (
                f"its output file `{exc.path.name}` was replaced or changed after it was "
                f"accounted for ({exc.detail})"
            )
        return f"its record {exc.path.name} is damaged ({exc.detail})"
    except PrivateStateError as exc:
        return f"a file in its directory is not mind's own ({exc.path}: {exc.detail})"
    if not proven(directory, proof_sha256):
        return (
            "the exit record in its directory is not proven its supervisor's own "
            "(the command itself can write there)"
        )
    return "its exit record was read too late to be believed"


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def collect_strays(handle: Handle) -> int:
    """SIGKILL what the command of a supervisor that died without
    ``exit.json`` left running (§6.7): every process of this user carrying
    the effect's :data:`MARKER`, and — for a handle from :func:`start`, whose
    session id mind knows from its own spawn, not from a file — every
    process of the supervisor's session. Blocking (a ``/proc`` scan); call
    it off the event loop.

    Returns:
        How many processes were killed.
    """
    session_id = handle.pid if handle._process is not None else None
    return procs.kill_strays(f"{MARKER}={_marker_value(handle.directory)}", session_id=session_id)


def _marker_value(directory: Path) -> str:
    """:data:`MARKER`'s value: the directory's absolute path, unique per effect."""
    return str(directory.absolute())


async def stop(handle: Handle) -> None:
    """Stop the command's whole tree and wait for its supervisor to end
    (SIGTERM to the supervisor, which stops every descendant, §4; its
    ``exit.json`` then says ``killed``). Run it shielded from cancellation."""
    if handle._process is not None:
        with contextlib.suppress(ProcessLookupError):
            handle._process.send_signal(signal.SIGTERM)
        await handle._process.wait()
        return
    if kill_tree(handle.directory):
        await _wait_unlocked(handle.directory)


async def _wait_unlocked(directory: Path) -> None:
    """Until no supervisor holds ``directory``'s lock (a blocking shared
    ``flock`` in a daemon thread: the kernel wakes it when the holder dies).
    A daemon thread, not a worker: when mind leaves a command running (a
    hang-up, /exit), an abandoned wait must not keep the process alive
    until the command ends."""
    done = anyio.Event()
    token = anyio.lowlevel.current_token()
    failure: list[BaseException] = []

    def block() -> None:
        try:
            fd = private_files.open_dir(directory)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)
        except BaseException as exc:  # re-raised in the waiting task
            failure.append(exc)
        with contextlib.suppress(Exception):  # the loop ended: nobody waits
            anyio.from_thread.run_sync(done.set, token=token)

    threading.Thread(target=block, name=f"flock {directory.name}", daemon=True).start()
    await done.wait()
    if failure:
        raise failure[0]


async def collect(
    directory: Path, *, proof_sha256: str = "", stop: Callable[[], bool] = lambda: True
) -> ProcessResult | None:
    """The result of the command a supervisor ran (or still runs) in
    ``directory``, after a restart (docs/design/effects.md §4): waits while
    its supervisor holds the lock (the timeout is the supervisor's), then
    reads ``exit.json``. None when no exit record is there (the supervisor
    never started the command, or ended unrecorded: :class:`Lost`) or when
    it is not proven its supervisor's (:func:`proven` with ``proof_sha256``,
    the hash the effect record kept, §10: a command can write one itself).

    Raises:
        anyio.get_cancelled_exc_class(): the caller was cancelled (the turn
            waiting for it was interrupted); as in :func:`wait`, the whole
            tree was stopped first (shielded) when ``stop()`` says so — not
            when mind is only leaving (it keeps running, supervised).
        SupervisorRecordError: a file of the directory is damaged.
    """
    if not os.path.lexists(directory):
        return None
    try:
        await _wait_unlocked(directory)
    except BaseException:
        with anyio.CancelScope(shield=True):
            if stop() and kill_tree(directory):
                await _wait_unlocked(directory)
        raise
    state = inspect(directory)
    if isinstance(state, Finished) and proven(directory, proof_sha256):
        return state.result
    return None


def settle(directory: Path) -> State:
    """What ``directory`` says once no supervisor holds it: blocks (a shared
    ``flock``, woken by the kernel when the holder ends — the timeout stays
    the supervisor's) and reads it again (:func:`inspect`) until it is not
    :class:`Running`. A spare that has not taken the lock yet then finds
    ``never_started`` and refuses: the answer is final. Blocking: call it
    off the event loop (the startup steps run in a worker thread).

    Raises:
        SupervisorRecordError: a file of the directory is damaged.
        PrivateStateError: something not private or owned is in its place.
    """
    while True:
        if os.path.lexists(directory):
            fd = private_files.open_dir(directory)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)
        state = inspect(directory)
        if not isinstance(state, Running):
            return state


def discard(directory: Path) -> None:
    """Remove an effect directory whose result is durable (or superseded):
    its raw output may hold secrets the journaled result was redacted of
    (§7). Missing: nothing to do."""
    shutil.rmtree(directory, ignore_errors=True)


def handle_of(directory: Path, *, proof_sha256: str = "") -> Handle | None:
    """A handle to the supervisor ``supervisor.json`` names (for :func:`wait`
    after a restart), or None when the directory has no such record.
    ``proof_sha256`` is the hash mind kept of its token (:attr:`Handle.proof_sha256`).

    Raises:
        SupervisorRecordError: ``supervisor.json`` is damaged.
    """
    record = _record(directory / SUPERVISOR_FILE)
    if record is None:
        return None
    pid, identity = _identity(directory / SUPERVISOR_FILE, record)
    return Handle(directory, pid, identity, proof_sha256=proof_sha256)


def kill_tree(directory: Path) -> bool:
    """Ask the supervisor of ``directory`` to stop its whole tree (SIGTERM;
    it kills every descendant, §4, and records ``killed``); returns without
    waiting (:func:`wait` on :func:`handle_of` does).

    Returns:
        True when a live supervisor, the very process ``supervisor.json``
        names (pid + start identity), was signalled; False when none runs.

    Raises:
        SupervisorRecordError: ``supervisor.json`` is damaged.
    """
    handle = handle_of(directory)
    if handle is None or not procs.same_process(handle.pid, handle.start_identity):
        return False
    try:
        os.kill(handle.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    return True


def inspect(directory: Path, *, finalize: bool = True) -> State:
    """What ``directory`` says about its command, now (§6).

    The lock held: :class:`Running` (even once ``exit.json`` is named: it
    is durable only when its supervisor is gone). Else ``exit.json``
    present: :class:`Finished`. Else ``supervisor.json`` present: :class:`Lost`.
    Else (or no directory at all) :class:`NeverStarted` — made final by a
    ``never_started`` marker written under the lock, which a supervisor
    starting late sees and refuses on. ``finalize=False`` (a live session
    asking what runs, while its own command may be starting) writes no
    marker: only a reconcile with no live owner makes "never started" final.

    Raises:
        SupervisorRecordError: ``exit.json``, ``supervisor.json`` or an
            output file is damaged (the path says which).
        PrivateStateError: something not private or owned is in their place.
    """
    if not os.path.lexists(directory):
        return NeverStarted()
    lock = private_files.lock_dir(directory)
    if lock is None:
        # Even with exit.json in place: its supervisor names it before its last
        # fsyncs (§9), so it counts only once that process is gone.
        record = _record(directory / SUPERVISOR_FILE)
        pid = _identity(directory / SUPERVISOR_FILE, record)[0] if record is not None else None
        return Running(pid)
    try:
        finished = _finished(directory)
        if finished is not None:
            return finished
        record = _record(directory / SUPERVISOR_FILE)
        if record is not None:
            return Lost(_identity(directory / SUPERVISOR_FILE, record)[0])
        if finalize:
            private_files.write_atomic(directory / NEVER_STARTED_FILE, b"")
        return NeverStarted()
    finally:
        os.close(lock)


def _record(path: Path) -> dict[str, Any] | None:
    raw = private_files.read_file(path, _RECORD_MAX_BYTES)
    if raw is None:
        return None
    if len(raw) > _RECORD_MAX_BYTES:
        raise SupervisorRecordError(path, f"larger than {_RECORD_MAX_BYTES} bytes")
    try:
        record = json.loads(raw)
    except ValueError as exc:  # UnicodeDecodeError too
        raise SupervisorRecordError(path, f"not JSON ({exc})") from None
    if not isinstance(record, dict) or record.get("version") != 1:
        raise SupervisorRecordError(path, "not a version 1 record")
    return record


def _field(path: Path, record: Mapping[str, Any], name: str, kind: type | tuple[type, ...]) -> Any:
    value = record.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
        raise SupervisorRecordError(path, f"field {name!r} is missing or mistyped")
    return value


def _identity(path: Path, record: Mapping[str, Any]) -> tuple[int, str]:
    return _field(path, record, "pid", int), _field(path, record, "start_identity", str)


def _finished(directory: Path) -> Finished | None:
    path = directory / EXIT_FILE
    record = _record(path)
    if record is None:
        return None
    problem = record.get("start_error")
    if problem is not None:
        if not isinstance(problem, dict):
            raise SupervisorRecordError(path, "field 'start_error' is mistyped")
        return Finished(ProcessResult(_start_failure(path, problem), False))
    code = record.get("exit_code")
    signum = record.get("signal")
    timed_out = _field(path, record, "timed_out", bool)
    killed = _field(path, record, "killed", bool)
    leftovers = _field(path, record, "leftovers_killed", int)
    timeout_s = _field(path, record, "timeout_s", (int, float))
    max_bytes = _field(path, record, "max_output_bytes", int)
    captures = [_capture(directory / name, record, name, max_bytes) for name in STREAM_FILES]
    if code is not None and not isinstance(code, int):
        raise SupervisorRecordError(path, "field 'exit_code' is mistyped")
    if signum is not None and not isinstance(signum, int):
        raise SupervisorRecordError(path, "field 'signal' is mistyped")
    status = _status_line(code, signum, timed_out=timed_out, killed=killed, timeout_s=timeout_s)
    ok = code == 0 and not timed_out and not killed
    text = _text(captures, max_bytes, leftovers, status)
    written = sum(c.total_bytes for c in captures)
    cut = written if written > max_bytes else None  # _text's budget: the head and tail only
    return Finished(ProcessResult(text, ok, _ran_ms(record), cut))


def _ran_ms(record: Mapping[str, Any]) -> int | None:
    """The run time ``exit.json`` records, ms; None when its times are
    missing, mistyped or reversed (a display figure: never guessed)."""
    start, end = record.get("started_at_ms"), record.get("ended_at_ms")
    if type(start) is not int or type(end) is not int or end < start:
        return None
    return end - start


def _capture(path: Path, record: Mapping[str, Any], name: str, max_bytes: int) -> StreamText:
    """One stream's file read back as :class:`StreamText` (§3): head, the
    count cut from the middle, tail — each cut on a character boundary."""
    exit_path = path.with_name(EXIT_FILE)
    account = _field(exit_path, record, name, dict)
    total = _field(exit_path, account, "total_bytes", int)
    head_n = _field(exit_path, account, "head_bytes", int)
    cut = _field(exit_path, account, "cut_bytes", int)
    data = private_files.read_file(path, 2 * max_bytes)
    if data is None or len(data) != total - cut or head_n > len(data) or cut < 0:
        raise SupervisorRecordError(path, f"does not hold the {total - cut} bytes exit.json says")
    capture = StreamText(max_bytes)
    if cut == 0:
        capture.feed(data)
        capture.finish()
        return capture
    head, tail = data[:head_n], data[head_n:]
    whole_head = _whole_prefix(head)
    whole_tail = _whole_suffix(tail)
    capture.feed(whole_head)
    capture.skip(cut + len(head) - len(whole_head) + len(tail) - len(whole_tail))
    capture.feed(whole_tail)
    capture.finish()
    return capture


def _whole_prefix(data: bytes) -> bytes:
    """``data`` without a UTF-8 character cut at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back for its lead
        need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return data if need <= back else data[:-back]
    return data


def _whole_suffix(data: bytes) -> bytes:
    """``data`` without the continuation bytes of a character cut at its start."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


def _text(captures: Sequence[StreamText], max_bytes: int, leftovers: int, status: str) -> str:
    out, err = captures
    out_budget, err_budget = split_budget(out.total_bytes, err.total_bytes, max_bytes)
    parts: list[str] = []
    stdout = out.render(out_budget)
    if stdout:
        parts.append(stdout if stdout.endswith("\n") else stdout + "\n")
    stderr = err.render(err_budget)
    if stderr:
        parts.append("[stderr]\n" + (stderr if stderr.endswith("\n") else stderr + "\n"))
    if leftovers:
        noun = "process" if leftovers == 1 else "processes"
        parts.append(
            f"[{leftovers} background {noun} still running when the command exited "
            f"{'was' if leftovers == 1 else 'were'} killed]\n"
        )
    parts.append(status)
    return "".join(parts)


def _status_line(
    code: int | None, signum: int | None, *, timed_out: bool, killed: bool, timeout_s: float
) -> str:
    if timed_out:
        return (
            f"timed out after {_seconds(timeout_s)} s; the command and every process "
            "it started were killed"
        )
    if killed:
        return "stopped: the command and every process it started were killed"
    if signum is not None:
        return f"killed by signal {signum} ({_signal_name(signum)})"
    return f"exit code: {code}"


def _start_failure(path: Path, problem: Mapping[str, Any]) -> str:
    program = _field(path, problem, "program", str)
    cwd = problem.get("cwd")
    if isinstance(cwd, str):
        return f"cannot start: working directory {cwd} does not exist"
    if problem.get("errno") == errno.ENOENT:
        return f"cannot start: command not found: {program}"
    return f"cannot start {program!r}: {_field(path, problem, 'message', str)}"


def _seconds(value: float) -> str:
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:g}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown signal"
