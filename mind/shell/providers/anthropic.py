"""Anthropic Messages API adapter (``anthropic``).

Request: ``POST {base}/v1/messages`` with ``anthropic-version`` and
``x-api-key`` headers. Response: SSE ``message_start`` / ``content_block_*``
/ ``message_delta`` / ``message_stop`` events (or one JSON message), parsed by
:class:`AnthropicStreamParser` (docs/design/providers.md §6). Thinking blocks (with
their ``signature``) are carried back in ``AssistantMessage.provider_items``
(provider ``"anthropic"``); server-side tool blocks (``server_tool_use``,
``*_tool_result``) and other unknown block types are skipped.

Body shape (:func:`build_body`)::

    {"model", "max_tokens": int, "stream": true,
     "system"?: [{"type": "text", "text"}],
     "messages": [{"role": "user"|"assistant", "content": [block, ...]}],
     "tools": [{"name", "description", "input_schema"}]}

    user blocks:      {"type": "text", "text"} | {"type": "tool_result", "tool_use_id",
                       "content"?: [{"type": "text", "text"}], "is_error"?: true}
    assistant blocks: thinking items, {"type": "text", "text"},
                      {"type": "tool_use", "id", "name", "input": {...}}
"""

from __future__ import annotations

import json
from typing import Any

from mind.conversation import (
    AssistantMessage,
    FinishReason,
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    ToolResultMessage,
    Usage,
)
from mind.errors import ProviderError
from mind.history import ANTHROPIC_CALL_IDS, conform_call_ids
from mind.shell.providers._http import HttpProvider, StreamParser, error_event
from mind.shell.providers.failures import (
    guess_api,
    is_error_payload,
    malformed_event,
    protocol_error,
)
from mind.shell.providers.output_budget import OutputBudget
from mind.shell.providers.sequencing import provider_items_of, sequence_messages
from mind.shell.providers.server_json import load_json, reported_int
from mind.shell.providers.sse import SSEEvent
from mind.shell.providers.tool_arguments import CallSlot, finalize_arguments

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def _input_object(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def build_body(request: ModelRequest) -> dict[str, Any]:
    """Serialise ``request`` as a Messages API request body (pure).

    Consecutive user-side content (prompts and tool results) is merged into
    one user message, tool results first, so all results of one assistant
    round travel in ONE user message. Empty text blocks are omitted (the API
    rejects them); a message left with no blocks is dropped. Tool input that
    is not a JSON object is sent as ``{}``. Thinking blocks carried in
    provider_items come first in their assistant message. Call ids are made
    to match ``^[a-zA-Z0-9_-]+$`` by :func:`mind.history.conform_call_ids`
    (:data:`~mind.history.ANTHROPIC_CALL_IDS`; valid ids stay verbatim).

    Args:
        request: the provider-neutral request.

    Returns:
        A JSON-ready dict (see module docstring for the shape).
    """
    messages: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if messages and messages[-1]["role"] == role:
            content = messages[-1]["content"]
            if role == "user":
                # tool_result blocks must lead the user message
                results = [b for b in content + blocks if b.get("type") == "tool_result"]
                others = [b for b in content + blocks if b.get("type") != "tool_result"]
                messages[-1]["content"] = results + others
            else:
                content.extend(blocks)
            return
        messages.append({"role": role, "content": list(blocks)})

    for msg in sequence_messages(conform_call_ids(request.messages, ANTHROPIC_CALL_IDS)):
        if isinstance(msg, AssistantMessage):
            blocks: list[dict[str, Any]] = [
                dict(entry["item"]) for entry in provider_items_of(msg, PROVIDER)
            ]
            if msg.text:
                blocks.append({"type": "text", "text": msg.text})
            for call in msg.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.call_id,
                        "name": call.name,
                        "input": _input_object(call.arguments),
                    }
                )
            if msg.text or msg.tool_calls:
                add("assistant", blocks)
        elif isinstance(msg, ToolResultMessage):
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": msg.call_id}
            if msg.output:
                block["content"] = [{"type": "text", "text": msg.output}]
            if msg.is_error:
                block["is_error"] = True
            add("user", [block])
        elif msg.text:
            add("user", [{"type": "text", "text": msg.text}])
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system}]
    if request.tools:
        body["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    return body


class _Block:
    """A content block being assembled; ``kind`` is its type."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.thinking: list[str] = []
        self.signature = ""
        self.data = ""
        self.call: CallSlot | None = None
        self.start_input: Any = None


class AnthropicStreamParser(StreamParser):
    """Assembles one Messages stream or JSON body (docs/design/providers.md §6).

    ``ping`` is ignored for content (the bytes already reset the read
    timeout); ``event: error`` is a failure mapped from ``error.type``; EOF
    without ``message_stop`` is ``stream_cut``. Tool input comes only from the
    concatenated ``partial_json`` (the ``{}`` in ``content_block_start`` is a
    placeholder); empty means ``{}``. A tool_use block never closed when the
    message stopped for ``max_tokens`` is incomplete and dropped.

    Args:
        api_key: a secret to redact from error details.
        url: the request URL, for the hint of an endpoint mismatch.
        budget: the round's output cap (text, reasoning, tool arguments).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        url: str | None = None,
        budget: OutputBudget | None = None,
    ) -> None:
        self._budget = budget or OutputBudget()
        self._api_key = api_key
        self._url = url
        self._blocks: dict[int, _Block] = {}
        self._order: list[_Block] = []
        self._text: list[str] = []
        self._text_blocks = 0
        self._reasoning: list[str] = []
        self._stop_reason: str | None = None
        self._input_tokens: int | None = None
        self._output_tokens: int | None = None
        self._cache_read_tokens: int | None = None
        self._cache_write_tokens: int | None = None
        self._done = False
        self._own_events = False

    @property
    def done(self) -> bool:
        return self._done

    def _usage(self, raw: Any) -> None:
        """Take the counts a ``message_start`` / ``message_delta`` / message
        body reports; a count it lacks keeps its earlier value (unknown at first).

        Anthropic's ``input_tokens`` leaves out the cached prompt tokens;
        :class:`Usage` counts the whole prompt (as OpenAI does), so the cache
        reads (``cache_read_input_tokens``) and writes
        (``cache_creation_input_tokens``) are added to it and kept apart too.
        """
        if not isinstance(raw, dict):
            return
        uncached = reported_int(raw.get("input_tokens"))
        if uncached is not None:
            read = reported_int(raw.get("cache_read_input_tokens"))
            write = reported_int(raw.get("cache_creation_input_tokens"))
            self._input_tokens = uncached + (read or 0) + (write or 0)
            self._cache_read_tokens = read
            self._cache_write_tokens = write
        output = reported_int(raw.get("output_tokens"))
        if output is not None:
            self._output_tokens = output  # cumulative

    def _start_block(self, index: Any, block: dict[str, Any]) -> list[StreamEvent]:
        kind = block.get("type") if isinstance(block.get("type"), str) else ""
        b = _Block(str(kind))
        if isinstance(index, int):
            self._blocks[index] = b
        self._order.append(b)
        out: list[StreamEvent] = []
        if kind == "text":
            if self._text_blocks and self._text:
                out.extend(self._emit_text("\n\n"))  # separate text blocks
            self._text_blocks += 1
            out.extend(self._emit_text(block.get("text")))
        elif kind == "thinking":
            if self._reasoning:
                out.extend(self._emit_reasoning("\n\n"))
            out.extend(self._emit_reasoning(block.get("thinking"), b))
            sig = block.get("signature")
            b.signature = sig if isinstance(sig, str) else ""
        elif kind == "redacted_thinking":
            data = block.get("data")
            b.data = data if isinstance(data, str) else ""
        elif kind == "tool_use":
            b.call = CallSlot(
                call_id=str(block.get("id") or f"toolu_{len(self._order) - 1}"),
                name=str(block.get("name") or ""),
            )
            b.start_input = block.get("input")
            if b.call.name:
                b.call.started = True
                out.append(ToolCallStarted(call_id=b.call.call_id, name=b.call.name))
        # server_tool_use, *_tool_result and unknown blocks: skipped.
        return out

    def _emit_text(self, text: Any) -> list[StreamEvent]:
        if not isinstance(text, str) or not text:
            return []
        self._budget.charge(text)
        self._text.append(text)
        return [TextDelta(text=text)]

    def _emit_reasoning(self, text: Any, block: _Block | None = None) -> list[StreamEvent]:
        if not isinstance(text, str) or not text:
            return []
        self._budget.charge(text)
        self._reasoning.append(text)
        if block is not None:
            block.thinking.append(text)
        return [ReasoningDelta(text=text)]

    def _delta(self, index: Any, delta: dict[str, Any]) -> list[StreamEvent]:
        b = self._blocks.get(index) if isinstance(index, int) else None
        if b is None:
            return []
        kind = delta.get("type")
        if kind == "text_delta" and b.kind == "text":
            return self._emit_text(delta.get("text"))
        if kind == "thinking_delta" and b.kind == "thinking":
            return self._emit_reasoning(delta.get("thinking"), b)
        if kind == "signature_delta" and b.kind == "thinking":
            sig = delta.get("signature")
            if isinstance(sig, str):
                b.signature += sig
        elif kind == "input_json_delta" and b.call is not None:
            part = delta.get("partial_json")
            if isinstance(part, str):
                self._budget.charge(part)
                b.call.fragments.append(part)
        return []

    # ---- SSE ---------------------------------------------------------------

    def feed_event(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data.strip()
        if not data:
            return []
        if data == "[DONE]":
            # Chat's end sentinel (never sent by Anthropic); after Anthropic
            # events it is only an early end, decided at EOF.
            if self._own_events:
                return []
            raise protocol_error(PROVIDER, "another API's event stream", looks_like="openai-chat")
        try:
            payload = load_json(data)
        except ValueError:
            if event.at_eof:
                return []
            raise malformed_event(data) from None
        if not isinstance(payload, dict):
            return []
        other = guess_api(payload)
        if other not in (None, PROVIDER):
            raise protocol_error(PROVIDER, "another API's event stream", looks_like=other)
        self._own_events = self._own_events or other == PROVIDER
        kind = payload.get("type") if isinstance(payload.get("type"), str) else event.event
        untyped_error = "type" not in payload and is_error_payload(payload)
        if kind == "error" or event.event == "error" or untyped_error:
            # untyped: a compatible server's chat-style {"error": ...} (rule 23)
            raise error_event(payload, api_key=self._api_key, url=self._url)
        if kind == "message_start":
            message = payload.get("message")
            if isinstance(message, dict):
                self._usage(message.get("usage"))
        elif kind == "content_block_start":
            block = payload.get("content_block")
            if isinstance(block, dict):
                return self._start_block(payload.get("index"), block)
        elif kind == "content_block_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict):
                return self._delta(payload.get("index"), delta)
        elif kind == "content_block_stop":
            index = payload.get("index")
            b = self._blocks.get(index) if isinstance(index, int) else None
            if b is not None and b.call is not None:
                b.call.closed = True
        elif kind == "message_delta":
            delta = payload.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            self._usage(payload.get("usage"))
        elif kind == "message_stop":
            self._done = True
            return [self._stream_done(streamed=True)]
        # ping and unknown events: no content.
        return []

    def _stream_done(self, *, streamed: bool) -> StreamDone:
        calls: list[ToolCall] = []
        items: list[dict[str, Any]] = []
        for b in self._order:
            if b.kind == "thinking" and b.signature:
                items.append(
                    {
                        "provider": PROVIDER,
                        "item": {
                            "type": "thinking",
                            "thinking": "".join(b.thinking),
                            "signature": b.signature,
                        },
                    }
                )
            elif b.kind == "redacted_thinking" and b.data:
                items.append(
                    {"provider": PROVIDER, "item": {"type": "redacted_thinking", "data": b.data}}
                )
            elif b.call is not None and b.call.name:
                if streamed and not b.call.closed and self._stop_reason == "max_tokens":
                    continue  # input cut by max_tokens: not an assembled call
                if b.call.fragments:
                    args = finalize_arguments(b.call.fragments)
                elif isinstance(b.start_input, dict) and b.start_input:
                    args = json.dumps(b.start_input, ensure_ascii=False)
                else:
                    args = "{}"
                calls.append(ToolCall(call_id=b.call.call_id, name=b.call.name, arguments=args))
        mapped = _FINISH.get(self._stop_reason or "", "other")
        if self._stop_reason is None:
            mapped = "stop"
        if calls:
            finish: FinishReason = "tool_calls"  # docs/design/providers.md §4
        else:
            finish = "other" if mapped == "tool_calls" else mapped
        return StreamDone(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            finish=finish,
            usage=Usage(
                input_tokens=self._input_tokens,
                output_tokens=self._output_tokens,
                cache_read_tokens=self._cache_read_tokens,
                cache_write_tokens=self._cache_write_tokens,
            ),
            provider_items=items,
        )

    def finish(self, *, transport_cut: bool) -> StreamDone:
        raise ProviderError("stream_cut", detail="EOF before message_stop")

    # ---- non-streaming -----------------------------------------------------

    def parse_json(self, body: Any) -> list[StreamEvent]:
        if is_error_payload(body):
            raise error_event(body, api_key=self._api_key, url=self._url)
        if not isinstance(body, dict) or guess_api(body) != PROVIDER:
            # Not a message object: a server of another API, or a stub.
            raise protocol_error(PROVIDER, "JSON, not an event stream", looks_like=guess_api(body))
        self._usage(body.get("usage"))
        if isinstance(body.get("stop_reason"), str):
            self._stop_reason = body["stop_reason"]
        out: list[StreamEvent] = []
        content = body.get("content")
        if isinstance(content, list):
            for i, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                out.extend(self._start_block(i, block))
                b = self._blocks[i]
                if b.call is not None and isinstance(block.get("input"), dict):
                    b.call.fragments = [json.dumps(block["input"], ensure_ascii=False)]
                    b.call.closed = True
        self._done = True
        out.append(self._stream_done(streamed=False))
        return out


class AnthropicProvider(HttpProvider):
    """``anthropic``: the Messages API over SSE (see module docstring)."""

    name = PROVIDER

    def _url(self) -> str:
        return self._endpoint("/v1/messages", drop_suffix="/v1")

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        return build_body(request)

    def _parser(self, budget: OutputBudget) -> StreamParser:
        return AnthropicStreamParser(api_key=self._api_key, url=self._url(), budget=budget)
