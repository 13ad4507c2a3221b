"""A model that streams without end is cut at ``max_output_mib`` (docs/design/turn.md §5).

A real ``mind exec`` process against a loopback Chat Completions server that
streams ~20 MB of text (or of tool-call arguments) with the cap at 1 MiB: the
turn fails ``output_limit`` with one clear line, its prompt is not
acknowledged (it stays in ``inbox.json`` for a later turn) and the child's
peak RSS stays far below what holding 20 MB several times over would cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import _SCRUB
from tests.support.loopback import LoopbackServer

STREAM_BYTES = 20 * 1024 * 1024
PIECE = "x" * 16384
MAX_RSS_KIB = 150 * 1024


class _Endless(BaseHTTPRequestHandler):
    """Streams ``STREAM_BYTES`` of content (or tool arguments) in 16 KiB deltas."""

    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        owner: EndlessModel = self.server.owner  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        sent = 0
        try:
            while sent < STREAM_BYTES:
                if owner.tool_arguments:
                    call: dict[str, Any] = {"index": 0, "function": {"arguments": PIECE}}
                    if sent == 0:
                        call.update(id="call_1", type="function")
                        call["function"]["name"] = "shell"
                    delta: dict[str, Any] = {"tool_calls": [call]}
                else:
                    delta = {"content": PIECE}
                chunk = {"choices": [{"index": 0, "delta": delta}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                sent += len(PIECE)
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            owner.cut = True  # the client closed the stream at its cap


class EndlessModel(LoopbackServer):
    handler = _Endless
    thread_name = "endless-model"

    def __init__(self, *, tool_arguments: bool = False) -> None:
        super().__init__()
        self.tool_arguments = tool_arguments
        self.cut = False


# Run the CLI, then write the process's own peak RSS (VmHWM, KiB) to a file:
# the rusage of a child also counts the forking parent's memory (pytest's).
_PEAK = """
import atexit, sys
path, argv = sys.argv[1], sys.argv[2:]
def peak():
    with open("/proc/self/status") as f, open(path, "w") as out:
        out.write(next(l for l in f if l.startswith("VmHWM:")).split()[1])
atexit.register(peak)
from mind.shell.cli import main
sys.exit(main(argv))
"""


def _run_exec(tmp_path: Path, base_url: str) -> tuple[int, str, int]:
    """Run ``mind exec`` as a child; return (exit status, stderr, peak RSS KiB)."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_MAX_OUTPUT_MIB="1",
        MIND_MAX_RETRIES="0",
        PYTHONUNBUFFERED="1",
    )
    argv = ["exec", "--provider", "openai-chat", "--base-url", base_url, "--model", "m"]
    argv += ["--cwd", str(tmp_path), "hello"]
    peak = tmp_path / "peak-kib"
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(peak), *argv],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, proc.stderr, int(peak.read_text())


def _records(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = (tmp_path / "home" / "sessions").glob("*/journal.jsonl")
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


@pytest.mark.parametrize("tool_arguments", [False, True], ids=["text", "tool_arguments"])
def test_exec_cuts_an_endless_stream_at_the_output_cap(
    tmp_path: Path, tool_arguments: bool
) -> None:
    with EndlessModel(tool_arguments=tool_arguments) as server:
        code, err, rss_kib = _run_exec(tmp_path, f"http://127.0.0.1:{server.port}/v1")
    assert code == 1, err
    assert "Traceback" not in err, err
    assert "mind: turn failed (output_limit)" in err, err
    assert "max_output_mib" in err, err
    records = _records(tmp_path)
    (done,) = [r for r in records if r["type"] == "turn_completed"]
    assert done["status"] == "failed" and done["failure"]["kind"] == "output_limit"
    assert done["acknowledged"] == []  # the prompt was not answered
    assert not [r for r in records if r["type"] == "model_round"]  # no cut answer journaled
    (session_dir,) = (tmp_path / "home" / "sessions").iterdir()
    inbox = json.loads((session_dir / "inbox.json").read_text("utf-8"))
    assert [e["text"] for e in inbox["entries"]] == ["hello"]  # still waiting
    assert rss_kib < MAX_RSS_KIB, f"peak RSS {rss_kib} KiB"
