"""Opening a session through the startup chart (``session_startup.yaml``):
real journal, inbox, lease and mount ledger in a temporary state root."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.errors import InboxCorruptError
from mind.generated import journal as jr
from mind.generated.inbox import InboxKind
from mind.shell.lease import read_holder
from mind.shell.mounts import MountLedger
from tests.support import records as rec
from tests.support.sessions import add_inputs, append_records, created_session


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

    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    (directory / "inbox.json").write_bytes(b"{not json")

    async def reopen() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(InboxCorruptError):
                await rt.open_session(sid, config=config)
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

    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    add_inputs(directory, (("m1", InboxKind.prompt), ("m2", InboxKind.steer)))
    append_records(
        directory,
        sid,
        [
            rec.turn_started("t1"),
            rec.user_message("t1", "m1", "m1", jr.Kind.prompt),
            rec.model_round("t1", "the answer to m1"),
            rec.user_message("t1", "m2", "m2", jr.Kind.steer),
        ],
    )

    async def reopen() -> tuple[list[str], jr.TurnCompleted]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session(sid, config=config)
            (terminal,) = [r for r in session.journal.records if isinstance(r, jr.TurnCompleted)]
            return [e.message_id for e in session.inbox.entries], terminal

    waiting, terminal = anyio.run(reopen)
    assert (terminal.status, terminal.acknowledged) == (jr.TurnStatus.aborted, [])
    assert waiting == ["m1", "m2"]


HOLD_LOCK = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, f"{os.getpid()}-holder".encode())
os.close(fd)
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
os.unlink(sys.argv[1])
"""


def test_opening_against_a_contended_ledger_never_stalls_the_event_loop(
    tmp_path: Path,
) -> None:
    """Another live process holds ``session-mounts.lock``: the claim backs off
    (25-400 ms waits) in a worker thread, so a ticker task on the loop keeps
    waking every ~5 ms; the longest gap between its wakeups stays <= 50 ms."""
    state = tmp_path / "state"
    config = _config(tmp_path, [{"text": "hi"}])

    sid = created_session(state, tmp_path, config)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(state / "session-mounts.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    gaps: list[float] = []
    order: list[str] = []
    contended = anyio.Event()  # 20 wakeups while the open is under way: it is backing off
    ticking = anyio.Event()  # the ticker runs before the open starts

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            ticking.set()
            if len(gaps) == 20:
                contended.set()

    async def release_once_contended() -> None:
        with anyio.fail_after(10):
            await contended.wait()
        assert holder.stdin is not None
        holder.stdin.close()
        await anyio.to_thread.run_sync(holder.wait)
        order.append("released")

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt, anyio.create_task_group() as tg:
            tg.start_soon(tick)
            tg.start_soon(release_once_contended)
            await ticking.wait()
            session = await rt.open_session(sid, config=config)
            order.append("opened")
            assert rt.sessions == {sid: session}
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert order == ["released", "opened"]  # the claim waited for the peer's lock
    assert max(gaps) <= 0.050, f"longest event-loop stall {max(gaps) * 1000:.0f} ms"


def test_a_cancelled_open_gives_back_what_it_took(tmp_path: Path) -> None:
    """The open is cancelled while its claim waits on a peer's lock: the claim
    ends (a worker thread is not interrupted), the next step sees the
    cancellation, and the chart's releases run shielded — nothing stays
    claimed, leased or hosted."""
    state = tmp_path / "state"
    config = _config(tmp_path, [{"text": "hi"}])

    sid = created_session(state, tmp_path, config)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(state / "session-mounts.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    outcome: list[str] = []
    backing_off = threading.Event()  # set from the claim's worker thread

    class Contended:
        def after_transition(self, event: str) -> None:
            if event == "contend":
                backing_off.set()

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            rt.mounts.observe(Contended())
            with anyio.CancelScope() as scope:

                async def open_it() -> None:
                    await rt.open_session(sid, config=config)
                    outcome.append("opened")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(open_it)
                    assert await anyio.to_thread.run_sync(backing_off.wait, 10)
                    scope.cancel()
                    assert holder.stdin is not None
                    holder.stdin.close()  # the claim can now be granted
            assert scope.cancelled_caught
            assert outcome == []
            assert rt.sessions == {}
            assert rt.mounts.hosted() == frozenset()
            assert MountLedger(state).holders(sid) == []
            assert read_holder(state / "sessions" / sid / "lease") is None

    try:
        anyio.run(main)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_reopening_a_broken_session_against_a_contended_ledger_never_stalls_the_loop(
    tmp_path: Path,
) -> None:
    """The hosted handle's journal refuses appends (its descriptor now points
    at ``/dev/full``: ENOSPC), so re-opening closes it and opens afresh; with
    another process holding ``session-mounts.lock``, giving its claim back and
    claiming again both back off — off the loop: the longest gap between a
    ticker's 5 ms wakeups stays <= 50 ms."""
    state = tmp_path / "state"
    config = _config(tmp_path, [{"text": "hi"}])
    gaps: list[float] = []
    ticking = anyio.Event()  # the ticker runs before the open starts
    order: list[str] = []
    contended = anyio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await anyio.sleep(0.005)
            now = time.monotonic()
            gaps.append(now - last)
            ticking.set()
            last = now
            if len(gaps) == 20:
                contended.set()

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            broken = await rt.create_session(cwd=tmp_path, config=config)
            journal = (state / "sessions" / broken.session_id / "journal.jsonl").resolve()
            (fd,) = _open_fds_to(journal)
            full = os.open("/dev/full", os.O_WRONLY)
            os.dup2(full, int(fd))
            os.close(full)
            failed = await broken.submit("hello").wait()
            # Nothing of the turn is durable: it reports what the reopen concludes.
            assert failed.status == "aborted" and broken.journal.broken is not None
            holder = await anyio.open_process(
                [sys.executable, "-c", HOLD_LOCK, str(state / "session-mounts.lock")]
            )
            async with holder:
                assert holder.stdout is not None and holder.stdin is not None
                said = b""
                while not said.endswith(b"\n"):  # a byte stream: the line may come in parts
                    said += await holder.stdout.receive()
                assert said == b"held\n"

                async def release_once_contended() -> None:
                    assert holder.stdin is not None
                    with anyio.fail_after(10):
                        await contended.wait()
                    await holder.stdin.aclose()
                    await holder.wait()
                    order.append("released")

                async with anyio.create_task_group() as tg:
                    tg.start_soon(tick)
                    tg.start_soon(release_once_contended)
                    await ticking.wait()
                    session = await rt.open_session(broken.session_id, config=config)
                    order.append("opened")
                    tg.cancel_scope.cancel()
            assert session is not broken and broken.journal.closed
            assert rt.sessions == {session.session_id: session}

    anyio.run(main)
    assert order == ["released", "opened"]
    assert max(gaps) <= 0.050, f"longest event-loop stall {max(gaps) * 1000:.0f} ms"
