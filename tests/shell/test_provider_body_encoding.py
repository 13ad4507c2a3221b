"""The request body goes on the wire as msgspec encodes it.

Each HTTP adapter sends ``msgspec.json.encode(build_body(request))``: one
encoder for every body, several times faster than the standard library's on
long histories. A tool schema with a float makes the two encoders' bytes
differ (``1e-7`` against ``1e-07``), so the bytes a loopback server receives
show which one ran.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from mind.conversation import ModelRequest, ToolSpec, UserMessage
from mind.shell.providers import ProviderSettings, anthropic, make_provider, openai_chat
from mind.shell.providers import openai_responses as responses
from tests.support.echo_server import EchoServer

REQUEST = ModelRequest(
    model="echo-text",
    system="be brief",
    messages=[UserMessage(text="héllo \u2028 wörld")],
    tools=[
        ToolSpec(
            name="wait",
            description="wait a while",
            parameters={
                "type": "object",
                "properties": {"seconds": {"type": "number", "minimum": 1e-07, "maximum": 1e16}},
            },
        )
    ],
)

BUILD: dict[str, Any] = {
    "openai-chat": openai_chat.build_body,
    "openai-responses": responses.build_body,
    "anthropic": anthropic.build_body,
}


async def _send(kind: str, base_url: str) -> None:
    provider = make_provider(
        ProviderSettings(kind=kind, model="echo-text", base_url=base_url, api_key="k")  # type: ignore[arg-type]
    )
    try:
        with anyio.fail_after(10):
            async for _ in provider.stream(REQUEST):
                pass
    finally:
        await provider.aclose()


@pytest.mark.parametrize("kind", sorted(BUILD))
def test_the_body_on_the_wire_is_msgspecs_encoding(kind: str) -> None:
    with EchoServer(kind) as server:
        base = f"http://127.0.0.1:{server.port}" + ("" if kind == "anthropic" else "/v1")
        anyio.run(_send, kind, base)
    [sent] = server.requests
    expected = msgspec.json.encode(BUILD[kind](REQUEST)).decode("utf-8")
    assert sent["body"] == expected
    assert "1e-7" in sent["body"]
