"""Error shapes of real servers, served over loopback HTTP, through every adapter.

Bodies are written the way each server sends them (wording from its source or
from public bug reports, cited per case). Issue #7 items 23 (an error inside a
200 stream is classified like an HTTP error), 24 (context overflow in every
shape is ``context_length``) and 12b (a deterministic protocol mismatch fails
at once, with a hint).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from mind.conversation import ModelRequest, UserMessage
from mind.errors import ProviderError
from mind.shell.providers import ProviderSettings, make_provider
from tests.support.child_env import without_prefixes
from tests.support.replay_server import ReplayServer, Reply

REQUEST = ModelRequest(model="m", system="", messages=[UserMessage(text="hi")])
ROOT = Path(__file__).resolve().parents[2]


async def _run(kind: str, base_url: str) -> ProviderError | None:
    provider = make_provider(
        ProviderSettings(kind=kind, model="m", base_url=base_url, api_key="sk-k", timeout_s=5.0)  # type: ignore[arg-type]
    )
    try:
        async for _ in provider.stream(REQUEST):
            pass
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()
    return None


def _fail(kind: str, reply: Reply, *, base: str | None = None) -> ProviderError:
    """Serve ``reply`` once to adapter ``kind``; return the error it raised."""
    if base is None:
        base = "" if kind == "anthropic" else "/v1"
    with ReplayServer([reply]) as server:
        err = anyio.run(_run, kind, server.url + base)
    assert err is not None, "the adapter did not fail"
    return err


def _json(status: int, payload: Any) -> Reply:
    return Reply(status=status, content_type="application/json", body=json.dumps(payload).encode())


def _data(*payloads: Any) -> Reply:
    """A 200 SSE stream of ``data:`` events."""
    return Reply(body=b"".join(f"data: {json.dumps(p)}\n\n".encode() for p in payloads))


def _event(name: str, payload: Any) -> Reply:
    return Reply(body=f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())


def _field(payload: Any) -> Reply:
    """Old llama.cpp: a non-standard ``error:`` SSE field, then [DONE]
    (docs/design/providers.md §2)."""
    return Reply(body=f"error: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode())


# ---- item 23: an error inside a 200 stream --------------------------------------------

TGI_VALIDATION = {
    # TGI ErrorResponse: error is a string, the type a sibling (router/src/server.rs)
    "error": "Input validation error: `temperature` must be strictly positive",
    "error_type": "validation",
}
VLLM_BAD_REQUEST = {
    # vLLM ErrorResponse, top level (no "error" key) in older releases
    "object": "error",
    "message": "[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
OPENAI_INVALID = {
    "error": {
        "message": "Invalid value for 'tool_choice': 'auto' is not supported with no tools.",
        "type": "invalid_request_error",
        "param": "tool_choice",
        "code": None,
    }
}
ANTHROPIC_INVALID = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "messages: text content blocks must be non-empty",
    },
}
RESPONSES_INVALID = {
    "type": "error",
    "code": "invalid_value",
    "message": "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.",
    "param": "input[1].content[0]",
}
TGI_GENERATION = {
    "error": "Request failed during generation: Server error: CUDA OOM",
    "error_type": "generation",
}
TGI_OVERLOADED = {"error": "Model is overloaded", "error_type": "overloaded"}


@pytest.mark.parametrize(
    ("kind", "payload", "expected"),
    [
        ("openai-chat", TGI_VALIDATION, "invalid_request"),
        ("openai-chat", VLLM_BAD_REQUEST, "invalid_request"),
        ("openai-chat", OPENAI_INVALID, "invalid_request"),
        ("openai-chat", TGI_GENERATION, "server"),
        ("openai-chat", TGI_OVERLOADED, "overloaded"),
        ("openai-responses", RESPONSES_INVALID, "invalid_request"),
        ("anthropic", ANTHROPIC_INVALID, "invalid_request"),
    ],
    ids=[
        "tgi-string-validation",
        "vllm-top-level",
        "openai-object",
        "tgi-generation",
        "tgi-overloaded",
        "responses-error-event",
        "anthropic-error-event",
    ],
)
def test_an_in_stream_error_is_classified_like_the_same_http_error(
    kind: str, payload: dict[str, Any], expected: str
) -> None:
    status = {"invalid_request": 400, "server": 500, "overloaded": 503}[expected]
    as_http = _fail(kind, _json(status, payload))
    in_stream = _fail(kind, _event("error", payload) if kind == "anthropic" else _data(payload))
    assert (as_http.kind, in_stream.kind) == (expected, expected)
    assert in_stream.transient == (expected != "invalid_request")


@pytest.mark.parametrize("kind", ["openai-responses", "anthropic"])
def test_an_untyped_error_event_fails_the_stream_in_every_adapter(kind: str) -> None:
    # Compatible servers behind the Responses / Messages shapes may send the
    # chat-style {"error": ...} with no event type; it is an error, not noise.
    reply = _data({"error": {"message": "Invalid 'input': empty", "type": "invalid_request_error"}})
    assert _fail(kind, reply).kind == "invalid_request"
    assert _fail(kind, _data(TGI_VALIDATION)).kind == "invalid_request"


def test_an_in_stream_error_is_never_network() -> None:
    # llama.cpp's old error field with an HTTP-like 408 code: the server was
    # reached and answered, so a timeout it reports is its own (server).
    err = _fail("openai-chat", _field({"code": 408, "message": "request timed out"}))
    assert err.kind == "server"


def test_a_string_error_after_content_is_still_classified() -> None:
    reply = _data(
        {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {
            "error": "Input validation error: `top_p` must be > 0.0 and < 1.0",
            "error_type": "validation",
        },
    )
    assert _fail("openai-chat", reply).kind == "invalid_request"


# ---- item 24: context overflow, every server and shape ---------------------------------

CONTEXT_CASES: list[tuple[str, str, Reply]] = [
    (
        "openai 400 code",
        "openai-chat",
        _json(
            400,
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. However, "
                    "your messages resulted in 130501 tokens. Please reduce the length of the "
                    "messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            },
        ),
    ),
    (
        "openai responses in-stream",
        "openai-responses",
        _data(
            {
                "type": "response.failed",
                "response": {
                    "status": "failed",
                    "error": {
                        "code": "context_length_exceeded",
                        "message": "Your input exceeds the context window of this model. "
                        "Please adjust your input and try again.",
                    },
                },
            }
        ),
    ),
    (
        "anthropic 400 prompt is too long",
        "anthropic",
        _json(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210873 tokens > 200000 maximum",
                },
            },
        ),
    ),
    (
        "anthropic 400 input + max_tokens",
        "anthropic",
        _json(
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: 197000 + "
                    "8192 > 200000, decrease input length or `max_tokens` and try again",
                },
            },
        ),
    ),
    (
        "anthropic in-stream event",
        "anthropic",
        _event(
            "error",
            {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long"},
            },
        ),
    ),
    (
        "llama.cpp 400 exceed_context_size_error",
        "openai-chat",
        _json(
            400,
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 5120,
                    "n_ctx": 4096,
                }
            },
        ),
    ),
    (
        "llama.cpp type only",
        "openai-chat",
        _json(400, {"error": {"code": 400, "message": "", "type": "exceed_context_size_error"}}),
    ),
    (
        "llama.cpp old error field in 200 stream",
        "openai-chat",
        _field(
            {
                "code": 500,
                "message": "the request exceeds the available context size, try increasing the "
                "context size or enable context shift",
                "type": "exceed_context_size_error",
            }
        ),
    ),
    (
        "llama.cpp in-stream data error",
        "openai-chat",
        _data(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                }
            }
        ),
    ),
    (
        "vllm 400 top-level",
        "openai-chat",
        _json(
            400,
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens (4000 in the messages, 1000 in the completion). Please "
                "reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            },
        ),
    ),
    (
        "vllm 400 decoder prompt",
        "openai-chat",
        _json(
            400,
            {
                "error": {
                    "message": "The decoder prompt (length 9000) is longer than the maximum "
                    "model length of 8192. Make sure that `max_model_len` is no smaller than the "
                    "number of text tokens.",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
        ),
    ),
    (
        "vllm 500",
        "openai-chat",
        _json(
            500,
            {
                "object": "error",
                "message": "This model's maximum context length is 32768 tokens. However, you "
                "requested 33000 tokens in the messages.",
                "type": "InternalServerError",
                "code": 500,
            },
        ),
    ),
    (
        "ollama 400 string",
        "openai-chat",
        _json(400, {"error": "the input length exceeds the context length"}),
    ),
    (
        "ollama 500 object",
        "openai-chat",
        _json(
            500,
            {
                "error": {
                    "message": "input length exceeds the context length",
                    "type": "api_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
    ),
    (
        "lm studio 400 keep the first",
        "openai-chat",
        _json(
            400,
            {
                "error": "Trying to keep the first 5045 tokens when context the overflows. "
                "However, the model is loaded with context length of only 4096 tokens, which is "
                "not enough. Try to load the model with a larger context length, or provide a "
                "shorter input"
            },
        ),
    ),
    (
        "lm studio in-stream",
        "openai-chat",
        _data({"error": {"message": "Input length 6491 exceeds context length 1500"}}),
    ),
    (
        "n_ctx text 500",
        "openai-chat",
        Reply(status=500, content_type="text/plain", body=b"n_prompt_tokens (5000) > n_ctx (4096)"),
    ),
    (
        "tgi 422 inputs + max_new_tokens",
        "openai-chat",
        _json(
            422,
            {
                "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= "
                "4096. Given: 4000 `inputs` tokens and 1000 `max_new_tokens`",
                "error_type": "validation",
            },
        ),
    ),
    (
        "tgi in-stream inputs must have less than",
        "openai-chat",
        _data(
            {
                "error": "Input validation error: `inputs` must have less than 4000 tokens. "
                "Given: 4500",
                "error_type": "validation",
            }
        ),
    ),
    (
        "sglang 400",
        "openai-chat",
        _json(
            400,
            {
                "object": "error",
                "message": "The input (5000 tokens) is longer than the model's context length "
                "(4096 tokens).",
                "type": "BadRequestError",
                "code": 400,
            },
        ),
    ),
    (
        "mistral 400",
        "openai-chat",
        _json(
            400,
            {
                "object": "error",
                "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
                "with 32768 maximum context length",
                "type": "invalid_request_error",
                "code": None,
            },
        ),
    ),
    (
        "gemini openai-compat 400",
        "openai-chat",
        _json(
            400,
            [
                {
                    "error": {
                        "code": 400,
                        "message": "The input token count (1234567) exceeds the maximum number "
                        "of tokens allowed (1048576).",
                        "status": "INVALID_ARGUMENT",
                    }
                }
            ],
        ),
    ),
    (
        "xai 400",
        "openai-chat",
        _json(
            400,
            {
                "code": "Client specified an invalid argument",
                "error": "This model's maximum prompt length is 131072 but the request contains "
                "140012 tokens.",
            },
        ),
    ),
    (
        "413 plain text",
        "openai-chat",
        Reply(
            status=413,
            content_type="text/plain",
            body=b"Request too large: the prompt exceeds the context window",
        ),
    ),
]


@pytest.mark.parametrize(
    ("kind", "reply"),
    [(k, r) for _, k, r in CONTEXT_CASES],
    ids=[name for name, _, _ in CONTEXT_CASES],
)
def test_context_overflow_is_recognised_in_every_shape(kind: str, reply: Reply) -> None:
    err = _fail(kind, reply)
    assert (err.kind, err.transient) == ("context_length", False), err.detail


@pytest.mark.parametrize(
    "message",
    [
        "Invalid 'messages[2].tool_calls[0].id': string too long. Expected a string with "
        "maximum length 40, but got a string with length 46 instead.",
        "max_tokens must be at least 1, got 0.",
        "Unsupported parameter: 'temperature' is not supported with this model.",
    ],
)
def test_other_length_errors_are_not_context_overflow(message: str) -> None:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    assert _fail("openai-chat", _json(400, body)).kind == "invalid_request"


# ---- item 12b: deterministic protocol mismatches ---------------------------------------


def test_https_to_a_plain_http_server_fails_at_once_with_a_hint() -> None:
    with ReplayServer([Reply()], repeat_last=True) as server:
        plain = server.url
        origin = plain.replace("http://", "https://")
        err = anyio.run(_run, "openai-chat", origin + "/v1")
    assert err is not None and (err.kind, err.transient) == ("protocol", False)
    assert err.detail.startswith(
        f"the server at {origin} does not speak TLS — try {plain} in --base-url"
    )


NOT_FOUND_BODIES = {
    "ollama": Reply(status=404, content_type="text/plain", body=b"404 page not found"),
    "vllm": _json(404, {"detail": "Not Found"}),
    "llama.cpp": _json(
        404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
    ),
    # LM Studio answers an unknown endpoint with HTTP 200 ("Returning 200 anyway")
    "lm studio": _json(200, {"error": "Unexpected endpoint or method. (POST /v1/responses)"}),
}


@pytest.mark.parametrize("server_name", list(NOT_FOUND_BODIES))
def test_an_api_shape_the_server_does_not_serve_fails_at_once_with_a_hint(server_name: str) -> None:
    with ReplayServer([NOT_FOUND_BODIES[server_name]], repeat_last=True) as server:
        err = anyio.run(_run, "openai-responses", server.url + "/v1")
        url = server.url
    assert err is not None and (err.kind, err.transient) == ("protocol", False)
    assert err.detail.startswith(
        f"the server at {url} does not serve /v1/responses — check --base-url / --provider"
    )


def test_a_base_url_missing_v1_gets_a_hint_naming_v1() -> None:
    with ReplayServer([_json(404, {"detail": "Not Found"})]) as server:
        err = anyio.run(_run, "openai-chat", server.url)
        url = server.url
    assert err is not None and err.kind == "protocol"
    assert err.detail.startswith(
        f"the server at {url} does not serve /chat/completions — check --base-url "
        "(does it need /v1?) / --provider"
    )


def test_an_unknown_model_is_not_mistaken_for_a_wrong_endpoint() -> None:
    body = {
        "error": {
            "message": "The model `gpt-9` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
    }
    with ReplayServer([_json(404, body)]) as server:
        err = anyio.run(_run, "openai-chat", server.url + "/v1")
    assert err is not None and err.kind == "not_found"
    assert "does not serve" not in err.detail and "gpt-9" in err.detail


def test_mind_exec_does_not_retry_a_wrong_endpoint(tmp_path: Path) -> None:
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update({"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "3"})
    reply = Reply(status=404, content_type="text/plain", body=b"404 page not found")
    with ReplayServer([reply], repeat_last=True) as server:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "mind.shell.cli",
                "exec",
                "--provider",
                "openai-responses",
                "--base-url",
                server.url + "/v1",
                "--model",
                "m",
                "--approval",
                "never",
                "--cwd",
                str(tmp_path),
                "hello",
            ],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        requests = len(server.requests)
    assert proc.returncode != 0
    assert requests == 1, proc.stderr
    assert "does not serve /v1/responses — check --base-url / --provider" in proc.stderr
    assert "retrying" not in proc.stderr
