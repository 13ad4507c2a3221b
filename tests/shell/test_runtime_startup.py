"""Opening a session through the startup chart (``session_startup.yaml``):
real journal, inbox, lease and mount ledger in a temporary state root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.errors import InboxCorruptError
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from mind.shell.lease import read_holder
from mind.shell.mounts import MountLedger


def _config(tmp_path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), env={})


def _open_fds_to(path: Path) -> list[str]:
    """This process's descriptors that point at ``path``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found.append(fd)
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return found


def test_a_damaged_inbox_gives_back_the_journal_the_lease_and_the_mount(
    tmp_path: Path,
) -> None:
    """A failure after the journal was opened releases, in reverse order,
    everything taken: the journal's descriptor too (it used to leak)."""
    state = tmp_path / "state"
    config = _config(tmp_path, [{"text": "hi"}])

    async def create() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            return rt.create_session(cwd=tmp_path, config=config).session_id

    sid = anyio.run(create)
    directory = state / "sessions" / sid
    (directory / "inbox.json").write_bytes(b"{not json")

    async def reopen() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(InboxCorruptError):
                rt.open_session(sid, config=config)
            assert _open_fds_to((directory / "journal.jsonl").resolve()) == []
            assert read_holder(directory / "lease") is None
            assert MountLedger(state).holders(sid) == []
            assert sid not in rt.mounts.hosted()
            assert rt.sessions == {}

    anyio.run(reopen)


def test_steering_claimed_after_the_final_answer_replays_after_a_crash(tmp_path: Path) -> None:
    """Crash after drain-or-seal claimed steering, before the next round: the
    turn chart (replayed, then ``recover``) closes it ``aborted``, so the
    steering input is not acknowledged unanswered — it replays."""
    state = tmp_path / "state"
    config = _config(tmp_path, [{"text": "hi"}])

    async def create() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            return rt.create_session(cwd=tmp_path, config=config).session_id

    sid = anyio.run(create)
    directory = state / "sessions" / sid
    inbox = Inbox.open(directory / "inbox.json", acknowledged=())
    for mid, kind in (("m1", InboxKind.prompt), ("m2", InboxKind.steer)):
        inbox.add(
            InboxEntry(message_id=mid, text=mid, kind=kind, accepted_at_ms=1, recovered=False)
        )
    with Journal.open(directory / "journal.jsonl", session_id=sid) as journal:
        for record in (
            jr.TurnStarted(
                seq=0,
                recorded_at_ms=0,
                turn_id="t1",
                provider="scripted",
                model="m",
                approval=jr.Approval.never,
                tool_starts=True,
            ),
            jr.UserMessage(
                seq=0,
                recorded_at_ms=0,
                turn_id="t1",
                message_id="m1",
                text="m1",
                kind=jr.Kind.prompt,
            ),
            jr.ModelRound(
                seq=0,
                recorded_at_ms=0,
                turn_id="t1",
                round=0,
                text="the answer to m1",
                reasoning="",
                tool_calls=[],
                finish=jr.Finish.stop,
                usage=jr.Usage(input_tokens=1, output_tokens=1),
                provider="scripted",
                provider_items=[],
            ),
            jr.UserMessage(
                seq=0,
                recorded_at_ms=0,
                turn_id="t1",
                message_id="m2",
                text="m2",
                kind=jr.Kind.steer,
            ),
        ):
            journal.append(record, sync=True)

    async def reopen() -> tuple[list[str], jr.TurnCompleted]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = rt.open_session(sid, config=config)
            (terminal,) = [r for r in session.journal.records if isinstance(r, jr.TurnCompleted)]
            return [e.message_id for e in session.inbox.entries], terminal

    waiting, terminal = anyio.run(reopen)
    assert (terminal.status, terminal.acknowledged) == (jr.TurnStatus.aborted, [])
    assert waiting == ["m1", "m2"]
