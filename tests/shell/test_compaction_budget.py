"""Long sessions against a small-window loopback model stay within it
(docs/design/context.md §3, §5): the kept user messages share one budget,
a compaction that would not fit keeps fewer, and tool output the model sees
scales down with a known window."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support.fake_model import FakeModel, tokens_of

WINDOW = 8_192
"""The fake server's window in tokens, also configured (``model_context_window``)."""


def _config(model: FakeModel, tmp_path: Path) -> mind.ResolvedConfig:
    env = {"MIND_HOME": str(tmp_path / "home"), "MIND_MODEL_CONTEXT_WINDOW": str(WINDOW)}
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model="local-model",
        approval="never",
        env=env,
    )


def _run(model: FakeModel, tmp_path: Path, prompts: list[str]) -> list[jr.JournalRecord]:
    config = _config(model, tmp_path)

    async def main() -> list[jr.JournalRecord]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            for i, prompt in enumerate(prompts):
                turn = s.submit(prompt)
                async for _ in turn:
                    pass
                assert turn.outcome.event.status == ev.TurnStatus.completed, (i, turn.outcome)
            return list(s.journal.records)

    return anyio.run(main)


@pytest.mark.parametrize("turns", [40, 300])
def test_a_long_session_of_long_prompts_completes_every_turn_under_the_window(
    tmp_path: Path, turns: int
) -> None:
    """~1.5 KB prompts: the kept user messages compete for a tenth of the
    window, so every compaction leaves room and no turn fails."""
    prompts = [f"prompt {i} " + "x" * 1_500 for i in range(turns)]
    with FakeModel(context_window=WINDOW) as model:
        records = _run(model, tmp_path, prompts)
        sizes = [tokens_of(len(raw)) for raw in model.raw_requests]
    assert max(sizes) <= WINDOW, max(sizes)
    done = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert done, "the session never compacted"
    budget = WINDOW // 10
    for record in done:
        kept = [r for r in records if isinstance(r, jr.UserMessage) and r.seq in record.kept]
        assert len(record.kept) <= 2, record.kept
        assert sum(tokens_of(len(r.text.encode())) for r in kept[1:]) <= budget
        assert record.after_tokens is not None and record.after_tokens < WINDOW * 0.9


def test_one_tool_result_bigger_than_the_window_is_cut_to_fit_it(tmp_path: Path) -> None:
    """``seq 1 200000`` (~1.3 MB) in an 8k window: the model sees a result cut
    to a quarter of the window, so the turn completes with no overflow."""
    with FakeModel(context_window=WINDOW, command="seq 1 200000") as model:
        records = _run(model, tmp_path, ["TOOL count", "and now?", "TOOL again"])
        sizes = [tokens_of(len(raw)) for raw in model.raw_requests]
    assert max(sizes) <= WINDOW, sizes
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    # The journal keeps what the tool runner gave; the model saw it cut.
    assert results and all(len(r.output) > WINDOW for r in results)


def test_a_failed_compaction_inside_a_turn_is_an_event_and_the_failure_says_what_to_do(
    tmp_path: Path,
) -> None:
    """An empty summary: ``context.compacting`` then ``context.compaction_failed``
    with the reason, and the turn's failure names the way on."""
    with FakeModel(context_window=WINDOW, summary_text="") as model:
        config = _config(model, tmp_path)

        async def main() -> tuple[list[ev.Event], ev.TurnCompletedEvent, str]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                first = s.submit("TOOL look")
                async for _ in first:
                    pass
                assert first.outcome.event.status == ev.TurnStatus.completed
                model.overflow_next = 1
                turn = s.submit("and now")
                events = [e async for e in turn]
                return events, turn.outcome.event, s.session_id

        events, end, end_sid = anyio.run(main)
    started = [e for e in events if isinstance(e, ev.ContextCompactingEvent)]
    failed = [e for e in events if isinstance(e, ev.ContextCompactionFailedEvent)]
    assert len(started) == 1 and started[0].trigger == ev.CompactionTrigger.overflow
    assert len(failed) == 1, events
    assert failed[0].reason == "the summary was empty"
    assert failed[0].compaction_id == started[0].compaction_id
    assert end.status == ev.TurnStatus.failed
    assert end.failure is not None
    assert "the summary was empty" in end.failure.message
    # A library session has no slash commands: the REPL to resume it in, or a new one.
    assert f"`mind resume {end_sid}`, then /compact" in end.failure.message
    assert "/new" not in end.failure.message


def test_a_compaction_that_would_not_fit_under_the_threshold_keeps_fewer_messages(
    tmp_path: Path,
) -> None:
    """At 25% of 8k (2048 tokens) two kept 1.5 KB prompts leave the context
    over the threshold (it would compact again at once); keeping fewer, down
    to the newest alone, brings every compaction's result under it."""
    prompts = [f"prompt {i} " + "x" * 1_500 for i in range(12)]
    with FakeModel(context_window=WINDOW) as model:
        env = {
            "MIND_HOME": str(tmp_path / "home"),
            "MIND_MODEL_CONTEXT_WINDOW": str(WINDOW),
            "MIND_AUTO_COMPACT_PERCENT": "25",
        }
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="local-model",
            approval="never",
            env=env,
        )

        async def main() -> list[ev.Event]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                events: list[ev.Event] = []
                for prompt in prompts:
                    turn = s.submit(prompt)
                    events.extend([e async for e in turn])
                    assert turn.outcome.event.status == ev.TurnStatus.completed
                return events

        events = anyio.run(main)
    compacted = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    assert compacted
    threshold = WINDOW * 25 // 100
    assert all(isinstance(e.after_tokens, int) and e.after_tokens < threshold for e in compacted), [
        e.after_tokens for e in compacted
    ]


def test_a_kept_message_alone_over_the_budget_is_cut_head_and_tail_with_a_note(
    tmp_path: Path,
) -> None:
    """The newest message before the cut is always kept; alone over a tenth
    of the window (819 tokens) the model sees its start and end and a note."""
    big = "START " + "y" * 6_000 + " END"
    with FakeModel(context_window=WINDOW) as model:
        config = _config(model, tmp_path)

        async def main() -> None:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                for prompt in ["TOOL look", big]:
                    turn = s.submit(prompt)
                    async for _ in turn:
                        pass
                outcome = await s.compact()
                assert outcome.completed, outcome
                turn = s.submit("next")
                async for _ in turn:
                    pass
                assert turn.outcome.event.status == ev.TurnStatus.completed

        anyio.run(main)
        last = model.requests[-1]
    texts = [m["content"] for m in last["messages"] if m["role"] == "user"]
    (kept,) = [t for t in texts if "START" in t]
    assert kept.startswith("START ") and kept.endswith(" END")
    assert "cut from the middle of this message" in kept
    assert len(kept.encode()) <= (WINDOW // 10) * 4
