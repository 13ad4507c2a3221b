"""The approval card and ``/permissions`` in a real pseudo-terminal
(docs/design/interactions.md §5, §7): the card says where the call runs;
``a`` grants what the card says (here the exact command) for the session (a journaled grant), the
next matching call runs unasked, ``/permissions`` lists it and ``revoke``
takes it back; ``s`` stops the turn with a durable abort."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_steering import journal
from tests.support.pty_approvals import at_the_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl


def _shell(command: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def test_always_grants_what_the_card_says_permissions_lists_and_revokes_it(
    spawn: Spawn, tmp_path: Path
) -> None:
    child, sid = at_the_card(
        spawn,
        "make them",
        [
            _shell("mkdir -p d1"),
            _shell("mkdir -p d1"),
            _shell("mkdir -p d2"),
            {"text": "Made both."},
            _shell("mkdir -p d1"),
            {"text": "Asked again."},
        ],
        "--approval",
        "untrusted",
    )
    child.expect(words(f"in {tmp_path}"))
    scope = "shell: only this exact command `mkdir -p d1` (in the workspace-write sandbox)"
    child.expect(words(f"a = always allow in this session: {scope}"))
    child.expect(words("a always (this exact command, this session)"))
    child.send("a")
    child.expect(words(f"approved; {scope} will not ask again this session"))
    # mkdir -p d1 again: covered, not asked; mkdir -p d2 is another command.
    child.expect(words("Allow shell?"))
    child.send("y")
    child.expect(words("Made both."))
    child.expect(words("── completed"))
    child.send("/permissions" + ENTER)
    child.expect(words(f"1. {scope}"))
    child.send("/permissions revoke 1" + ENTER)
    child.expect(words(f"Revoked: {scope}"))
    child.send("again" + ENTER)
    child.expect(words("Allow shell?"))  # revoked: asked again
    child.send("y")
    child.expect(words("Asked again."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert all((tmp_path / d).is_dir() for d in ("d1", "d2"))
    records = journal(tmp_path, sid)
    kinds = [r["type"] for r in records if r["type"].startswith(("permission", "interaction"))]
    assert kinds == [
        "interaction_requested",
        "interaction_resolved",
        "permission_granted",
        "interaction_requested",
        "interaction_resolved",
        "permission_revoked",
        "interaction_requested",
        "interaction_resolved",
    ]


def test_s_at_an_approval_stops_the_turn_and_the_call_never_runs(
    spawn: Spawn, tmp_path: Path
) -> None:
    child, sid = at_the_card(spawn, "make it", [_shell("touch never")], "--approval", "untrusted")
    child.send("s")
    child.expect(words("stopped the turn"))
    child.expect(words("before it was approved: it never ran"))
    child.expect(words("── interrupted"))
    exit_cleanly(child)
    assert not (tmp_path / "never").exists()
    (resolved,) = [r for r in journal(tmp_path, sid) if r["type"] == "interaction_resolved"]
    assert (resolved["decision"], resolved["by"]) == ("abort", "person")
