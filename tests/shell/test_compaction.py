"""Compaction against a small-window loopback model (docs/design/context.md §5).

The fake server (tests/support/fake_model.py) has a small window, reports
usage as its body size in tokens and answers a request over the window with
OpenAI's ``context_length_exceeded`` body. A long session compacts on its
own; every request stays under the window and carries the latest user
message and every call/result pair whole; a forced overflow compacts and
sends the request once more.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support.fake_model import FakeModel, tokens_of, user_texts

WINDOW = 16_385
"""gpt-3.5-turbo's window (mind's built-in table knows it, so the session plans against it)."""

# Each tool call prints ~6 KB, so a few turns fill half the window.
COMMAND = "echo {call_id} >> {effects}; printf '%06000d' 0"


def _config(model: FakeModel, tmp_path: Path, percent: int = 50) -> mind.ResolvedConfig:
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model="gpt-3.5-turbo",
        approval="never",
        env={"MIND_HOME": str(tmp_path / "home"), "MIND_AUTO_COMPACT_PERCENT": str(percent)},
    )


def _pairs_whole(body: dict[str, Any]) -> bool:
    messages = body["messages"]
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            after = messages[i + 1 : i + 1 + len(ids)]
            if [a.get("tool_call_id") for a in after] != ids:
                return False
        if m.get("role") == "tool":
            prev = messages[i - 1]
            if prev.get("role") not in ("assistant", "tool"):
                return False
    return True


def test_a_long_session_compacts_itself_and_every_request_fits_the_window(
    tmp_path: Path,
) -> None:
    with FakeModel(context_window=WINDOW, command=COMMAND) as model:
        config = _config(model, tmp_path)

        async def main() -> tuple[list[ev.Event], list[str], list[jr.JournalRecord]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                events: list[ev.Event] = []
                finals: list[str] = []
                for i in range(8):
                    turn = s.submit(f"TOOL step {i}")
                    async for e in turn:
                        events.append(e)
                    assert turn.outcome.event.status == ev.TurnStatus.completed, turn.outcome
                    finals.append(turn.outcome.final_text)
                return events, finals, s.history()

        events, finals, records = anyio.run(main)
        bodies = list(zip(model.requests, model.raw_requests, strict=True))
    compacted = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    assert compacted, "the session never compacted"
    assert all(e.trigger == ev.CompactionTrigger.auto for e in compacted)
    assert all(
        isinstance(e.after_tokens, int) and e.after_tokens < e.before_tokens for e in compacted
    )  # type: ignore[operator]
    done = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert len(done) == len(compacted)
    # Every request fitted the window; turns' requests carry the turn's prompt
    # as their last user message and every call with its result.
    step = -1
    for body, raw in bodies:
        assert tokens_of(len(raw)) <= WINDOW
        if "tools" not in body:
            continue  # a summarisation request
        assert _pairs_whole(body)
        last = user_texts(body["messages"])[-1]
        assert last.startswith("TOOL step ")
        now = int(last.removeprefix("TOOL step "))
        assert now >= step
        step = now
    assert step == 7
    # The answer after a compaction still saw the latest prompt verbatim.
    assert finals[-1].endswith("TOOL step 7")
    # The journal keeps every original record.
    prompts = [r.text for r in records if isinstance(r, jr.UserMessage)]
    assert prompts == [f"TOOL step {i}" for i in range(8)]


def test_a_context_overflow_compacts_and_sends_the_request_once_more(tmp_path: Path) -> None:
    with FakeModel(command=COMMAND) as model:
        config = _config(model, tmp_path, percent=0)  # no automatic compaction

        async def main() -> tuple[list[ev.Event], list[jr.JournalRecord], ev.TurnStatus]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                await s.run("TOOL first")
                model.overflow_next = 1
                events: list[ev.Event] = []
                turn = s.submit("second")
                async for e in turn:
                    events.append(e)
                # A second overflow in the same round fails the turn as before.
                model.overflow_next = 2
                third = await s.run("third")
                return events, s.history(), third.event.status

        events, records, third = anyio.run(main)
    started = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert [r.trigger for r in started] == [jr.CompactionTrigger.overflow] * 2
    assert [e.trigger for e in events if isinstance(e, ev.ContextCompactedEvent)] == [
        ev.CompactionTrigger.overflow
    ]
    ends = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert [e.status for e in ends] == [jr.TurnStatus.completed] * 2 + [jr.TurnStatus.failed]
    assert third == ev.TurnStatus.failed
    failed = ends[-1].failure
    assert failed is not None and failed.kind == jr.FailureKind.context_length
