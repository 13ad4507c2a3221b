"""The ``scripted`` provider: plays model replies from a script file, offline.

For tests and demos; its label always says it is scripted. It is stateless:
the reply played is chosen by counting the assistant messages already in the
request, so a session resumed in another process continues the script where
the journal left it.

Script format (YAML or JSON)::

    - text: "Hello"                           # a text reply
    - tool_calls:                             # a tool-call reply
        - name: read_file
          arguments: {path: README.md}        # object, or a JSON string
      text: "Let me look."                    # optional text alongside
      reasoning: "..."                        # optional, any reply
      pause: gate.sock                        # optional, any reply (for tests)
    # or the same list under a top-level key:  {replies: [...]}

Call ids are ``call_<reply>_<call>`` (both 1-based), e.g. ``call_2_1``; a
call's optional ``id: X`` plays ``X`` instead (servers that reuse ids, such
as ``call_0`` every turn or twice in one round, are reproduced so).

``pause: PATH`` holds the reply after its last delta (reasoning, text and
tool-call starts), before the round's final event: the provider connects to
the Unix socket at ``PATH`` (relative to the script's folder) and waits until
the peer sends a byte or closes the connection. The peer's ``accept`` tells
a test that the reply is paused exactly there, so a race such as "input
arrives between the last delta and the end of the round" is deterministic
(``tests/support/gate.py``). A gate that cannot be reached is a
:class:`~mind.errors.ScriptError`; a cancelled turn stops waiting at once.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import yaml

from mind.conversation import (
    AssistantMessage,
    ModelRequest,
    ReasoningDelta,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolCallStarted,
    Usage,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.errors import ScriptError

PROVIDER = "scripted"


class ScriptedCall(msgspec.Struct, frozen=True, kw_only=True):
    """One scripted tool call: name and raw JSON arguments."""

    name: str
    arguments: str
    call_id: str | None = None
    """The id played (``id:`` in the script); None: ``call_<reply>_<call>``."""


class ScriptedReply(msgspec.Struct, frozen=True, kw_only=True):
    """One scripted model reply."""

    text: str = ""
    reasoning: str = ""
    tool_calls: list[ScriptedCall] = msgspec.field(default_factory=list)
    pause: Path | None = None
    """The gate (a Unix socket) to wait at after the last delta, if any."""


_REPLY_KEYS = {"text", "tool_calls", "reasoning", "pause"}


def _parse_reply(path: Path, n: int, raw: Any) -> ScriptedReply:
    where = f"reply {n}"
    if not isinstance(raw, dict):
        raise ScriptError(path, f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = set(raw) - _REPLY_KEYS
    if unknown:
        raise ScriptError(path, f"{where}: unknown keys {sorted(map(str, unknown))}")
    if "text" not in raw and "tool_calls" not in raw:
        raise ScriptError(path, f"{where}: needs 'text' or 'tool_calls'")
    text = raw.get("text", "")
    reasoning = raw.get("reasoning", "")
    for key, value in (("text", text), ("reasoning", reasoning)):
        if not isinstance(value, str):
            raise ScriptError(path, f"{where}: '{key}' must be a string")
    calls_raw = raw.get("tool_calls", [])
    if not isinstance(calls_raw, list):
        raise ScriptError(path, f"{where}: 'tool_calls' must be a list")
    calls: list[ScriptedCall] = []
    for i, call in enumerate(calls_raw, start=1):
        cwhere = f"{where}, tool call {i}"
        if not isinstance(call, dict):
            raise ScriptError(path, f"{cwhere}: expected a mapping")
        unknown = set(call) - {"name", "arguments", "id"}
        if unknown:
            raise ScriptError(path, f"{cwhere}: unknown keys {sorted(map(str, unknown))}")
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise ScriptError(path, f"{cwhere}: 'name' must be a non-empty string")
        args = call.get("arguments", {})
        if isinstance(args, str):
            try:
                json.loads(args) if args.strip() else None
            except ValueError as exc:
                raise ScriptError(path, f"{cwhere}: 'arguments' is not valid JSON: {exc}") from None
            arguments = replace_lone_surrogates(args) if args.strip() else "{}"
        elif isinstance(args, dict):
            arguments = json.dumps(without_lone_surrogates(args), ensure_ascii=False)
        else:
            raise ScriptError(path, f"{cwhere}: 'arguments' must be an object or a JSON string")
        call_id = call.get("id")
        if call_id is not None and (not isinstance(call_id, str) or not call_id):
            raise ScriptError(path, f"{cwhere}: 'id' must be a non-empty string")
        calls.append(
            ScriptedCall(name=replace_lone_surrogates(name), arguments=arguments, call_id=call_id)
        )
    pause = raw.get("pause")
    if pause is not None and (not isinstance(pause, str) or not pause):
        raise ScriptError(path, f"{where}: 'pause' must be the path of a gate (a Unix socket)")
    # A YAML "\ud800" is a lone surrogate: replaced here, where the script's text enters.
    return ScriptedReply(
        text=replace_lone_surrogates(text),
        reasoning=replace_lone_surrogates(reasoning),
        tool_calls=calls,
        pause=path.parent / pause if pause is not None else None,
    )


def load_script(path: Path) -> list[ScriptedReply]:
    """Read and validate a script file.

    Args:
        path: a YAML or JSON file (JSON is read as YAML).

    Returns:
        The replies in order.

    Raises:
        ScriptError: the file is unreadable, not YAML/JSON, or malformed
            (the detail names the reply and field).
    """
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(path, f"cannot read script: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ScriptError(path, f"not valid YAML/JSON: {exc}") from None
    if isinstance(raw, dict) and set(raw) == {"replies"}:
        raw = raw["replies"]
    if not isinstance(raw, list):
        raise ScriptError(path, "expected a list of replies (or {replies: [...]})")
    return [_parse_reply(path, n, r) for n, r in enumerate(raw, start=1)]


def _pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into up to ``parts`` deterministic pieces at spaces."""
    if len(text) < 8:
        return [text] if text else []
    out: list[str] = []
    start = 0
    for k in range(1, parts):
        cut = text.find(" ", max(start, len(text) * k // parts))
        if cut == -1:
            break
        out.append(text[start : cut + 1])
        start = cut + 1
    out.append(text[start:])
    return [p for p in out if p]


class ScriptedProvider:
    """Plays a script file (see module docstring); label always says scripted.

    Args:
        script_path: the script file; read and validated at construction.
        model: the model name of the settings (not used to choose replies).

    Raises:
        ScriptError: the script is missing or malformed.
    """

    name = PROVIDER

    def __init__(self, script_path: Path, *, model: str = "scripted") -> None:
        self.script_path = script_path
        self.model = model
        self.replies = load_script(script_path)
        self.label = f"scripted (offline script {script_path})"

    def __repr__(self) -> str:
        return f"<ScriptedProvider {self.label}>"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """Play the next reply: the one after the assistant messages already sent.

        Yields:
            Reasoning and text deltas (a few pieces), ToolCallStarted per call,
            then StreamDone (finish ``tool_calls`` or ``stop``).

        Raises:
            ScriptError: the script has no reply left for this request.
        """
        n = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        if n >= len(self.replies):
            raise ScriptError(
                self.script_path,
                f"script exhausted: it has {len(self.replies)} replies and reply {n + 1} "
                "was requested",
            )
        reply = self.replies[n]
        for piece in _pieces(reply.reasoning):
            yield ReasoningDelta(text=piece)
        for piece in _pieces(reply.text):
            yield TextDelta(text=piece)
        calls = [
            ToolCall(call_id=c.call_id or f"call_{n + 1}_{i}", name=c.name, arguments=c.arguments)
            for i, c in enumerate(reply.tool_calls, start=1)
        ]
        for call in calls:
            yield ToolCallStarted(call_id=call.call_id, name=call.name)
        if reply.pause is not None:
            await self._pause(n + 1, reply.pause)
        prompt_chars = len(request.system) + sum(
            len(msgspec.json.encode(m)) for m in request.messages
        )
        output_chars = len(reply.text) + sum(len(c.arguments) for c in calls)
        yield StreamDone(
            text=reply.text,
            reasoning=reply.reasoning,
            tool_calls=calls,
            finish="tool_calls" if calls else "stop",
            usage=Usage(input_tokens=prompt_chars // 4, output_tokens=output_chars // 4),
        )

    async def _pause(self, reply: int, gate: Path) -> None:
        """Wait at ``gate`` until the test releases it (see the module doc).

        Raises:
            ScriptError: nothing listens at ``gate``.
        """
        try:
            stream = await anyio.connect_unix(gate)
        except OSError as exc:
            raise ScriptError(
                self.script_path,
                f"reply {reply}: pause: cannot reach the gate {gate}: {exc.strerror or exc}",
            ) from None
        async with stream:
            with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                await stream.receive(1)

    async def aclose(self) -> None:
        """Nothing to release."""
