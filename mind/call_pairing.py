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

__all__ = ["CallPairing", "PairedCall", "pair_calls"]


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
    pairing = CallPairing(turn_id)
    pairing.follow(records)
    return pairing.calls


class CallPairing:
    """:func:`pair_calls` kept up to date as records are appended: each
    :meth:`follow` reads only the records added since the last one, so a
    turn's calls cost O(its records) in all, not per look-up.

    Args:
        turn_id: only this turn's calls; None: every turn's.
        start: the position in the record list to read from (records before
            it are not this pairing's: e.g. a turn's ``turn_started``);
            ``round_at`` counts from it.

    Attributes:
        calls: the calls paired so far, in journal and call order (each
            :class:`PairedCall` is updated in place as its start and result
            are read).
        read: the position up to which records were read.
    """

    def __init__(self, turn_id: str | None = None, start: int = 0) -> None:
        self.turn_id = turn_id
        self.calls: list[PairedCall] = []
        self.read = start
        self._start = start
        self._open: dict[tuple[str, str], deque[PairedCall]] = {}
        self._seen: dict[tuple[str, str], int] = {}

    def follow(self, records: Sequence[jr.JournalRecord]) -> None:
        """Read the records appended to ``records`` since the last call (the
        same growing list, in ``seq`` order)."""
        for at in range(self.read, len(records)):
            self.feed(records[at])
        self.read = max(self.read, len(records))

    def unanswered(self, turn_id: str, call_id: str) -> PairedCall | None:
        """The earliest call of ``turn_id`` with ``call_id`` and no result yet."""
        waiting = self._open.get((turn_id, call_id))
        return waiting[0] if waiting else None

    def feed(self, record: jr.JournalRecord) -> None:
        """Pair one record, the next of the list (:meth:`follow` calls it)."""
        at = self.read - self._start
        self.read += 1
        if self.turn_id is not None and getattr(record, "turn_id", None) != self.turn_id:
            return
        if isinstance(record, jr.ModelRound):
            for index, call in enumerate(record.tool_calls):
                key = (record.turn_id, call.call_id)
                paired = PairedCall(record.turn_id, at, index, self._seen.get(key, 0), call)
                self._seen[key] = paired.occurrence + 1
                self.calls.append(paired)
                self._open.setdefault(key, deque()).append(paired)
        elif isinstance(record, jr.ToolResult):
            waiting = self._open.get((record.turn_id, record.call_id))
            if waiting:
                waiting.popleft().result = record
        elif isinstance(record, jr.ToolStarted):
            waiting = self._open.get((record.turn_id, record.call_id))
            for paired in waiting or ():
                if not paired.started:
                    paired.started = True
                    break
