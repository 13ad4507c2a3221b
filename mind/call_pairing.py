"""Which journal records belong to which tool call (docs/design/recovery.md §5).

Servers reuse call ids — ``call_0`` in every turn, and some repeat an id
within one round — so an id alone names no call. The rule: within one turn,
the k-th call with a given id (in round order, then call order) is answered
by the k-th ``tool_result`` of that turn with that id, recorded after it.
The runtime runs a round's calls one by one in call order and writes each
call's ``tool_started`` and ``tool_result`` before the next call starts, so
a ``tool_started`` belongs to the earliest call with its id that has neither
a start nor a result yet. Records of another turn never pair. Pure: no I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from mind.generated import journal as jr

__all__ = ["PairedCall", "pair_calls"]


@dataclass(slots=True)
class PairedCall:
    """One recorded tool call and the records of it found in the journal.

    Attributes:
        turn_id: the turn whose ``model_round`` holds the call.
        round_at: the position of that ``model_round`` in the records given.
        index: the call's 0-based position among the round's calls.
        occurrence: how many earlier calls of the same turn have the same
            ``call_id`` (0 for the first): with ``turn_id`` and ``call_id``
            it names the call for good (``mind.effects.identity``).
        call: the recorded call, unchanged (its original ``call_id``).
        started: a ``tool_started`` record pairs with it.
        result: the ``tool_result`` that answers it, or None.
    """

    turn_id: str
    round_at: int
    index: int
    occurrence: int
    call: jr.RecordedToolCall
    started: bool = False
    result: jr.ToolResult | None = None


def pair_calls(records: Sequence[jr.JournalRecord], turn_id: str | None = None) -> list[PairedCall]:
    """Pair every tool call with its ``tool_started`` and ``tool_result`` (module rule).

    Args:
        records: journal records in ``seq`` order.
        turn_id: only this turn's calls; None: every turn's.

    Returns:
        The calls in journal and call order. A second result for an answered
        call, or a result or start with no earlier unanswered call of its
        turn and id, pairs with nothing.
    """
    calls: list[PairedCall] = []
    open_calls: dict[tuple[str, str], deque[PairedCall]] = {}
    seen: dict[tuple[str, str], int] = {}
    for at, record in enumerate(records):
        if turn_id is not None and getattr(record, "turn_id", None) != turn_id:
            continue
        if isinstance(record, jr.ModelRound):
            for index, call in enumerate(record.tool_calls):
                key = (record.turn_id, call.call_id)
                paired = PairedCall(record.turn_id, at, index, seen.get(key, 0), call)
                seen[key] = paired.occurrence + 1
                calls.append(paired)
                open_calls.setdefault(key, deque()).append(paired)
        elif isinstance(record, jr.ToolResult):
            waiting = open_calls.get((record.turn_id, record.call_id))
            if waiting:
                waiting.popleft().result = record
        elif isinstance(record, jr.ToolStarted):
            waiting = open_calls.get((record.turn_id, record.call_id))
            for paired in waiting or ():
                if not paired.started:
                    paired.started = True
                    break
    return calls
