"""Shell commands a crashed mind left running under their supervisors
(docs/design/effects.md §4, docs/design/processes.md §4, §6): listing them
(:func:`running_effects`, ``Session.running_effects``), stopping one as a
whole tree (:func:`kill_effect`, :func:`kill_running`), and waiting for a
supervisor that holds no lock mind can wait on (:func:`outlive`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from mind.errors import PrivateStateError, SupervisorRecordError
from mind.generated import journal as jr
from mind.shell import procs, supervision
from mind.shell.effect_records import (
    Invocation,
    directory_state,
    effect_directory,
    journaled_supervisor,
    open_effects,
    process_fact,
)

__all__ = [
    "RunningEffect",
    "kill_effect",
    "kill_running",
    "outlive",
    "running_effects",
]


@dataclass(frozen=True, slots=True)
class RunningEffect:
    """A shell command a crashed mind left running under its supervisor.

    Attributes:
        effect_id: ``ef_…``.
        turn_id: the turn of the call.
        call_id: the provider's call id.
        arguments: the call's raw arguments (the command).
        supervisor_pid: the supervisor's pid, or None in its first milliseconds.
    """

    effect_id: str
    turn_id: str
    call_id: str
    arguments: str
    supervisor_pid: int | None


def running_effects(
    records: Sequence[jr.JournalRecord], session_id: str, effects_dir: Path
) -> list[RunningEffect]:
    """The effects prepared in an unterminated turn, with no result, whose
    supervisor still runs: it holds the directory
    (:func:`mind.shell.supervision.inspect` says
    :class:`~mind.shell.supervision.Running`) or it is the live process its
    ``effect_running`` names (the directory gone or damaged), in journal
    order. Reads the directories and the process table."""
    found: list[RunningEffect] = []
    journaled = list(records)
    for inv in open_effects(journaled, session_id):
        # A live session asks: its own command may be starting (no lock yet),
        # so nothing here makes "never started" final (processes.md §6).
        if process_fact(effects_dir, inv, journaled, finalize=False) != "running":
            continue
        directory = effect_directory(effects_dir, inv)
        state = directory_state(directory, finalize=False) if directory is not None else None
        held = journaled_supervisor(journaled, inv)
        pid = state.pid if isinstance(state, supervision.Running) else None
        found.append(
            RunningEffect(
                inv.effect_id,
                inv.turn_id,
                inv.call.call_id,
                inv.call.arguments,
                pid if pid is not None or held is None else held[0],
            )
        )
    return found


def kill_running(
    records: Sequence[jr.JournalRecord], session_id: str, effects_dir: Path, effect_id: str
) -> bool:
    """:meth:`SessionEffects.kill` of the effect :func:`running_effects`
    lists as ``effect_id``; False when it lists none such (nothing signalled)."""
    journaled = list(records)
    for inv in open_effects(journaled, session_id):
        running = process_fact(effects_dir, inv, journaled, finalize=False) == "running"
        if inv.effect_id == effect_id and running:
            return kill_effect(effects_dir, inv, journaled)
    return False


def kill_effect(
    effects_dir: Path | None, inv: Invocation, records: Sequence[jr.JournalRecord]
) -> bool:
    """Stop ``inv``'s command as a whole tree: SIGTERM to its supervisor
    (which kills every descendant and records ``killed``) — the one its
    directory names, else the one its journaled ``effect_running`` names
    (pid + start identity). Returns without waiting; True when a live
    supervisor was signalled (:meth:`mind.shell.effects.SessionEffects.kill`)."""
    directory = effect_directory(effects_dir, inv)
    if directory is not None:
        try:
            if supervision.kill_tree(directory):
                return True
        except (SupervisorRecordError, PrivateStateError):
            pass  # damaged: the journal still names the process
    held = journaled_supervisor(records, inv)
    return held is not None and procs.terminate(*held)


async def outlive(pid: int, identity: str, stop: Callable[[], bool] = lambda: True) -> None:
    """Until the supervisor ``(pid, identity)`` has ended (its pidfd turns
    readable; at once when it is gone or another process holds its pid).

    Raises:
        anyio.get_cancelled_exc_class(): cancelled (the turn waiting for it
            was interrupted): as for a live command, its whole tree was
            stopped first (SIGTERM to the supervisor, shielded wait) when
            ``stop()`` says so (not when mind is only leaving).
    """
    fd = procs.pidfd(pid, identity)
    if fd is None:
        return
    try:
        await anyio.wait_readable(fd)
    except BaseException:
        with anyio.CancelScope(shield=True):
            if not stop():
                raise
            try:
                signal.pidfd_send_signal(fd, signal.SIGTERM)
            except ProcessLookupError:
                pass
            else:
                await anyio.wait_readable(fd)
        raise
    finally:
        os.close(fd)
