"""A message bigger than the window, and windows the server states wrongly
(docs/design/context.md §5), against the loopback fake model
(tests/support/fake_model.py) with a model name mind's built-in table does
not know and no ``model_context_window``: the window is learned from the
server's first ``context_length`` error.

- A refused oversized message never bricks the session: the next turn's
  compaction (and ``/compact``) cut it to its head and tail, so "hi" works.
- A message that alone cannot fit fails at once, with history too, without
  a useless summary.
- A stated window not below the refused request's size is not the limit.
- A round-limit failure carries no error an earlier rebuild recovered.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import mind
from mind.context.compaction import compacted_view
from mind.context.tool_output import DEFAULT_LIMITS, limits_for_window
from mind.conversation import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.compaction import _size, fit_to_window, left_out_note
from mind.shell.event_text import describe_compaction, describe_context
from tests.support.fake_model import EFFECTS_FILE, FakeModel, tokens_of

WINDOW = 2_000
"""The fake server's window, tokens (8,000 bytes of request body)."""

TOO_BIG = "word " * 1_800
"""A prompt of 9,000 bytes: over the window with nothing else in the request."""

ALONE = "The message itself is too big for the model's context window of 2,000 tokens"


def _config(model: FakeModel, tmp_path: Path, **env: str) -> mind.ResolvedConfig:
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model="local-model",  # not in the built-in table; no model_context_window
        approval="never",
        env={"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "0", **env},
    )


async def _turns(
    config: mind.ResolvedConfig, tmp_path: Path, prompts: list[str], *, compact: bool = False
) -> tuple[list[ev.Event], list[mind.TurnOutcome], list[jr.JournalRecord], list[str]]:
    """Run ``prompts`` as turns of one session; ``compact``: ``/compact``
    between the first two. Returns events, outcomes, records, and the
    session's ``/status`` context line after each turn."""
    events: list[ev.Event] = []
    outcomes: list[mind.TurnOutcome] = []
    status: list[str] = []
    async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
        s = await rt.create_session(cwd=tmp_path, config=config)
        for i, prompt in enumerate(prompts):
            turn = s.submit(prompt)
            async for e in turn:
                events.append(e)
            outcomes.append(turn.outcome)
            status.append(describe_context(s.context_usage))
            if compact and i == 0:
                done = await s.compact()
                assert done.completed, done
        return events, outcomes, s.history(), status


def _user_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m.get("role") == "user"]


def test_after_a_refused_oversized_prompt_the_next_turn_compacts_it_and_answers(
    tmp_path: Path,
) -> None:
    with FakeModel(context_window=WINDOW) as model:
        _events, outcomes, records, status = anyio.run(
            _turns, _config(model, tmp_path), tmp_path, [TOO_BIG, "hi"]
        )
        last = model.requests[-1]
    first, second = outcomes
    assert first.event.status == ev.TurnStatus.failed
    assert second.event.status == ev.TurnStatus.completed, second
    # A request was sent and refused: /status does not say nothing was sent.
    assert "nothing sent yet" not in status[0], status
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert done.summary
    # What the model sees of the refused message: its head and tail, cut.
    big, hi = _user_texts(last)[-2:]
    assert hi == "hi"
    assert big.startswith("word word") and len(big) < len(TOO_BIG) // 2
    assert "cut from the middle of this message" in big
    # The summary says it was refused and not answered.
    assert "too big" in done.summary and "not answered" in done.summary, done.summary
    assert tokens_of(len(model.raw_requests[-1])) <= WINDOW


def test_compact_cuts_a_refused_oversized_prompt(tmp_path: Path) -> None:
    with FakeModel(context_window=WINDOW) as model:
        _events, outcomes, records, _status = anyio.run(
            lambda: _turns(_config(model, tmp_path), tmp_path, [TOO_BIG, "hi"], compact=True)
        )
    assert [o.event.status for o in outcomes] == [ev.TurnStatus.failed, ev.TurnStatus.completed]
    (started,) = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert started.trigger == jr.CompactionTrigger.manual
    seen = [r for r in compacted_view(records).records if isinstance(r, jr.UserMessage)]
    assert len(seen[0].text) < len(TOO_BIG) // 2


@pytest.mark.parametrize("known", [False, True], ids=["learned", "configured"])
def test_a_message_too_big_with_history_fails_at_once_without_a_summary(
    tmp_path: Path, known: bool
) -> None:
    # Learned: the overflow teaches the window; configured: the window is
    # known before, and the projection passes the automatic threshold.
    history = ["one " * 50, "two " * 50]
    env = {"MIND_MODEL_CONTEXT_WINDOW": str(WINDOW)} if known else {}
    with FakeModel(context_window=WINDOW) as model:
        _events, outcomes, records, _status = anyio.run(
            _turns, _config(model, tmp_path, **env), tmp_path, [*history, TOO_BIG]
        )
        summaries = [b for b in model.requests if "tools" not in b]
    assert [o.event.status for o in outcomes[:2]] == [ev.TurnStatus.completed] * 2
    failure = outcomes[2].event.failure
    assert failure is not None and failure.kind == ev.FailureKind.context_length
    assert ALONE in " ".join(failure.message.split()), failure.message
    assert "/compact" not in failure.message
    assert not summaries
    assert not any(isinstance(r, jr.CompactionStarted) for r in records)


BIG = "echo {call_id} >> {effects}; printf '%032000d' 0"
"""A command printing 32,000 bytes: a result over a 6,000-token window."""


def test_a_stated_window_not_below_the_refused_request_is_learned_as_its_size(
    tmp_path: Path,
) -> None:
    # The server refuses ~8.2k tokens at 6,000 but states 32,768.
    with FakeModel(context_window=6_000, command=BIG, stated_windows=(32_768,)) as model:
        _events, (outcome,), records, _status = anyio.run(
            _turns,
            _config(model, tmp_path, MIND_AUTO_COMPACT_PERCENT="0"),
            tmp_path,
            ["TOOL make"],
        )
    assert outcome.event.status == ev.TurnStatus.completed, outcome
    assert (tmp_path / EFFECTS_FILE).read_text().count("\n") == 1
    (learned,) = [r for r in records if isinstance(r, jr.ContextWindowLearned)]
    assert learned.window < 32_768


def test_a_round_limit_failure_carries_no_recovered_error(tmp_path: Path) -> None:
    async def run() -> tuple[mind.TurnOutcome, str]:
        config = _config(model, tmp_path, MIND_MAX_ROUNDS="3", MIND_AUTO_COMPACT_PERCENT="0")
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            turn = s.submit("TOOLS=6 go")
            async for _ in turn:
                pass
            return turn.outcome, turn.failure_detail

    with FakeModel(context_window=6_000, command=BIG) as model:
        outcome, detail = anyio.run(run)
        refused = [r for r in model.raw_requests if tokens_of(len(r)) > 6_000]
    assert refused  # round 2 overflowed once and was rebuilt
    failure = outcome.event.failure
    assert failure is not None and failure.kind == ev.FailureKind.round_limit
    assert "maximum context length" not in detail, detail


MID = "echo {call_id} >> {effects}; printf '%02000d' 0"
"""A command printing 2,000 bytes: twenty results pass a 2,000-token window
even at the old results' 512 bytes each."""


def test_a_summary_is_fitted_to_the_learned_window_and_says_what_it_left_out(
    tmp_path: Path,
) -> None:
    # Four turns of five calls while the server enforces no window, then it
    # enforces 2,000 tokens: the fifth turn overflows, learns it, compacts.
    compacted: list[ev.ContextCompactedEvent] = []

    async def run() -> tuple[list[mind.TurnOutcome], list[jr.JournalRecord]]:
        config = _config(model, tmp_path, MIND_AUTO_COMPACT_PERCENT="0")
        outcomes = []
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            for i in range(1, 6):
                if i == 5:
                    model.context_window = WINDOW
                turn = s.submit(f"TOOLS=5 m{i}" if i < 5 else "TOOL m5")
                async for event in turn:
                    if isinstance(event, ev.ContextCompactedEvent):
                        compacted.append(event)
                outcomes.append(turn.outcome)
            return outcomes, s.history()

    with FakeModel(command=MID) as model:
        outcomes, records = anyio.run(run)
        summaries = [
            (b, raw)
            for b, raw in zip(model.requests, model.raw_requests, strict=True)
            if "tools" not in b
        ]
    assert [o.event.status for o in outcomes] == [ev.TurnStatus.completed] * 5, outcomes[-1]
    # One summarisation request, fitted: none refused, none sent twice.
    ((body, raw),) = summaries
    assert tokens_of(len(raw)) <= WINDOW
    first = str(body["messages"][1]["content"])  # after the system message
    assert "oldest" in first and "left out" in first, first
    # What was left out is said in the summary the model goes on from.
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert done.summary.startswith("[The ") and "left out" in done.summary
    # And to the person: a fact on the record and the event, in the line
    # the REPL and `mind exec` show.
    assert isinstance(done.left_out, int) and done.left_out >= 1
    (event,) = compacted
    assert event.left_out == done.left_out
    assert done.summary.startswith(f"[The {done.left_out} oldest")
    assert describe_compaction(event).endswith(
        f"; the {done.left_out} oldest messages or rounds were left out of the summary"
    )


def test_fit_to_window_cuts_the_oldest_texts_before_it_leaves_any_item_out() -> None:
    call = ToolCall(call_id="c1", name="shell", arguments="{}")
    messages = [
        UserMessage(text="a" * 6_000),
        AssistantMessage(text="", tool_calls=[call]),
        ToolResultMessage(call_id="c1", output="b" * 6_000),
        UserMessage(text="newest"),
    ]
    limits = limits_for_window(DEFAULT_LIMITS, WINDOW)
    assert fit_to_window(messages, None, limits) == (messages, 0)  # unknown: unchanged
    fitted, dropped = fit_to_window(messages, WINDOW, limits)
    assert dropped == 0 and len(fitted) == 4 and fitted[-1] == messages[-1]
    assert _size(fitted) <= WINDOW * 3 // 4 * 4
    # A window too small for even the cut items: whole oldest items go, said.
    fitted, dropped = fit_to_window(messages, 300, limits_for_window(DEFAULT_LIMITS, 300))
    assert dropped >= 1 and fitted[-1] == messages[-1]
    assert left_out_note(dropped).startswith(f"[The {dropped} oldest")
