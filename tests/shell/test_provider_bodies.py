"""Request bodies built by each adapter, against recorded requests (structure, not bytes).

The recorded ``*.request.json`` of the tool-loop cassettes were accepted by
the real APIs; the bodies mind builds for the same conversation must have the
same message/item structure. Key order and fields mind does not send
(``tool_choice``, ``strict``, ``max_tokens``, ...) are not compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mind.conversation import (
    AssistantMessage,
    Message,
    ModelRequest,
    StreamDone,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from mind.shell.providers import anthropic, openai_chat, openai_responses
from mind.shell.providers.anthropic import AnthropicStreamParser
from mind.shell.providers.openai_responses import ResponsesStreamParser
from mind.shell.providers.sequencing import SYNTHETIC_RESULT
from mind.shell.providers.sse import SSEDecoder
from tests.support.replay_server import fixtures_dir

FIXTURES = fixtures_dir()


def recorded(api: str, name: str) -> dict[str, Any]:
    path = FIXTURES / "cassettes" / api / f"{name}.request.json"
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def response_bytes(api: str, name: str) -> bytes:
    return Path(FIXTURES / "cassettes" / api / f"{name}.response").read_bytes()


# ---- openai-chat --------------------------------------------------------------------


def _chat_request(rec: dict[str, Any]) -> ModelRequest:
    """Rebuild the neutral request a recorded chat body came from."""
    system = ""
    messages: list[Message] = []
    for m in rec["messages"]:
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "user":
            messages.append(UserMessage(text=m["content"]))
        elif m["role"] == "assistant":
            calls = [
                ToolCall(
                    call_id=c["id"],
                    name=c["function"]["name"],
                    arguments=c["function"]["arguments"],
                )
                for c in m.get("tool_calls", [])
            ]
            messages.append(AssistantMessage(text=m.get("content") or "", tool_calls=calls))
        else:
            messages.append(ToolResultMessage(call_id=m["tool_call_id"], output=m["content"]))
    tools = [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"]["description"],
            parameters=t["function"]["parameters"],
        )
        for t in rec.get("tools", [])
    ]
    return ModelRequest(model=rec["model"], system=system, messages=messages, tools=tools)


@pytest.mark.parametrize(
    "name", ["stream_text_after_tool_result_gpt4o", "stream_long_tool_arguments_gpt4o"]
)
def test_chat_body_matches_recorded_tool_loop(name: str) -> None:
    rec = recorded("openai-chat", name)
    body = openai_chat.build_body(_chat_request(rec))
    assert body["messages"] == rec["messages"]
    assert [t["function"] for t in body["tools"]] == [
        {k: t["function"][k] for k in ("name", "description", "parameters")} for t in rec["tools"]
    ]
    assert all(t["type"] == "function" for t in body["tools"])
    assert (body["model"], body["stream"], body["stream_options"]) == (
        rec["model"],
        True,
        {"include_usage": True},
    )


def test_chat_body_sends_back_unknown_call_fields() -> None:
    call = ToolCall(
        call_id="c1",
        name="f",
        arguments="not json",
        provider_fields={"openai-chat": {"extra_content": {"google": {"thought_signature": "s"}}}},
    )
    req = ModelRequest(
        model="m",
        system="",
        messages=[
            UserMessage(text="q"),
            AssistantMessage(tool_calls=[call]),
            ToolResultMessage(call_id="c1", output="r"),
        ],
    )
    sent_call = openai_chat.build_body(req)["messages"][1]["tool_calls"][0]
    assert sent_call == {
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},  # invalid JSON is not sent back
        "extra_content": {"google": {"thought_signature": "s"}},
    }


# ---- openai-responses -----------------------------------------------------------------


def test_responses_body_matches_recorded_reasoning_roundtrip() -> None:
    rec = recorded("openai-responses", "json_reasoning_function_call_roundtrip_gpt55")
    user, reasoning, call, output = rec["input"]
    req = ModelRequest(
        model=rec["model"],
        system="",
        messages=[
            UserMessage(text=user["content"]),
            AssistantMessage(
                tool_calls=[
                    ToolCall(
                        call_id=call["call_id"], name=call["name"], arguments=call["arguments"]
                    )
                ],
                provider_items=[
                    {"provider": "anthropic", "item": {"type": "thinking", "thinking": "x"}},
                    {"provider": "openai-responses", "position": 0, "item": reasoning},
                ],
            ),
            ToolResultMessage(call_id=output["call_id"], output=output["output"]),
        ],
        tools=[
            ToolSpec(name=t["name"], description=t["description"], parameters=t["parameters"])
            for t in rec["tools"]
        ],
    )
    body = openai_responses.build_body(req)
    assert body["input"] == rec["input"]
    assert (body["store"], body["include"]) == (False, ["reasoning.encrypted_content"])
    assert body["tools"] == rec["tools"]


@pytest.mark.parametrize(
    "name", ["stream_text_after_function_output_gpt55", "stream_text_after_function_output_gpt4o"]
)
def test_responses_body_matches_recorded_function_output_turn(name: str) -> None:
    rec = recorded("openai-responses", name)
    user, call, output = rec["input"]
    req = ModelRequest(
        model=rec["model"],
        system=rec.get("instructions", ""),
        messages=[
            UserMessage(text=user["content"]),
            AssistantMessage(
                tool_calls=[
                    ToolCall(
                        call_id=call["call_id"], name=call["name"], arguments=call["arguments"]
                    )
                ]
            ),
            ToolResultMessage(call_id=output["call_id"], output=output["output"]),
        ],
    )
    body = openai_responses.build_body(req)
    assert body["input"] == [{"role": "user", "content": user["content"]}, call, output]


def _parse_json(parser: Any, raw: bytes) -> StreamDone:
    done = parser.parse_json(json.loads(raw))[-1]
    assert isinstance(done, StreamDone)
    return done


def _parse_sse(parser: Any, raw: bytes) -> StreamDone:
    dec = SSEDecoder()
    events = [ev for sse in [*dec.feed(raw), *dec.finish()] for ev in parser.feed_event(sse)]
    done = events[-1]
    assert isinstance(done, StreamDone)
    return done


def _next_turn(done: StreamDone, results: str = "ok") -> ModelRequest:
    return ModelRequest(
        model="m",
        system="",
        messages=[
            UserMessage(text="go"),
            AssistantMessage(
                text=done.text, tool_calls=done.tool_calls, provider_items=done.provider_items
            ),
            *[ToolResultMessage(call_id=c.call_id, output=results) for c in done.tool_calls],
        ],
    )


def test_responses_reasoning_item_is_carried_back_before_its_call() -> None:
    raw = response_bytes("openai-responses", "json_reasoning_function_call_roundtrip_gpt55")
    done = _parse_json(ResponsesStreamParser(), raw)
    out_item = json.loads(raw)["output"][0]
    body = openai_responses.build_body(_next_turn(done))
    kinds = [i.get("type", i.get("role")) for i in body["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    assert body["input"][1] == {
        "type": "reasoning",
        "id": out_item["id"],
        "encrypted_content": out_item["encrypted_content"],
        "summary": [],
    }


def test_responses_streamed_reasoning_summary_is_carried_back() -> None:
    raw = response_bytes("openai-responses", "stream_reasoning_summary_then_function_call_gpt5")
    done = _parse_sse(ResponsesStreamParser(), raw)
    body = openai_responses.build_body(_next_turn(done))
    kinds = [i.get("type", i.get("role")) for i in body["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"]
    assert body["input"][1]["summary"][0]["text"] == done.reasoning


def test_responses_reasoning_item_alone_is_dropped() -> None:
    # A reasoning item must be followed by its item (error_400_reasoning_item_...).
    item = {"provider": "openai-responses", "position": 0, "item": {"type": "reasoning", "id": "r"}}
    req = ModelRequest(
        model="m",
        system="",
        messages=[UserMessage(text="a"), AssistantMessage(provider_items=[item])],
    )
    assert openai_responses.build_body(req)["input"] == [{"role": "user", "content": "a"}]


# ---- anthropic ---------------------------------------------------------------------------


def test_anthropic_body_matches_recorded_tool_loop() -> None:
    rec = recorded("anthropic-messages", "stream_text_after_tool_result_sonnet4")
    user, assistant, results = rec["messages"]
    text_block, tool_use = assistant["content"]
    (result,) = results["content"]
    req = ModelRequest(
        model=rec["model"],
        system=rec["system"][0]["text"],
        messages=[
            UserMessage(text=user["content"][0]["text"]),
            AssistantMessage(
                text=text_block["text"],
                tool_calls=[
                    ToolCall(
                        call_id=tool_use["id"],
                        name=tool_use["name"],
                        arguments=json.dumps(tool_use["input"]),
                    )
                ],
            ),
            ToolResultMessage(call_id=result["tool_use_id"], output=result["content"][0]["text"]),
        ],
        tools=[
            ToolSpec(name=t["name"], description=t["description"], parameters=t["input_schema"])
            for t in rec["tools"]
        ],
        max_output_tokens=rec["max_tokens"],
    )
    body = anthropic.build_body(req)
    assert body["messages"] == rec["messages"]
    assert (body["system"], body["tools"], body["max_tokens"]) == (
        rec["system"],
        rec["tools"],
        rec["max_tokens"],
    )


def test_anthropic_thinking_block_with_signature_is_carried_back_first() -> None:
    raw = response_bytes("anthropic-messages", "stream_thinking_then_tool_use_sonnet4")
    done = _parse_sse(AnthropicStreamParser(), raw)
    body = anthropic.build_body(_next_turn(done))
    assistant = body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "tool_use"]
    thinking = assistant["content"][0]
    assert (thinking["thinking"], len(thinking["signature"])) == (done.reasoning, 636)
    assert body["max_tokens"] == 8192


def test_anthropic_results_of_one_round_travel_in_one_user_message() -> None:
    calls = [ToolCall(call_id=f"call:{i}", name="f", arguments="") for i in range(3)]
    req = ModelRequest(
        model="m",
        system="",
        messages=[
            UserMessage(text="q"),
            AssistantMessage(tool_calls=calls),
            ToolResultMessage(call_id="call:1", output="one"),
            ToolResultMessage(call_id="call:0", output="", is_error=True),
            # call:2 has no result (crash): a synthetic one is added
            UserMessage(text="steer"),
        ],
    )
    body = anthropic.build_body(req)
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_0", "is_error": True},
        {
            "type": "tool_result",
            "tool_use_id": "call_1",
            "content": [{"type": "text", "text": "one"}],
        },
        {
            "type": "tool_result",
            "tool_use_id": "call_2",
            "content": [{"type": "text", "text": SYNTHETIC_RESULT}],
            "is_error": True,
        },
        {"type": "text", "text": "steer"},
    ]
    assert body["messages"][1]["content"][0]["input"] == {}


# ---- sequencing, every adapter --------------------------------------------------------------

BUILDERS = {
    "openai-chat": openai_chat.build_body,
    "openai-responses": openai_responses.build_body,
    "anthropic": anthropic.build_body,
}


def _result_ids(kind: str, body: dict[str, Any]) -> list[str]:
    if kind == "openai-chat":
        return [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    if kind == "openai-responses":
        return [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    return [
        b["tool_use_id"]
        for m in body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("kind", list(BUILDERS))
def test_orphan_and_duplicate_results_are_dropped_missing_ones_synthesised(kind: str) -> None:
    req = ModelRequest(
        model="m",
        system="sys",
        messages=[
            ToolResultMessage(call_id="orphan", output="x"),
            UserMessage(text="q"),
            AssistantMessage(
                text="t",
                tool_calls=[
                    ToolCall(call_id="a", name="f", arguments="{}"),
                    ToolCall(call_id="b", name="f", arguments="{}"),
                ],
            ),
            ToolResultMessage(call_id="b", output="1"),
            ToolResultMessage(call_id="b", output="dup"),
            UserMessage(text="next"),
        ],
    )
    body = BUILDERS[kind](req)
    assert _result_ids(kind, body) == ["a", "b"]
    assert json.dumps(body)  # JSON-ready
    assert "dup" not in json.dumps(body) and "orphan" not in json.dumps(body)
