"""Context usage arithmetic: a model's window and the projected size of the next request.

Rule (docs/design/context.md §1): a value the server reported is used as it
is; a value nobody reported stays ``None`` (unknown), never invented. The
only estimate is the size of what was added since the last reported request,
at :data:`BYTES_PER_TOKEN` bytes of UTF-8 per token, rounded up.
"""

from __future__ import annotations

from msgspec import UNSET, UnsetType

from mind.conversation import Usage
from mind.generated import events as ev
from mind.generated import journal as jr

BYTES_PER_TOKEN = 4
"""Bytes of UTF-8 text per token assumed when a size must be projected (a common estimate)."""

# Longest prefix wins; windows are the providers' published input+output limits in tokens.
_KNOWN_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-3.5-turbo", 16_385),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("o1", 200_000),
    ("claude-", 200_000),
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
