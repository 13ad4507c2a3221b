"""The history an adapter sends: tool-call sequencing every provider accepts
(docs/design/providers.md §8) and each provider's own opaque items. Pure
functions; no I/O."""

from __future__ import annotations

from typing import Any

from mind.conversation import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

SYNTHETIC_RESULT = "[no result: the tool call was interrupted before it finished]"
"""Output of a synthetic result for a call whose result is missing."""


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
