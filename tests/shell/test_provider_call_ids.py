"""Tool-call ids go back to the server that minted them verbatim (docs/design/providers.md §8).

A round's calls arrive over real loopback HTTP, are journaled as records,
rebuilt by :func:`mind.history.build_messages` and sent in the next request;
the server records the ids it gets back. Only a rule the target API
documents (Anthropic's pattern, OpenAI's length limits) rewrites an id.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import anyio
import pytest

from mind.conversation import ModelRequest, StreamDone, UserMessage
from mind.generated import journal as jr
from mind.history import (
    COMPATIBLE_CALL_IDS,
    OPENAI_CHAT_CALL_IDS,
    OPENAI_RESPONSES_CALL_IDS,
    build_messages,
)
from mind.shell.providers import ProviderSettings, make_provider, openai_chat, openai_responses
from tests.support import records as rec
from tests.support.replay_server import ReplayServer, Reply

KIMI = "functions.shell:0"  # the chat template parses tool name and index from it
SAFE_TWIN = "functions_shell_0"  # what KIMI becomes under Anthropic's pattern
VLLM = "chatcmpl-tool-" + "0123456789abcdef" * 2  # 46 characters
IDS = [KIMI, SAFE_TWIN, VLLM]
USAGE = jr.Usage(input_tokens=1, output_tokens=1)


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)


def _chat_calls(ids: list[str]) -> bytes:
    calls = [
        {
            "index": i,
            "id": cid,
            "type": "function",
            "function": {"name": "shell", "arguments": "{}"},
        }
        for i, cid in enumerate(ids)
    ]
    return _sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": calls}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )


def _responses_calls(ids: list[str]) -> bytes:
    items = [
        {
            "type": "response.output_item.done",
            "output_index": i,
            "item": {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": cid,
                "name": "shell",
                "arguments": "{}",
            },
        }
        for i, cid in enumerate(ids)
    ]
    return _sse(*items, {"type": "response.completed", "response": {"status": "completed"}})


def _anthropic_calls(ids: list[str]) -> bytes:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": {}}}]
    for i, cid in enumerate(ids):
        events += [
            {
                "type": "content_block_start",
                "index": i,
                "content_block": {"type": "tool_use", "id": cid, "name": "shell", "input": {}},
            },
            {"type": "content_block_stop", "index": i},
        ]
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    return _sse(*events)


RESPONSES = {
    "openai-chat": _chat_calls,
    "openai-responses": _responses_calls,
    "anthropic": _anthropic_calls,
}


def _sent_ids(kind: str, body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(call ids, result ids) of a request body, in order."""
    if kind == "openai-chat":
        calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls", [])]
        results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    elif kind == "openai-responses":
        calls = [i["call_id"] for i in body["input"] if i.get("type") == "function_call"]
        results = [i["call_id"] for i in body["input"] if i.get("type") == "function_call_output"]
    else:
        blocks = [b for m in body["messages"] for b in m["content"]]
        calls = [b["id"] for b in blocks if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    return calls, results


async def _two_rounds(kind: str, url: str) -> StreamDone:
    """Round 1 over HTTP, journaled as records; round 2 rebuilt from them."""
    provider = make_provider(ProviderSettings(kind=kind, model="m", base_url=url))  # type: ignore[arg-type]
    try:
        first = ModelRequest(model="m", system="", messages=[UserMessage(text="go")])
        done = [e async for e in provider.stream(first)][-1]
        assert isinstance(done, StreamDone)
        records: list[jr.JournalRecord] = [
            rec.model_round(
                "t1",
                "",
                [rec.call(c.call_id, c.name, c.arguments) for c in done.tool_calls],
                provider=kind,
                usage=USAGE,
            ),
            *[
                jr.ToolResult(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id="t1",
                    call_id=c.call_id,
                    name=c.name,
                    status="ok",
                    output="out",
                    synthetic=False,
                )
                for c in reversed(done.tool_calls)
            ],
        ]
        second = ModelRequest(
            model="m", system="", messages=[UserMessage(text="go"), *build_messages(records)]
        )
        async for _ in provider.stream(second):
            pass
        return done
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("openai-chat", IDS),
        ("openai-responses", IDS),
        ("anthropic", [SAFE_TWIN, SAFE_TWIN + "_2", VLLM]),
    ],
)
def test_ids_go_back_verbatim_unless_the_target_api_forbids_them(
    kind: str, expected: list[str]
) -> None:
    base = "" if kind == "anthropic" else "/v1"
    with ReplayServer([Reply(body=RESPONSES[kind](IDS))], repeat_last=True) as server:
        done = anyio.run(_two_rounds, kind, server.url + base)
        body = server.requests[1].json()
    assert [c.call_id for c in done.tool_calls] == IDS  # the journal keeps the server's ids
    assert _sent_ids(kind, body) == (expected, expected)


def test_openai_length_limits_apply_to_openai_hosts_only() -> None:
    assert openai_chat.call_id_rule("https://api.openai.com/v1") == OPENAI_CHAT_CALL_IDS
    assert openai_chat.call_id_rule("http://127.0.0.1:8080/v1") == COMPATIBLE_CALL_IDS
    assert openai_chat.call_id_rule("https://openai.example.com/v1") == COMPATIBLE_CALL_IDS
    assert openai_responses.call_id_rule("https://api.openai.com/v1") == OPENAI_RESPONSES_CALL_IDS
    assert openai_responses.call_id_rule("http://localhost:11434/v1") == COMPATIBLE_CALL_IDS
    records: list[jr.JournalRecord] = [
        rec.model_round("t1", "", [rec.call(VLLM)], provider="openai-chat", usage=USAGE)
    ]
    request = ModelRequest(model="m", system="", messages=build_messages(records))
    body = openai_chat.build_body(request, call_ids=OPENAI_CHAT_CALL_IDS)
    cut = VLLM[:31] + f"_{zlib.crc32(VLLM.encode()):08x}"
    assert _sent_ids("openai-chat", body) == ([cut], [cut])
    assert _sent_ids("openai-chat", openai_chat.build_body(request)) == ([VLLM], [VLLM])
