"""The ``shell`` tool's process: one command under the supervisor, bounded in
time and output (``docs/design/processes.md``)."""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from mind.errors import PrivateStateError, SupervisorIdentityUnknown, SupervisorUnsupported
from mind.shell import supervision
from mind.shell.supervision import ProcessResult

__all__ = ["KILL_GRACE_S", "ProcessResult", "StartHook", "run_command"]

KILL_GRACE_S = supervision.KILL_GRACE_S
"""Seconds between SIGTERM and SIGKILL to every process of the command's tree
(read at each call, so a test may shorten it)."""


StartHook = Callable[[supervision.Handle], Awaitable[None]]
"""Called with the supervisor's handle once it runs, before the command's end."""


class _HookFailed(Exception):
    """Carries a start hook's failure past the runner's net for tool bugs
    (the hook is the caller's: a journal write, not the tool)."""


async def run_command(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str] | None,
    timeout_s: float,
    max_output_bytes: int,
    pass_fds: Sequence[int] = (),
    directory: Path | None = None,
    on_started: StartHook | None = None,
    keep: bool = False,
) -> ProcessResult:
    """Run one command to completion, timeout or cancellation, supervised.

    A string runs as ``/bin/sh -c command``; a sequence runs as argv without
    a shell. The command runs under :mod:`mind.sidecars.supervisor` (its own
    session, stdin ``/dev/null``, a child subreaper owning every descendant,
    ``setsid`` or double-forked): at the timeout, or when the caller is
    cancelled, the whole tree gets SIGTERM, then SIGKILL after
    :data:`KILL_GRACE_S`; when the command exits, what it left running is
    SIGKILLed (§4). Its stdout and stderr are kept bounded in the effect
    directory's files (§3) and decoded incrementally.

    Args:
        command: shell string or argv (non-empty).
        cwd: working directory of the command.
        env: the whole environment, or None to inherit mind's.
        timeout_s: seconds before the tree is killed (> 0).
        max_output_bytes: most bytes of stdout + stderr kept (UTF-8).
        pass_fds: descriptors the command inherits (the sandbox's seccomp program).
        directory: the effect directory (``<session dir>/effects/<id>``):
            what a crash of mind leaves there is collected at the next start
            (:func:`mind.shell.supervision.inspect`); None: a private temp
            directory. Either is removed once the result is returned (§7),
            unless ``keep``.
        on_started: awaited with the handle (pid + start identity) while the
            command runs — where the effect record makes them durable. If it
            raises, the tree is stopped (shielded) and the error propagates
            (wrapped in ``_HookFailed``; the runner unwraps it).
        keep: ``directory`` stays, whatever happens here (a result, an
            error, a cancellation: the tree stopped, ``exit.json`` says
            ``killed``), for its owner to
            :func:`~mind.shell.supervision.discard` once the call's result is
            durable — a crash before must not lose the evidence, nor make a
            started command look never started (docs/design/effects.md §4).

    Returns:
        The result; a command that cannot be started (missing program, bad
        cwd) is a failed result naming the reason.

    Raises:
        anyio.get_cancelled_exc_class(): the caller was cancelled; the tree
            was killed first (shielded), then the cancellation propagates.
    """
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    where = Path(tempfile.mkdtemp(prefix="mind-effect-")) if directory is None else directory
    kept = keep and directory is not None

    async def started(handle: supervision.Handle) -> None:
        assert on_started is not None
        try:
            await on_started(handle)
        except Exception as exc:  # the caller's failure, not the command's
            raise _HookFailed() from exc

    try:
        try:
            handle = await supervision.start(
                where,
                argv,
                cwd=cwd,
                env=env,
                timeout_s=timeout_s,
                max_output_bytes=max_output_bytes,
                pass_fds=pass_fds,
                kill_grace_s=KILL_GRACE_S,
                on_started=None if on_started is None else started,
            )
        except (
            OSError,
            PrivateStateError,
            SupervisorUnsupported,
            SupervisorIdentityUnknown,
        ) as exc:
            return ProcessResult(f"cannot start the command's supervisor: {exc}", False)
        return await supervision.wait(handle)
    finally:
        # Delivered (or the caller gave up): the raw output, which may hold
        # secrets the result was redacted of, does not stay on disk (§7).
        if not kept:
            supervision.discard(where)
