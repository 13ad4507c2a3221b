"""The REPL echoes a turn's inputs where the turn claims them, from the
``input.claimed`` event, even when its consumer lags
behind the runtime: a queued turn that already started (its input journaled)
does not pull its echo ahead of the earlier turn's answer."""

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


def test_a_lagging_feed_echoes_each_input_before_its_own_answer(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([{"text": "ANSWER-ONE"}, {"text": "ANSWER-TWO"}]), encoding="utf-8"
    )
    config = mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})
    out = io.StringIO()

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
                repl = Repl(rt, s, config, None, Console(file=out, width=100, color_system=None))
                h = repl.hosting.current
                first = s.submit("QUESTION-ONE")
                s.queue("QUESTION-TWO")
                lagging = False
                async for event in s.events():
                    if not lagging:  # the feed falls behind after the first event
                        lagging = True
                        await first.wait()
                        second = s.current
                        assert second is not None and second is not first
                        await second.wait()  # both turns are over
                    repl.feed._on_event(h, event)  # events() ends at idle
                repl.view.flush_text()

    anyio.run(main)
    text = out.getvalue()
    marks = ["› QUESTION-ONE", "ANSWER-ONE", "› QUESTION-TWO  (queued)", "ANSWER-TWO"]
    at = [text.find(m) for m in marks]
    assert -1 not in at and at == sorted(at), text
