"""Masking secrets in every text mind shows, journals or sends on.

:func:`redact` is the one function every provider error path, the session
banner and every internal-error message goes through before it reaches
stdout, stderr, the journal, ``--json`` events, ``index.db`` or the model
(``docs/design/secrets.md``). It masks the secrets mind knows (the configured
API key, the base URL's userinfo and query values: :func:`url_secrets`) and
the shapes a credential has whatever its value: ``Authorization: Bearer …`` /
``Basic …``, ``x-api-key: …``, ``sk-…`` tokens and URL userinfo / query
values (:func:`redact_url`, the rule for a URL shown on its own).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

import msgspec

from mind.conversation import StreamDone

MASK = "***"
"""What a masked part shows."""

WORD_MASK = "REDACTED"
"""What a masked part becomes in the strings of a round that are executed or
sent back: tool-call arguments (``***`` would be a glob the shell expands
against the working directory when the model's command runs) and call ids
and tool names (providers accept only ``[A-Za-z0-9_-]`` there on replay);
``docs/design/secrets.md``."""

_PUBLIC_QUERY_KEYS = frozenset({"api-version", "api_version", "version"})
"""Query parameters shown as they are; every other value is masked (fail
closed: a parameter of unknown meaning may be a credential)."""


def redact_url(url: str) -> str:
    """``url`` with its secrets masked as ``***``.

    Rule: a userinfo password is masked (``user:***@``); a userinfo with no
    password is masked whole (``***@``: a bare token is often sent that way);
    every query value is masked except :data:`_PUBLIC_QUERY_KEYS`; the
    fragment is dropped. Text that does not parse as a URL is masked whole,
    unless it has no ``@`` and no ``?`` (then nothing in it is userinfo or a
    query value, and the person must see which value is wrong).

    Args:
        url: any text meant to be a URL.

    Returns:
        Display text; never raises.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError:
        return url if "@" not in url and "?" not in url else MASK
    netloc = parts.netloc
    if "@" in netloc:
        where = netloc.rpartition("@")[2]
        user = MASK if parts.password is None else f"{parts.username}:{MASK}"
        netloc = f"{user}@{where}"
    query = "&".join(
        f"{quote(key, safe='-_.')}={quote(value, safe='') if key in _PUBLIC_QUERY_KEYS else MASK}"
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


MIN_SECRET_CHARS = 4
"""Known secrets shorter than this are not searched for (masking every ``a``
would destroy the text and protect nothing)."""

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>`]+")
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # An Authorization header's value, scheme included, wherever it is echoed.
    (
        re.compile(
            r"\b((?:proxy-)?authorization)([\"']?\s*[:=]\s*[\"']?)"
            r"(?:(?:Bearer|Basic|Token)\s+)?[^\s\"',;]+",
            re.IGNORECASE,
        ),
        r"\1\2" + MASK,
    ),
    # A bearer / basic credential on its own (token-like: 6+ characters).
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 " + MASK),
    # Key headers and key-like fields: x-api-key: …, api_key=…, "api-key": "…".
    (
        re.compile(
            r"\b((?:x-)?api[-_]?key|x-goog-api-key|access[-_]token)"
            r"(\"?\s*[:=]\s*\"?)[^\s\"',;&]+",
            re.IGNORECASE,
        ),
        r"\1\2" + MASK,
    ),
    # OpenAI / Anthropic style secret keys (sk-…, sk-ant-…, sk-proj-…).
    (re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"), "sk-" + MASK),
)


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The secrets a base URL carries, for :func:`redact`'s ``secrets``.

    Rule: the userinfo password, or the whole userinfo when there is no
    password (a bare token); every query value but the public ones
    (``api-version``); each raw and percent-decoded. The userinfo also as
    it travels as Basic auth: ``base64(user:password)`` (padded and not)
    and ``Basic <base64>``, for a server that echoes the header. Never raises.
    """
    if not url:
        return ()
    try:
        parts = urlsplit(url)
    except ValueError:
        return (url,)
    found: list[str] = []
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    basic: list[str] = []
    if userinfo:
        user, sep, password = userinfo.partition(":")
        found.append(password if sep else user)
        # As httpx.BasicAuth sends it (split_userinfo decodes the escapes).
        token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
        basic += [f"Basic {token}", token, token.rstrip("=")]
    found += [
        value
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
        if key not in _PUBLIC_QUERY_KEYS
    ]
    out = [f for f in found if f]
    decoded = [*out, *(unquote(f) for f in out), *(quote(f) for f in out)]
    return tuple(dict.fromkeys([*decoded, *basic]))


def redact(
    text: str, secrets: Iterable[str | None] = (), *, shapes: bool = True, mask: str = MASK
) -> str:
    """``text`` with every secret in it masked as ``***``.

    Rule (``docs/design/secrets.md``): first each known secret of
    :data:`MIN_SECRET_CHARS` or more characters, wherever it appears (and
    its first characters at the very end: a text cut short); then every
    URL through :func:`redact_url` (userinfo, query values); then the
    credential shapes: ``Authorization`` values, ``Bearer``/``Basic``
    credentials, ``x-api-key`` / ``api_key`` / ``access_token`` values,
    ``sk-…`` tokens.

    Classification (failure kinds) reads the unmasked text first; this is
    for display and storage only.

    Args:
        text: any text from a provider, an exception or a URL.
        secrets: values known to be secret (the API key, :func:`url_secrets`
            of the base URL); ``None`` and short values are skipped.
        shapes: False masks the known secrets only: for a tool's output,
            where URLs with queries and ``Bearer`` in code are the work
            itself, not a credential mind holds.
        mask: what a known secret becomes (:data:`WORD_MASK` in what is
            executed or sent back); shapes always use :data:`MASK`.

    Returns:
        The masked text (same text when nothing matched); never raises.
    """
    known = _known(secrets)
    for secret in known:
        text = text.replace(secret, mask)
        # A text cut short (a detail limit) may end in the start of a secret.
        for cut in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
            if text.endswith(secret[:cut]):
                text = text[:-cut] + mask
                break
    if not shapes:
        return text
    text = _URL.sub(lambda m: _redact_url_in_text(m.group(0)), text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_Struct = TypeVar("_Struct", bound=msgspec.Struct)


def redact_fields(value: _Struct, secrets: Iterable[str | None]) -> _Struct:
    """``value`` with the known ``secrets`` masked in every string it holds.

    Rule: total by construction — the struct is walked as plain data (every
    field, nested list and dict, dict keys too), so a field added later
    cannot be missed; known secrets only (:func:`redact` with
    ``shapes=False``). Returns ``value`` itself when nothing matched.

    Args:
        value: any msgspec struct of JSON-like data (a model round, an event).
        secrets: as :func:`redact`'s.

    Raises:
        msgspec.ValidationError: only if masking broke a field's own
            constraints (none of mind's round types has such constraints).
    """
    known = _known(secrets)
    if not known:
        return value
    plain = msgspec.to_builtins(value)
    masked = _walk(plain, known)
    if masked == plain:
        return value
    return msgspec.convert(masked, type(value))


def redact_round(done: StreamDone, secrets: Iterable[str | None]) -> StreamDone:
    """A finished model round with every known secret masked, before it is
    journaled, emitted or executed (``docs/design/secrets.md``).

    Rule: a tool call's ``arguments``, ``call_id`` and ``name`` (executed or
    sent back) get :data:`WORD_MASK`, and call ids that would mask alike get
    ``-2``, ``-3``… so each result still answers its own call; every other
    string of the round — text, reasoning, provider fields and items — gets
    :data:`MASK` through :func:`redact_fields`. Mask once, here: the masked
    call id is the one journaled, shown and answered by the tool result.
    """
    known = _known(secrets)
    if not known:
        return done

    def word(text: str) -> str:
        return redact(text, known, shapes=False, mask=WORD_MASK)

    calls, seen = [], set()
    for c in done.tool_calls:
        call_id = base = word(c.call_id)
        n = 1
        while call_id in seen and call_id != c.call_id:  # only what masking merged
            n += 1
            call_id = f"{base}-{n}"
        seen.add(call_id)
        calls.append(
            msgspec.structs.replace(
                c, call_id=call_id, name=word(c.name), arguments=word(c.arguments)
            )
        )
    return redact_fields(msgspec.structs.replace(done, tool_calls=calls), known)


def _walk(value: Any, known: list[str]) -> Any:
    """Plain data (``msgspec.to_builtins`` output) with ``known`` masked in
    every string, dict keys included."""
    if isinstance(value, str):
        return redact(value, known, shapes=False)
    if isinstance(value, list):
        return [_walk(v, known) for v in value]
    if isinstance(value, dict):
        return {_walk(k, known): _walk(v, known) for k, v in value.items()}
    return value


def _redact_url_in_text(url: str) -> str:
    """:func:`redact_url` of a URL found in running text, keeping it as it
    was when it has nothing to mask (no userinfo, no query)."""
    parts_at = url.find("@")
    if parts_at < 0 and "?" not in url:
        return url
    trail = ""
    while url and url[-1] in ".,;:)]}":
        url, trail = url[:-1], url[-1] + trail
    return redact_url(url) + trail


def _known(secrets: Iterable[str | None]) -> list[str]:
    """The secrets worth searching for, longest first (a secret containing
    another is masked whole). Each line of a multi-line secret is one too:
    an error may quote it escaped (``b'...\\n...'``), never whole."""
    found = {s for s in secrets if s}
    found |= {line for s in found for line in s.splitlines()}
    return sorted({s for s in found if len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)


class StreamMask:
    """:func:`redact` (known secrets only) over text that arrives in pieces.

    A secret split across two pieces must be masked too, so the end of the
    text that could be the start of a secret is held back until the next
    piece shows what it is (usually nothing is held: text rarely ends in a
    secret's first characters). Use one per stream.

    Args:
        secrets: as :func:`redact`'s.
    """

    def __init__(self, secrets: Iterable[str | None]) -> None:
        self._known = _known(secrets)
        self._held = ""

    def feed(self, piece: str) -> str:
        """The text that can be shown now, secrets masked ("" when all is held)."""
        text = self._held + piece
        for secret in self._known:
            text = text.replace(secret, MASK)
        hold = 0
        for secret in self._known:
            for cut in range(min(len(secret) - 1, len(text)), hold, -1):
                if text.endswith(secret[:cut]):
                    hold = cut
                    break
        self._held = text[len(text) - hold :] if hold else ""
        return text[: len(text) - hold]

    def flush(self) -> str:
        """The held rest at the end of the stream: masked when it is long
        enough to be a cut secret (:data:`MIN_SECRET_CHARS`), else as it was."""
        rest, self._held = self._held, ""
        return MASK if len(rest) >= MIN_SECRET_CHARS else rest
