"""A daemon thread that republishes this process's mount set (docs/design/mounts.md §7)."""

from __future__ import annotations

import logging
import threading
from typing import final

from mind.errors import MountRefused
from mind.shell.mounts.claims import PUBLISH_INTERVAL_S, MountLedger

__all__ = ["RepublishTimer"]

_log = logging.getLogger("mind.mounts")


@final
class RepublishTimer:
    """Calls :meth:`MountLedger.republish` every ``interval_s`` on a daemon thread.

    A daemon thread never keeps the process alive (docs/design/mounts.md §7: the
    ``.unref()`` rule); :meth:`stop` ends it promptly (part of the exit
    funnel). Failures are logged, never raised.

    Args:
        ledger: the ledger to republish.
        interval_s: seconds between republishes (:data:`PUBLISH_INTERVAL_S`).
    """

    def __init__(self, ledger: MountLedger, *, interval_s: float = PUBLISH_INTERVAL_S) -> None:
        self._ledger = ledger
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="mind-mount-republish", daemon=True)

    def start(self) -> RepublishTimer:
        """Start the thread; returns ``self``."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and wait for it (at most one republish in progress)."""
        self._stop.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._ledger.republish()
            except MountRefused as refused:
                _log.warning("republishing mounts failed: %s", refused.reason)
