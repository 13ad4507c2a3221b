"""The turn machine: one turn of a session (DESIGN §3.1, ``specs/statecharts/turn.yaml``).

:class:`TurnMachine` wraps the generated :class:`~mind.generated.turn_chart.TurnChart`
with the only data the chart reads — the retry budget — and a typed method per
event. It decides; the runtime (``mind.shell.runtime``) acts and feeds results
back as events. It never does I/O.

Shape of a turn::

    accepted --start--> active{ sampling{requesting -> streaming}
                                running_tools{executing <-> awaiting_approval}
                                retrying{backing_off}
                                draining{checking_inbox} }
             --> exactly one of completed | interrupted | failed | aborted

Terminal states are absorbing: every event sent after one raises
:class:`~mind.errors.IllegalTransition`.

Errors: a disallowed event raises :class:`~mind.errors.IllegalTransition`
(``chart="turn"``; a ``RuntimeError``: the caller misused the machine; never
retried), the one refusal of every chart, so callers do not depend on the
engine; the engine error is chained as ``__cause__``. The machine is unchanged
when it is raised.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, final

from statemachine.exceptions import TransitionNotAllowed

from mind.errors import TRANSIENT_KINDS, IllegalTransition
from mind.generated.turn_chart import TurnChart, TurnEventName
from mind.machines.chart_observers import created

__all__ = [
    "TERMINAL_STATES",
    "UNANSWERED_FAILURES",
    "TurnMachine",
    "acknowledges",
    "within_output_cap",
]

TERMINAL_STATES: Final = frozenset({"completed", "interrupted", "failed", "aborted"})
"""Ids of the absorbing final states; the turn's status is the one it ends in."""

UNANSWERED_FAILURES: Final = frozenset(TRANSIENT_KINDS | {"output_limit", "storage"})
"""Failure kinds after which a failed turn's inputs are *not* acknowledged, so
they stay waiting and replay: a transient provider failure (a replay may
succeed), an answer cut at ``max_output_mib`` (the person never got an answer,
issue #8 item 5) and a journal/inbox write that failed (the terminal record
may not be durable, issue #8 item 6). Any other failure would meet the same
refusal again, so its inputs are consumed."""


def acknowledges(status: str, failure_kind: str | None) -> bool:
    """Whether a turn that ended in ``status`` acknowledges (consumes) its inputs.

    The rule (DESIGN §3.1): ``completed`` and ``interrupted`` turns do; an
    ``aborted`` turn does not; a ``failed`` turn does unless its failure kind
    is in :data:`UNANSWERED_FAILURES`. Pure; never raises.

    Args:
        status: the terminal state id (see :data:`TERMINAL_STATES`).
        failure_kind: the failure kind of a failed turn (``None`` otherwise).
    """
    if status in ("completed", "interrupted"):
        return True
    return (
        status == "failed"
        and failure_kind is not None
        and (failure_kind not in UNANSWERED_FAILURES)
    )


def within_output_cap(used_bytes: int, limit_bytes: int) -> bool:
    """Whether a turn whose journaled-to-be rounds streamed ``used_bytes`` of
    model output (UTF-8 bytes of text, reasoning and tool-call arguments,
    summed over the turn's rounds) stays within ``max_output_mib``
    (``limit_bytes``).

    The rule (issue #8 item 5): the cap holds for every provider, so the
    runtime asks this after each round, before the round is kept or its tool
    calls run; a round that goes past it fails the turn ``output_limit``
    (not acknowledged, see :func:`acknowledges`). Reaching the cap exactly is
    within it. Pure; never raises.
    """
    return used_bytes <= limit_bytes


@dataclass
class _TurnData:
    """The model bound to :class:`TurnChart`; satisfies ``TurnModel``.

    Attributes:
        max_retries: transient round failures allowed per turn.
        retries_used: retries taken so far in this turn.
        transient: whether the round failure being decided is transient
            (set only for the duration of one ``round_failed`` event).
        in_time: whether a retry would still start inside the turn's total
            retry time (``RetryPolicy.within_time``; same lifetime).
        state: where python-statemachine stores the configuration value.
    """

    max_retries: int
    retries_used: int = 0
    transient: bool = False
    in_time: bool = True
    state: object = None

    @property
    def can_retry(self) -> bool:
        """Guard ``can_retry`` of turn.yaml: transient, retries left and time left."""
        return self.transient and self.in_time and self.retries_used < self.max_retries


@final
class TurnMachine:
    """One turn's lifecycle, with a per-turn retry budget.

    Args:
        max_retries: how many transient round failures are retried in this
            turn (``>= 0``); the next one fails the turn.

    Raises:
        ValueError: ``max_retries`` is negative.
    """

    def __init__(self, *, max_retries: int = 4) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self._data = _TurnData(max_retries=max_retries)
        self._chart = created(TurnChart(model=self._data))

    def __repr__(self) -> str:
        return f"TurnMachine(state={self.state!r}, retries_used={self.retries_used})"

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> str:
        """Id of the active leaf state, e.g. ``"requesting"`` or ``"completed"``."""
        leaves = [s.id for s in self._chart.configuration if not s.states]
        return leaves[0]

    @property
    def configuration(self) -> frozenset[str]:
        """Ids of every active state, e.g. ``{"active", "sampling", "streaming"}``."""
        return frozenset(s.id for s in self._chart.configuration)

    @property
    def is_terminal(self) -> bool:
        """Whether the turn reached its one terminal state (absorbing)."""
        return self.state in TERMINAL_STATES

    @property
    def status(self) -> str | None:
        """``"completed" | "interrupted" | "failed" | "aborted"`` once terminal, else ``None``."""
        state = self.state
        return state if state in TERMINAL_STATES else None

    @property
    def retries_used(self) -> int:
        """Transient round failures retried so far in this turn (never reset)."""
        return self._data.retries_used

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a coverage recorder).

        The listener's ``after_transition(event, source, target, transition)``
        (any subset of those names) is called after each taken transition.
        Used by tests; listeners must not send events.
        """
        # ``add_listener`` is unannotated upstream; bind it to a typed name.
        add_listener: Callable[[object], object] = self._chart.add_listener
        add_listener(listener)

    # ------------------------------------------------------------------- events

    def _send(self, event: TurnEventName) -> None:
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition(
                "turn", event, self.state, configuration=self.configuration
            ) from error

    def start(self) -> None:
        """``accepted -> sampling``; send after ``turn_started`` is durable."""
        self._send("start")

    def stream_opened(self) -> None:
        """``requesting -> streaming``: the provider's stream answered."""
        self._send("stream_opened")

    def round_tools(self) -> None:
        """``sampling -> running_tools``: the round ended with tool calls (journaled)."""
        self._send("round_tools")

    def round_final(self) -> None:
        """``sampling -> draining``: the round ended with a final answer."""
        self._send("round_final")

    def round_failed(self, *, transient: bool, in_time: bool = True) -> bool:
        """The round failed: retry if transient and budget is left, else fail the turn.

        Args:
            transient: whether the failure kind is retried (``TRANSIENT_KINDS``).
            in_time: whether the retry would start inside the turn's total
                retry time (the shell measures, ``RetryPolicy.within_time`` decides).

        Returns:
            ``True`` if now ``retrying`` (``retries_used`` was incremented),
            ``False`` if now ``failed``.

        Raises:
            IllegalTransition: not sampling; nothing changed.
        """
        self._data.transient = transient
        self._data.in_time = in_time
        try:
            self._send("round_failed")
        finally:
            self._data.transient = False
            self._data.in_time = True
        if self.state == "failed":
            return False
        self._data.retries_used += 1
        return True

    def retry_due(self) -> None:
        """``retrying -> sampling``: the backoff delay elapsed (the shell's clock)."""
        self._send("retry_due")

    def approval_needed(self) -> None:
        """``executing -> awaiting_approval``: a tool call waits for the person."""
        self._send("approval_needed")

    def approval_answered(self) -> None:
        """``awaiting_approval -> executing``: the answer is durable."""
        self._send("approval_answered")

    def tools_done(self) -> None:
        """``running_tools -> sampling``: every tool result is journaled.

        Resets nothing: the retry budget is per turn, not per round.
        """
        self._send("tools_done")

    def steering_claimed(self) -> None:
        """``draining -> sampling``: steering input was claimed for this turn."""
        self._send("steering_claimed")

    def seal(self) -> None:
        """``draining -> completed``: nothing to drain; the inbox is sealed."""
        self._send("seal")

    def interrupt(self) -> None:
        """``active -> interrupted``: the person cancelled the running turn."""
        self._send("interrupt")

    def fail(self) -> None:
        """``accepted | active -> failed``: an unrecoverable error outside a round."""
        self._send("fail")

    def abort(self) -> None:
        """``accepted | active -> aborted``: the process is stopping; inputs replay later."""
        self._send("abort")

    # Recovery: a crashed turn, replayed from its records (mind.machines.turn_replay).

    def recover(self) -> None:
        """Close a crashed turn at startup: ``draining -> completed`` (its final
        answer was journaled), ``accepted | other active states -> aborted``."""
        self._send("recover")
