"""The ``shell`` tool: one command in its own process group, bounded in time and output."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel

from mind.shell import procs
from mind.shell.tools._text import StreamText, split_budget

KILL_GRACE_S = 2.0
"""Seconds between SIGTERM and SIGKILL to the process group."""

DRAIN_AFTER_EXIT_S = 2.0
"""Seconds to keep reading after the command exits while background processes
still hold its stdout/stderr open; then reading stops (they keep running)."""

_FINAL_READ_S = 0.5
"""Seconds to collect output still buffered in the pipes after a kill."""

_READ_CHUNK_BYTES = 65536
_GROUP_POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class ProcessResult:
    """How one command ended and what it printed.

    Attributes:
        text: the output for the model: stdout, then ``[stderr]`` and stderr,
            then a final status line (``exit code: N``, ``killed by signal``,
            or ``timed out``).
        ok: True only for exit code 0 within the timeout.
    """

    text: str
    ok: bool


async def run_command(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None,
    timeout_s: float,
    max_output_bytes: int,
    pass_fds: Sequence[int] = (),
    orphans_after_leader: bool = False,
) -> ProcessResult:
    """Run one command to completion, timeout or cancellation.

    The command runs in a new session (so a new process group whose id is
    its pid) with stdin from ``/dev/null``. A string runs as
    ``/bin/sh -c command``; a sequence runs as argv without a shell.
    stdout and stderr are read concurrently and decoded incrementally.

    On timeout the whole group gets SIGTERM, then SIGKILL after
    :data:`KILL_GRACE_S` if any member remains. On cancellation the same
    kill happens (shielded) and the cancellation is re-raised.

    Args:
        command: shell string or argv (non-empty).
        cwd: working directory of the command.
        env: the whole environment, or None to inherit mind's.
        timeout_s: seconds before the group is killed (> 0).
        max_output_bytes: most bytes of stdout + stderr kept (UTF-8).
        orphans_after_leader: on a kill, members of the group still alive once
            the leader has exited are SIGKILLed at once instead of after
            :data:`KILL_GRACE_S` (bubblewrap: what outlives a killed bwrap is
            its namespace's init, which ignores SIGTERM from outside).
        pass_fds: descriptors the command inherits (the sandbox's seccomp program).

    Returns:
        The result; a command that cannot be started (missing program, bad
        cwd) is a failed result naming the reason.

    Raises:
        anyio.get_cancelled_exc_class(): the caller was cancelled; the group
            was killed first (shielded), then the cancellation propagates.
    """
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    pipes = [os.pipe(), os.pipe()]
    try:
        # Shielded: a cancellation while the child is being started would
        # leave it running unseen; delivered at the next checkpoint instead,
        # inside the block below that kills the group.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=pipes[0][1],
                stderr=pipes[1][1],
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                pass_fds=pass_fds,
            )
    except BaseException as exc:
        for read_fd, write_fd in pipes:
            os.close(read_fd)
            os.close(write_fd)
        if isinstance(exc, OSError):
            return ProcessResult(_start_failure(exc, argv, cwd), False)
        raise
    for _, write_fd in pipes:
        os.close(write_fd)
    readers = [_PipeReader(pipes[0][0]), _PipeReader(pipes[1][0])]
    out = StreamText(max_output_bytes)
    err = StreamText(max_output_bytes)
    timed_out = False
    streams_left_open = False
    try:
        with anyio.move_on_after(timeout_s) as deadline:
            streams_left_open = await _collect(process, readers, (out, err))
        if deadline.cancelled_caught:
            timed_out = True
            with anyio.CancelScope(shield=True):
                await _kill_group(process, orphans_after_leader)
                with anyio.move_on_after(_FINAL_READ_S):
                    await _collect(process, readers, (out, err))
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _kill_group(process, orphans_after_leader)
        raise
    finally:
        for reader in readers:
            reader.close()
    out.finish()
    err.finish()
    return _result(
        process.returncode,
        out,
        err,
        max_output_bytes=max_output_bytes,
        timed_out=timed_out,
        timeout_s=timeout_s,
        streams_left_open=streams_left_open,
    )


def _start_failure(exc: OSError, argv: Sequence[str], cwd: Path) -> str:
    if not cwd.is_dir():
        return f"cannot start: working directory {cwd} does not exist"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: command not found: {argv[0]}"
    return f"cannot start {argv[0]!r}: {exc.strerror or exc}"


class _PipeReader:
    """The parent's non-blocking read end of one output pipe."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self.fd: int | None = fd
        self.eof = anyio.Event()

    async def pump(self, sink: StreamText) -> None:
        """Feed everything readable into ``sink`` until EOF (or the pipe is closed)."""
        while not self.eof.is_set() and self.fd is not None:
            try:
                data = os.read(self.fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                try:
                    await anyio.wait_readable(self.fd)
                except anyio.ClosedResourceError:
                    return
                continue
            if not data:
                self.eof.set()
                return
            sink.feed(data)
            await anyio.lowlevel.checkpoint()

    def close(self) -> None:
        if self.fd is not None:
            anyio.notify_closing(self.fd)
            os.close(self.fd)
            self.fd = None


async def _collect(
    process: anyio.abc.Process,
    readers: Sequence[_PipeReader],
    sinks: Sequence[StreamText],
) -> bool:
    """Read both pipes until EOF and wait for the process.

    Returns:
        True when the process exited but its pipes were still open
        :data:`DRAIN_AFTER_EXIT_S` later (held by background processes).
    """
    async with anyio.create_task_group() as group:
        for reader, sink in zip(readers, sinks, strict=True):
            group.start_soon(reader.pump, sink)
        await process.wait()
        with anyio.move_on_after(DRAIN_AFTER_EXIT_S):
            for reader in readers:
                await reader.eof.wait()
        left_open = not all(reader.eof.is_set() for reader in readers)
        group.cancel_scope.cancel()
    return left_open


async def _kill_group(process: anyio.abc.Process, orphans_after_leader: bool = False) -> None:
    """SIGTERM the group, wait up to :data:`KILL_GRACE_S` for it to go, then SIGKILL
    (at once after the leader exits when ``orphans_after_leader``).

    Must run shielded. The group id equals the leader's pid (new session).
    Zombie members count as gone (see :func:`mind.shell.procs.group_has_live_member`).
    """
    pgid = process.pid
    if not _signal_group(pgid, signal.SIGTERM):
        await process.wait()
        return
    give_up_at = time.monotonic() + KILL_GRACE_S
    with anyio.move_on_after(KILL_GRACE_S):
        await process.wait()
    if orphans_after_leader:
        give_up_at = time.monotonic()
    # Polling: no event tells when the last member of a group is gone.
    while time.monotonic() < give_up_at and procs.group_has_live_member(pgid):  # noqa: ASYNC110
        await anyio.sleep(_GROUP_POLL_S)
    _signal_group(pgid, signal.SIGKILL)
    await process.wait()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to a process group; False when no member is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # Every remaining member belongs to someone else (setuid): not ours to kill.
        return False
    return True


def _result(
    returncode: int | None,
    out: StreamText,
    err: StreamText,
    *,
    max_output_bytes: int,
    timed_out: bool,
    timeout_s: float,
    streams_left_open: bool,
) -> ProcessResult:
    out_budget, err_budget = split_budget(out.total_bytes, err.total_bytes, max_output_bytes)
    parts: list[str] = []
    stdout = out.render(out_budget)
    if stdout:
        parts.append(stdout if stdout.endswith("\n") else stdout + "\n")
    stderr = err.render(err_budget)
    if stderr:
        parts.append("[stderr]\n" + (stderr if stderr.endswith("\n") else stderr + "\n"))
    if streams_left_open:
        parts.append(
            f"[stopped reading {DRAIN_AFTER_EXIT_S:g} s after exit: background processes "
            "still hold the output open and were left running]\n"
        )
    if timed_out:
        parts.append(
            f"timed out after {_seconds(timeout_s)} s; the command and its process group "
            "were killed"
        )
    elif returncode is not None and returncode < 0:
        parts.append(f"killed by signal {-returncode} ({_signal_name(-returncode)})")
    else:
        parts.append(f"exit code: {returncode}")
    ok = not timed_out and returncode == 0
    return ProcessResult("".join(parts), ok)


def _seconds(value: float) -> str:
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:g}"


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "unknown signal"
