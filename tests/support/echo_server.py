"""A loopback model server that fails on request, echoing the credentials it got.

The secret-marker test (``tests/e2e/test_exec_secret_markers.py``) runs real
``mind exec`` against it: every failure answer carries, in its body and its
headers, the ``Authorization`` / ``x-api-key`` header values and the request
path the client sent, so any path that prints provider text unredacted leaks a
marker the test then finds.

Three answers succeed: ``echo-text`` (a complete JSON answer whose text echoes
them), ``echo-text-split`` (openai-chat: the same as an event stream, the
echo split across deltas) and ``echo-tool-call`` (openai-chat: a tool call
whose id, name and arguments carry the key, then, once the request holds its
result, a text answer). ``echo-bare-credential`` is a 401 whose body
quotes the ``Authorization`` credential without its scheme.

The failure is chosen by the request body's ``model`` (``--model SCENARIO``),
one server serving every scenario of one provider; :data:`SCENARIOS` lists
them. Every request (path, headers, body text) is kept in
:attr:`EchoServer.requests`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.loopback import LoopbackServer, OwnedServer

SCENARIOS: tuple[str, ...] = (
    "http-401",
    "http-403",
    "http-404",
    "http-429",
    "http-500",
    "http-500-text",
    "redirect",
    "overflow",
    "content-type",
    "content-type-error",
    "malformed-event",
    "stream-error",
    "truncated",
    "invalid-json",
    "idle-headers",
    "idle-body",
)
"""The failure answers the server can give (see :func:`_answer`)."""

_OVERFLOW = {
    "openai-chat": {
        "message": "This model's maximum context length is 8192 tokens.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    },
    "openai-responses": {
        "message": "Your input exceeds the context window of this model.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    },
    "anthropic": {"type": "invalid_request_error", "message": "prompt is too long: 300000 tokens"},
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_POST(self) -> None:
        owner: EchoServer = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        owner.record(self.path, dict(self.headers.items()), raw.decode("utf-8", "replace"))
        try:
            self.request_body: dict[str, Any] = json.loads(raw)
            scenario = str(self.request_body.get("model", ""))
        except (ValueError, AttributeError):
            self.request_body, scenario = {}, ""
        echo = (
            f"path={self.path} authorization={self.headers.get('authorization')} "
            f"x-api-key={self.headers.get('x-api-key')}"
        )
        self.close_connection = True
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._answer(owner.provider, scenario, echo)  # the client may give up (idle)

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str,
        echo: str,
        extra: dict[str, str] | None = None,
        *,
        length: int | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        self.send_header("X-Echo", echo.replace("\n", " "))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def _error_json(self, status: int, message: str, echo: str, **extra: str) -> None:
        err: dict[str, Any] = {"message": f"{message}; you sent {echo}", "type": "echo"}
        self._send(status, json.dumps({"error": err}).encode(), "application/json", echo, extra)

    def _answer(self, provider: str, scenario: str, echo: str) -> None:
        if scenario.startswith("http-") and scenario[5:].isdigit():
            status = int(scenario[5:])
            retry = {"Retry-After": "0"} if status == 429 else {}
            self._error_json(status, f"refused ({status})", echo, **retry)
        elif scenario == "http-500-text":
            self._send(500, f"Internal error: {echo}".encode(), "text/plain", echo)
        elif scenario == "redirect":
            location = f"http://u:{echo.replace(' ', '_')}@127.0.0.1:9/elsewhere"
            self._error_json(307, "moved", echo, Location=location)
        elif scenario == "overflow":
            err = dict(_OVERFLOW[provider])
            err["message"] += f" {echo}"
            body = {"type": "error", "error": err} if provider == "anthropic" else {"error": err}
            self._send(400, json.dumps(body).encode(), "application/json", echo)
        elif scenario == "content-type":
            self._send(200, f"<p>hello {echo}</p>".encode(), "text/plain", echo)
        elif scenario == "content-type-error":
            body = json.dumps({"error": {"message": f"bad {echo}", "type": "server_error"}})
            self._send(200, body.encode(), "text/plain", echo)
        elif scenario == "malformed-event":
            body = f'data: {{"broken": "{echo}\n\ndata: more\n\n'.encode()
            self._send(200, body, "text/event-stream", echo)
        elif scenario == "stream-error":
            err = {"type": "error", "error": {"type": "api_error", "message": f"boom {echo}"}}
            body = f"event: error\ndata: {json.dumps(err)}\n\n".encode()
            self._send(200, body, "text/event-stream", echo)
        elif scenario == "truncated":
            body = f'data: {{"cut": "{echo}'.encode()
            self._send(200, body, "text/event-stream", echo, length=len(body) + 1000)
        elif scenario == "invalid-json":
            self._send(200, f'{{"id": "{echo}'.encode(), "application/json", echo)
        elif scenario == "idle-headers":
            self.rfile.read(1)  # until the client gives up and closes
        elif scenario == "idle-body":
            self._send(200, b"", "text/event-stream", echo, length=100)
            self.rfile.read(1)
        elif scenario == "echo-text":
            text = f"you sent {echo}"
            self._send(200, json.dumps(_answer_body(provider, text)).encode(), _JSON, echo)
        elif scenario == "echo-text-split" and provider == "openai-chat":
            self._send(200, b"".join(_chat_sse(f"you sent {echo}", pieces=7)), _SSE, echo)
        elif scenario == "echo-bare-credential":
            # The credential alone, without "Basic"/"Bearer" (no shape to find).
            bare = (self.headers.get("authorization") or "").partition(" ")[2]
            self._send(401, f"bad key {bare}".encode(), "text/plain", "")
        elif scenario == "echo-tool-call" and provider == "openai-chat":
            self._send(200, b"".join(self._tool_call_sse(echo)), _SSE, echo)
        else:
            self._error_json(400, f"unknown scenario {scenario!r}", echo)

    def _tool_call_sse(self, echo: str) -> list[bytes]:
        """A tool call whose id, name and arguments carry the bearer key; a
        text answer once the request holds a tool result."""
        if any(m.get("role") == "tool" for m in self.request_body.get("messages", [])):
            return _chat_sse("done", pieces=1)
        key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
        call = {
            "index": 0,
            "id": f"id{key}",
            "type": "function",
            "function": {"name": f"tool_{key}", "arguments": json.dumps({"command": key})},
        }
        return [
            _chat_event({"role": "assistant", "tool_calls": [call]}),
            _chat_event({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]


_JSON = "application/json"
_SSE = "text/event-stream"


def _answer_body(provider: str, text: str) -> dict[str, Any]:
    """A complete non-streaming answer of ``provider``'s API saying ``text``."""
    if provider == "anthropic":
        return {
            "id": "msg_echo",
            "type": "message",
            "role": "assistant",
            "model": "echo",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    if provider == "openai-responses":
        return {
            "id": "resp_echo",
            "object": "response",
            "status": "completed",
            "model": "echo",
            "output": [
                {
                    "id": "msg_echo",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}],
                }
            ],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        }
    return {
        "id": "chatcmpl-echo",
        "object": "chat.completion",
        "model": "echo",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _chat_sse(text: str, *, pieces: int) -> list[bytes]:
    """A Chat Completions event stream saying ``text`` in ``pieces`` deltas
    (so a secret in it arrives split across deltas)."""
    step = max(1, -(-len(text) // pieces))
    event = _chat_event
    out = [event({"role": "assistant", "content": ""})]
    out += [event({"content": text[i : i + step]}) for i in range(0, len(text), step)]
    return [*out, event({}, "stop"), b"data: [DONE]\n\n"]


def _chat_event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One Chat Completions stream chunk carrying ``delta``."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    data = {"id": "c", "object": "chat.completion.chunk", "model": "echo", "choices": [choice]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


class EchoServer(LoopbackServer):
    """Serve the :data:`SCENARIOS` of one provider on ``127.0.0.1:<free port>``.

    Args:
        provider: ``openai-chat``, ``openai-responses`` or ``anthropic`` (the
            shape of the context-overflow error).
    """

    handler = _Handler
    thread_name = "echo-server"

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Condition()
        super().__init__()

    def record(self, path: str, headers: dict[str, str], body: str) -> None:
        """Keep one request (called from the handler thread)."""
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
            self._lock.notify_all()

    def wait_for_requests(self, count: int, *, timeout_s: float) -> bool:
        """Wait until ``count`` requests arrived (False at the deadline, in seconds)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True
