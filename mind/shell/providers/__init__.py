"""Model providers: one interface over OpenAI Chat, Responses, Anthropic and a script.

::

    settings = ProviderSettings(kind="openai-chat", model="gpt-4o", api_key=...)
    provider = make_provider(settings)
    async for event in provider.stream(request):   # TextDelta | ReasoningDelta
        ...                                         # | ToolCallStarted | StreamDone (last)
    await provider.aclose()

One ``stream`` call is one HTTP request and one model round; it never
retries (the runtime does, with :mod:`mind.effects.retry`). Failures raise
:class:`~mind.errors.ProviderError` with a :data:`~mind.errors.FailureKind`
decided by :func:`mind.shell.providers.failures.classify_failure`; the
scripted provider raises :class:`~mind.errors.ScriptError`.

Adapters: :mod:`.openai_chat`, :mod:`.openai_responses`, :mod:`.anthropic`
(each with a pure ``build_body(request) -> dict``), :mod:`.scripted`; SSE
framing in :mod:`.sse`. The rules they follow are ``docs/design/providers.md``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import msgspec

from mind.conversation import ModelRequest, StreamEvent
from mind.errors import ConfigError

if TYPE_CHECKING:
    import httpx

    from mind.shell.providers._http import HttpProvider

ProviderKind = Literal["openai-chat", "openai-responses", "anthropic", "scripted"]


class ProviderSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How to reach one model.

    Attributes:
        kind: the adapter.
        model: model name sent to the server.
        base_url: server root; default per kind: ``https://api.openai.com/v1``
            for the OpenAI kinds, ``https://api.anthropic.com`` for
            ``anthropic`` (the adapter adds ``/v1/messages``).
        api_key: secret for the server (never logged, never in labels).
        script_path: the script file (``scripted`` only).
        timeout_s: HTTP timeout in seconds (connect, and between reads).
    """

    kind: ProviderKind
    model: str
    base_url: str | None = None
    api_key: str | None = None
    script_path: str | None = None
    timeout_s: float = 600.0


class Provider(Protocol):
    """A model provider.

    Attributes:
        name: the kind (``"openai-chat"``, ...).
        label: human label, e.g. ``"openai-chat gpt-4o @ http://127.0.0.1:8080/v1"``;
            scripted: ``"scripted (offline script FILE)"``.
    """

    name: str
    label: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Run one model round: yield deltas, then exactly one StreamDone last.

        Raises:
            ProviderError: the round failed (see ``kind``).
            ScriptError: scripted provider only (malformed or exhausted).
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def prepare_tls_context() -> None:
    """Start building the process's one default TLS context in a worker thread
    (loading the CA bundle, ~50 ms, mostly in OpenSSL without the GIL), so
    that it overlaps what a command does before its first request; the HTTP
    providers use that context. Imports httpx. Idempotent."""
    from mind.shell.providers._http import _tls_context

    _tls_context()


def make_provider(
    settings: ProviderSettings, *, client: httpx.AsyncClient | None = None
) -> Provider:
    """Build the provider described by ``settings``.

    Args:
        settings: kind, model, endpoint and secret.
        client: an httpx client to share (not closed by ``aclose``); by
            default each HTTP provider owns one.

    Returns:
        A ready provider (no request is made yet).

    Raises:
        ConfigError: ``scripted`` without ``script_path``, or an unknown kind.
        ScriptError: the script file is missing or malformed.
    """
    # Each adapter is imported here, when chosen: the settings (and so
    # `mind --help` and config resolution) never pay for httpx or the others.
    cls: type[HttpProvider]
    if settings.kind == "scripted":
        from mind.shell.providers.scripted import ScriptedProvider

        if not settings.script_path:
            raise ConfigError("the scripted provider needs script_path")
        return ScriptedProvider(Path(settings.script_path), model=settings.model)
    if settings.kind == "openai-chat":
        from mind.shell.providers.openai_chat import DEFAULT_BASE_URL, OpenAIChatProvider

        cls, default_base = OpenAIChatProvider, DEFAULT_BASE_URL
    elif settings.kind == "openai-responses":
        from mind.shell.providers.openai_responses import (
            DEFAULT_BASE_URL,
            OpenAIResponsesProvider,
        )

        cls, default_base = OpenAIResponsesProvider, DEFAULT_BASE_URL
    elif settings.kind == "anthropic":
        from mind.shell.providers.anthropic import DEFAULT_BASE_URL, AnthropicProvider

        cls, default_base = AnthropicProvider, DEFAULT_BASE_URL
    else:
        raise ConfigError(f"unknown provider kind {settings.kind!r}")
    return cls(
        model=settings.model,
        base_url=settings.base_url or default_base,
        api_key=settings.api_key,
        timeout_s=settings.timeout_s,
        client=client,
    )


__all__ = ["Provider", "ProviderKind", "ProviderSettings", "make_provider", "prepare_tls_context"]
