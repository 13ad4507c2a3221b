"""The handle of one running turn (``Turn``: events, approvals, interrupt)
and how it ended (``TurnOutcome``)."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Final, final

import anyio
import msgspec

from mind.conversation import Usage as RoundUsage
from mind.errors import (
    StorageError,
)
from mind.generated import events as ev
from mind.machines.mailbox import MailboxMessage
from mind.shell.interactions import Decision as Decision  # re-exported: the public name
from mind.shell.interactions import NotTaken, as_decision

if TYPE_CHECKING:
    from mind.shell.session import Session


DELTA_SLACK: Final = 64
"""Items an :class:`EventChannel` holds before it starts coalescing deltas."""

_Delta = ev.MessageDeltaEvent | ev.ReasoningDeltaEvent
_DELTAS: Final = (ev.MessageDeltaEvent, ev.ReasoningDeltaEvent)


class _Run:
    """Queued deltas of one kind and turn merged into one: the pieces are
    joined when taken, so merging costs O(1) per delta (not a copy of the
    text so far)."""

    __slots__ = ("first", "pieces")

    def __init__(self, first: _Delta) -> None:
        self.first = first
        self.pieces = [first.text]

    def event(self) -> _Delta:
        if len(self.pieces) == 1:
            return self.first
        return type(self.first)(turn_id=self.first.turn_id, text="".join(self.pieces))


class EventChannel:
    """The event queue of one consumer: the producer never waits, and what it
    holds is bounded.

    The bound: lifecycle events (every event but ``message.delta`` and
    ``reasoning.delta``) are always queued and never dropped — a turn has as
    many as its rounds and tool calls make. Deltas are queued one per event
    while fewer than ``slack`` items wait; past that a delta is merged into
    the newest queued delta of the same kind and turn *since the last queued
    lifecycle event* (text appended), so a slow consumer gets fewer, longer
    deltas carrying the same text. Queued deltas are thus at most ``slack``
    plus two (one per kind) per queued lifecycle event, however the kinds
    alternate.

    The order kept: lifecycle events keep their order, and a delta never
    moves across one (the text before a lifecycle event is exactly what was
    sent before it). Within a run of deltas between two lifecycle events the
    text of each kind is complete and in order; how message and reasoning
    text interleaved inside the run may be lost once it coalesces.
    """

    def __init__(self, *, slack: int = DELTA_SLACK) -> None:
        """``slack``: items queued before deltas coalesce (0: from the first)."""
        self._items: deque[ev.Event | _Run] = deque()
        # The open runs: the newest queued delta per (kind, turn) since the
        # last lifecycle event; a lifecycle event closes them all.
        self._open: dict[tuple[type, str], _Run] = {}
        self._wakeup = anyio.Event()
        self.closed = False
        self.slack = slack
        """Items queued before deltas coalesce; may be raised once a reader comes."""

    def __len__(self) -> int:
        """Events queued and not yet taken (a merged run counts once)."""
        return len(self._items)

    def put(self, event: ev.Event) -> None:
        """Queue ``event`` (coalescing a delta past the slack); never blocks."""
        if isinstance(event, _DELTAS):
            key = (type(event), event.turn_id)
            run = self._open.get(key)
            if run is not None and len(self._items) >= self.slack:
                run.pieces.append(event.text)
                return
            run = self._open[key] = _Run(event)
            self._items.append(run)
        else:
            self._open.clear()
            self._items.append(event)
        self._wakeup.set()

    def clear(self) -> None:
        """Forget every queued event (nobody is reading them)."""
        self._items.clear()
        self._open.clear()

    def close(self) -> None:
        """No more events: :meth:`get` returns ``None`` once the queue is empty."""
        self.closed = True
        self._wakeup.set()

    async def get(self) -> ev.Event | None:
        """The next event, or None once closed and drained."""
        while not self._items:
            if self.closed:
                return None
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
        item = self._items.popleft()
        if not isinstance(item, _Run):
            return item
        key = (type(item.first), item.first.turn_id)
        if self._open.get(key) is item:
            del self._open[key]  # taken: later deltas start a new run
        return item.event()


@final
class EventFanOut:
    """Where a session's turn events are published: each event once, into
    the bounded channel of every consumer subscribed now (the session's
    ``events()`` channel, the running turn's own) — one put per consumer,
    no copy kept here. A consumer's bound and coalescing are its channel's
    (:class:`EventChannel`)."""

    def __init__(self) -> None:
        self._channels: list[EventChannel] = []

    def subscribe(self, channel: EventChannel) -> EventChannel:
        """Give ``channel`` every event published from now on; returns it."""
        self._channels.append(channel)
        return channel

    def unsubscribe(self, channel: EventChannel) -> None:
        """Stop giving ``channel`` events (idempotent)."""
        if channel in self._channels:
            self._channels.remove(channel)

    def publish(self, event: ev.Event) -> None:
        """Put ``event`` into every subscribed channel; never blocks."""
        for channel in self._channels:
            channel.put(event)


@final
class TurnOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """How a turn ended: the terminal event plus the final answer text.

    Attributes:
        event: the ``turn.completed`` event (status, usage, failure).
        final_text: the last answer text ("" if none).
        error: for a turn that failed because mind's own state could not be
            written (failure kind ``storage``: disk full, quota, I/O error),
            the typed error with ``path`` and ``errno``; else None. The
            status is then what reopening the session will close the turn
            with (``aborted``: its inputs replay; ``completed``: its answer
            was journaled), docs/design/turn.md §2.
    """

    event: ev.TurnCompletedEvent
    final_text: str
    error: StorageError | None = None

    @property
    def status(self) -> str:
        """``completed`` | ``interrupted`` | ``failed`` | ``aborted``."""
        return str(self.event.status)


@final
class Turn:
    """A running turn: async-iterate its events; decide approvals; interrupt.

    Iteration yields :data:`mind.generated.events.Event` structs in order and
    ends after the ``turn.completed`` event; it may start late and still gets
    every event from the turn's start (deltas sent before it started arrive
    coalesced, see :class:`EventChannel`). Created by :meth:`Session.submit`.
    """

    def __init__(self, session: Session, turn_id: str, inputs: list[MailboxMessage]) -> None:
        self.session = session
        self.turn_id = turn_id
        self.inputs = inputs
        """The inputs the turn claimed when it opened, in order."""
        # Until someone iterates the turn (a caller that reads
        # ``session.events()`` never does) its deltas coalesce from the first:
        # the channel keeps the turn's text, in about one delta per kind per
        # lifecycle event, for an iteration that may still come.
        self._events = session.fanout.subscribe(EventChannel(slack=0))
        self._scope = anyio.CancelScope()
        self._interrupt_requested = False
        self._hung_up = False
        """The stop came from a closed terminal (:meth:`hang_up`), not the person."""
        self._left = False
        """The stop came from the person leaving the REPL (:meth:`leave`)."""
        self._send_pending = True
        self._readers = 0
        """Iterations of this turn's events open now (each can see its cards)."""
        self._waiters = 0
        """:meth:`wait` calls not returned yet."""
        self._done = anyio.Event()
        self._outcome: TurnOutcome | None = None
        # Progress kept on the handle so an interrupted turn still reports it.
        self.failure_detail = ""
        """The provider's own words for a failure (redacted, for stderr and
        logs only: never journaled, never in events)."""
        self._usage = RoundUsage()
        self._final_text = ""
        self._storage_error: StorageError | None = None
        self.model_quiet_since: float | None = None
        """While a model request is open: the monotonic time (seconds) of the
        last sign of life from the model (the request sent, or the last stream
        item); ``None`` otherwise. ``exec`` reports long waits from it."""

    # ---- consumer side -----------------------------------------------------

    def __aiter__(self) -> AsyncIterator[ev.Event]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ev.Event]:
        self._events.slack = DELTA_SLACK  # a reader: deltas one by one again
        self._readers += 1
        try:
            while (event := await self._events.get()) is not None:
                yield event
        finally:
            # Ended, or left (``break``: closed when the loop drops it).
            self._readers -= 1
            self.answerers_changed()

    def decide(self, call_id: str, decision: Decision, reason: str | None = None) -> None:
        """Answer the waiting approval request of ``call_id`` in this turn.
        The first decision wins; a repeated answer changes nothing.

        A thin view of :meth:`mind.shell.session.Session.answer` by call id
        (the session's interactions are the one owner). An id that repeats
        within a round names one request at a time: the calls run in order.

        Args:
            decision: ``approve_once`` | ``approve_session`` | ``deny`` |
                ``abort``, or the words ``yes`` | ``no`` | ``always``.
            reason: on deny, what the model is told (at most 128 KiB).

        Raises:
            ValueError: ``decision`` is not one of those, or ``call_id`` has
                no request in this turn that was ever asked (misuse; an
                approval never fails open).
        """
        chosen = as_decision(decision)
        interactions = self.session.interactions
        waiting = [r for r in interactions.pending(self.turn_id) if r.call_id == call_id]
        if not waiting:
            asked = any(
                r.turn_id == self.turn_id and r.call_id == call_id
                for r in interactions.log.requested.values()
            )
            if asked:
                return  # answered before: the first decision stands
            raise ValueError(f"turn {self.turn_id}: no approval request for {call_id!r}")
        result = interactions.answer(waiting[0].interaction_id, chosen, reason=reason)
        if isinstance(result, NotTaken) and result.why in ("too_large", "not_offered"):
            raise ValueError(f"turn {self.turn_id}: {result.message}")

    @property
    def pending_approvals(self) -> list[str]:
        """Call ids whose approval request waits for an answer, in the order asked."""
        return [r.call_id for r in self.session.interactions.pending(self.turn_id)]

    @property
    def unanswered_approvals(self) -> list[str]:
        """Call ids of this turn's approval requests that were never
        approved or refused: still waiting, cancelled when the turn stopped,
        or answered "abort" (their calls never ran: an interrupt's results
        say so)."""
        log = self.session.interactions.log
        out: list[str] = []
        for iid, request in log.requested.items():
            if request.turn_id != self.turn_id:
                continue
            resolution = log.resolved.get(iid)
            if resolution is None or resolution.decision.value in ("cancelled", "abort"):
                out.append(request.call_id)
        return out

    def interrupt(self, *, send_pending: bool = True) -> None:
        """Stop the turn as soon as possible; it ends with status ``interrupted``.

        A running tool's process group is killed; a streaming model response is
        dropped (partial text is journaled). Idempotent.

        Args:
            send_pending: start the next turn at once with the input still
                waiting (steering not yet delivered, queued text) — the REPL's
                Esc (docs/design/turn.md §6). False leaves it waiting, durable, for the next
                prompt.
        """
        self._interrupt_requested = True
        self._send_pending = self._send_pending and send_pending
        self._scope.cancel()

    def hang_up(self) -> None:
        """Stop the turn because the terminal closed (SIGHUP/SIGTERM), which is
        not the person's Stop: a turn waiting at an approval card is left as a
        crash leaves it — the question unresolved, no terminal record — so the
        next open resumes it and shows the card again; any other turn ends
        ``interrupted`` as with :meth:`interrupt` (the turn chart's
        ``hang_up``). The waiting input stays waiting. Idempotent."""
        self._hung_up = True
        self.interrupt(send_pending=False)

    def leave(self) -> None:
        """Stop the turn because the person leaves the REPL (/exit, Ctrl+D):
        a turn waiting for a command a crash left running is left as a crash
        leaves it — the command keeps running under its supervisor, its
        question stays open — so the next open waits for it again; any other
        turn ends ``interrupted`` as with :meth:`interrupt` (the turn
        chart's ``leave``). Idempotent."""
        self._left = True
        self.interrupt(send_pending=False)

    @property
    def answerable(self) -> bool:
        """Whether someone may answer this turn's questions (the rule of
        docs/design/interactions.md §2): True while an iteration of its
        events is open (this turn's, or :meth:`Session.events`: the reader
        sees every card and may answer it), while nobody awaits its end
        (a caller may still read or poll ``pending_interactions()``), and
        once a stop was asked for (its questions are cancelled, not
        declined); False while :meth:`wait` is awaited and no iteration is
        open — a library caller with no handler, the only party left. The
        interaction chart's ``can_answer`` then declines its questions."""
        reading = self._readers > 0 or self.session.events_read
        return reading or self._waiters == 0 or self._interrupt_requested

    def answerers_changed(self) -> None:
        """Tell the session's interactions that :attr:`answerable` may have
        changed (a reader left, a wait began): the chart decides what each
        shown question of this turn does with the fact."""
        self.session.interactions.answerers_changed(self.turn_id)

    @property
    def stops_commands(self) -> bool:
        """Whether an interrupt stops a command a crash left running (Esc,
        Ctrl+C, abort: kill its whole tree), not a leaving — closed terminal
        or /exit — which leaves it running under its supervisor."""
        return self._interrupt_requested and not self._hung_up and not self._left

    @property
    def stopped_by_person(self) -> bool:
        """Whether an interrupt was the person's Stop (Esc, Ctrl+C, abort),
        not a closed terminal nor leaving (/exit, Ctrl+D): a shown question
        is then cancelled for good; leaving keeps it for the next open."""
        return self._interrupt_requested and not self._hung_up and not self._left

    @property
    def done(self) -> bool:
        """True once the terminal record is durable."""
        return self._done.is_set()

    async def wait(self) -> TurnOutcome:
        """Wait for the end of the turn (without consuming events).

        While it is awaited and no iteration of the events is open (neither
        this turn nor :meth:`Session.events` is iterated) and no stop was
        asked for, the turn has nobody to answer its questions
        (:attr:`answerable`): one shown already, or shown later, is
        ``declined`` (docs/design/interactions.md §2) and its call refused
        without running — never a wait for an answer nobody can give."""
        self._waiters += 1
        try:
            self.answerers_changed()
            await self._done.wait()
        finally:
            self._waiters -= 1
        assert self._outcome is not None
        return self._outcome

    @property
    def outcome(self) -> TurnOutcome:
        """The outcome; raises RuntimeError before the turn has ended."""
        if self._outcome is None:
            raise RuntimeError(f"turn {self.turn_id} has not ended")
        return self._outcome

    # ---- producer side -----------------------------------------------------

    def _emit(self, event: ev.Event) -> None:
        self.session.fanout.publish(event)

    def _finish(self, outcome: TurnOutcome) -> None:
        self._outcome = outcome
        self._emit(outcome.event)
        self.session.fanout.unsubscribe(self._events)
        self._events.close()
        self._done.set()
