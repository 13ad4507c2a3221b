"""The request builder (mind.history): journal records → conversation messages."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mind.conversation import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from mind.generated import journal as jr
from mind.history import (
    ANTHROPIC_CALL_IDS,
    COMPATIBLE_CALL_IDS,
    OPENAI_CHAT_CALL_IDS,
    OPENAI_RESPONSES_CALL_IDS,
    SYNTHETIC_INTERRUPTED_OUTPUT,
    CallIdRule,
    build_messages,
    conform_call_ids,
    pending_tool_calls,
)
from tests.support import records as rec

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
    return rec.model_round(
        turn, text, list(calls), provider="openai-chat", usage=USAGE, items=items
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


def test_server_call_ids_are_kept_verbatim_in_the_conversation() -> None:
    # Kimi-style ids encode the tool and its index (the chat template parses
    # them); vLLM mints 46-character ids. The conversation keeps both as sent.
    kimi, vllm = "functions.shell:0", "chatcmpl-tool-" + "0123456789abcdef" * 2
    records = [round_("", [call(kimi), call(vllm)]), result(kimi), result(vllm)]
    assert build_messages(records) == [
        AssistantMessage(tool_calls=[tc(kimi), tc(vllm)]),
        ok(kimi),
        ok(vllm),
    ]


@pytest.mark.parametrize(
    ("rule", "ids", "expected"),
    [
        (COMPATIBLE_CALL_IDS, ["functions.shell:0", "x" * 50], ["functions.shell:0", "x" * 50]),
        (
            ANTHROPIC_CALL_IDS,
            ["functions.shell:0", "functions_shell_0", "toolu_01A"],
            ["functions_shell_0", "functions_shell_0_2", "toolu_01A"],
        ),
        (
            OPENAI_CHAT_CALL_IDS,
            ["call_ok", "x" * 50, "x" * 50 + "_2", "functions.shell:0"],
            [
                "call_ok",
                "x" * 31 + f"_{zlib.crc32(('x' * 50).encode()):08x}",
                "x" * 31 + f"_{zlib.crc32(('x' * 50 + '_2').encode()):08x}",
                "functions.shell:0",
            ],
        ),
        (
            OPENAI_RESPONSES_CALL_IDS,
            ["y" * 64, "y" * 65],
            ["y" * 64, "y" * 55 + f"_{zlib.crc32(b'y' * 65):08x}"],
        ),
    ],
    ids=["compatible", "anthropic", "openai-chat", "openai-responses"],
)
def test_call_ids_are_rewritten_only_where_the_target_rule_is_broken(
    rule: CallIdRule, ids: list[str], expected: list[str]
) -> None:
    messages: list[Message] = [
        UserMessage(text="q"),
        AssistantMessage(tool_calls=[tc(i) for i in ids]),
        *[ok(i, f"out {i}") for i in ids],
    ]
    out = conform_call_ids(messages, rule)
    assert out == [
        UserMessage(text="q"),
        AssistantMessage(tool_calls=[tc(i) for i in expected]),
        *[ok(e, f"out {i}") for i, e in zip(ids, expected, strict=True)],
    ]
    # Deterministic: the same conversation (a resumed journal) maps the same way.
    assert conform_call_ids(messages, rule) == out


@settings(derandomize=True, database=None, deadline=None, max_examples=200)
@given(
    ids=st.lists(
        st.sampled_from(["a.b", "a_b", "a_b_2", "", "call", "z" * 70, "z" * 70 + "!", "k:1"]),
        max_size=8,
    ),
    rule=st.sampled_from(
        [COMPATIBLE_CALL_IDS, ANTHROPIC_CALL_IDS, OPENAI_CHAT_CALL_IDS, OPENAI_RESPONSES_CALL_IDS]
    ),
)
def test_conformed_ids_are_collision_free_valid_and_stable_as_the_journal_grows(
    ids: list[str], rule: CallIdRule
) -> None:
    records: list[jr.JournalRecord] = [round_("", [call(i)]) for i in ids]
    full = conform_call_ids(build_messages(records), rule)
    sent = [c.call_id for m in full if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(set(sent)) == len(sent) == len(ids)
    assert all(sent) and all(rule.max_chars is None or len(s) <= rule.max_chars for s in sent)
    if rule.unsafe is not None:
        assert not any(rule.unsafe.search(s) for s in sent)
    assert_paired(full)
    # A longer journal never changes the ids already sent (prompt caches, resumes).
    for cut in range(len(records)):
        prefix = conform_call_ids(build_messages(records[:cut]), rule)
        assert [
            c.call_id for m in prefix if isinstance(m, AssistantMessage) for c in m.tool_calls
        ] == sent[:cut]
