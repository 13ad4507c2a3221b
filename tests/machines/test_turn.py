"""TurnMachine, event by event (docs/design/turn.md; specs/statecharts/turn.yaml).

Whole-state comparisons: each check compares (state, configuration, status,
retries_used) together, so a wrong field anywhere shows in the diff.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mind.errors import IllegalTransition
from mind.machines.turn import (
    TERMINAL_STATES,
    TurnMachine,
    acknowledges,
    within_output_cap,
)

Snapshot = tuple[str, frozenset[str], bool, str | None, int]


def snap(machine: TurnMachine) -> Snapshot:
    return (
        machine.state,
        machine.configuration,
        machine.is_terminal,
        machine.status,
        machine.retries_used,
    )


def active(*inner: str) -> frozenset[str]:
    return frozenset({"active", *inner})


EVENTS: dict[str, Callable[[TurnMachine], object]] = {
    "start": TurnMachine.start,
    "stream_opened": TurnMachine.stream_opened,
    "round_tools": TurnMachine.round_tools,
    "round_final": TurnMachine.round_final,
    "round_failed": lambda m: m.round_failed(transient=True),
    "retry_due": TurnMachine.retry_due,
    "approval_needed": TurnMachine.approval_needed,
    "approval_answered": TurnMachine.approval_answered,
    "tools_done": TurnMachine.tools_done,
    "steering_claimed": TurnMachine.steering_claimed,
    "seal": TurnMachine.seal,
    "interrupt": TurnMachine.interrupt,
    "fail": TurnMachine.fail,
    "abort": TurnMachine.abort,
}


def test_a_new_turn_is_accepted() -> None:
    assert snap(TurnMachine()) == ("accepted", frozenset({"accepted"}), False, None, 0)


def test_happy_path_with_tools_approval_steering_and_seal() -> None:
    m = TurnMachine()
    m.start()
    assert snap(m) == ("requesting", active("sampling", "requesting"), False, None, 0)
    m.stream_opened()
    assert snap(m) == ("streaming", active("sampling", "streaming"), False, None, 0)
    m.round_tools()
    assert snap(m) == ("executing", active("running_tools", "executing"), False, None, 0)
    m.approval_needed()
    assert snap(m) == (
        "awaiting_approval",
        active("running_tools", "awaiting_approval"),
        False,
        None,
        0,
    )
    m.approval_answered()
    m.tools_done()
    assert snap(m) == ("requesting", active("sampling", "requesting"), False, None, 0)
    m.round_final()
    assert snap(m) == ("checking_inbox", active("draining", "checking_inbox"), False, None, 0)
    m.steering_claimed()
    assert m.state == "requesting"
    m.stream_opened()
    m.round_final()
    m.seal()
    assert snap(m) == ("completed", frozenset({"completed"}), True, "completed", 0)


def test_transient_failures_retry_until_the_budget_is_spent() -> None:
    m = TurnMachine(max_retries=2)
    m.start()
    assert m.round_failed(transient=True) is True
    assert snap(m) == ("backing_off", active("retrying", "backing_off"), False, None, 1)
    m.retry_due()
    m.stream_opened()  # the retry budget is per turn: tools/rounds do not reset it
    m.round_tools()
    m.tools_done()
    assert m.round_failed(transient=True) is True
    m.retry_due()
    assert m.round_failed(transient=True) is False
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 2)


def test_a_transient_failure_past_the_retry_time_fails_with_budget_left() -> None:
    """Issue 7 item 12: the total retry time bounds retries as well as their count."""
    m = TurnMachine(max_retries=4)
    m.start()
    assert m.round_failed(transient=True, in_time=True) is True
    m.retry_due()
    assert m.round_failed(transient=True, in_time=False) is False
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 1)


def test_a_permanent_failure_fails_at_once() -> None:
    m = TurnMachine()
    m.start()
    assert m.round_failed(transient=False) is False
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 0)


def test_zero_retries_fails_on_the_first_transient_failure() -> None:
    m = TurnMachine(max_retries=0)
    m.start()
    assert m.round_failed(transient=True) is False
    assert m.status == "failed"


def test_negative_retry_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        TurnMachine(max_retries=-1)


@pytest.mark.parametrize(
    ("prefix", "event", "status"),
    [
        ([], "abort", "aborted"),
        ([], "fail", "failed"),
        (["start"], "interrupt", "interrupted"),
        (["start", "stream_opened"], "abort", "aborted"),
        (["start", "round_tools", "approval_needed"], "interrupt", "interrupted"),
        (["start", "round_failed"], "fail", "failed"),
        (["start", "round_final"], "abort", "aborted"),
    ],
)
def test_terminal_exits_from_anywhere_in_the_turn(
    prefix: list[str], event: str, status: str
) -> None:
    m = TurnMachine()
    for name in prefix:
        EVENTS[name](m)
    EVENTS[event](m)
    assert snap(m) == (status, frozenset({status}), True, status, m.retries_used)


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
@pytest.mark.parametrize("event", sorted(EVENTS))
def test_terminal_states_are_absorbing(terminal: str, event: str) -> None:
    m = TurnMachine()
    m.start()
    {
        "completed": lambda: (m.round_final(), m.seal()),
        "interrupted": m.interrupt,
        "failed": lambda: m.round_failed(transient=False),
        "aborted": m.abort,
    }[terminal]()
    before = snap(m)
    with pytest.raises(IllegalTransition) as refused:
        EVENTS[event](m)
    assert snap(m) == before
    assert (refused.value.event, refused.value.configuration) == (event, frozenset({terminal}))


@pytest.mark.parametrize(
    ("prefix", "event"),
    [
        ([], "seal"),
        ([], "interrupt"),
        ([], "round_failed"),
        (["start"], "start"),
        (["start"], "tools_done"),
        (["start", "stream_opened"], "stream_opened"),
        (["start", "round_tools"], "round_final"),
        (["start", "round_tools"], "approval_answered"),
        (["start", "round_failed"], "round_failed"),
        (["start", "round_final"], "retry_due"),
    ],
)
def test_disallowed_events_raise_and_change_nothing(prefix: list[str], event: str) -> None:
    m = TurnMachine(max_retries=3)
    for name in prefix:
        EVENTS[name](m)
    before = snap(m)
    with pytest.raises(IllegalTransition, match=f"event '{event}' is not allowed") as refused:
        EVENTS[event](m)
    assert isinstance(refused.value, RuntimeError)
    assert refused.value.__cause__ is not None
    assert snap(m) == before


def test_observers_see_every_transition() -> None:
    seen: list[tuple[str, str, str]] = []

    class Recorder:
        def after_transition(self, event: str, source: object, target: object) -> None:
            seen.append((str(event), getattr(source, "id", ""), getattr(target, "id", "")))

    m = TurnMachine()
    m.observe(Recorder())
    m.start()
    m.stream_opened()
    m.abort()
    assert seen == [
        ("start", "accepted", "sampling"),
        ("stream_opened", "requesting", "streaming"),
        ("abort", "active", "aborted"),
    ]


@pytest.mark.parametrize(
    ("status", "kind", "expected"),
    [
        ("completed", None, True),
        ("interrupted", None, True),
        ("aborted", None, False),
        ("failed", "auth", True),
        ("failed", "internal", True),
        ("failed", "network", False),
        ("failed", "output_limit", False),
        ("failed", "storage", False),
        ("failed", None, False),
    ],
)
def test_which_endings_acknowledge_their_inputs(
    status: str, kind: str | None, expected: bool
) -> None:
    """An answer cut at the output cap (docs/design/turn.md §5) and a failed write
    (item 6) leave the input waiting, like a transient failure."""
    assert acknowledges(status, kind) is expected


def test_the_output_cap_holds_up_to_its_limit_and_not_past_it() -> None:
    assert within_output_cap(0, 0)
    assert within_output_cap(1024, 1024)
    assert not within_output_cap(1025, 1024)
