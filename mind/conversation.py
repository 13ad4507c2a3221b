"""Provider-neutral conversation types: what a model request is made of.

These are pure data (frozen msgspec Structs). The request builder
(:mod:`mind.history`) turns journal records into a list of :data:`Message`;
each provider adapter in :mod:`mind.shell.providers` serialises a
:class:`ModelRequest` into its wire shape and parses its stream back into
:data:`StreamEvent` values.

Shapes::

    ModelRequest(model, system, messages: list[Message], tools: list[ToolSpec])
    Message = UserMessage | AssistantMessage | ToolResultMessage
    StreamEvent = TextDelta | ReasoningDelta | ToolCallStarted | StreamDone
"""

from __future__ import annotations

import re
from typing import Any, Literal

import msgspec

REPLACEMENT_CHARACTER = "\ufffd"
"""What a lone UTF-16 surrogate in model, tool or user text becomes (U+FFFD)."""

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def replace_lone_surrogates(text: str) -> str:
    """``text`` with every lone surrogate (U+D800..U+DFFF) replaced by U+FFFD.

    A JSON ``"\\ud800"`` escape, a YAML ``"\\ud800"`` or undecodable bytes
    read with ``surrogateescape`` give a Python ``str`` that cannot be encoded
    as UTF-8: it could be neither journaled nor printed. Every place where
    outside text enters mind applies this (provider decode, scripts, prompts).
    """
    if text.isascii():
        return text
    return _SURROGATE_RE.sub(REPLACEMENT_CHARACTER, text)


def has_lone_surrogates(text: str) -> bool:
    """True when ``text`` holds a code point that UTF-8 cannot encode."""
    return not text.isascii() and _SURROGATE_RE.search(text) is not None


def without_lone_surrogates(value: Any) -> Any:
    """A decoded JSON/YAML value with :func:`replace_lone_surrogates` applied to
    every string in it (keys included); other values are returned as they are."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value


FinishReason = Literal["stop", "tool_calls", "length", "content_filter", "other"]
"""Why a model round ended, normalised across providers."""


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Token counts of one model round (or a sum of rounds), as the server reported them.

    Each count is ``None`` when the server did not report it: unknown, never
    0 (docs/design/context.md §1).

    Attributes:
        input_tokens: prompt tokens of the request, >= 0, cached ones included.
        output_tokens: completion tokens (reasoning included), >= 0.
        cache_read_tokens: of ``input_tokens``, those read from the
            provider's prompt cache.
        cache_write_tokens: of ``input_tokens``, those written to it.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        """The sum per count; a count neither side reported stays ``None``."""
        return Usage(
            input_tokens=_add(self.input_tokens, other.input_tokens),
            output_tokens=_add(self.output_tokens, other.output_tokens),
            cache_read_tokens=_add(self.cache_read_tokens, other.cache_read_tokens),
            cache_write_tokens=_add(self.cache_write_tokens, other.cache_write_tokens),
        )


def _add(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else a + b


class ToolCall(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call requested by the model.

    Attributes:
        call_id: the provider's id for the call (``call_...``, ``toolu_...``);
            the matching tool result must carry the same id.
        name: tool name as the model sent it (may be unknown to mind).
        arguments: the raw JSON text of the arguments exactly as assembled
            from the stream; ``""`` is normalised to ``"{}"`` by adapters.
        provider_fields: provider-specific extras that must be sent back
            unchanged (e.g. Responses ``id`` of the item, Gemini
            ``extra_content``); opaque to the core.
    """

    call_id: str
    name: str
    arguments: str
    provider_fields: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A tool offered to the model: name, description, JSON Schema of args."""

    name: str
    description: str
    parameters: dict[str, Any]


class UserMessage(msgspec.Struct, frozen=True, kw_only=True, tag="user"):
    """Text from the person (a prompt or a steering message)."""

    text: str


class AssistantMessage(msgspec.Struct, frozen=True, kw_only=True, tag="assistant"):
    """One model round as it must be replayed to the same provider.

    Attributes:
        text: visible answer text ("" when the round only called tools).
        tool_calls: calls in the order the model emitted them.
        provider_items: opaque provider items to carry back statelessly
            (Responses reasoning items with ``encrypted_content``, Anthropic
            thinking blocks with ``signature``). Adapters ignore items of
            another provider. Each item is ``{"provider": str, "item": {...}}``.
    """

    text: str = ""
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    provider_items: list[dict[str, Any]] = msgspec.field(default_factory=list)


class ToolResultMessage(msgspec.Struct, frozen=True, kw_only=True, tag="tool_result"):
    """The single result answering ``call_id``; ``is_error`` marks failures;
    ``output_bytes``: bytes the tool wrote when ``output`` holds only the
    head and tail the tool runner kept (None: ``output`` is whole)."""

    call_id: str
    output: str
    is_error: bool = False
    output_bytes: int | None = None


Message = UserMessage | AssistantMessage | ToolResultMessage


DEFAULT_MAX_OUTPUT_BYTES = 8 * 1024 * 1024
"""Default cap of one turn's streamed model output, bytes (``max_output_mib`` 8)."""


class ModelRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a provider adapter needs to build one HTTP request.

    Invariant (enforced by :func:`mind.history.build_messages`): every
    ``AssistantMessage`` with tool calls is immediately followed by exactly
    one ``ToolResultMessage`` per call, in call order, before anything else.
    """

    model: str
    system: str
    messages: list[Message]
    tools: list[ToolSpec] = msgspec.field(default_factory=list)
    max_output_tokens: int | None = None
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """The most UTF-8 bytes of text, reasoning and tool-call arguments this
    round may stream (what is left of the turn's ``max_output_mib``); past it
    the adapter closes the stream with ``ProviderError("output_limit")``."""


# ---- stream events (adapter -> runtime) ---------------------------------


class TextDelta(msgspec.Struct, frozen=True, kw_only=True, tag="text_delta"):
    """A piece of visible answer text."""

    text: str


class ReasoningDelta(msgspec.Struct, frozen=True, kw_only=True, tag="reasoning_delta"):
    """A piece of reasoning / thinking text: kept, never shown as answer."""

    text: str


class ToolCallStarted(msgspec.Struct, frozen=True, kw_only=True, tag="tool_call_started"):
    """The model began a tool call (name known, arguments still streaming)."""

    call_id: str
    name: str


class StreamDone(msgspec.Struct, frozen=True, kw_only=True, tag="stream_done"):
    """The clean end of one model round, with everything assembled.

    Attributes:
        text: the whole visible text of the round.
        reasoning: the whole reasoning text ("" if none).
        tool_calls: assembled calls (arguments parsed-checked once at the end,
            ``""`` → ``"{}"``; see docs/design/providers.md §4, §5).
        finish: normalised finish reason; ``"tool_calls"`` whenever any call
            was assembled (docs/design/providers.md §4).
        usage: token usage wherever the server put it (zeros if absent).
        provider_items: opaque items to carry back (see AssistantMessage).
    """

    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    finish: FinishReason
    usage: Usage
    provider_items: list[dict[str, Any]] = msgspec.field(default_factory=list)


StreamEvent = TextDelta | ReasoningDelta | ToolCallStarted | StreamDone
