"""The lease and the mount claim block (an ``flock``, backoff waits): async
code calls them through ``anyio.to_thread.run_sync``. They must work from a
worker thread and leave the event loop free meanwhile.

The stall is measured as the longest gap between ticks of a task that asks
to wake every 5 ms; the blocking call is held up by a real other holder
(a child process's ``flock``, a live peer's lock token).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

import mind
from mind.shell.lease import SessionLease
from mind.shell.mounts import LOCK_NAME, MountHandle, MountLedger

pytestmark = pytest.mark.anyio
T = TypeVar("T")

_FLOCK_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()
"""
_STALL_BOUND_S = 0.05


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _run_while_measuring(
    call: Callable[[], T], held: Callable[[], bool], free: Callable[[], None]
) -> tuple[T, float]:
    """Run ``call`` in a worker thread; once ``held()`` says it is waiting on
    the other holder (checked on each tick for up to 5 s), ``free()`` it.

    Returns:
        What ``call`` returned, and the longest gap between loop ticks, s.
    """
    result: list[T] = []
    longest = 0.0

    async def worker() -> None:
        result.append(await anyio.to_thread.run_sync(call))

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        last = time.monotonic()
        deadline = last + 5
        freed = False
        while not result:
            await anyio.sleep(0.005)
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now
            assert now < deadline, "the blocking call never finished"
            if not freed and held():
                free()
                freed = True
    return result[0], longest


@pytest.fixture
def lease_lock_holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A child process holding the ``flock`` of ``tmp_path/s/lease.lock``."""
    (tmp_path / "s").mkdir(mode=0o700)
    holder = subprocess.Popen(
        [sys.executable, "-c", _FLOCK_HOLDER, str(tmp_path / "s" / "lease.lock")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        yield holder
    finally:
        if holder.stdin is not None and not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()


async def test_a_lease_waiting_for_its_lock_in_a_worker_thread_leaves_the_loop_free(
    tmp_path: Path, lease_lock_holder: subprocess.Popen[str]
) -> None:
    path = tmp_path / "s" / "lease"
    ticks = [0]

    def held() -> bool:  # the worker has had many ticks' time to block on the flock
        ticks[0] += 1
        return ticks[0] >= 10

    def free() -> None:
        assert lease_lock_holder.stdin is not None
        lease_lock_holder.stdin.close()

    lease, longest = await _run_while_measuring(lambda: SessionLease.acquire(path, "s"), held, free)
    try:
        assert lease.record.pid == os.getpid()
        assert ticks[0] >= 10  # it did wait for the other holder
        assert longest < _STALL_BOUND_S, f"the loop stalled {longest * 1000:.0f} ms"
    finally:
        lease.release()


async def test_a_mount_claim_backing_off_in_a_worker_thread_leaves_the_loop_free(
    tmp_path: Path,
) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    lock = root / LOCK_NAME
    lock.write_bytes(f"{os.getppid()}-peer".encode())  # a live peer holds the lock
    waits: list[float] = []

    def sleep_s(seconds: float) -> None:
        waits.append(seconds)
        time.sleep(seconds)  # the real backoff wait, on the worker thread

    ledger = MountLedger(root, sleep_s=sleep_s)
    try:
        handle, longest = await _run_while_measuring(
            lambda: ledger.claim("s1"), held=lambda: bool(waits), free=lock.unlink
        )
        assert isinstance(handle, MountHandle) and handle.state == "reserved"
        assert waits  # it did back off while the peer held the lock
        assert longest < _STALL_BOUND_S, f"the loop stalled {longest * 1000:.0f} ms"
    finally:
        ledger.close()


async def test_leaving_the_runtime_while_a_peer_holds_the_ledger_lock_leaves_the_loop_free(
    tmp_path: Path,
) -> None:
    """Exit gives back journals, leases and this process's ledger record: the
    ledger rewrite backs off while a live peer holds the lock, on a worker
    thread, so a loop task keeps ticking until the test frees the lock."""
    script = tmp_path / "script.yaml"
    script.write_text("- text: hi\n", encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={})
    leaving = anyio.Event()
    left = anyio.Event()
    ticks_while_leaving = 0
    longest = 0.0

    async def ticker(lock: Path) -> None:
        nonlocal ticks_while_leaving, longest
        await leaving.wait()
        last = time.monotonic()
        deadline = last + 5
        while not left.is_set():
            await anyio.sleep(0.005)
            now = time.monotonic()
            longest = max(longest, now - last)
            last = now
            assert now < deadline, "leaving the runtime never finished"
            ticks_while_leaving += 1
            if ticks_while_leaving == 10:  # the exit has had many ticks' time to back off
                lock.unlink()

    async with anyio.create_task_group() as tg:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            lease_path = session.lease.path
            ledger_path = rt.mounts.ledger_path
            tg.start_soon(ticker, rt.mounts.lock_path)
            rt.mounts.lock_path.write_bytes(f"{os.getppid()}-peer".encode())  # a live peer
            leaving.set()
        left.set()

    assert ticks_while_leaving >= 10  # it did wait for the peer
    assert longest < _STALL_BOUND_S, f"the loop stalled {longest * 1000:.0f} ms"
    assert not lease_path.exists()
    assert str(os.getpid()) not in ledger_path.read_text(encoding="utf-8")
