"""The approval requests of one turn that wait for the person: the one owner.

The turn machine knows *that* the turn is ``awaiting_approval``; this object
knows *which* calls were asked and what was answered. ``Turn.decide`` and
the tool call that waits both go through it, and ``Turn.pending_approvals``
reads it, so no client needs a queue of its own. It is the seam the durable
interaction service (the next chart of docs/design/turn.md) replaces.
"""

from __future__ import annotations

from typing import Literal, final

import anyio

__all__ = ["Decision", "PendingApprovals"]

Decision = Literal["yes", "no", "always"]
"""An answer to an approval request: run once, refuse, or run and stop asking
for this tool for the rest of the session."""


@final
class PendingApprovals:
    """Approval requests of one turn, by tool-call id, in the order asked.

    Single task: every method is called from the runtime's event loop thread.
    """

    def __init__(self) -> None:
        self._waiters: dict[str, anyio.Event] = {}
        self._answers: dict[str, Decision] = {}

    def pending(self) -> list[str]:
        """Call ids asked and not yet answered, in the order asked."""
        return [c for c in self._waiters if c not in self._answers]

    def asked(self, call_id: str) -> bool:
        """Whether ``call_id`` was ever asked in this turn."""
        return call_id in self._waiters

    def open(self, call_id: str) -> None:
        """A request for ``call_id`` is published; it waits for its own answer
        (a call asked twice — run, then re-run outside the sandbox — forgets
        the first answer).

        Requests are keyed by call id, and an id may repeat within a round
        (servers reuse ids): that stays unambiguous because a round's calls
        run one by one, so a second call with the id is asked only after the
        first one's request was answered.

        Raises:
            ValueError: a request for ``call_id`` is still unanswered (two
                open requests with one id would make ``decide`` ambiguous;
                refused rather than guessed).
        """
        if call_id in self._waiters and call_id not in self._answers:
            raise ValueError(f"an approval request for {call_id!r} is already waiting")
        self._answers.pop(call_id, None)
        self._waiters.pop(call_id, None)
        self._waiters[call_id] = anyio.Event()

    def decide(self, call_id: str, decision: Decision) -> None:
        """Answer the request of ``call_id``. The first decision wins.

        Raises:
            ValueError: ``decision`` is not ``yes`` | ``no`` | ``always``, or
                ``call_id`` was never asked (misuse; an approval never fails open).
        """
        if decision not in ("yes", "no", "always"):
            raise ValueError(f"decision must be 'yes', 'no' or 'always', not {decision!r}")
        waiter = self._waiters.get(call_id)
        if waiter is None:
            raise ValueError(f"no approval request for {call_id!r}")
        if call_id in self._answers:
            return
        self._answers[call_id] = decision
        waiter.set()

    async def wait(self, call_id: str) -> Decision:
        """The answer to the open request of ``call_id`` (waits for it).

        Raises:
            KeyError: ``call_id`` was never opened.
        """
        await self._waiters[call_id].wait()
        return self._answers[call_id]
