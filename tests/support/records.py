"""Journal records for tests that write a crashed session by hand: one
builder per record type, with the defaults those tests share (``seq`` and
``recorded_at_ms`` are set by ``Journal.append``)."""

from __future__ import annotations

from mind.generated import journal as jr


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


def model_round(
    turn_id: str, text: str, calls: list[jr.RecordedToolCall] | None = None, index: int = 0
) -> jr.ModelRound:
    """A finished round of ``turn_id``: its answer ``text`` and tool ``calls``."""
    return jr.ModelRound(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        round=index,
        text=text,
        reasoning="",
        tool_calls=list(calls or []),
        finish=jr.Finish.tool_calls if calls else jr.Finish.stop,
        usage=jr.Usage(input_tokens=1, output_tokens=1),
        provider="scripted",
        provider_items=[],
    )
