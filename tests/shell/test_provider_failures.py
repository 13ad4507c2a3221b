"""Failure mapping, retry-after parsing, the retry policy, and failures over real HTTP."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime

import anyio
import pytest

from mind.conversation import ModelRequest, StreamDone, UserMessage
from mind.effects.retry import RetryPolicy
from mind.errors import TRANSIENT_KINDS, ProviderError
from mind.shell.providers import ProviderSettings, make_provider
from mind.shell.providers.failures import (
    classify_failure,
    error_from_http,
    error_from_payload,
    parse_retry_after,
)
from tests.support.replay_server import ReplayServer, Reply
from tests.support.silent_server import SSE_PREFIX, SilentServer

# ---- classify_failure: one table ----------------------------------------------------


@pytest.mark.parametrize(
    ("status", "code", "error_type", "message", "kind"),
    [
        (401, None, None, "", "auth"),
        (403, None, "permission_error", "", "auth"),
        (200, None, "authentication_error", "", "auth"),
        (404, "model_not_found", "invalid_request_error", "", "not_found"),
        (400, "model_not_found", "invalid_request_error", "", "not_found"),  # Responses
        (404, None, "not_found_error", "model: x", "not_found"),
        (400, "unsupported_parameter", "invalid_request_error", "", "invalid_request"),
        (422, None, None, "", "invalid_request"),
        (400, "context_length_exceeded", "invalid_request_error", "", "context_length"),
        (400, None, "invalid_request_error", "prompt is too long: 210000 tokens", "context_length"),
        (400, None, None, "This model's maximum context length is 8192 tokens", "context_length"),
        (429, "rate_limit_exceeded", "requests", "", "rate_limited"),
        (429, "insufficient_quota", "insufficient_quota", "", "rate_limited"),
        (None, 429, None, "Provider returned error", "rate_limited"),  # OpenRouter int code
        (529, None, "overloaded_error", "Overloaded", "overloaded"),
        (None, None, "overloaded_error", "Overloaded", "overloaded"),  # Anthropic event: error
        (500, None, None, "", "server"),
        (503, None, None, "", "server"),
        (None, "server_error", None, "", "server"),
        (None, None, "api_error", "", "server"),
        (None, 400, None, "Token limit reached", "invalid_request"),
        (None, None, None, "", "server"),  # in-stream error with nothing recognisable
        (408, None, None, "", "network"),
        (None, 408, None, "timed out", "server"),  # in-stream: the server answered
        (405, None, None, "Method Not Allowed", "protocol"),  # another API shape
        (400, "string_above_max_length", "invalid_request_error", "", "invalid_request"),
        (None, None, "validation", "Input validation error: x", "invalid_request"),  # TGI
        (None, None, "BadRequestError", "", "invalid_request"),  # vLLM
        (None, None, "INVALID_ARGUMENT", "", "invalid_request"),  # Gemini status
        (None, None, None, "Input validation error: `top_k` must be > 0", "invalid_request"),
        (500, None, None, "Input validation error", "server"),  # HTTP status wins
        (None, None, "exceed_context_size_error", "", "context_length"),  # llama.cpp
    ],
)
def test_classify_failure(
    status: int | None, code: str | int | None, error_type: str | None, message: str, kind: str
) -> None:
    assert (
        classify_failure(status=status, code=code, error_type=error_type, message=message) == kind
    )


def test_an_in_stream_error_naming_a_param_is_a_rejected_request() -> None:
    assert classify_failure(status=None, code="x", param="input[1]") == "invalid_request"
    assert classify_failure(status=None, code="x") == "server"


def test_error_payload_shapes() -> None:
    shapes = {
        "openai": {"error": {"message": "m", "type": "server_error", "code": None}},
        "tgi-string": {"error": "Input validation error: prompt is too long"},
        "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "x"}},
        "responses-event": {"type": "error", "code": "rate_limit_exceeded", "message": "slow"},
        "responses-failed": {"type": "response.failed", "response": {"error": None}},
    }
    kinds = {k: error_from_payload(v, status=None).kind for k, v in shapes.items()}
    assert kinds == {
        "openai": "server",
        "tgi-string": "context_length",
        "anthropic": "overloaded",
        "responses-event": "rate_limited",
        "responses-failed": "server",
    }


def test_http_error_detail_redacts_the_api_key_and_non_json_bodies_map_by_status() -> None:
    key = "sk-secret-abcdef"
    err = error_from_http(
        401, f'{{"error": {{"message": "bad key {key}"}}}}'.encode(), {}, api_key=key
    )
    assert (err.kind, key in str(err), "***" in err.detail) == ("auth", False, True)
    html = error_from_http(502, b"<html>Bad Gateway</html>", {"content-type": "text/html"})
    assert (html.kind, html.status, html.transient) == ("server", 502, True)


# ---- retry-after ----------------------------------------------------------------


def test_retry_after_forms() -> None:
    now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    cases = {
        "seconds": {"Retry-After": "30"},
        "fraction": {"retry-after": "1.5"},
        "ms-wins": {"retry-after-ms": "250", "retry-after": "30"},
        "http-date": {"retry-after": "Thu, 01 Jan 2026 12:00:20 GMT"},
        "past-date": {"retry-after": "Thu, 01 Jan 2026 11:00:00 GMT"},
        "garbage": {"retry-after": "soon"},
        "bad-ms-falls-back": {"retry-after-ms": "x", "retry-after": "2"},
        "absent": {},
    }
    got = {k: parse_retry_after(v, now=now) for k, v in cases.items()}
    assert got == {
        "seconds": 30.0,
        "fraction": 1.5,
        "ms-wins": 0.25,
        "http-date": 20.0,
        "past-date": 0.0,
        "garbage": None,
        "bad-ms-falls-back": 2.0,
        "absent": None,
    }


# ---- retry policy -------------------------------------------------------------------


def test_retry_policy_delays_are_exponential_capped_and_deterministic() -> None:
    policy = RetryPolicy()
    assert [policy.delay_s(n, None) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert policy.delay_s(10_000, None) == 8.0
    assert policy.delay_s(1, 30.0) == 30.0  # server delay honoured
    assert policy.delay_s(1, 600.0) == 60.0  # ... up to the cap
    assert policy.delay_s(1, 0.0) == 0.0


def test_retry_policy_should_retry_only_transient_kinds_within_budget() -> None:
    policy = RetryPolicy(max_retries=2)
    assert [policy.should_retry(n, "server") for n in (1, 2, 3)] == [True, True, False]
    assert {k for k in TRANSIENT_KINDS if policy.should_retry(1, k)} == TRANSIENT_KINDS
    assert not policy.should_retry(1, "auth")
    assert not policy.should_retry(1, "context_length")


def test_retry_policy_bounds_the_total_retry_time() -> None:
    policy = RetryPolicy(max_retry_s=10.0)
    assert policy.within_time(0.0, 0.5)
    assert policy.within_time(9.0, 1.0)  # the retry starts at 10 s: still inside
    assert not policy.within_time(9.5, 1.0)
    assert not policy.within_time(11.0, 0.0)
    assert RetryPolicy().max_retry_s == 300.0
    with pytest.raises(ValueError):
        RetryPolicy(max_retry_s=-1.0)


def test_retry_policy_jitter_is_injected() -> None:
    policy = RetryPolicy(jitter_ratio=0.5)
    assert (policy.delay_s(3, None), policy.delay_s(3, None, unit=1.0)) == (2.0, 1.0)
    with pytest.raises(ValueError):
        RetryPolicy(max_retries=-1)


# ---- failures over real loopback HTTP ----------------------------------------------

REQUEST = ModelRequest(model="m", system="", messages=[UserMessage(text="hi")])


async def _run(kind: str, base_url: str, timeout_s: float = 5.0) -> ProviderError | None:
    provider = make_provider(
        ProviderSettings(
            kind=kind,  # type: ignore[arg-type]
            model="m",
            base_url=base_url,
            api_key="sk-k",
            timeout_s=timeout_s,
        )
    )
    try:
        async for _ in provider.stream(REQUEST):
            pass
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()
    return None


def _serve(kind: str, reply: Reply) -> ProviderError | None:
    with ReplayServer([reply]) as server:
        return anyio.run(_run, kind, server.url)


def _sse(*events: object) -> bytes:
    return b"".join(
        (e if isinstance(e, bytes) else f"data: {json.dumps(e)}\n\n".encode()) for e in events
    )


def test_connection_refused_is_network() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    err = anyio.run(_run, "openai-chat", f"http://127.0.0.1:{port}")
    assert err is not None and err.kind == "network"


@pytest.mark.parametrize(
    "prefix", [b"", SSE_PREFIX + b"8\r\n: ping\n\n\r\n"], ids=["before-headers", "mid-stream"]
)
@pytest.mark.parametrize("kind", ["openai-chat", "anthropic"])
def test_a_server_that_accepts_and_goes_silent_is_an_idle_network_failure(
    kind: str, prefix: bytes
) -> None:
    """Issue 7 item 12: no byte for the idle timeout, before the headers or
    mid-stream, is a transient ``network`` failure that names the setting."""
    with SilentServer(prefix) as server:
        started = time.monotonic()
        err = anyio.run(_run, kind, server.url, 0.3)
        elapsed = time.monotonic() - started
    assert err is not None and (err.kind, err.transient) == ("network", True), err
    assert "stream_idle_timeout" in err.detail and "0.3 s" in err.detail, err.detail
    assert 0.25 < elapsed < 3.0


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        (
            "openai-chat",
            Reply(status=200, content_type="text/html", body=b"<html>captive portal</html>"),
            "protocol",  # a 200 page is not the API: deterministic (docs/design/providers.md §7)
        ),
        (
            "openai-chat",
            Reply(status=503, content_type="text/html", body=b"<html>unavailable</html>"),
            "server",
        ),
        (
            "anthropic",
            Reply(
                status=529,
                content_type="application/json",
                body=b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            ),
            "overloaded",
        ),
        (
            "anthropic",
            Reply(
                body=b"event: message_start\n"
                b'data: {"type":"message_start","message":{"usage":{}}}\n\n'
                b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
                b'"message":"Overloaded"}}\n\n'
            ),
            "overloaded",
        ),
        (
            "openai-chat",
            # old llama.cpp: non-standard `error:` field (docs/design/providers.md §4)
            Reply(body=b'error: {"code":500,"message":"slot unavailable"}\n\ndata: [DONE]\n\n'),
            "server",
        ),
        (
            "openai-chat",
            # [DONE] with no finish_reason and no output (docs/design/providers.md §4)
            Reply(
                body=b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
                b"data: [DONE]\n\n"
            ),
            "server",
        ),
        (
            "openai-chat",
            # finish_reason "error" alone is a failure, not a finish (rule 12)
            Reply(
                body=_sse(
                    {"choices": [{"index": 0, "delta": {"content": "x"}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]},
                )
            ),
            "server",
        ),
        (
            "openai-chat",
            # TGI: error as a plain string (rule 9)
            Reply(body=_sse({"error": "Request failed during generation: out of memory"})),
            "server",
        ),
        (
            "openai-chat",
            # EOF with no finish_reason and no [DONE]: truncation (rule 19)
            Reply(body=_sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})),
            "stream_cut",
        ),
        (
            "openai-chat",
            # a torn last event at EOF is a cut, not a parse error
            Reply(body=b'data: {"choices":[{"index":0,"delta":{"content":"Hel'),
            "stream_cut",
        ),
        (
            "openai-responses",
            Reply(
                body=_sse(
                    {"type": "response.created", "response": {}},
                    {"type": "response.failed", "response": {"status": "failed", "error": None}},
                )
            ),
            "server",
        ),
        (
            "openai-responses",
            Reply(
                body=_sse(
                    {
                        "type": "error",
                        "code": "context_length_exceeded",
                        "message": "Your input exceeds the context window of this model.",
                    }
                )
            ),
            "context_length",
        ),
        (
            "openai-responses",
            Reply(
                status=200,
                content_type="application/json",
                body=b'{"status":"failed","error":{"code":"server_error","message":"x"}}',
            ),
            "server",
        ),
    ],
    ids=[
        "html-200",
        "html-503",
        "anthropic-529",
        "anthropic-event-error",
        "llamacpp-error-field",
        "done-without-output",
        "finish-error",
        "tgi-string-error",
        "eof-without-finish",
        "torn-last-event",
        "responses-failed-null-error",
        "responses-error-event",
        "responses-json-failed",
    ],
)
def test_failures_over_http(kind: str, reply: Reply, expected: str) -> None:
    base = "" if kind == "anthropic" else "/v1"
    with ReplayServer([reply]) as server:
        err = anyio.run(_run, kind, server.url + base)
    assert err is not None and err.kind == expected


def test_responses_incomplete_is_a_finish_not_a_failure() -> None:
    body = _sse(
        {"type": "response.output_text.delta", "item_id": "m", "delta": "Part"},
        {
            "type": "response.incomplete",
            "response": {
                "status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 3, "output_tokens": 4},
            },
        },
    )

    async def run(url: str) -> tuple[str, str, int]:
        provider = make_provider(ProviderSettings(kind="openai-responses", model="m", base_url=url))
        try:
            events = [e async for e in provider.stream(REQUEST)]
        finally:
            await provider.aclose()
        done = events[-1]
        assert isinstance(done, StreamDone)
        return done.text, done.finish, done.usage.output_tokens

    with ReplayServer([Reply(body=body)]) as server:
        got = anyio.run(run, server.url + "/v1")
    assert got == ("Part", "length", 4)
