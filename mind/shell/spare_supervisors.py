"""A supervisor started ahead of need, so a command does not wait for the
interpreter's start (``docs/design/processes.md`` §9).

One idle spare is kept per mind process: ``python -I -S`` running
:func:`mind.sidecars.supervisor.spare`, in its own session, stdin a pipe from
mind, stdout and stderr ``/dev/null``, an empty environment, working in
``/``. :func:`claim` takes it for one command (and starts the next spare),
the caller journals its pid + start identity, then :func:`hand_over` gives
it the job (written at once into the pipe, which is then closed); it enters
the effect directory, drops the pipe and runs exactly as a supervisor
started for that command would. A spare whose pipe closes without a whole
job — mind exited, was killed, or gave it up — ends having touched nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread

from mind.shell import procs

__all__ = ["JOB_MAX_BYTES", "Claim", "SpareProcess", "claim", "give_up", "hand_over"]

_SIDECARS: Final = str(Path(__file__).resolve().parent.parent / "sidecars")
_LAUNCH: Final = (
    f"import sys; sys.path.insert(0, {_SIDECARS!r}); "
    "import supervisor; sys.exit(supervisor.spare())"
)
_END: Final = b"end"
"""The job's last field (``mind.sidecars.supervisor.SPARE_END``)."""

JOB_MAX_BYTES: Final = 60 * 1024
"""Largest job handed to a spare: it must fit the pipe's buffer (64 KiB on
Linux), so mind never blocks on a spare still starting; a larger one (a huge
environment) is started cold."""

_EXIT_WAIT_S: Final = 1.0
"""Seconds mind waits at exit for its idle spare to see EOF and end."""


class SpareProcess:
    """A spare that took a job: the supervisor process of one command.

    Offers what :class:`mind.shell.supervision.Handle` uses of a process
    (``pid``, ``returncode``, ``send_signal``, ``wait``), independent of the
    event loop that started it (a spare may be started under one
    ``anyio.run`` and used under the next).
    """

    def __init__(self, popen: subprocess.Popen[bytes], start_identity: str) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.start_identity = start_identity

    @property
    def returncode(self) -> int | None:
        """Its exit status once :meth:`wait` returned (negative: a signal)."""
        return self._popen.returncode

    def send_signal(self, signum: signal.Signals) -> None:
        """Signal it, unless it was already reaped (its pid may be reused)."""
        self._popen.send_signal(signum)

    async def wait(self) -> int:
        """Until it ends (a pidfd woken by the kernel; a worker thread if the
        kernel has none); reaps it and gives its exit status."""
        if self._popen.returncode is None:
            try:
                pidfd = os.pidfd_open(self.pid)
            except OSError:
                await anyio.to_thread.run_sync(self._popen.wait, abandon_on_cancel=True)
            else:
                try:
                    await anyio.wait_readable(pidfd)
                finally:
                    os.close(pidfd)
        return self._popen.wait()


class _Slot:
    """The one idle spare, behind a lock (starts may come from several
    threads). A new spare is started in a worker thread: ``fork_exec`` waits
    for the interpreter's exec (ms under load), which the command just
    handed over must not wait for."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: subprocess.Popen[bytes] | None = None
        self.identity = ""
        self.starting: threading.Thread | None = None
        self.exit_hook = False

    def settle(self) -> None:
        """Wait for a spare being started (long done but for back-to-back calls)."""
        if self.starting is not None:
            self.starting.join()
            self.starting = None

    def refill(self) -> None:
        """Start the next spare in a worker thread (the caller holds the lock)."""
        self.starting = threading.Thread(target=self._start, name="mind-spare-supervisor")
        self.starting.start()
        if not self.exit_hook:
            atexit.register(self.close)
            self.exit_hook = True

    def _start(self) -> None:
        try:
            idle = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _LAUNCH],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={},
                start_new_session=True,
            )
        except OSError:
            return  # no spare: the next command starts cold and tries again
        self.identity = procs.start_identity(idle.pid)
        self.idle = idle

    def close(self) -> None:
        """Give the idle spare up: EOF on its pipe ends it; reaped here."""
        with self.lock:
            self.settle()
            idle, self.idle = self.idle, None
        if idle is not None:
            _give_up(idle)


def _give_up(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        if popen.stdin is not None:
            popen.stdin.close()
    try:
        popen.wait(_EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


_SLOT = _Slot()


def _job(directory: Path, env: Mapping[str, str], args: Sequence[str]) -> bytes:
    fields = [os.fsencode(directory), str(len(env)).encode()]
    fields += [os.fsencode(f"{name}={value}") for name, value in env.items()]
    fields += [os.fsencode(arg) for arg in args]
    return b"".join(field + b"\0" for field in [*fields, _END])


@dataclass(frozen=True, slots=True)
class Claim:
    """The idle spare taken for one job, not yet handed it (:func:`claim`).

    Attributes:
        pid: the spare's pid — the command's supervisor once handed the job.
        start_identity: its start identity (:func:`mind.shell.procs.start_identity`).
    """

    pid: int
    start_identity: str
    _popen: subprocess.Popen[bytes]
    _job: bytes


def claim(directory: Path, env: Mapping[str, str], args: Sequence[str]) -> Claim | None:
    """Take the idle spare for the job of running ``args`` in ``directory``;
    then :func:`hand_over` gives it the job, or :func:`give_up` lets it end
    having touched nothing. Between the two its pid and start identity are
    known while it cannot have started anything: where the caller makes
    them durable (``effect_running``, processes.md §9.4).

    Args:
        directory: the effect directory, already made private, its
            ``supervisor.log`` created.
        env: the command's whole environment.
        args: :func:`mind.sidecars.supervisor.main`'s arguments (``--cwd
            ... -- PROGRAM ARGS``).

    Returns:
        The claim, or None when no spare was ready (the first call of a
        process, a job larger than :data:`JOB_MAX_BYTES`): the caller
        starts one cold. Unless the job was too large, a new spare is then
        started for the next command (in a worker thread; one that cannot be
        started leaves the slot empty, and the next command starts cold).
    """
    job = _job(directory, env, args)
    if len(job) > JOB_MAX_BYTES:
        return None
    with _SLOT.lock:
        _SLOT.settle()
        idle, identity = _SLOT.idle, _SLOT.identity
        _SLOT.idle = None
        _SLOT.refill()
    if idle is None:
        return None
    return Claim(idle.pid, identity, idle, job)


def hand_over(taken: Claim) -> SpareProcess | None:
    """Give the claimed spare its job (written at once into its pipe, then
    EOF). None when it could not take it (it died): it is given up, and
    the caller starts the command cold."""
    if not _write_job(taken._popen, taken._job):
        _give_up(taken._popen)
        return None
    return SpareProcess(taken._popen, taken.start_identity)


def give_up(taken: Claim) -> None:
    """Let the claimed spare go without a job: EOF on its pipe ends it,
    having touched nothing; reaped here (within :data:`_EXIT_WAIT_S`, else
    SIGKILLed)."""
    _give_up(taken._popen)


def _write_job(popen: subprocess.Popen[bytes], job: bytes) -> bool:
    """The whole job into the pipe without blocking, then EOF; False when it
    did not fit or the spare is gone (it then sees a cut job and ends)."""
    assert popen.stdin is not None
    fd = popen.stdin.fileno()
    try:
        os.set_blocking(fd, False)
        written = os.write(fd, job)
    except OSError:  # BlockingIOError, BrokenPipeError: no job given
        written = 0
    finally:
        with contextlib.suppress(OSError):
            popen.stdin.close()
    return written == len(job)
