"""The index's background writer: one thread performing queued writes in order.

Index writes come from the turn's start and end, on the event loop; an
SQLite write may wait for another process's lock (up to
:data:`~mind.shell.index.db.QUICK_BUSY_TIMEOUT_MS`). So :meth:`WriteQueue.submit`
only queues the write and returns; one daemon thread performs the writes
first in, first out (so a session's notes land in the order they were made).
The queue is bounded: when it is full a write is refused (the caller logs
it; the index is derived, and the next listing catches the row up from the
journal). A daemon thread never keeps the process alive; :meth:`close`
drains what is queued first.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Final, final

__all__ = ["MAX_PENDING", "WriteQueue"]

MAX_PENDING: Final = 1024
"""Most writes queued at once (a turn makes two; more means the file is stuck)."""

_log = logging.getLogger("mind.index")


@final
class WriteQueue:
    """A bounded FIFO of write jobs run by one lazily started daemon thread.

    Thread-safe: any thread may submit, flush or close. A job that raises is
    logged on ``mind.index`` and the next one runs.

    Args:
        name: the thread's name.
        max_pending: most jobs queued and not yet started (:data:`MAX_PENDING`).
    """

    def __init__(self, *, name: str, max_pending: int = MAX_PENDING) -> None:
        self._name = name
        self._max_pending = max_pending
        self._cond = threading.Condition()
        self._jobs: collections.deque[Callable[[], None]] = collections.deque()
        self._running = False  # a job is being performed
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, job: Callable[[], None]) -> bool:
        """Queue ``job``; never waits. False when full or closed (not queued)."""
        with self._cond:
            if self._closed or len(self._jobs) >= self._max_pending:
                return False
            self._jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return True

    def flush(self, timeout_s: float) -> bool:
        """Wait until every job queued so far has been performed, at most
        ``timeout_s`` seconds. True when none is left (also when called from
        the writer thread itself, which cannot wait for itself)."""
        if threading.current_thread() is self._thread:
            return True
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._jobs or self._running:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout_s: float) -> bool:
        """Refuse new jobs, perform the queued ones (at most ``timeout_s``
        seconds; the rest are dropped and logged) and end the thread.
        Idempotent.

        Returns:
            Whether every queued job was performed.
        """
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        done = self.flush(timeout_s)
        with self._cond:
            dropped = len(self._jobs)
            self._jobs.clear()
            self._cond.notify_all()
        if dropped:
            _log.warning("%d index writes dropped at close (the index catches up later)", dropped)
        return done

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._closed:
                    self._cond.wait()
                if not self._jobs:
                    return  # closed and drained
                job = self._jobs.popleft()
                self._running = True
            try:
                job()
            except Exception:  # a bug in a job must not end the writer
                _log.exception("index write failed")
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()
