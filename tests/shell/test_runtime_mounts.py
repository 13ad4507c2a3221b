"""How the runtime's own session claims end when the mount ledger is
contended, damaged, or the session cannot be created — through the library
API, with a real ledger and a real live lock holder (docs/design/mounts.md)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest
import yaml

import mind
from mind.errors import MountRefused, SessionError
from mind.generated.session_mounts import MountOwner, SessionMountsFile
from mind.shell.mounts import LEDGER_NAME, LOCK_NAME, read_ledger_strict


def _config(tmp_path: Path) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "hi"}]), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), env={})


def _existing_session(state: Path, config: mind.ResolvedConfig, cwd: Path) -> str:
    async def main() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            return (await rt.create_session(cwd=cwd, config=config)).session_id

    return anyio.run(main)


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A live process that is not this one (it holds the planted lock)."""
    proc = subprocess.Popen(["sleep", "120"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_held_lock_refuses_opening_busy_and_a_new_session_goes_on_unpublished(
    tmp_path: Path, live_pid: int
) -> None:
    state, config = tmp_path / "state", _config(tmp_path)
    sid = _existing_session(state, config, tmp_path)

    async def main() -> tuple[str, MountRefused | None, list[str]]:
        async with mind.Runtime.open(state_root=state) as rt:
            lock = rt.mounts.lock_path
            lock.write_bytes(f"{live_pid}-held".encode())  # another live process holds it
            try:
                with pytest.raises(MountRefused) as refused:
                    await rt.open_session(sid, config=config)
                fresh = await rt.create_session(cwd=tmp_path, config=config)
                warning = fresh.mount.warning
                outcome = await fresh.run("works anyway")
            finally:
                lock.unlink()
            return refused.value.kind, warning, [outcome.status]

    kind, warning, statuses = anyio.run(main)
    assert kind == "busy"
    assert warning is not None and warning.kind == "busy"  # a new id: a warning, not a refusal
    assert statuses == ["completed"]


def test_a_damaged_ledger_refuses_opening_and_a_new_session_goes_on_unpublished(
    tmp_path: Path,
) -> None:
    state, config = tmp_path / "state", _config(tmp_path)
    sid = _existing_session(state, config, tmp_path)
    (state / LEDGER_NAME).write_bytes(b"{")

    async def main() -> tuple[str, MountRefused | None]:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(MountRefused) as refused:
                await rt.open_session(sid, config=config)
            fresh = await rt.create_session(cwd=tmp_path, config=config)
            (state / LEDGER_NAME).unlink()  # so closing the runtime finds a ledger to clean
            return refused.value.kind, fresh.mount.warning

    kind, warning = anyio.run(main)
    assert kind == "unavailable"
    assert warning is not None and warning.kind == "unavailable"


def test_a_claim_is_given_back_when_the_session_cannot_be_created_and_parking_keeps_it(
    tmp_path: Path,
) -> None:
    state, config = tmp_path / "state", _config(tmp_path)
    sid = _existing_session(state, config, tmp_path)

    def listed() -> set[str]:
        return {s for record in read_ledger_strict(state / LEDGER_NAME) for s in record.sessionIds}

    async def main() -> tuple[set[str], set[str], set[str]]:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(SessionError, match="already exists"):
                await rt.create_session(cwd=tmp_path, config=config, session_id=sid)
            after_refusal = listed()
            other = await rt.create_session(cwd=tmp_path, config=config)
            other.park()
            parked = listed()
            other.attach()
            outcome = await other.run("still mine")
            assert outcome.status == "completed"
            return after_refusal, parked, {other.session_id}

    after_refusal, parked, other = anyio.run(main)
    assert sid not in after_refusal  # the claim taken for the refused create was given back
    assert parked == other  # a parked session stays claimed by this process
    assert not (state / LOCK_NAME).exists()


def test_a_session_another_live_process_hosts_is_refused_occupied(
    tmp_path: Path, live_pid: int
) -> None:
    state, config = tmp_path / "state", _config(tmp_path)
    sid = _existing_session(state, config, tmp_path)
    # An older mind's record (no start identity): the live pid alone says it holds the session.
    record = MountOwner(pid=live_pid, startedAt=0, sessionIds=[sid])
    ledger = msgspec.json.encode(SessionMountsFile(version=1, owners=[record]))
    (state / LEDGER_NAME).write_bytes(ledger)

    async def main() -> MountRefused:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(MountRefused) as refused:
                await rt.open_session(sid, config=config)
            return refused.value

    refused = anyio.run(main)
    assert refused.kind == "occupied"
    assert [h.pid for h in refused.holders] == [live_pid]
