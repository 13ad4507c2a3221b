"""The compaction view (mind.context.compaction) and its use in history.build_messages.

Property tests over random journals with compactions in them: no tool call
without its result, the newest user message always present, the records
never modified; a failed or unfinished compaction changes nothing.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mind.context.compaction import (
    KEPT_USER_TOKENS,
    SUMMARY_PREFIX,
    clean_through,
    compacted_view,
    kept_budget,
    kept_user_messages,
    newest_user_message,
)
from mind.context.usage import context_usage
from mind.conversation import AssistantMessage, Message, ToolResultMessage, UserMessage
from mind.generated import journal as jr
from mind.history import build_messages

USAGE = jr.Usage(input_tokens=0, output_tokens=0)


class _Journal:
    """Builds records with consecutive seqs (as the journal gives them)."""

    def __init__(self) -> None:
        self.records: list[jr.JournalRecord] = []
        self.n = 0

    def add(self, cls: Any, **fields: Any) -> Any:
        record = cls(seq=len(self.records), recorded_at_ms=0, **fields)
        self.records.append(record)
        return record

    def user(self, text: str, turn: str = "t1") -> jr.UserMessage:
        self.n += 1
        return self.add(
            jr.UserMessage, turn_id=turn, message_id=f"m{self.n}", text=text, kind=jr.Kind.prompt
        )

    def round(self, text: str, calls: list[str], turn: str = "t1", usage: Any = USAGE) -> Any:
        return self.add(
            jr.ModelRound,
            turn_id=turn,
            round=0,
            text=text,
            reasoning="",
            tool_calls=[
                jr.RecordedToolCall(call_id=c, name="shell", arguments="{}") for c in calls
            ],
            finish=jr.Finish.tool_calls if calls else jr.Finish.stop,
            usage=usage,
            provider="openai-chat",
            provider_items=[],
        )

    def result(self, call_id: str, output: str = "out", turn: str = "t1") -> Any:
        return self.add(
            jr.ToolResult,
            turn_id=turn,
            call_id=call_id,
            name="shell",
            status=jr.ToolStatus.ok,
            output=output,
            synthetic=False,
        )

    def started(self, through: int, cid: str = "cp1") -> Any:
        return self.add(
            jr.CompactionStarted,
            compaction_id=cid,
            trigger=jr.CompactionTrigger.manual,
            through_seq=through,
        )

    def completed(self, through: int, kept: list[int], summary: str = "S", cid: str = "cp1") -> Any:
        return self.add(
            jr.CompactionCompleted,
            compaction_id=cid,
            through_seq=through,
            summary=summary,
            kept=kept,
        )


def _check_pairs(messages: list[Message]) -> None:
    """Every call is followed at once by exactly its results; no result elsewhere."""
    i = 0
    while i < len(messages):
        msg = messages[i]
        if isinstance(msg, AssistantMessage) and msg.tool_calls:
            ids = [c.call_id for c in msg.tool_calls]
            follow = messages[i + 1 : i + 1 + len(ids)]
            assert [m.call_id for m in follow if isinstance(m, ToolResultMessage)] == ids
            i += 1 + len(ids)
            continue
        assert not isinstance(msg, ToolResultMessage), f"result without its call at {i}"
        i += 1


# One step of a random journal.
_step = st.one_of(
    st.tuples(st.just("user"), st.text(alphabet="abc ", max_size=6)),
    st.tuples(st.just("round"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("results"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("compact"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("drop"), st.integers(min_value=0, max_value=5)),
)


def _journal(steps: list[tuple[str, Any]], data: st.DataObject) -> _Journal:
    j = _Journal()
    open_calls: list[str] = []
    calls = 0
    for kind, arg in steps:
        if kind == "user":
            j.user(arg)
        elif kind == "round":
            ids = [f"c{calls + k}" for k in range(arg)]
            calls += arg
            j.round("r", ids)
            open_calls += ids
        elif kind == "results":
            for call_id in open_calls[:arg]:
                j.result(call_id)
            open_calls = open_calls[arg:]
        elif kind == "drop":
            users = [r for r in j.records if isinstance(r, jr.UserMessage)]
            if users:
                j.add(jr.InputDropped, message_id=users[arg % len(users)].message_id)
        elif kind == "compact" and j.records:
            # A random cut: clean (as the shell chooses it) or anywhere (a
            # damaged or foreign record must still give a valid request).
            seqs = [r.seq for r in j.records]
            through = data.draw(st.sampled_from(seqs)) if arg == 0 else clean_through(j.records)
            if through is None:  # no point where every call is answered
                continue
            users = [r.seq for r in j.records if isinstance(r, jr.UserMessage) and r.seq <= through]
            kept = sorted(data.draw(st.sets(st.sampled_from(users)))) if users else []
            cid = f"cp{j.n}-{len(j.records)}"
            j.started(through, cid)
            if arg == 3:
                j.add(jr.CompactionFailed, compaction_id=cid, reason="empty summary")
            elif arg != 2:  # 2: started, never ended (a crash)
                j.completed(through, kept, summary=f"summary {cid}", cid=cid)
    return j


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(_step, max_size=30), data=st.data())
def test_random_journals_with_compactions_give_valid_requests(
    steps: list[tuple[str, Any]], data: st.DataObject
) -> None:
    j = _journal(steps, data)
    before = copy.deepcopy(j.records)
    messages = build_messages(j.records)
    assert j.records == before  # the originals are untouched
    _check_pairs(messages)
    newest = newest_user_message(j.records)
    if newest is not None:
        texts = [m.text for m in messages if isinstance(m, UserMessage)]
        assert newest.text in texts


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(_step, max_size=30), data=st.data(), end=st.sampled_from(["none", "failed"]))
def test_an_unfinished_or_failed_compaction_changes_nothing(
    steps: list[tuple[str, Any]], data: st.DataObject, end: str
) -> None:
    j = _journal(steps, data)
    expected = build_messages(j.records)
    through = clean_through(j.records)
    if through is None:
        return
    j.started(through, "cp-last")
    if end == "failed":
        j.add(jr.CompactionFailed, compaction_id="cp-last", reason="summary larger")
    assert build_messages(j.records) == expected


def test_the_model_sees_summary_then_kept_then_the_tail() -> None:
    j = _Journal()
    j.user("first question")
    j.round("", ["a"])
    j.result("a", "big output " * 10)
    j.round("first answer", [])
    second = j.user("second question")
    j.round("second answer", [])
    through = clean_through(j.records)
    assert through == j.records[-1].seq
    j.started(through)
    j.completed(through, [second.seq], summary="they asked two things")
    j.user("third question", turn="t2")
    messages = build_messages(j.records)
    assert messages == [
        UserMessage(text=SUMMARY_PREFIX + "they asked two things"),
        UserMessage(text="second question"),
        UserMessage(text="third question"),
    ]
    # The newest completed compaction wins; the journal keeps the originals.
    assert compacted_view(j.records).compaction is j.records[-2]
    assert len(j.records) == 9


def test_clean_through_never_splits_a_call_from_its_result() -> None:
    j = _Journal()
    j.user("q")
    j.round("", ["a", "b"])
    j.result("a")
    assert clean_through(j.records) == 0  # only before the round: "b" is unanswered
    j.result("b")
    assert clean_through(j.records) == j.records[-1].seq


def test_a_call_of_an_ended_turn_without_a_result_does_not_hold_every_later_cut_back() -> None:
    """The model is shown such a call answered "interrupted"
    (build_messages); nothing can answer it after its turn ended, so it is
    closed at the turn's end. A call of a turn still open stays open."""
    j = _Journal()
    j.user("q")
    j.round("", ["a", "b"])
    j.result("a")
    assert clean_through(j.records) == 0  # the turn is open: "b" may still be answered
    end = j.add(
        jr.TurnCompleted,
        turn_id="t1",
        status=jr.TurnStatus.interrupted,
        usage=USAGE,
        acknowledged=["m1"],
    )
    assert clean_through(j.records) == end.seq
    j.user("next", turn="t2")
    j.round("", ["a"], turn="t2")
    j.result("a", turn="t2")
    assert clean_through(j.records) == j.records[-1].seq
    (ended,) = [m for m in build_messages(j.records) if isinstance(m, ToolResultMessage)][1:2]
    assert ended.is_error  # "b", answered for the model as interrupted


def test_kept_user_messages_are_the_most_recent_within_the_budget() -> None:
    j = _Journal()
    old = j.user("x" * 400)  # 100 tokens
    mid = j.user("y" * 400)
    new = j.user("z" * 400)
    assert kept_user_messages(j.records, new.seq, 200) == [mid.seq, new.seq]
    assert kept_user_messages(j.records, new.seq, 10_000) == [old.seq, mid.seq, new.seq]
    # The newest one is kept even alone over the budget.
    assert kept_user_messages(j.records, new.seq, 1) == [new.seq]
    assert kept_budget(None) == KEPT_USER_TOKENS
    assert kept_budget(8_000) == 800


def _projected(records: list[jr.JournalRecord]) -> int | None:
    """The projection the turn chart's ``context_measured`` is sent (the one owner)."""
    return context_usage(records, model="", configured=None, learned=None).projected_tokens


def test_projection_starts_from_the_newest_usage_or_compaction() -> None:
    j = _Journal()
    assert _projected(j.records) is None  # nothing reported: unknown
    j.user("q")
    j.round("answer", [], usage=jr.Usage(input_tokens=1000, output_tokens=50))
    j.user("a" * 400)
    assert _projected(j.records) == 1000 + 50 + 100
    j.add(
        jr.CompactionCompleted,
        compaction_id="c",
        through_seq=2,
        summary="s",
        kept=[],
        after_tokens=300,
    )
    j.user("b" * 40)
    assert _projected(j.records) == 300 + 10
