"""OpenAI Chat Completions adapter (``openai-chat``): OpenAI and every compatible server.

Request: ``POST {base}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage``. Response: SSE ``chat.completion.chunk``
events (or one ``chat.completion`` JSON body), parsed by
:class:`ChatStreamParser` following docs/design/providers.md §4, §5.

Body shape (:func:`build_body`)::

    {"model", "stream": true, "stream_options": {"include_usage": true},
     "messages": [{"role": "system"|"user"|"assistant"|"tool", ...}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "max_tokens"?: int}
"""

from __future__ import annotations

import json
import logging
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
    OPENAI_CHAT_CALL_IDS,
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
from mind.shell.providers.sequencing import sequence_messages
from mind.shell.providers.server_json import load_json, reported_int
from mind.shell.providers.sse import SSEEvent
from mind.shell.providers.tool_arguments import CallSlot, finalize_arguments, parses_as_json

log = logging.getLogger("mind.providers")

PROVIDER = "openai-chat"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "tool_use": "tool_calls",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "content_filter": "content_filter",
    "safety": "content_filter",
}


def call_id_rule(base_url: str) -> CallIdRule:
    """The call-id rule of the server at ``base_url`` (docs/design/providers.md §8).

    OpenAI's 40-character limit on OpenAI's hosts (:func:`is_openai_host`);
    none for compatible servers, which get their own ids back verbatim.
    """
    return OPENAI_CHAT_CALL_IDS if is_openai_host(base_url) else COMPATIBLE_CALL_IDS


def build_body(
    request: ModelRequest, *, call_ids: CallIdRule = COMPATIBLE_CALL_IDS
) -> dict[str, Any]:
    """Serialise ``request`` as a Chat Completions request body (pure).

    Call ids are passed through :func:`mind.history.conform_call_ids` with
    ``call_ids`` (see :func:`call_id_rule`). The message list is re-sequenced
    first (each assistant tool call answered by exactly one ``role: "tool"``
    message before anything else). Assistant
    messages omit ``content`` when they only call tools; arguments that are
    not valid JSON are sent as ``"{}"`` (compatible servers reject them in
    history). Per-call extras kept by this adapter (Gemini ``extra_content``)
    are sent back unchanged.

    Args:
        request: the provider-neutral request.
        call_ids: the target's call-id rule.

    Returns:
        A JSON-ready dict (see module docstring for the shape).
    """
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for msg in sequence_messages(conform_call_ids(request.messages, call_ids)):
        if isinstance(msg, AssistantMessage):
            out: dict[str, Any] = {"role": "assistant"}
            if msg.text or not msg.tool_calls:
                out["content"] = msg.text
            if msg.tool_calls:
                calls = []
                for call in msg.tool_calls:
                    entry: dict[str, Any] = {
                        "id": call.call_id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": call.arguments if parses_as_json(call.arguments) else "{}",
                        },
                    }
                    extra = call.provider_fields.get(PROVIDER)
                    if isinstance(extra, dict):
                        for key, value in extra.items():
                            entry.setdefault(key, value)
                    calls.append(entry)
                out["tool_calls"] = calls
            messages.append(out)
        elif isinstance(msg, ToolResultMessage):
            messages.append({"role": "tool", "tool_call_id": msg.call_id, "content": msg.output})
        else:
            messages.append({"role": "user", "content": msg.text})
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                },
            }
            for t in request.tools
        ]
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    return body


def _usage(raw: Any) -> Usage | None:
    """A chunk's ``usage`` as reported; a count it lacks stays unknown.

    ``prompt_tokens`` counts cached tokens too; ``prompt_tokens_details``
    says how many were read from the cache (``cached_tokens``: OpenAI, xAI,
    DeepSeek, OpenRouter) and written to it (``cache_write_tokens``: OpenRouter).
    """
    if not isinstance(raw, dict):
        return None
    details = raw.get("prompt_tokens_details")
    if not isinstance(details, dict):
        details = {}
    return Usage(
        input_tokens=reported_int(raw.get("prompt_tokens", raw.get("input_tokens"))),
        output_tokens=reported_int(raw.get("completion_tokens", raw.get("output_tokens"))),
        cache_read_tokens=reported_int(details.get("cached_tokens")),
        cache_write_tokens=reported_int(details.get("cache_write_tokens")),
    )


def _text(value: Any) -> str:
    """Content/reasoning value as text: null → "" (never the string "null")."""
    return value if isinstance(value, str) else ""


class ChatStreamParser(StreamParser):
    """Assembles one Chat Completions stream (docs/design/providers.md §4, §5).

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
        self._calls: list[CallSlot] = []
        self._by_index: dict[int, CallSlot] = {}
        self._last: CallSlot | None = None
        self._finish_raw: str | None = None
        self._usage_top: Usage | None = None
        self._usage_groq: Usage | None = None
        self._done = False
        self._saw_done_sentinel = False

    @property
    def done(self) -> bool:
        return self._done

    # ---- SSE ---------------------------------------------------------------

    def feed_event(self, event: SSEEvent) -> list[StreamEvent]:
        if event.error:
            # Non-standard `error:` field (old llama.cpp, docs/design/providers.md §2).
            raise error_event(_maybe_json(event.error), api_key=self._api_key, url=self._url)
        # Only unnamed / "message" events, plus "error" (docs/design/providers.md §4);
        # a named event of another API (Anthropic's) is a mismatch.
        if event.event not in ("", "message", "error"):
            self._check_named(event)
            return []
        data = event.data.strip()
        if not data:
            return []
        if data == "[DONE]":
            self._saw_done_sentinel = True
            self._done = True
            return [self._finish_clean()]
        try:
            chunk = load_json(data)
        except ValueError:
            if event.at_eof:
                return []  # torn last event: EOF logic decides (rule 19)
            raise malformed_event(data) from None
        if event.event == "error":
            raise error_event(chunk, api_key=self._api_key, url=self._url)
        return self._chunk(chunk)

    def _check_named(self, event: SSEEvent) -> None:
        try:
            payload = load_json(event.data)
        except ValueError:
            return
        other = guess_api(payload)
        if other not in (None, PROVIDER):
            raise protocol_error(PROVIDER, "another API's event stream", looks_like=other)

    def _chunk(self, chunk: Any) -> list[StreamEvent]:
        if not isinstance(chunk, dict):
            return []
        # Top-level error first, object or plain string (docs/design/providers.md §4);
        # older vLLM sends the error object itself ({"object": "error", ...}).
        if is_error_payload(chunk):
            raise error_event(chunk, api_key=self._api_key, url=self._url)
        other = guess_api(chunk)
        if other not in (None, PROVIDER):
            # another API's event (Responses, Anthropic): no chunk will come
            raise protocol_error(PROVIDER, "another API's event stream", looks_like=other)
        # Usage: top-level, else x_groq.usage; last value wins (rule 10).
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            self._usage_top = usage
        x_groq = chunk.get("x_groq")
        if isinstance(x_groq, dict):
            groq = _usage(x_groq.get("usage"))
            if groq is not None:
                self._usage_groq = groq
        out: list[StreamEvent] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out  # usage/metadata/ping chunk (rules 10, 11)
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            if self._finish_raw is None:
                out.extend(self._delta(delta))  # delta before finish_reason (rule 13)
            else:
                _ignore_after_finish(delta, self._finish_raw)
            self._note_finish(choice.get("finish_reason"))
        return out

    def _note_finish(self, raw: Any) -> None:
        if not isinstance(raw, str) or raw == "":
            return  # "" is null (docs/design/providers.md §4)
        if raw == "error":
            raise ProviderError("server", detail='finish_reason "error"')
        self._finish_raw = raw  # the last non-empty value wins

    def _delta(self, delta: dict[str, Any]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        # Reasoning is kept apart from content (docs/design/providers.md §4).
        reasoning = _text(delta.get("reasoning_content")) or _text(delta.get("reasoning"))
        if reasoning:
            self._budget.charge(reasoning)
            self._reasoning.append(reasoning)
            out.append(ReasoningDelta(text=reasoning))
        content = _text(delta.get("content"))
        if content:
            # Tool-call JSON inside content stays text (docs/design/providers.md §4).
            self._budget.charge(content)
            self._text.append(content)
            out.append(TextDelta(text=content))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for frag in tool_calls:
                if isinstance(frag, dict):
                    out.extend(self._tool_fragment(frag))
        return out

    def _tool_fragment(self, frag: dict[str, Any]) -> list[StreamEvent]:
        """Route one tool-call fragment to its slot (docs/design/providers.md §4)."""
        raw_index = frag.get("index")
        index = (
            raw_index if isinstance(raw_index, int) and not isinstance(raw_index, bool) else None
        )
        raw_id = frag.get("id")
        frag_id = raw_id if isinstance(raw_id, str) and raw_id else ""  # "" is absent
        fn = frag.get("function")
        fn = fn if isinstance(fn, dict) else {}

        current = self._by_index.get(index) if index is not None else self._last
        if current is None or (frag_id and current.call_id and frag_id != current.call_id):
            current = CallSlot()
            self._calls.append(current)
            if index is not None:
                self._by_index[index] = current
        self._last = current

        if frag_id and not current.call_id:
            current.call_id = frag_id  # set once; a repeat is a no-op
        name = fn.get("name")
        if isinstance(name, str) and name and not current.name:
            current.name = name
        args = fn.get("arguments")
        if isinstance(args, dict | list):
            args = json.dumps(args)
        if isinstance(args, str):
            self._budget.charge(args)
            current.fragments.append(args)  # only arguments concatenate
        for key, value in frag.items():
            if key not in ("index", "id", "type", "function"):
                current.extra.setdefault(key, value)  # e.g. Gemini extra_content
        if current.name and not current.started:
            current.started = True
            if not current.call_id:
                current.call_id = f"call_{len(self._calls) - 1}"
            return [ToolCallStarted(call_id=current.call_id, name=current.name)]
        return []

    # ---- end ---------------------------------------------------------------

    def _assembled(self, *, length_cut: bool) -> list[ToolCall]:
        calls: list[ToolCall] = []
        for i, slot in enumerate(self._calls):
            if not slot.name:
                continue  # a call with no name cannot be run
            args = finalize_arguments(slot.fragments)
            if length_cut and not parses_as_json(args):
                continue  # cut by the token limit: not an assembled call
            calls.append(
                ToolCall(
                    call_id=slot.call_id or f"call_{i}",
                    name=slot.name,
                    arguments=args,
                    provider_fields={PROVIDER: dict(slot.extra)} if slot.extra else {},
                )
            )
        return calls

    def _finish_clean(self) -> StreamDone:
        finish_raw = self._finish_raw
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        if finish_raw is None and not (text or reasoning or self._calls):
            # [DONE] with no finish_reason and no output (docs/design/providers.md §4).
            raise ProviderError("server", detail="stream ended with no output and no finish_reason")
        mapped = _FINISH.get(finish_raw, "other") if finish_raw is not None else "stop"
        calls = self._assembled(length_cut=mapped == "length")
        finish: FinishReason = "tool_calls" if calls else mapped  # docs/design/providers.md §4
        if finish == "tool_calls" and not calls:
            finish = "other"
        usage = self._usage_top or self._usage_groq or Usage()
        return StreamDone(
            text=text,
            reasoning=reasoning,
            tool_calls=calls,
            finish=finish,
            usage=usage,
        )

    def finish(self, *, transport_cut: bool) -> StreamDone:
        # EOF after a finish_reason is a clean end; without one it is a
        # truncation. [DONE] is not required (docs/design/providers.md §4).
        if self._finish_raw is None:
            raise ProviderError("stream_cut", detail="EOF before finish_reason or [DONE]")
        self._done = True
        return self._finish_clean()

    # ---- non-streaming -----------------------------------------------------

    def parse_json(self, body: Any) -> list[StreamEvent]:
        if is_error_payload(body):
            raise error_event(body, api_key=self._api_key, url=self._url)
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
            # Not a chat.completion: a server of another API, or a stub.
            raise protocol_error(PROVIDER, "JSON, not an event stream", looks_like=guess_api(body))
        usage = _usage(body.get("usage"))
        if usage is not None:
            self._usage_top = usage
        out: list[StreamEvent] = []
        choices = body.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                    continue
                message = choice.get("message")
                message = message if isinstance(message, dict) else {}
                tool_calls = message.get("tool_calls")
                if isinstance(tool_calls, list):
                    message = dict(message)
                    message["tool_calls"] = [
                        {**tc, "index": i}
                        for i, tc in enumerate(tool_calls)
                        if isinstance(tc, dict)
                    ]
                out.extend(self._delta(message))
                self._note_finish(choice.get("finish_reason"))
        self._done = True
        out.append(self._finish_clean())
        return out


def _ignore_after_finish(delta: dict[str, Any], finish_raw: str) -> None:
    """Output in a chunk after the finish reason is not part of the answer
    (docs/design/providers.md §4 rule 9): the answer ended, so text, reasoning
    or tool-call fragments arriving later (a server repeating its tail) are
    dropped, never appended — and the log says how much was dropped."""
    dropped = len(_text(delta.get("content"))) + len(_text(delta.get("reasoning_content")))
    dropped += len(_text(delta.get("reasoning")))
    calls = delta.get("tool_calls")
    for frag in calls if isinstance(calls, list) else ():
        fn = frag.get("function") if isinstance(frag, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        dropped += len(args) if isinstance(args, str) else 0
    if dropped:
        log.warning(
            "ignored %d characters of model output after finish_reason %r", dropped, finish_raw
        )


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class OpenAIChatProvider(HttpProvider):
    """``openai-chat``: Chat Completions over SSE (see module docstring)."""

    name = PROVIDER

    def _url(self) -> str:
        return self._endpoint("/chat/completions")

    def _headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        return build_body(request, call_ids=call_id_rule(self.base_url))

    def _parser(self, budget: OutputBudget) -> StreamParser:
        return ChatStreamParser(api_key=self._api_key, url=self._url(), budget=budget)
