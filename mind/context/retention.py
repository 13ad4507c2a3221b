"""Which journal records a running session keeps in memory (docs/design/checkpoints.md §1).

The journal keeps every record; the runtime needs only those that still
decide something: what the model sees after the newest compaction, and what
the open path and a turn consult (grants, settled inputs, an unterminated
turn, its unanswered questions and effects). Everything a compaction
superseded stays on disk only, so memory on resume follows the model context,
not the journal's age.

The rule — with ``C`` the newest ``compaction_completed`` (``T`` its
``through_seq``, ``K`` its ``kept``; no compaction: ``T = -1``), ``O`` the
turns with a ``turn_started`` and no ``turn_completed`` — a record is kept when

1. its ``seq > T`` (what the model sees after ``C``, ``C`` itself included);
2. it is ``session_started``, ``permission_granted`` or
   ``permission_revoked`` (grants are a fold over all of them);
3. it is a ``user_message`` whose seq is in ``K``;
4. it names a turn in ``O`` (``turn_id``), or it is the
   ``interaction_resolved`` of a question asked in such a turn: recovery
   replays an unterminated turn whole, even one a compaction cut through.

Nothing else at or before ``T`` is kept, not even the newest ``model_round``
for its usage: ``C`` is newer than any such round, and the context usage
reads back only to the newer of the two (:func:`mind.context.usage.context_usage`).
Keeping a round without the results that answered it would show a call as
unanswered where the journal answers it, and no cut could pass it again
(:func:`mind.context.compaction.clean_through`): what is retained pairs
exactly as the whole journal does.

A ``turn_completed`` or ``input_dropped`` the rule drops leaves its facts
behind as derived state (:class:`Folded`): the input ids it settled (no turn
may take them again, and sending one again stays an idempotent success) and
the count of turns it closed — a few bytes a turn instead of a record a turn,
so what an open reads does not grow with the journal's age.

A later compaction never reaches back past an earlier one: its ``through_seq``
is not smaller and its ``kept`` are the earlier ``kept`` or records after the
earlier ``through_seq`` (what the model saw). Under that invariant the rule
composes: ``retained(retained(prefix) + tail) == retained(prefix + tail)``
(and the folded state continues alike), which is what lets a checkpoint hold
``retained(prefix)`` with its :class:`Folded` and a startup read only the tail.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from mind.generated import journal as jr

__all__ = ["CHECKPOINT_TAIL_BYTES", "Folded", "Retention", "checkpoint_due", "retained"]

CHECKPOINT_TAIL_BYTES: Final = 4 * 1024 * 1024
"""A turn end writes a checkpoint once the journal grew by this many bytes
since the newest checkpoint (or since the start, with none)."""

# The learned window is read from its newest record at open (context.md §1); few exist.
_ALWAYS: Final = (
    jr.SessionStarted,
    jr.PermissionGranted,
    jr.PermissionRevoked,
    jr.ContextWindowLearned,
)


@dataclass(frozen=True)
class Folded:
    """What the records :class:`Retention` dropped still say.

    Attributes:
        settled: input ids acknowledged by a dropped ``turn_completed`` or
            dropped by a dropped ``input_dropped``.
        closed_turns: how many turns a dropped ``turn_completed`` closed.
    """

    settled: frozenset[str] = frozenset()
    closed_turns: int = 0


class Retention:
    """The rule above, folded one record at a time (journal order).

    Holds a superset of what the rule keeps at every point and prunes
    whenever a ``compaction_completed`` arrives, so a stream through a long
    journal never holds more than one compaction's worth of records plus
    the always-kept ones (rule 2, held apart: they are never pruned, so a
    prune costs the model context, not the journal's age). :meth:`records`
    gives exactly the rule's result.
    """

    def __init__(self, folded: Folded | None = None) -> None:
        """Start empty, or after a prefix whose dropped records left ``folded``."""
        folded = folded or Folded()
        self._settled: set[str] = set(folded.settled)
        self._closed = folded.closed_turns
        self._always: list[jr.JournalRecord] = []
        self._held: list[jr.JournalRecord] = []
        self._compaction: jr.CompactionCompleted | None = None
        self._kept: frozenset[int] = frozenset()
        self._open: set[str] = set()
        self._asked: dict[str, str] = {}  # interaction id -> its open turn

    @property
    def compacted(self) -> bool:
        """Whether a ``compaction_completed`` was folded."""
        return self._compaction is not None

    def add(self, record: jr.JournalRecord) -> None:
        """Fold ``record`` (the next in journal order)."""
        if isinstance(record, _ALWAYS):
            self._always.append(record)
            return
        self._held.append(record)
        if isinstance(record, jr.TurnCompleted):
            self._open.discard(record.turn_id)
            if self._asked:
                self._asked = {i: t for i, t in self._asked.items() if t != record.turn_id}
        elif isinstance(record, jr.TurnStarted):
            self._open.add(record.turn_id)
        elif isinstance(record, jr.InteractionRequested) and record.turn_id in self._open:
            self._asked[record.interaction_id] = record.turn_id
        elif isinstance(record, jr.CompactionCompleted):
            self._compaction = record
            self._kept = frozenset(record.kept)
            self._prune()

    def extend(self, records: Iterable[jr.JournalRecord]) -> None:
        """:meth:`add` each of ``records`` in order."""
        for record in records:
            self.add(record)

    def records(self) -> list[jr.JournalRecord]:
        """The kept records in journal order (a new list)."""
        self._prune()
        if not self._held:
            return list(self._always)
        # Two runs already in seq order: the sort merges them in one pass.
        return sorted(self._always + self._held, key=_seq)

    @property
    def folded(self) -> Folded:
        """What the records dropped so far still say (after pruning)."""
        self._prune()
        return Folded(frozenset(self._settled), self._closed)

    def _prune(self) -> None:
        through = -1 if self._compaction is None else self._compaction.through_seq
        kept: list[jr.JournalRecord] = []
        for r in self._held:
            if r.seq > through or self._keeps(r):
                kept.append(r)
            elif isinstance(r, jr.TurnCompleted):
                self._settled.update(r.acknowledged)
                self._closed += 1
            elif isinstance(r, jr.InputDropped):
                self._settled.add(r.message_id)
        self._held[:] = kept

    def _keeps(self, record: jr.JournalRecord) -> bool:
        """Rules 3 and 4 for a record at or before the newest ``through_seq``."""
        if isinstance(record, jr.UserMessage) and record.seq in self._kept:
            return True
        if isinstance(record, jr.InteractionResolved):
            return record.interaction_id in self._asked
        turn_id = getattr(record, "turn_id", None)
        return isinstance(turn_id, str) and turn_id in self._open


def _seq(record: jr.JournalRecord) -> int:
    return record.seq


def retained(records: Iterable[jr.JournalRecord]) -> list[jr.JournalRecord]:
    """The records of ``records`` (one journal, in order) the rule keeps, in order."""
    retention = Retention()
    retention.extend(records)
    return retention.records()


def checkpoint_due(record: jr.JournalRecord, grown_bytes: int) -> bool:
    """Whether appending ``record`` is a point to write a checkpoint
    (docs/design/checkpoints.md §3): after every ``compaction_completed``
    (what the runtime holds just shrank), and at a ``turn_completed`` once
    the journal grew by :data:`CHECKPOINT_TAIL_BYTES` (``grown_bytes``)
    since the newest checkpoint."""
    if isinstance(record, jr.CompactionCompleted):
        return True
    return isinstance(record, jr.TurnCompleted) and grown_bytes >= CHECKPOINT_TAIL_BYTES
