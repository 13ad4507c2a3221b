"""What the journal and an effect's supervisor directory say of one tool
call's effect (docs/design/effects.md §1, §4; docs/design/processes.md).

An :class:`Invocation` is one call of one turn, named for good by
:mod:`mind.effects.identity` and driven by an
:class:`~mind.machines.effect.EffectMachine` replayed to the durable state
its records give (:func:`machine_of`, :func:`invocation_of`). The readers
here build those facts: the effects a crash left open
(:func:`open_effects`), the last ``effect_running`` of one
(:func:`journaled_running`, :func:`journaled_supervisor`,
:func:`journaled_proof`), and what its supervisor's directory says
(:func:`process_fact`, a :data:`~mind.machines.effect.ProcessFact`).
:class:`UnknownEffect` and :func:`unknown_outcome_text` are what is known
of an effect whose outcome is unknown. Reads files and the process table;
writes nothing (:mod:`mind.shell.effects` writes the records).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from mind.call_pairing import PairedCall, pair_calls
from mind.conversation import ToolCall
from mind.effects.identity import arguments_sha256, effect_id, interaction_id
from mind.effects.tools import effect_class
from mind.errors import PrivateStateError, SupervisorRecordError
from mind.generated import journal as jr
from mind.machines.effect import EffectMachine, ProcessFact, Resolution
from mind.shell import procs, supervision
from mind.shell.recovery import unterminated_turns

__all__ = [
    "MIND_STOPPED",
    "Invocation",
    "UnknownEffect",
    "directory_state",
    "effect_directory",
    "invocation_of",
    "journaled_proof",
    "journaled_running",
    "journaled_supervisor",
    "machine_of",
    "open_effects",
    "process_fact",
    "unknown_outcome_text",
]


@dataclass(frozen=True, slots=True)
class UnknownEffect:
    """What is known of an effect whose outcome is unknown after a crash —
    the facts a ``reconcile`` question shows and the model is told.

    Attributes:
        effect_id: ``ef_…`` (docs/design/effects.md §1).
        turn_id: the turn of the call.
        call_id: the provider's call id.
        name: the tool.
        prepared_at_ms: when its ``tool_started`` was recorded (Unix epoch ms).
        choices: what may be done (:func:`mind.machines.effect.reconcile_choices`).
        reason: why it is unknown: what was found
            (:meth:`SessionEffects.why_unknown`); "" reads as mind having
            stopped before it recorded the end.
    """

    effect_id: str
    turn_id: str
    call_id: str
    name: str
    prepared_at_ms: int
    choices: tuple[Resolution, ...]
    reason: str = ""

    @property
    def interaction_id(self) -> str:
        """The id of the ``reconcile`` question about it (purpose
        ``unknown_outcome``): the same after every restart, so an answered
        question is recognised and an unanswered one re-offered under it."""
        return interaction_id(self.effect_id, "unknown_outcome")


MIND_STOPPED: Final = "mind stopped before it recorded how it ended"
"""Why an effect is unknown when no supervisor evidence was ever made (a
tool that runs no process, or a crash before its supervisor started)."""


def unknown_outcome_text(facts: UnknownEffect, resolution: Resolution) -> str:
    """The result the model reads for an effect whose outcome is unknown
    (``tell_model``), that the person marked failed (``mark_failed``), or
    that the person killed while it still ran after a restart and that left
    no exit record (``killed``): what ran and when, what was found instead
    of its exit record (``facts.reason``), that it was not run again
    (docs/design/effects.md §4). One account per result: a kill is never
    also called "marked failed"."""
    when = datetime.fromtimestamp(facts.prepared_at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    why = facts.reason or MIND_STOPPED
    call = f"this `{facts.name}` call (effect {facts.effect_id}, started at {when} UTC)"
    if resolution == "killed":
        return (
            f"[killed at the user's request: {call} was still running after mind restarted, "
            f"and the user stopped it and every process it started. {why[0].upper()}{why[1:]}, "
            "so its exit status and output are unknown. It was not run again.]"
        )
    known = (
        f"this `{facts.name}` call (effect {facts.effect_id}) started at {when} UTC and "
        f"{why}, so its exit status and output are unknown: it may have run fully, "
        "in part or not at all. It was not run again"
    )
    if resolution == "mark_failed":
        return f"[outcome unknown, marked failed by the user: {known}.]"
    return f"[outcome unknown: {known} — check its effects before repeating it.]"


@dataclass(eq=False)
class Invocation:
    """One tool call of one turn and its effect.

    Attributes:
        turn_id: the turn.
        call: the call as the model sent it.
        occurrence: earlier calls of the turn with the same id (identity §1).
        arguments_sha256: hex SHA-256 of the raw arguments.
        effect_id: ``ef_…``.
        machine: the effect machine (``proposed``, or ``prepared`` when the
            journal already holds its ``tool_started``: a re-driven call).
        started: the ``tool_started`` of an earlier run of this invocation
            (a crash came after it), or None.
        result: the ``tool_result`` already answering it, or None.
    """

    turn_id: str
    call: ToolCall
    occurrence: int
    arguments_sha256: str
    effect_id: str
    machine: EffectMachine
    started: jr.ToolStarted | None = None
    result: jr.ToolResult | None = None


def open_effects(records: list[jr.JournalRecord], session_id: str) -> list[Invocation]:
    """Every effect prepared in an unterminated turn, with no result, that
    names its effect id (an older mind's start is the orphan step's)."""
    found: list[Invocation] = []
    for turn_id in unterminated_turns(records):
        for paired in pair_calls(records, turn_id):
            if paired.result is not None or not paired.started:
                continue
            inv = invocation_of(records, session_id, paired)
            if inv.started is not None:
                found.append(inv)
    return found


def invocation_of(
    records: list[jr.JournalRecord], session_id: str, paired: PairedCall
) -> Invocation:
    """``paired`` named and replayed from ``records`` (``started`` only when a
    ``tool_started`` names its effect id)."""
    call = ToolCall(
        call_id=paired.call.call_id, name=paired.call.name, arguments=paired.call.arguments
    )
    sha = arguments_sha256(call.arguments)
    ident = effect_id(session_id, paired.turn_id, call.call_id, paired.occurrence, sha)
    started = _started(records, paired.turn_id, ident)
    machine = _replayed(records, paired.turn_id, ident, call.name, started)
    return Invocation(paired.turn_id, call, paired.occurrence, sha, ident, machine, started)


def effect_directory(effects_dir: Path | None, inv: Invocation) -> Path | None:
    """The supervisor directory of ``inv``'s shell command
    (``effects_dir/<effect_id>``), or None: not a shell call, or no ``effects_dir``."""
    if effects_dir is None or inv.call.name != "shell":
        return None
    return effects_dir / inv.effect_id


def process_fact(
    effects_dir: Path | None,
    inv: Invocation,
    records: Sequence[jr.JournalRecord],
    *,
    finalize: bool = True,
) -> ProcessFact:
    """:meth:`SessionEffects.process`, the effect records being ``records``:
    ``running`` also while the supervisor its ``effect_running`` names (pid +
    start identity) is alive, whatever its directory says (gone, damaged): a
    command that may still run is waited for, never offered for a re-run
    beside itself."""
    directory = effect_directory(effects_dir, inv)
    if directory is None or inv.started is None or not inv.started.effect_id:
        return "none"
    journaled = journaled_running(records, inv)
    held = journaled_supervisor(records, inv)
    if held is not None and procs.same_process(*held):
        return "running"
    if journaled is not None and not os.path.lexists(directory):
        return "lost"  # made before any supervisor had it: gone is not "never started"
    if journaled is not None and not _recorded(directory):
        # `effect_running` is durable before a spare gets the job, and its
        # supervisor.json is not fsynced (processes.md §9.4): no record is
        # not "never started" — its journaled supervisor is gone (above), so Lost.
        return "lost"
    proof_sha256 = journaled.proof_sha256 or "" if journaled is not None else ""
    state = directory_state(directory, finalize=finalize)
    if isinstance(state, supervision.Finished):
        # A record its command wrote (it can reach the directory) is no evidence.
        return "finished" if supervision.proven(directory, proof_sha256) else "lost"
    if isinstance(state, supervision.Running):
        return "running"
    if isinstance(state, supervision.NeverStarted):
        return "never_started"
    return "lost"


def directory_state(directory: Path, *, finalize: bool = True) -> supervision.State | None:
    """:func:`mind.shell.supervision.inspect`, None when the directory is
    damaged or not private (fail closed: no evidence)."""
    try:
        return supervision.inspect(directory, finalize=finalize)
    except (SupervisorRecordError, PrivateStateError):
        return None


def journaled_supervisor(
    records: Sequence[jr.JournalRecord], inv: Invocation
) -> tuple[int, str] | None:
    """The (pid, start identity) of ``inv``'s supervisor its last
    ``effect_running`` records, or None (it never ran under one, or the
    record has no start identity: a bare pid could name any later process)."""
    journaled = journaled_running(records, inv)
    if journaled is None or not journaled.supervisor_start:
        return None
    return journaled.supervisor_pid, journaled.supervisor_start


def journaled_running(
    records: Sequence[jr.JournalRecord], inv: Invocation
) -> jr.EffectRunning | None:
    """The last ``effect_running`` of ``inv``'s effect (found from the end:
    a live effect's is near it), or None."""
    for at in range(len(records) - 1, -1, -1):
        record = records[at]
        if (
            isinstance(record, jr.EffectRunning)
            and record.effect_id == inv.effect_id
            and record.turn_id == inv.turn_id
        ):
            return record
    return None


def journaled_proof(records: Sequence[jr.JournalRecord], inv: Invocation) -> str:
    """The ``proof_sha256`` of ``inv``'s journaled supervisor; "" when none is
    journaled or its record is older than the field (then unchecked)."""
    journaled = journaled_running(records, inv)
    return journaled.proof_sha256 or "" if journaled is not None else ""


def _recorded(directory: Path) -> bool:
    """Whether ``directory`` holds ``supervisor.json`` or ``exit.json``."""
    return any(
        os.path.lexists(directory / name)
        for name in (supervision.SUPERVISOR_FILE, supervision.EXIT_FILE)
    )


def _replayed(
    records: list[jr.JournalRecord],
    turn_id: str,
    ident: str,
    name: str,
    started: jr.ToolStarted | None,
) -> EffectMachine:
    """A machine in the durable state the journal gives effect ``ident``:
    ``proposed`` (no ``tool_started``), ``prepared``, or ``executing`` when
    an ``effect_running`` record says its supervisor ran."""
    running = started is not None and any(
        isinstance(r, jr.EffectRunning) and r.turn_id == turn_id and r.effect_id == ident
        for r in records
    )
    return machine_of(ident, name, started, running=running)


def machine_of(
    ident: str, name: str, started: jr.ToolStarted | None, *, running: bool
) -> EffectMachine:
    """Effect ``ident``'s machine in the durable state its records give:
    ``proposed`` (no ``started``), ``prepared``, or ``executing`` when
    ``running`` (an ``effect_running`` record names it)."""
    machine = EffectMachine(ident, effect_class(name))
    if started is None:
        return machine
    machine.approve()
    machine.persisted()
    if running:
        machine.execute()
    return machine


def _started(records: list[jr.JournalRecord], turn_id: str, ident: str) -> jr.ToolStarted | None:
    """The ``tool_started`` that prepared effect ``ident``, if any."""
    for record in records:
        if (
            isinstance(record, jr.ToolStarted)
            and record.turn_id == turn_id
            and record.effect_id == ident
        ):
            return record
    return None
