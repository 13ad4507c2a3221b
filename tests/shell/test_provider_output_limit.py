"""The output cap at the adapter, over real loopback HTTP (docs/design/providers.md §1).

``ModelRequest.max_output_bytes`` bounds what one round may stream: deltas
past it, one enormous SSE line, and an oversized JSON body all end in
``output_limit``; an oversized *error* body is cut and still classified.
"""

from __future__ import annotations

import contextlib
import json
from http.server import BaseHTTPRequestHandler

import anyio
import pytest

from mind.conversation import ModelRequest, UserMessage
from mind.errors import ProviderError
from mind.shell.providers import ProviderSettings, make_provider
from tests.support.loopback import LoopbackServer

CAP = 256 * 1024
BIG = 3 * 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        mode: str = self.server.owner.mode  # type: ignore[attr-defined]
        if mode == "json":
            body = {"choices": [{"index": 0, "message": {"content": "z" * BIG}}]}
            self._send(200, "application/json", json.dumps(body).encode())
        elif mode == "error":
            body = {"error": {"message": "boom " + "e" * BIG, "type": "server_error"}}
            self._send(500, "application/json", json.dumps(body).encode())
        elif mode == "one_line":
            self._send(200, "text/event-stream", b'data: {"choices": [' + b" " * BIG)
        else:
            chunk = {"choices": [{"index": 0, "delta": {"content": "w" * 8192}}]}
            line = f"data: {json.dumps(chunk)}\n\n".encode()
            self._send(200, "text/event-stream", line * (BIG // 8192))

    def _send(self, status: int, ctype: str, data: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.end_headers()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(data)  # the client may stop reading at its cap


class _Server(LoopbackServer):
    handler = _Handler
    thread_name = "output-limit-model"

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode


async def _stream(port: int) -> int:
    provider = make_provider(
        ProviderSettings(kind="openai-chat", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    )
    request = ModelRequest(
        model="m", system="", messages=[UserMessage(text="hi")], max_output_bytes=CAP
    )
    got = 0
    try:
        async for item in provider.stream(request):
            got += len(getattr(item, "text", ""))
    finally:
        await provider.aclose()
    return got


@pytest.mark.parametrize("mode", ["deltas", "one_line", "json"])
def test_a_round_past_its_output_cap_fails_output_limit(mode: str) -> None:
    with _Server(mode) as server, pytest.raises(ProviderError) as caught:
        anyio.run(_stream, server.port)
    assert caught.value.kind == "output_limit", caught.value
    assert "max_output_mib" in caught.value.detail
    assert not caught.value.transient


def test_an_oversized_error_body_is_cut_and_still_classified() -> None:
    with _Server("error") as server, pytest.raises(ProviderError) as caught:
        anyio.run(_stream, server.port)
    assert caught.value.kind == "server" and caught.value.status == 500
