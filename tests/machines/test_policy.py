"""Approval policy truth table and known-safe commands (pure; mind.effects.policy)."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mind.effects.boundary import Refusal
from mind.effects.policy import (
    APPROVAL_POLICIES,
    Access,
    ApprovalPolicy,
    approval_reason,
    is_known_safe_command,
)
from mind.effects.tools import BUILTIN_TOOLS

CWD = "/work/project"

PATCH_INSIDE = "*** Begin Patch\n*** Add File: src/a.py\n+x\n*** End Patch"
PATCH_OUTSIDE = (
    "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: ../other/a.py\n-x\n+y\n*** End Patch"
)

# (tool, args) -> expected "asks?" per policy: (untrusted, on-request, never), in the
# default workspace-write sandbox (shell under other modes: test_policy_sandbox.py)
TRUTH_TABLE: list[tuple[str, dict[str, Any], tuple[bool, bool, bool]]] = [
    ("read_file", {"path": "/etc/passwd"}, (True, False, False)),
    ("read_file", {"path": "src/a.py"}, (False, False, False)),
    ("list_dir", {"path": "../other"}, (True, False, False)),
    ("list_dir", {}, (False, False, False)),
    ("shell", {"command": "ls -la"}, (False, False, False)),
    ("shell", {"command": ["git", "status"]}, (False, False, False)),
    ("shell", {"command": "rm -rf build"}, (True, False, False)),
    ("shell", {"command": "ls; rm -rf /"}, (True, False, False)),
    ("shell", {"command": ["python", "-c", "print(1)"]}, (True, False, False)),
    ("write_file", {"path": "src/a.py", "content": ""}, (True, False, False)),
    ("write_file", {"path": f"{CWD}/deep/x", "content": ""}, (True, False, False)),
    ("write_file", {"path": "../elsewhere.txt", "content": ""}, (True, True, False)),
    ("write_file", {"path": "/etc/hosts", "content": ""}, (True, True, False)),
    ("write_file", {"path": "/work/project-evil/x", "content": ""}, (True, True, False)),
    ("write_file", {"path": "a/../../x", "content": ""}, (True, True, False)),
    ("apply_patch", {"patch": PATCH_INSIDE}, (True, False, False)),
    ("apply_patch", {"patch": PATCH_OUTSIDE}, (True, True, False)),
    ("apply_patch", {"patch": "not a patch"}, (True, False, False)),
    ("mcp_unknown", {}, (True, True, False)),
]


@pytest.mark.parametrize(("name", "args", "asks"), TRUTH_TABLE)
def test_policy_truth_table(name: str, args: dict[str, Any], asks: tuple[bool, ...]) -> None:
    got = tuple(
        approval_reason(policy, name, args, cwd=CWD) is not None
        for policy in ("untrusted", "on-request", "never")
    )
    assert got == asks


def test_file_tool_paths_are_judged_by_the_shells_kernel_resolver() -> None:
    """Where a path really lands is the resolver's answer, not the lexical one:
    ``linkdir/../x`` looks inside but may resolve outside (docs/design/boundary.md §1)."""
    asked: list[tuple[str, Access]] = []

    def crossing(path: str, access: Access) -> Refusal | None:
        asked.append((path, access))
        if path.startswith("linkdir"):
            return Refusal("outside", "outside the workspace's writable roots")
        return None

    args = {"path": "linkdir/../escape.txt", "content": ""}
    assert approval_reason("on-request", "write_file", args, cwd=CWD) is None  # lexical
    reason = approval_reason("on-request", "write_file", args, cwd=CWD, crossing=crossing)
    assert reason == "writes linkdir/../escape.txt: outside the workspace's writable roots"
    assert approval_reason("never", "write_file", args, cwd=CWD, crossing=crossing) is None
    read = {"path": "linkdir/secret"}
    assert approval_reason("on-request", "read_file", read, cwd=CWD, crossing=crossing) is None
    assert approval_reason("untrusted", "read_file", read, cwd=CWD, crossing=crossing) == (
        "reads linkdir/secret: outside the workspace's writable roots "
        "(untrusted mode asks before reading there)"
    )
    inside = {"path": "src/a.py", "content": ""}
    assert approval_reason("on-request", "write_file", inside, cwd=CWD, crossing=crossing) is None
    assert asked == [
        ("linkdir/../escape.txt", "write"),
        ("linkdir/../escape.txt", "write"),
        ("linkdir/secret", "read"),
        ("linkdir/secret", "read"),
        ("src/a.py", "write"),
    ]


def test_policy_reasons_are_one_readable_line() -> None:
    assert approval_reason("untrusted", "shell", {"command": "rm -rf\nbuild"}, cwd=CWD) == (
        "runs `rm -rf ⏎ build`, which is not a known read-only command"
    )
    assert approval_reason("untrusted", "shell", {"command": ["touch", "a b"]}, cwd=CWD) == (
        "runs `touch 'a b'`, which is not a known read-only command"
    )
    assert approval_reason(
        "on-request", "write_file", {"path": "/etc/hosts", "content": ""}, cwd=CWD
    ) == ("writes outside the working directory: /etc/hosts")
    assert approval_reason("untrusted", "apply_patch", {"patch": PATCH_OUTSIDE}, cwd=CWD) == (
        "changes src/a.py, ../other/a.py (untrusted mode asks before every change); "
        "writes outside the working directory: ../other/a.py"
    )
    long = approval_reason("untrusted", "shell", {"command": "x" * 500}, cwd=CWD)
    assert long is not None and len(long) < 200 and "\n" not in long


def test_policy_rejects_an_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown approval policy"):
        approval_reason("sometimes", "shell", {"command": "ls"}, cwd=CWD)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "command",
    [
        "ls",
        "ls -la src",
        "cat 'a file.txt'",
        "head -n 20 README.md",
        "grep -rn 'def main' src",
        "rg -n TODO",
        "find . -name '.py' -type f",
        "sed -n 10,20p file.py",
        "git status",
        "git log --oneline -n 5",
        "git diff HEAD~1",
        "git show HEAD",
        "echo hello",
        "pwd",
        "wc -l a b",
        ["bash", "-lc", "ls -la"],
        ["sh", "-c", "git diff"],
        ["rg", "--files"],
    ],
)
def test_known_safe_commands(command: str | list[str]) -> None:
    assert is_known_safe_command(command)


@pytest.mark.parametrize(
    "command",
    [
        "",
        "   ",
        "rm -rf build",
        "ls; rm x",
        "ls | sh",
        "cat a > b",
        "cat < a",
        "echo $(rm x)",
        "echo `rm x`",
        "ls && rm x",
        "ls\nrm x",
        "echo $HOME",
        "ls *",
        "git diff --output=evil.txt",
        "git diff --ext-diff",
        "git -c core.pager=sh log",
        "git commit -m x",
        "git",
        "find . -delete",
        "find . -exec rm {} +",
        "find . -fprint out.txt",
        "rg --pre ./x foo",
        "rg --search-zip foo",
        "rg -iz foo",
        "sed -i s/a/b/ f",
        "sed -n 1p -i f",
        "sed s/a/b/ f",
        "/tmp/evil/ls",
        "FOO=1 ls",
        "cat 'unterminated",
        ["bash", "-lc", "ls; rm x"],
        ["bash", "-lc", "ls", "extra"],
        ["env", "rm", "x"],
        [],
        ["ls", 3],
        3,
        None,
    ],
)
def test_not_known_safe_commands(command: object) -> None:
    assert not is_known_safe_command(command)


@given(
    st.text(min_size=0, max_size=20),
    st.sampled_from(list(";|&<>$`()\n")),
    st.text(min_size=0, max_size=20),
)
@settings(max_examples=300, deadline=None)
def test_any_metacharacter_makes_a_string_unsafe(before: str, meta: str, after: str) -> None:
    assert not is_known_safe_command(f"ls {before}{meta}{after}")


@given(
    policy=st.sampled_from(APPROVAL_POLICIES),
    name=st.sampled_from(sorted(BUILTIN_TOOLS)),
    command=st.one_of(st.text(max_size=30), st.lists(st.text(max_size=10), max_size=4)),
    path=st.text(min_size=1, max_size=30),
)
@settings(max_examples=300, deadline=None)
def test_policy_invariants(policy: ApprovalPolicy, name: str, command: Any, path: str) -> None:
    args = {"command": command, "path": path, "content": "", "patch": ""}
    reason = approval_reason(policy, name, args, cwd=CWD)
    if policy == "never" or (BUILTIN_TOOLS[name].read_only and policy == "on-request"):
        assert reason is None
    elif BUILTIN_TOOLS[name].read_only:
        # untrusted reads ask exactly when the path leaves the working directory
        inside = os.path.normpath(os.path.join(CWD, path)).startswith(CWD + "/")
        assert (reason is None) == (inside or os.path.normpath(os.path.join(CWD, path)) == CWD)
    elif name == "shell":
        # Sandboxed (workspace-write): only untrusted asks, and only when not known-safe.
        assert (reason is None) == (policy == "on-request" or is_known_safe_command(command))
    elif policy == "untrusted":
        assert reason is not None
    if reason is not None:
        assert "\n" not in reason and reason


_SEGMENT = st.text(alphabet="abcXYZ019_-. ", min_size=1, max_size=8).filter(
    lambda s: s not in (".", "..")
)


@given(st.lists(_SEGMENT, min_size=1, max_size=4))
def test_on_request_writes_inside_cwd_run(segments: list[str]) -> None:
    path = "/".join(segments)
    args = {"path": path, "content": ""}
    assert approval_reason("on-request", "write_file", args, cwd=CWD) is None
    assert (
        approval_reason("on-request", "write_file", {**args, "path": f"{CWD}/{path}"}, cwd=CWD)
        is None
    )


@given(st.lists(_SEGMENT, min_size=1, max_size=3), st.integers(min_value=1, max_value=3))
def test_on_request_writes_escaping_cwd_ask(segments: list[str], ups: int) -> None:
    # "../" once more than the path descends always lands outside.
    path = "/".join(["x"] * (ups - 1) + [".."] * (ups + 1) + segments)
    reason = approval_reason("on-request", "write_file", {"path": path, "content": ""}, cwd=CWD)
    assert reason is not None and reason.startswith("writes outside the working directory")


def test_reasons_show_bidi_and_zero_width_characters_as_code_points() -> None:
    """One rule for every place a person reads model text (README): a bidi
    override in a justification or a path is shown as ⟨U+202E⟩, a newline
    stays escaped so the reason is one line."""
    args = {"command": "ls", "sandbox": "escalated", "justification": "need\u202e to\nwrite"}
    reason = approval_reason("on-request", "shell", args, cwd="/w")
    assert reason is not None
    assert "need⟨U+202E⟩ to\\nwrite" in reason
    written = approval_reason(
        "untrusted", "write_file", {"path": "a\u200bb", "content": ""}, cwd="/w"
    )
    assert written is not None and "a⟨U+200B⟩b" in written
