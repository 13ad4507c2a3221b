"""The pure approval-text rules: full text, bounded display, visible characters, diffs."""

from __future__ import annotations

from mind.effects.review import (
    FileChange,
    approval_text,
    change_summary,
    cut_for_display,
    unified_diff,
    visible,
)


def test_a_short_text_is_shown_whole() -> None:
    cut = cut_for_display("ls -la\n")
    assert (cut.head_chars, cut.tail_chars, cut.hidden_chars) == (7, 0, 0)


def test_a_long_one_line_command_shows_head_and_tail_and_counts_the_rest() -> None:
    text = "echo " + "x" * 10_000 + " && rm -rf build"
    cut = cut_for_display(text)
    head, tail = text[: cut.head_chars], text[len(text) - cut.tail_chars :]
    assert cut.hidden_chars == len(text) - len(head) - len(tail) > 0
    assert head.startswith("echo ") and tail.endswith("rm -rf build")  # the end is never cut


def test_many_lines_are_cut_at_line_ends() -> None:
    text = "".join(f"line {n}\n" for n in range(200))
    cut = cut_for_display(text)
    head, tail = text[: cut.head_chars], text[len(text) - cut.tail_chars :]
    assert head.endswith("\n") and tail.startswith("line ") and tail.endswith("line 199\n")
    assert cut.hidden_lines == 200 - head.count("\n") - tail.count("\n")


def test_characters_a_terminal_would_hide_are_shown_escaped() -> None:
    assert visible("echo safe\r\x1b[2Krm -rf ~") == "echo safe\\x0d\\x1b[2Krm -rf ~"
    assert visible("a\u202eb\tc\n") == "a\\u202eb\tc\n"


def test_variation_selectors_are_shown_escaped_on_a_card() -> None:
    """U+FE0F (and the other variation selectors) change how the character
    before them looks without showing themselves: a card escapes them; prose
    keeps them for emoji (mark_hidden keep_joiners)."""
    from mind.effects.review import mark_hidden

    assert visible("rm\ufe0f -rf x") == "rm\\ufe0f -rf x"
    assert visible("a\U000e0100b") == "a\\U000e0100b"
    assert mark_hidden("ok\ufe0f", keep_joiners=False) == "ok⟨U+FE0F⟩"
    assert mark_hidden("\u2764\ufe0f") == "\u2764\ufe0f"  # prose: an emoji stays whole


def test_a_new_file_is_its_content_and_a_change_is_a_unified_diff() -> None:
    new = unified_diff(FileChange("n.txt", None, "hello\nworld"))
    assert new.splitlines() == [
        "--- /dev/null",
        "+++ b/n.txt",
        "@@ -0,0 +1,2 @@",
        "+hello",
        "+world",
        "\\ No newline at end of file",
    ]
    change = FileChange("a.txt", "one\ntwo\nthree\n", "one\nTWO\nthree\nfour\n")
    assert "-two\n+TWO\n" in unified_diff(change)
    assert change_summary(change) == "M a.txt  +2 −1"
    assert change_summary(FileChange("d.txt", "x\n", None)) == "D d.txt  +0 −1"


def test_the_approval_text_is_the_exact_command_or_the_diff_or_the_arguments() -> None:
    assert approval_text("shell", {"command": ["rm", "my file"]}) == ("rm 'my file'", "command")
    diff, fmt = approval_text(
        "write_file", {"path": "a", "content": "b\n"}, [FileChange("a", None, "b\n")]
    )
    assert fmt == "diff" and "+b\n" in diff
    text, fmt = approval_text(
        "apply_patch", {"patch": "*** Begin Patch\n+x\n"}, problem="line 2: expected a header"
    )
    assert fmt == "arguments"
    assert text == (
        "(the change cannot be shown: line 2: expected a header)\npatch:\n*** Begin Patch\n+x\n"
    )
