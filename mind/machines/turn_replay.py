"""Closing a crashed turn through the turn chart (docs/design/recovery.md; the
``turn.yaml`` recovery block).

:func:`replayed_turn` feeds a turn's durable records into a fresh
:class:`~mind.machines.turn.TurnMachine` — the events the driver sent when
it wrote them — and :func:`recovered_closing` sends ``recover``, so the
status a crashed turn is closed with, and whether that acknowledges its
inputs, come from the chart, not from the shell:

==========================  ==============================================
record (this turn)          event(s)
==========================  ==============================================
``turn_started``            ``start``
``model_round`` with calls  ``stream_opened``, ``round_tools``
``model_round``, no calls,  ``stream_opened``, ``round_final`` (the answer
text                        was given)
``model_round``, no calls,  ``stream_opened``; ``round_final`` once a later
no text                     record of the turn shows the driver went on
                            (last: nothing was answered)
``tool_result`` (the last   ``tools_done``
of its round's calls,
counted per occurrence)
``user_message`` while      ``steering_claimed`` with its id (claimed at
draining                    drain-or-seal)
``user_message``, any       ``inputs_claimed`` with its id (the turn's first
other state                 inputs, or steering drained after the tool
                            results; the chart takes it only while
                            ``requesting``)
==========================  ==============================================

The ids join the machine's input list exactly as the live driver's events
did, so the receipt acknowledges what the live terminal would have: one rule,
owned by the turn machine (``WriteTerminal.acknowledged``).

Fails safe: a record sequence the chart refuses (a damaged or foreign
journal) stops the replay and the turn is ``abort``-ed — its inputs replay,
none is acknowledged.

:func:`resume_plan` is the guard that decides, before any of that, whether a
crashed turn is *resumed* instead of closed (docs/design/recovery.md §8): its
replay stops inside a tool round and some unanswered call of that round may
be driven (it never started, or the effect chart's rule re-drives it). Pure:
reads records (and the facts its caller passes), no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from mind.call_pairing import PairedCall, pair_calls
from mind.errors import IllegalTransition
from mind.generated import journal as jr
from mind.machines.turn import RetryRule, TurnMachine

__all__ = [
    "RecoveredClosing",
    "ResumePlan",
    "recovered_closing",
    "replayed_turn",
    "resume_plan",
]


class _NoRetry:
    """The retry rule of a replay: nothing is retried (a replay only follows
    what the records say happened)."""

    def should_retry(self, attempt: int, kind: object) -> bool:
        return False

    def within_time(self, elapsed_s: float, delay_s: float) -> bool:
        return False

    def delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        return 0.0


_NO_RETRY: Final = _NoRetry()
_REPLAY_MAX_ROUNDS: Final = 1 << 30
"""A replay follows the rounds the turn really had: the round limit was
applied when they ran, so it never refuses one here."""


class RecoveredClosing(NamedTuple):
    """How startup closes one crashed turn (decided by ``turn.yaml``).

    Attributes:
        status: ``"completed"`` or ``"aborted"``.
        acknowledges: whether the receipt acknowledges the turn's inputs
            (:func:`mind.machines.turn.acknowledges` of that status).
        acknowledged: the ids it acknowledges, in claim order (the turn's
            ``user_message`` ids when ``acknowledges``, else none).
    """

    status: str
    acknowledges: bool
    acknowledged: tuple[str, ...] = ()


def replayed_turn(
    records: Iterable[jr.JournalRecord],
    turn_id: str,
    *,
    retry: RetryRule = _NO_RETRY,
    max_rounds: int = _REPLAY_MAX_ROUNDS,
) -> TurnMachine:
    """A fresh turn machine driven through ``turn_id``'s records (table above).

    Args:
        retry: the machine's retry rule (a resumed turn gets the session's;
            closing needs none).
        max_rounds: its round limit (a resumed turn gets the session's).

    Returns:
        The machine in the state the turn had reached when it stopped; or
        ``aborted`` when the chart refused a step of the replay.
    """
    machine = TurnMachine(retry=retry, max_rounds=max_rounds)
    # The round's unanswered call ids, one entry per call: an id may repeat
    # (per occurrence, docs/design/recovery.md §5).
    pending: list[str] = []
    empty_round = False  # an empty answer: final only if the turn went on after it
    try:
        for record in records:
            if getattr(record, "turn_id", None) != turn_id:
                continue
            if empty_round and isinstance(record, jr.ModelRound | jr.UserMessage):
                machine.round_done(tool_calls=0, output_bytes=0, output_limit=1)
                empty_round = False
            if isinstance(record, jr.TurnStarted):
                machine.start()
            elif isinstance(record, jr.ModelRound):
                machine.stream_opened()
                if record.tool_calls:
                    machine.round_done(
                        tool_calls=len(record.tool_calls), output_bytes=0, output_limit=1
                    )
                    pending = [c.call_id for c in record.tool_calls]
                elif record.text.strip():
                    machine.round_done(tool_calls=0, output_bytes=0, output_limit=1)
                else:
                    empty_round = True
            elif isinstance(record, jr.ToolResult) and record.call_id in pending:
                pending.remove(record.call_id)
                if not pending:
                    machine.tools_done()
            elif isinstance(record, jr.UserMessage):
                if "draining" in machine.configuration:
                    machine.steering_claimed([record.message_id])
                else:
                    machine.inputs_claimed([record.message_id])
    except IllegalTransition:
        machine.fail_safe()  # a terminal (the round limit) is kept; else nothing acknowledged
    return machine


def recovered_closing(records: Iterable[jr.JournalRecord], turn_id: str) -> RecoveredClosing:
    """Replay ``turn_id`` (:func:`replayed_turn`) and send ``recover``.

    The rule is the chart's: a turn that was draining — its final answer
    journaled — closes ``completed`` and acknowledges its inputs; one in any
    other state closes ``aborted`` and acknowledges nothing (its inputs
    replay with the next turn).
    """
    machine = replayed_turn(records, turn_id)
    if not machine.is_terminal:
        machine.recover()
    terminal = machine.terminal
    assert terminal is not None
    return RecoveredClosing(terminal.status, terminal.acknowledge, terminal.acknowledged)


@dataclass(frozen=True, slots=True)
class ResumePlan:
    """A crashed turn that is resumed rather than closed (docs/design/recovery.md §8).

    Attributes:
        turn_id: the turn.
        redrive: the round's unanswered calls the resumed turn drives, in
            call order: those that never started, and started ones the effect
            chart re-drives (rerun-safe, or their supervisor's evidence remains).
        unknown: the round's other unanswered calls that started: never run
            again; startup gives each the synthetic "outcome unknown" result
            (docs/design/recovery.md §5).
        inputs: the message ids the turn journaled (its claimed inputs,
            steering included), in order: the resumed turn claims them again.
        asked: of ``redrive``, the started calls the effect chart would not
            re-drive (their outcome is unknown) that are driven only to ask
            the person (``can_ask``): a ``reconcile`` question comes first.
    """

    turn_id: str
    redrive: tuple[PairedCall, ...]
    unknown: tuple[PairedCall, ...]
    inputs: tuple[str, ...]
    asked: tuple[PairedCall, ...] = ()


_BESIDE_THE_TURN = (
    jr.CompactionStarted,
    jr.CompactionCompleted,
    jr.CompactionFailed,
    jr.ContextWindowLearned,
)
"""Records a turn may carry that are not steps of its lifecycle: a crash
mid-compaction leaves the turn where its last step left it (recovery.md §8)."""


def resume_plan(
    records: Sequence[jr.JournalRecord],
    turn_id: str,
    *,
    redrivable: Callable[[PairedCall], bool],
    can_ask: bool = False,
) -> ResumePlan | None:
    """The guard: is crashed turn ``turn_id`` resumed, and how (docs/design/recovery.md §8)?

    The rule: the turn is the session's last (no ``turn_started`` after
    its own: one turn at a time owns the mailbox), has no terminal record, its replay
    (:func:`replayed_turn`) stops in ``running_tools`` — its last
    ``model_round`` has calls, some of them without a ``tool_result``
    (paired per occurrence, :func:`mind.call_pairing.pair_calls`) — and at
    least one of those may be driven now: it never started (no
    ``tool_started`` in a turn that records starts), or ``redrivable`` says
    the effect chart's ``recover`` takes it to ``executing`` (its
    supervisor's evidence is collected, or running it again is safe). Any
    other started call is never re-run (its outcome is unknown); when every
    unanswered call is such a one, the turn is closed as before (None). A
    turn whose last record is a ``tool_result`` (its round fully answered,
    no request sent with the results yet) is resumed at the round boundary:
    a plan with nothing to re-drive (recovery.md §8). Where a person can answer
    (``can_ask``), a started call is re-driven too — to be reconciled by the
    person's answer to a ``reconcile`` question before anything runs again
    (docs/design/effects.md §4): the plan's ``asked``. A call only an old journal's missing start
    record leaves in doubt is never re-driven: nothing marks it prepared.

    Args:
        records: the session's journal records in ``seq`` order.
        turn_id: the crashed turn.
        redrivable: for a call that started (or may have: no starts
            recorded), the effect chart's rule
            (:func:`mind.machines.effect.redrivable` of its tool's effect
            class and what its supervisor's directory says); a call it cannot
            judge must answer False.
        can_ask: a person can answer the ``reconcile`` question (the REPL).

    Returns:
        The plan, or None: the turn is closed (docs/design/recovery.md §6).
    """
    mine = [
        r
        for r in records
        if getattr(r, "turn_id", None) == turn_id and not isinstance(r, _BESIDE_THE_TURN)
    ]
    if any(isinstance(r, jr.TurnCompleted) for r in mine) or not _is_last_turn(records, turn_id):
        return None
    configuration = replayed_turn(mine, turn_id).configuration
    rounds = [at for at, r in enumerate(mine) if isinstance(r, jr.ModelRound)]
    inputs = dict.fromkeys(r.message_id for r in mine if isinstance(r, jr.UserMessage))
    if "requesting" in configuration and rounds and isinstance(mine[-1], jr.ToolResult):
        # Every call of the last round is answered (before the crash, or by
        # this startup's reconciliation) and no request carried the results
        # yet: the turn goes on with its next model round (recovery.md §8).
        return ResumePlan(turn_id, (), (), tuple(inputs))
    if "running_tools" not in configuration:
        return None
    # Without recorded starts, absence of a start proves nothing: "may have run".
    starts = any(isinstance(r, jr.TurnStarted) and r.tool_starts is True for r in mine)
    open_calls = [p for p in pair_calls(mine, turn_id) if p.round_at == rounds[-1] and not p.result]
    # A started call is driven again only as the effect chart's rule allows,
    # or to be asked about where a person can answer.
    driven = [not (p.started or not starts) or redrivable(p) for p in open_calls]
    to_ask = [not ok and can_ask and p.started for p, ok in zip(open_calls, driven, strict=True)]
    runnable = [ok or ask for ok, ask in zip(driven, to_ask, strict=True)]
    redrive = tuple(p for p, ok in zip(open_calls, runnable, strict=True) if ok)
    if not redrive:
        return None
    unknown = tuple(p for p, ok in zip(open_calls, runnable, strict=True) if not ok)
    asked = tuple(p for p, ask in zip(open_calls, to_ask, strict=True) if ask)
    return ResumePlan(turn_id, redrive, unknown, tuple(inputs), asked)


def _is_last_turn(records: Sequence[jr.JournalRecord], turn_id: str) -> bool:
    """Whether ``turn_id``'s is the last ``turn_started`` of ``records``."""
    last = next((r for r in reversed(records) if isinstance(r, jr.TurnStarted)), None)
    return last is not None and last.turn_id == turn_id
