"""Redraws of the REPL as a person sees them: a real pseudo-terminal whose
output is interpreted by a terminal emulator (:mod:`tests.support.screen`),
against a loopback OpenAI Chat server (:mod:`tests.support.replay_server`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import ENTER, words
from tests.support.replay_server import ReplayServer, Reply
from tests.support.screen import Screen

REPO = Path(__file__).resolve().parents[2]
ROWS, COLS = 40, 120


def chat_sse(deltas: list[str]) -> bytes:
    """An OpenAI Chat SSE body streaming ``deltas``, then stop with usage."""
    out = b""
    for d in deltas:
        chunk = {"id": "r", "choices": [{"index": 0, "delta": {"content": d}}]}
        out += b"data: " + json.dumps(chunk).encode() + b"\n\n"
    end = {
        "id": "r",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": len(deltas)},
    }
    return out + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


@pytest.fixture
def repl(tmp_path: Path) -> Iterator[tuple[pexpect.spawn, Screen, ReplayServer]]:
    """The REPL on an openai-chat provider served by a ReplayServer (queue it first)."""
    server = ReplayServer().start()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        MIND_MAX_RETRIES="2",
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "mind.shell.cli",
            "--provider",
            "openai-chat",
            "--base-url",
            server.url + "/v1",
            "--model",
            "m",
            "--approval",
            "never",
            "--cwd",
            str(tmp_path),
        ],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=20,
        dimensions=(ROWS, COLS),
    )
    screen = Screen.attach(child, rows=ROWS, cols=COLS)
    child.expect("› ")
    try:
        yield child, screen, server
    finally:
        child.terminate(force=True)
        server.stop()


def journal_records(tmp_path: Path) -> list[dict[str, object]]:
    (path,) = (tmp_path / "state").rglob("journal.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_retried_stream_replaces_its_partial_answer_on_screen(
    repl: tuple[pexpect.spawn, Screen, ReplayServer], tmp_path: Path
) -> None:
    child, screen, server = repl
    answer = "Alpha paragraph one.\n\nBravo paragraph two.\n\nCharlie the end."
    deltas = [answer[i : i + 4] for i in range(0, len(answer), 4)]
    body = chat_sse(deltas)
    # Cut after the chunk carrying "Char": both first paragraphs were printed.
    cut = body.index(b"\n\n", body.index(b'"Char"')) + 2
    server.enqueue(Reply(body=body, truncate_at=cut), Reply(body=body))
    child.send("go" + ENTER)
    child.expect(words("── completed"))
    shown = screen.transcript()
    assert "↻" in shown  # the retry is said
    assert shown.count("Alpha paragraph one.") == 1, shown
    assert shown.count("Bravo paragraph two.") == 1, shown
    assert shown.count("Charlie the end.") == 1, shown
    texts = [r["text"] for r in journal_records(tmp_path) if r["type"] == "model_round"]
    assert texts == [answer]  # the abandoned attempt is not in the session's history
