"""Fixes from the security review of the workspace boundary (docs/design/boundary.md):
true refusal advice, denied roots refused without asking, a link deleted
or moved on its own location, ``/proc`` refused before opening.

Real sessions on real files (scripted provider), real symlinks and ``/proc``.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
import yaml

import mind
from mind.generated import events as ev
from mind.shell.tools import ToolRunner


def _run(
    tmp_path: Path, ws: Path, calls: list[dict[str, object]], *, approval: str, interactive: bool
) -> tuple[list[str], list[ev.ToolResultEvent]]:
    """Run one turn making ``calls``; approve every question; return
    ``(reasons asked, tool results)``."""
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([*({"tool_calls": [c]} for c in calls), {"text": "ok"}]), encoding="utf-8"
    )
    config = mind.resolve_config(provider="scripted", script=str(script), approval=approval, env={})
    reasons: list[str] = []
    results: list[ev.ToolResultEvent] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=ws, config=config, interactive=interactive)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    reasons.append(event.reason)
                    turn.decide(event.call_id, "yes")
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event)

    anyio.run(main)
    return reasons, results


def test_headless_refusal_advice_names_flags_that_allow_it(tmp_path: Path) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    calls: list[dict[str, object]] = [
        {"name": "write_file", "arguments": {"path": str(outside / "x"), "content": "x"}},
        {"name": "write_file", "arguments": {"path": ".git/config", "content": "x"}},
        {"name": "write_file", "arguments": {"path": "/proc/self/comm", "content": "x"}},
    ]
    reasons, results = _run(tmp_path, ws, calls, approval="on-request", interactive=False)
    assert reasons == []
    assert [r.status for r in results] == ["denied"] * 3, results
    texts = [r.output for r in results]
    assert all("--approval never" not in t for t in texts), texts
    assert "--add-dir DIR" in texts[0] and "--sandbox danger-full-access" in texts[0]
    assert "--sandbox danger-full-access" in texts[1] and "--add-dir" not in texts[1]
    assert "/proc is outside every workspace" in texts[2]
    assert "no flag or approval allows it" in texts[2].lower()
    assert not (outside / "x").exists()


def test_denied_roots_are_refused_without_asking(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    calls: list[dict[str, object]] = [
        {"name": "write_file", "arguments": {"path": "/proc/self/comm", "content": "x"}},
        {"name": "read_file", "arguments": {"path": "/proc/self/environ"}},
        {"name": "write_file", "arguments": {"path": str(tmp_path / "state" / "x"), "content": ""}},
        {"name": "write_file", "arguments": {"path": "fine.txt", "content": "y"}},
    ]
    for approval in ("on-request", "untrusted"):
        reasons, results = _run(tmp_path, ws, calls, approval=approval, interactive=True)
        assert all("fine.txt" in r for r in reasons), (approval, reasons)
        assert [r.status for r in results] == ["denied", "denied", "denied", "ok"], results
        assert "/proc is outside every workspace" in results[0].output
        assert "/proc is outside every workspace" in results[1].output
        assert "mind's own state is outside every workspace" in results[2].output
    assert not (tmp_path / "state" / "x").exists()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _patch(*lines: str) -> str:
    return "\n".join(["*** Begin Patch", *lines, "*** End Patch"])


@pytest.mark.anyio
async def test_deleting_or_moving_a_link_that_points_outside_acts_on_the_link(
    tmp_path: Path,
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (outside / "x").write_text("a\n")
    (outside / "y").write_text("a\n")
    (ws / "sl").symlink_to(outside / "x")
    (ws / "sm").symlink_to(outside / "y")
    runner = ToolRunner(ws)
    delete = {"patch": _patch("*** Delete File: sl")}
    assert runner.boundary_reason("sl", "unlink") is None
    done = await runner.run("apply_patch", delete)
    assert done.status == "ok", done.output
    assert not os.path.lexists(ws / "sl")
    assert (outside / "x").read_text() == "a\n"  # the target is untouched
    move = {"patch": _patch("*** Update File: sm", "*** Move to: moved.txt", "@@", "-a", "+b")}
    moved = await runner.run("apply_patch", move)
    assert moved.status == "ok", moved.output
    assert not os.path.lexists(ws / "sm")
    assert (ws / "moved.txt").read_text() == "b\n"
    assert (outside / "y").read_text() == "a\n"
    # Writing through the link still crosses: judged on the target.
    (ws / "sl").symlink_to(outside / "x")
    update = {"patch": _patch("*** Update File: sl", "@@", "-a", "+b")}
    refused = await runner.run("apply_patch", update)
    assert refused.status == "error" and "outside the workspace" in refused.output
    assert (outside / "x").read_text() == "a\n"


@pytest.mark.anyio
async def test_reading_proc_is_the_boundarys_refusal_before_opening(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path)
    for path in ("/proc/1/environ", "/proc/self/environ", "/proc/../proc/1/environ"):
        outcome = await runner.run("read_file", {"path": path})
        assert outcome.status == "error"
        assert "/proc is outside every workspace" in outcome.output, (path, outcome.output)
