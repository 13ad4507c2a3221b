"""Provider failure mapping: HTTP status / error body / in-stream error -> FailureKind.

Everything that decides a :data:`~mind.errors.FailureKind` lives in
:func:`classify_failure` (one tested function, STYLE "Errors"); the helpers
here only extract its inputs from the shapes servers send.

Error shapes handled::

    OpenAI / compatible:  {"error": {"message", "type", "code": str|int|null, "param"}}
    TGI:                  {"error": "plain string"}
    Anthropic:            {"type": "error", "error": {"type": "overloaded_error", "message"}}
    Responses stream:     {"type": "error", "code", "message", "param"}
    Responses failed:     {"type": "response.failed", "response": {"error": {...} | null}}
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from mind.errors import FailureKind, ProviderError
from mind.shell.providers._common import load_json

_CONTEXT_RE = re.compile(
    r"context[_ ]length|context window|maximum context|prompt is too long|"
    r"too many tokens in (?:the )?prompt|input is too long|exceeds? the context",
    re.IGNORECASE,
)

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
    "string_above_max_length": "context_length",
    # server
    "api_error": "server",
    "server_error": "server",
    "internal_error": "server",
    "internal_server_error": "server",
    "service_unavailable": "server",
    "timeout": "server",
    # request
    "invalid_request_error": "invalid_request",
    "invalid_request": "invalid_request",
    "request_too_large": "invalid_request",
    "invalid_prompt": "invalid_request",
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
    if status == 404:
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
) -> FailureKind:
    """Decide the failure kind of one provider error.

    Precedence: a context-length code or message wins (400 "prompt is too
    long" is ``context_length``, not ``invalid_request``); then a specific
    code/type token (auth, not_found — e.g. Responses 400 ``model_not_found``,
    rate_limited, overloaded); then the HTTP status (401/403 auth, 404
    not_found, 408 network, 429 rate_limited, 529 overloaded, 5xx server,
    other 4xx invalid_request); then a generic token (``server_error`` →
    server, ``invalid_request_error`` → invalid_request); an in-stream error
    with nothing recognisable is ``server`` (PROVIDER-RULES 9, 20, 21).

    Args:
        status: HTTP status, or None for an error inside a 200 stream. A
            numeric in-body ``code`` (OpenRouter ``"code": 429``) is used as
            the status when ``status`` is None or 200.
        code: the error's ``code`` (string or integer) if any.
        error_type: the error's ``type`` if any.
        message: human text of the error (used for context-length phrases).

    Returns:
        The failure kind.
    """
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
    effective_status = status
    if (status is None or status == 200) and int_code is not None:
        effective_status = int_code
    if effective_status is not None:
        by_status = _status_kind(effective_status)
        if by_status is not None:
            return by_status
    if token_kinds:
        return token_kinds[0]
    return "server"


def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        text = text.replace(secret, "[redacted]")
    return text[:MAX_DETAIL_CHARS]


def error_from_payload(
    payload: Any,
    *,
    status: int | None,
    retry_after_s: float | None = None,
    api_key: str | None = None,
) -> ProviderError:
    """Build a ProviderError from an error object of any known shape.

    Args:
        payload: a parsed JSON body or event (see module docstring), the
            inner error object, a plain string (TGI), or None.
        status: HTTP status, or None for an in-stream error.
        retry_after_s: server-requested delay already parsed from headers.
        api_key: a secret to redact from ``detail`` (never logged).

    Returns:
        The error to raise (kind from :func:`classify_failure`).
    """
    err: Any = payload
    if isinstance(payload, Mapping):
        if "error" in payload:
            err = payload["error"]
        elif isinstance(payload.get("response"), Mapping) and "error" in payload["response"]:
            err = payload["response"]["error"]
    code: str | int | None = None
    error_type: str | None = None
    message = ""
    if isinstance(err, Mapping):
        raw_code = err.get("code")
        if isinstance(raw_code, str | int) and not isinstance(raw_code, bool):
            code = raw_code
        raw_type = err.get("type")
        if isinstance(raw_type, str):
            error_type = raw_type
        raw_msg = err.get("message")
        message = raw_msg if isinstance(raw_msg, str) else ""
        detail = json.dumps(err, ensure_ascii=False)
    elif isinstance(err, str):
        message = err
        detail = err
    else:
        detail = "" if err is None else json.dumps(err, ensure_ascii=False, default=str)
    kind = classify_failure(status=status, code=code, error_type=error_type, message=message)
    return ProviderError(
        kind,
        detail=_redact(detail, api_key),
        status=status,
        retry_after_s=retry_after_s,
    )


def error_from_http(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    api_key: str | None = None,
    now: datetime | None = None,
) -> ProviderError:
    """Map a non-2xx HTTP response to a ProviderError (PROVIDER-RULES 7).

    Args:
        status: the HTTP status code.
        body: the response body (already content-decoded); JSON or text.
        headers: response headers (case-insensitive mapping, keys lower-case
            if a plain dict).
        api_key: a secret to redact from ``detail``.
        now: the current time, for an HTTP-date ``retry-after``.

    Returns:
        The error to raise, with ``retry_after_s`` from the headers.
    """
    retry_after_s = parse_retry_after(headers, now=now)
    text = body.decode("utf-8", errors="replace")
    try:
        payload: Any = load_json(text)
    except ValueError:
        payload = None
    if isinstance(payload, Mapping) and "error" in payload:
        return error_from_payload(
            payload, status=status, retry_after_s=retry_after_s, api_key=api_key
        )
    kind = classify_failure(status=status, message=text)
    return ProviderError(
        kind,
        detail=_redact(f"HTTP {status}: {text}", api_key),
        status=status,
        retry_after_s=retry_after_s,
    )


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Read the server-requested delay (PROVIDER-RULES 7).

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
