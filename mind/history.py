"""The request builder: journal records → a provider-neutral conversation.

Pure functions (no I/O, no clock). :func:`build_messages` turns the records of
a session journal into the ``messages`` of a :class:`~mind.conversation.ModelRequest`
that every provider accepts whatever the journal holds (DESIGN §5): every
tool call is followed by exactly one result before any other message, even
when a crash cut the journal between a call and its result.

Rules, in journal order:

- ``user_message`` → :class:`~mind.conversation.UserMessage` (skipped when its
  text is empty or only whitespace: providers reject empty content, and
  when its ``message_id`` already appeared: a replayed input is sent once,
  at its first position; and when an ``input_dropped`` record names its
  ``message_id``: the person took it back, so the model never sees it, not
  even at the position a failed turn had journaled it).
- ``model_round`` → :class:`~mind.conversation.AssistantMessage` with its text,
  tool calls (in the round's order) and ``provider_items``; a round with no
  tool calls and empty/whitespace text is skipped (an opaque reasoning item
  alone is rejected by the Responses API); whitespace-only text of a round
  with tool calls becomes ``""``. It is followed *immediately* by one
  :class:`~mind.conversation.ToolResultMessage` per call, in call order.
- ``tool_result`` → the result of the earliest unanswered call with the same
  ``call_id`` recorded *before* it; it is placed after that call's round, not
  where it appears in the journal. A second result for an answered call, or
  a result for a call that does not precede it, is dropped.
- A call without a result gets a synthetic error result whose output is
  exactly :data:`SYNTHETIC_INTERRUPTED_OUTPUT` (DESIGN §4 startup repair).
- Other record types produce no message.

Normalisations that keep the request valid for every provider:

- Call ids are valid and unique for every provider, in the call and in its
  result alike: characters outside ``[a-zA-Z0-9_-]`` become ``_`` (Anthropic's
  tool_use id pattern; ids from other servers such as ``functions.shell:0``
  would be rejected); an empty id becomes ``call``; an id longer than
  :data:`MAX_CALL_ID_CHARS` keeps its first 31 characters plus ``_`` and the
  CRC-32 of the original (8 hex); an id already used by an earlier call gets
  ``_<n>`` (smallest ``n >= 2`` not in use, trimmed to the length limit).
  The journal keeps the original ids; only requests use these.
- Arguments are JSON text of an object: ``""`` (or whitespace) becomes
  ``"{}"``; text that is not a JSON object becomes
  ``{"invalid_arguments": "<the raw text>"}`` so the model still sees what it
  sent (PROVIDER-RULES 17: empty means ``{}``).
"""

from __future__ import annotations

import re
import zlib
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from mind.conversation import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from mind.generated import journal as jr

__all__ = [
    "MAX_CALL_ID_CHARS",
    "SYNTHETIC_INTERRUPTED_OUTPUT",
    "build_messages",
    "pending_tool_calls",
]

MAX_CALL_ID_CHARS: Final = 40
"""Longest call id sent to a provider (OpenAI rejects longer tool call ids)."""

_UNSAFE_ID: Final = re.compile(r"[^a-zA-Z0-9_-]")

SYNTHETIC_INTERRUPTED_OUTPUT: Final = (
    "[interrupted: this tool call did not complete; it was not run again]"
)
"""Output of the synthetic result given to a tool call that has none."""


class _Slot:
    """One tool call of one round and the result that answers it (if any)."""

    __slots__ = ("call", "out_id", "result", "turn_id")

    def __init__(self, call: jr.RecordedToolCall, out_id: str, turn_id: str) -> None:
        self.call = call
        self.out_id = out_id
        self.turn_id = turn_id
        self.result: jr.ToolResult | None = None


class _Round:
    __slots__ = ("record", "slots")

    def __init__(self, record: jr.ModelRound, slots: list[_Slot]) -> None:
        self.record = record
        self.slots = slots


def _unique_id(call_id: str, used: set[str]) -> str:
    """A call id every provider accepts, unique among ``used``."""
    base = _UNSAFE_ID.sub("_", call_id) or "call"
    if len(base) > MAX_CALL_ID_CHARS:
        base = f"{base[: MAX_CALL_ID_CHARS - 9]}_{zlib.crc32(call_id.encode()):08x}"
    if base not in used:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        candidate = base[: MAX_CALL_ID_CHARS - len(suffix)] + suffix
        if candidate not in used:
            return candidate
        n += 1


def _match(records: Sequence[jr.JournalRecord]) -> list[jr.UserMessage | _Round]:
    """Pair tool results with calls; keep user messages and rounds in order."""
    items: list[jr.UserMessage | _Round] = []
    unanswered: dict[str, deque[_Slot]] = {}
    used: set[str] = set()
    # Dropped inputs count as seen from the start: none of their records is sent.
    seen_inputs = {r.message_id for r in records if isinstance(r, jr.InputDropped)}
    for record in records:
        if isinstance(record, jr.UserMessage):
            # An input replayed after a crash is journaled again by the turn
            # that replays it; the model sees it once, where it first
            # appeared (issue 3: none delivered twice to the model).
            if record.message_id in seen_inputs:
                continue
            seen_inputs.add(record.message_id)
            items.append(record)
        elif isinstance(record, jr.ModelRound):
            slots: list[_Slot] = []
            for call in record.tool_calls:
                out_id = _unique_id(call.call_id, used)
                used.add(out_id)
                slot = _Slot(call, out_id, record.turn_id)
                slots.append(slot)
                unanswered.setdefault(call.call_id, deque()).append(slot)
            items.append(_Round(record, slots))
        elif isinstance(record, jr.ToolResult):
            waiting = unanswered.get(record.call_id)
            if waiting:
                waiting.popleft().result = record
    return items


def _arguments(raw: str) -> str:
    """Arguments as JSON text of an object (see the module docstring)."""
    if not raw.strip():
        return "{}"
    try:
        value: Any = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        value = None
    if isinstance(value, dict):
        return raw
    return msgspec.json.encode({"invalid_arguments": raw}).decode()


def build_messages(records: Sequence[jr.JournalRecord]) -> list[Message]:
    """Build the conversation a model request carries from journal records.

    Args:
        records: journal records in ``seq`` order (any subset or prefix of a
            journal; other record types are ignored).

    Returns:
        Messages in conversation order. Invariant: every
        :class:`AssistantMessage` with tool calls is immediately followed by
        exactly one :class:`ToolResultMessage` per call, in call order, before
        any other message; no result appears elsewhere; call ids are unique.
    """
    messages: list[Message] = []
    for item in _match(records):
        if isinstance(item, jr.UserMessage):
            if item.text.strip():
                messages.append(UserMessage(text=item.text))
            continue
        round_ = item.record
        text = round_.text if round_.text.strip() else ""
        if not text and not item.slots:
            continue
        messages.append(
            AssistantMessage(
                text=text,
                tool_calls=[
                    ToolCall(
                        call_id=slot.out_id,
                        name=slot.call.name,
                        arguments=_arguments(slot.call.arguments),
                        provider_fields=(
                            dict(slot.call.provider_fields)
                            if isinstance(slot.call.provider_fields, dict)
                            else {}
                        ),
                    )
                    for slot in item.slots
                ],
                provider_items=list(round_.provider_items),
            )
        )
        for slot in item.slots:
            if slot.result is None:
                messages.append(
                    ToolResultMessage(
                        call_id=slot.out_id, output=SYNTHETIC_INTERRUPTED_OUTPUT, is_error=True
                    )
                )
            else:
                messages.append(
                    ToolResultMessage(
                        call_id=slot.out_id,
                        output=slot.result.output,
                        is_error=slot.result.status != "ok",
                    )
                )
    return messages


def pending_tool_calls(
    records: Sequence[jr.JournalRecord],
) -> list[tuple[str, jr.RecordedToolCall]]:
    """Tool calls that no ``tool_result`` answers (recovery closes them).

    Matching is the same as in :func:`build_messages`: a result answers the
    earliest unanswered call with its ``call_id`` recorded before it.

    Args:
        records: journal records in ``seq`` order.

    Returns:
        ``(turn_id, call)`` pairs in journal and call order; ``call`` is the
        recorded call unchanged (its original ``call_id``), so a result
        journaled for it later answers exactly this call.
    """
    return [
        (slot.turn_id, slot.call)
        for item in _match(records)
        if isinstance(item, _Round)
        for slot in item.slots
        if slot.result is None
    ]
