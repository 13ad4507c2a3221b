"""Pieces shared by the HTTP adapters: argument finalisation, history sequencing.

Pure functions only; no I/O.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from mind.conversation import (
    DEFAULT_MAX_OUTPUT_BYTES,
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    without_lone_surrogates,
)
from mind.errors import ProviderError

SYNTHETIC_RESULT = "[no result: the tool call was interrupted before it finished]"
"""Output of a synthetic result for a call whose result is missing."""


def load_json(data: str | bytes) -> Any:
    """``json.loads(data)`` with every lone surrogate in its strings replaced by
    U+FFFD (:func:`~mind.conversation.without_lone_surrogates`): a server's
    ``"\\ud800"`` escape must not reach the journal or a printer.

    Raises:
        ValueError: ``data`` is not one JSON value.
    """
    return without_lone_surrogates(json.loads(data))


_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")


def _normalise_surrogates(arguments: str) -> str:
    """Argument JSON whose string escapes decode to lone surrogates, re-serialised
    with them replaced by U+FFFD (the text the journal, tools and events see)."""
    if _SURROGATE_ESCAPE_RE.search(arguments) is None:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    clean = without_lone_surrogates(value)
    return arguments if clean == value else json.dumps(clean, ensure_ascii=False)


def parses_as_json(text: str) -> bool:
    """Return True when ``text`` is one complete JSON value."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def finalize_arguments(fragments: list[str]) -> str:
    """Assemble a call's raw argument text from its fragments (docs/design/providers.md §5).

    Concatenate once at the end. Empty (or whitespace) means ``"{}"``. Only
    when the concatenation is not valid JSON, every non-empty fragment is a
    prefix of the next and the last one parses (a server resending the
    cumulative string, hermes-agent#35718), the last fragment is used. Never
    applied per fragment (hermes-agent#35860 reverted exactly that).

    Args:
        fragments: argument fragments in arrival order.

    Returns:
        Raw JSON text (may still be invalid JSON when the server sent
        garbage; the tool contract reports that to the model). Escapes of
        lone surrogates are replaced by U+FFFD (re-serialised).
    """
    joined = "".join(fragments)
    if not joined.strip():
        return "{}"
    if parses_as_json(joined):
        return _normalise_surrogates(joined)
    parts = [f for f in fragments if f]
    cumulative = len(parts) >= 2 and all(b.startswith(a) for a, b in itertools.pairwise(parts))
    if cumulative and parses_as_json(parts[-1]):
        return _normalise_surrogates(parts[-1])
    return joined


class OutputBudget:
    """Counts one round's model output against its cap (docs/design/providers.md §1).

    Every piece of answer text, reasoning and tool-call argument text a parser
    keeps is charged *before* it is kept, so nothing is accumulated past the
    cap: the charge that goes over raises and the stream is closed.

    Args:
        limit_bytes: the most UTF-8 bytes allowed (``ModelRequest.max_output_bytes``).
    """

    def __init__(self, limit_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0

    def charge(self, text: str) -> None:
        """Count ``text`` (its UTF-8 length in bytes).

        Raises:
            ProviderError: ``output_limit`` once more than ``limit_bytes`` were
                charged in total; its detail names the cap and the setting.
        """
        self.used_bytes += len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
        if self.used_bytes > self.limit_bytes:
            raise ProviderError(
                "output_limit",
                detail=f"more than {self.limit_bytes} bytes of model output in this turn "
                "(max_output_mib)",
            )


@dataclass
class CallSlot:
    """A tool call being assembled from stream fragments.

    Attributes:
        call_id: provider id ("" until known).
        name: tool name ("" until known).
        fragments: argument fragments in arrival order.
        extra: unknown per-call fields kept verbatim (docs/design/providers.md §4).
        started: True once ToolCallStarted was emitted.
        closed: True when the server marked the call complete.
    """

    call_id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    closed: bool = False


def sequence_messages(messages: list[Message]) -> list[Message]:
    """Make a message list valid for every provider's tool-call sequencing.

    The request builder (:mod:`mind.history`) already guarantees the
    invariant of :class:`~mind.conversation.ModelRequest`; adapters apply this
    again so a body they build is valid whatever they are given (docs/design/providers.md §8):
    each assistant tool call is followed by exactly one result, in call order,
    before any other message; a missing result becomes a synthetic error
    result; results with no open call (orphans, duplicates) are dropped.

    Args:
        messages: messages in conversation order.

    Returns:
        A new list (the input is not modified).
    """
    out: list[Message] = []
    pending: list[ToolCall] = []
    pending_results: dict[str, ToolResultMessage] = {}

    def close_round() -> None:
        for call in pending:
            out.append(
                pending_results.get(call.call_id)
                or ToolResultMessage(call_id=call.call_id, output=SYNTHETIC_RESULT, is_error=True)
            )
        pending.clear()
        pending_results.clear()

    for msg in messages:
        if isinstance(msg, ToolResultMessage):
            ids = {c.call_id for c in pending}
            if msg.call_id in ids and msg.call_id not in pending_results:
                pending_results[msg.call_id] = msg
            continue
        close_round()
        if isinstance(msg, AssistantMessage):
            seen: set[str] = set()
            calls = []
            for c in msg.tool_calls:
                if c.call_id not in seen:
                    seen.add(c.call_id)
                    calls.append(c)
            if len(calls) != len(msg.tool_calls):
                msg = AssistantMessage(
                    text=msg.text, tool_calls=calls, provider_items=msg.provider_items
                )
            out.append(msg)
            pending.extend(calls)
        else:
            assert isinstance(msg, UserMessage)
            out.append(msg)
    close_round()
    return out


def provider_items_of(msg: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    """Return the opaque items of ``provider`` carried by ``msg`` (others ignored)."""
    items: list[dict[str, Any]] = []
    for entry in msg.provider_items:
        if entry.get("provider") == provider and isinstance(entry.get("item"), dict):
            items.append(entry)
    return items


def as_int(value: Any) -> int:
    """Return ``value`` as a non-negative int (0 for null / non-numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def is_openai_host(base_url: str) -> bool:
    """True when ``base_url`` reaches OpenAI's own API, whose validation differs.

    OpenAI (``api.openai.com``), Azure OpenAI (``*.openai.azure.com``) and
    OpenRouter (``openrouter.ai``, which passes OpenAI's validation errors
    through, openclaw#875). Every other host is a compatible server with its
    own rules (docs/design/providers.md §8: never apply one API's rule to another's).
    """
    host = (urlsplit(base_url).hostname or "").lower()
    return host in ("api.openai.com", "openrouter.ai") or host.endswith(".openai.azure.com")


def endpoint_url(base_url: str, path: str, *, drop_suffix: str = "") -> str:
    """The request URL of ``path`` (e.g. ``/chat/completions``) on ``base_url``.

    The path is joined onto the base URL's *path*; its query string is kept
    (Azure's ``?api-version=…``) and its fragment dropped.
    ``drop_suffix`` is removed from the end of the base path first (Anthropic
    accepts a base URL with or without ``/v1``).

    Example: ``endpoint_url("http://h/v1/?api-version=2024", "/chat/completions")``
    is ``"http://h/v1/chat/completions?api-version=2024"``.
    """
    parts = urlsplit(base_url)
    base_path = parts.path.rstrip("/")
    if drop_suffix and base_path.endswith(drop_suffix):
        base_path = base_path[: -len(drop_suffix)]
    return urlunsplit((parts.scheme, parts.netloc, base_path + path, parts.query, ""))


def split_userinfo(base_url: str) -> tuple[str, tuple[str, str] | None]:
    """``base_url`` without its userinfo, and that userinfo as ``(user, password)``.

    The request URL never carries userinfo (httpx would turn it into Basic
    auth in place of the API key, docs/design/providers.md §3); the caller sends it as
    Basic auth only when no API key is configured. Percent-escapes in the
    userinfo are decoded; a missing password is ``""``.
    """
    parts = urlsplit(base_url)
    if "@" not in parts.netloc:
        return base_url, None
    where = parts.netloc.rpartition("@")[2]
    bare = urlunsplit((parts.scheme, where, parts.path, parts.query, parts.fragment))
    return bare, (unquote(parts.username or ""), unquote(parts.password or ""))
