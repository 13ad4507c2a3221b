"""``repl.render.*`` for ``make bench``: a streamed answer shown by the REPL vs written raw.

The REPL runs in a real pseudo-terminal (pexpect, 40x120) against a loopback
OpenAI Chat server (:class:`tests.support.replay_server.ReplayServer`) that
sends a 20k-token answer as 20k SSE deltas. The time measured is from Enter
to the turn's ``── completed`` line on screen, s.

The baseline writes the same text raw to a pseudo-terminal of the same size:
a child process runs the same turn through the library API
(:meth:`mind.shell.runtime.Session.submit`, same server, same provider) and
writes each delta as it arrives (``write`` + ``flush``), timed from its go
signal to its end marker. The ratio is therefore what the REPL's rendering
(markdown, highlighting, prompt redraws) costs on top of receiving the stream.
A second baseline, printed for information, writes the deltas from a list
(no stream at all). Each figure is the best of :data:`REPEATS` turns.

Two answers: ``fenced`` (one code fence holding the whole answer: the case
that was quadratic) and ``markdown`` (paragraphs, lists, headings, inline
styling).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import pexpect

from tests.support.replay_server import ReplayServer, Reply

TOKENS = 20_000
"""Deltas per answer; a delta is about 4 characters (one token)."""
REPEATS = 5
TIMEOUT_S = 300.0
_ROOT = Path(__file__).resolve().parents[1]
_DONE = re.compile(r"── (?:\x1b\[[0-9;]*m)*completed")
_RAW_DONE = "\x07raw-done\x07"
_RAW_WRITER = """
import sys
deltas = __import__("json").loads(open(sys.argv[1], encoding="utf-8").read())
sys.stdout.write("ready\\n"); sys.stdout.flush()
sys.stdin.readline()
for d in deltas:
    sys.stdout.write(d); sys.stdout.flush()
sys.stdout.write(sys.argv[2]); sys.stdout.flush()
sys.stdin.readline()
"""
_RAW_STREAM = """
import sys, anyio
from pathlib import Path
from mind.generated import events as ev
from mind.shell.config import resolve_config
from mind.shell.runtime import Runtime

async def main(url, cwd, done, repeats):
    config = resolve_config(provider="openai-chat", base_url=url, model="bench", approval="never")
    async with Runtime.open() as rt:
        session = await rt.create_session(cwd=Path(cwd), config=config, interactive=False)
        sys.stdout.write("ready\\n"); sys.stdout.flush()
        for n in range(repeats):
            await anyio.to_thread.run_sync(sys.stdin.readline)
            async for event in session.submit(f"answer {n}"):
                if isinstance(event, ev.MessageDeltaEvent):
                    sys.stdout.write(event.text); sys.stdout.flush()
            sys.stdout.write(done); sys.stdout.flush()

anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
"""


def fenced_answer(tokens: int = TOKENS) -> list[str]:
    """A one-line intro then one ``python`` fence of about ``tokens`` deltas."""
    lines = ["Here is the module:\n", "\n", "```python\n"]
    i = 0
    while sum(len(x) for x in lines) < tokens * 4 - 40:
        lines.append(f"    value_{i} = combine(value_{i - 1}, {i})  # step {i}\n")
        i += 1
    lines.append("```\n")
    return _deltas("".join(lines), tokens)


def markdown_answer(tokens: int = TOKENS) -> list[str]:
    """Ordinary markdown of about ``tokens`` deltas: headings, paragraphs, lists."""
    blocks: list[str] = []
    i = 0
    while sum(len(b) for b in blocks) < tokens * 4 - 400:
        blocks.append(f"## Part {i}\n\n")
        blocks.append(
            f"The **change {i}** keeps the `journal` ordered: each record is written "
            "before the next one is read, so a crash never loses an accepted input. "
            "It also keeps the index *derived*, never the source of truth.\n\n"
        )
        blocks.append(f"- first point {i}\n- second point with `code`\n- third point\n\n")
        i += 1
    return _deltas("".join(blocks), tokens)


def _deltas(text: str, tokens: int) -> list[str]:
    size = max(1, -(-len(text) // tokens))
    return [text[i : i + size] for i in range(0, len(text), size)]


def chat_sse(deltas: list[str]) -> bytes:
    """An OpenAI Chat Completions SSE body streaming ``deltas`` then stop + usage."""
    parts = []
    for d in deltas:
        chunk = {"id": "b", "choices": [{"index": 0, "delta": {"content": d}}]}
        parts.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    final = {
        "id": "b",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": len(deltas)},
    }
    parts.append(b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        MIND_HOME=str(home / "home"),
        MIND_STATE_HOME=str(home / "state"),
        MIND_MAX_RETRIES="0",
        PYTHONPATH=str(_ROOT),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
        COLUMNS="120",
        LINES="40",
    )
    return env


def _spawn(args: list[str], tmp: Path) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        args,
        cwd=str(tmp),
        env=_env(tmp),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
        maxread=1 << 16,
    )


def _timed_turn(child: pexpect.spawn, keys: str, done: re.Pattern[str] | str) -> float:
    """Seconds from sending ``keys`` to ``done`` appearing on ``child``'s screen."""
    child.send(keys)
    t0 = time.perf_counter()
    if isinstance(done, str):
        child.expect_exact(done)
    else:
        child.expect(done)
    return time.perf_counter() - t0


def repl_and_stream_seconds(deltas: list[str], tmp: Path) -> tuple[float, float]:
    """Best times, s, of the REPL showing ``deltas`` (Enter to ``── completed``)
    and of the library turn writing them raw; the two run turn about, so a
    change of load on the machine hits both alike."""
    with ReplayServer([Reply(body=chat_sse(deltas))], repeat_last=True) as server:
        url = server.url + "/v1"
        args = ["--provider", "openai-chat", "--base-url", url, "--model", "bench"]
        repl = _spawn(["-m", "mind.shell.cli", *args, "--cwd", str(tmp)], tmp)
        raw = _spawn(["-c", _RAW_STREAM, url, str(tmp), _RAW_DONE, str(REPEATS)], tmp)
        try:
            repl.expect("› ")
            raw.expect("ready")
            best_repl = best_raw = float("inf")
            for n in range(REPEATS):
                best_repl = min(best_repl, _timed_turn(repl, f"answer {n}\r", _DONE))
                best_raw = min(best_raw, _timed_turn(raw, "\r", _RAW_DONE))
            repl.send("/exit\r")
            repl.expect(pexpect.EOF)
            raw.expect(pexpect.EOF)
        finally:
            repl.close(force=True)
            raw.close(force=True)
    return best_repl, best_raw


def raw_seconds(deltas: list[str], tmp: Path) -> float:
    """Best time, s, of writing ``deltas`` from a list (write + flush each) to a pseudo-terminal."""
    data = tmp / "deltas.json"
    data.write_text(json.dumps(deltas), encoding="utf-8")
    best = float("inf")
    for _ in range(REPEATS):
        child = _spawn(["-c", _RAW_WRITER, str(data), _RAW_DONE], tmp)
        try:
            child.expect("ready")
            child.send("\r")
            t0 = time.perf_counter()
            child.expect_exact(_RAW_DONE)
            best = min(best, time.perf_counter() - t0)
            child.send("\r")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
    return best


def bench_repl_render(tokens: int = TOKENS) -> list[tuple[str, float, float]]:
    """``[(name, REPL s, raw stream s), ...]`` for the fenced and the markdown
    answer, then ``(name + "/list", REPL s, raw list write s)`` for each."""
    rows = []
    extra = []
    for name, deltas in (
        ("repl.render.fence", fenced_answer(tokens)),
        ("repl.render.md", markdown_answer(tokens)),
    ):
        with tempfile.TemporaryDirectory() as tmp:
            mine, stream = repl_and_stream_seconds(deltas, Path(tmp))
            rows.append((name, mine, stream))
            extra.append((name + "/list", mine, raw_seconds(deltas, Path(tmp))))
    return rows + extra


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else TOKENS
    for name, mine, base in bench_repl_render(size):
        print(f"{name:<24} {mine * 1e3:>10.1f} {base * 1e3:>10.1f} {mine / base:>7.2f}x")
