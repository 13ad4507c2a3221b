"""Closing a crashed turn through the turn chart, pure (turn.yaml recovery block)."""

from __future__ import annotations

import msgspec

from mind.call_pairing import PairedCall
from mind.effects.tools import effect_class
from mind.generated import journal as jr
from mind.machines.effect import redrivable as effect_redrivable
from mind.machines.turn_replay import (
    RecoveredClosing,
    recovered_closing,
    replayed_turn,
    resume_plan,
)
from tests.support import records as rec

T = "turn-1"


def started(turn_id: str = T) -> jr.TurnStarted:
    return rec.turn_started(turn_id)


def message(mid: str, kind: jr.Kind = jr.Kind.prompt) -> jr.UserMessage:
    return rec.user_message(T, mid, "x", kind)


def round_(text: str = "", calls: tuple[str, ...] = (), turn_id: str = T) -> jr.ModelRound:
    return rec.model_round(turn_id, text, [rec.call(c) for c in calls])


def result(call_id: str) -> jr.ToolResult:
    return rec.tool_result(T, call_id)


COMPLETED = RecoveredClosing("completed", True)
ABORTED = RecoveredClosing("aborted", False)


def test_each_crash_point_closes_as_the_chart_says() -> None:
    cases = {
        "accepted": ([], "accepted", ABORTED),
        "started": ([started()], "requesting", ABORTED),
        "inputs": ([started(), message("a")], "requesting", ABORTED),
        "calls out": ([started(), round_(calls=("c1", "c2"))], "executing", ABORTED),
        "one result": ([started(), round_(calls=("c1", "c2")), result("c1")], "executing", ABORTED),
        "all results": (
            [started(), round_(calls=("c1", "c2")), result("c1"), result("c2")],
            "requesting",
            ABORTED,
        ),
        "final answer": (
            [started(), round_(calls=("c1",)), result("c1"), round_("done")],
            "checking_inbox",
            COMPLETED,
        ),
        "steering after the answer": (
            [started(), round_("done"), message("b", jr.Kind.steer)],
            "requesting",
            ABORTED,
        ),
        "answer to the steering": (
            [started(), round_("done"), message("b", jr.Kind.steer), round_("again")],
            "checking_inbox",
            RecoveredClosing("completed", True, ("b",)),
        ),
        "empty last answer": ([started(), round_("  ")], "streaming", ABORTED),
        "empty answer, then steering answered": (
            [started(), round_(""), message("b", jr.Kind.steer), round_("ok")],
            "checking_inbox",
            RecoveredClosing("completed", True, ("b",)),
        ),
    }
    got = {
        name: (replayed_turn(records, T).state, recovered_closing(records, T))
        for name, (records, _, _) in cases.items()
    }
    assert got == {name: (state, closing) for name, (_, state, closing) in cases.items()}


def test_records_of_other_turns_are_ignored() -> None:
    other = [started("turn-0"), round_(calls=("c9",), turn_id="turn-0")]
    assert recovered_closing([*other, started(), round_("done")], T) == COMPLETED
    assert recovered_closing([started(), round_("done"), *other], T) == COMPLETED


def test_a_sequence_the_chart_refuses_fails_safe_as_aborted() -> None:
    # Two turn_started for one turn: the second `start` is refused.
    records = [started(), round_("done"), started()]
    assert replayed_turn(records, T).state == "aborted"
    assert recovered_closing(records, T) == ABORTED


def test_a_repeated_call_id_is_counted_per_occurrence() -> None:
    dup = [started(), round_(calls=("dup1", "dup1")), result("dup1")]
    assert replayed_turn(dup, T).state == "executing"
    assert replayed_turn([*dup, result("dup1")], T).state == "requesting"


def test_the_receipt_acknowledges_the_inputs_the_turn_claimed_in_order() -> None:
    records = [
        started(),
        message("p1"),
        message("p2"),  # the turn's first inputs
        round_(calls=("c1",)),
        result("c1"),
        message("s1", jr.Kind.steer),  # drained at the boundary after the results
        round_("answer"),
        message("s2", jr.Kind.steer),  # claimed at drain-or-seal
        message("s1", jr.Kind.steer),  # recorded twice: counted once
        round_("again"),
    ]
    assert recovered_closing(records, T) == RecoveredClosing(
        "completed", True, ("p1", "p2", "s1", "s2")
    )
    # Before the answer: aborted, nothing acknowledged, whatever was claimed.
    assert recovered_closing(records[:6], T) == ABORTED


def test_an_input_recorded_where_no_turn_claims_one_fails_safe() -> None:
    # A user_message between a call and its result: the chart refuses the claim.
    records = [started(), round_(calls=("c1",)), message("x"), result("c1"), round_("done")]
    assert replayed_turn(records, T).state == "aborted"
    assert recovered_closing(records, T) == ABORTED


# ---- resume_plan: resumed or closed (docs/design/recovery.md §8) -------------------


def named_round(*calls: tuple[str, str]) -> jr.ModelRound:
    """A tool round whose calls are ``(call_id, tool name)``."""
    return jr.ModelRound(
        seq=0,
        recorded_at_ms=0,
        turn_id=T,
        round=0,
        text="",
        reasoning="",
        tool_calls=[jr.RecordedToolCall(call_id=c, name=n, arguments="{}") for c, n in calls],
        finish=jr.Finish.tool_calls,
        usage=jr.Usage(input_tokens=1, output_tokens=1),
        provider="scripted",
        provider_items=[],
    )


def tool_started(call_id: str, name: str = "shell") -> jr.ToolStarted:
    return jr.ToolStarted(seq=0, recorded_at_ms=0, turn_id=T, call_id=call_id, name=name)


def completed() -> jr.TurnCompleted:
    return jr.TurnCompleted(
        seq=0,
        recorded_at_ms=0,
        turn_id=T,
        status=jr.TurnStatus.aborted,
        usage=jr.Usage(input_tokens=0, output_tokens=0),
        acknowledged=[],
    )


def compacting() -> list[jr.JournalRecord]:
    """What an overflow compaction inside turn ``T`` journals before its summary is back."""
    return [
        jr.ContextWindowLearned(seq=0, recorded_at_ms=0, turn_id=T, model="m", window=8192),
        jr.CompactionStarted(
            seq=0,
            recorded_at_ms=0,
            compaction_id="cp",
            trigger=jr.CompactionTrigger.overflow,
            through_seq=0,
            turn_id=T,
        ),
    ]


def redrivable(paired: PairedCall) -> bool:
    """The effect chart's rule with no supervisor evidence (file tools, or none left)."""
    return effect_redrivable(effect_class(paired.call.name))


def plan_of(records: list[jr.JournalRecord]) -> tuple[list[str], list[str]] | None:
    """``(redriven ids, unknown ids)`` of the plan, or None when the turn is closed."""
    plan = resume_plan(records, T, redrivable=redrivable)
    if plan is None:
        return None
    return [p.call.call_id for p in plan.redrive], [p.call.call_id for p in plan.unknown]


def test_a_turn_stopped_inside_a_tool_round_is_resumed_else_closed() -> None:
    shell_round = named_round(("c1", "shell"), ("c2", "shell"))
    read_round = named_round(("r1", "read_file"), ("c2", "shell"))
    cases: dict[str, tuple[list[jr.JournalRecord], tuple[list[str], list[str]] | None]] = {
        "before any round": ([started(), message("a")], None),
        "calls out, none started": ([started(), shell_round], (["c1", "c2"], [])),
        "first answered": ([started(), shell_round, result("c1")], (["c2"], [])),
        "shell started, not answered": (
            [started(), shell_round, tool_started("c1")],
            (["c2"], ["c1"]),
        ),
        "the last shell started": (
            [started(), shell_round, result("c1"), tool_started("c2")],
            None,
        ),
        "read-only started, not answered": (
            [started(), read_round, tool_started("r1", "read_file")],
            (["r1", "c2"], []),
        ),
        "every call answered": ([started(), shell_round, result("c1"), result("c2")], ([], [])),
        "final answer journaled": (
            [started(), shell_round, result("c1"), result("c2"), round_("done")],
            None,
        ),
        "terminal written": ([started(), shell_round, completed()], None),
        "a later turn started": ([started(), shell_round, started("turn-2")], None),
        # A compaction inside the turn (or the window its overflow stated) is
        # not a step of the turn: killed mid-compaction, the answered round
        # still resumes at its boundary (its results are not run again).
        "compacting after every call answered": (
            [started(), shell_round, result("c1"), result("c2"), *compacting()],
            ([], []),
        ),
    }
    got = {name: plan_of(records) for name, (records, _) in cases.items()}
    assert got == {name: want for name, (_, want) in cases.items()}


def test_the_rerun_rule_is_the_effect_charts() -> None:
    # One rule (effects.md §4): a started write_file is idempotent, so the
    # resumed turn re-drives it; a started shell only when its supervisor's
    # evidence remains or proves it never started.
    write_round = named_round(("w1", "write_file"), ("c2", "shell"))
    records = [started(), write_round, tool_started("w1", "write_file")]
    assert plan_of(records) == (["w1", "c2"], [])
    shell = [started(), named_round(("c1", "shell")), tool_started("c1")]
    for process, driven in [
        ("finished", True),
        ("running", True),
        ("never_started", True),
        ("lost", False),
        ("none", False),
    ]:
        plan = resume_plan(
            shell,
            T,
            redrivable=lambda p, f=process: effect_redrivable(effect_class(p.call.name), f),
        )
        assert (plan is not None) == driven, process


def test_a_turn_without_recorded_starts_never_reruns_a_tool_that_changes_things() -> None:
    old = msgspec.structs.replace(started(), tool_starts=msgspec.UNSET)
    # No start recorded, but an old journal cannot prove the shell never ran.
    assert plan_of([old, named_round(("c1", "shell"))]) is None
    assert plan_of([old, named_round(("r1", "list_dir"), ("c1", "shell"))]) == (["r1"], ["c1"])


def test_where_a_person_can_answer_a_started_call_is_redriven_to_be_asked_about() -> None:
    """The reconcile question needs the turn resumed (docs/design/effects.md §4)."""
    shell_round = named_round(("c1", "shell"), ("c2", "shell"))
    records = [started(), shell_round, result("c1"), tool_started("c2")]
    plan = resume_plan(records, T, redrivable=redrivable, can_ask=True)
    assert plan is not None
    assert ([p.call.call_id for p in plan.redrive], plan.unknown) == (["c2"], ())
    assert [p.call.call_id for p in plan.asked] == ["c2"]  # asked about, not run
    # An old journal's missing start proves nothing: not prepared, never re-driven.
    old = msgspec.structs.replace(started(), tool_starts=msgspec.UNSET)
    assert (
        resume_plan([old, named_round(("c1", "shell"))], T, redrivable=redrivable, can_ask=True)
        is None
    )


def test_a_repeated_call_id_is_paired_per_occurrence_when_resuming() -> None:
    dup = named_round(("d", "shell"), ("d", "shell"))
    plan = resume_plan([started(), dup, result("d")], T, redrivable=redrivable)
    assert plan is not None
    assert [(p.call.call_id, p.occurrence, p.index) for p in plan.redrive] == [("d", 1, 1)]


def test_a_resumed_turn_claims_its_journaled_inputs_in_order() -> None:
    # Steering drained at the boundary after the first round's results is
    # the turn's input too.
    records = [
        started(),
        message("a"),
        named_round(("c0", "shell")),
        result("c0"),
        message("s", jr.Kind.steer),
        named_round(("c1", "shell")),
    ]
    plan = resume_plan(records, T, redrivable=redrivable)
    assert plan is not None and plan.inputs == ("a", "s")
    assert [p.call.call_id for p in plan.redrive] == ["c1"]


def test_only_the_crashed_turns_records_decide() -> None:
    other = rec.tool_result("turn-0", "c1")
    assert plan_of([started(), named_round(("c1", "shell")), other]) == (["c1"], [])


def test_a_replay_that_ends_on_the_round_limit_stays_there() -> None:
    records = [started(), round_(calls=("c1",)), result("c1"), round_(calls=("c2",))]
    assert replayed_turn(records, T, max_rounds=1).state == "failed"
