"""Provider failure mapping: HTTP status / error body / in-stream error / transport
error -> FailureKind, for every adapter.

Size: one classification function and the tables it reads (context overflow,
invalid request, endpoint hints) are kept together on purpose: the issue
asks for one owner of failure mapping; the tables could move to
``failure_tables`` if they keep growing.

Everything that decides a :data:`~mind.errors.FailureKind` lives in
:func:`classify_failure` (one tested function); the helpers
here only extract its inputs from the shapes servers send, over HTTP or
inside a 200 stream alike (docs/design/providers.md §7), and add a one-line
hint when the server does not speak the configured API (docs/design/providers.md §3).

Error shapes handled::

    OpenAI / compatible:  {"error": {"message", "type", "code": str|int|null, "param"}}
    vLLM (older), SGLang: {"object": "error", "message", "type": "BadRequestError", "code": 400}
    TGI:                  {"error": "plain string", "error_type": "validation"}
    FastAPI (vLLM, ...):  {"detail": "plain string"} | {"detail": [{"loc": [...], "msg"}]}
    llama.cpp:            {"error": {"code": 400, "message", "type": "exceed_context_size_error"}}
    Gemini compat:        [{"error": {"code": 400, "message", "status": "INVALID_ARGUMENT"}}]
    Anthropic:            {"type": "error", "error": {"type": "overloaded_error", "message"}}
    Responses stream:     {"type": "error", "code", "message", "param"}
    Responses failed:     {"type": "response.failed", "response": {"error": {...} | null}}
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from mind.errors import FailureKind, ProviderError
from mind.shell.base_url import endpoint_path, origin
from mind.shell.providers.server_json import load_json
from mind.shell.redact import redact

CONTEXT_OVERFLOW_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # (regular expression, case-insensitive; where the wording comes from)
    (r"context[_ ]length", "OpenAI/Groq code context_length_exceeded; LM Studio, Ollama, SGLang"),
    (r"maximum context", "OpenAI, vLLM, DeepSeek, OpenRouter, Mistral 'maximum context length'"),
    (r"context window", "OpenAI Responses 'exceeds the context window'; llama-cpp-python"),
    (r"exceeds? (?:the )?available context size", "llama.cpp server (exceed_context_size_error)"),
    (r"exceeds? (?:the )?context", "Ollama 'the input length exceeds the context length'"),
    (r"exceed context limit", "Anthropic 'input length and `max_tokens` exceed context limit'"),
    (r"prompt is too long", "Anthropic 'prompt is too long: N tokens > M maximum'"),
    (r"when context the overflows", "LM Studio 'Trying to keep the first N tokens when ...'"),
    (r"\bn_ctx\b", "llama.cpp / LM Studio messages naming the context size n_ctx"),
    (r"longer than the maximum model length", "vLLM 'The decoder prompt (length N) is ...'"),
    (r"`inputs` tokens \+ `max_new_tokens` must be", "TGI input validation"),
    (r"`inputs` must have less than \d+ tokens", "TGI input validation"),
    (r"input token count.{0,40}exceeds the maximum number of tokens", "Gemini OpenAI compat"),
    (r"maximum prompt length", "xAI 'This model's maximum prompt length is N'"),
    (r"too many tokens in (?:the )?prompt", "compatible servers"),
    (r"input is too long", "Amazon Bedrock 'Input is too long for requested model'"),
    (
        r"too big compared to KV size",
        "llama.cpp (older) 'Input prompt is too big compared to KV size' at HTTP 500",
    ),
)
"""Wordings of a context overflow, one table (docs/design/providers.md §7).

Any match in an error's message (or a non-JSON body) makes the failure
``context_length`` whatever the HTTP status (400, 413, 422, 500) or stream
shape carries it. Codes/types mapping to ``context_length`` are in
``_TOKEN_KINDS`` (``context_length_exceeded``, ``exceed_context_size_error``).
"""

_CONTEXT_RE: Final = re.compile(
    "|".join(f"(?:{pattern})" for pattern, _ in CONTEXT_OVERFLOW_PATTERNS), re.IGNORECASE
)

_N = r"(\d[\d,]*)"  # a token count as servers print it (digits, maybe thousands commas)

CONTEXT_WINDOW_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # (regular expression whose one group is the window in tokens; where it comes from)
    (
        rf"maximum context length is {_N} tokens",
        "OpenAI, vLLM, DeepSeek 'This model's maximum context length is 8192 tokens. However, ...'",
    ),
    (rf"prompt is too long: \d[\d,]* tokens > {_N} maximum", "Anthropic 'prompt is too long'"),
    (
        rf"exceed context limit: \d[\d,]* \+ \d[\d,]* > {_N}",
        "Anthropic 'input length and `max_tokens` exceed context limit: 195000 + 8192 > 200000'",
    ),
    (
        rf"longer than the maximum model length of {_N}",
        "vLLM 'The decoder prompt (length N) is longer than the maximum model length of M'",
    ),
    (rf"exceed context window of {_N}", "llama-cpp-python 'Requested tokens (N) exceed ...'"),
    (rf"context length of only {_N} tokens", "LM Studio '... loaded with context length of only'"),
    (rf"{_N} maximum context length", "Mistral '... too large for model with 32768 maximum ...'"),
    (rf"maximum prompt length is {_N}", "xAI 'This model's maximum prompt length is 131072'"),
    (
        rf"exceeds the maximum number of tokens allowed \({_N}\)",
        "Gemini OpenAI compat 'The input token count (N) exceeds the maximum ... (1048576)'",
    ),
    (rf"`max_new_tokens` must be <= {_N}", "TGI '`inputs` tokens + `max_new_tokens` must be <='"),
    (rf"`inputs` must have less than {_N} tokens", "TGI input validation"),
)
"""Context-length wordings that state the model's window, one table
(docs/design/context.md §1). Only a number the server wrote is taken; an
overflow that names no window (OpenAI Responses 'exceeds the context window',
llama.cpp's KV-size wording) leaves it unknown. llama.cpp's
``exceed_context_size_error`` carries it as a field, ``n_ctx``
(:func:`stated_window`)."""

_WINDOW_RES: Final = tuple(
    re.compile(pattern, re.IGNORECASE) for pattern, _ in CONTEXT_WINDOW_PATTERNS
)

MAX_STATED_WINDOW: Final = 100_000_000
"""A stated window above this many tokens is not believed (a misread number)."""


REQUEST_TOKENS_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # (regular expression whose one group is the refused request's tokens; where it comes from)
    (rf"your messages resulted in {_N} tokens", "OpenAI '... your messages resulted in N tokens'"),
    (rf"\({_N} in the messages", "vLLM '... you requested N tokens (M in the messages, ...)'"),
    (rf"prompt is too long: {_N} tokens", "Anthropic 'prompt is too long: N tokens > M maximum'"),
    (rf"exceed context limit: {_N} \+", "Anthropic '... exceed context limit: N + M > W'"),
    (rf"prompt \(length {_N}\)", "vLLM 'The decoder prompt (length N) is longer than ...'"),
    (rf"request contains {_N} tokens", "xAI '... but the request contains N tokens'"),
    (rf"input token count \({_N}\)", "Gemini OpenAI compat 'The input token count (N) ...'"),
    (rf"Given: {_N} `inputs` tokens", "TGI 'Given: N `inputs` tokens and M `max_new_tokens`'"),
    (rf"Prompt contains {_N} tokens", "Mistral 'Prompt contains N tokens and 0 draft tokens'"),
)
"""Context-length wordings that state the refused request's size in tokens
(llama.cpp's ``exceed_context_size_error`` carries it as ``n_prompt_tokens``)."""

_REQUEST_RES: Final = tuple(
    re.compile(pattern, re.IGNORECASE) for pattern, _ in REQUEST_TOKENS_PATTERNS
)


def _stated(
    message: str,
    fields: Mapping[str, Any] | None,
    field: str,
    patterns: tuple[re.Pattern[str], ...],
) -> int | None:
    found: int | None = None
    raw = fields.get(field) if fields is not None else None
    if isinstance(raw, int) and not isinstance(raw, bool):
        found = raw
    else:
        for pattern in patterns:
            match = pattern.search(message)
            if match:
                found = int(match.group(1).replace(",", ""))
                break
    if found is None or not 0 < found <= MAX_STATED_WINDOW:
        return None
    return found


def stated_request_tokens(message: str, fields: Mapping[str, Any] | None = None) -> int | None:
    """The refused request's size in tokens a context-length error states, or
    ``None`` (:data:`REQUEST_TOKENS_PATTERNS`; llama.cpp's integer
    ``n_prompt_tokens`` in ``fields``). Never a guess; a number above
    :data:`MAX_STATED_WINDOW` is not believed."""
    return _stated(message, fields, "n_prompt_tokens", _REQUEST_RES)


def stated_window(message: str, fields: Mapping[str, Any] | None = None) -> int | None:
    """The context window in tokens a context-length error states, or ``None``.

    Args:
        message: the error's human text (:data:`CONTEXT_WINDOW_PATTERNS`).
        fields: the error object, for llama.cpp's integer ``n_ctx``.

    Returns:
        The first stated window in 1..:data:`MAX_STATED_WINDOW`; ``None`` when
        the error does not state one (never a guess).
    """
    return _stated(message, fields, "n_ctx", _WINDOW_RES)


INVALID_REQUEST_PATTERNS: Final[tuple[tuple[str, str], ...]] = (
    # (regular expression, case-insensitive; where the wording comes from)
    (
        r"invalid schema for function",
        "compatible servers checking tool schemas: 'Invalid"
        " schema for function shell: validation failed' (plain string error)",
    ),
)
"""Wordings of a request that can never succeed as sent, at any status.

A match makes the failure ``invalid_request`` where the status alone (5xx)
or an in-stream error would say ``server``: retrying the same frozen request
cannot help.
"""

_INVALID_RE: Final = re.compile(
    "|".join(f"(?:{pattern})" for pattern, _ in INVALID_REQUEST_PATTERNS), re.IGNORECASE
)

_VALIDATION_RE: Final = re.compile(r"\bvalidation (?:error|failed)\b", re.IGNORECASE)
"""In-stream wording of a rejected request (TGI "Input validation error: ...")."""

_NO_ENDPOINT_RE: Final = re.compile(r"unexpected endpoint or method", re.IGNORECASE)
"""LM Studio's answer (HTTP 200, "Returning 200 anyway") to a path it does not serve."""

_TOKEN_KINDS: dict[str, FailureKind] = {
    # auth
    "authentication_error": "auth",
    "permission_error": "auth",
    "permission_denied": "auth",
    "invalid_api_key": "auth",
    "unauthorized": "auth",
    "forbidden": "auth",
    # not found
    "not_found_error": "not_found",
    "not_found": "not_found",
    "model_not_found": "not_found",
    # rate limits / quota (insufficient_quota: treated as rate limited, bounded retries)
    "rate_limit_error": "rate_limited",
    "rate_limit_exceeded": "rate_limited",
    "rate_limited": "rate_limited",
    "insufficient_quota": "rate_limited",
    "too_many_requests": "rate_limited",
    # overload
    "overloaded_error": "overloaded",
    "overloaded": "overloaded",
    "server_overloaded": "overloaded",
    # context
    "context_length_exceeded": "context_length",
    "exceed_context_size_error": "context_length",  # llama.cpp
    # server
    "api_error": "server",
    "server_error": "server",
    "internal_error": "server",
    "internal_server_error": "server",
    "service_unavailable": "server",
    "timeout": "server",
    "internalservererror": "server",  # vLLM
    "generation": "server",  # TGI
    "incomplete_generation": "server",  # TGI
    "internal": "server",  # Gemini status
    "deadline_exceeded": "server",  # Gemini status
    "unavailable_error": "overloaded",  # llama.cpp: model still loading
    "unavailable": "overloaded",  # Gemini status
    "resource_exhausted": "rate_limited",  # Gemini status
    "unauthenticated": "auth",  # Gemini status
    "notfounderror": "not_found",  # vLLM
    # request: deterministic, never retried
    "invalid_request_error": "invalid_request",
    "invalid_request": "invalid_request",
    "request_too_large": "invalid_request",
    "invalid_prompt": "invalid_request",
    "string_above_max_length": "invalid_request",  # one field too long (e.g. a call id)
    "invalid_value": "invalid_request",
    "invalid_type": "invalid_request",
    "missing_required_parameter": "invalid_request",
    "unsupported_parameter": "invalid_request",
    "unsupported_value": "invalid_request",
    "badrequesterror": "invalid_request",  # vLLM, SGLang
    "bad_request": "invalid_request",
    "validation": "invalid_request",  # TGI error_type
    "validation_error": "invalid_request",
    "template_error": "invalid_request",  # TGI
    "tool_error": "invalid_request",  # TGI
    "not_supported_error": "invalid_request",  # llama.cpp
    "invalid_argument": "invalid_request",  # Gemini status
    "failed_precondition": "invalid_request",  # Gemini status
}

# Tokens that identify the failure more precisely than an HTTP 400/5xx status.
_SPECIFIC: frozenset[FailureKind] = frozenset(
    {"auth", "not_found", "rate_limited", "overloaded", "context_length"}
)

MAX_DETAIL_CHARS = 2000
"""Raw provider text kept in ``ProviderError.detail`` is cut to this length."""


def _status_kind(status: int) -> FailureKind | None:
    if status in (401, 403):
        return "auth"
    if status in (404, 405):
        # 405: the path exists with another method, i.e. another API shape;
        # not about the model, it becomes ``protocol`` (classify_failure)
        return "not_found"
    if status == 408:
        return "network"
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if 500 <= status <= 599:
        return "server"
    if 400 <= status <= 499:
        return "invalid_request"
    return None


def classify_failure(
    *,
    status: int | None,
    code: str | int | None = None,
    error_type: str | None = None,
    message: str = "",
    param: str | None = None,
) -> FailureKind:
    """Decide the failure kind of one provider error, from HTTP or from a stream.

    Precedence: a context-length code or message wins (400 "prompt is too
    long" is ``context_length``, not ``invalid_request``;
    :data:`CONTEXT_OVERFLOW_PATTERNS`); then a specific code/type token
    (auth, not_found — e.g. Responses 400 ``model_not_found``,
    rate_limited, overloaded); then the HTTP status (401/403 auth, 404/405
    not_found, 408 network, 429 rate_limited, 529 overloaded, 5xx server,
    other 4xx invalid_request) — except that a wording of
    :data:`INVALID_REQUEST_PATTERNS` turns ``server`` into
    ``invalid_request``; then a generic token (``server_error`` →
    server, ``invalid_request_error`` / TGI ``validation`` → invalid_request).
    An in-stream error is classified the same way (docs/design/providers.md §7), with
    its numeric ``code`` standing for the status; it is never ``network``
    (the server was reached and answered); naming a ``param``, or saying
    "validation error/failed", makes it ``invalid_request``; LM Studio's
    "Unexpected endpoint or method" is ``protocol``; with nothing
    recognisable it is ``server`` (docs/design/providers.md §7). Last, a
    ``not_found`` whose code and message do not name the model is
    ``protocol``: the path (404) or method (405) is not served, i.e. the
    server speaks another API or ``--base-url`` is wrong (docs/design/providers.md §3).

    Args:
        status: HTTP status, or None for an error inside a 200 stream. A
            numeric in-body ``code`` (OpenRouter ``"code": 429``) is used as
            the status when ``status`` is None or 200.
        code: the error's ``code`` (string or integer) if any.
        error_type: the error's ``type`` (or TGI ``error_type``, Gemini
            ``status``) if any.
        message: human text of the error (context-length phrases, ...).
        param: the request field an error names (OpenAI ``param``), if any.

    Returns:
        The failure kind.
    """
    kind = _classify(status=status, code=code, error_type=error_type, message=message, param=param)
    if kind == "not_found" and not _about_model(code, message):
        return "protocol"
    return kind


def _classify(
    *,
    status: int | None,
    code: str | int | None,
    error_type: str | None,
    message: str,
    param: str | None,
) -> FailureKind:
    int_code: int | None = None
    if isinstance(code, int) and not isinstance(code, bool):
        int_code = code
    elif isinstance(code, str) and code.isdigit() and len(code) == 3:
        int_code = int(code)
    tokens = [t.lower() for t in (code, error_type) if isinstance(t, str) and t]
    token_kinds = [_TOKEN_KINDS[t] for t in tokens if t in _TOKEN_KINDS]

    if "context_length" in token_kinds or _CONTEXT_RE.search(message or ""):
        return "context_length"
    for kind in token_kinds:
        if kind in _SPECIFIC:
            return kind
    invalid_wording = _INVALID_RE.search(message or "") is not None
    in_stream = status is None or status == 200
    effective_status = int_code if in_stream else status
    if effective_status is not None:
        by_status = _status_kind(effective_status)
        if by_status == "network" and in_stream:
            by_status = "server"
        if by_status == "server" and invalid_wording:
            return "invalid_request"
        if by_status is not None:
            return by_status
    if invalid_wording:
        return "invalid_request"
    if token_kinds:
        return token_kinds[0]
    if in_stream:
        if _NO_ENDPOINT_RE.search(message or ""):
            return "protocol"
        if param or _VALIDATION_RE.search(message or ""):
            return "invalid_request"
    return "server"


def endpoint_hint(url: str) -> str:
    """One line saying the server at ``url`` does not serve its path (item 12b).

    ``"the server at http://h:p does not serve /v1/responses — check
    --base-url / --provider"``; when the path has no version segment
    (``/v1``, ``/v1beta``) the hint asks whether ``--base-url`` needs ``/v1``.
    """
    path = endpoint_path(url)
    check = "--base-url"
    if not re.search(r"/v\d+[a-z0-9]*/", path):
        check = "--base-url (does it need /v1?)"
    return f"the server at {origin(url)} does not serve {path} — check {check} / --provider"


def _about_model(code: str | int | None, message: str) -> bool:
    """True when a not-found error names the model, not the endpoint."""
    return code == "model_not_found" or "model" in message.lower()


def _hinted(kind: FailureKind, detail: str, url: str | None) -> str:
    if kind == "protocol" and url:
        return f"{endpoint_hint(url)}; {detail}"
    return detail


def _redact(text: str, secret: str | None) -> str:
    """``text`` through the one redaction rule, cut to :data:`MAX_DETAIL_CHARS`
    (cut after masking: a cut must not split a secret out of reach)."""
    return redact(text, (secret,))[:MAX_DETAIL_CHARS]


def error_from_payload(
    payload: Any,
    *,
    status: int | None,
    retry_after_s: float | None = None,
    api_key: str | None = None,
    url: str | None = None,
) -> ProviderError:
    """Build a ProviderError from an error object of any known shape.

    Args:
        payload: a parsed JSON body or event (see module docstring), the
            inner error object, a plain string (TGI), a one-element list
            (Gemini), or None.
        status: HTTP status, or None for an in-stream error.
        retry_after_s: server-requested delay already parsed from headers.
        api_key: a secret to redact from ``detail`` (never logged).
        url: the request URL; a ``not_found`` that is not about the model
            gets :func:`endpoint_hint` at the start of ``detail``.

    Returns:
        The error to raise (kind from :func:`classify_failure`).
    """
    if isinstance(payload, list) and payload and isinstance(payload[0], Mapping):
        payload = payload[0]
    err: Any = payload
    code: str | int | None = None
    error_type: str | None = None
    param: str | None = None
    message = ""
    if isinstance(payload, Mapping):
        if "error" in payload:
            err = payload["error"]
        elif isinstance(payload.get("response"), Mapping) and "error" in payload["response"]:
            err = payload["response"]["error"]
        elif _fastapi_detail(payload):
            err = payload["detail"]
    if isinstance(err, list) and err and all(isinstance(e, Mapping) for e in err):
        # FastAPI request validation: [{"loc": ["body", "tools"], "msg", "type"}]
        message = "; ".join(str(e.get("msg", "")) for e in err)
        locs = [e.get("loc") for e in err if isinstance(e.get("loc"), list) and e.get("loc")]
        param = ".".join(str(x) for x in locs[0]) if locs else None
        detail = json.dumps(err, ensure_ascii=False, default=str)
    elif isinstance(err, Mapping):
        raw_code = err.get("code")
        if isinstance(raw_code, str | int) and not isinstance(raw_code, bool):
            code = raw_code
        raw_type = err.get("type")
        if not isinstance(raw_type, str) or not raw_type:
            raw_type = err.get("status")  # Gemini: "INVALID_ARGUMENT"
        if isinstance(raw_type, str):
            error_type = raw_type
        raw_param = err.get("param")
        param = raw_param if isinstance(raw_param, str) and raw_param else None
        raw_msg = err.get("message")
        message = raw_msg if isinstance(raw_msg, str) else ""
        detail = json.dumps(err, ensure_ascii=False)
    elif isinstance(err, str):
        message = err
        detail = err
        if isinstance(payload, Mapping):
            # TGI: {"error": "...", "error_type": "validation"}
            sibling = payload.get("error_type")
            error_type = sibling if isinstance(sibling, str) else None
            raw_code = payload.get("code")
            if isinstance(raw_code, str | int) and not isinstance(raw_code, bool):
                code = raw_code
    else:
        detail = "" if err is None else json.dumps(err, ensure_ascii=False, default=str)
    kind = classify_failure(
        status=status, code=code, error_type=error_type, message=message, param=param
    )
    detail = _hinted(kind, detail, url)
    window = tokens = None
    if kind == "context_length":
        fields = err if isinstance(err, Mapping) else None
        window = stated_window(message, fields)
        tokens = stated_request_tokens(message, fields)
    return ProviderError(
        kind,
        detail=_redact(detail, api_key),
        status=status,
        retry_after_s=retry_after_s,
        context_window=window,
        request_tokens=tokens,
    )


def _fastapi_detail(payload: Mapping[str, Any]) -> bool:
    """True for FastAPI's error body (vLLM, many Python servers): ``detail`` as
    the only key, a string or a list of validation errors."""
    detail = payload.get("detail")
    return set(payload) == {"detail"} and isinstance(detail, str | list)


def is_error_payload(payload: Any) -> bool:
    """True when a 200 JSON body or stream event is an error object of a known shape.

    Shapes: ``{"error": ...}`` (not null), ``{"object": "error"}`` (vLLM,
    SGLang), ``{"type": "error"}`` (Anthropic), FastAPI ``{"detail": ...}``
    (module docstring). Such a body is classified by
    :func:`error_from_payload`; any other body that is not the configured
    API's shape is a :func:`protocol_error`.
    """
    if not isinstance(payload, Mapping):
        return False
    return (
        payload.get("error") is not None
        or payload.get("object") == "error"
        or payload.get("type") == "error"
        or _fastapi_detail(payload)
    )


API_NAMES: Final[dict[str, str]] = {
    "openai-chat": "the Chat Completions API",
    "openai-responses": "the Responses API",
    "anthropic": "the Anthropic Messages API",
}
"""Human name of the API each HTTP provider kind speaks (for hints)."""

_RESPONSES_TYPE_RE: Final = re.compile(r"^response\.")
_ANTHROPIC_TYPES: Final = frozenset(
    {"message_start", "content_block_start", "content_block_delta", "message_delta", "message"}
)


def guess_api(payload: Any) -> str | None:
    """The provider kind whose wire shape ``payload`` has, or None.

    ``payload`` is a parsed JSON body or SSE event data (``"[DONE]"`` stays a
    string): ``choices`` / ``chat.completion*`` / ``[DONE]`` → openai-chat;
    ``object: response`` or a ``response.*`` event type → openai-responses;
    Anthropic message / stream event types → anthropic.
    """
    if payload == "[DONE]":
        return "openai-chat"
    if not isinstance(payload, Mapping):
        return None
    obj = payload.get("object")
    kind = payload.get("type")
    if isinstance(payload.get("choices"), list) or (
        isinstance(obj, str) and obj.startswith("chat.completion")
    ):
        return "openai-chat"
    if obj == "response" or (isinstance(kind, str) and _RESPONSES_TYPE_RE.match(kind)):
        return "openai-responses"
    if kind in _ANTHROPIC_TYPES:
        return "anthropic"
    return None


def protocol_error(provider: str, answered: str, *, looks_like: str | None = None) -> ProviderError:
    """A 200 answer that is not ``provider``'s API: deterministic, never retried.

    Args:
        provider: the configured provider kind (a key of :data:`API_NAMES`).
        answered: what came, completing "the server answered ...", e.g.
            ``"JSON, not an event stream"``.
        looks_like: the provider kind the answer looks like
            (:func:`guess_api`), named in the hint when it is another one.

    Returns:
        A ``protocol`` ProviderError whose detail is the hint, e.g. "the
        server answered JSON, not an event stream — does it speak the
        Responses API? check --provider / --base-url".
    """
    api = API_NAMES.get(provider, provider)
    detail = f"the server answered {answered} — does it speak {api}? check --provider / --base-url"
    if looks_like is not None and looks_like != provider:
        detail += (
            f" (it looks like {API_NAMES.get(looks_like, looks_like)}: --provider {looks_like})"
        )
    return ProviderError("protocol", detail=detail, status=200)


def malformed_event(data: str) -> ProviderError:
    """A stream data event that is not JSON, before the stream's end:
    ``protocol`` — the server breaks the event format, so the same request
    gets the same answer and is never retried (docs/design/providers.md §7).
    A torn *last* event at EOF is not this: the end-of-stream rules decide it.

    Args:
        data: the event's data (its first 200 characters are quoted).
    """
    return ProviderError("protocol", detail=f"a stream event is not JSON: {data[:200]}", status=200)


def error_from_http(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    api_key: str | None = None,
    now: datetime | None = None,
    url: str | None = None,
) -> ProviderError:
    """Map a non-2xx HTTP response to a ProviderError (docs/design/providers.md §3).

    Args:
        status: the HTTP status code.
        body: the response body (already content-decoded); JSON or text.
        headers: response headers (case-insensitive mapping, keys lower-case
            if a plain dict).
        api_key: a secret to redact from ``detail``.
        now: the current time, for an HTTP-date ``retry-after``.
        url: the request URL, for the hint of a 404/405 (item 12b).

    Returns:
        The error to raise, with ``retry_after_s`` from the headers.
    """
    retry_after_s = parse_retry_after(headers, now=now)
    text = body.decode("utf-8", errors="replace")
    try:
        payload: Any = load_json(text)
    except ValueError:
        payload = None
    if isinstance(payload, list) and payload and isinstance(payload[0], Mapping):
        payload = payload[0]  # Gemini wraps its error object in a list
    if isinstance(payload, Mapping) and (
        "error" in payload or payload.get("object") == "error" or _fastapi_detail(payload)
    ):
        return error_from_payload(
            payload, status=status, retry_after_s=retry_after_s, api_key=api_key, url=url
        )
    kind = classify_failure(status=status, message=text)
    detail = _hinted(kind, f"HTTP {status}: {text}", url)
    return ProviderError(
        kind,
        detail=_redact(detail, api_key),
        status=status,
        retry_after_s=retry_after_s,
        context_window=stated_window(text) if kind == "context_length" else None,
        request_tokens=stated_request_tokens(text) if kind == "context_length" else None,
    )


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Read the server-requested delay (docs/design/providers.md §3).

    ``retry-after-ms`` (milliseconds, Azure/OpenAI) wins over ``retry-after``
    (delta-seconds or an HTTP-date). The value is not capped here: the cap is
    :attr:`mind.effects.retry.RetryPolicy.max_retry_after_s`.

    Args:
        headers: response headers; looked up case-insensitively.
        now: the current time for an HTTP-date (defaults to the wall clock).

    Returns:
        Seconds >= 0, or None when absent or unparsable.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms.strip())
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0:
            return value / 1000.0
    ra = lowered.get("retry-after")
    if ra is None:
        return None
    ra = ra.strip()
    try:
        seconds = float(ra)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds):
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


_TLS_MISMATCH_EXEMPT: Final = (
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
    ssl.SSLCertVerificationError,
)
"""TLS errors that are not a protocol mismatch: a dropped connection (may pass)
and a certificate refusal (its own message, below)."""


def error_from_transport(
    exc: httpx.TransportError, *, url: str, body_started: bool
) -> ProviderError:
    """Map an httpx transport error (no HTTP status) to a ProviderError.

    A TLS handshake that fails on the protocol itself (``WRONG_VERSION_NUMBER``:
    HTTPS to a plain-HTTP server) is deterministic: ``protocol`` with a hint
    to use ``http://``, never retried (docs/design/providers.md §3). Other errors are
    ``network`` before the body started and ``stream_cut`` after; a refused
    certificate stays ``network`` with the verifier's reason in ``detail``.

    Args:
        exc: the error httpx raised.
        url: the request URL (for the hint).
        body_started: True once the response status was received.

    Returns:
        The error to raise.
    """
    detail = f"{type(exc).__name__}: {exc}"
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            server = origin(url)
            if isinstance(cause, ssl.SSLCertVerificationError):
                reason = cause.verify_message or cause.reason or "rejected"
                detail = f"the certificate of the server at {server} was not accepted: {reason}"
            elif not isinstance(cause, _TLS_MISMATCH_EXEMPT):
                plain = "http://" + server.partition("://")[2]
                hint = f"the server at {server} does not speak TLS — try {plain} in --base-url"
                return ProviderError("protocol", detail=f"{hint}; {detail}")
            break
        cause = cause.__cause__ or cause.__context__
    return ProviderError("stream_cut" if body_started else "network", detail=detail)
