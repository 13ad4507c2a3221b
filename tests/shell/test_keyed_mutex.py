"""The keyed mutex (docs/design/processes.md §8; mind.shell.keyed_mutex):
one lock per key in use, FIFO, cancellation-safe, no memory for past keys."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from anyio import wait_all_tasks_blocked

from mind.shell.keyed_mutex import KeyedMutex

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_memory_does_not_grow_with_the_number_of_keys_used() -> None:
    mutex: KeyedMutex[str] = KeyedMutex()
    for n in range(10_000):
        async with mutex.hold(f"session-{n}"):
            assert len(mutex) == 1
    assert len(mutex) == 0
    # Many at once: one entry per key in use, none once all are released.
    held = anyio.Event()
    release = anyio.Event()
    entered = 0

    async def holder(key: str) -> None:
        nonlocal entered
        async with mutex.hold(key):
            entered += 1
            if entered == 100:
                held.set()
            await release.wait()

    async with anyio.create_task_group() as group:
        for n in range(100):
            group.start_soon(holder, f"k{n}")
        await held.wait()
        assert len(mutex) == 100
        release.set()
    assert len(mutex) == 0


async def test_one_key_is_served_first_come_first_served() -> None:
    mutex: KeyedMutex[str] = KeyedMutex()
    order: list[int] = []
    release = anyio.Event()

    async def first() -> None:
        async with mutex.hold("s"):
            await release.wait()

    async def waiter(n: int) -> None:
        async with mutex.hold("s"):
            order.append(n)
            await anyio.lowlevel.checkpoint()  # a holder that yields keeps the lock

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        await wait_all_tasks_blocked()
        for n in range(5):
            group.start_soon(waiter, n)
            await wait_all_tasks_blocked()  # queued in this order
        assert order == []
        release.set()
    assert order == [0, 1, 2, 3, 4]
    assert len(mutex) == 0


async def test_other_keys_do_not_wait() -> None:
    mutex: KeyedMutex[str] = KeyedMutex()
    async with mutex.hold("a"):
        with anyio.fail_after(5):
            async with mutex.hold("b"):
                assert len(mutex) == 2
    assert len(mutex) == 0


async def test_a_waiter_cancelled_while_waiting_leaves_no_trace() -> None:
    mutex: KeyedMutex[str] = KeyedMutex()
    order: list[str] = []
    release = anyio.Event()

    async def first() -> None:
        async with mutex.hold("s"):
            await release.wait()
            order.append("first")

    async def waiter(name: str) -> None:
        async with mutex.hold("s"):
            order.append(name)

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        await wait_all_tasks_blocked()
        with anyio.CancelScope() as doomed:
            async with anyio.create_task_group() as inner:
                inner.start_soon(waiter, "cancelled")
                await wait_all_tasks_blocked()
                group.start_soon(waiter, "second")
                await wait_all_tasks_blocked()
                doomed.cancel()
        assert len(mutex) == 1  # "first" holds it, "second" waits
        release.set()
    assert order == ["first", "second"]
    assert len(mutex) == 0


async def test_a_holder_cancelled_inside_releases_the_key() -> None:
    mutex: KeyedMutex[str] = KeyedMutex()
    with anyio.move_on_after(0):
        async with mutex.hold("s"):
            await anyio.sleep_forever()
    assert len(mutex) == 0
    with anyio.fail_after(5):
        async with mutex.hold("s"):
            assert len(mutex) == 1
