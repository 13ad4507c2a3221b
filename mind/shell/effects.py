"""Performing the effect machine's actions for one session (docs/design/effects.md §3, §4).

:class:`SessionEffects` writes what the machine names for one
:class:`~mind.shell.effect_records.Invocation`: the prepared effect
(``tool_started`` with effect id, class and the arguments' SHA-256, fsynced
before anything runs), ``effect_running`` (the supervisor's pid and start
identity), the committed result (``tool_result`` with ``effect_outcome`` and
``evidence``, fsynced), and after a crash the reconciliation
(``effect_reconciled``, then a result that says what is known). A shell
command's supervisor leaves its exit record in
``<session dir>/effects/<effect_id>`` (docs/design/processes.md): after a
crash that record, not a re-run, gives the result (evidence
``supervisor``: :meth:`SessionEffects.collect`); the directory is removed
once a result is durable. What the records and directories say is read by
:mod:`mind.shell.effect_records`; reconciling at open is
:mod:`mind.shell.open_reconciliation`; commands a crash left running are
:mod:`mind.shell.running_effects`. The approval part of a call is not here
(:mod:`mind.shell.tool_calls`); running the tool is the caller's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from mind.conversation import ToolCall, replace_lone_surrogates
from mind.effects.identity import arguments_sha256, effect_id
from mind.errors import PrivateStateError, SupervisorIdentityUnknown, SupervisorRecordError
from mind.generated import journal as jr
from mind.machines.effect import (
    Collect,
    Commit,
    DeliverUnknown,
    EffectAction,
    Evidence,
    Outcome,
    ProcessFact,
    RecordResolution,
    Resolution,
    Resolve,
    Run,
)
from mind.shell import faults, supervision
from mind.shell.effect_index import TurnEffectIndex
from mind.shell.effect_records import (
    MIND_STOPPED,
    Invocation,
    UnknownEffect,
    directory_state,
    effect_directory,
    journaled_proof,
    journaled_running,
    journaled_supervisor,
    machine_of,
    process_fact,
    unknown_outcome_text,
)
from mind.shell.journal import Journal
from mind.shell.redact import redact
from mind.shell.running_effects import kill_effect, outlive

__all__ = [
    "SessionEffects",
]


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
        return effect_directory(self.effects_dir, inv)

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
        return process_fact(self.effects_dir, inv, self.journal.records)

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
        machine = machine_of(ident, call.name, started, running=ident in index.running)
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
        found = self._recovered(inv, can_ask=can_ask, process=process)
        assert not isinstance(found, jr.ToolResult)  # only a kill resolves unasked
        return found

    def _recovered(
        self, inv: Invocation, *, can_ask: bool, process: ProcessFact, killed: bool = False
    ) -> Run | Collect | UnknownEffect | jr.ToolResult:
        """:meth:`recover`, told whether the person's ``kill`` stopped it
        (``killed``): where the chart resolves that unasked (no exit record
        was left), its records are written here and the result returned."""
        actions = inv.machine.recover(can_ask=can_ask, process=process, killed=killed)
        match actions:
            case [Run() | Collect() as action]:
                return action
            case [Resolve(choices)]:
                return self._unknown(inv, choices)
        result = self._perform(inv, self._unknown(inv, ()), actions)
        assert result is not None
        return result

    def _unknown(self, inv: Invocation, choices: tuple[Resolution, ...]) -> UnknownEffect:
        """The facts of ``inv``'s unknown outcome, with the choices the
        effect chart's ``Resolve`` named and the reason the evidence gives."""
        assert inv.started is not None
        return UnknownEffect(
            inv.effect_id,
            inv.turn_id,
            inv.call.call_id,
            inv.call.name,
            inv.started.recorded_at_ms,
            choices,
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
            not os.path.lexists(directory) and journaled_running(self.journal.records, inv) is None
        ):
            return MIND_STOPPED
        return supervision.unrecorded_reason(
            directory, proof_sha256=journaled_proof(self.journal.records, inv)
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
        return self._perform(inv, facts, inv.machine.reconcile(resolution), note)

    def _perform(
        self, inv: Invocation, facts: UnknownEffect, actions: list[EffectAction], note: str = ""
    ) -> jr.ToolResult | None:
        """Write what the chart's resolution actions name: ``effect_reconciled``
        (fsynced) for ``RecordResolution``, then for ``DeliverUnknown`` the
        result saying what is known (after ``note``); None when no result
        was written (``rerun``: the caller runs it)."""
        result: jr.ToolResult | None = None
        resolution: Resolution = "tell_model"
        for action in actions:
            if isinstance(action, RecordResolution):
                resolution = action.resolution
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
        killed: Callable[[], bool] = lambda: False,
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
        with ``lost`` and ``killed()`` (whether the person's ``kill`` stopped
        it): the facts of an ``unknown`` effect, or — the chart resolving a
        kill unasked — its journaled ``killed`` result.

        Raises:
            anyio.get_cancelled_exc_class(): the caller was cancelled (an
                interrupt): the command's whole tree was stopped first, as
                for a live command (:func:`mind.shell.supervision.collect`) —
                when ``stop()`` says so (an explicit Stop), never when mind
                is only leaving.
            JournalWriteError: the result could not be made durable.
        """
        directory = self.directory(inv)
        held = journaled_supervisor(self.journal.records, inv)
        holding = directory is not None and isinstance(
            directory_state(directory), supervision.Running
        )
        if held is not None and not holding:
            await outlive(*held, stop)  # no lock to wait on (gone, damaged): the process itself
        result = None
        if directory is not None:
            try:
                proof = journaled_proof(self.journal.records, inv)
                result = await supervision.collect(directory, proof_sha256=proof, stop=stop)
            except (SupervisorRecordError, PrivateStateError):
                result = None  # damaged: the outcome is unknown
        if result is None:
            found = self._recovered(inv, can_ask=can_ask, process="lost", killed=killed())
            assert isinstance(found, UnknownEffect | jr.ToolResult)
            return found
        return self.commit_collected(inv, result, note())

    def commit_collected(
        self, inv: Invocation, result: supervision.ProcessResult, note: str = ""
    ) -> jr.ToolResult:
        """Commit ``inv``'s supervisor exit record ``result`` as its result
        (evidence ``supervisor``, ``ok`` or ``error`` by its exit status,
        ``ran_ms`` its run time), its text after ``note``; redacted by
        :meth:`commit`.

        Raises:
            JournalWriteError: the result could not be made durable.
        """
        text = note + replace_lone_surrogates(result.text)  # redacted by commit
        return self.commit(
            inv,
            "ok" if result.ok else "error",
            text,
            "supervisor",
            ran_ms=result.ran_ms,
            output_bytes=result.output_bytes,
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
        return kill_effect(self.effects_dir, inv, self.journal.records)

    def commit(
        self,
        inv: Invocation,
        status: str,
        output: str,
        evidence: Evidence = "ran",
        *,
        ran_ms: int | None = None,
        output_bytes: int | None = None,
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
            output_bytes: bytes the tool wrote when ``output`` keeps only
                their head and tail (journaled as ``output_bytes``); None: whole.
        """
        if not inv.machine.prepared:
            inv.machine.deny()
            return self._result(inv, status, output, None, None)
        if evidence == "ran" and inv.machine.state == "executing" and self._unrecorded(inv):
            # Its supervisor ended without a record mind believes (killed, or
            # the record is not its own): what it did is unknown, not failed.
            (action,) = inv.machine.recover(can_ask=False, process="lost")
            assert isinstance(action, Resolve)
            facts = self._unknown(inv, action.choices)
            told = self.resolve(inv, facts, "tell_model")
            assert told is not None
            return told
        (commit,) = inv.machine.finish(status, evidence)
        assert isinstance(commit, Commit)
        record = self._result(
            inv, status, output, commit.outcome, commit.evidence, ran_ms, output_bytes
        )
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
        state = directory_state(directory)
        if isinstance(state, supervision.Finished):
            return not supervision.proven(directory, journaled_proof(self.journal.records, inv))
        return state is None or isinstance(state, supervision.Lost)

    def _result(
        self,
        inv: Invocation,
        status: str,
        output: str,
        outcome: Outcome | None,
        evidence: Evidence | None,
        ran_ms: int | None = None,
        output_bytes: int | None = None,
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
                output_bytes=msgspec.UNSET if output_bytes is None else output_bytes,
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
