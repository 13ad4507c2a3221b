"""Values decoded from a server's JSON: text with no lone surrogates, counts
that are never negative. Pure functions; no I/O."""

from __future__ import annotations

import json
from typing import Any

from mind.conversation import without_lone_surrogates


def load_json(data: str | bytes) -> Any:
    """``json.loads(data)`` with every lone surrogate in its strings replaced by
    U+FFFD (:func:`~mind.conversation.without_lone_surrogates`): a server's
    ``"\\ud800"`` escape must not reach the journal or a printer.

    Raises:
        ValueError: ``data`` is not one JSON value.
    """
    return without_lone_surrogates(json.loads(data))


def as_int(value: Any) -> int:
    """Return ``value`` as a non-negative int (0 for null / non-numbers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def reported_int(value: Any) -> int | None:
    """A count the server reported, as a non-negative int; ``None`` when it
    sent none (absent, null, not a number): unknown, not 0
    (docs/design/context.md §1)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if value != value or value in (float("inf"), float("-inf")):  # NaN / infinity
        return None
    return max(0, int(value))
