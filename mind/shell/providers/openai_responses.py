"""OpenAI Responses API adapter (``openai-responses``), stateless (``store: false``).

Request: ``POST {base}/responses``. Reasoning items come back with
``encrypted_content`` and are carried in ``AssistantMessage.provider_items``
(provider ``"openai-responses"``) to be re-sent before the item that followed
them. Response: SSE ``response.*`` events (or one JSON response object),
parsed by :class:`ResponsesStreamParser` (docs/design/providers.md §6).

Size: just over 500 lines because the request body and the stream parser
are one wire format read both ways (an item the parser keeps is an item the
body re-sends); the parser is the part to move out if either grows.

Body shape (:func:`build_body`)::

    {"model", "stream": true, "store": false,
     "include": ["reasoning.encrypted_content"], "instructions"?: str,
     "input": [{"role": "user"|"assistant", "content": str}
               | {"type": "reasoning", "id", "encrypted_content", "summary"}
               | {"type": "function_call", "call_id", "name", "arguments"}
               | {"type": "function_call_output", "call_id", "output"}],
     "tools": [{"type": "function", "name", "description", "parameters"}],
     "max_output_tokens"?: int}

provider_items entry::

    {"provider": "openai-responses", "position": int, "item": {reasoning item}}

``position`` counts the non-reasoning output items (message, then function
calls) that preceded the reasoning item in the response.
"""

from __future__ import annotations

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
from mind.history import (
    COMPATIBLE_CALL_IDS,
    OPENAI_RESPONSES_CALL_IDS,
    CallIdRule,
    conform_call_ids,
)
from mind.shell.base_url import is_openai_host
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
from mind.shell.providers.tool_arguments import CallSlot, finalize_arguments, parses_as_json

PROVIDER = "openai-responses"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

_REASONING_KEYS = ("type", "id", "encrypted_content", "summary", "content")


def _assistant_items(msg: AssistantMessage) -> list[dict[str, Any]]:
    """Input items of one assistant round, reasoning items back in place."""
    visible: list[dict[str, Any]] = []
    if msg.text:
        visible.append({"role": "assistant", "content": msg.text})
    for call in msg.tool_calls:
        visible.append(
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments if parses_as_json(call.arguments) else "{}",
            }
        )
    reasoning = provider_items_of(msg, PROVIDER)
    if not visible:
        # A reasoning item must be followed by its item (see cassette
        # error_400_reasoning_item_without_following_item): drop it alone.
        return []
    out: list[dict[str, Any]] = []
    pos = 0
    for entry in reasoning:
        raw_pos = entry.get("position", 0)
        want = raw_pos if isinstance(raw_pos, int) else 0
        want = max(0, min(want, len(visible) - 1))
        while pos < want:
            out.append(visible[pos])
            pos += 1
        item = entry["item"]
        out.append({k: item[k] for k in _REASONING_KEYS if k in item})
    out.extend(visible[pos:])
    return out


def call_id_rule(base_url: str) -> CallIdRule:
    """The call-id rule of the server at ``base_url`` (docs/design/providers.md §8).

    OpenAI's 64-character ``call_id`` limit on OpenAI's hosts
    (:func:`is_openai_host`); none for compatible servers (vLLM, Ollama, LM
    Studio serve ``/v1/responses`` too), which get their own ids back verbatim.
    """
    return OPENAI_RESPONSES_CALL_IDS if is_openai_host(base_url) else COMPATIBLE_CALL_IDS


def build_body(
    request: ModelRequest, *, call_ids: CallIdRule = COMPATIBLE_CALL_IDS
) -> dict[str, Any]:
    """Serialise ``request`` as a stateless Responses request body (pure).

    Call ids are passed through :func:`mind.history.conform_call_ids` with
    ``call_ids`` (see :func:`call_id_rule`).

    Reasoning items of this provider are re-sent before the item that
    followed them (cassette ``json_reasoning_function_call_roundtrip_gpt55``);
    a reasoning item with nothing after it is dropped. Tool results become
    ``function_call_output`` items; the list is re-sequenced first.

    Args:
        request: the provider-neutral request.
        call_ids: the target's call-id rule.

    Returns:
        A JSON-ready dict (see module docstring for the shape).
    """
    items: list[dict[str, Any]] = []
    for msg in sequence_messages(conform_call_ids(request.messages, call_ids)):
        if isinstance(msg, AssistantMessage):
            items.extend(_assistant_items(msg))
        elif isinstance(msg, ToolResultMessage):
            items.append(
                {"type": "function_call_output", "call_id": msg.call_id, "output": msg.output}
            )
        else:
            items.append({"role": "user", "content": msg.text})
    body: dict[str, Any] = {
        "model": request.model,
        "input": items,
        "stream": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in request.tools
        ]
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    return body


def _usage(raw: Any) -> Usage | None:
    """A response's ``usage`` as reported; a count it lacks stays unknown.

    ``input_tokens`` counts cached tokens too;
    ``input_tokens_details.cached_tokens`` says how many were read from the cache.
    """
    if not isinstance(raw, dict):
        return None
    details = raw.get("input_tokens_details")
    return Usage(
        input_tokens=reported_int(raw.get("input_tokens")),
        output_tokens=reported_int(raw.get("output_tokens")),
        cache_read_tokens=reported_int(
            details.get("cached_tokens") if isinstance(details, dict) else None
        ),
    )


def _message_text(item: dict[str, Any]) -> str:
    parts = item.get("content")
    if isinstance(parts, str):
        return parts
    out = []
    if isinstance(parts, list):
        for part in parts:
            if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                value = part.get("text", part.get("refusal"))
                if isinstance(value, str):
                    out.append(value)
    return "".join(out)


def _summary_text(item: dict[str, Any]) -> str:
    summary = item.get("summary")
    parts = []
    if isinstance(summary, list):
        for part in summary:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
    return "\n\n".join(parts)


class ResponsesStreamParser(StreamParser):
    """Assembles one Responses stream or JSON body (docs/design/providers.md §6).

    Text comes from ``*.delta`` events; ``*.done`` events only confirm (their
    text is used only for an item that had no deltas).

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
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[str, CallSlot] = {}
        self._call_order: list[CallSlot] = []
        self._items_with_text: set[str] = set()
        self._items_with_reasoning: set[str] = set()
        self._provider_items: list[dict[str, Any]] = []
        self._visible_count = 0
        self._message_seen = False
        self._usage = Usage()
        self._done = False
        self._own_events = False

    @property
    def done(self) -> bool:
        return self._done

    # ---- pieces ------------------------------------------------------------

    def _emit_text(self, text: str) -> list[StreamEvent]:
        if not text:
            return []
        self._budget.charge(text)
        self._text.append(text)
        return [TextDelta(text=text)]

    def _emit_reasoning(self, text: str) -> list[StreamEvent]:
        if not text:
            return []
        self._budget.charge(text)
        self._reasoning.append(text)
        return [ReasoningDelta(text=text)]

    def _slot(self, item_id: str, output_index: Any) -> CallSlot | None:
        slot = self._calls.get(item_id)
        if slot is None and isinstance(output_index, int):
            slot = self._calls.get(f"#{output_index}")
        return slot

    def _item_added(self, item: dict[str, Any], output_index: Any) -> list[StreamEvent]:
        kind = item.get("type")
        if kind == "function_call":
            slot = CallSlot(
                call_id=str(item.get("call_id") or item.get("id") or ""),
                name=str(item.get("name") or ""),
            )
            item_id = item.get("id")
            if isinstance(item_id, str) and item_id:
                slot.extra["id"] = item_id
                self._calls[item_id] = slot
            if isinstance(output_index, int):
                self._calls[f"#{output_index}"] = slot
            self._call_order.append(slot)
            self._visible_count += 1
            if slot.name and not slot.started:
                slot.started = True
                if not slot.call_id:
                    slot.call_id = f"call_{len(self._call_order) - 1}"
                return [ToolCallStarted(call_id=slot.call_id, name=slot.name)]
        elif kind == "message" and not self._message_seen:
            self._message_seen = True
            self._visible_count += 1
        return []

    def _item_done(self, item: dict[str, Any], output_index: Any) -> list[StreamEvent]:
        kind = item.get("type")
        item_id = item.get("id") if isinstance(item.get("id"), str) else ""
        out: list[StreamEvent] = []
        if kind == "function_call":
            slot = self._slot(item_id or "", output_index)
            if slot is None:
                out.extend(self._item_added(item, output_index))
                slot = self._call_order[-1]
            args = item.get("arguments")
            if isinstance(args, str):
                slot.fragments = [args]  # the final value confirms the deltas
            slot.closed = True
        elif kind == "reasoning":
            if item_id not in self._items_with_reasoning:
                out.extend(self._emit_reasoning(_summary_text(item)))
            self._provider_items.append(
                {
                    "provider": PROVIDER,
                    "position": self._visible_count,
                    "item": {k: item[k] for k in _REASONING_KEYS if k in item},
                }
            )
        elif kind == "message":
            if not self._message_seen:
                self._message_seen = True
                self._visible_count += 1
            if item_id not in self._items_with_text:
                if self._text:
                    out.extend(self._emit_text("\n\n"))
                out.extend(self._emit_text(_message_text(item)))
        return out

    # ---- SSE ---------------------------------------------------------------

    def feed_event(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data.strip()
        if not data:
            return []
        if data == "[DONE]":
            # Chat's end sentinel (never sent by Responses); after Responses
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
        out: list[StreamEvent] = []
        raw_item_id = payload.get("item_id")
        item_id = raw_item_id if isinstance(raw_item_id, str) else ""
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            delta = payload.get("delta")
            if isinstance(delta, str) and delta:
                if item_id and item_id not in self._items_with_text and self._text:
                    out.extend(self._emit_text("\n\n"))  # a new message item
                self._items_with_text.add(item_id)
                out.extend(self._emit_text(delta))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = payload.get("delta")
            if isinstance(delta, str):
                self._items_with_reasoning.add(item_id)
                out.extend(self._emit_reasoning(delta))
        elif kind == "response.reasoning_summary_part.added":
            if self._reasoning:
                out.extend(self._emit_reasoning("\n\n"))
        elif kind == "response.output_item.added":
            item = payload.get("item")
            if isinstance(item, dict):
                out.extend(self._item_added(item, payload.get("output_index")))
        elif kind == "response.function_call_arguments.delta":
            slot = self._slot(item_id, payload.get("output_index"))
            delta = payload.get("delta")
            if slot is not None and isinstance(delta, str):
                self._budget.charge(delta)
                slot.fragments.append(delta)
        elif kind == "response.function_call_arguments.done":
            slot = self._slot(item_id, payload.get("output_index"))
            args = payload.get("arguments")
            if slot is not None and isinstance(args, str):
                slot.fragments = [args]
        elif kind == "response.output_item.done":
            item = payload.get("item")
            if isinstance(item, dict):
                out.extend(self._item_done(item, payload.get("output_index")))
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response")
            response = response if isinstance(response, dict) else {}
            out.extend(self._terminal(response, kind))
        elif kind == "response.failed":
            # The error is at response.error and may be null: still a failure.
            response = payload.get("response")
            err = response.get("error") if isinstance(response, dict) else None
            raise error_event(
                {"error": err} if err is not None else None, api_key=self._api_key, url=self._url
            )
        elif kind == "error" or ("type" not in payload and is_error_payload(payload)):
            # untyped: a compatible server's chat-style {"error": ...} (rule 23)
            raise error_event(payload, api_key=self._api_key, url=self._url)
        # Unknown event types are ignored (docs/design/providers.md §6).
        return out

    def _terminal(self, response: dict[str, Any], kind: str) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        if not self._call_order and not self._text and not self._provider_items:
            # Nothing was streamed item by item: take the final output.
            output = response.get("output")
            if isinstance(output, list):
                for idx, item in enumerate(output):
                    if isinstance(item, dict):
                        out.extend(self._item_added(item, idx))
                        out.extend(self._item_done(item, idx))
        usage = _usage(response.get("usage"))
        if usage is not None:
            self._usage = usage
        finish: FinishReason = "stop"
        if kind == "response.incomplete" or response.get("status") == "incomplete":
            # Not a failure: finish length / content_filter, usage kept (rule 21).
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            finish = (
                "length"
                if reason == "max_output_tokens"
                else "content_filter"
                if reason == "content_filter"
                else "other"
            )
        self._done = True
        out.append(self._stream_done(finish))
        return out

    def _stream_done(self, finish: FinishReason) -> StreamDone:
        calls: list[ToolCall] = []
        for i, slot in enumerate(self._call_order):
            if not slot.name:
                continue
            args = finalize_arguments(slot.fragments)
            if finish == "length" and not parses_as_json(args):
                continue  # cut by the token limit: not an assembled call
            calls.append(
                ToolCall(
                    call_id=slot.call_id or f"call_{i}",
                    name=slot.name,
                    arguments=args,
                    provider_fields={PROVIDER: dict(slot.extra)} if slot.extra else {},
                )
            )
        return StreamDone(
            text="".join(self._text),
            reasoning="".join(self._reasoning),
            tool_calls=calls,
            finish="tool_calls" if calls else finish,
            usage=self._usage,
            provider_items=list(self._provider_items),
        )

    def finish(self, *, transport_cut: bool) -> StreamDone:
        raise ProviderError("stream_cut", detail="EOF before a terminal response event")

    # ---- non-streaming -----------------------------------------------------

    def parse_json(self, body: Any) -> list[StreamEvent]:
        if is_error_payload(body) and guess_api(body) != PROVIDER:
            raise error_event(body, api_key=self._api_key, url=self._url)
        if not isinstance(body, dict) or guess_api(body) != PROVIDER:
            # Not a response object: a server of another API, or a stub.
            raise protocol_error(PROVIDER, "JSON, not an event stream", looks_like=guess_api(body))
        status = body.get("status")
        if body.get("error") is not None or status == "failed":
            raise error_event(
                {"error": body.get("error")} if body.get("error") is not None else None,
                api_key=self._api_key,
                url=self._url,
            )
        kind = "response.incomplete" if status == "incomplete" else "response.completed"
        return self._terminal(body, kind)


class OpenAIResponsesProvider(HttpProvider):
    """``openai-responses``: the Responses API, stateless (see module docstring)."""

    name = PROVIDER

    def _url(self) -> str:
        return self._endpoint("/responses")

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        return build_body(request, call_ids=call_id_rule(self.base_url))

    def _parser(self, budget: OutputBudget) -> StreamParser:
        return ResponsesStreamParser(api_key=self._api_key, url=self._url(), budget=budget)
