"""The REPL's approval questions are the turn's (one owner per fact):
a question answered outside the REPL's keys (here the library's
``Turn.decide``) is no longer asked, and the REPL keeps only screen state."""

from __future__ import annotations

import io
from pathlib import Path

import anyio
import yaml
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

import mind
from mind.generated import events as ev
from mind.shell.repl.app import Repl


def test_a_question_answered_through_the_turn_is_no_longer_pending_in_the_repl(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [{"name": "shell", "arguments": {"command": "touch approved"}}]},
                {"text": "done"},
            ]
        ),
        encoding="utf-8",
    )
    config = mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )

    async def main() -> tuple[list[str], list[str], str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
                repl = Repl(rt, s, config, None, Console(file=io.StringIO(), width=100))
                h = repl.hosting.current
                asked: list[str] = []
                after: list[str] = ["not asked"]
                turn = s.submit("run it")
                async for event in s.events():
                    repl.feed._on_event(h, event)
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        asked = [e.call_id for e in repl.approvals.pending]
                        turn.decide(event.call_id, "no")  # answered by another client
                        after = [e.call_id for e in repl.approvals.pending]
                    if isinstance(event, ev.TurnCompletedEvent):
                        break
                return asked, after, (await turn.wait()).status

    asked, after, status = anyio.run(main)
    assert len(asked) == 1
    assert after == []
    assert status == "completed"
