"""Tool output as the model sees it: bounded per call and per request.

Pure (no I/O). The journal keeps every tool result as the tool runner gave
it (a ``shell`` command's head and tail within the runner's capture, with
the size it wrote as ``output_bytes``); what a request carries is cut here
(docs/design/context.md §3):

- **Per call.** An output over ``per_call_bytes`` (UTF-8) keeps its head and
  its tail, about half each, and says between them, in words the model
  reads, how many bytes and line breaks were cut and how long the whole
  output was. Cuts fall on line breaks where one is near, and never inside
  a UTF-8 sequence.
- **Per request.** When the outputs of the whole message list still exceed
  ``per_request_bytes``, the oldest results are cut further, each down to
  :data:`OLD_RESULT_BYTES`, oldest first, until the rest fits: the newest
  results are the ones the model needs most. A result is only ever
  shortened, never dropped, so every call keeps its result (the pairing
  :func:`mind.history.build_messages` guarantees holds).

Each cut is computed from the journaled output, so what the marker says is
about the output the tool gave, whatever the budgets; when the runner had
already cut it, the marker states the size the tool wrote and what the
runner kept (a fact of the record, never parsed from the runner's note).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from mind.conversation import Message, ToolResultMessage

__all__ = [
    "DEFAULT_LIMITS",
    "MIN_PER_CALL_BYTES",
    "OLD_RESULT_BYTES",
    "OutputLimits",
    "bound_output",
    "bound_tool_results",
    "limits_for_window",
    "utf8_size",
]

OLD_RESULT_BYTES: Final = 512
"""What an old result is cut to when the request's outputs are over their
total, bytes of UTF-8 (the marker and a short head and tail)."""

MIN_PER_CALL_BYTES: Final = 1024
"""The smallest per-call budget a setting may give, bytes: room for the
marker and a head and tail worth reading."""

_NEAR_LINE: Final = 4
"""A cut moves to a line break within 1/_NEAR_LINE of its side's bytes."""


class OutputLimits(msgspec.Struct, frozen=True, kw_only=True):
    """The budgets of tool output in one request, bytes of UTF-8.

    Attributes:
        per_call_bytes: most bytes of one result's output
            (``tool_output_max_bytes``), >= :data:`MIN_PER_CALL_BYTES`.
        per_request_bytes: most bytes of all results' outputs together
            (``tool_output_request_max_bytes``), >= ``per_call_bytes``. It
            holds while the request has at most ``per_request_bytes //
            OLD_RESULT_BYTES`` results; past that every old result is at
            :data:`OLD_RESULT_BYTES` and compaction is what shrinks further.
    """

    per_call_bytes: int = 32 * 1024
    per_request_bytes: int = 256 * 1024


DEFAULT_LIMITS: Final = OutputLimits()
"""32 KiB per call (the tool runner already keeps at most 32,000 bytes of a
command's output, so at this budget they are not cut twice), 256 KiB per
request (about 64k tokens at 4 bytes per token)."""


_WINDOW_BYTES_PER_TOKEN: Final = 4
"""Bytes per token the window-scaled budgets assume (mind's own estimate,
:data:`mind.context.usage.BYTES_PER_TOKEN`)."""


def limits_for_window(limits: OutputLimits, window: int | None) -> OutputLimits:
    """The budgets a request to a model with ``window`` tokens uses.

    Rule (docs/design/context.md §3): the configured bytes are upper bounds;
    with a known window, one result gets at most a quarter of it and all
    results together at most half, at 4 bytes per token, so one result never
    fills the window before the request is built (nor the summarisation
    request that carries it). Never below :data:`MIN_PER_CALL_BYTES` per call,
    and the per-request budget stays at least the per-call one.

    Args:
        limits: the configured budgets, bytes.
        window: the context window in tokens, or None (unknown: ``limits``).

    Returns:
        ``limits`` itself when the window is unknown or large enough.
    """
    if window is None or window <= 0:
        return limits
    per_call = min(
        limits.per_call_bytes, max(MIN_PER_CALL_BYTES, window * _WINDOW_BYTES_PER_TOKEN // 4)
    )
    per_request = min(limits.per_request_bytes, window * _WINDOW_BYTES_PER_TOKEN // 2)
    per_request = max(per_call, per_request)
    if (per_call, per_request) == (limits.per_call_bytes, limits.per_request_bytes):
        return limits
    return OutputLimits(per_call_bytes=per_call, per_request_bytes=per_request)


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (a lone surrogate counts its 3 bytes)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def _marker(
    cut_bytes: int,
    cut_lines: int,
    total_bytes: int,
    what: str = "output",
    written_bytes: int | None = None,
) -> bytes:
    lines = "1 line break" if cut_lines == 1 else f"{cut_lines} line breaks"
    whole = f"which had {total_bytes} bytes in all"
    if written_bytes is not None and written_bytes > total_bytes:
        whole = (
            f"which had {written_bytes} bytes in all (the tool runner kept "
            f"{total_bytes} of them, its start and its end)"
        )
    return (
        f"\n[... {cut_bytes} bytes ({lines}) cut from the middle of this {what}, "
        f"{whole}; its start and its end are shown ...]\n"
    ).encode()


def _char_start(data: bytes, at: int) -> int:
    """``at`` moved back to the first byte of the UTF-8 sequence it is in."""
    while at > 0 and data[at] & 0xC0 == 0x80:
        at -= 1
    return at


def bound_output(
    text: str, max_bytes: int, *, what: str = "output", written_bytes: int | None = None
) -> str:
    """``text`` as the model sees it within ``max_bytes`` bytes of UTF-8.

    Unchanged when it fits. Otherwise its head and tail (about half each of
    what the marker leaves) with the marker between them saying how many
    bytes and line breaks were cut and the whole size. The head ends after a
    line break and the tail starts after one when such a break lies in the
    last (first) quarter of their part; neither cuts a UTF-8 sequence.

    Args:
        text: a tool's output (a ``str``: valid Unicode).
        max_bytes: the budget, bytes; at least the marker's size (about 130
            bytes) for the bound to hold, which :data:`OLD_RESULT_BYTES` and
            :data:`MIN_PER_CALL_BYTES` are.
        what: the noun the marker names ("output"; "message" for a kept
            user message, docs/design/context.md §5).
        written_bytes: the size the tool wrote when ``text`` is the tool
            runner's head and tail of it (``output_bytes``); the marker
            then states it and what the runner kept.

    Returns:
        Text of at most ``max(max_bytes, len(marker))`` UTF-8 bytes.
    """
    if utf8_size(text) <= max_bytes:
        return text
    data = text.encode("utf-8", "surrogatepass")
    total = len(data)
    # The marker's numbers are at most ``total``: its longest form bounds it.
    room = max(0, max_bytes - len(_marker(total, total, total, what, written_bytes)))
    head_end = _char_start(data, room // 2)
    tail_start = total - (room - room // 2)
    while tail_start < total and data[tail_start] & 0xC0 == 0x80:
        tail_start += 1  # forward: moving back would pass the room
    newline = data.rfind(b"\n", head_end - head_end // _NEAR_LINE, head_end)
    if newline >= 0:
        head_end = newline + 1
    tail_room = total - tail_start
    newline = data.find(b"\n", tail_start, tail_start + tail_room // _NEAR_LINE)
    if newline >= 0:
        tail_start = newline + 1
    middle = data[head_end:tail_start]
    marker = _marker(len(middle), middle.count(b"\n"), total, what, written_bytes)
    return (data[:head_end] + marker + data[tail_start:]).decode("utf-8", "surrogatepass")


def _budgets(sizes: Sequence[int], limits: OutputLimits) -> list[int]:
    """Each result's budget: the per-call one, and :data:`OLD_RESULT_BYTES`
    for the oldest while the request's total is over its own."""
    budgets = [min(size, limits.per_call_bytes) for size in sizes]
    excess = sum(budgets) - limits.per_request_bytes
    for i, budget in enumerate(budgets):
        if excess <= 0:
            break
        cut_to = min(budget, OLD_RESULT_BYTES)
        excess -= budget - cut_to
        budgets[i] = cut_to
    return budgets


def bound_tool_results(
    messages: Sequence[Message], limits: OutputLimits = DEFAULT_LIMITS
) -> list[Message]:
    """``messages`` with every tool result's output bounded (per call and per request).

    Args:
        messages: a conversation in order (from :func:`mind.history.build_messages`).
        limits: the budgets.

    Returns:
        A new list of the same length, each message in its place; only
        :class:`~mind.conversation.ToolResultMessage` outputs may differ
        (:func:`bound_output` with the result's budget). The outputs'
        total is at most ``limits.per_request_bytes``, unless every result
        but the newest ones is already at :data:`OLD_RESULT_BYTES`.
    """
    at = [i for i, m in enumerate(messages) if isinstance(m, ToolResultMessage)]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    budgets = _budgets([utf8_size(r.output) for r in results], limits)
    out = list(messages)
    for i, result, budget in zip(at, results, budgets, strict=True):
        bounded = bound_output(result.output, budget, written_bytes=result.output_bytes)
        if bounded is not result.output:
            out[i] = msgspec.structs.replace(result, output=bounded)
    return out
