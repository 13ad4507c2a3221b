"""Journal records for tests that build journals or histories by hand: one
builder per record type, with the defaults those tests share (``seq`` and
``recorded_at_ms`` are 0: ``Journal.append`` sets them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mind.effects.retry import RetryPolicy
from mind.generated import journal as jr
from mind.machines.turn import TurnMachine


def turn_started(turn_id: str) -> jr.TurnStarted:
    """A scripted turn that records tool starts, approval ``never``."""
    return jr.TurnStarted(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        provider="scripted",
        model="m",
        approval=jr.Approval.never,
        tool_starts=True,
    )


def user_message(turn_id: str, message_id: str, text: str, kind: jr.Kind) -> jr.UserMessage:
    """One claimed input of ``turn_id``."""
    return jr.UserMessage(
        seq=0, recorded_at_ms=0, turn_id=turn_id, message_id=message_id, text=text, kind=kind
    )


def call(
    call_id: str,
    name: str = "shell",
    arguments: str = "{}",
    provider_fields: dict[str, object] | None = None,
) -> jr.RecordedToolCall:
    """One tool call as a ``model_round`` records it (raw argument text)."""
    if provider_fields is None:
        return jr.RecordedToolCall(call_id=call_id, name=name, arguments=arguments)
    return jr.RecordedToolCall(
        call_id=call_id, name=name, arguments=arguments, provider_fields=provider_fields
    )


def model_round(
    turn_id: str,
    text: str = "",
    calls: Sequence[jr.RecordedToolCall] | None = None,
    index: int = 0,
    *,
    provider: str = "scripted",
    usage: jr.Usage | None = None,
    items: Sequence[dict[str, Any]] = (),
    reasoning: str = "",
) -> jr.ModelRound:
    """A finished round ``index`` of ``turn_id``: its answer ``text`` and tool
    ``calls`` (finish ``tool_calls`` with calls, else ``stop``), its opaque
    provider ``items``; usage 1 in, 1 out unless given."""
    return jr.ModelRound(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        round=index,
        text=text,
        reasoning=reasoning,
        tool_calls=list(calls or []),
        finish=jr.Finish.tool_calls if calls else jr.Finish.stop,
        usage=usage if usage is not None else jr.Usage(input_tokens=1, output_tokens=1),
        provider=provider,
        provider_items=list(items),
    )


def tool_result(
    turn_id: str,
    call_id: str,
    name: str = "shell",
    output: str = "",
    status: jr.ToolStatus = jr.ToolStatus.ok,
) -> jr.ToolResult:
    """A real (not synthetic) result of ``call_id`` in ``turn_id``."""
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        call_id=call_id,
        name=name,
        status=status,
        output=output,
        synthetic=False,
    )


def tool_started(turn_id: str, call_id: str, name: str = "shell") -> jr.ToolStarted:
    """A start of ``call_id`` in ``turn_id`` recorded without an effect id
    (what a mind older than effects wrote)."""
    return jr.ToolStarted(seq=0, recorded_at_ms=0, turn_id=turn_id, call_id=call_id, name=name)


def tools_machine() -> TurnMachine:
    """A turn machine in its tool round (``running_tools.executing``), where
    a driver runs (or re-drives) calls: started, one round with tool calls."""
    machine = TurnMachine(retry=RetryPolicy())
    machine.start()
    machine.stream_opened()
    machine.round_done(tool_calls=1, output_bytes=10, output_limit=100)
    return machine
