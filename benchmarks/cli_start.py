"""``cli.version`` and ``exec.first_request``: how fast ``mind`` starts.

- ``cli.version``: ``mind --version`` against ``python -c pass`` (spawn to
  exit; target ≤ 3×).
- ``exec.first_request``: ``mind exec`` against a loopback openai-chat server,
  from spawn until the server receives the request, against a minimal httpx
  client (``python -c 'import httpx; httpx.post(...)'``) timed the same way
  (target ≤ 1.5×). The server answers one short JSON completion, so each
  ``mind exec`` ends normally.

Times are the best of :data:`RUNS` spawns, measured with this process's
``time.perf_counter`` (the server runs in a thread here, so spawn and arrival
share one clock), after one untimed spawn of each command. The children may
write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped from their
environment): an installed mind has its ``.pyc`` files like httpx has, and
without them every spawn of an editable checkout recompiles mind's sources
(~0.2 s), which measures the checkout, not the start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RUNS = 7

_ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "model": "bench",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _FirstRequestServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_POST(self) -> None:
        arrived = time.perf_counter()
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.arrivals.append(arrived)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(_ANSWER)))
        self.end_headers()
        self.wfile.write(_ANSWER)


class _FirstRequestServer(ThreadingHTTPServer):
    """Answers every POST with :data:`_ANSWER`; ``arrivals`` holds the
    ``perf_counter`` time each request's headers were read."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrivals: list[float] = []


def _spawn_s(argv: list[str], env: dict[str, str]) -> float:
    """Wall time from spawn to exit of ``argv``, in seconds."""
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def _first_request_s(server: _FirstRequestServer, argv: list[str], env: dict[str, str]) -> float:
    """Time from spawning ``argv`` to the server receiving its first request."""
    before = len(server.arrivals)
    start = time.perf_counter()
    proc = subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0 or len(server.arrivals) <= before:
        raise RuntimeError(f"{argv[:2]} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return server.arrivals[before] - start


def bench_cli_start(tmp: Path) -> list[tuple[str, float, float]]:
    """Rows ``(cli.version, mind s, python -c pass s)`` and
    ``(exec.first_request, mind s, httpx client s)``."""
    python = sys.executable
    mind = str(Path(python).with_name("mind"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env |= {"MIND_HOME": str(tmp / "home"), "OPENAI_API_KEY": "sk-bench"}
    version = min([_spawn_s([mind, "--version"], env) for _ in range(RUNS + 1)][1:])
    bare = min([_spawn_s([python, "-c", "pass"], env) for _ in range(RUNS + 1)][1:])

    server = _FirstRequestServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.daemon = True
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"
        work = tmp / "work"
        work.mkdir()
        exec_argv = [mind, "exec", "--provider", "openai-chat", "--base-url", base]
        exec_argv += ["--model", "bench", "--cwd", str(work), "say ok"]
        client = (
            "import httpx; httpx.post("
            f"{base + '/chat/completions'!r}, "
            "json={'model': 'bench', 'messages': [{'role': 'user', 'content': 'say ok'}]}, "
            "headers={'authorization': 'Bearer sk-bench'})"
        )
        # One more spawn than timed: the first writes bytecode (see the module docstring).
        mind_s = min([_first_request_s(server, exec_argv, env) for _ in range(RUNS + 1)][1:])
        httpx_argv = [python, "-c", client]
        httpx_s = min([_first_request_s(server, httpx_argv, env) for _ in range(RUNS + 1)][1:])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    return [("cli.version", version, bare), ("exec.first_request", mind_s, httpx_s)]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, mine, base in bench_cli_start(Path(d)):
            print(f"{name:<24} {mine * 1e3:>10.1f} {base * 1e3:>14.1f} {mine / base:>7.2f}x")
