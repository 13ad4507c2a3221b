"""What "approve for this session" covers, and what it refuses to judge
(mind.effects.grants; docs/design/interactions.md §5)."""

from __future__ import annotations

import pytest

from mind.effects.grants import GrantScope, covers, grant_scope, shell_prefix


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("git status", ("git", "status")),
        ("git commit -m fix", ("git", "commit")),
        ("ls -la", ("ls",)),
        ("make test lint", ("make", "test", "lint")),
        (["cargo", "build", "--release"], ("cargo", "build")),
        ("pytest tests/x.py", ("pytest",)),
    ],
)
def test_the_prefix_is_the_program_and_its_leading_subcommands(
    command: object, prefix: tuple[str, ...]
) -> None:
    assert shell_prefix(command) == prefix


@pytest.mark.parametrize(
    "command",
    [
        "sh -c 'rm -rf /'",
        "bash -lc make",
        "FOO=1 make",
        "env FOO=1 make",
        "sudo make install",
        "git status; rm -rf ~",
        "git log | sh",
        "make && curl x",
        "echo $(id)",
        "echo `id`",
        "cat < /etc/passwd",
        "./build.sh",
        "/usr/bin/git status",
        "rm -r build",
        "python -c 'import os'",
        "xargs rm",
        "timeout 5 make",
        "git status\nrm x",
        "ls *",
        ["sh", "-c", "make"],
        ["git", "status;rm"],
        "",
        "'unterminated",
        42,
    ],
)
def test_a_prefix_that_cannot_be_judged_safely_grants_only_the_exact_command(
    command: object,
) -> None:
    assert shell_prefix(command) is None
    scope = grant_scope(
        "shell", {"command": command}, sandbox="outside", written=None, crossed=False
    )
    if not isinstance(command, str | list) or not command:
        assert scope is None
        return
    assert scope is not None and scope.scope == "command" and scope.prefix == ()

    def covered(other: object) -> bool:
        found = covers(
            [scope], "shell", {"command": other}, sandbox="outside", written=None, crossed=False
        )
        return found is not None

    assert covered(command)
    assert not covered(f"{command} x" if isinstance(command, str) else [*command, "x"])
    assert not covered("make")


def test_a_grant_covers_its_prefix_in_the_same_place_only() -> None:
    grant = grant_scope(
        "shell",
        {"command": "git commit -m a"},
        sandbox="workspace-write",
        written=None,
        crossed=False,
    )
    assert grant == GrantScope(
        "shell", "program", sandbox="workspace-write", prefix=("git", "commit")
    )

    def covered(command: object, sandbox: str = "workspace-write") -> bool:
        return (
            covers(
                [grant], "shell", {"command": command}, sandbox=sandbox, written=None, crossed=False
            )
            is not None
        )

    assert covered("git commit -m b")
    assert covered(["git", "commit", "--amend"])
    assert not covered("git push")
    assert not covered("git commit -m b", sandbox="outside")  # approved inside, not outside
    assert not covered("git commit -m b; rm -rf /")  # not judgeable: asked again
    assert (
        covers(
            [grant],
            "shell",
            {"command": "git commit"},
            sandbox="workspace-write",
            written=None,
            crossed=True,
        )
        is None
    )


def test_a_file_grant_covers_only_the_paths_it_patched() -> None:
    grant = grant_scope(
        "apply_patch", {}, sandbox=None, written=["src/a.py", "./b.txt"], crossed=False
    )
    assert grant == GrantScope("apply_patch", "paths", paths=("b.txt", "src/a.py"))

    def covered(paths: list[str], tool: str = "apply_patch") -> bool:
        return covers([grant], tool, {}, sandbox=None, written=paths, crossed=False) is not None

    assert covered(["src/a.py"]) and covered(["b.txt", "src//a.py"])
    assert not covered(["src/a.py", "c.txt"])
    assert not covered(["src/a.py"], tool="write_file")  # scoped to the tool
    assert grant_scope("write_file", {}, sandbox=None, written=["../x"], crossed=False) is None
    assert grant_scope("write_file", {}, sandbox=None, written=["/etc/x"], crossed=False) is None
    assert grant_scope("write_file", {}, sandbox=None, written=["a"], crossed=True) is None
