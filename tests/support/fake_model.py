"""A dynamic loopback model: an OpenAI Chat Completions SSE server that
decides each reply from the request alone.

Stateless by design: the reply depends only on the request body (plus a fresh
tool-call id), so the same server answers a ``mind`` process and every
process that restarts the session after a crash. Rules, on the request's
``messages``:

- Let ``U`` be the last ``role: "user"`` message and ``want`` the number of
  tool calls ``U`` asks for: ``TOOLS=<n>`` in its text asks for ``n``, a bare
  ``TOOL`` or ``LIST`` for 1, otherwise 0. With ``LIST`` the calls are
  read-only ``list_dir`` calls of ``.`` (no side effect, no line below).
- If fewer than ``want`` ``role: "tool"`` messages follow ``U``, and the last
  message is ``U`` or a tool result: reply with one ``shell`` tool call whose
  command appends the call's fresh id (``call_<hex>``) as one line to
  ``effects.log`` in the session's working directory (after ``sleep
  tool_sleep_s`` when set; or the ``command`` template, ``{call_id}`` and
  ``{effects}`` filled in). A tool that runs twice
  shows as a duplicate line; one that never ran has no line.
- Otherwise reply with text that names every user text the request carried
  (``saw N user message(s): ...``).
- A request without ``tools`` is a summarisation request (mind's compaction):
  reply with a short summary, ``summary of N message(s)``.

A small context window (``context_window=N`` tokens, at 4 bytes of request
body per token, rounded up): a request over it is answered ``400`` with the
body OpenAI sends (``code: context_length_exceeded``); ``overflow_next=n``
answers the next ``n`` requests that carry tools so, whatever their size
(``overflow_summaries=n`` the next ``n`` summarisation requests). The error
states the window as OpenAI words it (``maximum context length is N
tokens``): ``context_window``, or the next of ``stated_windows`` (a server
that states a different window at a later error).
Every stream ends with realistic ``usage``: ``prompt_tokens`` is the request
body's size in tokens, ``completion_tokens`` the reply's.

Every request body is appended as one JSON line to ``record_path`` *before*
the reply is sent (so a client killed mid-stream still leaves its request on
record), and kept in :attr:`FakeModel.requests`. ``chunk_delay_s`` makes the
server thread pause before each SSE chunk, so a client can be steered or
killed mid-stream.

In-process::

    with FakeModel(record_path=tmp / "requests.jsonl", chunk_delay_s=0.01) as model:
        ... mind --provider openai-chat --base-url {model.base_url} --model fake ...
        bodies = read_requests(tmp / "requests.jsonl")

As a subprocess: ``python -m tests.support.fake_model [--record FILE] [--delay S]``
prints ``{"port": N, "base_url": "http://127.0.0.1:N/v1"}`` and serves until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.loopback import LoopbackServer, OwnedServer

__all__ = ["EFFECTS_FILE", "FakeModel", "decide", "read_requests", "user_texts", "wanted_tools"]

EFFECTS_FILE = "effects.log"
"""The side-effect file (in the tool's working directory) each tool call appends to."""

_TOOLS_N = re.compile(r"TOOLS=(\d+)")


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of every ``role: "user"`` message, in order (parts joined)."""
    out: list[str] = []
    for m in messages:
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        out.append(str(content))
    return out


def wanted_tools(text: str) -> int:
    """How many tool calls a user text asks for (see the module docstring)."""
    found = _TOOLS_N.search(text)
    if found:
        return int(found.group(1))
    return 1 if "TOOL" in text or "LIST" in text else 0


def decide(
    body: dict[str, Any], *, tool_sleep_s: float = 0.0, command: str | None = None
) -> dict[str, Any]:
    """The reply to a request body: ``{"tool_call": {...}}`` or ``{"text": "..."}``.

    Args:
        tool_sleep_s: the tool command sleeps this long before its effect
            (a window in which the tool is running).
        command: the shell command of each call, ``{call_id}`` and
            ``{effects}`` (the side-effect file) filled in; None: the
            default above.
    """
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if "tools" not in body:
        return {"text": f"summary of {len(messages)} message(s)"}
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user >= 0:
        text = user_texts([messages[last_user]])[0]
        after = messages[last_user + 1 :]
        results = sum(1 for m in after if m.get("role") == "tool")
        last_role = messages[-1].get("role")
        if results < wanted_tools(text) and last_role in ("user", "tool"):
            call_id = "call_" + uuid.uuid4().hex[:16]
            if "LIST" in text:
                return {
                    "tool_call": {"id": call_id, "name": "list_dir", "arguments": {"path": "."}}
                }
            line = f"echo {call_id} >> {EFFECTS_FILE}"
            if command is not None:
                line = command.format(call_id=call_id, effects=EFFECTS_FILE)
            elif tool_sleep_s:
                line = f"sleep {tool_sleep_s:g}; {line}"
            return {"tool_call": {"id": call_id, "name": "shell", "arguments": {"command": line}}}
    seen = user_texts(messages)
    return {"text": f"saw {len(seen)} user message(s): " + " | ".join(seen)}


def _pieces(text: str, count: int) -> list[str]:
    step = max(1, -(-len(text) // count))
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


BYTES_PER_TOKEN = 4
"""Request and reply bytes per token the fake counts (mind's own estimate)."""


def tokens_of(n_bytes: int) -> int:
    """Tokens the fake counts for ``n_bytes`` bytes (rounded up)."""
    return -(-n_bytes // BYTES_PER_TOKEN)


def context_length_body(window: int, tokens: int) -> dict[str, Any]:
    """The error body OpenAI's Chat Completions sends for a request over the window."""
    return {
        "error": {
            "message": f"This model's maximum context length is {window} tokens. However, "
            f"your messages resulted in {tokens} tokens. Please reduce the length of the "
            "messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def sse_chunks(
    reply: dict[str, Any], *, text_pieces: int = 4, prompt_tokens: int = 10
) -> list[bytes]:
    """The reply as Chat Completions SSE ``data:`` events, ``[DONE]`` last;
    ``usage`` says ``prompt_tokens`` and the reply's own size in tokens."""
    rid = "chatcmpl-fake-" + uuid.uuid4().hex[:8]

    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        data = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "fake",
            "choices": choices,
            "usage": usage,
        }
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    def delta(d: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": d, "finish_reason": finish}

    out: list[bytes] = []
    call = reply.get("tool_call")
    if call is not None:
        args = json.dumps(call["arguments"])
        half = len(args) // 2
        first = {"index": 0, "id": call["id"], "type": "function"}
        first["function"] = {"name": call["name"], "arguments": ""}
        out.append(chunk([delta({"role": "assistant", "content": None, "tool_calls": [first]})]))
        for part in (args[:half], args[half:]):
            frag = {"index": 0, "function": {"arguments": part}}
            out.append(chunk([delta({"tool_calls": [frag]})]))
        out.append(chunk([delta({}, "tool_calls")]))
    else:
        out.append(chunk([delta({"role": "assistant", "content": ""})]))
        for piece in _pieces(str(reply["text"]), text_pieces):
            out.append(chunk([delta({"content": piece})]))
        out.append(chunk([delta({}, "stop")]))
    answer = json.dumps(call) if call is not None else str(reply["text"])
    completion = tokens_of(len(answer.encode("utf-8", "surrogatepass")))
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": prompt_tokens + completion,
    }
    out.append(chunk([], usage))
    out.append(b"data: [DONE]\n\n")
    return out


def read_requests(path: Path) -> list[dict[str, Any]]:
    """Every request body recorded in ``path`` (a JSONL file), in arrival order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or not self.path.endswith("/chat/completions"):
            self._error(400, "fake model: expected a JSON body on POST /v1/chat/completions")
            return
        owner._record(body, raw)
        if owner._take_failure():
            self._error(503, "fake model: failing as asked (fail_first)", retry_after="0")
            return
        tokens = tokens_of(len(raw))
        window = owner.context_window
        if owner._take_overflow("tools" in body) or (window is not None and tokens > window):
            self._send_json(400, context_length_body(owner._stated_window(), tokens))
            return
        reply = decide(body, tool_sleep_s=owner.tool_sleep_s, command=owner.command)
        if "tools" not in body and owner.summary_text is not None:
            reply = {"text": owner.summary_text}
        delay = owner.chunk_delay_s
        if "tools" not in body:
            owner.summary_requested.set()
            delay = max(delay, owner.summary_delay_s)
            if owner.hold_summary is not None:  # held until the test releases it
                owner.hold_summary.wait(20)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for piece in sse_chunks(reply, prompt_tokens=tokens):
                if delay:
                    time.sleep(delay)  # pacing of the stream, not a test timing
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client died (SIGKILL) or stopped reading

    def _error(self, status: int, message: str, *, retry_after: str | None = None) -> None:
        body = {"error": {"message": message, "type": "fake_model"}}
        self._send_json(status, body, retry_after=retry_after)

    def _send_json(
        self, status: int, body: dict[str, Any], *, retry_after: str | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(data)


class FakeModel(LoopbackServer):
    """Serve :func:`decide` replies on ``127.0.0.1:<free port>`` from a daemon thread.

    Args:
        record_path: append every request body here as one JSON line.
        chunk_delay_s: pause before each SSE chunk, in seconds (0: none).
        tool_sleep_s: each tool command sleeps this long before its effect.
        command: each shell call's command template (:func:`decide`).
        fail_first: answer the first this many requests with ``503`` and
            ``Retry-After: 0`` (a transient failure the client retries at once).
        context_window: the model's window in tokens (None: unlimited); a
            larger request gets OpenAI's ``context_length_exceeded`` error.
        overflow_next: answer the next this many requests that carry tools
            with that error whatever their size (settable while serving).
        overflow_summaries: the same for the next this many summarisation
            requests (no tools).
        overflow_skip: let this many requests with tools through before
            ``overflow_next`` applies (an overflow later in a turn: after its
            tool results; settable while serving).
        summary_delay_s: pause before each SSE chunk of a summarisation
            reply (a window in which a compaction is running).
        hold_summary: a summarisation reply waits (at most 20 s) until the
            test sets this event: the compaction is held running.
        summary_text: every summarisation reply is this text (e.g. ``""``:
            an empty summary); None: :func:`decide`'s.
        stated_windows: the windows the next overflow errors state, in
            order (then ``context_window``, or 0: none stated).

    Attributes:
        requests: every request body, decoded, in arrival order.
        raw_requests: the same bodies as the bytes received.
        summary_requested: set when a summarisation request arrives.
    """

    handler = _Handler
    thread_name = "fake-model"

    def __init__(
        self,
        *,
        record_path: Path | None = None,
        chunk_delay_s: float = 0.0,
        tool_sleep_s: float = 0.0,
        command: str | None = None,
        fail_first: int = 0,
        context_window: int | None = None,
        overflow_next: int = 0,
        overflow_summaries: int = 0,
        overflow_skip: int = 0,
        summary_delay_s: float = 0.0,
        hold_summary: threading.Event | None = None,
        summary_text: str | None = None,
        stated_windows: tuple[int, ...] = (),
    ) -> None:
        self.record_path = record_path
        self.chunk_delay_s = chunk_delay_s
        self.tool_sleep_s = tool_sleep_s
        self.command = command
        self.fail_first = fail_first
        self.context_window = context_window
        self.overflow_next = overflow_next
        self.overflow_summaries = overflow_summaries
        self.overflow_skip = overflow_skip
        self.summary_delay_s = summary_delay_s
        self.hold_summary = hold_summary
        self.summary_text = summary_text
        self.stated_windows = list(stated_windows)
        self.summary_requested = threading.Event()
        self.requests: list[dict[str, Any]] = []
        self.raw_requests: list[bytes] = []
        self._lock = threading.Lock()
        super().__init__()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` — the ``--base-url`` for ``openai-chat``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def _take_failure(self) -> bool:
        """Whether this request is one of the first ``fail_first`` (counted down)."""
        with self._lock:
            if self.fail_first <= 0:
                return False
            self.fail_first -= 1
            return True

    def _take_overflow(self, has_tools: bool) -> bool:
        """Whether this request is one of the next ``overflow_next`` with
        tools (or ``overflow_summaries`` without)."""
        with self._lock:
            if has_tools and self.overflow_next > 0:
                if self.overflow_skip > 0:
                    self.overflow_skip -= 1
                    return False
                self.overflow_next -= 1
                return True
            if not has_tools and self.overflow_summaries > 0:
                self.overflow_summaries -= 1
                return True
            return False

    def _stated_window(self) -> int:
        """The window this overflow error states (0: none; see ``stated_windows``)."""
        with self._lock:
            if self.stated_windows:
                return self.stated_windows.pop(0)
            return self.context_window or 0

    def _record(self, body: dict[str, Any], raw: bytes) -> None:
        with self._lock:
            self.requests.append(body)
            self.raw_requests.append(raw)
            if self.record_path is not None:
                with self.record_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(body) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Subprocess entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--record", type=Path, default=None, help="JSONL file of request bodies")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each SSE chunk")
    parser.add_argument("--window", type=int, default=None, help="context window in tokens")
    args = parser.parse_args(argv)
    model = FakeModel(
        record_path=args.record, chunk_delay_s=args.delay, context_window=args.window
    ).start()
    print(json.dumps({"port": model.port, "base_url": model.base_url}), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    finally:
        model.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
