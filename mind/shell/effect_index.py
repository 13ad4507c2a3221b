"""What one turn's journal records say of its tool calls' effects, kept up to
date as records are appended (docs/design/effects.md §3, §4).

:meth:`mind.shell.effects.SessionEffects.propose` names each call of a turn
and looks for what the journal already holds of it (the occurrence, the
``tool_started`` that prepared it, an ``effect_running``). Scanning the turn
for every call made a round of *n* calls cost O(n²) record reads; this index
reads each record of the turn once, when the next call is proposed after it
was appended (the same rule as :mod:`mind.call_pairing`, which it follows).
"""

from __future__ import annotations

from collections.abc import Sequence

from mind.call_pairing import CallPairing
from mind.generated import journal as jr

__all__ = ["TurnEffectIndex"]


class TurnEffectIndex:
    """The effect records of turn ``turn_id``, from its ``turn_started`` on.

    Args:
        records: the session's journal records (``Journal.records``: the
            list grows as records are appended).
        turn_id: the turn.

    Attributes:
        turn_id: the turn.
        pairing: its calls paired with their starts and results
            (:class:`~mind.call_pairing.CallPairing`).
        started: the first ``tool_started`` naming each effect id.
        legacy_started: per call id, the last ``tool_started`` that names no
            effect (written by a mind older than effects).
        running: effect ids an ``effect_running`` record names.
    """

    def __init__(self, records: Sequence[jr.JournalRecord], turn_id: str) -> None:
        self.turn_id = turn_id
        self.pairing = CallPairing(turn_id, _turn_start(records, turn_id))
        self.started: dict[str, jr.ToolStarted] = {}
        self.legacy_started: dict[str, jr.ToolStarted] = {}
        self.running: set[str] = set()
        self.follow(records)

    def follow(self, records: Sequence[jr.JournalRecord]) -> None:
        """Read the records appended since the last call (O(new records))."""
        for at in range(self.pairing.read, len(records)):
            record = records[at]
            self.pairing.feed(record)
            if getattr(record, "turn_id", None) != self.turn_id:
                continue
            if isinstance(record, jr.ToolStarted):
                if record.effect_id:
                    self.started.setdefault(record.effect_id, record)
                else:
                    self.legacy_started[record.call_id] = record
            elif isinstance(record, jr.EffectRunning):
                self.running.add(record.effect_id)

    def stale(self, records: Sequence[jr.JournalRecord]) -> bool:
        """Whether ``records`` is no longer the list this index read (it is
        shorter than what was read: the journal was replaced)."""
        return len(records) < self.pairing.read


def _turn_start(records: Sequence[jr.JournalRecord], turn_id: str) -> int:
    """The position of ``turn_id``'s last ``turn_started`` (found from the
    end: a live turn is the last one), or 0 when there is none."""
    for at in range(len(records) - 1, -1, -1):
        record = records[at]
        if isinstance(record, jr.TurnStarted) and record.turn_id == turn_id:
            return at
    return 0
