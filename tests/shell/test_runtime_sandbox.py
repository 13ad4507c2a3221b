"""The turn loop with the sandbox (``docs/design/boundary.md`` "Sandbox"): a
real interactive library session, the scripted provider, real bubblewrap."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev


def _run(
    tmp_path: Path, calls: list[dict[str, Any]], answers: list[str], **settings: Any
) -> tuple[list[ev.ApprovalRequestedEvent], list[ev.ToolResultEvent]]:
    """Run one turn of ``calls``; answer each approval with the next of ``answers``."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = tmp_path / "script.yaml"
    replies = [{"tool_calls": [c]} for c in calls] + [{"text": "done"}]
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={}, **settings)
    asked: list[ev.ApprovalRequestedEvent] = []
    results: list[ev.ToolResultEvent] = []
    left = list(answers)

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=ws, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    asked.append(event)
                    turn.decide(event.call_id, left.pop(0))  # type: ignore[arg-type]
                elif isinstance(event, ev.ToolResultEvent):
                    results.append(event)

    anyio.run(main)
    return asked, results


def _shell(command: str, **extra: str) -> dict[str, Any]:
    return {"name": "shell", "arguments": {"command": command, **extra}}


def test_on_request_runs_sandboxed_unasked_then_offers_a_rerun_outside(tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    asked, results = _run(tmp_path, [_shell(f"echo x > {target}")], ["yes"], approval="on-request")
    (offer,) = asked
    assert offer.sandbox == ev.Sandbox.outside
    assert "failed inside the workspace-write sandbox" in offer.reason
    assert "runs OUTSIDE the sandbox" in offer.reason
    assert results[0].status == ev.ToolStatus.ok
    assert target.read_text() == "x\n"


def test_a_declined_rerun_gives_the_model_the_sandboxed_result(tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    asked, results = _run(tmp_path, [_shell(f"echo x > {target}")], ["no"], approval="on-request")
    assert len(asked) == 1
    assert results[0].status == ev.ToolStatus.error
    assert "Read-only file system" in results[0].output
    assert not target.exists()


def test_always_on_a_rerun_outside_reruns_the_same_command_outside_unasked(
    tmp_path: Path,
) -> None:
    """ "always" on the offer to re-run outside covers that exact command
    outside: the next identical call re-runs outside without a question (the
    card's promise); a different command is asked again."""
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    calls = [_shell(f"echo 1 >> {a}"), _shell(f"echo 1 >> {a}"), _shell(f"echo 1 >> {b}")]
    asked, results = _run(tmp_path, calls, ["always", "yes"], approval="on-request")
    assert len(asked) == 2, [e.arguments for e in asked]
    assert str(b) in str(asked[1].arguments["command"])
    assert [r.status for r in results] == [ev.ToolStatus.ok] * 3
    assert a.read_text() == "1\n1\n" and b.read_text() == "1\n"


def test_untrusted_asks_inside_the_sandbox_and_says_so(tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    asked, results = _run(
        tmp_path, [_shell(f"echo x > {target}")], ["yes", "no"], approval="untrusted"
    )
    first, rerun = asked
    assert first.sandbox == ev.Sandbox.workspace_write
    assert "(runs in the workspace-write sandbox)" in first.reason
    assert rerun.sandbox == ev.Sandbox.outside
    assert results[0].status == ev.ToolStatus.error and not target.exists()


def test_an_approved_escalation_runs_outside(tmp_path: Path) -> None:
    target = tmp_path / "outside.txt"
    call = _shell(f"echo x > {target}", sandbox="escalated", justification="write the report")
    asked, results = _run(tmp_path, [call], ["yes"], approval="on-request")
    (card,) = asked
    assert card.sandbox == ev.Sandbox.outside
    assert "write the report" in card.reason
    assert results[0].status == ev.ToolStatus.ok and target.exists()


def test_danger_full_access_makes_known_safe_commands_ask(tmp_path: Path) -> None:
    asked, results = _run(
        tmp_path, [_shell("ls")], ["no"], approval="on-request", sandbox="danger-full-access"
    )
    (card,) = asked
    assert card.sandbox == ev.Sandbox.outside
    assert results[0].status == ev.ToolStatus.denied


def test_untrusted_known_safe_command_cannot_write_through_a_planted_hook(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    planted = ws / "sub" / "PWNED"
    hook = f"touch {planted} #"
    subprocess.run(["git", "-C", str(ws), "config", "core.fsmonitor", hook], check=True)
    asked, results = _run(tmp_path, [_shell("git status")], [], approval="untrusted")
    assert asked == []  # known-safe: not asked
    assert results[0].status == ev.ToolStatus.ok, results[0].output
    assert not planted.exists()


def test_stop_at_a_rerun_question_says_nothing_was_running(tmp_path: Path) -> None:
    """Stop on "run it again without the sandbox?": the sandboxed run had
    ended; the result says so, not that a process group was killed."""
    target = tmp_path / "outside.txt"
    asked, results = _run(
        tmp_path, [_shell(f"echo x > {target}")], ["abort"], approval="on-request"
    )
    (card,) = asked
    assert card.sandbox == ev.Sandbox.outside
    assert card.reason.count("OUTSIDE") == 1, card.reason
    (result,) = results
    assert result.status == ev.ToolStatus.interrupted
    assert "process group" not in result.output, result.output
    assert "not run again" in result.output and "ran once inside the sandbox" in result.output
    assert not target.exists()


def test_an_escalation_card_says_outside_once(tmp_path: Path) -> None:
    call = _shell("true", sandbox="escalated", justification="need network")
    asked, _results = _run(tmp_path, [call], ["no"], approval="on-request")
    (card,) = asked
    assert card.reason.count("OUTSIDE") == 1, card.reason
    assert "need network" in card.reason
