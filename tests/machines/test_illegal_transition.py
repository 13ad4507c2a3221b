"""One error for an event a chart refuses, whatever the chart.

Each machine's refusal is :class:`mind.errors.IllegalTransition` (a
``MindError`` and a ``RuntimeError``: caller misuse) naming the chart, the
state it was refused in and the event; the person's request to drop a message
the mailbox cannot give back is a different thing (:class:`DropNotAllowed`),
not misuse.
"""

from __future__ import annotations

import pytest

from mind.effects.retry import RetryPolicy
from mind.errors import DropNotAllowed, IllegalTransition, MindError
from mind.machines.mailbox import Mailbox
from mind.machines.mount import MountMachine
from mind.machines.turn import TurnMachine


def test_turn_refusal_names_chart_state_configuration_and_event() -> None:
    m = TurnMachine(retry=RetryPolicy(max_retries=1))
    m.start()
    with pytest.raises(IllegalTransition) as refused:
        m.seal()
    error = refused.value
    assert isinstance(error, MindError) and isinstance(error, RuntimeError)
    assert (error.chart, error.event, error.state) == ("turn", "seal", m.state)
    assert error.configuration == m.configuration and "sampling" in error.configuration
    assert error.__cause__ is not None  # the engine's own error, chained
    assert str(error) == f"turn: event 'seal' is not allowed in state {m.state!r}"


def test_mailbox_refusal_names_chart_state_and_event() -> None:
    box = Mailbox()
    with pytest.raises(IllegalTransition) as refused:
        box.drain()
    error = refused.value
    assert (error.chart, error.event, error.state) == ("mailbox", "drain", "no_owner")
    assert error.configuration == frozenset({"no_owner"})
    assert str(error) == "mailbox: event 'drain' is not allowed in state 'no_owner'"


def test_forgetting_an_unacknowledged_message_is_an_inbox_message_refusal() -> None:
    box = Mailbox()
    box.enqueue("q", "x", kind="queue")
    with pytest.raises(IllegalTransition) as refused:
        box.forget(["q"])
    error = refused.value
    assert (error.chart, error.event, error.state) == ("inbox_message", "forget", "next_turn")
    assert "'q' is next_turn, not acknowledged" in str(error)


def test_mount_refusal_names_chart_state_and_event() -> None:
    m = MountMachine()
    with pytest.raises(IllegalTransition) as refused:
        m.settle(attached=True)
    error = refused.value
    assert (error.chart, error.event, error.state) == ("mount", "settle", "free")
    assert error.configuration == frozenset({"free"})
    assert str(error) == "mount: event 'settle' is not allowed in state 'free'"


def test_a_refused_drop_is_the_persons_request_not_an_illegal_transition() -> None:
    box = Mailbox()
    box.enqueue("p", "x", kind="prompt")
    box.open_turn()
    with pytest.raises(DropNotAllowed) as refused:
        box.drop("p")
    error = refused.value
    assert isinstance(error, MindError) and not isinstance(error, IllegalTransition)
    assert (error.message_id, error.state) == ("p", "claimed")
    assert "running turn has already taken it" in error.reason
    with pytest.raises(DropNotAllowed) as unknown:
        box.check_drop("nope")
    assert (unknown.value.message_id, unknown.value.state) == ("nope", None)
