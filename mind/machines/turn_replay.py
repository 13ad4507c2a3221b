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
none is acknowledged. Pure: reads records, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, NamedTuple

from mind.errors import IllegalTransition
from mind.generated import journal as jr
from mind.machines.turn import TurnMachine

__all__ = ["RecoveredClosing", "recovered_closing", "replayed_turn"]


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


def replayed_turn(records: Iterable[jr.JournalRecord], turn_id: str) -> TurnMachine:
    """A fresh turn machine driven through ``turn_id``'s records (table above).

    Returns:
        The machine in the state the turn had reached when it stopped; or
        ``aborted`` when the chart refused a step of the replay.
    """
    machine = TurnMachine(retry=_NO_RETRY, max_rounds=_REPLAY_MAX_ROUNDS)
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
        machine.fail_safe()  # nothing acknowledged, the inputs replay
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
