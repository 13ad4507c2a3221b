"""The startup step ``repair_processes`` (``session_startup.yaml``):
:func:`reconcile_at_open` recovers every effect a crash left prepared in an
unterminated turn and never answered, through its machine, given what its
supervisor's directory says (docs/design/effects.md §4) — collecting exit
records, stopping the commands still running in earlier turns (one shared
grace: :data:`CLOSED_TURN_GRACE_S`), telling the model or leaving the
question for a person. :func:`redrive_rule` is the rule a resumed turn's
re-drive rests on, read from the same directories."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from mind.call_pairing import PairedCall
from mind.errors import PrivateStateError, SupervisorRecordError
from mind.generated import journal as jr
from mind.machines.effect import Collect, ProcessFact, Run, redrivable
from mind.shell import procs, supervision
from mind.shell.effect_records import (
    Invocation,
    UnknownEffect,
    directory_state,
    effect_directory,
    invocation_of,
    journaled_proof,
    journaled_supervisor,
    open_effects,
    process_fact,
)
from mind.shell.effects import SessionEffects
from mind.shell.journal import Journal
from mind.shell.recovery import unterminated_turns
from mind.shell.running_effects import kill_effect

__all__ = [
    "CLOSED_TURN_GRACE_S",
    "OpenReconciliation",
    "reconcile_at_open",
    "redrive_rule",
]


CLOSED_TURN_GRACE_S: Final = 2.0
"""Seconds the open waits for the commands still running in earlier
unterminated turns (all at once: one shared deadline) before stopping
their whole trees (docs/design/effects.md §4). Such a turn is closed at
open (only the last one can be resumed), so a command's result is only an
orphan result the model reads later: a quick command's real end is worth a
short wait, not an open blocked silently for up to its timeout (600 s)."""


_STOP_BOUND_S: Final = supervision.KILL_GRACE_S + 4.0
"""Seconds a stopped supervisor gets to end: its SIGTERM-to-SIGKILL grace,
its last read of the pipes (at most 2 s, processes.md §4.3), and a margin."""


_STOPPED_UNRECORDED = (
    "it was still running when the session was opened again and was stopped, its turn "
    "being cut short by a crash and not resumable, but its supervisor ended without "
    "recording its end"
)


@dataclass(frozen=True, slots=True)
class OpenReconciliation:
    """What :func:`reconcile_at_open` did.

    Attributes:
        told: unknown effects resolved ``tell_model`` (each got a synthetic result).
        waiting: unknown effects left for a person's answer, in journal order.
        collected: effects whose supervisor's exit record became their result.
    """

    told: int = 0
    waiting: tuple[UnknownEffect, ...] = ()
    collected: int = 0


def reconcile_at_open(
    journal: Journal,
    session_id: str,
    *,
    can_ask: bool,
    effects_dir: Path | None = None,
    secrets: Sequence[str | None] = (),
) -> OpenReconciliation:
    """Startup step ``repair_processes`` (``session_startup.yaml``), before
    orphan calls are closed: every effect prepared in an unterminated turn
    and never answered is recovered through its machine, given what its
    supervisor's directory says (docs/design/effects.md §4):

    - its supervisor finished: its exit record is the result (real output
      redacted of ``secrets``, exit status; ``committed`` | ``failed``,
      evidence ``supervisor``), fsynced, then the directory is removed;
    - its supervisor still runs: nothing here — the resumed turn waits for it
      (:func:`redrive_rule`); in an earlier unterminated turn (never
      resumed) it is given :data:`CLOSED_TURN_GRACE_S` to end — one
      shared wait for all such commands, not one each — then its whole tree
      is stopped, and what its supervisor recorded is the result (after a
      note saying it was stopped and why);
    - rerun-safe (``read_only``, ``idempotent``, or it provably never
      started): nothing here — a resumed turn runs it, a closed one gets the
      orphan-call result;
    - otherwise (``non_idempotent``, no evidence), nobody can answer
      (``can_ask`` False: ``exec``, a library caller): resolved
      ``tell_model`` — ``effect_reconciled`` and an "outcome unknown" result,
      fsynced; never re-run;
    - otherwise, a person can answer: left open for the ``reconcile``
      question (``mind.shell.interactions``), returned.

    A ``tool_started`` without an effect id (a journal older than effects)
    is left to the orphan-call step as before. A directory of ``effects_dir``
    no open effect names and no supervisor holds (its call was answered —
    an interrupt's result, say — before a crash cut the cleanup) is removed
    first. Idempotent.

    Args:
        effects_dir: ``<session dir>/effects``; None: no evidence looked for.

    Returns:
        How many were collected and resolved here, and the ones left for a person.

    Raises:
        JournalWriteError: an append failed (a ``StorageError``: path, errno).
    """
    effects = SessionEffects(session_id, journal, effects_dir, secrets)
    waiting: list[UnknownEffect] = []
    told = collected = 0
    opened = open_effects(journal.records, session_id)
    if effects_dir is not None:
        _sweep(effects_dir, {inv.effect_id for inv in opened})
    open_turns = unterminated_turns(journal.records)
    facts = {inv.effect_id: process_fact(effects_dir, inv, journal.records) for inv in opened}
    # An earlier turn is never resumed: its orphan calls get a result now —
    # each command's end if it comes within the one shared grace, else its
    # tree is stopped: never a result while it runs, never a silent wait.
    earlier = [
        inv for inv in opened if facts[inv.effect_id] == "running" and inv.turn_id != open_turns[-1]
    ]
    settled = _settled(effects_dir, earlier, journal.records)
    for inv in opened:
        proof = journaled_proof(journal.records, inv)
        process = facts[inv.effect_id]
        if process == "running" and inv.effect_id not in settled:
            continue  # the resumed turn's re-drive waits for it
        process, stopped = settled.get(inv.effect_id, (process, False))
        found = effects.recover(inv, can_ask=can_ask, process=process)
        if isinstance(found, Collect):
            directory = effects.directory(inv)
            assert directory is not None
            state = directory_state(directory)
            if isinstance(state, supervision.Finished) and supervision.proven(directory, proof):
                effects.commit_collected(inv, state.result, _stopped_note(inv) if stopped else "")
                collected += 1
                continue
            found = effects.recover(inv, can_ask=can_ask, process="lost")
            assert isinstance(found, UnknownEffect)
            if stopped:
                found = replace(found, reason=_STOPPED_UNRECORDED)
        if isinstance(found, Run):
            continue
        if found.choices == ("tell_model",):
            effects.resolve(inv, found, "tell_model")
            told += 1
        else:
            waiting.append(found)
    return OpenReconciliation(told, tuple(waiting), collected)


def redrive_rule(
    records: Sequence[jr.JournalRecord], session_id: str, effects_dir: Path | None
) -> Callable[[PairedCall], bool]:
    """The rule a resumed turn's re-drive rests on
    (:func:`mind.machines.turn_replay.resume_plan`'s ``redrivable``): the
    effect chart's :func:`~mind.machines.effect.redrivable` of the call's
    effect class and what its supervisor's directory says now. Reads the
    directories (I/O); the decision is the chart's guard."""
    journaled = list(records)

    def rule(paired: PairedCall) -> bool:
        inv = invocation_of(journaled, session_id, paired)
        process = process_fact(effects_dir, inv, journaled)
        return redrivable(inv.machine.effect_class, process)

    return rule


def _sweep(effects_dir: Path, open_ids: set[str]) -> None:
    """Remove the directories of ``effects_dir`` whose effect is answered
    (not in ``open_ids``) and that no supervisor holds (a running one is
    left to its end: its directory is its own)."""
    try:
        names = os.listdir(effects_dir)
    except FileNotFoundError:
        return
    for name in names:
        if name in open_ids:
            continue
        directory = effects_dir / name
        if not isinstance(directory_state(directory), supervision.Running):
            supervision.discard(directory)


def _settled(
    effects_dir: Path | None, invs: Sequence[Invocation], records: Sequence[jr.JournalRecord]
) -> dict[str, tuple[ProcessFact, bool]]:
    """Each of ``invs``' process fact once its supervisor has ended, and
    whether it was stopped here, by effect id. Blocking: all of them share
    one wait of :data:`CLOSED_TURN_GRACE_S` for their supervisors (the live
    one each ``effect_running`` or ``supervisor.json`` names, pid + start
    identity) to end — the open waits that long at most, however many there
    are — then every tree still running is stopped
    (:func:`mind.shell.supervision.kill_tree`: the supervisor records
    ``killed`` with the output so far) and all are waited for, again on one
    shared bound of :data:`_STOP_BOUND_S` — a supervisor that does not end
    then is SIGKILLed and what its command left is killed by its marker
    (:func:`mind.shell.supervision.collect_strays`). The fact is
    ``finished`` for an exit record proven its supervisor's, else ``lost``
    — a directory without records proves nothing once ``effect_running`` is
    durable, and a damaged one nothing at all (fail closed). A supervisor
    no record names yet (its first milliseconds, before ``supervisor.json``)
    is waited for on its lock (processes.md §2: that comes before the command starts)."""
    live: list[tuple[Invocation, Path, tuple[int, str]]] = []
    for inv in invs:
        directory = effect_directory(effects_dir, inv)
        assert directory is not None
        supervisor = _live_supervisor(directory, inv, records)
        if supervisor is not None:
            live.append((inv, directory, supervisor))
    grace_ends = time.monotonic() + CLOSED_TURN_GRACE_S
    running = [
        (inv, directory, supervisor)
        for inv, directory, supervisor in live
        if not procs.wait_ended(*supervisor, max(0.0, grace_ends - time.monotonic()))
    ]
    for inv, _, _ in running:
        kill_effect(effects_dir, inv, records)
    stop_ends = time.monotonic() + _STOP_BOUND_S
    for _, directory, supervisor in running:
        if not procs.wait_ended(*supervisor, max(0.0, stop_ends - time.monotonic())):
            procs.terminate(*supervisor, signum=signal.SIGKILL)
            supervision.collect_strays(supervision.Handle(directory, *supervisor))
    stopped = {inv.effect_id for inv, _, _ in running}
    return {
        inv.effect_id: (_ended(effects_dir, inv, records), inv.effect_id in stopped) for inv in invs
    }


def _ended(
    effects_dir: Path | None, inv: Invocation, records: Sequence[jr.JournalRecord]
) -> ProcessFact:
    """The process fact of ``inv``, whose supervisor has ended: ``finished``
    for an exit record proven its supervisor's, else ``lost``."""
    directory = effect_directory(effects_dir, inv)
    assert directory is not None
    try:
        state = supervision.settle(directory)
    except (SupervisorRecordError, PrivateStateError):
        return "lost"
    proven = supervision.proven(directory, journaled_proof(records, inv))
    return "finished" if isinstance(state, supervision.Finished) and proven else "lost"


def _live_supervisor(
    directory: Path, inv: Invocation, records: Sequence[jr.JournalRecord]
) -> tuple[int, str] | None:
    """The (pid, start identity) of ``inv``'s live supervisor: the one its
    ``effect_running`` names, else the one ``supervisor.json`` names; None
    when neither names a live process (or the record is damaged)."""
    held = journaled_supervisor(records, inv)
    if held is not None and procs.same_process(*held):
        return held
    try:
        handle = supervision.handle_of(directory)
    except (SupervisorRecordError, PrivateStateError):
        return None
    if handle is None or not handle.start_identity:
        return None
    named = (handle.pid, handle.start_identity)
    return named if procs.same_process(*named) else None


def _stopped_note(inv: Invocation) -> str:
    """What the result of a command stopped at open says first."""
    return (
        f"[stopped when the session was opened again: its turn ({inv.turn_id}) was cut short "
        "by a crash and could not be resumed, and the command was still running "
        f"{CLOSED_TURN_GRACE_S:g} s later; the output so far follows]\n"
    )
