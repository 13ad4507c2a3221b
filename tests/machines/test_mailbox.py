"""Mailbox, call by call (docs/design/mailbox.md; specs/statecharts/mailbox.yaml).

Whole-state comparisons: :func:`snap` gives the box state, both predicates and
every message as ``(id, state, disposition)``, so a wrong field anywhere shows
in the diff.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mind.errors import DropNotAllowed, IllegalTransition, InputRefused
from mind.machines.mailbox import (
    MAX_BACKGROUND_BYTES,
    MAX_BACKGROUND_MESSAGES,
    MAX_USER_MESSAGES,
    Mailbox,
    MailboxLimits,
    MailboxMessage,
)

Snapshot = tuple[str, bool, bool, list[tuple[str, str, str]]]


def snap(box: Mailbox) -> Snapshot:
    return (
        box.state,
        box.is_active,
        box.has_turn_owner,
        [(m.message_id, m.state, m.disposition) for m in box.messages()],
    )


def ids(messages: list[MailboxMessage]) -> list[str]:
    return [m.message_id for m in messages]


def test_a_new_mailbox_has_no_owner_and_no_messages() -> None:
    box = Mailbox()
    assert snap(box) == ("no_owner", False, False, [])
    assert (box.waiting(), box.claimed(), box.limits) == ([], [], MailboxLimits())
    assert (MAX_USER_MESSAGES, MAX_BACKGROUND_MESSAGES, MAX_BACKGROUND_BYTES) == (
        20,
        100,
        7 * 1024 * 1024,
    )


def test_a_whole_turn_with_steering_before_and_after_the_seal() -> None:
    box = Mailbox()
    assert box.enqueue("p1", "fix the bug", kind="prompt") == "next_turn"
    turn_input = box.open_turn()
    assert turn_input == [MailboxMessage("p1", "fix the bug", "prompt", 11, "claimed", "next_turn")]
    assert snap(box) == ("open", True, True, [("p1", "claimed", "next_turn")])

    assert box.enqueue("s1", "also the tests", kind="steer") == "steering"
    assert box.enqueue("q1", "then refactor", kind="queue") == "next_turn"
    assert ids(box.drain()) == ["s1"]  # a model-request boundary
    assert box.drain() == []
    assert box.enqueue("s2", "and docs", kind="steer") == "steering"
    assert ids(box.drain_or_seal()) == ["s2"]  # new steering: the turn samples again
    assert box.drain_or_seal() == []  # nothing new: sealed in the same step
    assert snap(box) == (
        "sealed",
        False,  # no more steering for this turn...
        True,  # ...but the turn still owns the box
        [
            ("p1", "claimed", "next_turn"),
            ("s1", "claimed", "steering"),
            ("q1", "next_turn", "next_turn"),
            ("s2", "claimed", "steering"),
        ],
    )
    assert box.enqueue("s3", "too late", kind="steer") == "next_turn"  # after the seal
    assert box.end_turn(acknowledge=True) == ["p1", "s1", "s2"]
    assert snap(box) == (
        "no_owner",
        False,
        False,
        [
            ("p1", "acknowledged", "next_turn"),
            ("s1", "acknowledged", "steering"),
            ("q1", "next_turn", "next_turn"),
            ("s2", "acknowledged", "steering"),
            ("s3", "next_turn", "next_turn"),
        ],
    )
    box.forget(["p1", "s1", "s2"])
    assert ids(box.messages()) == ["q1", "s3"]
    assert ids(box.open_turn()) == ["q1", "s3"]  # the next turn takes them, in order


def test_abort_returns_claimed_input_and_the_next_turn_claims_it_first() -> None:
    box = Mailbox()
    box.enqueue("p1", "one", kind="prompt")
    box.open_turn()
    box.enqueue("s1", "two", kind="steer")
    box.drain()
    box.enqueue("s2", "three", kind="steer")  # queued, never drained
    assert box.end_turn(acknowledge=False) == []
    assert snap(box) == (
        "no_owner",
        False,
        False,
        [
            ("p1", "returned", "next_turn"),
            ("s1", "returned", "steering"),
            ("s2", "next_turn", "steering"),
        ],
    )
    box.enqueue("p2", "four", kind="prompt")
    assert ids(box.waiting()) == ["p1", "s1", "s2", "p2"]  # the new prompt waits behind
    assert ids(box.open_turn()) == ["p1", "s1", "s2", "p2"]
    assert box.end_turn(acknowledge=True) == ["p1", "s1", "s2", "p2"]


def test_only_waiting_messages_can_be_dropped_and_a_drop_is_final() -> None:
    """Issue 7 item 11: returned, next_turn and queued messages can be taken
    back; one the running turn claimed cannot; the id stays known."""
    box = Mailbox()
    box.enqueue("p1", "do X", kind="prompt")
    box.open_turn()
    box.end_turn(acknowledge=False)  # a transient failure: p1 is returned
    box.enqueue("p2", "do X", kind="prompt")
    box.open_turn()  # claims p1 and p2
    box.enqueue("s1", "steer", kind="steer")  # queued for this turn
    box.enqueue("q1", "later", kind="queue")  # next_turn
    before = snap(box)
    with pytest.raises(DropNotAllowed, match="running turn has already taken it"):
        box.check_drop("p1")
    with pytest.raises(DropNotAllowed, match="running turn has already taken it"):
        box.drop("p2")
    with pytest.raises(DropNotAllowed, match="not waiting"):
        box.drop("nope")
    assert snap(box) == before
    assert box.check_drop("s1").state == "queued"
    assert snap(box) == before  # checking changes nothing
    dropped = box.drop("s1")
    assert (dropped.message_id, dropped.state) == ("s1", "dropped")
    assert box.drop("q1").state == "dropped"
    assert ids(box.waiting()) == [] and box.drain_or_seal() == []  # nothing left to steer
    assert box.end_turn(acknowledge=False) == []
    assert ids(box.waiting()) == ["p1", "p2"]
    assert box.drop("p1").state == "dropped"
    assert box.enqueue("p1", "do X", kind="prompt") == "next_turn"  # idempotent: not back
    assert ids(box.waiting()) == ["p2"] and box.knows("s1")
    with pytest.raises(DropNotAllowed, match="not waiting"):
        box.drop("p1")


def test_end_turn_from_open_acknowledges_only_what_was_claimed() -> None:
    box = Mailbox()
    box.enqueue("p1", "one", kind="prompt")
    box.open_turn()
    box.enqueue("s1", "late steer", kind="steer")
    assert box.end_turn(acknowledge=True) == ["p1"]
    assert [(m.message_id, m.state) for m in box.waiting()] == [("s1", "next_turn")]


def test_sealed_and_no_owner_route_steering_to_the_next_turn() -> None:
    box = Mailbox()
    assert box.enqueue("s0", "before any turn", kind="steer") == "next_turn"
    box.open_turn()
    for kind in ("prompt", "queue", "background"):
        assert box.enqueue(f"{kind}-1", "x", kind=kind) == "next_turn"
    box.drain_or_seal()
    assert box.state == "sealed"
    assert box.enqueue("s1", "x", kind="steer") == "next_turn"
    assert box.claimed() == [box.message("s0")]


def test_the_same_id_twice_is_an_idempotent_success() -> None:
    box = Mailbox()
    box.open_turn()
    assert box.enqueue("s1", "first", kind="steer") == "steering"
    before = snap(box)
    assert box.admit("s1", "retry", kind="steer") == "steering"
    assert box.enqueue("s1", "retry", kind="steer") == "steering"
    assert box.enqueue("s1", "retry", kind="queue") == "steering"  # original disposition
    assert snap(box) == before
    assert box.message("s1") == MailboxMessage("s1", "first", "steer", 5, "queued", "steering")
    box.drain_or_seal()
    box.drain_or_seal()
    assert box.enqueue("s1", "retry after the seal", kind="steer") == "steering"
    assert box.end_turn(acknowledge=True) == ["s1"]
    box.forget(["s1"])
    assert box.knows("s1") and box.message("s1") is None
    assert box.enqueue("s1", "retry after the ack", kind="steer") == "steering"
    assert box.messages() == []  # acknowledged input is never replayed


def test_user_messages_are_limited_to_twenty_unacknowledged() -> None:
    box = Mailbox()
    for i in range(20):
        box.enqueue(f"u{i}", "x", kind=("prompt", "steer", "queue")[i % 3])
    before = snap(box)
    with pytest.raises(InputRefused) as refused:
        box.admit("u20", "x", kind="steer")
    assert (refused.value.reason, refused.value.message_id) == ("steering_full", "u20")
    with pytest.raises(InputRefused):
        box.enqueue("u20", "x", kind="queue")
    assert snap(box) == before
    assert box.enqueue("u3", "x", kind="steer") == "next_turn"  # known ids never refused
    assert box.enqueue("b0", "x", kind="background") == "next_turn"  # separate budget
    box.open_turn()
    with pytest.raises(InputRefused):  # claimed is not acknowledged
        box.enqueue("u20", "x", kind="steer")
    box.end_turn(acknowledge=True)
    assert box.enqueue("u20", "x", kind="steer") == "next_turn"


def test_background_completions_are_limited_by_count_and_bytes() -> None:
    box = Mailbox()
    for i in range(100):
        box.enqueue(f"b{i}", "done", kind="background")
    with pytest.raises(InputRefused) as refused:
        box.enqueue("b100", "done", kind="background")
    assert refused.value.reason == "background_full"
    assert box.enqueue("u0", "x", kind="steer") == "next_turn"  # users unaffected

    box = Mailbox()
    box.enqueue("big", "x", kind="background", size_bytes=MAX_BACKGROUND_BYTES - 10)
    box.enqueue("fits", "x" * 10, kind="background")  # exactly at the budget
    with pytest.raises(InputRefused) as refused:
        box.enqueue("over", "x", kind="background")
    assert refused.value.reason == "background_bytes"
    assert "over" in str(refused.value) and refused.value.message
    assert ids(box.messages()) == ["big", "fits"]
    box.open_turn()
    box.end_turn(acknowledge=True)
    assert box.enqueue("over", "x", kind="background") == "next_turn"


def test_size_defaults_to_utf8_bytes_and_limits_are_configurable() -> None:
    box = Mailbox(limits=MailboxLimits(max_user_messages=1, max_background_bytes=4))
    box.enqueue("b", "éé", kind="background")  # 4 bytes in UTF-8
    assert box.message("b") == MailboxMessage("b", "éé", "background", 4, "next_turn", "next_turn")
    with pytest.raises(InputRefused):
        box.enqueue("b2", "é", kind="background")
    box.enqueue("u", "x", kind="queue")
    with pytest.raises(InputRefused):
        box.enqueue("u2", "x", kind="queue")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: b.enqueue("", "x", kind="steer"), "non-empty"),
        (lambda b: b.enqueue("a", "x", kind="shout"), "unknown input kind"),  # type: ignore[arg-type]
        (lambda b: b.admit("a", "x", kind="steer", size_bytes=-1), "size_bytes"),
        (lambda b: b.restore([("a", "x", "shout")]), "unknown input kind"),  # type: ignore[list-item]
    ],
)
def test_bad_arguments_raise_value_error_and_change_nothing(
    call: Callable[[Mailbox], object], message: str
) -> None:
    box = Mailbox()
    with pytest.raises(ValueError, match=message):
        call(box)
    assert snap(box) == ("no_owner", False, False, [])


def test_restore_makes_recovered_next_turn_messages_and_remembers_acknowledgements() -> None:
    box = Mailbox(limits=MailboxLimits(max_user_messages=2))
    box.restore(
        [("a", "one", "steer"), ("b", "two", "prompt"), ("a", "dup", "queue")], acknowledged={"z"}
    )
    assert box.messages() == [
        MailboxMessage("a", "one", "steer", 3, "next_turn", "next_turn", recovered=True),
        MailboxMessage("b", "two", "prompt", 3, "next_turn", "next_turn", recovered=True),
    ]
    assert box.enqueue("z", "acknowledged before the crash", kind="steer") == "next_turn"
    assert box.enqueue("a", "retry", kind="steer") == "next_turn"
    assert ids(box.messages()) == ["a", "b"]
    box.restore([("b", "two", "prompt"), ("c", "three", "queue")])  # idempotent per id
    assert box.held_back == 1  # "c" is over the limit of 2: held back, never dropped
    assert ids(box.open_turn()) == ["a", "b"]
    box.forget(box.end_turn(acknowledge=True))
    assert ids(box.open_turn()) == ["c"]


def test_recovered_input_obeys_the_live_limits_in_order() -> None:
    """Issue #8 item 5: a huge recovered inbox is taken at most ``max_user_messages``
    per turn, in file order, nothing lost; new input never jumps ahead of it."""
    box = Mailbox(limits=MailboxLimits(max_user_messages=3))
    box.restore([(f"m{i}", f"text {i}", "prompt") for i in range(8)])
    assert box.held_back == 5
    assert box.enqueue("m3", "same id again", kind="prompt") == "next_turn"  # idempotent
    with pytest.raises(InputRefused) as refused:
        box.enqueue("new", "jumps the queue?", kind="prompt")
    assert refused.value.reason == "steering_full"
    taken: list[list[str]] = []
    while box.waiting():
        batch = box.open_turn()
        taken.append(ids(batch))
        box.forget(box.end_turn(acknowledge=True))
    assert taken == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6", "m7"]]
    assert box.held_back == 0
    assert box.enqueue("new", "now it fits", kind="prompt") == "next_turn"


def test_dropping_a_waiting_message_lets_held_back_input_in() -> None:
    box = Mailbox(limits=MailboxLimits(max_user_messages=1))
    box.restore([("a", "one", "prompt"), ("b", "two", "prompt")])
    box.drop("a")
    assert ids(box.waiting()) == ["b"] and box.held_back == 0


@pytest.mark.parametrize(
    ("prefix", "call"),
    [
        ([], "drain"),
        ([], "drain_or_seal"),
        ([], "end_turn"),
        (["open_turn"], "open_turn"),
        (["open_turn"], "restore"),
        (["open_turn", "drain_or_seal"], "drain"),
        (["open_turn", "drain_or_seal"], "drain_or_seal"),
        (["open_turn", "drain_or_seal"], "open_turn"),
        (["open_turn", "drain_or_seal"], "restore"),
        (["open_turn", "end_turn"], "end_turn"),
    ],
)
def test_disallowed_calls_raise_and_change_nothing(prefix: list[str], call: str) -> None:
    calls: dict[str, Callable[[Mailbox], object]] = {
        "open_turn": Mailbox.open_turn,
        "drain": Mailbox.drain,
        "drain_or_seal": Mailbox.drain_or_seal,
        "end_turn": lambda b: b.end_turn(acknowledge=True),
        "restore": lambda b: b.restore([("r", "x", "steer")]),
    }
    box = Mailbox()
    box.enqueue("p", "x", kind="prompt")
    for name in prefix:
        calls[name](box)
    box.enqueue("s", "x", kind="steer")
    before = snap(box)
    with pytest.raises(
        IllegalTransition, match=f"mailbox: event '{call}' is not allowed"
    ) as refused:
        calls[call](box)
    assert isinstance(refused.value, RuntimeError)
    assert refused.value.__cause__ is not None
    assert (refused.value.event, refused.value.state) == (call, before[0])
    assert snap(box) == before


def test_forget_drops_only_acknowledged_messages() -> None:
    box = Mailbox()
    box.enqueue("p", "x", kind="prompt")
    box.open_turn()
    box.end_turn(acknowledge=True)
    box.enqueue("q", "x", kind="queue")
    before = snap(box)
    with pytest.raises(IllegalTransition, match="'q' is next_turn, not acknowledged"):
        box.forget(["p", "q"])
    assert snap(box) == before
    box.forget(["p", "unknown", "p"])
    assert ids(box.messages()) == ["q"]
    box.forget(["p"])  # already forgotten: no-op


def test_observers_see_box_and_message_transitions() -> None:
    seen: list[tuple[str, str, str]] = []

    class Recorder:
        def after_transition(self, event: str, source: object, target: object) -> None:
            seen.append((str(event), getattr(source, "id", ""), getattr(target, "id", "")))

    box = Mailbox()
    box.enqueue("p", "x", kind="prompt")
    box.observe(Recorder())
    box.open_turn()
    box.enqueue("s", "x", kind="steer")
    box.drain_or_seal()
    box.drain_or_seal()
    box.end_turn(acknowledge=False)
    assert seen == [
        ("open_turn", "no_owner", "open"),
        ("claim", "next_turn", "claimed"),
        ("arrive", "received", "queued"),
        ("drain_or_seal", "open", "open"),
        ("claim", "queued", "claimed"),
        ("drain_or_seal", "open", "sealed"),
        ("end_turn", "sealed", "no_owner"),
        ("release", "claimed", "returned"),
        ("release", "claimed", "returned"),
    ]
    assert repr(box) == "Mailbox(state='no_owner', messages=2)"


def test_end_turn_acknowledges_only_the_ids_the_terminal_names() -> None:
    # A claim whose user_message never reached the journal is not in the
    # turn machine's list: no receipt names it, so it returns (and replays).
    box = Mailbox()
    box.enqueue("p1", "one", kind="prompt")
    box.open_turn()
    box.enqueue("s1", "two", kind="steer")
    box.drain()
    assert box.end_turn(acknowledge=True, only={"p1"}) == ["p1"]
    assert [(m.message_id, m.state) for m in box.messages()] == [
        ("p1", "acknowledged"),
        ("s1", "returned"),
    ]
    assert ids(box.waiting()) == ["s1"]


def test_a_resumed_turn_claims_only_its_own_recovered_inputs() -> None:
    box = Mailbox()
    box.restore([("a", "first", "prompt"), ("s", "steer", "steer"), ("q", "later", "queue")])
    claimed = box.resume_turn(["s", "a", "gone"])
    assert ids(claimed) == ["a", "s"]
    assert snap(box) == (
        "open",
        True,
        True,
        [
            ("a", "claimed", "next_turn"),
            ("s", "claimed", "next_turn"),
            ("q", "next_turn", "next_turn"),
        ],
    )
    with pytest.raises(IllegalTransition):
        box.resume_turn(["q"])
    # The resumed turn ends like any turn: what it claimed is acknowledged,
    # the input that came after it waits for the next turn.
    assert box.end_turn(acknowledge=True) == ["a", "s"]
    assert ids(box.open_turn()) == ["q"]
