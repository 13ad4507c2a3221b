"""Answers that are not the configured API, keep-alive-only streams and the
error shapes that fresh users found misclassified, all over loopback HTTP
through the real adapters (docs/design/providers.md §3, §7).

A 200 answer of another API (JSON of the wrong shape, another API's event
stream, an HTML page, a TLS/endpoint mismatch) is the deterministic failure
kind ``protocol``: never retried, with a hint naming the likely API.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mind.conversation import ModelRequest, UserMessage
from mind.effects.retry import RetryPolicy
from mind.errors import CANONICAL_MESSAGES, ProviderError
from mind.generated import events as ev
from mind.shell.providers import ProviderSettings, make_provider
from mind.shell.providers.failures import classify_failure
from tests.support.child_env import without_prefixes
from tests.support.keepalive_server import KeepAliveServer
from tests.support.replay_server import ReplayServer, Reply

REQUEST = ModelRequest(model="m", system="", messages=[UserMessage(text="hi")])
ROOT = Path(__file__).resolve().parents[2]
API = {
    "openai-chat": "the Chat Completions API",
    "openai-responses": "the Responses API",
    "anthropic": "the Anthropic Messages API",
}


async def _run(kind: str, base_url: str, timeout_s: float = 5.0) -> ProviderError | None:
    provider = make_provider(
        ProviderSettings(
            kind=kind, model="m", base_url=base_url, api_key="sk-k", timeout_s=timeout_s
        )  # type: ignore[arg-type]
    )
    try:
        with anyio.fail_after(10):  # a hang fails the test instead of holding it
            async for _ in provider.stream(REQUEST):
                pass
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()
    return None


def _base(kind: str) -> str:
    return "" if kind == "anthropic" else "/v1"


def _fail(kind: str, reply: Reply) -> ProviderError:
    """Serve ``reply`` once to adapter ``kind``; return the error it raised."""
    with ReplayServer([reply]) as server:
        err = anyio.run(_run, kind, server.url + _base(kind))
    assert err is not None, "the adapter did not fail"
    return err


def _json(status: int, payload: Any) -> Reply:
    return Reply(status=status, content_type="application/json", body=json.dumps(payload).encode())


def _sse(*payloads: Any) -> Reply:
    return Reply(
        body=b"".join(
            f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n".encode() for p in payloads
        )
    )


CHAT_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    "finish_reason": "stop",
}
RESPONSE = {"id": "resp_1", "object": "response", "status": "completed", "output": []}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
CHAT_STREAM = _sse(
    {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]},
    {"object": "chat.completion.chunk", "choices": [{"index": 0, "finish_reason": "stop"}]},
    "[DONE]",
)
RESPONSES_STREAM = _sse(
    {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
    {"type": "response.output_text.delta", "item_id": "m", "delta": "hi"},
)
ANTHROPIC_STREAM = Reply(
    body=b'event: message_start\ndata: {"type":"message_start","message":{"usage":{}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\n'
)


# ---- item 1: a 200 JSON body of another shape ------------------------------------------


@pytest.mark.parametrize(
    ("kind", "body", "looks_like"),
    [
        ("openai-responses", {}, None),
        ("openai-responses", CHAT_COMPLETION, "openai-chat"),
        ("anthropic", {}, None),
        ("anthropic", CHAT_COMPLETION, "openai-chat"),
        ("anthropic", RESPONSE, "openai-responses"),
        ("openai-chat", {}, None),
        ("openai-chat", RESPONSE, "openai-responses"),
        ("openai-chat", MESSAGE, "anthropic"),
        ("openai-responses", [1, 2], None),
    ],
)
def test_a_json_body_of_another_shape_is_a_protocol_mismatch(
    kind: str, body: Any, looks_like: str | None
) -> None:
    err = _fail(kind, _json(200, body))
    assert (err.kind, err.transient) == ("protocol", False)
    assert err.detail.startswith(
        f"the server answered JSON, not an event stream — does it speak {API[kind]}?"
        " check --provider / --base-url"
    )
    if looks_like is not None:
        assert f"--provider {looks_like}" in err.detail


def test_a_json_error_body_at_200_is_still_classified_as_the_error() -> None:
    body = {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}
    assert _fail("openai-responses", _json(200, body)).kind == "rate_limited"


# ---- item 2: another API's event stream, an HTML page ---------------------------------


@pytest.mark.parametrize(
    ("kind", "reply", "looks_like"),
    [
        ("openai-responses", CHAT_STREAM, "openai-chat"),
        ("anthropic", CHAT_STREAM, "openai-chat"),
        ("openai-responses", _sse("[DONE]"), "openai-chat"),
        ("anthropic", RESPONSES_STREAM, "openai-responses"),
        ("openai-chat", RESPONSES_STREAM, "openai-responses"),
        ("openai-chat", ANTHROPIC_STREAM, "anthropic"),
        ("openai-responses", ANTHROPIC_STREAM, "anthropic"),
    ],
)
def test_another_apis_event_stream_fails_at_once_naming_that_api(
    kind: str, reply: Reply, looks_like: str
) -> None:
    err = _fail(kind, reply)
    assert (err.kind, err.transient) == ("protocol", False)
    assert f"does it speak {API[kind]}? check --provider / --base-url" in err.detail
    assert f"(it looks like {API[looks_like]}: --provider {looks_like})" in err.detail


@pytest.mark.parametrize("kind", list(API))
@pytest.mark.parametrize("ctype", ["text/html", "text/plain"])
def test_an_html_page_at_200_is_a_protocol_mismatch(kind: str, ctype: str) -> None:
    page = b"<!DOCTYPE html>\n<html><body>Welcome to nginx!</body></html>"
    err = _fail(kind, Reply(content_type=ctype, body=page))
    assert (err.kind, err.transient) == ("protocol", False)
    assert err.detail.startswith("the server answered an HTML page, not an event stream")


def test_chat_done_after_responses_events_is_a_cut_not_a_mismatch() -> None:
    reply = _sse({"type": "response.output_text.delta", "item_id": "m", "delta": "hi"}, "[DONE]")
    assert _fail("openai-responses", reply).kind == "stream_cut"


def _exec(tmp_path: Path, base_url: str, provider: str) -> subprocess.CompletedProcess[str]:
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update({"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "3"})
    argv = ["exec", "--json", "--provider", provider, "--base-url", base_url, "--model", "m"]
    argv += ["--approval", "never", "--cwd", str(tmp_path), "hello"]
    return subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", *argv],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "reply",
    [_json(200, {}), CHAT_STREAM, Reply(content_type="text/html", body=b"<html></html>")],
    ids=["json", "chat-stream", "html"],
)
def test_mind_exec_fails_a_mismatch_once_with_kind_protocol(tmp_path: Path, reply: Reply) -> None:
    with ReplayServer([reply], repeat_last=True) as server:
        proc = _exec(tmp_path, server.url + "/v1", "openai-responses")
        requests = len(server.requests)
    assert proc.returncode == 1, proc.stderr
    assert requests == 1, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert not any(e["type"] == "turn.retrying" for e in events)
    assert events[-1]["type"] == "turn.completed"
    assert events[-1]["status"] == "failed"
    assert events[-1]["failure"] == {
        "kind": "protocol",
        "message": "The server does not speak the configured API.",
    }
    assert "--provider / --base-url" in proc.stderr


# ---- item 3: keep-alives do not reset the stream idle timeout --------------------------


@pytest.mark.parametrize(
    ("kind", "keepalive"),
    [
        ("openai-chat", b": ping\n\n"),
        ("openai-responses", b": OPENROUTER PROCESSING\n\n"),
        ("anthropic", b'event: ping\ndata: {"type": "ping"}\n\n'),
    ],
)
def test_a_stream_of_only_keepalives_ends_at_the_idle_timeout(kind: str, keepalive: bytes) -> None:
    with KeepAliveServer(keepalive, every_s=0.02) as server:
        started = time.monotonic()
        err = anyio.run(_run, kind, server.url + _base(kind), 0.4)
        elapsed = time.monotonic() - started
    assert err is not None and (err.kind, err.transient) == ("network", True)
    assert "(stream_idle_timeout)" in err.detail
    assert 0.4 <= elapsed < 3.0


def test_comments_between_real_events_are_harmless() -> None:
    body = (
        b": ping\n\ndata: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": "hi"}}]}).encode()
        + b"\n\n: ping\n\ndata: "
        + json.dumps({"choices": [{"index": 0, "finish_reason": "stop"}]}).encode()
        + b"\n\ndata: [DONE]\n\n"
    )
    with ReplayServer([Reply(body=body, splits=[8, 20, 60])]) as server:
        err = anyio.run(_run, "openai-chat", server.url + "/v1", 0.4)
    assert err is None


# ---- item 4: misclassified error shapes ------------------------------------------------

INVALID_SCHEMA = "Invalid schema for function shell: validation failed"
KV_SIZE = "Input prompt is too big compared to KV size. Please try increasing KV size."


@pytest.mark.parametrize(
    ("kind", "reply", "expected"),
    [
        ("openai-chat", _sse({"error": INVALID_SCHEMA}), "invalid_request"),
        ("openai-chat", _json(500, {"error": INVALID_SCHEMA}), "invalid_request"),
        ("openai-responses", _sse({"error": INVALID_SCHEMA}), "invalid_request"),
        ("openai-chat", _json(500, {"detail": INVALID_SCHEMA}), "invalid_request"),
        ("openai-chat", _json(200, {"detail": INVALID_SCHEMA}), "invalid_request"),
        (
            "openai-chat",
            _json(200, {"detail": [{"loc": ["body", "tools", 0], "msg": "Field required"}]}),
            "invalid_request",
        ),
        (
            "openai-responses",
            _sse({"detail": "This model's maximum context length is 4096 tokens"}),
            "context_length",
        ),
        ("anthropic", _json(200, {"detail": "Service Unavailable"}), "server"),
        ("openai-chat", _json(503, {"detail": "Service Unavailable"}), "server"),
        (
            "openai-chat",
            _json(500, {"error": {"code": 500, "message": KV_SIZE, "type": "server_error"}}),
            "context_length",
        ),
        ("openai-chat", _sse({"error": {"code": 500, "message": KV_SIZE}}), "context_length"),
    ],
)
def test_error_shapes_found_by_fresh_users(kind: str, reply: Reply, expected: str) -> None:
    assert _fail(kind, reply).kind == expected


def test_a_fastapi_detail_body_keeps_its_text_in_the_detail() -> None:
    err = _fail("openai-chat", _json(500, {"detail": INVALID_SCHEMA}))
    assert INVALID_SCHEMA in err.detail


# ---- item 5: the failure kind `protocol` -----------------------------------------------


def test_protocol_is_a_deterministic_kind_with_its_own_message() -> None:
    assert CANONICAL_MESSAGES["protocol"] == "The server does not speak the configured API."
    assert not ProviderError("protocol").transient
    assert not RetryPolicy().should_retry(1, "protocol")
    assert ev.FailureKind("protocol").value == "protocol"


@pytest.mark.parametrize(
    ("status", "message", "kind"),
    [
        (404, "404 page not found", "protocol"),
        (405, "Method Not Allowed", "protocol"),
        (404, "The model `gpt-9` does not exist", "not_found"),
        (None, "Unexpected endpoint or method. (POST /v1/responses)", "protocol"),
    ],
)
def test_endpoint_mismatches_are_protocol_and_unknown_models_not_found(
    status: int | None, message: str, kind: str
) -> None:
    assert classify_failure(status=status, message=message) == kind


# ---- item 6: deltas before turn.retrying belong to the abandoned attempt ---------------


def test_exec_json_deltas_before_turn_retrying_are_the_abandoned_attempts(tmp_path: Path) -> None:
    cut = _sse({"choices": [{"index": 0, "delta": {"content": "Abandoned "}}]})
    cut.body += b'data: {"choices": [{"index": 0, "delta": {"content": "tail'
    cut.truncate_at = len(cut.body)  # dropped without the last chunk: a stream cut
    full = _sse(
        {"choices": [{"index": 0, "delta": {"content": "Hello"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        "[DONE]",
    )
    with ReplayServer([cut, full]) as server:
        proc = _exec(tmp_path, server.url + "/v1", "openai-chat")
    assert proc.returncode == 0, proc.stderr
    kinds = [
        (e["type"], e.get("text", ""))
        for e in map(json.loads, proc.stdout.splitlines())
        if e["type"] in ("message.delta", "turn.retrying", "message.completed")
    ]
    retry = kinds.index(("turn.retrying", ""))
    assert "".join(t for k, t in kinds[:retry] if k == "message.delta") == "Abandoned "
    after = [t for k, t in kinds[retry + 1 :] if k == "message.delta"]
    assert "".join(after) == "Hello"
    assert kinds[-1] == ("message.completed", "Hello")
