"""The recorded provider cases (`tests/fixtures`: cassettes + constructed quirks) and
what mind must make of each, in mind's normalised shape.

Used by the adapter-level replay tests (tests/shell/test_provider_replay.py)
and the end-to-end ``mind exec --json`` tests (tests/e2e/test_exec_cassettes.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.replay_server import fixtures_dir

FIXTURES = fixtures_dir()

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
    # (input_tokens, output_tokens); None in the pair: not reported (unknown). None: not checked.
    usage: tuple[int | None, int | None] | None = None
    # (cache_read_tokens, cache_write_tokens) as the server sent them; None in
    # the pair: the server did not report it (unknown). None: not checked.
    cache: tuple[int | None, int | None] | None = None
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
        details = usage.get("prompt_tokens_details") or {}
        exp = Expect(
            text=assembled["text"] or "",
            reasoning=assembled["reasoning_text"] or "",
            tool_calls=calls,
            finish="tool_calls" if calls else finish,
            usage=(usage["prompt_tokens"], usage["completion_tokens"]),
            cache=(details.get("cached_tokens"), details.get("cache_write_tokens")),
        )
        if assembled.get("in_stream_errors"):
            # stream_openrouter_error_in_chunk_after_length: finish "length"
            # arrives first, then a chunk with a top-level error
            # {"code": 400, "message": "Token limit reached"} before [DONE].
            # The observed cross-check reports finish "length"; docs/design/providers.md §4
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
            cache=((usage.get("input_tokens_details") or {}).get("cached_tokens"), None),
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
        cache=(source.get("cache_read_input_tokens"), source.get("cache_creation_input_tokens")),
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
        usage=(usage["input_tokens"], usage["output_tokens"]) if usage else (None, None),
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
    cases = []
    for group in ("cassettes", "quirks"):
        for api_dir in sorted(p for p in (FIXTURES / group).iterdir() if p.is_dir()):
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
