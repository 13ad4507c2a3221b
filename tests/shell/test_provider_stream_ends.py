"""How a model stream's end is read (docs/design/providers.md §4, §9), over
real loopback HTTP with recorded-style chunks: a round cut at the output
token limit warns, content after a finish reason is not part of the answer,
and a data event that is not JSON is a deterministic ``protocol`` failure
that is never retried."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest

import mind
from mind.conversation import ModelRequest, StreamDone, UserMessage
from mind.errors import ProviderError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.providers import ProviderSettings, make_provider
from tests.support.replay_server import ReplayServer, Reply


def _sse(*events: object) -> bytes:
    return b"".join(
        (e if isinstance(e, bytes) else f"data: {json.dumps(e)}\n\n".encode()) for e in events
    )


def _chunk(content: str | None = None, finish: str | None = None) -> dict[str, object]:
    delta = {} if content is None else {"content": content}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


CUT_AT_LIMIT = _sse(_chunk("Partial ans"), _chunk(finish="length"), b"data: [DONE]\n\n")
GOOD = _sse(_chunk("fine"), _chunk(finish="stop"), b"data: [DONE]\n\n")


def _config(base_url: str) -> mind.ResolvedConfig:
    return mind.resolve_config(
        provider="openai-chat",
        model="m",
        base_url=base_url,
        approval="never",
        env={"OPENAI_API_KEY": "sk-test", "MIND_MAX_RETRIES": "2"},
    )


async def _one_turn(
    state: Path, cwd: Path, base_url: str
) -> tuple[list[ev.Event], mind.TurnOutcome, list[jr.JournalRecord]]:
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.create_session(cwd=cwd, config=_config(base_url))
        turn = session.submit("hello")
        events = [e async for e in turn]
        return events, turn.outcome, session.history()


def test_a_round_cut_at_the_output_token_limit_warns_and_is_journaled(tmp_path: Path) -> None:
    with ReplayServer([Reply(body=CUT_AT_LIMIT, splits=[7, 40])]) as server:
        events, outcome, records = anyio.run(
            _one_turn, tmp_path / "state", tmp_path, server.url + "/v1"
        )
    warnings = [e for e in events if isinstance(e, ev.TurnWarningEvent)]
    assert [(w.kind, w.turn_id) for w in warnings] == [
        (ev.WarningKind.output_truncated, outcome.event.turn_id)
    ]
    assert "output token limit" in warnings[0].message
    assert (outcome.status, outcome.final_text) == ("completed", "Partial ans")
    rounds = [r for r in records if isinstance(r, jr.ModelRound)]
    assert [(r.finish, r.text) for r in rounds] == [("length", "Partial ans")]
    # The warning comes after the text it is about, before the turn ends.
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("MessageCompletedEvent") < kinds.index("TurnWarningEvent")
    assert kinds[-1] == "TurnCompletedEvent"


def test_a_whole_answer_gives_no_warning(tmp_path: Path) -> None:
    with ReplayServer([Reply(body=GOOD)]) as server:
        events, outcome, _ = anyio.run(_one_turn, tmp_path / "state", tmp_path, server.url + "/v1")
    assert outcome.status == "completed"
    assert not [e for e in events if isinstance(e, ev.TurnWarningEvent)]


async def _stream(kind: str, base_url: str) -> StreamDone:
    provider = make_provider(
        ProviderSettings(kind=kind, model="m", base_url=base_url, api_key="sk-k")  # type: ignore[arg-type]
    )
    try:
        done = None
        async for item in provider.stream(
            ModelRequest(model="m", system="", messages=[UserMessage(text="hi")])
        ):
            if isinstance(item, StreamDone):
                done = item
        assert done is not None
        return done
    finally:
        await provider.aclose()


def test_content_after_a_finish_reason_is_ignored_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The answer ends at its finish reason: a later chunk's text (a server
    repeating its tail, say) is not appended; the log says what was dropped.
    A later usage chunk is still read."""
    body = _sse(
        _chunk("Hello"),
        _chunk(finish="stop"),
        _chunk(" world again"),
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
        b"data: [DONE]\n\n",
    )
    with (
        ReplayServer([Reply(body=body)]) as server,
        caplog.at_level(logging.WARNING, logger="mind.providers"),
    ):
        done = anyio.run(_stream, "openai-chat", server.url + "/v1")
    assert (done.text, done.finish) == ("Hello", "stop")
    assert (done.usage.input_tokens, done.usage.output_tokens) == (3, 2)
    assert "after finish_reason" in caplog.text and "12 characters" in caplog.text


@pytest.mark.parametrize(
    ("kind", "path", "body"),
    [
        ("openai-chat", "/v1", b'data: {"choices": [\n\ndata: [DONE]\n\n'),
        (
            "anthropic",
            "",
            b'event: message_start\ndata: {"type":"message_start","message":{"usage":{}}}\n\n'
            b"event: content_block_delta\ndata: {not json}\n\n"
            b'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        ),
        (
            "openai-responses",
            "/v1",
            b'data: {"type":"response.created","response":{}}\n\ndata: {oops\n\n'
            b'data: {"type":"response.completed","response":{"status":"completed"}}\n\n',
        ),
    ],
    ids=["chat", "anthropic", "responses"],
)
def test_a_data_event_that_is_not_json_is_a_protocol_failure(
    kind: str, path: str, body: bytes
) -> None:
    with ReplayServer([Reply(body=body)]) as server, pytest.raises(ProviderError) as failed:
        anyio.run(_stream, kind, server.url + path)
    assert (failed.value.kind, failed.value.transient) == ("protocol", False)
    assert "not JSON" in failed.value.detail


def test_a_turn_whose_stream_has_a_non_json_event_fails_protocol_without_a_retry(
    tmp_path: Path,
) -> None:
    broken = Reply(body=b'data: {"choices": [\n\n' + GOOD)
    with ReplayServer([broken, Reply(body=GOOD)]) as server:
        events, outcome, _ = anyio.run(_one_turn, tmp_path / "state", tmp_path, server.url + "/v1")
        sent = len(server.requests)
    assert outcome.status == "failed"
    assert outcome.event.failure is not None and outcome.event.failure.kind == "protocol"
    assert not [e for e in events if isinstance(e, ev.TurnRetryingEvent)]
    assert sent == 1
