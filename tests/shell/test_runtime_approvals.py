"""The approval event gives an embedder everything the "never approve unseen
text" rule needs: the full text, and how much a bounded display hides."""

from __future__ import annotations

from pathlib import Path

import anyio
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
            s = rt.create_session(cwd=tmp_path, config=config, interactive=True)
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
            s = rt.create_session(cwd=tmp_path, config=config, interactive=True)
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
