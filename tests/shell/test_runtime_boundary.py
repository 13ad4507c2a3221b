"""A session asks before a file tool crosses the workspace boundary, and an
approval lets it cross — except into mind's own state (docs/design/boundary.md §1)."""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

import mind
from mind.generated import events as ev


def test_an_approved_crossing_is_written_and_minds_state_never_is(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    ws.mkdir()
    (ws / "l").symlink_to(outside / "sub")
    state = ws / "state"  # the state root inside the workspace: still off limits
    calls = [
        {"name": "write_file", "arguments": {"path": "l/../x", "content": "approved\n"}},
        {"name": "write_file", "arguments": {"path": "state/index.db", "content": "x"}},
        {"name": "write_file", "arguments": {"path": "plain.txt", "content": "y"}},
    ]
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([*({"tool_calls": [c]} for c in calls), {"text": "ok"}]), encoding="utf-8"
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="on-request", env={}
    )
    reasons: list[str] = []
    results: list[ev.ToolResultEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=ws, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    reasons.append(event.reason)
                    turn.decide(event.call_id, "yes")
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event)

    anyio.run(main)
    # mind's state is refused without asking: no approval could let it through.
    assert reasons == ["writes l/../x: outside the workspace's writable roots"]
    assert [r.status for r in results] == ["ok", "denied", "ok"], results
    assert (outside / "x").read_text() == "approved\n"
    assert "mind's own state is outside every workspace" in results[1].output
    assert (ws / "plain.txt").read_text() == "y"


def test_always_for_writes_inside_does_not_cover_a_later_crossing(tmp_path: Path) -> None:
    """ "always" on a write covers later writes of that path for the session
    (docs/design/interactions.md §5), never a later boundary crossing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "l").symlink_to(tmp_path)
    calls = [
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "1"}},
        {"name": "write_file", "arguments": {"path": "a.txt", "content": "2"}},
        {"name": "write_file", "arguments": {"path": "l/../escaped", "content": "3"}},
    ]
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([*({"tool_calls": [c]} for c in calls), {"text": "ok"}]), encoding="utf-8"
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )
    reasons: list[str] = []
    results: list[str] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=ws, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    reasons.append(event.reason)
                    turn.decide(event.call_id, "always" if len(reasons) == 1 else "no")
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event.status)

    anyio.run(main)
    assert reasons == [
        "changes a.txt (untrusted mode asks before every change)",
        "changes l/../escaped (untrusted mode asks before every change); "
        "writes l/../escaped: outside the workspace's writable roots",
    ]
    assert results == ["ok", "ok", "denied"]
    assert not (tmp_path / "escaped").exists()
