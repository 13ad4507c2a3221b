"""The apply_patch envelope: pure parsing and hunk application (mind.effects.patch)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mind.effects.patch import (
    AddFile,
    DeleteFile,
    Hunk,
    UpdateFile,
    apply_hunks,
    parse_patch,
    patch_paths,
)
from mind.errors import PatchError


def test_parse_every_operation() -> None:
    text = (
        "*** Begin Patch\n"
        "*** Add File: a.txt\n+one\n+\n"
        "*** Delete File: b.txt\n"
        "*** Update File: c.py\n"
        "*** Move to: d.py\n"
        "@@ def f():\n x\n-y\n+z\n"
        "\n"
        "@@ -10,3 +10,3 @@\n-q\n"
        "*** End of File\n"
        "*** End Patch\n"
    )
    assert parse_patch(text) == [
        AddFile("a.txt", "one\n\n"),
        DeleteFile("b.txt"),
        UpdateFile(
            "c.py",
            "d.py",
            (
                Hunk("def f():", ((" ", "x"), ("-", "y"), ("+", "z"), (" ", "")), False, 8),
                Hunk(None, (("-", "q"),), True, 13),
            ),
        ),
    ]
    assert patch_paths(parse_patch(text)) == ["a.txt", "b.txt", "c.py", "d.py"]


def test_parse_first_hunk_may_omit_its_header_and_markers_may_be_indented() -> None:
    text = "  *** Begin Patch\n*** Update File: f\n-a\n+b\n  *** End Patch  "
    assert parse_patch(text) == [
        UpdateFile("f", None, (Hunk(None, (("-", "a"), ("+", "b")), False, 3),))
    ]


def test_parse_crlf_patch() -> None:
    text = "*** Begin Patch\r\n*** Add File: f\r\n+x\r\n*** End Patch\r\n"
    assert parse_patch(text) == [AddFile("f", "x\n")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the patch must start with '*** Begin Patch'"),
        ("*** Begin Patch\n*** Add File: a\n+x", "the patch must end with '*** End Patch'"),
        ("*** Begin Patch\n*** End Patch", "the patch contains no file operations"),
        (
            "*** Begin Patch\n--- a/x\n*** End Patch",
            "patch line 2: expected '*** Add File:', '*** Delete File:' or '*** Update File:', "
            "got '--- a/x'",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nx\n*** End Patch",
            "patch line 3: every line of an added file must start with '+'",
        ),
        (
            "*** Begin Patch\n*** Add File: \n+x\n*** End Patch",
            "patch line 2: '*** Add File:' needs a path",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "patch line 2: update of 'a' has no hunks",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n@@\n-x\n*** End Patch",
            "patch line 3: empty hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n*x\n*** End Patch",
            "patch line 4: a hunk line must start with ' ', '-' or '+', got '*x'",
        ),
    ],
)
def test_parse_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(PatchError) as caught:
        parse_patch(text)
    assert str(caught.value) == message


def _hunk(*lines: str, anchor: str | None = None, eof: bool = False) -> Hunk:
    return Hunk(anchor, tuple((line[0], line[1:]) for line in lines), eof, 1)  # type: ignore[misc]


def test_apply_hunks_in_order_with_anchor_and_pure_insertion() -> None:
    original = (
        "class A:\n    def f(self):\n        return 1\n\n"
        "class B:\n    def f(self):\n        return 1\n"
    )
    hunks = [
        _hunk("-        return 1", "+        return 2", anchor="class B:"),
        _hunk("+# end"),
    ]
    assert (
        apply_hunks("m.py", original, hunks)
        == original.replace(
            "B:\n    def f(self):\n        return 1", "B:\n    def f(self):\n        return 2"
        )
        + "# end\n"
    )


def test_apply_hunks_keeps_missing_final_newline_and_empties_a_file() -> None:
    assert apply_hunks("f", "a\nb", [_hunk(" a", "-b", "+c")]) == "a\nc"
    assert apply_hunks("f", "a\n", [_hunk("-a")]) == ""
    assert apply_hunks("f", "", [_hunk("+a")]) == "a\n"


def test_apply_hunks_ignores_a_trailing_blank_context_line() -> None:
    assert apply_hunks("f", "a\nb\n", [_hunk(" a", "-b", "+c", " ")]) == "a\nc\n"


def test_apply_hunks_error_names_file_hunk_and_lines() -> None:
    with pytest.raises(PatchError) as caught:
        apply_hunks("f.py", "a\nb\n", [_hunk(" a", "-b", "+c"), _hunk("-zz", "+y")])
    assert str(caught.value) == (
        "f.py: hunk 2 (patch line 1) did not match the file; expected these lines:\n  zz"
    )
    with pytest.raises(PatchError, match=r"f.py: hunk 1 \(patch line 1\): the '@@ nope' line"):
        apply_hunks("f.py", "a\n", [_hunk("-a", anchor="nope")])


def test_apply_hunks_prefers_exact_over_tolerant_match() -> None:
    original = "x \ny\nx\ny\n"
    assert apply_hunks("f", original, [_hunk(" x", "-y", "+Y")]) == "x \ny\nx\nY\n"


_LINES = st.lists(st.text(alphabet="abc xyz", max_size=6), min_size=1, max_size=12, unique=True)


@given(_LINES, st.data())
def test_apply_hunks_replaces_exactly_the_chosen_region(
    lines: list[str], data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(lines) - 1))
    end = data.draw(st.integers(start + 1, len(lines)))
    replacement = data.draw(st.lists(st.text(alphabet="ABC", max_size=4), max_size=3))
    before = lines[max(0, start - 2) : start]
    after = lines[end : end + 2]
    body = (
        [" " + line for line in before]
        + ["-" + line for line in lines[start:end]]
        + ["+" + line for line in replacement]
        + [" " + line for line in after]
    )
    original = "".join(f"{line}\n" for line in lines)
    expected_lines = lines[:start] + replacement + lines[end:]
    expected = "".join(f"{line}\n" for line in expected_lines)
    assert apply_hunks("f", original, [_hunk(*body)]) == expected
