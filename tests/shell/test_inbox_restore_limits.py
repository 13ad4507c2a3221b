"""Restored inbox entries obey the same limits as live ones (docs/design/mailbox.md §7).

A planted 60,000-entry ``inbox.json`` is reopened through the real runtime
against a loopback model: the first turn claims at most the live limit (20
user inputs), in file order; the rest stays in ``inbox.json``, in order, for
the next turns; nothing is lost when the process stops part-way.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.machines.mailbox import MAX_USER_MESSAGES
from mind.shell.inbox import Inbox, encode_inbox
from mind.shell.journal import Journal
from tests.support.fake_model import FakeModel

PLANTED = 60_000


def _ids(n: int, start: int = 0) -> list[str]:
    return [f"msg-{i:05d}" for i in range(start, n)]


def test_a_planted_huge_inbox_replays_at_most_the_live_limit_per_turn(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with FakeModel() as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        async def create() -> str:
            async with mind.Runtime.open(state_root=state) as rt:
                return (await rt.create_session(cwd=tmp_path, config=config)).session_id

        sid = anyio.run(create)
        directory = state / "sessions" / sid
        now = time.time_ns() // 1_000_000
        (directory / "inbox.json").write_bytes(
            encode_inbox(
                InboxEntry(
                    message_id=mid,
                    text=f"planted {mid}",
                    kind=InboxKind.prompt,
                    accepted_at_ms=now,
                    recovered=False,
                )
                for mid in _ids(PLANTED)
            )
        )

        async def replay_one_turn() -> tuple[list[str], str]:
            async with mind.Runtime.open(state_root=state) as rt:
                session = await rt.open_session(sid, config=config)
                turn = session.resume_pending()
                assert turn is not None
                claimed = [m.message_id for m in turn.inputs]
                async for event in turn:
                    if isinstance(event, ev.TurnCompletedEvent):
                        break
                return claimed, turn.outcome.status
            # Leaving the runtime aborts the next turn (already started with
            # the next 20): its inputs are not acknowledged and stay on disk.

        claimed, status = anyio.run(replay_one_turn)

    assert status == "completed"
    assert claimed == _ids(MAX_USER_MESSAGES)
    with Journal.open(directory / "journal.jsonl") as journal:
        records = list(journal.records)
    done = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done[0].acknowledged == _ids(MAX_USER_MESSAGES)
    assert all(not d.acknowledged for d in done[1:])  # the aborted next turn consumed nothing
    per_turn: dict[str, int] = {}
    for r in records:
        if isinstance(r, jr.UserMessage):
            per_turn[r.turn_id] = per_turn.get(r.turn_id, 0) + 1
    assert max(per_turn.values()) <= MAX_USER_MESSAGES
    acknowledged = set(done[0].acknowledged)
    left = Inbox.open(directory / "inbox.json", acknowledged=acknowledged)
    # Nothing lost, order kept: every entry not acknowledged is still there.
    assert [e.message_id for e in left.entries] == _ids(PLANTED, MAX_USER_MESSAGES)
