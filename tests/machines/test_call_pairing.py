"""Pairing tool calls with their records, per turn and per occurrence
(mind.call_pairing; docs/design/recovery.md §5), and the builders that use it."""

from __future__ import annotations

from mind.call_pairing import pair_calls
from mind.conversation import AssistantMessage, ToolResultMessage
from mind.generated import journal as jr
from mind.history import (
    ANTHROPIC_CALL_IDS,
    SYNTHETIC_INTERRUPTED_OUTPUT,
    build_messages,
    conform_call_ids,
)
from tests.machines.test_history import call, result, round_, user


def started(call_id: str, turn: str = "t1") -> jr.ToolStarted:
    return jr.ToolStarted(seq=0, recorded_at_ms=0, turn_id=turn, call_id=call_id, name="shell")


def test_the_kth_call_with_an_id_pairs_with_the_kth_record_of_its_turn() -> None:
    records = [
        user("one", "t1"),
        round_(calls=[call("call_0")], turn="t1"),
        started("call_0", "t1"),
        result("call_0", "T1", turn="t1"),
        user("two", "t2"),
        round_(calls=[call("call_0")], turn="t2"),  # crashed before it started
        user("three", "t3"),
        round_(calls=[call("dup1"), call("dup1"), call("dup1")], turn="t3"),
        result("dup1", "denied", status="denied", turn="t3"),  # never started
        started("dup1", "t3"),
        result("dup1", "B", turn="t3"),
        started("dup1", "t3"),  # the third: started, no result
        result("dup1", "stray", turn="t2"),  # another turn's id: pairs with nothing here
    ]
    got = [
        (p.turn_id, p.index, p.started, p.result.output if p.result else None)
        for p in pair_calls(records)
    ]
    assert got == [
        ("t1", 0, True, "T1"),
        ("t2", 0, False, None),
        ("t3", 0, False, "denied"),
        ("t3", 1, True, "B"),
        ("t3", 2, True, None),
    ]
    assert [p.index for p in pair_calls(records, "t3")] == [0, 1, 2]


def test_a_result_never_answers_a_call_of_an_earlier_turn() -> None:
    # t1's call_0 was left unanswered (an old journal); t2's result is t2's.
    records = [
        user("one", "t1"),
        round_(calls=[call("call_0")], turn="t1"),
        user("two", "t2"),
        round_(calls=[call("call_0")], turn="t2"),
        result("call_0", "two", turn="t2"),
    ]
    outputs = [m.output for m in build_messages(records) if isinstance(m, ToolResultMessage)]
    assert outputs == [SYNTHETIC_INTERRUPTED_OUTPUT, "two"]


def test_a_repeated_id_is_renamed_and_each_result_follows_its_own_call() -> None:
    records = [
        user("go"),
        round_(calls=[call("dup.1"), call("dup.1")]),
        result("dup.1", "A"),
        result("dup.1", "B"),
    ]
    for messages in (
        build_messages(records),
        conform_call_ids(build_messages(records), ANTHROPIC_CALL_IDS),
    ):
        assistant = next(m for m in messages if isinstance(m, AssistantMessage))
        ids = [c.call_id for c in assistant.tool_calls]
        pairs = [(m.call_id, m.output) for m in messages if isinstance(m, ToolResultMessage)]
        assert len(set(ids)) == 2
        assert pairs == [(ids[0], "A"), (ids[1], "B")]
