"""Which lines Enter runs while a card holds the REPL's editor, and which
keys stay typing there (docs/design/interactions.md §3, §7): ``/exit`` and
``/quit`` (or a unique prefix) leave at any card; the letters of such a
command being typed are never an answer (``t`` of ``/exit`` is "tell the
model" at an Outcome unknown card). A real REPL on a real session."""

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
from mind.shell.repl.app import Repl


def test_leaving_commands_run_at_a_card_and_their_letters_are_typing(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "unused"}]), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})

    async def main() -> tuple[dict[str, bool], dict[str, bool]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
                repl = Repl(rt, s, config, None, Console(file=io.StringIO(), width=100))
                lines = ["/exit", "/quit", "/ex", "/q", "/exit now", "/status", "/tmp/x", "exit"]
                typed = ["/exit", "/exi", "/quit", "/t", "/statust", "t", "/"]
                return (
                    {line: repl.commands.runs_at_card(line) for line in lines},
                    {text: repl.commands.typing_card_command(text) for text in typed},
                )

    runs, typing = anyio.run(main)
    assert runs == {
        "/exit": True,
        "/quit": True,
        "/ex": True,
        "/q": True,
        "/exit now": True,
        "/status": False,
        "/tmp/x": False,
        "exit": False,
    }
    assert typing == {
        "/exit": True,
        "/exi": True,
        "/quit": True,
        "/t": False,
        "/statust": False,
        "t": False,
        "/": False,
    }
