"""``Session.context_usage``, the library's view of the context-usage fact
(docs/design/context.md §1), over real loopback HTTP: the counts a server
reported, the window, the projection; the same after the session is reopened
by another runtime; nothing invented when nothing is known."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

import mind
from mind.context.usage import ContextUsage
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support.replay_server import ReplayServer, Reply


def _sse(usage: dict[str, object] | None) -> bytes:
    chunks: list[dict[str, object]] = [
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage is not None:
        chunks.append({"choices": [], "usage": usage})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


REPORTED = {
    "prompt_tokens": 3000,
    "completion_tokens": 200,
    "prompt_tokens_details": {"cached_tokens": 2048},
}


def _config(base_url: str, model: str) -> mind.ResolvedConfig:
    return mind.resolve_config(
        provider="openai-chat",
        model=model,
        base_url=base_url,
        approval="never",
        env={"OPENAI_API_KEY": "sk-test", "MIND_MAX_RETRIES": "0"},
    )


async def _turn_then_reopen(
    state: Path, cwd: Path, config: mind.ResolvedConfig
) -> tuple[ContextUsage, list[ev.Event], ContextUsage, ContextUsage]:
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.create_session(cwd=cwd, config=config)
        before = session.context_usage
        session.send("hello")
        events = [e async for e in session.events()]
        after = session.context_usage
        sid = session.session_id
    async with mind.Runtime.open(state_root=state) as rt:
        reopened = await rt.open_session(sid, config=config)
        return before, events, after, reopened.context_usage


def test_the_fact_after_a_round_and_after_a_reopen(tmp_path: Path) -> None:
    with ReplayServer([Reply(body=_sse(REPORTED))]) as server:
        before, events, after, reopened = anyio.run(
            _turn_then_reopen, tmp_path / "state", tmp_path, _config(server.url + "/v1", "gpt-4o")
        )
    assert before == ContextUsage(window=128_000)  # no request yet: no counts
    assert after == ContextUsage(
        input_tokens=3000,
        output_tokens=200,
        cache_read_tokens=2048,
        window=128_000,
        projected_tokens=3200,
        basis="reported",
    )
    assert after.percent == 2
    assert reopened == after  # from the journal alone
    published = [e for e in events if isinstance(e, ev.ContextUsageEvent)]
    assert [
        (e.input_tokens, e.cache_read_tokens, e.window, e.projected_tokens) for e in published
    ] == [(3000, 2048, 128_000, 3200)]


def test_nothing_reported_and_no_known_window_is_all_unknown(tmp_path: Path) -> None:
    with ReplayServer([Reply(body=_sse(None))]) as server:
        _, events, after, reopened = anyio.run(
            _turn_then_reopen, tmp_path / "state", tmp_path, _config(server.url + "/v1", "local")
        )
    assert after == reopened == ContextUsage(basis="unreported")
    assert after.percent is None
    done = next(e for e in events if isinstance(e, ev.TurnCompletedEvent))
    assert done.usage == ev.Usage()  # unknown, not 0 in · 0 out


OVERFLOW = Reply(
    status=400,
    content_type="application/json",
    body=json.dumps(
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, your "
                "messages resulted in 9000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        }
    ).encode(),
)


async def _two_failed_turns(state: Path, cwd: Path, config: mind.ResolvedConfig) -> ContextUsage:
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.create_session(cwd=cwd, config=config)
        for text in ("one", "two"):
            outcome = await session.submit(text).wait()
            assert outcome.event.failure is not None
            assert outcome.event.failure.kind == ev.FailureKind.context_length
        learned = [r for r in session.history() if isinstance(r, jr.ContextWindowLearned)]
        assert [(r.model, r.window) for r in learned] == [("local", 8192)]  # once, not per error
        return session.context_usage


def test_a_window_stated_again_is_journaled_once(tmp_path: Path) -> None:
    with ReplayServer([OVERFLOW, OVERFLOW]) as server:
        usage = anyio.run(
            _two_failed_turns, tmp_path / "state", tmp_path, _config(server.url + "/v1", "local")
        )
    # Sent and refused, nothing reported: not "nothing sent yet".
    assert usage == ContextUsage(window=8192, basis="refused")
