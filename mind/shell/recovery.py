"""Closing what a crash or an interrupt left open in a journal.

Synthetic tool results for unanswered calls, the terminal records of
unterminated turns, and the input ids no turn may take again; and which
crashed turn is resumed instead of closed (:func:`resumable_turn`,
docs/design/recovery.md §8).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from mind.call_pairing import PairedCall, pair_calls
from mind.context.usage import counts, journal_usage
from mind.conversation import Usage
from mind.generated import journal as jr
from mind.history import records_starts
from mind.machines.turn_replay import ResumePlan, recovered_closing, resume_plan
from mind.shell.journal import Journal

INTERRUPTED_OUTPUT = (
    "[interrupted by the user: the call was stopped (a command it ran was killed with every "
    "process it started) and was not run again]"
)
INTERRUPTED_UNAPPROVED_OUTPUT = "[interrupted by the user before it was approved: it never ran]"
INTERRUPTED_AT_RERUN_OUTPUT = (
    "[interrupted by the user at the question whether to run it again without the sandbox: "
    "it ran once inside the sandbox (that run had ended; nothing was killed) and was not "
    "run again]"
)
INTERRUPTED_UNSTARTED_OUTPUT = "[interrupted by the user before it started: it never ran]"
ABORTED_OUTPUT = "[the turn was aborted while this call was pending; it was not run again]"
ABORTED_UNSTARTED_OUTPUT = "[the turn was aborted before this call started: it never ran]"
CRASHED_OUTPUT = (
    "[mind stopped while this call was pending: whether it ran to the end is unknown (it may "
    "have completed); it was not run again — check its effects before repeating it]"
)
CRASHED_UNSTARTED_OUTPUT = "[mind stopped before this call started: it never ran]"
"""Outputs of synthetic tool results (the model reads them; never a re-run).
The ``*_UNSTARTED`` / ``UNAPPROVED`` texts are used only when the journal
proves the call never started (:func:`mind.history.records_starts` and
:func:`mind.call_pairing.pair_calls`)."""


def close_open_calls(
    journal: Journal,
    turn_id: str,
    output: str | Callable[[str, bool], str],
    *,
    leave: Collection[tuple[str, int]] = (),
) -> list[jr.ToolResult]:
    """Give every unanswered tool call of ``turn_id`` a durable synthetic
    ``interrupted`` result (never re-running it).

    Which calls are answered is decided per turn and per occurrence
    (:func:`mind.call_pairing.pair_calls`): a server that reuses ``call_0``
    every turn, or one id twice in a round, still gets one result per call.
    The synthetic results are written in call order under the call's own id,
    so they pair with exactly the calls they close.

    Args:
        journal: the session's journal (appended to).
        turn_id: the turn whose calls are closed.
        output: the result text, or ``output(call_id, started)`` where
            ``started`` is False only when the journal proves the call never
            started (no ``tool_started`` pairs with it in a turn that records
            them: :func:`mind.history.records_starts`); called once per
            closed call, in call order.
        leave: ``(call_id, occurrence)`` of calls left unanswered (a resumed
            turn runs them, docs/design/recovery.md §8).

    Returns:
        The records written, in call order.
    """
    records = list(journal.records)
    starts = records_starts(records, turn_id)
    written: list[jr.ToolResult] = []
    for paired in pair_calls(records, turn_id):
        if paired.result is not None or (paired.call.call_id, paired.occurrence) in leave:
            continue
        call = paired.call
        result = journal.append(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                call_id=call.call_id,
                name=call.name,
                status=jr.ToolStatus.interrupted,
                output=(
                    output
                    if isinstance(output, str)
                    else output(call.call_id, paired.started or not starts)
                ),
                synthetic=True,
            )
        )
        assert isinstance(result, jr.ToolResult)
        written.append(result)
    return written


def settled_inputs(records: Iterable[jr.JournalRecord]) -> set[str]:
    """Input ids no turn may take again: acknowledged by a ``turn_completed``,
    or dropped (``input_dropped``). ``inbox.json`` is filtered by them on open."""
    settled: set[str] = set()
    for r in records:
        if isinstance(r, jr.TurnCompleted):
            settled.update(r.acknowledged)
        elif isinstance(r, jr.InputDropped):
            settled.add(r.message_id)
    return settled


def unterminated_turns(records: Iterable[jr.JournalRecord]) -> list[str]:
    """Ids of the turns with a ``turn_started`` and no terminal record, in order."""
    records = list(records)
    closed = {r.turn_id for r in records if isinstance(r, jr.TurnCompleted)}
    return [r.turn_id for r in records if isinstance(r, jr.TurnStarted) and r.turn_id not in closed]


def resumable_turn(
    records: Sequence[jr.JournalRecord],
    *,
    redrivable: Callable[[PairedCall], bool],
    can_ask: bool = False,
) -> ResumePlan | None:
    """The crashed turn a startup that can drive turns resumes instead of
    closing, if any: the guard :func:`mind.machines.turn_replay.resume_plan`
    on the last unterminated turn, a started call re-driven as the effect
    chart's rule says (``redrivable``: :func:`mind.shell.open_reconciliation.redrive_rule`;
    docs/design/recovery.md §8, effects.md §4); ``can_ask``: a person can
    answer the reconcile question of a started call."""
    open_turns = unterminated_turns(records)
    if not open_turns:
        return None
    return resume_plan(records, open_turns[-1], redrivable=redrivable, can_ask=can_ask)


def close_orphan_calls(journal: Journal, *, resume: ResumePlan | None = None) -> int:
    """Startup step ``close_orphan_calls`` (``session_startup.yaml``): a
    durable synthetic result for every unanswered call of every unterminated
    turn — :data:`CRASHED_OUTPUT`, or :data:`CRASHED_UNSTARTED_OUTPUT` when
    the journal proves it never started; never a re-run. Idempotent.

    Args:
        resume: the turn that is resumed (:func:`resumable_turn`): the calls
            it re-drives are left unanswered; only its started calls that
            are not read-only (``resume.unknown``) get a result here
            (docs/design/recovery.md §8).

    Returns:
        How many results were written.

    Raises:
        JournalWriteError: an append failed (a ``StorageError``: path, errno).
    """
    written = 0
    for turn_id in unterminated_turns(journal.records):
        leave: set[tuple[str, int]] = set()
        if resume is not None and resume.turn_id == turn_id:
            leave = {(p.call.call_id, p.occurrence) for p in resume.redrive}
        written += len(
            close_open_calls(
                journal,
                turn_id,
                lambda _, started: CRASHED_OUTPUT if started else CRASHED_UNSTARTED_OUTPUT,
                leave=leave,
            )
        )
    return written


@dataclass(frozen=True)
class ClosedTurns:
    """What :func:`close_unterminated_turns` wrote.

    Attributes:
        aborted: turns closed ``aborted`` (their inputs replay).
        completed: turns closed ``completed`` (their final answer was journaled).
        acknowledged: input ids the ``completed`` receipts acknowledged, in order.
    """

    aborted: int = 0
    completed: int = 0
    acknowledged: tuple[str, ...] = ()


def close_unterminated_turns(journal: Journal, *, resume: ResumePlan | None = None) -> ClosedTurns:
    """Startup step ``close_turns``: the terminal record of each turn that
    has none (docs/design/recovery.md §6), fsynced — except the turn
    ``resume`` names, which stays open: it goes on (§8).

    Run after :func:`close_orphan_calls`. The closing status and whether it
    acknowledges the turn's journaled inputs come from the turn chart: its
    records are replayed into a fresh machine and ``recover`` is sent
    (:func:`mind.machines.turn_replay.recovered_closing`) — ``completed``
    when it was draining (its final answer was journaled: asking the model
    again would answer twice; docs/design/recovery.md §6: a host-owned receipt), otherwise
    ``aborted`` with no acknowledgement: its inputs replay.

    Idempotent.

    Raises:
        JournalWriteError: an append failed (a ``StorageError``: path, errno).
    """
    aborted = completed = 0
    acknowledged: list[str] = []
    for turn_id in unterminated_turns(journal.records):
        if resume is not None and resume.turn_id == turn_id:
            continue
        rounds = [
            r for r in journal.records if isinstance(r, jr.ModelRound) and r.turn_id == turn_id
        ]
        closing = recovered_closing(journal.records, turn_id)
        usage = journal_usage(sum((counts(r.usage) for r in rounds), Usage()))
        acks = list(closing.acknowledged)
        journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                status=jr.TurnStatus(closing.status),
                usage=usage,
                acknowledged=acks,
            ),
            sync=True,
        )
        acknowledged.extend(acks)
        if closing.status == "completed":
            completed += 1
        else:
            aborted += 1
    return ClosedTurns(aborted, completed, tuple(acknowledged))


def recover_journal(journal: Journal) -> tuple[int, int, int]:
    """Close what a crash left open: :func:`close_orphan_calls`, then
    :func:`close_unterminated_turns` (the two startup steps, for callers
    that hold a journal alone). Idempotent.

    Returns:
        ``(aborted_turns, completed_turns, synthetic_results)``.
    """
    synthetic = close_orphan_calls(journal)
    closed = close_unterminated_turns(journal)
    return closed.aborted, closed.completed, synthetic
