"""Turn events to the screen: one consumer task per busy hosted session.

A consumer iterates :meth:`Session.events` while the session is busy, so
turns the runtime starts by itself (queued input, the steering sent by Esc,
recovered input, a turn resumed after a crash: ``turn.resumed``) are
rendered like typed ones. A parked session is consumed
too, its view muted; approval requests and turn ends of a parked session are
announced in one line on the attached view. A turn's inputs are echoed
(``› text``) when its ``input.claimed`` event says it took them: at turn
start (echoed before the turn's start is shown, so the question precedes
the answer's attempt), and for steering at the model-request boundary or
the drain that delivers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import anyio
import anyio.abc

from mind.context.usage import counts, event_usage
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.terminal_text import plain

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl
    from mind.shell.repl.hosting import Hosted


def _short_id(session_id: str) -> str:
    """The first 13 characters of a session id (a UUIDv7's time part), for notices."""
    return session_id[:13] + "…" if len(session_id) > 13 else session_id


@final
class EventFeed:
    """Consumes hosted sessions' events and shows them on their views.

    Args:
        repl: the REPL it belongs to (its attached session and view).
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl
        self.task_group: anyio.abc.TaskGroup | None = None
        """Where consumer tasks run; set by :meth:`Repl.run` (none start before)."""

    def ensure(self, hosted: Hosted | None = None) -> None:
        """Start consuming a hosted session's events (default: the attached one)
        unless already doing so. Parked sessions are consumed too, muted."""
        h = hosted or self._repl.hosting.current
        if h.consuming or not h.session.busy or self.task_group is None:
            return
        h.consuming = True
        self.task_group.start_soon(self._consume, h)

    async def _consume(self, h: Hosted) -> None:
        """Take every event of ``h.session`` until it is idle (all of its turns)."""
        try:
            while True:
                async for event in h.session.events():
                    self._on_event(h, event)
                if not h.session.busy:  # events() ended at idle; nothing can start in between
                    return
        finally:
            h.consuming = False
            self._repl.invalidate()

    def _on_event(self, h: Hosted, event: ev.Event) -> None:
        repl = self._repl
        shown = h is repl.hosting.current
        if isinstance(event, ev.TurnStartedEvent | ev.TurnResumedEvent):
            h.starting = event  # shown once its inputs are echoed (the claim follows)
            return
        if h.starting is not None:
            started, h.starting = h.starting, None
            if isinstance(event, ev.InputClaimedEvent) and event.at == ev.ClaimPoint.start:
                self._echo_claimed(h, event)
                h.view.show(started)
                repl.invalidate()
                return
            h.view.show(started)  # a turn that claimed nothing
        if isinstance(event, ev.InputClaimedEvent):
            self._echo_claimed(h, event)
        elif isinstance(event, ev.ApprovalRequestedEvent):
            # A new request starts unviewed: ids repeat (servers reuse them),
            # and a ``v`` of an earlier call's text never approves this one.
            h.viewed.discard(event.call_id)
            h.view.show_approval(event)
            h.asked[(event.turn_id, event.call_id)] = event
            if not shown:
                repl.view.note(
                    f"session {_short_id(h.session.session_id)} (parked) asks to run "
                    f"{plain(event.name, keep_joiners=False)}: "
                    f"/resume {h.session.session_id} to answer",
                    style="yellow",
                )
        elif isinstance(event, ev.TurnCompletedEvent):
            turn = h.session.current
            mine = turn is not None and turn.turn_id == event.turn_id
            h.view.show(event, failure_detail=turn.failure_detail if mine and turn else "")
        elif not isinstance(event, ev.InputAcceptedEvent | ev.InputWaitingEvent):
            h.view.show(event)  # waiting input is listed under the input instead
        if isinstance(event, ev.TurnCompletedEvent):
            h.asked = {k: q for k, q in h.asked.items() if k[0] != event.turn_id}
            h.viewed.clear()
            ended = counts(event.usage)
            h.tokens = event_usage(ended if h.tokens is None else counts(h.tokens) + ended)
            if not shown:
                repl.view.note(
                    f"session {_short_id(h.session.session_id)} (parked) {event.status.value}",
                    style="dim" if event.status == ev.TurnStatus.completed else "yellow",
                )
        repl.invalidate()

    def _echo_claimed(self, h: Hosted, event: ev.InputClaimedEvent) -> None:
        """Echo the inputs a turn just claimed (muted when ``h`` is parked):
        at its start they are its question (``(queued)`` when they waited),
        later they are steering; recovered input says so."""
        at_start = event.at == ev.ClaimPoint.start
        for record in h.session.claimed_inputs(event.message_ids):
            suffix = "" if at_start else "  (steering)"
            if at_start and record.kind == jr.Kind.queue:
                suffix = "  (queued)"
            if record.message_id in h.recovered:
                suffix = "  (recovered)"
            # Mid-turn steering is followed by model output: keep a gap.
            h.view.echo(record.text, suffix, gap_after=record.kind == jr.Kind.steer)
