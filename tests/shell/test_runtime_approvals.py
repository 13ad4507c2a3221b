"""The approval event gives an embedder everything the "never approve unseen
text" rule needs: the full text, and how much a bounded display hides."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import yaml

import mind
from mind.generated import events as ev


def test_the_approval_event_carries_the_full_text_and_what_a_display_hides(
    tmp_path: Path,
) -> None:
    command = "echo " + "y" * 9000 + "; touch late"
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, {"text": "ok"}]
        ),
        encoding="utf-8",
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    asked: list[ev.ApprovalRequestedEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    asked.append(event)
                    turn.decide(event.call_id, "no")

    anyio.run(main)
    (event,) = asked
    assert event.text == command and event.text_format == "command"
    assert event.hidden_chars == len(command) - event.head_chars - event.tail_chars > 0
    assert command[len(command) - event.tail_chars :].endswith("touch late")


def test_a_file_approval_is_a_diff_read_from_the_file_at_approval_time(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old\n", encoding="utf-8")
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {
                    "tool_calls": [
                        {"name": "write_file", "arguments": {"path": "a.txt", "content": "new\n"}}
                    ]
                },
                {"text": "ok"},
            ]
        ),
        encoding="utf-8",
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    asked: list[ev.ApprovalRequestedEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    asked.append(event)
                    turn.decide(event.call_id, "yes")

    anyio.run(main)
    (event,) = asked
    assert event.text_format == "diff" and event.hidden_chars == 0
    assert event.text.splitlines() == [
        "--- a/a.txt",
        "+++ b/a.txt",
        "@@ -1 +1 @@",
        "-old",
        "+new",
    ]


def test_a_file_that_changed_after_its_diff_was_shown_is_not_written(tmp_path: Path) -> None:
    """The person approved a diff against the file as it was: if the file
    changed before the call ran, the approved change is not what would be
    written, so nothing is written and the model is told why."""
    (tmp_path / "a.txt").write_text("old\n", encoding="utf-8")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-old\n+new\n*** End Patch\n"
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {
                    "tool_calls": [
                        {"name": "write_file", "arguments": {"path": "a.txt", "content": "new\n"}},
                        {"name": "apply_patch", "arguments": {"patch": patch}},
                    ]
                },
                {"text": "ok"},
            ]
        ),
        encoding="utf-8",
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    results: list[ev.ToolResultEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    # someone edits the file while the question is on screen
                    with (tmp_path / "a.txt").open("a", encoding="utf-8") as f:
                        f.write("edited meanwhile\n")
                    turn.decide(event.call_id, "yes")
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event)

    anyio.run(main)
    assert [r.status for r in results] == ["error", "error"]
    for result in results:
        assert "a.txt changed after the approval was asked" in result.output
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "old\n" + "edited meanwhile\n" * 2


def test_pending_approvals_have_one_owner_the_turn_reads(tmp_path: Path) -> None:
    """While a call waits for the person, ``turn.pending_approvals`` names
    it; the answer clears it; a second answer changes nothing; an unknown
    call id is refused (an approval never fails open)."""
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made"}}]},
                {"text": "ok"},
            ]
        ),
        encoding="utf-8",
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    seen: list[list[str]] = []

    async def main() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    seen.append(turn.pending_approvals)
                    with pytest.raises(ValueError, match="no approval request"):
                        turn.decide("call_nope", "yes")
                    turn.decide(event.call_id, "yes")
                    turn.decide(event.call_id, "no")  # the first decision wins
                    seen.append(turn.pending_approvals)
            return turn.outcome.status

    assert anyio.run(main) == "completed"
    assert seen == [["call_1_1"], []]
    assert (tmp_path / "made").exists()
