"""Turn events to the screen: one consumer task per busy hosted session.

A consumer iterates :meth:`Session.events` while the session is busy, so
turns the runtime starts by itself (queued input, the steering sent by Esc,
recovered input) are rendered like typed ones. A parked session is consumed
too, its view muted; approval requests and turn ends of a parked session are
announced in one line on the attached view. A turn's inputs are echoed
(``› text``) from the journal when the turn claims them: at turn start, and
for steering at the model-request boundary that delivers it.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final, final

import anyio
import anyio.abc

from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.render import plain

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl
    from mind.shell.repl.hosting import Hosted

_AFTER_CLAIM: Final = (
    ev.TurnStartedEvent,
    ev.MessageDeltaEvent,
    ev.ReasoningDeltaEvent,
    ev.MessageCompletedEvent,
    ev.ToolCallEvent,
    ev.TurnRetryingEvent,
    ev.TurnCompletedEvent,
)
"""Events that can follow a claim of input (turn start, a model-request
boundary, the final drain): the claimed inputs are echoed before them. Tool
results and approval requests come *before* a boundary, so never trigger it."""


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
        if isinstance(event, _AFTER_CLAIM):
            self._echo_claimed(h, at_start=isinstance(event, ev.TurnStartedEvent))
        if isinstance(event, ev.ApprovalRequestedEvent):
            h.view.show_approval(event)
            h.approvals.append((event.turn_id, event))
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
            h.approvals = deque(a for a in h.approvals if a[0] != event.turn_id)
            h.viewed.clear()
            h.tokens = ev.Usage(
                input_tokens=h.tokens.input_tokens + event.usage.input_tokens,
                output_tokens=h.tokens.output_tokens + event.usage.output_tokens,
            )
            if not shown:
                repl.view.note(
                    f"session {_short_id(h.session.session_id)} (parked) {event.status.value}",
                    style="dim" if event.status == ev.TurnStatus.completed else "yellow",
                )
        repl.invalidate()

    def _echo_claimed(self, h: Hosted, *, at_start: bool) -> None:
        """Echo the inputs journaled (claimed by a turn) since the last look.

        Args:
            h: the session whose journal is looked at (muted when parked).
            at_start: the turn is starting (its inputs are its question);
                otherwise the input is steering delivered mid-turn.
        """
        records = h.session.journal.records
        for record in records[h.journal_pos :]:
            if isinstance(record, jr.UserMessage):
                suffix = "" if at_start else "  (steering)"
                if at_start and record.kind == jr.Kind.queue:
                    suffix = "  (queued)"
                if record.message_id in h.recovered:
                    suffix = "  (recovered)"
                # Mid-turn steering is followed by model output: keep a gap.
                h.view.echo(record.text, suffix, gap_after=record.kind == jr.Kind.steer)
        h.journal_pos = len(records)
