"""Context usage arithmetic: a model's window and the projected size of the next request.

Rule (docs/design/context.md §1): a value the server reported is used as it
is; a value nobody reported stays ``None`` (unknown), never invented. The
only estimate is the size of what was added since the last reported request,
at :data:`BYTES_PER_TOKEN` bytes of UTF-8 per token, rounded up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from mind.context.tool_output import DEFAULT_LIMITS, OutputLimits, limits_for_window
from mind.conversation import Usage
from mind.generated import events as ev
from mind.generated import journal as jr

BYTES_PER_TOKEN = 4
"""Bytes of UTF-8 text per token assumed when a size must be projected (a common estimate)."""

# Longest prefix wins; windows are the providers' published input+output
# limits in tokens, checked against the model pages
# (platform.openai.com/docs/models/<name>,
# docs.anthropic.com/en/docs/about-claude/models/overview) as gateways mirror
# them: GPT-5 family 400,000 (gpt-5-chat 128,000; gpt-5.4's 1,050,000 is left
# to the prefix's smaller figure until its minis' are published: too small a
# window only compacts early), GPT-4.1 family 1,047,576, GPT-4o / GPT-4 Turbo
# 128,000, GPT-4 8,192 (-32k 32,768), GPT-3.5 Turbo 16,385, o1 / o3 / o4-mini
# 200,000 (o1-mini, o1-preview 128,000), every Claude 3 / 4 model 200,000 (the
# 1M window is an opt-in beta header mind does not send), Gemini 2.5
# 1,048,576. A family not listed is unknown: a local server states its own
# window in its context-length error, or model_context_window says it.
_KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 400_000),
    ("gpt-5-chat", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
    ("o1-mini", 128_000),
    ("o1-preview", 128_000),
    ("claude-", 200_000),
    ("gemini-2.5", 1_048_576),
)


def known_window(model: str) -> int | None:
    """The built-in context window of a well-known model family, in tokens, or ``None``.

    ``model`` is matched by its longest known prefix, case-insensitively; an
    unknown family gives ``None``.
    """
    name = model.lower()
    best: tuple[int, int] | None = None
    for prefix, window in _KNOWN_WINDOWS:
        if name.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), window)
    return None if best is None else best[1]


def window_mismatch(configured: int | None, learned: int | None) -> str | None:
    """What to tell the person when ``model_context_window`` (``configured``,
    tokens) is larger than the window the server stated (``learned``), or
    None. Rule (docs/design/context.md §1): the configured window is still
    the one planned against, so each request may overflow, compact and be
    sent again; the text names both windows and the setting to change."""
    if configured is None or learned is None or learned >= configured:
        return None
    return (
        f"model_context_window is {configured:,} tokens but the server says this "
        f"model's window is {learned:,}; mind keeps planning for {configured:,}, so "
        f"requests may overflow and be compacted and sent again: set "
        f"model_context_window = {learned} (or unset it)"
    )


def context_window(model: str, *, configured: int | None, learned: int | None) -> int | None:
    """The window to plan against, in tokens: configured > learned > built-in > ``None``.

    ``configured`` is ``model_context_window`` from the settings; ``learned``
    a window the server stated in its own context-length error.
    """
    if configured is not None:
        return configured
    if learned is not None:
        return learned
    return known_window(model)


def refused_window(stated: int, request_tokens: int | None) -> int:
    """The window, in tokens, a ``context_length`` error teaches (docs/design/context.md §1).

    Rule: the window the server ``stated``, unless that is not below the
    size it stated for the request it refused (``request_tokens``; None:
    not stated): a request within the stated window was refused, so the
    stated window is not the limit; the real one is below that request,
    and ``request_tokens - 1`` (at least 1) is learned as its upper bound,
    so the request is rebuilt or compacted under it. Pure; never raises.
    """
    if request_tokens is None or stated < request_tokens:
        return stated
    return max(1, request_tokens - 1)


def estimate_tokens(n_bytes: int) -> int:
    """Tokens assumed for ``n_bytes`` bytes of UTF-8 text (ceil(n_bytes / BYTES_PER_TOKEN)).

    Raises ``ValueError`` for a negative size.
    """
    if n_bytes < 0:
        raise ValueError(f"negative size: {n_bytes} bytes")
    return -(-n_bytes // BYTES_PER_TOKEN)


def projected_tokens(
    *, last_input_tokens: int | None, last_output_tokens: int | None, added_bytes: int
) -> int | None:
    """The projected input tokens of the next request, or ``None`` when no request was reported yet.

    The last reported request's input and output tokens (its answer is now
    part of the context) plus the estimate of ``added_bytes``, the UTF-8 bytes
    of what was appended since (tool results, new user messages).
    """
    if last_input_tokens is None:
        return None
    return last_input_tokens + (last_output_tokens or 0) + estimate_tokens(added_bytes)


def over_threshold(projected: int | None, window: int | None, percent: int) -> bool:
    """Whether ``projected`` tokens pass ``percent``% of ``window`` (auto-compaction's trigger).

    ``percent`` 0 disables it; an unknown projection or window never triggers
    (an unknown value is not evidence of a full context).
    """
    if percent <= 0 or projected is None or window is None:
        return False
    return projected * 100 >= window * percent


# ---- token counts across the layers -------------------------------------------
# A provider's Usage has None for a count the server did not report; the
# journal and the events leave such a count out (UNSET). These three are the
# one place a count crosses between them, so unknown never becomes 0.


def _unset(value: int | None) -> int | UnsetType:
    return UNSET if value is None else value


def _none(value: int | UnsetType) -> int | None:
    return None if isinstance(value, UnsetType) else value


def counts(usage: jr.Usage | ev.Usage) -> Usage:
    """A journaled or published usage as :class:`~mind.conversation.Usage`
    (an absent count becomes ``None``)."""
    return Usage(
        input_tokens=_none(usage.input_tokens),
        output_tokens=_none(usage.output_tokens),
        cache_read_tokens=_none(usage.cache_read_tokens),
        cache_write_tokens=_none(usage.cache_write_tokens),
    )


def journal_usage(usage: Usage) -> jr.Usage:
    """``usage`` as the journal keeps it: an unknown count is left out."""
    return jr.Usage(
        input_tokens=_unset(usage.input_tokens),
        output_tokens=_unset(usage.output_tokens),
        cache_read_tokens=_unset(usage.cache_read_tokens),
        cache_write_tokens=_unset(usage.cache_write_tokens),
    )


def event_usage(usage: Usage) -> ev.Usage:
    """``usage`` as events publish it: an unknown count is left out."""
    return ev.Usage(
        input_tokens=_unset(usage.input_tokens),
        output_tokens=_unset(usage.output_tokens),
        cache_read_tokens=_unset(usage.cache_read_tokens),
        cache_write_tokens=_unset(usage.cache_write_tokens),
    )


# ---- the session's context usage: one fact from the journal -------------------


class ContextUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A session's context usage now (docs/design/context.md §1); ``None`` = unknown.

    Attributes:
        input_tokens: the last request's prompt tokens (cached included), as reported.
        output_tokens: the last request's completion tokens, as reported.
        cache_read_tokens: of ``input_tokens``, read from the prompt cache.
        cache_write_tokens: of ``input_tokens``, written to the prompt cache.
        window: the model's window in tokens (:func:`context_window`).
        projected_tokens: the next request's projected input tokens
            (:func:`projected_tokens` over what was added since).
        basis: what the figures rest on: ``"unsent"`` (no model request
            yet), ``"reported"`` (the last request's counts as the server
            reported them), ``"unreported"`` (the last request reported
            none), ``"compacted"`` (a compaction since the last request:
            its estimate of the new context, no request since),
            ``"refused"`` (requests were sent, but the model refused them as
            over its window and reported nothing: no round answered yet).
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    window: int | None = None
    projected_tokens: int | None = None
    basis: Literal["unsent", "reported", "unreported", "compacted", "refused"] = "unsent"

    @property
    def percent(self) -> int | None:
        """``projected_tokens`` as a whole percentage of ``window`` (rounded
        down), or ``None`` when either is unknown."""
        if self.projected_tokens is None or self.window is None:
            return None
        return self.projected_tokens * 100 // self.window


def learned_window(records: Sequence[jr.JournalRecord], model: str) -> int | None:
    """The window the newest ``context_window_learned`` record states for
    ``model``, in tokens, or ``None``. Reads every record once (call it when
    the session opens; later ones are added as they are journaled)."""
    for record in reversed(records):
        if isinstance(record, jr.ContextWindowLearned) and record.model == model:
            return record.window
    return None


def _added_bytes(record: jr.JournalRecord, per_call_bytes: int) -> int:
    """UTF-8 bytes a record adds to the next request (what the model has not
    counted yet): a tool result as the model sees it, at most ``per_call_bytes``
    (docs/design/context.md §3)."""
    if isinstance(record, jr.UserMessage):
        return len(record.text.encode("utf-8", "replace"))
    if isinstance(record, jr.ToolResult):
        return min(per_call_bytes, len(record.output.encode("utf-8", "replace")))
    return 0


def context_usage(
    records: Sequence[jr.JournalRecord],
    *,
    model: str,
    configured: int | None,
    learned: int | None,
    output_limits: OutputLimits = DEFAULT_LIMITS,
) -> ContextUsage:
    """The session's context usage from its journal records (the one owner of this fact).

    The counts are the newest ``model_round``'s as reported (a round that
    reported none makes them unknown: an older request no longer describes
    the context). After a ``compaction_completed`` newer than that round the
    model sees a new context: its ``after_tokens`` (when known) is the base
    of the projection and the round counts are unknown. What was appended
    since (user messages, tool results) is estimated at
    :data:`BYTES_PER_TOKEN`. Reads the records back to that round or
    compaction only; with neither, nothing was sent yet (``basis="unsent"``),
    unless a turn failed ``context_length`` (``basis="refused"``: sent, refused).

    Args:
        records: the session's journal records, in order.
        model: the model the next request names.
        configured: ``model_context_window`` (None: unset).
        learned: :func:`learned_window` of the session.
        output_limits: the configured tool-output budgets; a result counts
            as the request carries it (:func:`limits_for_window` of the window).
    """
    window = context_window(model, configured=configured, learned=learned)
    per_call = limits_for_window(output_limits, window).per_call_bytes
    added = 0
    for record in reversed(records):
        if isinstance(record, jr.ModelRound):
            last = counts(record.usage)
            return ContextUsage(
                input_tokens=last.input_tokens,
                output_tokens=last.output_tokens,
                cache_read_tokens=last.cache_read_tokens,
                cache_write_tokens=last.cache_write_tokens,
                window=window,
                projected_tokens=projected_tokens(
                    last_input_tokens=last.input_tokens,
                    last_output_tokens=last.output_tokens,
                    added_bytes=added,
                ),
                basis="reported" if last.input_tokens is not None else "unreported",
            )
        if isinstance(record, jr.CompactionCompleted):
            after = _none(record.after_tokens)
            return ContextUsage(
                window=window,
                projected_tokens=projected_tokens(
                    last_input_tokens=after, last_output_tokens=0, added_bytes=added
                ),
                basis="compacted",
            )
        added += _added_bytes(record, per_call)
    refused = any(
        isinstance(r, jr.TurnCompleted)
        and not isinstance(r.failure, UnsetType)
        and r.failure.kind == jr.FailureKind.context_length
        for r in records
    )
    return ContextUsage(window=window, basis="refused" if refused else "unsent")
