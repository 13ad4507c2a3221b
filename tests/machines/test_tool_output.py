"""Tool output bounded as the model sees it (docs/design/context.md §3):
per call head + tail with the cut said, per request oldest cut first, UTF-8
kept whole, every call still paired with its result."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mind.context.tool_output import (
    OLD_RESULT_BYTES,
    OutputLimits,
    bound_output,
    bound_tool_results,
    utf8_size,
)
from mind.conversation import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from mind.generated import journal as jr
from mind.history import build_messages
from tests.support import records as rec

SETTINGS = settings(derandomize=True, database=None, deadline=None, max_examples=200)
_MARKER = re.compile(
    r"\n\[\.\.\. (\d+) bytes \((\d+) line breaks?\) cut from the middle of this output, "
    r"which had (\d+) bytes in all; its start and its end are shown \.\.\.\]\n"
)
# Text with multi-byte characters (2, 3, 4 bytes) and line breaks.
_texts = st.text(alphabet=st.sampled_from(["a", "b", "\n", "é", "€", "𝄞", " "]), max_size=4000)


@SETTINGS
@given(text=_texts, budget=st.integers(OLD_RESULT_BYTES, 3000))
def test_a_long_output_keeps_head_and_tail_and_says_what_was_cut(text: str, budget: int) -> None:
    out = bound_output(text, budget)
    data = text.encode()
    assert utf8_size(out) <= budget
    out.encode("utf-8")  # strict: valid UTF-8, no surrogate halves
    if len(data) <= budget:
        assert out == text
        return
    (match,) = _MARKER.finditer(out)
    cut, lines, total = (int(g) for g in match.groups())
    head, tail = out[: match.start()], out[match.end() :]
    assert text.startswith(head) and text.endswith(tail)
    middle = data[len(head.encode()) : len(data) - len(tail.encode())]
    assert (cut, lines, total) == (len(middle), middle.count(b"\n"), len(data))
    # Most of the budget shows the output itself: head and tail are kept.
    assert len(head.encode()) + len(tail.encode()) >= (budget - len(match.group(0).encode())) // 2
    assert head and tail


def test_a_cut_moves_to_a_nearby_line_break() -> None:
    text = "".join(f"line {n:05}\n" for n in range(2000))
    out = bound_output(text, 2048)
    head, _, tail = re.split(r"\n(\[\.\.\. .* \.\.\.\])\n", out)
    # Whole lines on both sides of the marker.
    assert head.endswith("\n") and re.fullmatch(r"(line \d{5}\n)+", head)
    assert re.fullmatch(r"(line \d{5}\n)+", tail)


def _conversation(outputs: list[str]) -> list[Message]:
    messages: list[Message] = [UserMessage(text="go")]
    for n, output in enumerate(outputs):
        call = ToolCall(call_id=f"c{n}", name="shell", arguments="{}")
        messages += [
            AssistantMessage(tool_calls=[call]),
            ToolResultMessage(call_id=f"c{n}", output=output),
        ]
    return messages


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 20_000), max_size=12),
    per_call=st.integers(1024, 8192),
    extra=st.integers(0, 40_000),
)
def test_the_request_total_holds_with_the_oldest_results_cut_first(
    sizes: list[int], per_call: int, extra: int
) -> None:
    limits = OutputLimits(per_call_bytes=per_call, per_request_bytes=per_call + extra)
    outputs = [(f"r{n}:" + "x" * size)[:size] for n, size in enumerate(sizes)]
    messages = _conversation(outputs)
    bounded = bound_tool_results(messages, limits)
    # Same shape: every call is still followed by its one result.
    assert [type(m) for m in bounded] == [type(m) for m in messages]
    results = [m for m in bounded if isinstance(m, ToolResultMessage)]
    assert [r.call_id for r in results] == [f"c{n}" for n in range(len(sizes))]
    kept = [utf8_size(r.output) for r in results]
    assert all(k <= per_call for k in kept)
    total = sum(kept)
    if total > limits.per_request_bytes:
        # Only when every result but the newest is already as short as old ones get.
        assert all(k <= OLD_RESULT_BYTES for k in kept[:-1])
    # The request's cut takes the oldest first: before a result it cut to the
    # old results' size, every result is as short as that (these outputs have
    # no line breaks, so a per-call cut alone keeps more).
    for n, size in enumerate(sizes):
        if kept[n] <= OLD_RESULT_BYTES < size:
            assert all(k <= OLD_RESULT_BYTES for k in kept[:n])


def test_build_messages_bounds_a_huge_result_and_the_journal_keeps_it() -> None:
    huge = "0123456789\n" * 500_000  # 5.5 MB
    records: list[jr.JournalRecord] = [
        rec.turn_started("t"),
        rec.user_message("t", "m", "go", jr.Kind.prompt),
        rec.model_round("t", calls=[rec.call("c")]),
        jr.ToolResult(
            seq=0,
            recorded_at_ms=0,
            turn_id="t",
            call_id="c",
            name="shell",
            status=jr.ToolStatus.ok,
            output=huge,
            synthetic=False,
        ),
    ]
    limits = OutputLimits(per_call_bytes=4096, per_request_bytes=8192)
    (result,) = [
        m for m in build_messages(records, output_limits=limits) if isinstance(m, ToolResultMessage)
    ]
    assert utf8_size(result.output) <= 4096
    assert result.output.startswith("0123456789\n") and result.output.endswith("0123456789\n")
    assert f"which had {len(huge)} bytes in all" in result.output
    assert isinstance(records[-1], jr.ToolResult) and records[-1].output == huge


@given(budget=st.integers(min_value=512, max_value=4096))
def test_a_result_the_runner_cut_states_the_size_the_tool_wrote(budget: int) -> None:
    kept = "a" * 16_000 + "\n[... 1968040 bytes omitted ...]\n" + "z" * 16_000
    result = ToolResultMessage(call_id="c", output=kept, output_bytes=2_000_040)
    (seen,) = bound_tool_results(
        [result], OutputLimits(per_call_bytes=budget, per_request_bytes=budget)
    )
    assert isinstance(seen, ToolResultMessage)
    assert len(seen.output.encode()) <= budget
    assert "which had 2000040 bytes in all (the tool runner kept" in seen.output
    assert f"kept {len(kept.encode())} of them" in seen.output
