"""Performing the effect machine's actions for one session (docs/design/effects.md §3, §4).

One tool call is an :class:`Invocation`: named for good by
:mod:`mind.effects.identity`, driven by an
:class:`~mind.machines.effect.EffectMachine`. :class:`SessionEffects` writes
what the machine names: the prepared effect (``tool_started`` with effect
id, class and the arguments' SHA-256, fsynced before anything runs), the
committed result (``tool_result`` with ``effect_outcome`` and ``evidence``,
fsynced), and after a crash the reconciliation (``effect_reconciled``, then
a result that says what is known). :func:`reconcile_at_open` is the
startup step ``repair_processes``. The approval part of a call is not here
(``mind.shell.tool_calls``); running the tool is the caller's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from mind.call_pairing import PairedCall, pair_calls
from mind.conversation import ToolCall
from mind.effects.identity import arguments_sha256, effect_id, interaction_id
from mind.effects.tools import effect_class
from mind.generated import journal as jr
from mind.machines.effect import (
    Commit,
    DeliverUnknown,
    EffectMachine,
    Evidence,
    Outcome,
    RecordResolution,
    Resolution,
    Resolve,
    Run,
)
from mind.shell import faults
from mind.shell.journal import Journal
from mind.shell.recovery import unterminated_turns

__all__ = [
    "Invocation",
    "OpenReconciliation",
    "SessionEffects",
    "UnknownEffect",
    "reconcile_at_open",
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
    """

    effect_id: str
    turn_id: str
    call_id: str
    name: str
    prepared_at_ms: int
    choices: tuple[Resolution, ...]

    @property
    def interaction_id(self) -> str:
        """The id of the ``reconcile`` question about it (purpose
        ``unknown_outcome``): the same after every restart, so an answered
        question is recognised and an unanswered one re-offered under it."""
        return interaction_id(self.effect_id, "unknown_outcome")


def unknown_outcome_text(facts: UnknownEffect, resolution: Resolution) -> str:
    """The result the model reads for an effect whose outcome is unknown
    (``tell_model``) or that the person marked failed (``mark_failed``):
    what ran and when, that no exit status was recorded, that it was not run
    again (docs/design/effects.md §4)."""
    when = datetime.fromtimestamp(facts.prepared_at_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")
    known = (
        f"this `{facts.name}` call was started at {when} UTC (effect {facts.effect_id}) and "
        "mind stopped before it recorded how it ended: it may have run fully, in part or not "
        "at all; no exit status or output was recorded. It was not run again"
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


class SessionEffects:
    """The effect records of one session's journal.

    Args:
        session_id: the session (part of every effect id).
        journal: its journal (appended to; every record here is fsynced).
    """

    def __init__(self, session_id: str, journal: Journal) -> None:
        self.session_id = session_id
        self.journal = journal

    def propose(self, turn_id: str, call: ToolCall) -> Invocation:
        """Name ``call`` (its journaled occurrence in ``turn_id``) and find
        what the journal already holds of it: a resumed turn re-drives calls
        a crash left, and a prepared or answered one must be recognised, never
        prepared again."""
        records = _turn_records(self.journal.records, turn_id)
        paired = _unanswered(records, turn_id, call.call_id)
        occurrence = paired.occurrence if paired is not None else 0
        sha = arguments_sha256(call.arguments)
        ident = effect_id(self.session_id, turn_id, call.call_id, occurrence, sha)
        started = _started(records, turn_id, ident)
        if started is None and paired is not None and paired.started:
            # Started by a mind older than effects (no effect id): fail closed,
            # it is prepared — never run again without a resolution.
            started = _legacy_start(records, turn_id, call.call_id)
        machine = _replayed(records, turn_id, ident, call.name, started)
        return Invocation(turn_id, call, occurrence, sha, ident, machine, started)

    def prepare(self, inv: Invocation) -> None:
        """``approve`` then ``persist``: the ``tool_started`` record (effect
        id, class, the arguments' SHA-256) is fsynced before anything runs;
        then the effect is ``executing``.

        Raises:
            JournalWriteError: the record could not be made durable (nothing runs).
        """
        inv.machine.approve()
        started = self.journal.append(
            jr.ToolStarted(
                seq=0,
                recorded_at_ms=0,
                turn_id=inv.turn_id,
                call_id=inv.call.call_id,
                name=inv.call.name,
                effect_id=inv.effect_id,
                effect_class=jr.EffectClass(inv.machine.effect_class),
                arguments_sha256=inv.arguments_sha256,
            ),
            sync=True,
        )
        assert isinstance(started, jr.ToolStarted)
        inv.started = started
        faults.boundary("effect_prepared")
        inv.machine.persisted()
        inv.machine.execute()

    def running(self, inv: Invocation, supervisor_pid: int, supervisor_start: str) -> None:
        """The effect's process runs under its supervisor: ``effect_running``
        (pid + start identity) is fsynced, so after a crash the supervisor's
        exit record can be looked for (docs/design/effects.md §4).

        Raises:
            JournalWriteError: the record could not be made durable.
        """
        self.journal.append(
            jr.EffectRunning(
                seq=0,
                recorded_at_ms=0,
                turn_id=inv.turn_id,
                call_id=inv.call.call_id,
                effect_id=inv.effect_id,
                supervisor_pid=supervisor_pid,
                supervisor_start=supervisor_start,
            ),
            sync=True,
        )

    def recover(self, inv: Invocation, *, can_ask: bool) -> Run | UnknownEffect:
        """A re-driven invocation that was prepared before a crash and has no
        result: :class:`Run` when it is safe to re-run (the caller runs it
        again under the same effect id), else the facts of an ``unknown``
        effect for :meth:`resolve` (the choices name what may be done)."""
        (action,) = inv.machine.recover(can_ask=can_ask)
        if isinstance(action, Run):
            return action
        assert isinstance(action, Resolve) and inv.started is not None
        return UnknownEffect(
            inv.effect_id,
            inv.turn_id,
            inv.call.call_id,
            inv.call.name,
            inv.started.recorded_at_ms,
            action.choices,
        )

    def resolve(
        self, inv: Invocation, facts: UnknownEffect, resolution: Resolution
    ) -> jr.ToolResult | None:
        """Apply the resolution of an ``unknown`` effect: ``effect_reconciled``
        is fsynced first; then ``rerun`` returns None (the caller runs it and
        :meth:`commit`\\ s), the others write the result saying what is known.

        Raises:
            IllegalTransition: the effect is not ``unknown``.
        """
        result: jr.ToolResult | None = None
        for action in inv.machine.reconcile(resolution):
            if isinstance(action, RecordResolution):
                self.journal.append(
                    jr.EffectReconciled(
                        seq=0,
                        recorded_at_ms=0,
                        turn_id=inv.turn_id,
                        call_id=inv.call.call_id,
                        effect_id=inv.effect_id,
                        resolution=jr.EffectResolution(action.resolution),
                    ),
                    sync=True,
                )
            elif isinstance(action, DeliverUnknown):
                status = "error" if action.outcome == "failed" else "interrupted"
                result = self._result(
                    inv, status, unknown_outcome_text(facts, resolution), action.outcome, "none"
                )
        return result

    def commit(
        self, inv: Invocation, status: str, output: str, evidence: Evidence = "ran"
    ) -> jr.ToolResult:
        """Journal the call's one result, fsynced. A prepared effect
        ``finish``\\ es (``committed`` for ``ok``, else ``failed``) and its
        result carries the outcome and ``evidence``; a call that never
        prepared one (refused, bad arguments) is ``deny``\\ ed: the result
        names the effect only.

        Args:
            status: ``ok`` | ``error`` | ``denied`` | ``interrupted``.
            output: the result text (already redacted).
        """
        if not inv.machine.prepared:
            inv.machine.deny()
            return self._result(inv, status, output, None, None)
        (commit,) = inv.machine.finish(status, evidence)
        assert isinstance(commit, Commit)
        record = self._result(inv, status, output, commit.outcome, commit.evidence)
        faults.boundary("effect_committed_not_delivered")
        return record

    def _result(
        self,
        inv: Invocation,
        status: str,
        output: str,
        outcome: Outcome | None,
        evidence: Evidence | None,
    ) -> jr.ToolResult:
        record = self.journal.append(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id=inv.turn_id,
                call_id=inv.call.call_id,
                name=inv.call.name,
                status=jr.ToolStatus(status),
                output=output,
                synthetic=evidence == "none",
                effect_id=inv.effect_id,
                effect_outcome=msgspec.UNSET if outcome is None else jr.EffectOutcome(outcome),
                evidence=msgspec.UNSET if evidence is None else jr.EffectEvidence(evidence),
            ),
            sync=True,
        )
        assert isinstance(record, jr.ToolResult)
        inv.result = record
        return record


@dataclass(frozen=True, slots=True)
class OpenReconciliation:
    """What :func:`reconcile_at_open` did.

    Attributes:
        told: unknown effects resolved ``tell_model`` (each got a synthetic result).
        waiting: unknown effects left for a person's answer, in journal order.
    """

    told: int = 0
    waiting: tuple[UnknownEffect, ...] = ()


def reconcile_at_open(journal: Journal, session_id: str, *, can_ask: bool) -> OpenReconciliation:
    """Startup step ``repair_processes`` (``session_startup.yaml``), before
    orphan calls are closed: every effect prepared in an unterminated turn
    and never answered is recovered through its machine
    (docs/design/effects.md §4).

    - rerun-safe (``read_only``, ``idempotent``): nothing here — a resumed
      turn re-runs it, a closed one gets the orphan-call result;
    - ``non_idempotent``, nobody can answer (``can_ask`` False: ``exec``, a
      library caller): resolved ``tell_model`` — ``effect_reconciled`` and an
      "outcome unknown" result, fsynced; never re-run;
    - ``non_idempotent``, a person can answer: left open for the ``reconcile``
      question (``mind.shell.interactions``), returned.

    A ``tool_started`` without an effect id (a journal older than effects)
    is left to the orphan-call step as before. Idempotent.

    Returns:
        How many were resolved here, and the ones left for a person.

    Raises:
        JournalWriteError: an append failed (a ``StorageError``: path, errno).
    """
    effects = SessionEffects(session_id, journal)
    waiting: list[UnknownEffect] = []
    told = 0
    for turn_id in unterminated_turns(journal.records):
        for paired in pair_calls(journal.records, turn_id):
            if paired.result is not None or not paired.started:
                continue
            call = ToolCall(
                call_id=paired.call.call_id, name=paired.call.name, arguments=paired.call.arguments
            )
            sha = arguments_sha256(call.arguments)
            ident = effect_id(session_id, turn_id, call.call_id, paired.occurrence, sha)
            started = _started(journal.records, turn_id, ident)
            if started is None:
                continue
            machine = _replayed(journal.records, turn_id, ident, call.name, started)
            inv = Invocation(turn_id, call, paired.occurrence, sha, ident, machine, started)
            found = effects.recover(inv, can_ask=can_ask)
            if isinstance(found, Run):
                continue
            if found.choices == ("tell_model",):
                effects.resolve(inv, found, "tell_model")
                told += 1
            else:
                waiting.append(found)
    return OpenReconciliation(told, tuple(waiting))


def _turn_records(records: list[jr.JournalRecord], turn_id: str) -> list[jr.JournalRecord]:
    """The records from ``turn_id``'s ``turn_started`` on (found from the end:
    a live turn is the last one), so a call costs its turn, not the session."""
    for at in range(len(records) - 1, -1, -1):
        record = records[at]
        if isinstance(record, jr.TurnStarted) and record.turn_id == turn_id:
            return records[at:]
    return records


def _unanswered(records: list[jr.JournalRecord], turn_id: str, call_id: str) -> PairedCall | None:
    """The earliest journaled call of ``turn_id`` with ``call_id`` and no result
    (the runtime runs a round's calls in order, each answered before the next)."""
    for paired in pair_calls(records, turn_id):
        if paired.call.call_id == call_id and paired.result is None:
            return paired
    return None


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
    machine = EffectMachine(ident, effect_class(name))
    if started is None:
        return machine
    machine.approve()
    machine.persisted()
    if any(
        isinstance(r, jr.EffectRunning) and r.turn_id == turn_id and r.effect_id == ident
        for r in records
    ):
        machine.execute()
    return machine


def _legacy_start(
    records: list[jr.JournalRecord], turn_id: str, call_id: str
) -> jr.ToolStarted | None:
    """The last ``tool_started`` of ``call_id`` in the turn that names no effect."""
    found: jr.ToolStarted | None = None
    for record in records:
        if (
            isinstance(record, jr.ToolStarted)
            and record.turn_id == turn_id
            and record.call_id == call_id
            and not record.effect_id
        ):
            found = record
    return found


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
