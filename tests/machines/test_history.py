"""The request builder (mind.history): journal records → conversation messages."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mind.conversation import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from mind.generated import journal as jr
from mind.history import (
    MAX_CALL_ID_CHARS,
    SYNTHETIC_INTERRUPTED_OUTPUT,
    build_messages,
    pending_tool_calls,
)

USAGE = jr.Usage(input_tokens=0, output_tokens=0)


def user(text: str, turn: str = "t1", kind: str = "prompt") -> jr.JournalRecord:
    return jr.UserMessage(
        seq=0, recorded_at_ms=0, turn_id=turn, message_id=f"m-{text}", text=text, kind=kind
    )


def call(call_id: str, name: str = "shell", arguments: str = "{}", **fields: Any) -> Any:
    if fields:
        return jr.RecordedToolCall(
            call_id=call_id, name=name, arguments=arguments, provider_fields=fields
        )
    return jr.RecordedToolCall(call_id=call_id, name=name, arguments=arguments)


def round_(
    text: str = "",
    calls: Sequence[Any] = (),
    turn: str = "t1",
    items: Sequence[dict[str, Any]] = (),
) -> jr.JournalRecord:
    return jr.ModelRound(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn,
        round=0,
        text=text,
        reasoning="",
        tool_calls=list(calls),
        finish="tool_calls" if calls else "stop",
        usage=USAGE,
        provider="openai-chat",
        provider_items=list(items),
    )


def result(call_id: str, output: str = "out", status: str = "ok", turn: str = "t1") -> Any:
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn,
        call_id=call_id,
        name="shell",
        status=status,
        output=output,
        synthetic=False,
    )


def started(turn: str = "t1") -> jr.JournalRecord:
    return jr.TurnStarted(
        seq=0, recorded_at_ms=0, turn_id=turn, provider="p", model="m", approval="never"
    )


def completed(turn: str = "t1") -> jr.JournalRecord:
    return jr.TurnCompleted(
        seq=0, recorded_at_ms=0, turn_id=turn, status="completed", usage=USAGE, acknowledged=[]
    )


def tc(call_id: str, arguments: str = "{}", **fields: Any) -> ToolCall:
    return ToolCall(call_id=call_id, name="shell", arguments=arguments, provider_fields=fields)


def ok(call_id: str, output: str = "out") -> ToolResultMessage:
    return ToolResultMessage(call_id=call_id, output=output, is_error=False)


def interrupted(call_id: str) -> ToolResultMessage:
    return ToolResultMessage(call_id=call_id, output=SYNTHETIC_INTERRUPTED_OUTPUT, is_error=True)


def assert_paired(messages: Sequence[Message]) -> None:
    """Every tool call answered exactly once, immediately, in order; no orphan."""
    seen: set[str] = set()
    i = 0
    while i < len(messages):
        m = messages[i]
        assert not isinstance(m, ToolResultMessage), f"orphan result at {i}: {m}"
        i += 1
        if isinstance(m, AssistantMessage):
            assert m.text or m.tool_calls, f"empty assistant message: {m}"
            for c in m.tool_calls:
                assert c.call_id and c.call_id not in seen, f"duplicate call id {c.call_id!r}"
                seen.add(c.call_id)
                assert i < len(messages), f"call {c.call_id} unanswered at the end"
                answer = messages[i]
                assert isinstance(answer, ToolResultMessage), f"{c.call_id} not answered: {answer}"
                assert answer.call_id == c.call_id
                i += 1
        else:
            assert isinstance(m, UserMessage) and m.text.strip()


def test_full_turn_with_out_of_order_results_and_steering() -> None:
    records = [
        jr.SessionStarted(seq=0, recorded_at_ms=0, session_id="s", cwd="/", mind_version="0"),
        started(),
        user("list files"),
        round_("let me look", [call("a"), call("b", arguments='{"x": 1}', id="fc_1")]),
        result("b", "B out"),
        user("also check tests", kind="steer"),
        result("a", "A out", status="error"),
        round_("done"),
        completed(),
    ]
    assert build_messages(records) == [
        UserMessage(text="list files"),
        AssistantMessage(text="let me look", tool_calls=[tc("a"), tc("b", '{"x": 1}', id="fc_1")]),
        ToolResultMessage(call_id="a", output="A out", is_error=True),
        ok("b", "B out"),
        UserMessage(text="also check tests"),
        AssistantMessage(text="done"),
    ]
    assert pending_tool_calls(records) == []


def test_missing_result_gets_a_synthetic_interrupted_result() -> None:
    records = [user("go"), round_("", [call("a"), call("b")]), result("a")]
    assert build_messages(records) == [
        UserMessage(text="go"),
        AssistantMessage(tool_calls=[tc("a"), tc("b")]),
        ok("a"),
        interrupted("b"),
    ]
    assert pending_tool_calls(records) == [("t1", call("b"))]


def test_error_statuses_are_errors() -> None:
    records = [
        round_("", [call(s) for s in ("ok", "error", "denied", "interrupted")]),
        *(result(s, status=s) for s in ("ok", "error", "denied", "interrupted")),
    ]
    results = build_messages(records)[1:]
    assert [(r.call_id, r.is_error) for r in results if isinstance(r, ToolResultMessage)] == [
        ("ok", False),
        ("error", True),
        ("denied", True),
        ("interrupted", True),
    ]


def test_duplicate_results_first_wins_and_unknown_or_early_results_are_dropped() -> None:
    records = [
        result("a", "too early"),
        round_("", [call("a")]),
        result("a", "first"),
        result("a", "second"),
        result("zzz", "unknown"),
        user("next"),
    ]
    assert build_messages(records) == [
        AssistantMessage(tool_calls=[tc("a")]),
        ok("a", "first"),
        UserMessage(text="next"),
    ]


def test_empty_rounds_and_empty_user_text_are_skipped() -> None:
    reasoning = {"provider": "openai-responses", "item": {"type": "reasoning", "id": "rs_1"}}
    records = [
        user(""),
        user(" \n\t"),
        user("hi"),
        round_(""),
        round_("  \n", items=[reasoning]),
        round_(" ", [call("a")], items=[reasoning]),
        result("a"),
    ]
    assert build_messages(records) == [
        UserMessage(text="hi"),
        AssistantMessage(text="", tool_calls=[tc("a")], provider_items=[reasoning]),
        ok("a"),
    ]


def test_a_dropped_input_is_never_sent_even_where_a_failed_turn_journaled_it() -> None:
    """Issue 7 item 11: "do X" of a failed turn, dropped later, is gone from every request."""
    records = [
        user("do X", turn="t1"),  # t1 failed: m-do X was returned, then dropped
        jr.InputDropped(seq=0, recorded_at_ms=0, message_id="m-do X"),
        user("do Y", turn="t2"),
    ]
    assert build_messages(records) == [UserMessage(text="do Y")]


def test_reused_and_empty_call_ids_are_made_unique() -> None:
    records = [
        round_("", [call("c"), call("c"), call("")]),
        result("c", "1"),
        result("c", "2"),
        result("", "3"),
        round_("", [call("c"), call("c_2")]),
        result("c", "4"),
    ]
    assert build_messages(records) == [
        AssistantMessage(tool_calls=[tc("c"), tc("c_2"), tc("call")]),
        ok("c", "1"),
        ok("c_2", "2"),
        ok("call", "3"),
        AssistantMessage(tool_calls=[tc("c_3"), tc("c_2_2")]),
        ok("c_3", "4"),
        interrupted("c_2_2"),
    ]
    assert pending_tool_calls(records) == [("t1", call("c_2"))]


def test_arguments_are_always_a_json_object() -> None:
    records = [
        round_(
            "",
            [
                call("a", arguments=""),
                call("b", arguments='{"k": [1, 2]}'),
                call("c", arguments='{"k": '),
                call("d", arguments="[1]"),
            ],
        ),
    ]
    first = build_messages(records)[0]
    assert isinstance(first, AssistantMessage)
    assert [c.arguments for c in first.tool_calls] == [
        "{}",
        '{"k": [1, 2]}',
        '{"invalid_arguments":"{\\"k\\": "}',
        '{"invalid_arguments":"[1]"}',
    ]


def test_results_of_an_earlier_turn_written_by_recovery_still_pair() -> None:
    records = [
        started("t1"),
        user("one", "t1"),
        round_("", [call("a")], turn="t1"),
        started("t2"),
        result("a", "late", turn="t1"),
        user("two", "t2"),
    ]
    assert build_messages(records) == [
        UserMessage(text="one"),
        AssistantMessage(tool_calls=[tc("a")]),
        ok("a", "late"),
        UserMessage(text="two"),
    ]


# ---- property --------------------------------------------------------------

_ids = st.sampled_from(["a", "b", "c", "", "a_2"])
_records = st.lists(
    st.one_of(
        st.builds(user, st.sampled_from(["", " ", "hi", "more"])),
        st.builds(
            round_,
            st.sampled_from(["", " ", "text"]),
            st.lists(st.builds(call, _ids), max_size=3),
            items=st.lists(st.just({"provider": "x", "item": {}}), max_size=1),
        ),
        st.builds(result, _ids, status=st.sampled_from(["ok", "error", "denied"])),
        st.builds(started),
        st.builds(completed),
    ),
    max_size=25,
)


@settings(derandomize=True, database=None, deadline=None, max_examples=400)
@given(records=_records)
def test_output_always_pairs_calls_with_results(records: list[jr.JournalRecord]) -> None:
    messages = build_messages(records)
    assert_paired(messages)
    synthetic = sum(
        1
        for m in messages
        if isinstance(m, ToolResultMessage) and m.output == SYNTHETIC_INTERRUPTED_OUTPUT
    )
    assert synthetic == len(pending_tool_calls(records))
    # Every prefix of a journal (a crash cut) is valid too.
    for cut in range(len(records)):
        assert_paired(build_messages(records[:cut]))


def test_call_ids_are_made_safe_for_every_provider() -> None:
    long_id = "x" * 50
    records = [
        round_("", [call("functions.shell:0"), call("functions_shell_0"), call(long_id)]),
        round_("", [call(long_id)]),
    ]
    first, *_, second, _ = build_messages(records)
    assert isinstance(first, AssistantMessage) and isinstance(second, AssistantMessage)
    hashed = "x" * 31 + "_" + f"{zlib.crc32(long_id.encode()):08x}"
    assert [c.call_id for c in first.tool_calls] == [
        "functions_shell_0",
        "functions_shell_0_2",
        hashed,
    ]
    assert [c.call_id for c in second.tool_calls] == [hashed[:38] + "_2"]
    assert all(len(c.call_id) <= MAX_CALL_ID_CHARS for c in first.tool_calls)
