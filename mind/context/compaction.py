"""What the model sees after a compaction, and where one may cut (docs/design/context.md §5).

Pure functions over journal records (no I/O, no clock). The journal keeps
every original record; a ``compaction_completed`` record is a tombstone view
over them:

- :func:`compacted_view`: after the newest ``compaction_completed``, the
  model sees its summary (behind :data:`SUMMARY_PREFIX`, added by the request
  builder), then the ``kept`` user messages, then every record with
  ``seq > through_seq``. A ``compaction_started`` without its end, or a
  ``compaction_failed``, changes nothing: the old context stands. The newest
  user message is always in the view (a compaction record that left it out
  cannot hide the person's latest words).
- :func:`clean_through`: the newest seq at which no tool call is unanswered
  (a call of an ended turn with no result counts as answered at the turn's
  end, as the model sees it), the only places a compaction may cut (a call
  is never split from its result).
- :func:`kept_user_messages`: the most recent user messages within a token
  budget (:data:`KEPT_USER_TOKENS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import msgspec

from mind.call_pairing import pair_calls
from mind.context.tool_output import bound_output, utf8_size
from mind.context.usage import estimate_tokens
from mind.generated import journal as jr

__all__ = [
    "KEPT_USER_TOKENS",
    "SUMMARY_PREFIX",
    "ContextView",
    "clean_through",
    "compacted_view",
    "kept_budget",
    "kept_user_messages",
    "newest_user_message",
    "record_bytes",
    "refused_turns",
    "too_big_to_keep",
    "turn_input_bytes",
]

SUMMARY_PREFIX: Final = (
    "[Summary of the earlier conversation: the messages before this point were "
    "compacted to save context. It was written by the model from those messages; "
    "the person's most recent messages follow, each whole or, when too long, as its "
    "start and its end with a note of what was cut.]\n\n"
)
"""The fixed text before a compaction's summary in every request (the model
must know it reads a summary, not the person)."""

KEPT_USER_TOKENS: Final = 20_000
"""Budget, in estimated tokens, of the most recent user messages a compaction
keeps verbatim. Codex keeps up to 20k tokens of them: the person's own words
are what a summary distorts most, and 20k fits every window mind plans for
(a smaller window gets a tenth of it: :func:`kept_budget`)."""


@dataclass(frozen=True, slots=True)
class ContextView:
    """The records the model sees, after the newest completed compaction.

    Attributes:
        summary: the summary text (without :data:`SUMMARY_PREFIX`), or None
            when no compaction completed.
        records: in order: the kept user messages (and the newest user
            message if it was not kept), then every record after
            ``through_seq``; ``input_dropped`` records of the whole journal
            are included (they hide a dropped input wherever it is).
        compaction: the ``compaction_completed`` record applied, or None.
    """

    summary: str | None
    records: list[jr.JournalRecord] = field(default_factory=list)
    compaction: jr.CompactionCompleted | None = None


def _visible_user(record: jr.JournalRecord, dropped: set[str]) -> bool:
    return (
        isinstance(record, jr.UserMessage)
        and bool(record.text.strip())
        and record.message_id not in dropped
    )


def newest_user_message(records: Sequence[jr.JournalRecord]) -> jr.UserMessage | None:
    """The newest ``user_message`` with non-blank text not taken back by an
    ``input_dropped``, or None."""
    dropped = {r.message_id for r in records if isinstance(r, jr.InputDropped)}
    for record in reversed(records):
        if isinstance(record, jr.UserMessage) and _visible_user(record, dropped):
            return record
    return None


def compacted_view(records: Sequence[jr.JournalRecord]) -> ContextView:
    """The records the model sees (see the module docstring).

    Args:
        records: journal records in ``seq`` order (not modified).

    Returns:
        :class:`ContextView`; without a ``compaction_completed``, its
        ``records`` are ``records`` themselves (as a new list) and ``summary`` None.
    """
    at = next(
        (
            i
            for i in range(len(records) - 1, -1, -1)
            if isinstance(records[i], jr.CompactionCompleted)
        ),
        None,
    )
    if at is None:
        return ContextView(summary=None, records=list(records))
    done = records[at]
    assert isinstance(done, jr.CompactionCompleted)
    kept = set(done.kept)
    newest = newest_user_message(records)
    if newest is not None and newest.seq <= done.through_seq:
        kept.add(newest.seq)  # the person's latest words are never summarised away
    head: list[jr.JournalRecord] = []
    tail: list[jr.JournalRecord] = []
    for record in records:
        if record.seq > done.through_seq:
            tail.append(record)
        elif isinstance(record, jr.InputDropped):
            head.append(record)
        elif isinstance(record, jr.UserMessage) and record.seq in kept:
            head.append(_bounded_kept(record, done.kept_max_bytes))
    return ContextView(summary=done.summary, records=head + tail, compaction=done)


def refused_turns(records: Sequence[jr.JournalRecord]) -> set[str]:
    """Ids of the turns that ended ``failed`` with kind ``context_length``
    (the model refused their request as over its window)."""
    return {
        r.turn_id
        for r in records
        if isinstance(r, jr.TurnCompleted)
        and r.status == jr.TurnStatus.failed
        and not isinstance(r.failure, msgspec.UnsetType)
        and r.failure.kind == jr.FailureKind.context_length
    }


def _bounded_kept(record: jr.UserMessage, max_bytes: int | msgspec.UnsetType) -> jr.UserMessage:
    """A kept user message as the model sees it: whole, or alone over the
    compaction's ``kept_max_bytes`` its head and tail with a note (§5)."""
    if isinstance(max_bytes, msgspec.UnsetType) or utf8_size(record.text) <= max_bytes:
        return record
    return msgspec.structs.replace(
        record, text=bound_output(record.text, max_bytes, what="message")
    )


def too_big_to_keep(record: jr.UserMessage, window: int | None) -> bool:
    """Whether a user message is over the kept messages' budget
    (:func:`kept_budget` of ``window``, estimated tokens): a compaction that
    keeps it shows it cut, so cutting there shrinks the context (§5)."""
    return estimate_tokens(utf8_size(record.text)) > kept_budget(window)


def clean_through(records: Sequence[jr.JournalRecord]) -> int | None:
    """The newest seq at which every tool call recorded so far has its result.

    A compaction that summarises the records up to this seq never separates a
    call (in its ``model_round``) from its ``tool_result``; the records after
    it pair among themselves exactly as in the whole journal. Pairing is
    :func:`mind.call_pairing.pair_calls` (per turn and per occurrence).

    A call of a turn that ended (its ``turn_completed`` is in ``records``)
    with no result is closed at that turn's end: no result can follow, and
    the model is shown it answered as interrupted
    (:func:`mind.history.build_messages`), so the summary may take it whole.
    A call of a turn still open stays open to the end (recovery answers it).

    Returns:
        The seq, or None when there is none (no records, or the first
        record already opens a call that is still unanswered).
    """
    if not records:
        return None
    # A sweep over positions: +1 where a call's round is, -1 where its result
    # (or, with none, its ended turn's end) is.
    position = {record.seq: i for i, record in enumerate(records)}
    ended = {r.turn_id: i for i, r in enumerate(records) if isinstance(r, jr.TurnCompleted)}
    delta = [0] * (len(records) + 1)
    for paired in pair_calls(records):
        delta[paired.round_at] += 1
        if paired.result is not None:
            delta[position[paired.result.seq]] -= 1
        elif ended.get(paired.turn_id, -1) > paired.round_at:
            delta[ended[paired.turn_id]] -= 1
    best = None
    open_calls = 0
    for i, record in enumerate(records):
        open_calls += delta[i]
        if open_calls == 0:
            best = record.seq
    return best


def kept_budget(window: int | None) -> int:
    """The kept user messages' budget in tokens: :data:`KEPT_USER_TOKENS`, or a
    tenth of a smaller window (its summary and tail must fit too)."""
    if window is None:
        return KEPT_USER_TOKENS
    return max(1, min(KEPT_USER_TOKENS, window // 10))


def kept_user_messages(
    records: Sequence[jr.JournalRecord], through_seq: int, budget_tokens: int
) -> list[int]:
    """Seqs of the user messages a compaction through ``through_seq`` keeps, oldest first.

    Rule: among the user messages the model sees now
    (:func:`compacted_view`) at or before ``through_seq``, the most recent
    ones whose estimated tokens (:func:`mind.context.usage.estimate_tokens`
    of their UTF-8 text) fit ``budget_tokens`` together; the newest one is
    always kept, even alone over the budget (the person's latest words;
    the view then shows its head and tail, ``kept_max_bytes``).
    """
    view = compacted_view(records)
    dropped = {r.message_id for r in records if isinstance(r, jr.InputDropped)}
    candidates = [
        r
        for r in view.records
        if isinstance(r, jr.UserMessage) and r.seq <= through_seq and _visible_user(r, dropped)
    ]
    kept: list[int] = []
    used = 0
    for record in reversed(candidates):
        cost = estimate_tokens(len(record.text.encode("utf-8", "replace")))
        if kept and used + cost > budget_tokens:
            break
        kept.append(record.seq)
        used += cost
    return sorted(kept)


def turn_input_bytes(records: Sequence[jr.JournalRecord], turn_id: str) -> int:
    """UTF-8 bytes of the user messages of turn ``turn_id`` that the model
    sees (its claimed inputs and steering, not taken back by an
    ``input_dropped``): the least of the turn that every request of it
    carries whatever is compacted (the newest is never summarised away)."""
    dropped = {r.message_id for r in records if isinstance(r, jr.InputDropped)}
    return sum(
        utf8_size(r.text)
        for r in records
        if isinstance(r, jr.UserMessage) and r.turn_id == turn_id and _visible_user(r, dropped)
    )


def record_bytes(record: jr.JournalRecord) -> int:
    """UTF-8 bytes a record adds to the model's context (text the request
    carries: user text, round text and tool arguments, tool output; 0 for
    records that produce no message)."""
    if isinstance(record, jr.UserMessage):
        return len(record.text.encode("utf-8", "replace"))
    if isinstance(record, jr.ModelRound):
        parts = [record.text, *(c.arguments for c in record.tool_calls)]
        return sum(len(p.encode("utf-8", "replace")) for p in parts)
    if isinstance(record, jr.ToolResult):
        return len(record.output.encode("utf-8", "replace"))
    return 0
