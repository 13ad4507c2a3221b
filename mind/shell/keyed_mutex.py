"""Per-key serialisation that frees idle keys (``docs/design/processes.md`` §8).

One :class:`anyio.Lock` per key in use — a session id, an interaction id —
made on first use and dropped when its last holder or waiter leaves: memory
follows the keys in use now, not every key ever used.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

__all__ = ["KeyedMutex"]

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0
    """Holder plus waiters; the entry goes when it drops to 0."""


class KeyedMutex(Generic[K]):
    """Mutual exclusion per key, within one event loop (not across threads
    or processes).

    Rules (§8): tasks holding different keys never wait for each other; the
    tasks of one key are served first come, first served (anyio's lock
    queues waiters in order); a task cancelled while waiting leaves the
    queue without ever holding the key, and one cancelled while holding
    releases it. ``len()`` is the number of keys held or waited for.
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        """Hold ``key`` for the ``async with`` body, waiting for earlier holders.

        Raises:
            anyio.get_cancelled_exc_class(): cancelled while waiting (the key
                was never held) or inside the body (it was released).
        """
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]
