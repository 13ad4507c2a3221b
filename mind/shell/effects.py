"""Performing the effect machine's actions for one session (docs/design/effects.md §3, §4).

One tool call is an :class:`Invocation`: named for good by
:mod:`mind.effects.identity`, driven by an
:class:`~mind.machines.effect.EffectMachine`. :class:`SessionEffects` writes
what the machine names: the prepared effect (``tool_started`` with effect
id, class and the arguments' SHA-256, fsynced before anything runs), the
committed result (``tool_result`` with ``effect_outcome`` and ``evidence``,
fsynced), and after a crash the reconciliation (``effect_reconciled``, then
a result that says what is known). A shell command's supervisor leaves its
exit record in ``<session dir>/effects/<effect_id>`` (docs/design/processes.md):
after a crash that record, not a re-run, gives the result (evidence
``supervisor``); the directory is removed once a result is durable.
:func:`reconcile_at_open` is the startup step ``repair_processes``. The
approval part of a call is not here (``mind.shell.tool_calls``); running the tool is the caller's.

One module (over 500 lines) because preparing, committing, reconciling at
open and collecting after a restart all read the same effect records; split,
the projection of those records would be written twice.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import anyio
import msgspec

from mind.call_pairing import PairedCall, pair_calls
from mind.conversation import ToolCall, replace_lone_surrogates
from mind.effects.identity import arguments_sha256, effect_id, interaction_id
from mind.effects.tools import effect_class
from mind.errors import PrivateStateError, SupervisorIdentityUnknown, SupervisorRecordError
from mind.generated import journal as jr
from mind.machines.effect import (
    Collect,
    Commit,
    DeliverUnknown,
    EffectMachine,
    Evidence,
    Outcome,
    ProcessFact,
    RecordResolution,
    Resolution,
    Resolve,
    Run,
    redrivable,
)
from mind.shell import faults, procs, supervision
from mind.shell.effect_index import TurnEffectIndex
from mind.shell.journal import Journal
from mind.shell.recovery import unterminated_turns
from mind.shell.redact import redact

__all__ = [
    "CLOSED_TURN_GRACE_S",
    "Invocation",
    "OpenReconciliation",
    "RunningEffect",
    "SessionEffects",
    "UnknownEffect",
    "kill_running",
    "reconcile_at_open",
    "redrive_rule",
    "running_effects",
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


class SessionEffects:
    """The effect records of one session's journal.

    Args:
        session_id: the session (part of every effect id).
        journal: its journal (appended to; every record here is fsynced).
        effects_dir: ``<session dir>/effects``, where each shell command's
            supervisor keeps its files (``<effect_id>/``); None: no evidence
            is looked for.
        secrets: what a collected output is redacted of
            (:attr:`mind.shell.session.Session.secrets`).
    """

    def __init__(
        self,
        session_id: str,
        journal: Journal,
        effects_dir: Path | None = None,
        secrets: Sequence[str | None] = (),
    ) -> None:
        self.session_id = session_id
        self.journal = journal
        self.effects_dir = effects_dir
        self.secrets = tuple(secrets)
        self._index: TurnEffectIndex | None = None

    def directory(self, inv: Invocation) -> Path | None:
        """The supervisor directory of ``inv``'s shell command, or None (not a
        shell call, or no ``effects_dir``)."""
        return _directory(self.effects_dir, inv)

    def process(self, inv: Invocation) -> ProcessFact:
        """What ``inv``'s supervisor directory says now
        (:func:`mind.shell.supervision.inspect`, which makes ``never_started``
        final): ``none`` for a call with no such directory or one prepared
        without an effect id (an older mind: nothing proves it never ran);
        ``lost`` when the directory is damaged or not private (fail closed:
        the outcome is unknown) and when its ``exit.json`` is not proven its
        supervisor's (the journaled ``proof_sha256``: processes.md §10);
        ``running`` while the supervisor its ``effect_running`` names is alive,
        whatever its directory says."""
        return _process(self.effects_dir, inv, self.journal.records)

    def propose(self, turn_id: str, call: ToolCall) -> Invocation:
        """Name ``call`` (its journaled occurrence in ``turn_id``) and find
        what the journal already holds of it: a resumed turn re-drives calls
        a crash left, and a prepared or answered one must be recognised, never
        prepared again."""
        index = self.turn_index(turn_id)
        paired = index.pairing.unanswered(turn_id, call.call_id)
        occurrence = paired.occurrence if paired is not None else 0
        sha = arguments_sha256(call.arguments)
        ident = effect_id(self.session_id, turn_id, call.call_id, occurrence, sha)
        started = index.started.get(ident)
        if started is None and paired is not None and paired.started:
            # Started by a mind older than effects (no effect id): fail closed,
            # it is prepared — never run again without a resolution.
            started = index.legacy_started.get(call.call_id)
        machine = _machine_of(ident, call.name, started, running=ident in index.running)
        return Invocation(turn_id, call, occurrence, sha, ident, machine, started)

    def turn_index(self, turn_id: str) -> TurnEffectIndex:
        """The index of ``turn_id``'s effect records, brought up to date with
        the records appended since it was last asked (O(new records); a new
        turn, or a replaced journal, is read once from its ``turn_started``)."""
        records = self.journal.records
        index = self._index
        if index is None or index.turn_id != turn_id or index.stale(records):
            index = self._index = TurnEffectIndex(records, turn_id)
        else:
            index.follow(records)
        return index

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

    def running(
        self,
        inv: Invocation,
        supervisor_pid: int,
        supervisor_start: str,
        proof_sha256: str = "",
    ) -> None:
        """The effect's process runs under its supervisor: ``effect_running``
        (pid + start identity, and the hash of the token only the supervisor
        holds: ``proof_sha256``, hex) is fsynced, so after a crash the
        supervisor's exit record can be looked for and told from one its
        command forged (docs/design/effects.md §4, processes.md §10).

        Raises:
            SupervisorIdentityUnknown: ``supervisor_start`` is "" (nothing
                is journaled: a running record must name its process).
            JournalWriteError: the record could not be made durable.
        """
        if not supervisor_start:
            raise SupervisorIdentityUnknown(supervisor_pid)
        self.journal.append(
            jr.EffectRunning(
                seq=0,
                recorded_at_ms=0,
                turn_id=inv.turn_id,
                call_id=inv.call.call_id,
                effect_id=inv.effect_id,
                supervisor_pid=supervisor_pid,
                supervisor_start=supervisor_start,
                proof_sha256=proof_sha256 or msgspec.UNSET,
            ),
            sync=True,
        )

    def recover(
        self, inv: Invocation, *, can_ask: bool, process: ProcessFact = "none"
    ) -> Run | Collect | UnknownEffect:
        """A re-driven invocation that was prepared before a crash and has no
        result, ``process`` being what its supervisor's directory says
        (:meth:`process`): :class:`Collect` when that evidence remains (the
        caller collects it: :meth:`collect`), :class:`Run` when it is safe to re-run
        (the caller runs it again under the same effect id), else the facts
        of an ``unknown`` effect for :meth:`resolve` (the choices name what
        may be done)."""
        (action,) = inv.machine.recover(can_ask=can_ask, process=process)
        if isinstance(action, Run | Collect):
            return action
        assert isinstance(action, Resolve)
        return self._unknown(inv, action)

    def _unknown(self, inv: Invocation, action: Resolve) -> UnknownEffect:
        """The facts of ``inv``'s unknown outcome, with the choices the
        effect chart's ``Resolve`` named and the reason the evidence gives."""
        assert inv.started is not None
        return UnknownEffect(
            inv.effect_id,
            inv.turn_id,
            inv.call.call_id,
            inv.call.name,
            inv.started.recorded_at_ms,
            action.choices,
            reason=self.why_unknown(inv),
        )

    def why_unknown(self, inv: Invocation) -> str:
        """What was found instead of an exit record of ``inv``'s effect, as
        one clause: :data:`MIND_STOPPED` when no supervisor evidence was ever
        made (no directory for this tool, or none made and none journaled),
        else what its directory shows
        (:func:`mind.shell.supervision.unrecorded_reason`: gone, record
        missing, not proven, output file replaced, damaged)."""
        directory = self.directory(inv)
        if directory is None or (
            not os.path.lexists(directory) and _journaled(self.journal.records, inv) is None
        ):
            return MIND_STOPPED
        return supervision.unrecorded_reason(
            directory, proof_sha256=_proof(self.journal.records, inv)
        )

    def resolve(
        self, inv: Invocation, facts: UnknownEffect, resolution: Resolution, note: str = ""
    ) -> jr.ToolResult | None:
        """Apply the resolution of an ``unknown`` effect: ``effect_reconciled``
        is fsynced first; then ``rerun`` returns None (the caller runs it and
        :meth:`commit`\\ s), the others write the result saying what is known
        (after ``note``, "" for none).

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
                text = note + unknown_outcome_text(facts, resolution)
                result = self._result(inv, status, text, action.outcome, "none")
        return result

    async def collect(
        self,
        inv: Invocation,
        *,
        can_ask: bool,
        note: Callable[[], str] = lambda: "",
        stop: Callable[[], bool] = lambda: True,
    ) -> jr.ToolResult | UnknownEffect:
        """After :class:`Collect`: wait for ``inv``'s supervisor while it runs
        (its timeout is the supervisor's) and commit its exit record as the
        result — the real output, redacted of :attr:`secrets`, with evidence
        ``supervisor``, after ``note()`` (read at the commit; "" for none).
        While the supervisor the journal's ``effect_running`` names (pid +
        start identity) is alive it is waited for even when its directory is
        gone or unreadable: an effect is never called unknown while its
        command may still be running. When no record is left (the supervisor was killed
        unrecorded, the directory is damaged), the effect is recovered again
        with ``lost``: the facts of an ``unknown`` effect.

        Raises:
            anyio.get_cancelled_exc_class(): the caller was cancelled (an
                interrupt): the command's whole tree was stopped first, as
                for a live command (:func:`mind.shell.supervision.collect`) —
                when ``stop()`` says so (an explicit Stop), never when mind
                is only leaving.
            JournalWriteError: the result could not be made durable.
        """
        directory = self.directory(inv)
        held = _journaled_supervisor(self.journal.records, inv)
        holding = directory is not None and isinstance(_state(directory), supervision.Running)
        if held is not None and not holding:
            await _outlive(*held, stop)  # no lock to wait on (gone, damaged): the process itself
        result = None
        if directory is not None:
            try:
                proof = _proof(self.journal.records, inv)
                result = await supervision.collect(directory, proof_sha256=proof, stop=stop)
            except (SupervisorRecordError, PrivateStateError):
                result = None  # damaged: the outcome is unknown
        if result is None:
            found = self.recover(inv, can_ask=can_ask, process="lost")
            assert isinstance(found, UnknownEffect)
            return found
        return self._collected(inv, result, note())

    def _collected(
        self, inv: Invocation, result: supervision.ProcessResult, note: str = ""
    ) -> jr.ToolResult:
        text = note + replace_lone_surrogates(result.text)  # redacted by commit
        return self.commit(
            inv, "ok" if result.ok else "error", text, "supervisor", ran_ms=result.ran_ms
        )

    def kill(self, inv: Invocation) -> bool:
        """Stop ``inv``'s command, still running after a crash, as a whole
        tree: SIGTERM to its supervisor (which kills every descendant,
        ``setsid`` ones too, and records ``killed``: docs/design/processes.md
        §4) — the one its directory names, else the one its journaled
        ``effect_running`` names (pid + start identity), so a command whose
        directory is gone is stopped too. Returns without waiting
        (:meth:`collect` does).

        Returns:
            True when a live supervisor was signalled; False when none runs.
        """
        return _kill(self.effects_dir, inv, self.journal.records)

    def commit(
        self,
        inv: Invocation,
        status: str,
        output: str,
        evidence: Evidence = "ran",
        *,
        ran_ms: int | None = None,
    ) -> jr.ToolResult:
        """Journal the call's one result, fsynced. A prepared effect
        ``finish``\\ es (``committed`` for ``ok``, else ``failed``) and its
        result carries the outcome and ``evidence``; a call that never
        prepared one (refused, bad arguments) is ``deny``\\ ed: the result
        names the effect only.

        Args:
            status: ``ok`` | ``error`` | ``denied`` | ``interrupted``.
            output: the result text; redacted of :attr:`secrets` here, the
                one exit of results to the journal (docs/design/secrets.md).
            evidence: ``ran`` (mind saw it end) or ``supervisor`` (its exit
                record, after a crash).
            ran_ms: the command's own run time from its supervisor's
                records, milliseconds (journaled as ``ran_ms``); None: not recorded.
        """
        if not inv.machine.prepared:
            inv.machine.deny()
            return self._result(inv, status, output, None, None)
        if evidence == "ran" and inv.machine.state == "executing" and self._unrecorded(inv):
            # Its supervisor ended without a record mind believes (killed, or
            # the record is not its own): what it did is unknown, not failed.
            (action,) = inv.machine.recover(can_ask=False, process="lost")
            assert isinstance(action, Resolve)
            facts = self._unknown(inv, action)
            told = self.resolve(inv, facts, "tell_model")
            assert told is not None
            return told
        (commit,) = inv.machine.finish(status, evidence)
        assert isinstance(commit, Commit)
        record = self._result(inv, status, output, commit.outcome, commit.evidence, ran_ms)
        faults.boundary("effect_committed_not_delivered")
        return record

    def _unrecorded(self, inv: Invocation) -> bool:
        """Whether ``inv``'s command ran under a supervisor that ended without
        an exit record proven its own (processes.md §6.6, §10): its directory
        reads Lost, or Finished with a proof that does not match, or is
        damaged. A command that never started (refused, no directory) is not."""
        directory = self.directory(inv)
        if directory is None or not os.path.lexists(directory):
            return False
        state = _state(directory)
        if isinstance(state, supervision.Finished):
            return not supervision.proven(directory, _proof(self.journal.records, inv))
        return state is None or isinstance(state, supervision.Lost)

    def _result(
        self,
        inv: Invocation,
        status: str,
        output: str,
        outcome: Outcome | None,
        evidence: Evidence | None,
        ran_ms: int | None = None,
    ) -> jr.ToolResult:
        record = self.journal.append(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id=inv.turn_id,
                call_id=inv.call.call_id,
                name=inv.call.name,
                status=jr.ToolStatus(status),
                # Behind the sandbox: mind's own keys never enter a result.
                output=redact(output, self.secrets, shapes=False),
                synthetic=evidence == "none",
                effect_id=inv.effect_id,
                effect_outcome=msgspec.UNSET if outcome is None else jr.EffectOutcome(outcome),
                evidence=msgspec.UNSET if evidence is None else jr.EffectEvidence(evidence),
                ran_ms=msgspec.UNSET if ran_ms is None else ran_ms,
            ),
            sync=True,
        )
        assert isinstance(record, jr.ToolResult)
        inv.result = record
        directory = self.directory(inv)
        if directory is not None:
            # Only now that the result is durable (a crash before keeps the evidence).
            supervision.discard(directory)
        return record


CLOSED_TURN_GRACE_S: Final = 2.0
"""Seconds the open waits for a command still running in an earlier
unterminated turn before stopping its whole tree (docs/design/effects.md §4).
That turn is closed at open (only the last one can be resumed), so the
command's result is only an orphan result the model reads later: a quick
command's real end is worth a short wait, not an open blocked silently for
up to the command's timeout (600 s)."""

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
      resumed) it is given :data:`CLOSED_TURN_GRACE_S` to end, then its whole
      tree is stopped, and what its supervisor recorded is the result
      (after a note saying it was stopped and why);
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
    opened = _open_effects(journal.records, session_id)
    if effects_dir is not None:
        _sweep(effects_dir, {inv.effect_id for inv in opened})
    open_turns = unterminated_turns(journal.records)
    for inv in opened:
        proof = _proof(journal.records, inv)
        process = _process(effects_dir, inv, journal.records)
        if process == "running" and inv.turn_id == open_turns[-1]:
            continue  # the resumed turn's re-drive waits for it
        stopped = False
        if process == "running":
            # An earlier turn is never resumed: its orphan calls get a result
            # now — the command's end if it comes within the grace, else the
            # tree is stopped: never a result while it runs, never a silent wait.
            process, stopped = _settled(effects_dir, inv, journal.records)
        found = effects.recover(inv, can_ask=can_ask, process=process)
        if isinstance(found, Collect):
            directory = effects.directory(inv)
            assert directory is not None
            state = _state(directory)
            if isinstance(state, supervision.Finished) and supervision.proven(directory, proof):
                effects._collected(inv, state.result, _stopped_note(inv) if stopped else "")
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
    for inv in _open_effects(journaled, session_id):
        # A live session asks: its own command may be starting (no lock yet),
        # so nothing here makes "never started" final (processes.md §6).
        if _process(effects_dir, inv, journaled, finalize=False) != "running":
            continue
        directory = _directory(effects_dir, inv)
        state = _state(directory, finalize=False) if directory is not None else None
        held = _journaled_supervisor(journaled, inv)
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
    for inv in _open_effects(journaled, session_id):
        running = _process(effects_dir, inv, journaled, finalize=False) == "running"
        if inv.effect_id == effect_id and running:
            return _kill(effects_dir, inv, journaled)
    return False


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
        inv = _invocation(journaled, session_id, paired)
        process = _process(effects_dir, inv, journaled)
        return redrivable(inv.machine.effect_class, process)

    return rule


def _open_effects(records: list[jr.JournalRecord], session_id: str) -> list[Invocation]:
    """Every effect prepared in an unterminated turn, with no result, that
    names its effect id (an older mind's start is the orphan step's)."""
    found: list[Invocation] = []
    for turn_id in unterminated_turns(records):
        for paired in pair_calls(records, turn_id):
            if paired.result is not None or not paired.started:
                continue
            inv = _invocation(records, session_id, paired)
            if inv.started is not None:
                found.append(inv)
    return found


def _invocation(records: list[jr.JournalRecord], session_id: str, paired: PairedCall) -> Invocation:
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
        if not isinstance(_state(directory), supervision.Running):
            supervision.discard(directory)


def _state(directory: Path, *, finalize: bool = True) -> supervision.State | None:
    """:func:`mind.shell.supervision.inspect`, None when the directory is
    damaged or not private (fail closed: no evidence)."""
    try:
        return supervision.inspect(directory, finalize=finalize)
    except (SupervisorRecordError, PrivateStateError):
        return None


def _journaled_supervisor(
    records: Sequence[jr.JournalRecord], inv: Invocation
) -> tuple[int, str] | None:
    """The (pid, start identity) of ``inv``'s supervisor its last
    ``effect_running`` records, or None (it never ran under one, or the
    record has no start identity: a bare pid could name any later process)."""
    journaled = _journaled(records, inv)
    if journaled is None or not journaled.supervisor_start:
        return None
    return journaled.supervisor_pid, journaled.supervisor_start


def _kill(effects_dir: Path | None, inv: Invocation, records: Sequence[jr.JournalRecord]) -> bool:
    """:meth:`SessionEffects.kill`."""
    directory = _directory(effects_dir, inv)
    if directory is not None:
        try:
            if supervision.kill_tree(directory):
                return True
        except (SupervisorRecordError, PrivateStateError):
            pass  # damaged: the journal still names the process
    held = _journaled_supervisor(records, inv)
    return held is not None and procs.terminate(*held)


async def _outlive(pid: int, identity: str, stop: Callable[[], bool] = lambda: True) -> None:
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


def _directory(effects_dir: Path | None, inv: Invocation) -> Path | None:
    if effects_dir is None or inv.call.name != "shell":
        return None
    return effects_dir / inv.effect_id


def _process(
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
    directory = _directory(effects_dir, inv)
    if directory is None or inv.started is None or not inv.started.effect_id:
        return "none"
    journaled = _journaled(records, inv)
    held = _journaled_supervisor(records, inv)
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
    state = _state(directory, finalize=finalize)
    if isinstance(state, supervision.Finished):
        # A record its command wrote (it can reach the directory) is no evidence.
        return "finished" if supervision.proven(directory, proof_sha256) else "lost"
    if isinstance(state, supervision.Running):
        return "running"
    if isinstance(state, supervision.NeverStarted):
        return "never_started"
    return "lost"


def _settled(
    effects_dir: Path | None, inv: Invocation, records: Sequence[jr.JournalRecord]
) -> tuple[ProcessFact, bool]:
    """``inv``'s process fact once its supervisor has ended, and whether it
    was stopped here: blocking, it waits :data:`CLOSED_TURN_GRACE_S` for the
    supervisor (the live one its ``effect_running`` or ``supervisor.json``
    names, pid + start identity) to end, then stops the whole tree
    (:func:`mind.shell.supervision.kill_tree`: the supervisor records
    ``killed`` with the output so far) and waits for that, at most
    :data:`_STOP_BOUND_S` — a supervisor that does not end then is SIGKILLed
    and what its command left is killed by its marker
    (:func:`mind.shell.supervision.collect_strays`). The fact is
    ``finished`` for an exit record proven its supervisor's, else ``lost``
    — a directory without records proves nothing once ``effect_running`` is
    durable, and a damaged one nothing at all (fail closed). A supervisor
    no record names yet (its first milliseconds, before ``supervisor.json``)
    is waited for on its lock (processes.md §2: that comes before the command starts)."""
    directory = _directory(effects_dir, inv)
    assert directory is not None
    supervisor = _live_supervisor(directory, inv, records)
    stopped = False
    if supervisor is not None and not procs.wait_ended(*supervisor, CLOSED_TURN_GRACE_S):
        stopped = True
        _kill(effects_dir, inv, records)
        if not procs.wait_ended(*supervisor, _STOP_BOUND_S):
            procs.terminate(*supervisor, signum=signal.SIGKILL)
            supervision.collect_strays(supervision.Handle(directory, *supervisor))
    try:
        state = supervision.settle(directory)
    except (SupervisorRecordError, PrivateStateError):
        return "lost", stopped
    proven = supervision.proven(directory, _proof(records, inv))
    return ("finished" if isinstance(state, supervision.Finished) and proven else "lost"), stopped


def _live_supervisor(
    directory: Path, inv: Invocation, records: Sequence[jr.JournalRecord]
) -> tuple[int, str] | None:
    """The (pid, start identity) of ``inv``'s live supervisor: the one its
    ``effect_running`` names, else the one ``supervisor.json`` names; None
    when neither names a live process (or the record is damaged)."""
    held = _journaled_supervisor(records, inv)
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


def _recorded(directory: Path) -> bool:
    """Whether ``directory`` holds ``supervisor.json`` or ``exit.json``."""
    return any(
        os.path.lexists(directory / name)
        for name in (supervision.SUPERVISOR_FILE, supervision.EXIT_FILE)
    )


def _journaled(records: Sequence[jr.JournalRecord], inv: Invocation) -> jr.EffectRunning | None:
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


def _proof(records: Sequence[jr.JournalRecord], inv: Invocation) -> str:
    """The ``proof_sha256`` of ``inv``'s journaled supervisor; "" when none is
    journaled or its record is older than the field (then unchecked)."""
    journaled = _journaled(records, inv)
    return journaled.proof_sha256 or "" if journaled is not None else ""


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
    return _machine_of(ident, name, started, running=running)


def _machine_of(
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
