"""The model's window learned from the server's own context-length error
(docs/design/context.md §1): the number it states, never a guess."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mind.shell.providers.failures import error_from_http, error_from_payload

# Wordings as the servers send them (OpenAI, Anthropic, vLLM, llama.cpp, LM
# Studio, xAI, Gemini, TGI, Mistral) and the window each states.
STATING: list[tuple[int, Any, int]] = [
    (
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 8255 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        8192,
    ),
    (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        },
        200_000,
    ),
    (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 195000 + 8192 "
                "> 200000, decrease input length or `max_tokens` and try again",
            },
        },
        200_000,
    ),
    (
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens (4000 in the messages, 1000 in the completion).",
            "type": "BadRequestError",
            "code": 400,
        },
        4096,
    ),
    (
        500,
        {
            "detail": "The decoder prompt (length 66501) is longer than the maximum model "
            "length of 65536. Make sure that `max_model_len` is no smaller than the number "
            "of text tokens."
        },
        65_536,
    ),
    (
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 14429,
                "n_ctx": 8192,
            }
        },
        8192,
    ),
    (
        400,
        {
            "error": {
                "message": "Trying to keep the first 5000 tokens when context the overflows. "
                "However, the model is loaded with context length of only 4096 tokens, which "
                "is not enough.",
            }
        },
        4096,
    ),
    (
        400,
        {
            "error": "This model's maximum prompt length is 131072 but the request contains "
            "200000 tokens.",
            "code": "Client specified an invalid argument",
        },
        131_072,
    ),
    (
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1200000) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        1_048_576,
    ),
    (
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= "
            "4096. Given: 5000 `inputs` tokens and 100 `max_new_tokens`",
            "error_type": "validation",
        },
        4096,
    ),
    (
        400,
        {
            "object": "error",
            "message": "Prompt contains 40000 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
            "type": "invalid_request_error",
        },
        32_768,
    ),
]


@pytest.mark.parametrize(("status", "body", "window"), STATING)
def test_a_stated_window_is_learned_from_the_error(status: int, body: Any, window: int) -> None:
    err = error_from_http(status, json.dumps(body).encode(), {})
    assert (err.kind, err.context_window) == ("context_length", window)


# The refused request's size each of STATING states (LM Studio's names none).
REQUEST_SIZES = [8255, 210_000, 195_000, 4000, 66_501, 14_429, None, 200_000, 1_200_000, 5000]
REQUEST_SIZES += [40_000]


@pytest.mark.parametrize(
    ("status", "body", "tokens"),
    [(s, b, t) for (s, b, _), t in zip(STATING, REQUEST_SIZES, strict=True)],
)
def test_the_stated_size_of_the_refused_request_is_read_from_the_error(
    status: int, body: Any, tokens: int | None
) -> None:
    err = error_from_http(status, json.dumps(body).encode(), {})
    assert (err.kind, err.request_tokens) == ("context_length", tokens)


@pytest.mark.parametrize(
    "body",
    [
        # OpenAI Responses names no number; llama.cpp's older wording neither.
        {"error": {"message": "Your input exceeds the context window of this model.", "code": ""}},
        {"error": {"message": "Input prompt is too big compared to KV size"}},
        {"error": {"message": "maximum context length is 0 tokens", "code": "x"}},
    ],
)
def test_an_overflow_that_states_no_window_leaves_it_unknown(body: Any) -> None:
    err = error_from_http(400, json.dumps(body).encode(), {})
    assert (err.kind, err.context_window) == ("context_length", None)


def test_only_a_context_length_failure_carries_a_window() -> None:
    """A number in another error is not a window (a rate limit's, an auth error's)."""
    err = error_from_http(
        429, b'{"error": {"message": "maximum context length is 8192 tokens", "code": "x"}}', {}
    )
    assert err.kind == "context_length"  # the wording decides the kind first
    other = error_from_http(429, b'{"error": {"message": "limit 8192 tokens per min"}}', {})
    assert (other.kind, other.context_window) == ("rate_limited", None)


def test_a_window_stated_inside_a_stream_and_in_plain_text_is_learned() -> None:
    in_stream = error_from_payload(
        {
            "type": "error",
            "code": "context_length_exceeded",
            "message": "This model's maximum context length is 16,385 tokens.",
        },
        status=None,
    )
    assert (in_stream.kind, in_stream.context_window) == ("context_length", 16_385)
    plain = error_from_http(
        413, b"prompt is too long: 300000 tokens > 200000 maximum", {"content-type": "text/plain"}
    )
    assert (plain.kind, plain.context_window) == ("context_length", 200_000)
