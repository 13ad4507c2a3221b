"""The REPL's rendering rules that are easier to pin down without a terminal."""

from __future__ import annotations

from mind.shell.render import MarkdownBlocks, describe_arguments, plain, preview_lines


def feed_all(pieces: list[str]) -> tuple[list[str], str]:
    blocks = MarkdownBlocks()
    ready = [out for piece in pieces if (out := blocks.feed(piece))]
    return ready, blocks.rest()


def test_blocks_are_cut_at_blank_lines_only_once_complete() -> None:
    ready, rest = feed_all(["First para", "graph.\n", "\nSecond", " one.\n\nThird"])
    assert ready == ["First paragraph.\n\n", "Second one.\n\n"]
    assert rest == "Third"


def test_a_blank_line_inside_a_code_fence_does_not_cut_it() -> None:
    text = "```python\nx = 1\n\ny = 2\n```\nafter\n"
    ready, rest = feed_all([text[:12], text[12:20], text[20:]])
    assert ready == ["```python\nx = 1\n\ny = 2\n```\n"]
    assert rest == "after\n"


def test_a_longer_fence_is_closed_only_by_a_fence_at_least_as_long() -> None:
    ready, rest = feed_all(["````\n```\n\n````\n", "tail"])
    assert ready == ["````\n```\n\n````\n"]
    assert rest == "tail"


def test_tool_output_cannot_drive_the_terminal() -> None:
    assert plain("a\x1b[31mred\x1b[0m\tb\x1b]0;title\x07c\x07") == "ared    bc"
    shown, hidden = preview_lines("\n  one\n\n\x1b[2Jtwo\nthree\nfour\n")
    assert (shown, hidden) == (["  one", "two"], 2)


def test_arguments_are_summarised_by_their_telling_field() -> None:
    assert describe_arguments("shell", {"command": "ls  -la\n"}) == "ls -la"
    assert describe_arguments("shell", {"command": ["git", "status"]}) == "git status"
    assert describe_arguments("x", {"a": 1}) == '{"a": 1}'
    assert describe_arguments("shell", {"command": "y" * 50}, limit=10) == "y" * 9 + "…"
