"""Context-usage arithmetic: windows, projection, the threshold (docs/design/context.md §1)."""

from __future__ import annotations

from fractions import Fraction

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mind.context.usage import (
    context_window,
    counts,
    estimate_tokens,
    event_usage,
    journal_usage,
    known_window,
    over_threshold,
    projected_tokens,
)
from mind.conversation import Usage
from mind.generated import journal as jr


def test_known_window_takes_the_longest_prefix() -> None:
    assert known_window("gpt-4o-mini") == 128_000
    assert known_window("GPT-4.1-nano") == 1_047_576
    assert known_window("claude-sonnet-4-5") == 200_000
    assert known_window("my-local-llama") is None


def test_window_prefers_configured_then_learned_then_table() -> None:
    assert context_window("gpt-4o", configured=8000, learned=4000) == 8000
    assert context_window("gpt-4o", configured=None, learned=4000) == 4000
    assert context_window("gpt-4o", configured=None, learned=None) == 128_000
    assert context_window("unknown", configured=None, learned=None) is None


def test_unknown_usage_projects_unknown() -> None:
    assert projected_tokens(last_input_tokens=None, last_output_tokens=5, added_bytes=400) is None
    assert projected_tokens(last_input_tokens=100, last_output_tokens=None, added_bytes=5) == 102


def test_estimate_rounds_up_and_refuses_negative() -> None:
    assert estimate_tokens(0) == 0
    assert estimate_tokens(1) == 1
    assert estimate_tokens(8) == 2
    with pytest.raises(ValueError):
        estimate_tokens(-1)


@given(st.integers(0, 10**7), st.integers(1, 10**7), st.integers(1, 100))
def test_threshold_matches_percentage(projected: int, window: int, percent: int) -> None:
    expected = Fraction(projected, window) * 100 >= percent
    assert over_threshold(projected, window, percent) == expected
    assert not over_threshold(projected, window, 0)
    assert not over_threshold(None, window, percent)
    assert not over_threshold(projected, None, percent)


def test_unreported_counts_stay_unknown_in_the_journal_and_events() -> None:
    """A server that reports nothing gives absent counts, never 0; old
    journals (both counts always present) still decode."""
    assert msgspec.json.encode(journal_usage(Usage())) == b"{}"
    assert msgspec.json.encode(event_usage(Usage(input_tokens=7))) == b'{"input_tokens":7}'
    old = msgspec.json.decode(b'{"input_tokens":3,"output_tokens":4}', type=jr.Usage)
    assert counts(old) == Usage(input_tokens=3, output_tokens=4)
    assert counts(journal_usage(Usage(cache_read_tokens=2))) == Usage(cache_read_tokens=2)


def test_sums_keep_unknown_apart_from_zero() -> None:
    assert Usage() + Usage() == Usage()
    assert Usage(input_tokens=5) + Usage(output_tokens=1) == Usage(input_tokens=5, output_tokens=1)
    assert Usage(input_tokens=5, cache_read_tokens=0) + Usage(input_tokens=2) == Usage(
        input_tokens=7, cache_read_tokens=0
    )
