"""The pure policy says what to do with a file tool call that crosses the
boundary, why, and which flag (if any) would allow it (refusal advice, denied roots offered for
approval, deleting a link)."""

from __future__ import annotations

import pytest

from mind.effects.boundary import Refusal
from mind.effects.policy import Access, ToolDecision, standing_question, tool_decision

CWD = "/w"

PROC = Refusal("denied", "/proc is outside every workspace (it holds process state and secrets)")
OUTSIDE = Refusal("outside", "outside the workspace's writable roots")
PROTECTED = Refusal("protected", "~/.gitconfig is git configuration (protected)")


def _crossing(path: str, access: Access) -> Refusal | None:
    if path.startswith("/proc"):
        return PROC
    if path.startswith("out/") and access != "unlink":
        return OUTSIDE  # out/ is a link to outside: only following it leaves
    if path == ".gitconfig":
        return PROTECTED
    return None


def _decide(policy: str, name: str, args: dict[str, object]) -> ToolDecision:
    return tool_decision(policy, name, args, cwd=CWD, crossing=_crossing)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", ["never", "on-request", "untrusted"])
def test_a_denied_root_is_refused_outright_never_asked(policy: str) -> None:
    for name, args in (
        ("write_file", {"path": "/proc/self/attr/current", "content": "x"}),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: /proc/x\n+x\n*** End Patch"}),
    ):
        decision = _decide(policy, name, args)
        assert decision.action == "refuse", decision
        assert decision.reason is not None and "/proc is outside every workspace" in decision.reason
        assert "no flag or approval allows it" in str(decision.remedy).lower()
    if policy == "untrusted":
        read = _decide(policy, "read_file", {"path": "/proc/1/environ"})
        assert read.action == "refuse" and "/proc" in str(read.reason)


def test_the_remedy_is_true_for_each_kind_of_crossing() -> None:
    outside = _decide("on-request", "write_file", {"path": "out/x", "content": ""})
    assert outside.action == "ask"
    assert outside.remedy is not None
    assert "--add-dir DIR" in outside.remedy and "--sandbox danger-full-access" in outside.remedy
    assert "--approval never" not in outside.remedy  # never refuses it too
    protected = _decide("on-request", "write_file", {"path": ".gitconfig", "content": ""})
    assert protected.action == "ask" and protected.remedy is not None
    assert "--sandbox danger-full-access" in protected.remedy
    assert "--add-dir" not in protected.remedy  # protected in every root
    inside = _decide("untrusted", "write_file", {"path": "a.txt", "content": ""})
    assert inside.action == "ask" and inside.remedy is not None
    assert "--approval on-request" in inside.remedy
    both = _decide("untrusted", "write_file", {"path": "out/x", "content": ""})
    assert both.remedy is not None
    assert "--approval on-request" in both.remedy and "--add-dir" in both.remedy
    assert _decide("on-request", "write_file", {"path": "a.txt", "content": ""}) == ToolDecision(
        "run"
    )


def test_shell_remedies_name_the_flags_that_let_it_run() -> None:
    escalated = {"command": "make", "sandbox": "escalated", "justification": "needs net"}
    outside = _decide("on-request", "shell", escalated)
    assert outside.action == "ask" and not outside.sandboxed
    assert outside.remedy is not None
    assert "--sandbox danger-full-access --approval never" in outside.remedy
    sandboxed = _decide("untrusted", "shell", {"command": "make"})
    assert sandboxed.action == "ask" and sandboxed.sandboxed
    assert sandboxed.remedy is not None and "--approval on-request" in sandboxed.remedy
    assert _decide("never", "shell", escalated).action == "refuse"


def test_deleting_or_moving_a_link_is_judged_on_the_link_not_its_target() -> None:
    delete = "*** Begin Patch\n*** Delete File: out/sl\n*** End Patch"
    assert _decide("on-request", "apply_patch", {"patch": delete}).action == "run"
    move = (
        "*** Begin Patch\n*** Update File: out/sl\n*** Move to: moved.txt\n"
        "@@\n-a\n+b\n*** End Patch"
    )
    assert _decide("on-request", "apply_patch", {"patch": move}).action == "run"
    update = "*** Begin Patch\n*** Update File: out/sl\n@@\n-a\n+b\n*** End Patch"
    assert _decide("on-request", "apply_patch", {"patch": update}).action == "ask"


def test_with_no_sandbox_backend_the_remedy_does_not_promise_the_sandbox() -> None:
    """Without a working backend a sandboxed command is refused under every
    policy, so "--approval on-request (it runs in the sandbox)" would be
    untrue: the remedy names what does work."""
    args = {"command": "touch x"}
    with_backend = tool_decision("untrusted", "shell", args, cwd="/w")
    assert with_backend.remedy is not None and "on-request" in with_backend.remedy
    without = tool_decision("untrusted", "shell", args, cwd="/w", sandbox_available=False)
    assert without.action == "ask"
    assert without.remedy is not None and "on-request" not in without.remedy
    assert "bubblewrap" in without.remedy and "danger-full-access" in without.remedy


def test_a_standing_question_turns_run_into_ask_and_never_loosens_ask_or_refuse() -> None:
    lax = tool_decision("on-request", "shell", {"command": "echo ran >> c"}, cwd="/w")
    assert lax.action == "run"
    asked = standing_question(lax, "untrusted mode asks")
    assert (asked.action, asked.reason, asked.sandboxed) == ("ask", "untrusted mode asks", True)
    assert asked.remedy is not None and "no person could answer" in asked.remedy
    assert standing_question(lax, None) == lax
    for strict in (ToolDecision("ask", "now"), ToolDecision("refuse", "no")):
        assert standing_question(strict, "before") == strict
    # Asked for the sandbox, would now run outside it: the old question does not cover that.
    moved = standing_question(lax, "asks", asked_where="workspace-write", now_where="outside")
    assert moved.action == "refuse" and moved.reason is not None
    assert "in the workspace-write sandbox" in moved.reason
    assert "outside the sandbox" in moved.reason
    ww = "workspace-write"
    same = standing_question(lax, "asks", asked_where=ww, now_where=ww)
    assert same.action == "ask"


def test_an_escalation_remedy_names_the_network_flag_that_keeps_the_sandbox() -> None:
    """An escalation (often "need network") tells exec the flag that keeps
    the sandbox and only opens the network, before the one that drops it."""
    decision = _decide(
        "on-request",
        "shell",
        {"command": "curl x", "sandbox": "escalated", "justification": "need network"},
    )
    assert decision.action == "ask" and decision.remedy is not None
    assert "--sandbox-network on" in decision.remedy
    assert decision.remedy.index("--sandbox-network on") < decision.remedy.index(
        "danger-full-access"
    )
