"""One claim on one session: :class:`MountHandle`, made by
:meth:`~mind.shell.mounts.claims.MountLedger.claim`.

The handle drives its :class:`~mind.machines.mount.MountMachine` through
settle / attach / park / abandon / release; giving a claim back rewrites the
ledger through the ledger that made it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from mind.errors import MountRefused
from mind.machines.mount import MountMachine, MountState

if TYPE_CHECKING:
    from mind.shell.mounts.claims import MountLedger

__all__ = ["MountHandle"]


@final
class MountHandle:
    """This process's claim on one session; returned by :meth:`MountLedger.claim`.

    The same object is returned for every re-entry while the session is
    hosted (idempotent, docs/design/mounts.md §5). Methods are thread-safe (the
    ledger's lock).

    Attributes:
        session_id: the claimed session.
        warning: for a brand-new id that could not be published, the refusal
            it would have been (``busy`` or ``unavailable``); else ``None``.
    """

    def __init__(self, ledger: MountLedger, session_id: str, machine: MountMachine) -> None:
        self._ledger = ledger
        self.session_id = session_id
        self._machine = machine
        self._published = False
        self.warning: MountRefused | None = None

    def __repr__(self) -> str:
        return f"MountHandle({self.session_id!r}, state={self.state!r})"

    @property
    def state(self) -> MountState:
        """``reserved | attached | parked | abandoned | released``."""
        return self._machine.state

    @property
    def hosted(self) -> bool:
        """The session is in this process's published set (reserved, attached or parked)."""
        return self._machine.hosted

    @property
    def published(self) -> bool:
        """This process's last successful write of its record listed this session.

        ``False`` for a brand-new id whose claim could not be published, until
        a later write (:meth:`MountLedger.republish`, or another claim or
        release of this process) succeeds; ``False`` while a live other
        process lists the session (the writes leave it out, docs/design/mounts.md
        §7.2); ``False`` once given back.
        """
        with self._ledger._mutex:
            return self.hosted and self._published

    def settle(self, *, attached: bool) -> None:
        """The resume finished: the session is hosted, shown (``attached``) or parked.

        No file I/O: the claim was published at :meth:`MountLedger.claim`.

        Raises:
            IllegalTransition: not ``reserved`` (misuse).
        """
        with self._ledger._mutex:
            self._machine.settle(attached=attached)

    def attach(self) -> None:
        """``parked -> attached`` (this session is shown again). No file I/O.

        Raises:
            IllegalTransition: not ``parked``.
        """
        with self._ledger._mutex:
            self._machine.attach()

    def park(self) -> None:
        """``attached -> parked``: another session is shown; this one keeps running
        in this process and stays published (docs/design/mounts.md §1). No file I/O.

        Raises:
            IllegalTransition: not ``attached``.
        """
        with self._ledger._mutex:
            self._machine.park()

    def abandon(self) -> bool:
        """The resume failed: give the claim back (``reserved -> abandoned``).

        Call only after the session's handles are really closed (docs/design/mounts.md §5: the claim
        must not vanish while writes may still happen).

        Returns:
            Whether the ledger now omits the session (``False``: the rewrite was
            refused; the record is corrected by the next republish, or ignored
            once this process exits).

        Raises:
            IllegalTransition: not ``reserved``.
        """
        with self._ledger._mutex:
            self._machine.abandon()
            return self._ledger._forget(self)

    def release(self) -> bool:
        """The session is closed in this process: ``attached | parked -> released``;
        on a ``reserved`` claim this is :meth:`abandon`. Idempotent once released.

        Returns:
            Whether the ledger now omits the session (see :meth:`abandon`).

        Raises:
            IllegalTransition: ``abandoned`` (already given back).
        """
        with self._ledger._mutex:
            if self.state == "released":
                return self.session_id not in self._ledger._on_disk
            if self.state == "reserved":
                return self.abandon()
            self._machine.release()
            return self._ledger._forget(self)
