"""The request builder: journal records → a provider-neutral conversation.

Pure functions (no I/O, no clock). :func:`build_messages` turns the records of
a session journal into the ``messages`` of a :class:`~mind.conversation.ModelRequest`
that every provider accepts whatever the journal holds (docs/design/providers.md §8): every
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
- ``tool_result`` → the result of the earliest unanswered call of its turn
  with the same ``call_id`` recorded *before* it (per turn and per occurrence:
  :func:`mind.call_pairing.pair_calls`; servers reuse ids such as ``call_0``);
  it is placed after that call's round, not where it appears in the journal.
  A second result for an answered call, or a result for a call that does not
  precede it, is dropped.
- A call without a result gets a synthetic error result whose output is
  exactly :data:`SYNTHETIC_INTERRUPTED_OUTPUT` (docs/design/recovery.md §5 startup repair).
- Other record types produce no message.
- Tool output is bounded last, per call and per request
  (:func:`mind.context.tool_output.bound_tool_results`; the journal keeps it
  whole): docs/design/context.md §3.
- After the newest ``compaction_completed`` (docs/design/context.md §5), the
  rules above apply to its view (:func:`mind.context.compaction.compacted_view`):
  the summary first, as a user message behind
  :data:`~mind.context.compaction.SUMMARY_PREFIX`, then the kept user
  messages, then the records after its ``through_seq``.

Normalisations that keep the request valid for every provider:

- Call ids are the server's own, verbatim (some compatible servers encode
  meaning in them: Kimi's ``functions.shell:0`` names the tool and its index
  for the chat template), except that an empty id becomes ``call`` and an id
  already used by an earlier call gets ``_<n>`` (smallest ``n >= 2`` not in
  use): every API pairs results with calls by id.

Call ids per target API (docs/design/providers.md §8): an adapter passes the built
messages through :func:`conform_call_ids` with its API's :class:`CallIdRule`,
which rewrites an id only where that API documents a rule the id breaks
(Anthropic's character pattern, OpenAI's length limits). The mapping is the
one function here, deterministic (the same journal yields the same request,
across resumes), collision-free, and prefix-stable (a longer journal never
changes an id already sent). The journal keeps the original ids.
- Arguments are JSON text of an object: ``""`` (or whitespace) becomes
  ``"{}"``; text that is not a JSON object becomes
  ``{"invalid_arguments": "<the raw text>"}`` so the model still sees what it
  sent (docs/design/providers.md §5: empty means ``{}``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from mind.call_pairing import pair_calls
from mind.context.compaction import SUMMARY_PREFIX, compacted_view
from mind.context.tool_output import DEFAULT_LIMITS, OutputLimits, bound_tool_results
from mind.conversation import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from mind.generated import journal as jr

__all__ = [
    "ANTHROPIC_CALL_IDS",
    "COMPATIBLE_CALL_IDS",
    "OPENAI_CHAT_CALL_IDS",
    "OPENAI_RESPONSES_CALL_IDS",
    "SYNTHETIC_INTERRUPTED_OUTPUT",
    "CallIdRule",
    "build_messages",
    "conform_call_ids",
    "pending_tool_calls",
    "records_starts",
]


@dataclass(frozen=True, slots=True)
class CallIdRule:
    """What one target API accepts as a tool-call id, beyond non-empty and unique.

    Attributes:
        name: the target, for messages.
        unsafe: characters the API rejects (each becomes ``_``); None: any.
        max_chars: longest id the API accepts, in characters; None: no limit.
    """

    name: str
    unsafe: re.Pattern[str] | None = None
    max_chars: int | None = None


COMPATIBLE_CALL_IDS: Final = CallIdRule("openai-compatible")
"""No rule: ids go back verbatim (llama.cpp, vLLM, Ollama, LM Studio, ...).

vLLM mints 46-character ids (``chatcmpl-tool-<32 hex>``) and accepts them
back; Kimi-style ids (``functions.NAME:INDEX``) are parsed by the chat
template; OpenAI's own limits are not these servers' rules."""

OPENAI_CHAT_CALL_IDS: Final = CallIdRule("openai-chat", max_chars=40)
"""OpenAI's Chat Completions: 400 ``string_above_max_length`` "Invalid
'messages[N].tool_calls[0].id': string too long. Expected a string with
maximum length 40" (reported in autogen#6377, agno#5382, openclaw#875)."""

OPENAI_RESPONSES_CALL_IDS: Final = CallIdRule("openai-responses", max_chars=64)
"""OpenAI's Responses API: 400 ``string_above_max_length`` "Invalid
'input[N].call_id': string too long. Expected a string with maximum length
64" (reported in fastllm#45, nanobot#1623)."""

ANTHROPIC_CALL_IDS: Final = CallIdRule("anthropic", unsafe=re.compile(r"[^a-zA-Z0-9_-]"))
"""Anthropic Messages: ``tool_use.id`` must match ``^[a-zA-Z0-9_-]+$`` (the
API's documented pattern; 400 "String should match pattern")."""

_HASH_CHARS: Final = 9
"""``_`` plus 8 hex digits of CRC-32: the tail of an id cut to a length limit."""

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


def _conform_id(call_id: str, rule: CallIdRule, used: set[str]) -> str:
    """``call_id`` as ``rule`` accepts it, unique among ``used`` (not added).

    Verbatim when valid and unused. Otherwise: unsafe characters become
    ``_``; empty becomes ``call``; over ``max_chars`` keeps the first
    ``max_chars - 9`` characters plus ``_`` and the CRC-32 of the id (8 hex);
    a used id gets ``_<n>`` (smallest ``n >= 2`` free, trimmed to the limit).
    """
    base = (rule.unsafe.sub("_", call_id) if rule.unsafe is not None else call_id) or "call"
    limit = rule.max_chars
    if limit is not None and len(base) > limit:
        base = f"{base[: limit - _HASH_CHARS]}_{zlib.crc32(call_id.encode()):08x}"
    if base not in used:
        return base
    n = 2
    while True:
        suffix = f"_{n}"
        head = base if limit is None else base[: limit - len(suffix)]
        candidate = head + suffix
        if candidate not in used:
            return candidate
        n += 1


def conform_call_ids(messages: Sequence[Message], rule: CallIdRule) -> list[Message]:
    """Rewrite call ids only where the target API's ``rule`` is broken.

    Each distinct call id is mapped once, in order of first appearance, with
    :func:`_conform_id`, and a result takes its call's new id, so it keeps
    pairing; the mapping is injective, deterministic and prefix-stable. A
    result before any call with its id (an orphan, which adapters drop)
    keeps its id and reserves none.

    Args:
        messages: a conversation (normally from :func:`build_messages`, whose
            ids are already non-empty and unique).
        rule: the target API's rule (e.g. :data:`ANTHROPIC_CALL_IDS`).

    Returns:
        A new list; ``messages`` is not modified.
    """
    mapping: dict[str, str] = {}
    used: set[str] = set()

    def out_id(call_id: str) -> str:
        if call_id not in mapping:
            mapping[call_id] = _conform_id(call_id, rule, used)
            used.add(mapping[call_id])
        return mapping[call_id]

    out: list[Message] = []
    for msg in messages:
        if isinstance(msg, AssistantMessage) and msg.tool_calls:
            calls = [msgspec.structs.replace(c, call_id=out_id(c.call_id)) for c in msg.tool_calls]
            if calls != msg.tool_calls:
                msg = msgspec.structs.replace(msg, tool_calls=calls)
        elif isinstance(msg, ToolResultMessage):
            new_id = mapping.get(msg.call_id, msg.call_id)
            if new_id != msg.call_id:
                msg = msgspec.structs.replace(msg, call_id=new_id)
        out.append(msg)
    return out


def _match(records: Sequence[jr.JournalRecord]) -> list[jr.UserMessage | _Round]:
    """Pair tool results with calls (:func:`mind.call_pairing.pair_calls`: per
    turn and per occurrence); keep user messages and rounds in order."""
    items: list[jr.UserMessage | _Round] = []
    paired = {(p.round_at, p.index): p for p in pair_calls(records)}
    used: set[str] = set()
    # Dropped inputs count as seen from the start: none of their records is sent.
    seen_inputs = {r.message_id for r in records if isinstance(r, jr.InputDropped)}
    for at, record in enumerate(records):
        if isinstance(record, jr.UserMessage):
            # An input replayed after a crash is journaled again by the turn
            # that replays it; the model sees it once, where it first
            # appeared (docs/design/recovery.md §4: none delivered twice to the model).
            if record.message_id in seen_inputs:
                continue
            seen_inputs.add(record.message_id)
            items.append(record)
        elif isinstance(record, jr.ModelRound):
            slots: list[_Slot] = []
            for index, call in enumerate(record.tool_calls):
                out_id = _conform_id(call.call_id, COMPATIBLE_CALL_IDS, used)
                used.add(out_id)
                slot = _Slot(call, out_id, record.turn_id)
                slot.result = paired[(at, index)].result
                slots.append(slot)
            items.append(_Round(record, slots))
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


def build_messages(
    records: Sequence[jr.JournalRecord], *, output_limits: OutputLimits = DEFAULT_LIMITS
) -> list[Message]:
    """Build the conversation a model request carries from journal records.

    Args:
        records: journal records in ``seq`` order (any subset or prefix of a
            journal; other record types are ignored).
        output_limits: the tool-output budgets (per call, per request) the
            results are bounded to (:func:`mind.context.tool_output.bound_tool_results`;
            the journal keeps them whole).

    Returns:
        Messages in conversation order. Invariant: every
        :class:`AssistantMessage` with tool calls is immediately followed by
        exactly one :class:`ToolResultMessage` per call, in call order, before
        any other message; no result appears elsewhere; call ids are unique.
    """
    view = compacted_view(records)
    messages: list[Message] = []
    if view.summary is not None:
        messages.append(UserMessage(text=SUMMARY_PREFIX + view.summary))
    for item in _match(view.records):
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
                        output_bytes=slot.result.output_bytes or None,
                    )
                )
    # What the model sees of tool output is bounded (docs/design/context.md §3).
    return bound_tool_results(messages, output_limits)


def pending_tool_calls(
    records: Sequence[jr.JournalRecord],
) -> list[tuple[str, jr.RecordedToolCall]]:
    """Tool calls that no ``tool_result`` answers (recovery closes them).

    Matching is the same as in :func:`build_messages`
    (:func:`mind.call_pairing.pair_calls`: per turn and per occurrence).

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


def records_starts(records: Sequence[jr.JournalRecord], turn_id: str) -> bool:
    """Whether ``turn_id`` records a ``tool_started`` before each tool runs.

    A turn whose ``turn_started`` says ``tool_starts`` fsyncs that record
    before each tool runs, so its calls without one
    (:attr:`mind.call_pairing.PairedCall.started` False) provably never ran.
    A turn from an older journal records no starts: absence proves nothing
    (fail closed: "may have run").
    """
    return any(
        isinstance(r, jr.TurnStarted) and r.turn_id == turn_id and r.tool_starts is True
        for r in records
    )
