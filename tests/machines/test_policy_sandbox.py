"""Approval policy and sandbox together (pure; mind.effects.policy.shell_decision,
rerun_reason, looks_like_sandbox_denial; ``docs/design/boundary.md`` "Sandbox")."""

from __future__ import annotations

from typing import Any

import pytest

from mind.effects.boundary import SandboxMode
from mind.effects.policy import (
    ApprovalPolicy,
    approval_reason,
    looks_like_sandbox_denial,
    rerun_reason,
    shell_decision,
)
from mind.effects.tools import parse_arguments

SAFE = {"command": "git status"}
UNSAFE = {"command": "rm -rf build"}
ESCALATED = {"command": "rm -rf build", "sandbox": "escalated", "justification": "clean up"}

# (policy, mode, args) -> (action, sandboxed)
TABLE: list[tuple[ApprovalPolicy, SandboxMode, dict[str, Any], tuple[str, bool]]] = [
    ("on-request", "workspace-write", SAFE, ("run", True)),
    ("on-request", "workspace-write", UNSAFE, ("run", True)),
    ("on-request", "read-only", UNSAFE, ("run", True)),
    ("on-request", "workspace-write", ESCALATED, ("ask", False)),
    ("on-request", "danger-full-access", SAFE, ("ask", False)),
    ("on-request", "danger-full-access", UNSAFE, ("ask", False)),
    ("untrusted", "workspace-write", SAFE, ("run", True)),
    ("untrusted", "workspace-write", UNSAFE, ("ask", True)),
    ("untrusted", "workspace-write", ESCALATED, ("ask", False)),
    ("untrusted", "danger-full-access", SAFE, ("ask", False)),
    ("never", "workspace-write", UNSAFE, ("run", True)),
    ("never", "workspace-write", ESCALATED, ("refuse", False)),
    ("never", "danger-full-access", UNSAFE, ("run", False)),
]


@pytest.mark.parametrize(("policy", "mode", "args", "expected"), TABLE)
def test_shell_decision_table(
    policy: ApprovalPolicy, mode: SandboxMode, args: dict[str, Any], expected: tuple[str, bool]
) -> None:
    decision = shell_decision(policy, mode, args)
    assert (decision.action, decision.sandboxed) == expected
    assert (decision.reason is None) == (decision.action == "run")


def test_reasons_say_where_the_command_runs() -> None:
    ask = shell_decision("on-request", "workspace-write", ESCALATED)
    assert ask.reason == "asks to leave the workspace-write sandbox: clean up"
    danger = shell_decision("untrusted", "danger-full-access", SAFE)
    assert danger.reason == "runs `git status` with no sandbox (danger-full-access)"
    refused = shell_decision("never", "read-only", ESCALATED)
    assert refused.reason is not None and "`never`" in refused.reason
    assert approval_reason("never", "shell", ESCALATED, cwd="/w") == refused.reason


def test_the_schema_accepts_escalation_and_nothing_else() -> None:
    args = parse_arguments(
        "shell", '{"command": "ls", "sandbox": "escalated", "justification": "x"}'
    )
    assert args["sandbox"] == "escalated"
    with pytest.raises(Exception, match="sandbox"):
        parse_arguments("shell", '{"command": "ls", "sandbox": "off"}')


@pytest.mark.parametrize(
    ("status", "output", "denied"),
    [
        ("error", "sh: 1: cannot create /etc/x: Read-only file system\nexit code: 2", True),
        ("error", "touch: cannot touch 'x': Permission denied\nexit code: 1", True),
        ("error", "OSError: [Errno 101] Network is unreachable\nexit code: 1", True),
        ("error", "curl: (6) Could not resolve host: example.com\nexit code: 6", True),
        ("error", "ls: cannot access 'x': No such file or directory\nexit code: 2", False),
        ("error", "exit code: 1", False),
        ("ok", "Permission denied (printed by a successful grep)\nexit code: 0", False),
    ],
)
def test_sandbox_denial_heuristic(status: str, output: str, denied: bool) -> None:
    assert looks_like_sandbox_denial(status, output) is denied


def test_rerun_is_offered_only_when_sandboxed_and_asking_is_allowed() -> None:
    denial = ("error", "touch: cannot touch '/x': Read-only file system\nexit code: 1")
    offer = rerun_reason("on-request", "workspace-write", *denial)
    assert offer is not None and "run it again without the sandbox?" in offer
    assert rerun_reason("untrusted", "read-only", *denial) is not None
    assert rerun_reason("never", "workspace-write", *denial) is None
    assert rerun_reason("on-request", "danger-full-access", *denial) is None
    assert rerun_reason("on-request", "workspace-write", "error", "exit code: 1") is None


def test_untrusted_runs_known_safe_commands_in_the_read_only_sandbox() -> None:
    # Free only because nothing it starts (a planted core.fsmonitor) can write.
    free = shell_decision("untrusted", "workspace-write", SAFE)
    assert (free.action, free.mode) == ("run", "read-only")
    assert shell_decision("untrusted", "workspace-write", UNSAFE).mode == "workspace-write"
    assert shell_decision("untrusted", "read-only", SAFE).mode == "read-only"
    assert shell_decision("on-request", "workspace-write", SAFE).mode == "workspace-write"
    assert shell_decision("never", "workspace-write", SAFE).mode == "workspace-write"
    assert shell_decision("on-request", "workspace-write", ESCALATED).mode is None
    assert shell_decision("never", "danger-full-access", SAFE).mode is None
