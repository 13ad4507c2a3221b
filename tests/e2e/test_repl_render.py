"""The REPL's rendering rules that are easier to pin down without a terminal."""

from __future__ import annotations

import io
import os
import sys
from types import FrameType

import msgspec
from rich.console import Console

from mind.generated import events as ev
from mind.shell.call_summary import describe_arguments, preview_lines
from mind.shell.render import TurnView
from mind.shell.stream_blocks import MarkdownBlocks, Piece
from mind.shell.terminal_text import plain


def feed_all(pieces: list[str]) -> tuple[list[list[Piece]], list[Piece]]:
    blocks = MarkdownBlocks()
    ready = [out for piece in pieces if (out := blocks.feed(piece))]
    return ready, blocks.rest()


def md(text: str) -> Piece:
    return Piece("markdown", text)


def test_blocks_are_cut_at_blank_lines_only_once_complete() -> None:
    ready, rest = feed_all(["First para", "graph.\n", "\nSecond", " one.\n\nThird"])
    assert ready == [[md("First paragraph.\n\n")], [md("Second one.\n\n")]]
    assert rest == [md("Third")]


def test_a_left_margin_fence_is_handed_over_line_by_line() -> None:
    ready, rest = feed_all(["Intro\n```pyt", "hon\nx = 1\n", "\ny = 2\n```\nafter\n"])
    assert ready == [
        [
            md("Intro\n"),
            Piece("fence", "```python\n", "python"),
            Piece("code", "x = 1\n", "python"),
        ],
        [Piece("code", "\ny = 2\n", "python"), Piece("close", "```\n", "python")],
    ]
    assert rest == [md("after\n")]


def test_an_unclosed_fence_ends_with_the_message() -> None:
    ready, rest = feed_all(["```\nline\npart"])
    assert ready == [[Piece("fence", "```\n"), Piece("code", "line\n")]]
    assert rest == [Piece("code", "part"), Piece("close", "")]


def test_an_indented_fence_stays_one_block_with_its_blank_lines() -> None:
    text = "- item\n\n  ```\n  x = 1\n\n  y\n  ```\nafter\n"
    ready, rest = feed_all([text[:9], text[9:25], text[25:]])
    assert ready == [[md("- item\n\n")], [md("  ```\n  x = 1\n\n  y\n  ```\n")]]
    assert rest == [md("after\n")]


def test_a_longer_fence_is_closed_only_by_a_fence_at_least_as_long() -> None:
    ready, rest = feed_all(["````\n```\n\n````\n", "tail"])
    assert ready == [[Piece("fence", "````\n"), Piece("code", "```\n\n"), Piece("close", "````\n")]]
    assert rest == [md("tail")]


def test_scanning_examines_each_character_a_bounded_number_of_times() -> None:
    blocks = MarkdownBlocks()
    text = "```\n" + "x = 1  # a line of code\n" * 500
    for i in range(0, len(text), 3):
        blocks.feed(text[i : i + 3])
    assert blocks.scanned <= 2 * len(text)


def test_tool_output_cannot_drive_the_terminal() -> None:
    assert plain("a\x1b[31mred\x1b[0m\tb\x1b]0;title\x07c\x07") == "ared    bc"
    shown, hidden = preview_lines("\n  one\n\n\x1b[2Jtwo\nthree\nfour\n")
    assert (shown, hidden) == (["  one", "two"], 2)


def test_arguments_are_summarised_by_their_telling_field() -> None:
    assert describe_arguments("shell", {"command": "ls  -la\n"}) == "ls -la"
    assert describe_arguments("shell", {"command": ["git", "status"]}) == "git status"
    assert describe_arguments("x", {"a": 1}) == '{"a": 1}'
    assert describe_arguments("shell", {"command": "y" * 50}, limit=10) == "y" * 9 + "…"


def test_bidi_and_zero_width_characters_are_shown_not_obeyed() -> None:
    rlo, zwsp, zwj = "\u202e", "\u200b", "\u200d"
    headline = describe_arguments("shell", {"command": f"echo {rlo}txt.exe{zwsp} x{zwj}y"})
    assert headline == "echo ⟨U+202E⟩txt.exe⟨U+200B⟩ x⟨U+200D⟩y"
    reason = plain(f"runs `rm {rlo}fdp.txt`", keep_joiners=False)
    assert reason == "runs `rm ⟨U+202E⟩fdp.txt`"
    shown, _ = preview_lines("ok\u2066 \ufeffdone\u200f\n")
    assert shown == ["ok⟨U+2066⟩ ⟨U+FEFF⟩done⟨U+200F⟩"]
    family = "\U0001f468\u200d\U0001f469"  # prose keeps the joiner an emoji needs
    assert plain(family) == family
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100))
    view.show(ev.ToolCallEvent(turn_id="t", call_id="c", name=f"sh{rlo}ll", arguments={}))
    assert "⏺ Calling sh⟨U+202E⟩ll" in out.getvalue()


def test_a_turn_warning_is_shown_after_the_text_it_is_about() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100))
    view.show(ev.MessageDeltaEvent(turn_id="t", text="Partial ans"))
    view.show(ev.MessageCompletedEvent(turn_id="t", text="Partial ans"))
    message = "the answer was cut off at the model's output token limit"
    view.show(
        ev.TurnWarningEvent(turn_id="t", kind=ev.WarningKind.output_truncated, message=message)
    )
    shown = out.getvalue()
    assert f"⚠ {message}." in shown
    assert shown.index("Partial ans") < shown.index("⚠")


# ---- streaming cost and open fences ------------------------------------

_WATCHED = (
    f"{os.sep}mind{os.sep}shell{os.sep}",
    f"{os.sep}rich{os.sep}",
    f"{os.sep}pygments{os.sep}",
)


def _fenced(lines: int) -> str:
    body = "".join(
        f"    value_{i} = combine(value_{i - 1}, {i})  # step {i}\n" for i in range(lines)
    )
    return "Here is the module:\n\n```python\n" + body + "```\n\nDone.\n"


def _work_of_streaming(text: str, piece: int = 4) -> tuple[int, str]:
    """Python lines executed by the renderer (mind.shell, rich, pygments frames)
    while ``text`` streams in ``piece``-character deltas, and what it printed.

    A structural count, not wall-clock: deterministic on a loaded machine.
    """
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100, force_terminal=True, color_system="256"))
    view.show(ev.TurnStartedEvent(turn_id="t"))
    count = 0

    def local(frame: FrameType, event: str, arg: object) -> object:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def global_(frame: FrameType, event: str, arg: object) -> object:
        return local if any(w in frame.f_code.co_filename for w in _WATCHED) else None

    sys.settrace(global_)
    try:
        for i in range(0, len(text), piece):
            view.show(ev.MessageDeltaEvent(turn_id="t", text=text[i : i + piece]))
    finally:
        sys.settrace(None)
    view.show(ev.MessageCompletedEvent(turn_id="t", text=text))
    return count, out.getvalue()


def test_streaming_a_long_fence_costs_work_linear_in_its_length() -> None:
    small, _ = _work_of_streaming(_fenced(60))
    large, _ = _work_of_streaming(_fenced(120))
    # Linear work doubles; rescanning the pending text on every delta quadruples it.
    assert large / small < 2.2, (small, large)


def test_streaming_long_markdown_costs_work_linear_in_its_length() -> None:
    para = "A sentence of the **answer** with `code` in it and more words. " * 12
    small, _ = _work_of_streaming((para + "\n\n") * 8)
    large, _ = _work_of_streaming((para + "\n\n") * 16)
    assert large / small < 2.2, (small, large)


def test_lines_of_an_open_fence_are_shown_before_it_closes() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100, force_terminal=True, color_system="256"))
    view.show(ev.TurnStartedEvent(turn_id="t"))
    for piece in ["Intro.\n\n```py", "thon\nfirst_line = 1\nsecond", "_line = 2\nthird"]:
        view.show(ev.MessageDeltaEvent(turn_id="t", text=piece))
    shown = plain(out.getvalue())
    assert "Intro." in shown and "first_line = 1" in shown and "second_line = 2" in shown
    assert "third" not in shown  # an incomplete line waits
    assert "```" not in shown  # the fence itself is markup, not text
    assert "\x1b[" in out.getvalue().split("first_line")[1]  # highlighted as python
    view.show(ev.MessageDeltaEvent(turn_id="t", text="_line = 3\n```\nAfter.\n"))
    full = "Intro.\n\n```python\nfirst_line = 1\nsecond_line = 2\nthird_line = 3\n```\nAfter.\n"
    view.show(ev.MessageCompletedEvent(turn_id="t", text=full))
    shown = plain(out.getvalue())
    assert shown.count("first_line") == 1 and "third_line = 3" in shown and "After." in shown


# ---- a retried stream -------------------------------------------------


def _retry(view: TurnView) -> None:
    failure = ev.Failure(kind=ev.FailureKind.stream_cut, message="The stream was cut.")
    view.show(ev.TurnRetryingEvent(turn_id="t", attempt=1, delay_s=0.5, failure=failure))


def _stream(view: TurnView, text: str) -> None:
    for i in range(0, len(text), 5):
        view.show(ev.MessageDeltaEvent(turn_id="t", text=text[i : i + 5]))


ANSWER = "First block of the answer.\n\n```py\ncode_line = 1\n```\n\nLast block."


def test_a_retry_where_erasing_is_impossible_says_the_partial_is_discarded() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100))  # not a terminal: nothing can be erased
    view.show(ev.TurnStartedEvent(turn_id="t"))
    _stream(view, ANSWER[:45])
    _retry(view)
    _stream(view, ANSWER)
    view.show(ev.MessageCompletedEvent(turn_id="t", text=ANSWER))
    shown = out.getvalue()
    retry_at = shown.index("↻")
    assert "partial answer above is discarded" in shown[retry_at:]
    after = shown[retry_at:]
    assert after.count("First block") == 1 and after.count("code_line") == 1
    assert after.count("Last block.") == 1
    assert "Last block." not in shown[:retry_at]  # pending text of the cut attempt is dropped


def test_a_parked_session_keeps_only_the_retried_answer() -> None:
    view = TurnView(Console(file=io.StringIO(), width=100, force_terminal=True))
    view.muted = True
    view.show(ev.TurnStartedEvent(turn_id="t"))
    _stream(view, ANSWER[:45])
    _retry(view)
    _stream(view, ANSWER)
    view.show(ev.MessageCompletedEvent(turn_id="t", text=ANSWER))
    missed, dropped = view.take_missed()
    shown = plain(missed)
    assert dropped == 0 and "↻" in shown and "discarded" not in shown
    assert shown.count("First block") == 1 and shown.count("code_line") == 1
    assert shown.index("↻") < shown.index("First block")


def test_blocks_of_a_burst_are_rendered_together_and_a_pause_shows_them() -> None:
    now = [0.0]
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100), clock=lambda: now[0], coalesce_s=0.05)
    view.show(ev.TurnStartedEvent(turn_id="t"))
    _stream(view, "One.\n\nTwo.\n\nThr")
    assert out.getvalue() == ""  # held: more may come within the window
    now[0] = 0.06
    view.flush_due()  # the stream paused: the REPL's tick shows what is complete
    assert plain(out.getvalue()).split() == ["One.", "Two."]
    _stream(view, "ee.\n\n")
    view.show(ev.ToolCallEvent(turn_id="t", call_id="c", name="shell", arguments={}))
    assert plain(out.getvalue()).split()[:3] == ["One.", "Two.", "Three."]  # before the call


def test_the_preview_never_runs_ahead_of_the_lines_printed_above_it() -> None:
    now = [0.0]
    out = io.StringIO()
    view = TurnView(
        Console(file=out, width=100), clock=lambda: now[0], coalesce_s=0.05, print_lag_s=0.3
    )
    view.show(ev.TurnStartedEvent(turn_id="t"))

    def delta(text: str) -> None:
        view.show(ev.MessageDeltaEvent(turn_id="t", text=text))

    delta("```\nline 16 of the open fence\nline 17 of th")
    assert view.preview(80) == ""  # line 16 is held, not printed: 17 cannot show yet
    now[0] = 0.1
    delta("e open fence\nline 18 of th")  # prints 16 and 17; the terminal shows them late
    assert "line 17 of the open fence" in out.getvalue()
    assert view.preview(80) == ""
    now[0] = 0.5
    view.flush_due()
    assert "line 17" in out.getvalue() and "line 18" not in out.getvalue()
    assert view.preview(80) == "line 18 of th"  # the stream paused: what arrives shows


def test_an_unterminated_osc_never_swallows_the_lines_after_it() -> None:
    # `echo x ESC]0;T BEL` run by sh: the ';' splits it, so the output holds an
    # OSC opener with no terminator on its own line; later lines must stay.
    output = "x \x1b]0\n[stderr]\n/bin/sh: 1: CMDT\x07x: not found\n"
    shown, _ = preview_lines(output, 5)
    assert shown == ["x 0", "[stderr]", "/bin/sh: 1: CMDTx: not found"]
    assert plain("a\x1b]0;title\x07b") == "ab"  # a terminated one is still removed whole
    assert plain("a\x9d0;t\nb") == "a0;t\nb"


def test_an_automatic_compaction_is_shown_with_its_sizes() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=120))
    view.show(ev.MessageDeltaEvent(turn_id="t", text="Before"))
    view.show(
        ev.ContextCompactedEvent(
            compaction_id="cp_1",
            trigger=ev.CompactionTrigger.auto,
            turn_id="t",
            before_tokens=13_100,
            after_tokens=1_200,
        )
    )
    shown = out.getvalue()
    assert "⟳ context compacted (automatic): ~13.1k → ~1.2k tokens" in shown
    assert shown.index("Before") < shown.index("context compacted")


def test_a_resumed_turn_counts_commands_already_running_apart_from_calls_to_run() -> None:
    """effects.md §4: a command a crash left running is waited for, never run
    again — the note and ``mind exec``'s stderr say so."""
    from mind.shell.event_text import describe_resume

    def resumed(calls: list[str], running: list[str] | None) -> str:
        waited = msgspec.UNSET if running is None else running
        event = ev.TurnResumedEvent(turn_id="t", call_ids=calls, running_call_ids=waited)
        return describe_resume(event)

    assert resumed(["a"], None) == "1 tool call(s) to run"
    assert resumed([], None) == "its tool results go to the model"
    assert resumed(["a"], ["a"]) == "1 command already running, waited for, not run again"
    assert resumed(["a", "b", "c"], ["b", "c"]) == (
        "1 tool call(s) to run, 2 commands already running, waited for, not run again"
    )


def test_a_resumed_turn_counts_calls_whose_outcome_is_unknown_apart_from_calls_to_run() -> None:
    """effects.md §4: a call whose outcome is unknown is asked about, never
    run unasked — the note says so, not "to run"."""
    from mind.shell.event_text import describe_resume

    event = ev.TurnResumedEvent(turn_id="t", call_ids=["a", "b"], unknown_call_ids=["b"])
    assert describe_resume(event) == (
        "1 tool call(s) to run, 1 call whose outcome is unknown (you are asked)"
    )


def test_a_failed_compaction_is_shown_with_its_reason() -> None:
    out = io.StringIO()
    view = TurnView(Console(file=out, width=200))
    view.show(
        ev.ContextCompactionFailedEvent(
            compaction_id="cp_1",
            trigger=ev.CompactionTrigger.overflow,
            turn_id="t",
            reason="the summary was empty",
        )
    )
    assert (
        "⚠ compacting the context failed (the context was full): the summary was empty; "
        "the model still sees the whole conversation." in out.getvalue()
    )
