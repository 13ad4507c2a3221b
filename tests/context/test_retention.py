"""The retained-records rule (mind/context/retention.py; docs/design/checkpoints.md §1)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from mind.context.compaction import compacted_view
from mind.context.retention import Retention, retained
from mind.generated import journal as jr
from mind.history import build_messages
from mind.machines.turn_replay import recovered_closing
from mind.shell.compaction import _cut
from mind.shell.interactions import InteractionLog
from mind.shell.recovery import settled_inputs, unterminated_turns
from tests.support.journals import generated_session


def _session(seed: int, turns: int = 12) -> list[jr.JournalRecord]:
    return generated_session(random.Random(seed), "s1", turns=turns)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), turns=st.integers(1, 14), cut=st.floats(0, 1))
def test_retaining_a_prefix_first_changes_nothing(seed: int, turns: int, cut: float) -> None:
    """A checkpoint holds retained(prefix); startup adds the tail: the same
    records as retaining the whole journal."""
    records = _session(seed, turns)
    at = max(1, int(len(records) * cut))
    prefix, tail = records[:at], records[at:]
    first = Retention()
    first.extend(prefix)
    resumed = Retention(first.folded)  # what a checkpoint of the prefix holds
    resumed.extend(first.records() + tail)
    whole = Retention()
    whole.extend(records)
    assert resumed.records() == whole.records() == retained(records)
    assert resumed.folded == whole.folded


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), turns=st.integers(1, 14))
def test_what_the_open_path_derives_is_the_same_from_the_retained_records(
    seed: int, turns: int
) -> None:
    records = _session(seed, turns)
    retention = Retention()
    retention.extend(records)
    kept, folded = retention.records(), retention.folded
    assert settled_inputs(kept) | folded.settled == settled_inputs(records)
    closed = {r.turn_id for r in kept if isinstance(r, jr.TurnStarted | jr.TurnCompleted)}
    assert len(closed) + folded.closed_turns == sum(isinstance(r, jr.TurnStarted) for r in records)
    assert unterminated_turns(kept) == unterminated_turns(records)
    whole, part = InteractionLog.of(records), InteractionLog.of(kept)
    assert part.grants == whole.grants
    assert part.recoverable() == whole.recoverable()
    for turn_id in unterminated_turns(records):
        assert recovered_closing(kept, turn_id) == recovered_closing(records, turn_id)
        assert [r for r in kept if getattr(r, "turn_id", None) == turn_id] == [
            r for r in records if getattr(r, "turn_id", None) == turn_id
        ]


def test_a_compaction_drops_what_it_superseded_and_keeps_what_the_model_sees() -> None:
    records = _session(7, turns=30)
    compactions = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert compactions, "the generated session compacts"
    newest = compactions[-1]
    kept = retained(records)
    seqs = {r.seq for r in kept}
    # What the model sees after the newest compaction is all there.
    assert newest in kept
    assert {r.seq for r in records if r.seq > newest.through_seq} <= seqs
    assert set(newest.kept) <= seqs
    # Superseded rounds and results are not (not even the newest round).
    open_turns = set(unterminated_turns(records))
    superseded = [
        r
        for r in records
        if r.seq <= newest.through_seq
        and isinstance(r, jr.ToolResult | jr.ModelRound | jr.TurnStarted)
        and r.turn_id not in open_turns
    ]
    assert superseded and not {r.seq for r in superseded} & seqs
    assert len(kept) < len(records) // 2


def test_without_a_compaction_everything_is_retained() -> None:
    records = [r for r in _session(3) if not isinstance(r, jr.CompactionCompleted)]
    assert retained(records) == records
    assert build_messages(retained(records)) == build_messages(records)


def test_a_learned_window_outlives_the_compaction_that_superseded_its_turn() -> None:
    """The learned window (docs/design/context.md §1) is read from the newest
    ``context_window_learned`` at open: a compaction must not drop it."""
    records = _session(7, turns=30)
    newest = [r for r in records if isinstance(r, jr.CompactionCompleted)][-1]
    first_turn = next(r for r in records if isinstance(r, jr.TurnStarted))
    learned = jr.ContextWindowLearned(
        seq=first_turn.seq, recorded_at_ms=0, turn_id=first_turn.turn_id, model="m", window=8192
    )
    assert learned.seq <= newest.through_seq
    with_learned = [learned if r.seq == learned.seq else r for r in records]
    assert learned in retained(with_learned)


def _seen(records: list[jr.JournalRecord]) -> list[jr.JournalRecord]:
    """What of the compacted view becomes a message (``input_dropped`` only hides one)."""
    return [
        r
        for r in compacted_view(records).records
        if isinstance(r, jr.UserMessage | jr.ModelRound | jr.ToolResult)
    ]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32), turns=st.integers(1, 14), cut=st.floats(0, 1))
def test_the_retained_records_give_the_model_and_the_cut_what_the_whole_journal_gives(
    seed: int, turns: int, cut: float
) -> None:
    """Turns ending in every way (completed, Esc mid-tool, round limit,
    context_length after a result, failed, a call left unanswered): a running
    session after a checkpoint (the retained prefix, then what it appended)
    and a checkpoint open (the same, retained again) send the model the same
    messages, and a compaction cuts at the same seq, as a full read."""
    records = generated_session(random.Random(seed), "s1", turns=turns, endings=True)
    at = max(1, int(len(records) * cut))
    prefix, tail = records[:at], records[at:]
    first = Retention()
    first.extend(prefix)
    live = first.records() + tail
    opened = Retention(first.folded)
    opened.extend(live)
    for kept in (live, opened.records()):
        assert _seen(kept) == _seen(records)
        assert build_messages(kept) == build_messages(records)
        assert _cut(kept, None) == _cut(records, None)
        for turn_id in unterminated_turns(records):
            assert _cut(kept, turn_id) == _cut(records, turn_id)
