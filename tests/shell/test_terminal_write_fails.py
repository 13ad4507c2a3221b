"""A turn whose terminal record cannot be written reports what the next open
will write (docs/design/turn.md §2, the ``turn.yaml`` recovery block).

The terminal is the one record the live process cannot make durable here, so
the turn is what its durable records say: the driver replays them into a
fresh turn machine and sends ``recover`` — the same rule the next open
applies — and reports that status and those acknowledgements. A listener on
the runtime's own turn machine replaces ``journal.jsonl`` with an identical
copy as the turn enters its terminal state (a real file swap: the fsynced
terminal append then meets a different inode, ``JournalReplacedError``).
After the runtime closes, the session is reopened: the receipt recovery
writes must match the live report, and every input must be answered or
replay exactly once.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.turn import TERMINAL_STATES
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from tests.support.fake_model import FakeModel


class ReplaceJournalAtTheTerminal:
    """Swap the journal file for an identical copy when the turn machine
    enters its terminal state (before the driver writes the terminal)."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.fired = False

    def after_transition(self, target: Any) -> None:
        if self.path is None or self.fired or target.id not in TERMINAL_STATES:
            return
        self.fired = True
        copy = self.path.with_name("journal.copy")
        shutil.copyfile(self.path, copy)
        os.replace(copy, self.path)


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


# case -> (503s before answering, live status = the reopen's receipt, acknowledged)
CASES = {
    # A final answer journaled, then steering claimed and answered: reopen
    # closes it completed, acknowledging both inputs (the person has the answer).
    "answered": (0, "completed", ["m1", "m2"]),
    # A transient failure with no retries left: nothing durable answers the
    # input, so reopen closes it aborted and the input replays.
    "failed": (1, "aborted", []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_terminal_that_cannot_be_written_reports_what_reopening_writes(
    tmp_path: Path, case: str
) -> None:
    failures, status, acknowledged = CASES[case]
    state = tmp_path / "state"
    with FakeModel(chunk_delay_s=0.005, fail_first=failures) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "0"},
        )
        swap = ReplaceJournalAtTheTerminal()

        async def live() -> tuple[str, mind.TurnOutcome, dict[str, str], list[str]]:
            async with mind.Runtime.open(state_root=state) as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                swap.path = s.journal.path
                s.turn_observers.append(swap)
                turn = s.submit("hello", message_id="m1")
                sent = ["m1"]
                async for e in turn:
                    if isinstance(e, ev.MessageDeltaEvent) and len(sent) == 1:
                        s.steer("one more thing", message_id="m2")
                        sent.append("m2")
                held = {m.message_id: m.state for m in s.mailbox.messages()}
                return s.session_id, turn.outcome, held, [m.message_id for m in s.waiting]

        sid, outcome, held, waiting = anyio.run(live)
        assert swap.fired
        assert outcome.status == status
        assert isinstance(outcome.event.failure, ev.Failure)
        assert "could not write the terminal record" in outcome.event.failure.message
        # What the live mailbox settled is what the receipt will acknowledge;
        # the rest waits (it replays after the reopen).
        assert sorted(m for m, st in held.items() if st == "acknowledged") == acknowledged
        assert sorted(waiting) == sorted(set(held) - set(acknowledged))
        directory = state / "sessions" / sid
        # The terminal was never written: the turn is open on disk.
        assert not [
            r for r in _records(directory / "journal.jsonl") if isinstance(r, jr.TurnCompleted)
        ]

        async def reopen() -> tuple[ev.SessionRecoveredEvent | None, mind.TurnOutcome | None]:
            async with mind.Runtime.open(state_root=state) as rt:
                s = await rt.open_session(sid, config=config)
                turn = s.resume_pending()
                return s.recovery, (await turn.wait() if turn is not None else None)

        recovery, replayed = anyio.run(reopen)
    ends = [r for r in _records(directory / "journal.jsonl") if isinstance(r, jr.TurnCompleted)]
    # The reopen's receipt for the turn says what the live process reported.
    assert (str(ends[0].status), ends[0].acknowledged) == (status, acknowledged)
    assert recovery is not None
    # Nothing lost, nothing answered twice: each input acknowledged exactly once.
    acked = [m for r in ends for m in r.acknowledged]
    assert sorted(acked) == sorted(held)
    if acknowledged == sorted(held):
        assert replayed is None
    else:
        assert replayed is not None and replayed.status == "completed"
    assert Inbox.open(directory / "inbox.json", acknowledged=()).entries == []
