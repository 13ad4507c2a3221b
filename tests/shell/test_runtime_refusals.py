"""A transition the turn chart refuses fails safe.

A listener on the turn machine the runtime itself creates refuses the first
occurrence of one event (python-statemachine's ``TransitionNotAllowed`` from
``before_transition``: the machine is left as it was, exactly as for a real
refusal). The turn must end ``aborted`` with nothing acknowledged, the chart,
state and event must be logged, and after the session is reopened its inputs
(the prompt, and steering the turn had claimed) must run in exactly one turn
and be acknowledged exactly once.

Every event the runtime sends in a turn is refused once. ``abort`` is what a
refusal ends in, so refusing it too is a double fault (covered by
``test_a_refused_abort_still_ends_the_turn_aborted``); ``fail`` is sent only on
errors outside a round, which a healthy loopback model never causes.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from statemachine.exceptions import TransitionNotAllowed

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import Journal
from tests.support.fake_model import FakeModel


class RefuseOnce:
    """A turn-machine listener that refuses the first ``event`` sent to it."""

    def __init__(self, event: str) -> None:
        self.event = event
        self.fired = False

    def before_transition(self, event: Any, machine: Any) -> None:
        if str(event) == self.event and not self.fired:
            self.fired = True
            raise TransitionNotAllowed(event, machine.configuration)


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


# event refused -> (prompt, approval policy, steer on the first text delta)
CASES: dict[str, tuple[str, str, bool]] = {
    "start": ("hello", "never", False),
    "inputs_claimed": ("hello", "never", False),
    "stream_opened": ("hello", "never", False),
    "round_done": ("hello", "never", False),
    "seal": ("hello", "never", False),
    "tools_done": ("TOOL hello", "never", False),
    "approval_needed": ("TOOL hello", "untrusted", False),
    "approval_answered": ("TOOL hello", "untrusted", False),
    "steering_claimed": ("hello", "never", True),
    "round_failed": ("hello", "never", False),
    "retry_due": ("hello", "never", False),
    "interrupt": ("TOOL hello", "never", False),
}


@pytest.mark.parametrize("event", sorted(CASES))
def test_a_refused_event_ends_the_turn_aborted_and_its_input_replays_once(
    tmp_path: Path, event: str, caplog: pytest.LogCaptureFixture
) -> None:
    prompt, approval, steer = CASES[event]
    state = tmp_path / "state"
    retrying = event in ("round_failed", "retry_due")
    interrupting = event == "interrupt"
    with FakeModel(
        chunk_delay_s=0.005, fail_first=1 if retrying else 0, tool_sleep_s=5 if interrupting else 0
    ) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            approval=approval,
            env={"MIND_HOME": str(tmp_path / "home")},
        )
        refuse = RefuseOnce(event)

        async def first() -> tuple[str, str, list[str]]:
            async with mind.Runtime.open(state_root=state) as rt:
                s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
                s.turn_observers.append(refuse)
                s.send(prompt, message_id="m1")
                turn = s.current
                assert turn is not None
                sent = ["m1"]
                async for e in s.events():
                    if isinstance(e, ev.ApprovalRequestedEvent):
                        turn.decide(e.call_id, "yes")
                    elif isinstance(e, ev.MessageDeltaEvent) and steer and len(sent) == 1:
                        s.steer("also this", message_id="m2")
                        sent.append("m2")
                    elif isinstance(e, ev.ToolCallEvent) and interrupting:
                        turn.interrupt()
                return s.session_id, turn.outcome.status, sent

        with caplog.at_level(logging.ERROR, logger="mind.runtime"):
            sid, status, sent = anyio.run(first)
        assert refuse.fired
        assert status == "aborted"
        path = state / "sessions" / sid / "journal.jsonl"
        (end,) = [r for r in _records(path) if isinstance(r, jr.TurnCompleted)]
        assert (end.status, end.acknowledged) == (jr.TurnStatus.aborted, [])
        logged = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(logged) == 1 and "turn chart" in logged[0] and repr(event) in logged[0]

        async def reopen() -> list[str]:
            async with mind.Runtime.open(state_root=state) as rt:
                s = await rt.open_session(sid, config=config)
                turn = s.resume_pending()
                assert turn is not None
                statuses = []
                async for e in s.events():
                    if isinstance(e, ev.TurnCompletedEvent):
                        statuses.append(str(e.status))
                return statuses

        assert anyio.run(reopen) == ["completed"]
    ends = [r for r in _records(path) if isinstance(r, jr.TurnCompleted)]
    assert [str(e.status) for e in ends] == ["aborted", "completed"]
    assert ends[1].acknowledged == sent


def test_a_refused_abort_still_ends_the_turn_aborted(tmp_path: Path) -> None:
    """The runtime closes mid-turn (abort) while ``interrupt`` was refused:
    the fail-safe itself meets a refusal and the turn still ends aborted."""
    state = tmp_path / "state"
    with FakeModel(tool_sleep_s=5) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        class RefuseAll(RefuseOnce):
            def before_transition(self, event: Any, machine: Any) -> None:
                if str(event) in ("interrupt", "abort"):
                    self.fired = True
                    raise TransitionNotAllowed(event, machine.configuration)

        refuse = RefuseAll("abort")

        async def first() -> tuple[str, str]:
            async with mind.Runtime.open(state_root=state) as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.turn_observers.append(refuse)
                s.send("TOOL hello", message_id="m1")
                turn = s.current
                assert turn is not None
                async for e in s.events():
                    if isinstance(e, ev.ToolCallEvent):
                        turn.interrupt()
                return s.session_id, turn.outcome.status

        sid, status = anyio.run(first)
    assert refuse.fired and status == "aborted"
    (end,) = [
        r
        for r in _records(state / "sessions" / sid / "journal.jsonl")
        if isinstance(r, jr.TurnCompleted)
    ]
    assert (end.status, end.acknowledged) == (jr.TurnStatus.aborted, [])
