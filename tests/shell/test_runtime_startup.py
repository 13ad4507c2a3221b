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
