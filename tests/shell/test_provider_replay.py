"""Every recorded cassette and constructed quirk, replayed over loopback HTTP.

Each case is served by :mod:`tests.support.replay_server` exactly as recorded
(status, content type, headers, content encoding, body bytes), whole and
split at several points (mid-line, inside multi-byte UTF-8 characters,
random offsets, every byte for small bodies), and the events of the real
provider adapter are checked against the case's expectation: quirk
``expected``, cassette ``meta.observed`` (converted to mind's normalised
shape), or a small table for JSON/error cases that have no assembled view.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from mind.conversation import (
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallStarted,
    ToolSpec,
    Usage,
    UserMessage,
)
from mind.errors import ProviderError
from mind.shell.providers import ProviderSettings, make_provider
from tests.support.cases import API_KEY, API_KIND, API_PATH, CASES, Case, Expect
from tests.support.replay_server import ReplayServer, Reply, fixtures_dir, random_splits

FIXTURES = fixtures_dir()


# ---- split strategies ----------------------------------------------------------


def _utf8_inner_offsets(body: bytes) -> list[int]:
    """Offsets that fall inside multi-byte UTF-8 characters (up to 3)."""
    out = [i for i, b in enumerate(body) if 0x80 <= b < 0xC0 and i > 0]
    return out[:1] + out[len(out) // 2 : len(out) // 2 + 1] + out[-1:] if out else []


def _interesting(body: bytes) -> list[int]:
    first_nl = body.find(b"\n")
    points = {len(body) // 4, len(body) // 2, (3 * len(body)) // 4}
    if first_nl > 2:
        points.add(first_nl // 2)  # mid first line
        points.add(first_nl + 1)  # right after the first LF
    crlf = body.find(b"\r\n")
    if crlf > 0:
        points.add(crlf + 1)  # between CR and LF
    points.update(_utf8_inner_offsets(body))
    return sorted(p for p in points if 0 < p < len(body))


SPLITS: dict[str, Callable[[bytes, str], list[int]]] = {
    "whole": lambda body, name: [],
    "interesting": lambda body, name: _interesting(body),
    "random": lambda body, name: random_splits(len(body), 12, zlib.crc32(name.encode())),
    "bytewise": lambda body, name: list(range(1, len(body))) if len(body) <= 6000 else [],
}


# ---- running -------------------------------------------------------------------


@dataclass
class Outcome:
    events: list[StreamEvent]
    error: ProviderError | None


REQUEST = ModelRequest(
    model="test-model",
    system="You are terse.",
    messages=[UserMessage(text="hello")],
    tools=[ToolSpec(name="weather", description="Weather.", parameters={"type": "object"})],
)


async def _collect(kind: str, base_url: str, request: ModelRequest = REQUEST) -> Outcome:
    provider = make_provider(
        ProviderSettings(kind=kind, model="test-model", base_url=base_url, api_key=API_KEY)  # type: ignore[arg-type]
    )
    events: list[StreamEvent] = []
    try:
        async for ev in provider.stream(request):
            events.append(ev)
    except ProviderError as exc:
        return Outcome(events, exc)
    finally:
        await provider.aclose()
    return Outcome(events, None)


def replay(api: str, replies: list[Reply], request: ModelRequest = REQUEST) -> tuple[Outcome, Any]:
    """Serve ``replies`` and run one stream call; returns the outcome and the server."""
    with ReplayServer(replies) as server:
        base = server.url if api == "anthropic-messages" else server.url + "/v1"
        outcome = anyio.run(_collect, API_KIND[api], base, request)
    return outcome, server


def check(outcome: Outcome, exp: Expect) -> None:
    """Compare an outcome with an expectation, whole structures at once."""
    events = outcome.events
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    started = [(e.call_id, e.name) for e in events if isinstance(e, ToolCallStarted)]
    dones = [e for e in events if isinstance(e, StreamDone)]
    if exp.failure is not None:
        assert outcome.error is not None, f"expected failure {exp.failure}, got {events[-1:]}"
        assert dones == []
        got: dict[str, object] = {"kind": outcome.error.kind, "text": text}
        want: dict[str, object] = {"kind": exp.failure, "text": exp.text}
        if exp.retry_after_s is not None:
            got["retry_after_s"] = outcome.error.retry_after_s
            want["retry_after_s"] = exp.retry_after_s
        assert got == want
        assert API_KEY not in str(outcome.error)
        return
    assert outcome.error is None, f"unexpected failure: {outcome.error!r}"
    assert len(dones) == 1 and events[-1] is dones[0], "exactly one StreamDone, last"
    done = dones[0]
    got_view = {
        "text": done.text,
        "reasoning": done.reasoning,
        "tool_calls": [(c.name, json.loads(c.arguments)) for c in done.tool_calls],
        "finish": done.finish,
    }
    want_view = {
        "text": exp.text,
        "reasoning": exp.reasoning,
        "tool_calls": exp.tool_calls,
        "finish": exp.finish,
    }
    assert got_view == want_view
    if exp.usage is not None:
        assert (done.usage.input_tokens, done.usage.output_tokens) == exp.usage
    if exp.cache is not None:  # as sent: 0 stays 0, an unreported count stays None
        assert (done.usage.cache_read_tokens, done.usage.cache_write_tokens) == exp.cache
    # The deltas add up to the final values; every call was announced.
    assert (text, reasoning) == (done.text, done.reasoning)
    assert {(c.call_id, c.name) for c in done.tool_calls} <= set(started)
    assert all(c.call_id for c in done.tool_calls)
    assert len({c.call_id for c in done.tool_calls}) == len(done.tool_calls)


@pytest.mark.parametrize("split", list(SPLITS))
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_provider_replays_case(case: Case, split: str) -> None:
    body = Path(f"{case.prefix}.response").read_bytes()
    splits = SPLITS[split](body, case.name)
    if split != "whole" and not splits:
        pytest.skip("body too large for bytewise splitting (covered by random splits)")
    outcome, server = replay(case.api, [Reply.from_case(case.prefix, splits=splits)])
    check(outcome, case.expect)
    # What was sent: one POST to the adapter's endpoint, streaming, with the key.
    (req,) = server.requests
    sent = req.json()
    assert (req.method, req.path, sent["model"], sent["stream"]) == (
        "POST",
        API_PATH[case.api],
        "test-model",
        True,
    )
    if case.api == "anthropic-messages":
        assert (req.headers["x-api-key"], req.headers["anthropic-version"]) == (
            API_KEY,
            "2023-06-01",
        )
    else:
        assert req.headers["authorization"] == f"Bearer {API_KEY}"


def test_every_shared_case_is_collected() -> None:
    counts: dict[str, int] = {}
    for c in CASES:
        counts[c.group] = counts.get(c.group, 0) + 1
    assert counts["cassettes"] >= 41 and counts["quirks"] >= 14, counts


# ---- extra transport shapes ---------------------------------------------------------


def _case(group: str, api: str, name: str) -> Case:
    (found,) = [c for c in CASES if (c.group, c.api, c.name) == (group, api, name)]
    return found


def test_gzip_reencoded_cassette_is_decoded_incrementally() -> None:
    """A cassette stored decompressed, served gzip-encoded in small pieces (rule 8)."""
    case = _case("cassettes", "anthropic-messages", "stream_tool_use_empty_input_haiku45")
    raw = Path(f"{case.prefix}.response").read_bytes()
    body = gzip.compress(raw, mtime=0)
    reply = Reply(
        body=body,
        content_type="text/event-stream; charset=utf-8",
        headers={"content-encoding": "gzip"},
        splits=random_splits(len(body), 20, 7),
    )
    outcome, _ = replay(case.api, [reply])
    check(outcome, case.expect)


def test_more_than_one_mib_single_sse_line() -> None:
    """Responses events repeating the whole text on one >1 MiB line (rule 6)."""
    phrase = "All work and no play makes a long line. "
    text = phrase * 30_000  # 1.2 MB
    assert len(text.encode()) > 1024 * 1024
    thirds = [text[: len(text) // 3], text[len(text) // 3 : 2 * len(text) // 3]]
    thirds.append(text[2 * len(text) // 3 :])
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {"id": "resp_1", "status": "in_progress", "output": []}}),
        (
            "response.output_item.added",
            {"output_index": 0, "item": {"id": "msg_1", "type": "message", "content": []}},
        ),
    ]
    for part in thirds:
        events.append(
            ("response.output_text.delta", {"item_id": "msg_1", "output_index": 0, "delta": part})
        )
    item = {
        "id": "msg_1",
        "type": "message",
        "content": [{"type": "output_text", "text": text}],
    }
    events += [
        ("response.output_text.done", {"item_id": "msg_1", "output_index": 0, "text": text}),
        ("response.output_item.done", {"output_index": 0, "item": item}),
        (
            "response.completed",
            {
                "response": {
                    "id": "resp_1",
                    "status": "completed",
                    "output": [item],
                    "usage": {"input_tokens": 11, "output_tokens": 270_000},
                }
            },
        ),
    ]
    body = b"".join(
        f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()
        for name, data in events
    )
    longest = max(len(line) for line in body.split(b"\n"))
    assert longest > 1024 * 1024
    reply = Reply(body=body, splits=random_splits(len(body), 40, 3))
    outcome, _ = replay("openai-responses", [reply])
    check(outcome, Expect(text=text, finish="stop", usage=(11, 270_000)))


@pytest.mark.parametrize(
    "case_id",
    [
        "cassettes/openai-chat/stream_parallel_tool_calls_gpt4o",
        "cassettes/openai-responses/stream_function_call_gpt55",
        "cassettes/anthropic-messages/stream_thinking_then_tool_use_sonnet4",
    ],
)
def test_stream_cut_before_the_end_is_stream_cut(case_id: str) -> None:
    """EOF before the terminal event, clean close or dropped connection (rules 19-21)."""
    group, api, name = case_id.split("/")
    case = _case(group, api, name)
    body = Path(f"{case.prefix}.response").read_bytes()
    for cut in (len(body) // 3, (2 * len(body)) // 3):
        clean_close = Reply(body=body[:cut], content_type="text/event-stream")
        outcome, _ = replay(api, [clean_close])
        assert outcome.error is not None and outcome.error.kind == "stream_cut"
        dropped = Reply.from_case(case.prefix, truncate_at=cut, splits=[cut // 2])
        outcome, _ = replay(api, [dropped])
        assert outcome.error is not None and outcome.error.kind == "stream_cut"


def _events(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() if "type" in e else b""
        for e in events
    )


def test_prompt_cache_counts_are_taken_as_each_server_sends_them() -> None:
    """Cache reads and writes per provider, non-zero (the recorded cassettes say
    0): Anthropic's input_tokens leaves the cache out, so the whole prompt is
    its sum; OpenAI's prompt_tokens already holds the cached part."""
    anthropic = _events(
        {
            "type": "message_start",
            "message": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-sonnet-4-5",
                "usage": {
                    "input_tokens": 10,
                    "cache_read_input_tokens": 2000,
                    "cache_creation_input_tokens": 300,
                    "output_tokens": 1,
                },
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 7},
        },
        {"type": "message_stop"},
    )
    outcome, _ = replay("anthropic-messages", [Reply(body=anthropic)])
    (done,) = [e for e in outcome.events if isinstance(e, StreamDone)]
    assert done.usage == Usage(
        input_tokens=2310, output_tokens=7, cache_read_tokens=2000, cache_write_tokens=300
    )
    responses = _events(
        {
            "type": "response.completed",
            "response": {
                "id": "r",
                "object": "response",
                "status": "completed",
                "output": [
                    {
                        "type": "message",
                        "id": "m",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": "ok"}],
                    }
                ],
                "usage": {
                    "input_tokens": 5000,
                    "input_tokens_details": {"cached_tokens": 4096},
                    "output_tokens": 9,
                },
            },
        }
    )
    outcome, _ = replay("openai-responses", [Reply(body=responses)])
    (done,) = [e for e in outcome.events if isinstance(e, StreamDone)]
    assert done.usage == Usage(input_tokens=5000, output_tokens=9, cache_read_tokens=4096)
