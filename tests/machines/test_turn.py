"""TurnMachine, event by event (docs/design/turn.md; specs/statecharts/turn.yaml).

Whole-state comparisons: each check compares (state, configuration, status,
retries_used) together, so a wrong field anywhere shows in the diff.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from statemachine.exceptions import TransitionNotAllowed

from mind.effects.retry import RetryPolicy
from mind.errors import CANONICAL_MESSAGES, IllegalTransition
from mind.machines.turn import (
    FAIL_SAFE,
    TERMINAL_STATES,
    AnnounceWaiting,
    AskApproval,
    Compact,
    DrainOrSeal,
    DrainSteering,
    LeaveForRecovery,
    RebuildRequest,
    RefuseCall,
    RunGranted,
    RunTools,
    StartBackoff,
    StartNextTurn,
    TurnFailure,
    TurnMachine,
    WriteTerminal,
    acknowledges,
    can_rebuild_for_window,
    can_retry,
    input_over_window,
    message_too_big,
    next_turn_starts,
    overflow_advice,
    round_limit_message,
    within_output_cap,
    within_round_limit,
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


def machine(max_retries: int = 4, max_rounds: int = 200, max_retry_s: float = 300.0) -> TurnMachine:
    return TurnMachine(
        retry=RetryPolicy(max_retries=max_retries, max_retry_s=max_retry_s), max_rounds=max_rounds
    )


def tools(m: TurnMachine) -> object:
    return m.round_done(tool_calls=1, output_bytes=10, output_limit=100)


def final(m: TurnMachine) -> object:
    return m.round_done(tool_calls=0, output_bytes=10, output_limit=100)


def transient(m: TurnMachine) -> object:
    return m.round_failed(kind="server", message="server error")


EVENTS: dict[str, Callable[[TurnMachine], object]] = {
    "start": TurnMachine.start,
    "stream_opened": TurnMachine.stream_opened,
    "round_done": final,
    "round_failed": transient,
    "retry_due": TurnMachine.retry_due,
    "approval_needed": lambda m: m.approval_needed(call_id="c1", can_ask=True),
    "approval_answered": TurnMachine.approval_answered,
    "tools_done": TurnMachine.tools_done,
    "steering_claimed": TurnMachine.steering_claimed,
    "seal": TurnMachine.seal,
    "interrupt": TurnMachine.interrupt,
    "fail": TurnMachine.fail,
    "abort": TurnMachine.abort,
}
PREFIX: dict[str, Callable[[TurnMachine], object]] = {**EVENTS, "round_tools": tools}


def test_a_new_turn_is_accepted() -> None:
    assert snap(machine()) == ("accepted", frozenset({"accepted"}), False, None, 0)


def test_happy_path_names_every_effect_the_shell_performs() -> None:
    m = machine()
    assert m.start() == []
    assert snap(m) == ("requesting", active("sampling", "requesting"), False, None, 0)
    assert m.stream_opened() == []
    assert snap(m) == ("streaming", active("sampling", "streaming"), False, None, 0)
    assert tools(m) == [RunTools()]
    assert snap(m) == ("executing", active("running_tools", "executing"), False, None, 0)
    assert m.approval_needed(call_id="c1", can_ask=True) == [AskApproval("c1")]
    assert snap(m) == (
        "awaiting_approval",
        active("running_tools", "awaiting_approval"),
        False,
        None,
        0,
    )
    assert m.approval_answered() == []
    assert m.tools_done() == [DrainSteering()]
    assert snap(m) == ("requesting", active("sampling", "requesting"), False, None, 0)
    assert final(m) == [DrainOrSeal()]
    assert snap(m) == ("checking_inbox", active("draining", "checking_inbox"), False, None, 0)
    assert m.steering_claimed() == []
    assert m.state == "requesting"
    m.stream_opened()
    assert final(m) == [DrainOrSeal()]
    done = WriteTerminal(status="completed", acknowledge=True)
    assert m.seal() == [done]
    assert m.terminal == done
    assert snap(m) == ("completed", frozenset({"completed"}), True, "completed", 0)
    assert m.rounds_done == 3


def test_a_session_that_cannot_ask_refuses_the_call_and_goes_on_executing() -> None:
    m = machine()
    m.start()
    tools(m)
    assert m.approval_needed(call_id="c1", can_ask=False, reason="writes outside") == [
        RefuseCall("c1", "writes outside")
    ]
    assert snap(m) == ("executing", active("running_tools", "executing"), False, None, 0)


def test_a_policy_refusal_and_a_session_grant_are_events_of_the_chart() -> None:
    """Issue #9's leftover (docs/design/interactions.md §5): a call the policy
    refuses outright and one a session grant covers pass through the chart
    too (no branch decided in the shell alone), and only while executing."""
    m = machine()
    with pytest.raises(IllegalTransition):
        m.call_refused(call_id="c0", reason="denied root")
    m.start()
    tools(m)
    assert m.call_refused(call_id="c1", reason="denied root") == [RefuseCall("c1", "denied root")]
    assert m.approval_needed(call_id="c2", can_ask=False, granted=True) == [RunGranted("c2")]
    assert m.approval_needed(call_id="c3", can_ask=True, granted=True) == [RunGranted("c3")]
    assert snap(m) == ("executing", active("running_tools", "executing"), False, None, 0)
    assert m.approval_needed(call_id="c4", can_ask=True) == [AskApproval("c4")]
    with pytest.raises(IllegalTransition):
        m.call_refused(call_id="c5", reason="x")  # awaiting an answer


def test_transient_failures_back_off_until_the_budget_is_spent() -> None:
    m = machine(max_retries=2)
    m.start()
    failure = TurnFailure("server", "server error")
    assert transient(m) == [StartBackoff(0.5, 1, failure)]
    assert snap(m) == ("backing_off", active("retrying", "backing_off"), False, None, 1)
    m.retry_due()
    m.stream_opened()  # the retry budget is per turn: tools/rounds do not reset it
    tools(m)
    m.tools_done()
    assert transient(m) == [StartBackoff(1.0, 2, failure)]
    m.retry_due()
    assert transient(m) == [WriteTerminal("failed", acknowledge=False, failure=failure)]
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 2)


def test_the_server_retry_after_names_the_backoff() -> None:
    m = machine()
    m.start()
    (backoff,) = m.round_failed(kind="rate_limited", message="slow down", retry_after_s=3.0)
    assert isinstance(backoff, StartBackoff) and backoff.delay_s == 3.0


def test_a_transient_failure_past_the_retry_time_fails_with_budget_left() -> None:
    """Issue 7 item 12: the total retry time bounds retries as well as their count."""
    m = machine(max_retries=4, max_retry_s=10.0)
    m.start()
    transient(m)
    m.retry_due()
    (end,) = m.round_failed(kind="server", message="server error", elapsed_s=9.8)
    assert isinstance(end, WriteTerminal) and end.status == "failed"
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 1)


def test_a_permanent_failure_fails_at_once_and_consumes_the_input() -> None:
    m = machine()
    m.start()
    (end,) = m.round_failed(kind="auth", message="bad key")
    assert end == WriteTerminal("failed", acknowledge=True, failure=TurnFailure("auth", "bad key"))
    assert snap(m) == ("failed", frozenset({"failed"}), True, "failed", 0)


def test_a_round_past_the_output_cap_fails_and_keeps_the_input() -> None:
    m = machine()
    m.start()
    (end,) = m.round_done(tool_calls=1, output_bytes=101, output_limit=100)
    assert isinstance(end, WriteTerminal) and end.failure is not None
    assert (end.status, end.acknowledge, end.failure.kind) == ("failed", False, "output_limit")


@pytest.mark.parametrize("via", ["tools_done", "steering_claimed"])
def test_a_turn_out_of_rounds_fails_round_limit_saying_the_limit_and_how_to_raise_it(
    via: str,
) -> None:
    """Not an internal error (finding 9 of #11): its own kind, acknowledged
    (a replay would loop the same way), and a message naming the limit and
    the setting that raises it."""
    m = machine(max_rounds=1)
    m.start()
    (tools if via == "tools_done" else final)(m)
    (end,) = getattr(m, via)()
    assert isinstance(end, WriteTerminal) and end.failure is not None
    assert (end.status, end.acknowledge, end.failure.kind) == ("failed", True, "round_limit")
    assert end.failure.message == (
        "The turn reached its limit of 1 model round (max_rounds); "
        "raise it with MIND_MAX_ROUNDS or max_rounds in config.toml, or ask the model to go on."
    )


def test_zero_retries_fails_on_the_first_transient_failure() -> None:
    m = machine(max_retries=0)
    m.start()
    transient(m)
    assert m.status == "failed"


def test_fewer_than_one_round_is_refused() -> None:
    with pytest.raises(ValueError, match="max_rounds"):
        machine(max_rounds=0)


@pytest.mark.parametrize(
    ("status", "send_pending", "waiting", "closing", "written", "expected"),
    [
        ("completed", True, True, False, True, StartNextTurn()),
        ("completed", True, False, False, True, None),
        ("completed", True, True, True, True, AnnounceWaiting()),
        ("completed", True, True, False, False, AnnounceWaiting()),
        ("interrupted", True, True, False, True, StartNextTurn()),
        ("interrupted", False, True, False, True, AnnounceWaiting()),
        ("failed", True, True, False, True, AnnounceWaiting()),
        ("aborted", True, True, False, True, AnnounceWaiting()),
    ],
)
def test_whether_the_next_turn_starts(
    status: str, send_pending: bool, waiting: bool, closing: bool, written: bool, expected: object
) -> None:
    m = machine()
    m.start()
    {
        "completed": lambda: (final(m), m.seal()),
        "interrupted": lambda: m.interrupt(send_pending=send_pending),
        "failed": lambda: m.fail(),
        "aborted": m.abort,
    }[status]()
    assert m.next_turn(input_waiting=waiting, closing=closing, written=written) == expected
    assert next_turn_starts(
        status, send_pending=send_pending, input_waiting=waiting, closing=closing, written=written
    ) == isinstance(expected, StartNextTurn)


def test_the_fail_safe_acknowledges_nothing() -> None:
    assert WriteTerminal("aborted", acknowledge=False) == FAIL_SAFE


def test_the_pure_guards() -> None:
    assert within_round_limit(199, 200) and not within_round_limit(200, 200)
    policy = RetryPolicy(max_retries=1, max_retry_s=1.0)
    assert can_retry(policy, attempt=1, kind="server", elapsed_s=0.0, delay_s=0.5)
    assert not can_retry(policy, attempt=2, kind="server", elapsed_s=0.0, delay_s=0.5)
    assert not can_retry(policy, attempt=1, kind="auth", elapsed_s=0.0, delay_s=0.5)
    assert not can_retry(policy, attempt=1, kind="server", elapsed_s=0.6, delay_s=0.5)


@pytest.mark.parametrize(
    ("prefix", "event", "status"),
    [
        ([], "abort", "aborted"),
        ([], "fail", "failed"),
        (["start"], "interrupt", "interrupted"),
        (["start", "stream_opened"], "abort", "aborted"),
        (["start", "round_tools", "approval_needed"], "interrupt", "interrupted"),
        (["start", "round_failed"], "fail", "failed"),
        (["start", "round_done"], "abort", "aborted"),
    ],
)
def test_terminal_exits_from_anywhere_in_the_turn(
    prefix: list[str], event: str, status: str
) -> None:
    m = machine()
    for name in prefix:
        PREFIX[name](m)
    (end,) = EVENTS[event](m)  # type: ignore[misc]
    assert isinstance(end, WriteTerminal) and end.status == status
    assert snap(m) == (status, frozenset({status}), True, status, m.retries_used)


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATES))
@pytest.mark.parametrize("event", sorted(EVENTS))
def test_terminal_states_are_absorbing(terminal: str, event: str) -> None:
    m = machine()
    m.start()
    {
        "completed": lambda: (final(m), m.seal()),
        "interrupted": m.interrupt,
        "failed": lambda: m.round_failed(kind="auth", message="bad key"),
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
        (["start", "round_tools"], "round_done"),
        (["start", "round_tools"], "approval_answered"),
        (["start", "round_failed"], "round_failed"),
        (["start", "round_done"], "retry_due"),
    ],
)
def test_disallowed_events_raise_and_change_nothing(prefix: list[str], event: str) -> None:
    m = machine(max_retries=3)
    for name in prefix:
        PREFIX[name](m)
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

    m = machine()
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


def test_the_terminal_acknowledges_the_inputs_the_turn_claimed_in_claim_order() -> None:
    m = machine()
    m.start()
    assert m.inputs_claimed(["p1", "p2"]) == []
    assert m.inputs_claimed([]) == []  # a drain that found nothing: no event
    m.stream_opened()
    tools(m)
    assert m.tools_done() == [DrainSteering()]
    assert m.inputs_claimed(["s1", "p1"]) == []  # an id claimed again counts once
    final(m)
    assert m.steering_claimed(["s2"]) == []
    assert m.inputs == ("p1", "p2", "s1", "s2")
    final(m)
    assert m.seal() == [WriteTerminal("completed", True, None, ("p1", "p2", "s1", "s2"))]


@pytest.mark.parametrize(
    ("end", "status", "acknowledged"),
    [
        (lambda m: m.abort(), "aborted", ()),
        (lambda m: m.round_failed(kind="server", message="m"), "failed", ()),  # no retries left
        (lambda m: m.round_failed(kind="auth", message="m"), "failed", ("p1",)),
        (lambda m: m.interrupt(), "interrupted", ("p1",)),
    ],
)
def test_an_ending_names_the_ids_only_when_it_acknowledges(
    end: Callable[[TurnMachine], object], status: str, acknowledged: tuple[str, ...]
) -> None:
    m = machine(max_retries=0)
    m.start()
    m.inputs_claimed(["p1"])
    end(m)
    assert m.terminal is not None
    assert (m.terminal.status, m.terminal.acknowledged) == (status, acknowledged)
    assert m.terminal.acknowledge == bool(acknowledged)


def test_steering_claimed_past_the_round_limit_acknowledges_it_too() -> None:
    m = machine(max_rounds=1)
    m.start()
    m.inputs_claimed(["p1"])
    final(m)
    (end,) = m.steering_claimed(["s1"])
    assert end == WriteTerminal(
        "failed",
        True,
        TurnFailure("round_limit", round_limit_message(1)),
        ("p1", "s1"),
    )


@pytest.mark.parametrize(
    "prefix", [[], ["start", "stream_opened"], ["start", "round_tools"], ["start", "round_done"]]
)
def test_inputs_are_claimed_only_at_a_request_boundary(prefix: list[str]) -> None:
    m = machine()
    for name in prefix:
        PREFIX[name](m)
    before = snap(m)
    with pytest.raises(IllegalTransition):
        m.inputs_claimed(["x"])
    assert snap(m) == before and m.inputs == ()


def test_fail_safe_aborts_or_keeps_the_terminal_already_named() -> None:
    m = machine()
    m.start()
    m.inputs_claimed(["p1"])
    assert m.fail_safe() == WriteTerminal("aborted", acknowledge=False)
    assert m.status == "aborted"
    done = machine()
    done.start()
    final(done)
    sealed = done.seal()
    assert [done.fail_safe()] == sealed  # terminal: the one it named, nothing sent


def test_fail_safe_when_the_chart_refuses_even_abort() -> None:
    class RefuseAbort:
        def before_transition(self, event: object, machine: object) -> None:
            if str(event) == "abort":
                raise TransitionNotAllowed(event, set())  # type: ignore[arg-type]

    m = machine()
    m.observe(RefuseAbort())
    m.start()
    assert m.fail_safe() is FAIL_SAFE
    assert (m.state, m.status, m.terminal) == ("requesting", None, FAIL_SAFE)
    assert m.next_turn(input_waiting=True, closing=False) == AnnounceWaiting()


@pytest.mark.parametrize("leaving", [TurnMachine.hang_up, TurnMachine.leave])
def test_leaving_while_a_command_left_running_is_waited_for_suspends_the_turn(
    leaving: Callable[[TurnMachine], object],
) -> None:
    """Hang-up or /exit while the re-drive waits for a command a crash left
    running is no Stop: the turn is left for recovery (no terminal record),
    the command keeps running under its supervisor."""
    m = machine()
    m.start()
    tools(m)
    assert m.command_waited() == []
    assert snap(m)[1] == active("running_tools", "awaiting_command")
    assert leaving(m) == [LeaveForRecovery()]
    assert m.state == "suspended"


def test_an_interrupt_while_a_command_left_running_is_waited_for_ends_interrupted() -> None:
    m = machine()
    m.start()
    tools(m)
    m.command_waited()
    effects = m.interrupt(send_pending=False)
    assert m.state == "interrupted"
    assert not any(isinstance(e, LeaveForRecovery) for e in effects)


def test_leave_elsewhere_is_an_interrupt_and_the_collected_command_goes_on() -> None:
    m = machine()
    m.start()
    tools(m)
    m.command_waited()
    assert m.command_ended() == []
    assert snap(m)[1] == active("running_tools", "executing")
    m.leave()
    assert m.state == "interrupted"


def test_an_overflow_that_taught_the_window_rebuilds_once_then_compacts() -> None:
    assert can_rebuild_for_window("context_length", window_learned=True, already=False)
    assert not can_rebuild_for_window("context_length", window_learned=False, already=False)
    assert not can_rebuild_for_window("context_length", window_learned=True, already=True)
    assert not can_rebuild_for_window("server", window_learned=True, already=False)
    machine = TurnMachine(retry=RetryPolicy())
    machine.start()
    failed = machine.round_failed(kind="context_length", message="m", window_learned=True)
    assert (failed, machine.state) == ([RebuildRequest()], "requesting")
    # The rebuilt request goes as it is: no automatic compaction before it.
    assert machine.context_measured(projected=99, window=100, percent=50) == []
    again = machine.round_failed(kind="context_length", message="m", window_learned=True)
    assert (again, machine.state) == ([Compact("overflow")], "compacting")


def test_the_overflow_advice_is_true_where_it_is_read() -> None:
    alone = overflow_advice(
        "Too long.", "nothing", repl=True, session_id="s1", message_tokens=3100, window=2000
    )
    assert alone == (
        "Too long. The message itself is too big for the model's context window of 2,000 "
        "tokens (it is about 3,100 tokens): send a shorter one, or use a model with a "
        "larger window."
    )
    # The generic context_length sentence says nothing the advice does not;
    # the message's own size comes first, the whole request's after it.
    canonical = overflow_advice(
        CANONICAL_MESSAGES["context_length"],
        None,
        repl=False,
        session_id="s1",
        message_tokens=13000,
        request_tokens=20806,
        window=8192,
    )
    assert canonical == (
        "The message itself is too big for the model's context window of 8,192 tokens "
        "(it is about 13,000 tokens; the request with it about 20,806): send a shorter "
        "one, or use a model with a larger window."
    )
    repl = overflow_advice("Too long.", "the summary was empty", repl=True, session_id="s1")
    assert repl == (
        "Too long. Compacting it did not help: the summary was empty. "
        "Try /compact (with a focus), or start a new session with /new."
    )
    empty = overflow_advice("Too long.", "nothing to compact yet", repl=True, session_id="s1")
    assert empty == (
        "Too long. Compacting it did not help: nothing to compact yet. Send a shorter "
        "message, start a new session with /new, or use a model with a larger window."
    )
    named = overflow_advice(
        "Too long.",
        "nothing to compact yet",
        repl=True,
        session_id="s1",
        message_tokens=3100,
        window=2000,
        instructions="/r/AGENTS.md (20,000 bytes)",
        instructions_tokens=2500,
    )
    assert named.startswith(
        "Too long. Most of the request is the instructions files (about 2,500 tokens): "
        "/r/AGENTS.md (20,000 bytes)."
    )
    assert "/compact" not in named and "model_context_window" in named
    other = overflow_advice("Too long.", None, repl=False, session_id="s1")
    assert other == (
        "Too long. Compact it in the REPL (`mind resume s1`, then /compact with a focus), "
        "or start a new session (`mind exec` without --session)."
    )


def test_a_message_over_the_window_alone_fails_the_turn_at_once() -> None:
    assert message_too_big("context_length", input_tokens=100, window=100)
    assert not message_too_big("context_length", input_tokens=99, window=100)
    assert not message_too_big("context_length", input_tokens=None, window=100)
    assert not message_too_big("context_length", input_tokens=100, window=None)
    assert not message_too_big("server", input_tokens=500, window=100)
    assert input_over_window(100, 100) and not input_over_window(None, 100)
    machine = TurnMachine(retry=RetryPolicy())
    machine.start()
    # No automatic compaction for it either: it could not make the turn fit.
    assert machine.context_measured(projected=500, window=100, percent=80, input_tokens=120) == []
    (terminal,) = machine.round_failed(
        kind="context_length",
        message="too long.",
        window_learned=True,
        input_tokens=120,
        sent_tokens=300,
        window=100,
    )
    assert isinstance(terminal, WriteTerminal) and terminal.failure is not None
    assert terminal.failure.kind == "context_length"
    assert "message itself is too big" in terminal.failure.message
    assert "it is about 120 tokens; the request with it about 300" in terminal.failure.message
    assert "/compact" not in terminal.failure.message
