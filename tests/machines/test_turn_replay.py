"""Closing a crashed turn through the turn chart, pure (turn.yaml recovery block)."""

from __future__ import annotations

from mind.generated import journal as jr
from mind.machines.turn_replay import RecoveredClosing, recovered_closing, replayed_turn
from tests.support import records as rec

T = "turn-1"


def started(turn_id: str = T) -> jr.TurnStarted:
    return jr.TurnStarted(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        provider="scripted",
        model="m",
        approval=jr.Approval.never,
        tool_starts=True,
    )


def message(mid: str, kind: jr.Kind = jr.Kind.prompt) -> jr.UserMessage:
    return jr.UserMessage(seq=0, recorded_at_ms=0, turn_id=T, message_id=mid, text="x", kind=kind)


def round_(text: str = "", calls: tuple[str, ...] = (), turn_id: str = T) -> jr.ModelRound:
    return rec.model_round(turn_id, text, [rec.call(c) for c in calls])


def result(call_id: str) -> jr.ToolResult:
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id=T,
        call_id=call_id,
        name="shell",
        status=jr.ToolStatus.ok,
        output="",
        synthetic=False,
    )


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
