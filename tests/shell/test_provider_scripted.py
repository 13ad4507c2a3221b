"""The scripted provider: deterministic, stateless replies from a script file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from mind.conversation import (
    AssistantMessage,
    Message,
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    ToolResultMessage,
    UserMessage,
)
from mind.errors import ConfigError, ScriptError
from mind.shell.providers import Provider, ProviderSettings, make_provider
from tests.support.gate import Gate

SCRIPT = """\
- text: "Let me look at the file first."
  reasoning: "need the file"
  tool_calls:
    - name: read_file
      arguments: {path: README.md}
    - name: grep
      arguments: '{"pattern": "TODO"}'
    - name: list_dir
- text: "Done: the README has two TODOs."
"""


def provider_for(tmp_path: Path, text: str, name: str = "script.yaml") -> Provider:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return make_provider(ProviderSettings(kind="scripted", model="any", script_path=str(path)))


def play(provider: Provider, messages: list[Message]) -> list[StreamEvent]:
    async def run() -> list[StreamEvent]:
        req = ModelRequest(model="any", system="s", messages=messages)
        return [e async for e in provider.stream(req)]

    return anyio.run(run)


def test_plays_replies_by_counting_assistant_messages(tmp_path: Path) -> None:
    provider = provider_for(tmp_path, SCRIPT)
    assert provider.label == f"scripted (offline script {tmp_path / 'script.yaml'})"
    first = play(provider, [UserMessage(text="todo?")])
    done = first[-1]
    assert isinstance(done, StreamDone)
    assert [(c.call_id, c.name, json.loads(c.arguments)) for c in done.tool_calls] == [
        ("call_1_1", "read_file", {"path": "README.md"}),
        ("call_1_2", "grep", {"pattern": "TODO"}),
        ("call_1_3", "list_dir", {}),
    ]
    assert done.finish == "tool_calls"
    texts = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(texts) > 1 and "".join(texts) == done.text == "Let me look at the file first."
    assert "".join(e.text for e in first if isinstance(e, ReasoningDelta)) == "need the file"
    started = [(e.call_id, e.name) for e in first if isinstance(e, ToolCallStarted)]
    assert started == [(c.call_id, c.name) for c in done.tool_calls]

    # A fresh provider (another process) continues from the history alone.
    again = provider_for(tmp_path, SCRIPT)
    history: list[Message] = [
        UserMessage(text="todo?"),
        AssistantMessage(text=done.text, tool_calls=done.tool_calls),
        *[ToolResultMessage(call_id=c.call_id, output="...") for c in done.tool_calls],
    ]
    second = play(again, history)[-1]
    assert isinstance(second, StreamDone)
    assert (second.text, second.finish, second.tool_calls) == (
        "Done: the README has two TODOs.",
        "stop",
        [],
    )
    assert play(again, [UserMessage(text="todo?")]) == first  # deterministic

    # Exhausted: a clear ScriptError naming the file.
    history.append(AssistantMessage(text=second.text))
    with pytest.raises(ScriptError, match="exhausted") as info:
        play(again, history)
    assert info.value.path == tmp_path / "script.yaml"


def test_json_and_replies_key_forms(tmp_path: Path) -> None:
    script = {"replies": [{"tool_calls": [{"name": "f", "arguments": ""}]}]}
    provider = provider_for(tmp_path, json.dumps(script), "s.json")
    done = play(provider, [UserMessage(text="x")])[-1]
    assert isinstance(done, StreamDone)
    assert done.tool_calls == [ToolCall(call_id="call_1_1", name="f", arguments="{}")]
    assert done.text == ""


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{not: [valid", "not valid YAML"),
        ("text: hi", "expected a list"),
        ("- 3", "reply 1: expected a mapping"),
        ("- {}", "reply 1: needs 'text' or 'tool_calls'"),
        ("- {text: hi, extra: 1}", "unknown keys"),
        ("- {text: 5}", "'text' must be a string"),
        ("- {tool_calls: {name: f}}", "'tool_calls' must be a list"),
        ("- {tool_calls: [{arguments: {}}]}", "tool call 1: 'name'"),
        ("- {tool_calls: [{name: f, arguments: '{bad'}]}", "not valid JSON"),
        ("- {tool_calls: [{name: f, arguments: [1]}]}", "object or a JSON string"),
        ("- {tool_calls: [{name: f, id: ''}]}", "tool call 1: 'id' must be a non-empty string"),
    ],
)
def test_malformed_scripts_raise_script_error_with_path(
    tmp_path: Path, text: str, fragment: str
) -> None:
    with pytest.raises(ScriptError) as info:
        provider_for(tmp_path, text)
    assert fragment in info.value.detail
    assert info.value.path == tmp_path / "script.yaml"


def test_missing_script_and_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ScriptError, match="cannot read script"):
        make_provider(
            ProviderSettings(kind="scripted", model="m", script_path=str(tmp_path / "none.yaml"))
        )
    with pytest.raises(ConfigError):
        make_provider(ProviderSettings(kind="scripted", model="m"))


def test_http_provider_labels_never_show_the_key() -> None:
    labels = {}
    for kind in ("openai-chat", "openai-responses", "anthropic"):
        p = make_provider(ProviderSettings(kind=kind, model="gpt-x", api_key="sk-very-secret"))
        labels[kind] = p.label
        assert "sk-very-secret" not in repr(p)
        anyio.run(p.aclose)
    assert labels == {
        "openai-chat": "openai-chat gpt-x @ https://api.openai.com/v1",
        "openai-responses": "openai-responses gpt-x @ https://api.openai.com/v1",
        "anthropic": "anthropic gpt-x @ https://api.anthropic.com",
    }


def test_pause_holds_the_reply_after_its_last_delta_until_released(tmp_path: Path) -> None:
    with Gate() as gate:
        provider = provider_for(
            tmp_path, f"- text: 'a reply in three pieces'\n  pause: {gate.path}\n"
        )
        seen: list[StreamEvent] = []

        async def run() -> list[StreamEvent]:
            async def consume() -> None:
                req = ModelRequest(model="any", system="s", messages=[UserMessage(text="x")])
                async for event in provider.stream(req):
                    seen.append(event)

            async with anyio.create_task_group() as tg:
                tg.start_soon(consume)
                assert await anyio.to_thread.run_sync(gate.wait_reached)
                held = list(seen)
                gate.release()
            return held

        held = anyio.run(run)
    assert [type(e) for e in held] == [TextDelta, TextDelta, TextDelta]  # every delta, no end
    assert isinstance(seen[-1], StreamDone) and seen[-1].text == "a reply in three pieces"


def test_pause_at_a_gate_nobody_holds_is_a_script_error(tmp_path: Path) -> None:
    provider = provider_for(tmp_path, "- {text: hi, pause: no-gate-here}\n")
    with pytest.raises(ScriptError, match=r"reply 1: pause: cannot reach the gate .*no-gate-here"):
        play(provider, [UserMessage(text="x")])
