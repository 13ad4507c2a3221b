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
from dataclasses import dataclass, field
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
from tests.support.replay_server import ReplayServer, Reply, random_splits, shared_dir

SHARED = shared_dir()
pytestmark = pytest.mark.skipif(
    SHARED is None, reason="shared fixtures (../shared/cassettes, ../shared/quirks) not found"
)

API_KIND = {
    "openai-chat": "openai-chat",
    "openai-responses": "openai-responses",
    "anthropic-messages": "anthropic",
}
API_PATH = {
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
    "anthropic-messages": "/v1/messages",
}
API_KEY = "sk-test-0123456789"


# ---- expectations ------------------------------------------------------------


@dataclass
class Expect:
    """mind's normalised view of one case."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[tuple[str, Any]] = field(default_factory=list)  # (name, parsed args)
    finish: str | None = None
    usage: tuple[int, int] | None = None  # None: not checked
    failure: str | None = None
    retry_after_s: float | None = None


# Non-2xx cassettes: the failure kind each must map to.
ERROR_KINDS = {
    ("anthropic-messages", "error_400_invalid_request"): "invalid_request",
    ("anthropic-messages", "error_404_model_not_found"): "not_found",
    ("openai-chat", "error_400_missing_required_parameter"): "invalid_request",
    ("openai-chat", "error_400_unsupported_parameter"): "invalid_request",
    ("openai-chat", "error_400_unsupported_system_role"): "invalid_request",
    ("openai-chat", "error_401_openrouter_no_auth"): "auth",
    ("openai-chat", "error_404_model_not_found"): "not_found",
    ("openai-chat", "error_429_openrouter_upstream_rate_limited"): "rate_limited",
    ("openai-responses", "error_400_invalid_temperature"): "invalid_request",
    # Responses answers an unknown model with 400 + code model_not_found.
    ("openai-responses", "error_400_model_not_found"): "not_found",
    ("openai-responses", "error_400_reasoning_item_without_following_item"): "invalid_request",
}

# Non-streaming JSON cassettes (their meta has no assembled view): read off the bodies.
JSON_EXPECT = {
    ("anthropic-messages", "json_text_sonnet4"): Expect(
        text='Olá! \n\n(That\'s "hello" in Portuguese. You could also say "Oi!" for a more '
        'casual "hi!")',
        finish="stop",
        usage=(16, 34),
    ),
    ("openai-chat", "json_text_gpt4o"): Expect(text="Oi!", finish="stop", usage=(20, 2)),
    ("openai-chat", "json_parallel_tool_calls_gpt4o"): Expect(
        tool_calls=[("add", {"a": 2, "b": 3}), ("multiply", {"a": 2, "b": 3})],
        finish="tool_calls",
        usage=(110, 50),
    ),
    ("openai-responses", "json_text_gpt4o"): Expect(text="Olá!", finish="stop", usage=(20, 3)),
    ("openai-responses", "json_parallel_function_calls_gpt4o"): Expect(
        tool_calls=[("add", {"a": 2, "b": 3}), ("multiply", {"a": 2, "b": 3})],
        finish="tool_calls",
        usage=(108, 51),
    ),
    ("openai-responses", "json_reasoning_function_call_roundtrip_gpt55"): Expect(
        tool_calls=[("db_lookup", {"key": "7"})], finish="tool_calls", usage=(171, 118)
    ),
}

CHAT_FINISH = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}
ANTHROPIC_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def _args(raw: str | None) -> Any:
    return json.loads(raw) if raw else {}


def _from_observed(api: str, name: str, assembled: dict[str, Any]) -> Expect:
    """Convert the cassette's independent assembled view into mind's shape."""
    if api == "openai-chat":
        calls = [(c["name"], _args(c["arguments"])) for c in assembled["tool_calls"]]
        finish = CHAT_FINISH[assembled["finish_reason"]]
        usage = assembled["usage"]
        exp = Expect(
            text=assembled["text"] or "",
            reasoning=assembled["reasoning_text"] or "",
            tool_calls=calls,
            finish="tool_calls" if calls else finish,
            usage=(usage["prompt_tokens"], usage["completion_tokens"]),
        )
        if assembled.get("in_stream_errors"):
            # stream_openrouter_error_in_chunk_after_length: finish "length"
            # arrives first, then a chunk with a top-level error
            # {"code": 400, "message": "Token limit reached"} before [DONE].
            # The observed cross-check reports finish "length"; PROVIDER-RULES 9
            # says a top-level error on any data event fails the stream, and
            # code 400 maps to invalid_request. Trust the bytes + rules.
            exp.failure = "invalid_request"
        return exp
    if api == "openai-responses":
        calls = [(c["name"], _args(c["arguments"])) for c in assembled["function_calls"]]
        usage = assembled["usage"]
        assert assembled["terminal_status"] == "completed"
        return Expect(
            text=assembled["text"] or "",
            reasoning=assembled["reasoning_summary_text"] or "",
            tool_calls=calls,
            finish="tool_calls" if calls else "stop",
            usage=(usage["input_tokens"], usage["output_tokens"]),
        )
    assert api == "anthropic-messages"
    blocks = assembled["content_blocks"]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    thinking = [b["thinking"] for b in blocks if b["type"] == "thinking"]
    # Only client tool_use blocks are client calls; server_tool_use and
    # *_tool_result blocks are skipped.
    calls = [
        (b["name"], _args(b["input_json"]))
        for b in blocks
        if b["type"] == "tool_use" and b.get("input_json_parses", True)
    ]
    start = assembled["usage_message_start"]
    delta = assembled["usage_message_delta"]
    source = delta if "input_tokens" in delta else start
    input_tokens = (
        source["input_tokens"]
        + source.get("cache_creation_input_tokens", 0)
        + source.get("cache_read_input_tokens", 0)
    )
    finish = ANTHROPIC_FINISH[assembled["stop_reason"]]
    # stream_max_tokens_mid_tool_json: the tool_use block is never closed and
    # its partial_json is invalid (input_json_parses false). The observed view
    # lists it as a block; for mind it is not an assembled call (executing a
    # truncated call would be wrong), so the round ends with finish "length"
    # and the text kept.
    return Expect(
        text="\n\n".join(texts),  # separate text blocks are joined by a blank line
        reasoning="\n\n".join(thinking),
        tool_calls=calls,
        finish="tool_calls" if calls else finish,
        usage=(input_tokens, delta["output_tokens"]),
    )


QUIRK_FAILURE = {"server_error": "server"}  # quirk label of the wire code -> FailureKind


def _from_quirk(expected: dict[str, Any]) -> Expect:
    usage = expected.get("usage")
    failure = expected.get("failure_kind")
    return Expect(
        text=expected.get("text") or "",
        reasoning=expected.get("reasoning") or "",
        tool_calls=[(c["name"], c["arguments"]) for c in expected.get("tool_calls") or []],
        finish=expected.get("finish"),
        usage=(usage["input_tokens"], usage["output_tokens"]) if usage else (0, 0),
        failure=QUIRK_FAILURE.get(failure, failure) if failure else None,
        retry_after_s=expected.get("retry_after_s"),
    )


@dataclass
class Case:
    """One recorded or constructed exchange."""

    group: str  # "cassettes" | "quirks"
    api: str
    name: str
    prefix: Path
    meta: dict[str, Any]
    expect: Expect

    @property
    def id(self) -> str:
        return f"{self.group}/{self.api}/{self.name}"


def _load_cases() -> list[Case]:
    if SHARED is None:
        return []
    cases = []
    for group in ("cassettes", "quirks"):
        for api_dir in sorted(p for p in (SHARED / group).iterdir() if p.is_dir()):
            for meta_path in sorted(api_dir.glob("*.meta.json")):
                name = meta_path.name.removesuffix(".meta.json")
                meta = json.loads(meta_path.read_text(encoding="utf-8"))
                api = api_dir.name
                if group == "quirks":
                    expect = _from_quirk(meta["expected"])
                elif (api, name) in ERROR_KINDS:
                    expect = Expect(failure=ERROR_KINDS[(api, name)])
                elif (api, name) in JSON_EXPECT:
                    expect = JSON_EXPECT[(api, name)]
                else:
                    expect = _from_observed(api, name, meta["observed"]["assembled"])
                cases.append(Case(group, api, name, api_dir / name, meta, expect))
    return cases


CASES = _load_cases()


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
        assert done.usage == Usage(input_tokens=exp.usage[0], output_tokens=exp.usage[1])
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
