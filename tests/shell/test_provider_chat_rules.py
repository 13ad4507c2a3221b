"""Chat-completions stream rules the recorded cases do not all reach
(docs/design/providers.md §4, §5).

The parser is pure (events in, stream events out), so these feed SSE bytes to
the real decoder and parser without HTTP.
"""

from __future__ import annotations

import json
from typing import Any

from mind.conversation import StreamDone, StreamEvent, ToolCallStarted, Usage
from mind.shell.providers.openai_chat import ChatStreamParser
from mind.shell.providers.sse import SSEDecoder


def run(*chunks: Any, done: bool = True) -> tuple[list[StreamEvent], StreamDone]:
    body = b""
    for c in chunks:
        body += c if isinstance(c, bytes) else f"data: {json.dumps(c)}\n\n".encode()
    if done:
        body += b"data: [DONE]\n\n"
    parser = ChatStreamParser()
    dec = SSEDecoder()
    events: list[StreamEvent] = []
    for sse in [*dec.feed(body), *dec.finish()]:
        events.extend(parser.feed_event(sse))
        if parser.done:
            break
    if not parser.done:
        events.append(parser.finish(transport_cut=False))
    final = events[-1]
    assert isinstance(final, StreamDone)
    return events, final


def tc(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [fields]}}]}


def fin(reason: str | None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}], **extra}


def calls(done: StreamDone) -> list[tuple[str, str, str]]:
    return [(c.call_id, c.name, c.arguments) for c in done.tool_calls]


def test_ollama_reuses_index_zero_with_a_new_id() -> None:
    _, done = run(
        tc(index=0, id="a", function={"name": "f", "arguments": '{"x":1}'}),
        tc(index=0, id="b", function={"name": "g", "arguments": '{"y":2}'}),
        fin("stop"),
    )
    # finish "stop" on a tool-call turn is still a tool-call turn (rule 15)
    assert (calls(done), done.finish) == (
        [("a", "f", '{"x":1}'), ("b", "g", '{"y":2}')],
        "tool_calls",
    )


def test_gemini_without_index_continues_until_a_new_id() -> None:
    events, done = run(
        tc(id="a", function={"name": "f", "arguments": '{"x":'}),
        tc(function={"arguments": "1}"}),
        tc(id="b", function={"name": "g"}, extra_content={"google": {"thought_signature": "s"}}),
        fin("stop"),
    )
    assert calls(done) == [("a", "f", '{"x":1}'), ("b", "g", "{}")]
    assert done.tool_calls[1].provider_fields == {
        "openai-chat": {"extra_content": {"google": {"thought_signature": "s"}}}
    }
    started = [(e.call_id, e.name) for e in events if isinstance(e, ToolCallStarted)]
    assert started == [("a", "f"), ("b", "g")]


def test_repeated_id_and_name_are_no_ops_and_missing_arguments_add_nothing() -> None:
    _, done = run(
        tc(index=0, id="a", type="function", function={"name": "read", "arguments": ""}),
        tc(index=0, id="a", function={"name": "read", "arguments": '{"p":'}),
        tc(index=0, id="", function={"arguments": '"x"}'}),
        tc(index=0, function={}),
        fin("tool_calls"),
    )
    assert calls(done) == [("a", "read", '{"p":"x"}')]


def test_cumulative_repair_only_when_concatenation_is_invalid() -> None:
    # Cumulative resend: the concatenation is invalid, each fragment extends
    # the previous one and the last parses -> the last fragment is used.
    _, done = run(
        tc(index=0, id="a", function={"name": "f", "arguments": '{"a":"'}),
        tc(index=0, function={"arguments": '{"a":"x"}'}),  # concatenation invalid
        fin("tool_calls"),
    )
    assert calls(done) == [("a", "f", '{"a":"x"}')]
    # Ordinary incremental fragments are simply concatenated.
    _, done = run(
        tc(index=0, id="a", function={"name": "f", "arguments": '{"a":"'}),
        tc(index=0, function={"arguments": 'b"}'}),
        fin("tool_calls"),
    )
    assert calls(done) == [("a", "f", '{"a":"b"}')]


def test_last_chunk_with_fragment_finish_and_usage_together() -> None:
    _, done = run(
        tc(index=0, id="a", function={"name": "f", "arguments": '{"a"'}),
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]},
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 6},
        },
        done=False,
    )
    assert (calls(done), done.finish, done.usage) == (
        [("a", "f", '{"a":1}')],
        "tool_calls",
        Usage(input_tokens=5, output_tokens=6),
    )


def test_usage_is_not_double_counted_and_top_level_wins_over_x_groq() -> None:
    groq_usage = {"prompt_tokens": 45, "completion_tokens": 9}
    _, done = run(
        {"choices": [{"index": 0, "delta": {"content": "hi"}}]},
        fin("stop", x_groq={"usage": groq_usage}),
        {"choices": [], "usage": groq_usage},
    )
    assert done.usage == Usage(input_tokens=45, output_tokens=9)


def test_named_events_other_than_message_are_ignored_and_empty_finish_is_null() -> None:
    _, done = run(
        b'event: ping\ndata: {"choices":[{"index":0,"delta":{"content":"IGNORED"}}]}\n\n',
        b'event: message\ndata: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n',
        {"type": "ping"},
        fin("length"),
        fin(""),
    )
    assert (done.text, done.finish) == ("a", "length")


def test_length_cut_inside_tool_arguments_drops_the_incomplete_call() -> None:
    _, done = run(
        {"choices": [{"index": 0, "delta": {"content": "Writing."}}]},
        tc(index=0, id="a", function={"name": "write", "arguments": '{"text": "lo'}),
        fin("length"),
    )
    assert (done.text, done.tool_calls, done.finish) == ("Writing.", [], "length")


def test_reasoning_field_variants_and_null_content() -> None:
    _, done = run(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"reasoning": "think "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "more", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"content": "answer"}}]},
        fin("stop"),
    )
    assert (done.reasoning, done.text) == ("think more", "answer")


def test_tool_call_json_in_content_stays_text() -> None:
    text = '{"name": "read_file", "arguments": {"path": "x"}}'
    _, done = run({"choices": [{"index": 0, "delta": {"content": text}}]}, fin("stop"))
    assert (done.text, done.tool_calls, done.finish) == (text, [], "stop")
