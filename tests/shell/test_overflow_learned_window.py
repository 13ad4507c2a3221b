"""An overflow inside a turn keeps what the turn already ran (docs/design/context.md §5).

Against the loopback fake model (tests/support/fake_model.py) with a model
name mind's built-in table does not know and no ``model_context_window``:
the window becomes known only from the server's first ``context_length``
error. The request is then built again with that window's tool-output
budgets before anything is compacted; a compaction inside a turn never
summarises the turn's latest round and its results, so a command (each run
appends a line to ``effects.log``) is never run again because of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support.fake_model import EFFECTS_FILE, FakeModel, context_length_body, tokens_of
from tests.support.replay_server import ReplayServer, Reply

WINDOW = 6_000
"""The fake server's window, tokens (24,000 bytes of request body)."""

BIG = "echo {call_id} >> {effects}; printf '%032000d' 0"
"""A command printing 32,000 bytes (the tool runner's own stop): a result that
alone passes the window with the unknown window's 32 KiB budget."""


def _config(model: FakeModel, tmp_path: Path) -> mind.ResolvedConfig:
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model="local-model",  # not in the built-in table; no model_context_window
        approval="never",
        env={"MIND_HOME": str(tmp_path / "home"), "MIND_AUTO_COMPACT_PERCENT": "0"},
    )


async def _turns(
    config: mind.ResolvedConfig, tmp_path: Path, prompts: list[str]
) -> tuple[list[ev.Event], list[mind.TurnOutcome], list[jr.JournalRecord]]:
    events: list[ev.Event] = []
    outcomes: list[mind.TurnOutcome] = []
    async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
        s = await rt.create_session(cwd=tmp_path, config=config)
        for prompt in prompts:
            turn = s.submit(prompt)
            async for e in turn:
                events.append(e)
            outcomes.append(turn.outcome)
        return events, outcomes, s.history()


def _tool_outputs(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _effects(tmp_path: Path) -> list[str]:
    path = tmp_path / EFFECTS_FILE
    return path.read_text().split() if path.exists() else []


def test_a_first_overflow_that_teaches_the_window_rebuilds_the_request_and_runs_the_tool_once(
    tmp_path: Path,
) -> None:
    with FakeModel(context_window=WINDOW, command=BIG) as model:
        events, (outcome,), records = anyio.run(
            _turns, _config(model, tmp_path), tmp_path, ["TOOL make"]
        )
        bodies = list(zip(model.requests, model.raw_requests, strict=True))
    assert outcome.event.status == ev.TurnStatus.completed, outcome
    assert len(_effects(tmp_path)) == 1  # the command ran exactly once
    # call; the 32 KB result overflows; the same round rebuilt fits and answers.
    assert len(bodies) == 3 and all("tools" in b for b, _ in bodies)
    overflowed, rebuilt = bodies[1], bodies[2]
    assert tokens_of(len(overflowed[1])) > WINDOW >= tokens_of(len(rebuilt[1]))
    (whole,) = _tool_outputs(overflowed[0])
    (scaled,) = _tool_outputs(rebuilt[0])
    assert len(whole) >= 32_000 > WINDOW >= len(scaled.encode())  # a quarter of the window
    assert rebuilt[0]["messages"][:-1] == overflowed[0]["messages"][:-1]  # the same call
    learned = [r for r in records if isinstance(r, jr.ContextWindowLearned)]
    assert [r.window for r in learned] == [WINDOW]
    assert not any(isinstance(r, jr.CompactionStarted) for r in records)
    assert not any(isinstance(e, ev.ContextCompactingEvent) for e in events)


def test_an_overflow_compaction_in_a_first_turn_keeps_its_latest_round_verbatim(
    tmp_path: Path,
) -> None:
    # Two rounds of calls, then the third request overflows (the window is
    # not stated: nothing to rebuild for); the cut must leave round 2 whole.
    with FakeModel(command=BIG, overflow_next=1, overflow_skip=2) as model:
        _events, (outcome,), records = anyio.run(
            _turns, _config(model, tmp_path), tmp_path, ["TOOLS=2 go"]
        )
        bodies = list(model.requests)
    assert outcome.event.status == ev.TurnStatus.completed, outcome
    rounds = [r for r in records if isinstance(r, jr.ModelRound)]
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    (started,) = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert started.trigger == jr.CompactionTrigger.overflow
    latest_call = rounds[1].tool_calls[0]
    assert started.through_seq < rounds[1].seq  # cut before the latest round
    after = bodies[bodies.index(next(b for b in bodies if "tools" not in b)) + 1]
    calls = [
        (c["id"], json.loads(c["function"]["arguments"]))
        for m in after["messages"]
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
    ]
    # The summary replaced round 1; round 2's call is there, as the model made it.
    assert calls == [(latest_call.call_id, json.loads(latest_call.arguments))]
    answer = next(m for m in after["messages"] if m.get("tool_call_id") == latest_call.call_id)
    assert answer["content"] == next(r.output for r in results if r.call_id == latest_call.call_id)


def test_an_overflow_with_only_the_latest_round_to_compact_fails_and_keeps_it(
    tmp_path: Path,
) -> None:
    # One round with its result, and the next request overflows: the turn
    # fails (nothing to compact) rather than summarise what it just ran.
    with FakeModel(command=BIG, overflow_next=1, overflow_skip=1) as model:
        _events, (outcome,), records = anyio.run(
            _turns, _config(model, tmp_path), tmp_path, ["TOOL once"]
        )
    assert outcome.event.status == ev.TurnStatus.failed
    assert outcome.event.failure is not None
    assert outcome.event.failure.kind == ev.FailureKind.context_length
    assert not any(isinstance(r, jr.CompactionStarted) for r in records)
    assert len(_effects(tmp_path)) == 1


def test_the_compacted_sizes_bracket_the_request_that_overflowed(tmp_path: Path) -> None:
    # A first turn leaves work to compact. The second turn's request
    # overflows stating a window, is rebuilt with its budgets, and overflows
    # again stating a smaller one (already rebuilt: it compacts). The sizes
    # are those of the request refused and of the one built from the summary,
    # not a projection made with the smaller window's budgets.
    small = "echo {call_id} >> {effects}; printf '%06000d' 0"
    with FakeModel(command=small, stated_windows=(4 * WINDOW, WINDOW)) as model:
        config = _config(model, tmp_path)

        async def main() -> list[ev.Event]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                await s.run("TOOL first")
                model.command = BIG
                model.overflow_skip, model.overflow_next = 1, 2
                turn = s.submit("TOOL second")
                events = [e async for e in turn]
                assert turn.outcome.event.status == ev.TurnStatus.completed, turn.outcome
                return events

        events = anyio.run(main)
        raws = list(model.raw_requests)
        bodies = list(model.requests)
    (done,) = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    summary_at = next(i for i, b in enumerate(bodies) if "tools" not in b)
    overflowed = tokens_of(len(raws[summary_at - 1]))  # the rebuilt request, refused
    after = tokens_of(len(raws[summary_at + 1]))  # the request built from the summary
    assert isinstance(done.before_tokens, int) and isinstance(done.after_tokens, int)
    assert abs(done.before_tokens - overflowed) <= overflowed * 0.1, (done, overflowed)
    assert abs(done.after_tokens - after) <= after * 0.1, (done, after)
    assert len(_effects(tmp_path)) == 2


def _sse_text(text: str) -> bytes:
    chunks: list[dict[str, object]] = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def test_before_tokens_are_never_below_the_size_the_server_stated(tmp_path: Path) -> None:
    # The server counts the refused request at 50,000 tokens (its tokenizer,
    # not mind's 4 bytes per token): the compaction says so.
    stated = 50_000
    refused = Reply(
        status=400,
        content_type="application/json",
        body=json.dumps(context_length_body(WINDOW, stated)).encode(),
    )
    replies = [
        Reply(body=_sse_text("a first answer")),
        refused,
        Reply(body=_sse_text("asked twice")),  # the summary
        Reply(body=_sse_text("the second answer")),
    ]
    with ReplayServer(replies) as server:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=server.url + "/v1",
            model="local-model",
            approval="never",
            env={"MIND_HOME": str(tmp_path / "home"), "MIND_AUTO_COMPACT_PERCENT": "0"},
        )
        events, outcomes, _records = anyio.run(
            _turns, config, tmp_path, ["a first question, long enough to summarise", "again"]
        )
    assert [o.event.status for o in outcomes] == [ev.TurnStatus.completed] * 2, outcomes
    (done,) = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    assert isinstance(done.before_tokens, int) and done.before_tokens >= stated
