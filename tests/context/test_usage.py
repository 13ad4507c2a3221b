"""Context-usage arithmetic: windows, projection, the threshold (docs/design/context.md §1)."""

from __future__ import annotations

from fractions import Fraction

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mind.context.usage import (
    ContextUsage,
    context_usage,
    context_window,
    counts,
    estimate_tokens,
    event_usage,
    journal_usage,
    known_window,
    learned_window,
    over_threshold,
    projected_tokens,
    refused_window,
)
from mind.conversation import Usage
from mind.generated import journal as jr
from tests.support import records as rec


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


def _result(call_id: str, output: str) -> jr.ToolResult:
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id="t1",
        call_id=call_id,
        name="shell",
        status=jr.ToolStatus.ok,
        output=output,
        synthetic=False,
    )


def test_the_fact_is_the_last_reported_round_plus_what_was_added() -> None:
    reported = jr.Usage(
        input_tokens=1000, output_tokens=50, cache_read_tokens=800, cache_write_tokens=0
    )
    records = [
        rec.turn_started("t1"),
        rec.user_message("t1", "m1", "hi", jr.Kind.prompt),
        rec.model_round("t1", "", [rec.call("c1")], usage=jr.Usage(input_tokens=9)),
        _result("c1", "x"),
        rec.model_round("t1", "", [rec.call("c2")], index=1, usage=reported),
        _result("c2", "y" * 400),  # 100 tokens at 4 bytes each
    ]
    usage = context_usage(records, model="gpt-4o", configured=None, learned=None)
    assert usage == ContextUsage(
        input_tokens=1000,
        output_tokens=50,
        cache_read_tokens=800,
        cache_write_tokens=0,
        window=128_000,
        projected_tokens=1150,
        basis="reported",
    )
    assert usage.percent == 0
    assert context_usage(records, model="gpt-4o", configured=2300, learned=None).percent == 50


def test_unknown_stays_unknown_in_the_fact() -> None:
    """A server that reports nothing, an unknown model: every value None, no 0 anywhere."""
    records = [
        rec.turn_started("t1"),
        rec.user_message("t1", "m1", "hi", jr.Kind.prompt),
        rec.model_round("t1", "hello", usage=jr.Usage()),
    ]
    usage = context_usage(records, model="local-llama", configured=None, learned=None)
    assert usage == ContextUsage(basis="unreported")  # a request was made; it said nothing
    assert usage.percent is None
    assert context_usage(records[:2], model="m", configured=None, learned=4096) == ContextUsage(
        window=4096
    )


def test_after_a_compaction_its_after_tokens_is_the_base() -> None:
    done = jr.CompactionCompleted(
        seq=0,
        recorded_at_ms=0,
        compaction_id="c",
        through_seq=2,
        summary="s",
        kept=[],
        after_tokens=300,
    )
    records = [
        rec.turn_started("t1"),
        rec.model_round("t1", "a", usage=jr.Usage(input_tokens=7000, output_tokens=10)),
        done,
        rec.user_message("t2", "m2", "z" * 40, jr.Kind.prompt),
    ]
    usage = context_usage(records, model="m", configured=8000, learned=None)
    assert (usage.input_tokens, usage.projected_tokens, usage.window) == (None, 310, 8000)
    assert usage.basis == "compacted"  # an estimate: no request since
    unknown_after = msgspec.structs.replace(done, after_tokens=msgspec.UNSET)
    usage = context_usage([*records[:2], unknown_after], model="m", configured=None, learned=None)
    assert usage.projected_tokens is None


def test_the_newest_learned_window_of_the_model_is_taken() -> None:
    def learned(model: str, window: int) -> jr.ContextWindowLearned:
        return jr.ContextWindowLearned(
            seq=0, recorded_at_ms=0, turn_id="t1", model=model, window=window
        )

    records = [learned("a", 8192), learned("b", 4096), learned("a", 6000)]
    assert learned_window(records, "a") == 6000
    assert learned_window(records, "b") == 4096
    assert learned_window(records, "c") is None


def test_a_stated_window_not_below_the_refused_request_is_not_the_limit() -> None:
    assert refused_window(8_192, 10_921) == 8_192  # below the refused request: the limit
    assert refused_window(8_192, None) == 8_192  # the request's size not stated
    assert refused_window(32_768, 10_921) == 10_920  # within it was refused: its size - 1
    assert refused_window(10_921, 10_921) == 10_920
    assert refused_window(5, 1) == 1
