"""The interaction machine: one question to the person about one tool
invocation (docs/design/interactions.md §1).

:class:`InteractionMachine` wraps the generated
:class:`~mind.generated.interaction_chart.InteractionChart`
(``specs/statecharts/interaction.yaml``) with the data its guards read and
one typed method per event; every method returns the effects the chart
named, which the shell (:mod:`mind.shell.interactions`) performs::

    proposed --request[fits]--> requested --show[can_answer]--> shown
    shown --answer[fits]--> answered --apply--> applied
    proposed --request[not fits]--> refused           requested --show[not can_answer]--> declined
    proposed --recorded[resolved?]--> answered | requested (replayed from the journal)
    shown --cancel--> cancelled;  shown --answer[not fits]--> shown (refused answer)
    shown --answerers_changed[not can_answer]--> declined   (nobody can answer any more)
    shown --answerers_changed[can_answer]--> shown
    answered --answer--> answered; a final state's answer -> AnswerIgnored (no-op)

Beside it the pure rules: :func:`fits` (the 128 KiB bound of a request and
of an answer's reason, docs/design/interactions.md §4) and
:func:`first_resolution` (first decision wins, §3).

Errors: an event the chart does not allow (other than a late answer)
raises :class:`~mind.errors.IllegalTransition` (``chart="interaction"``);
the machine is unchanged. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, cast, final

from statemachine.exceptions import TransitionNotAllowed

from mind.errors import IllegalTransition
from mind.generated import journal as jr
from mind.generated.interaction_chart import InteractionChart, InteractionEventName
from mind.machines.chart_observers import created

__all__ = [
    "MAX_INTERACTION_BYTES",
    "AnswerIgnored",
    "AnswerRefused",
    "ApplyDecision",
    "Effect",
    "InteractionMachine",
    "InteractionState",
    "JournalRequest",
    "JournalResolution",
    "RefuseTooLarge",
    "ShowRequest",
    "StopTurn",
    "first_resolution",
    "fits",
]

MAX_INTERACTION_BYTES: Final = 128 * 1024
"""Largest encoded request (its journal record) and largest encoded answer
reason, bytes (docs/design/interactions.md §4)."""

InteractionState = Literal[
    "proposed", "requested", "shown", "answered", "applied", "declined", "cancelled", "refused"
]
"""The active state of ``interaction.yaml``."""

FINAL_STATES: Final[frozenset[str]] = frozenset({"applied", "declined", "cancelled", "refused"})
"""States after which nothing changes: an answer there is a no-op."""

Decision: TypeAlias = jr.InteractionDecision
By: TypeAlias = jr.InteractionBy


def fits(size_bytes: int) -> bool:
    """Whether an encoded request or answer reason of ``size_bytes`` bytes is
    within :data:`MAX_INTERACTION_BYTES` (docs/design/interactions.md §4)."""
    return size_bytes <= MAX_INTERACTION_BYTES


def first_resolution(
    records: Iterable[jr.InteractionResolved], interaction_id: str
) -> jr.InteractionResolved | None:
    """The resolution that counts for ``interaction_id``: the first in
    journal order (docs/design/interactions.md §3: first decision wins; the
    service never writes a second one, and a journal that holds one anyway
    — two processes, a bug — still has one answer)."""
    for record in records:
        if record.interaction_id == interaction_id:
            return record
    return None


# ------------------------------------------------------------------ effects


@final
@dataclass(frozen=True)
class JournalRequest:
    """Append the ``interaction_requested`` record, fsync, before showing it."""


@final
@dataclass(frozen=True)
class RefuseTooLarge:
    """The request is over the limit: deny the call with this reason; nothing is shown.

    Attributes:
        size_bytes: the encoded request's size.
    """

    size_bytes: int


@final
@dataclass(frozen=True)
class ShowRequest:
    """Emit the request to the clients (REPL card, library, ``exec --json``)."""


@final
@dataclass(frozen=True)
class JournalResolution:
    """Append the ``interaction_resolved`` record, fsync, before it takes effect.

    Attributes:
        decision: what was decided.
        by: who decided.
        reason: the person's words (on deny: what the model sees), or None.
    """

    decision: Decision
    by: By
    reason: str | None = None


@final
@dataclass(frozen=True)
class AnswerRefused:
    """The answer was not taken (its reason is over the limit); the request
    is still shown and waits.

    Attributes:
        size_bytes: the encoded reason's size.
    """

    size_bytes: int


@final
@dataclass(frozen=True)
class ApplyDecision:
    """Give the decision to the waiting tool call.

    Attributes:
        decision: the resolution (first decision).
        reason: its reason, or None.
    """

    decision: Decision
    reason: str | None = None


@final
@dataclass(frozen=True)
class AnswerIgnored:
    """A repeated, late or stale answer: an explicit no-op, nothing written.

    Attributes:
        state: the state that explains it (``answered``, ``applied``, ...).
        decision: the decision that stands, when there is one.
    """

    state: InteractionState
    decision: Decision | None


@final
@dataclass(frozen=True)
class StopTurn:
    """The decision is ``abort``: interrupt the turn now (its open calls get
    their "never approved" results), not after another model round."""


Effect: TypeAlias = (
    JournalRequest
    | RefuseTooLarge
    | ShowRequest
    | JournalResolution
    | AnswerRefused
    | ApplyDecision
    | StopTurn
    | AnswerIgnored
)


# ------------------------------------------------------------------ the model


@dataclass
class _InteractionData:
    """The model bound to :class:`InteractionChart`; satisfies ``InteractionModel``.

    Event data (``size_bytes`` … ``answering``) is set for one event; guards
    read it, actions append effects.
    """

    effects: list[Effect] = field(default_factory=list)
    decision: Decision | None = None
    reason: str | None = None
    # event data
    size_bytes: int = 0
    has_resolution: bool = False
    answering: bool = False
    new_decision: Decision | None = None
    new_reason: str | None = None
    new_by: By = jr.InteractionBy.person
    state: object = None

    # ---- guards of interaction.yaml

    @property
    def fits(self) -> bool:
        """Guard ``fits``: see :func:`fits`."""
        return fits(self.size_bytes)

    @property
    def resolved(self) -> bool:
        """Guard ``resolved``: the journal holds a resolution for this id."""
        return self.has_resolution

    @property
    def can_answer(self) -> bool:
        """Guard ``can_answer`` (``show``, ``answerers_changed``): a person or a
        handler can answer."""
        return self.answering

    @property
    def aborting(self) -> bool:
        """Guard ``aborting``: the standing decision is ``abort`` (stop the turn)."""
        return self.decision == jr.InteractionDecision.abort

    # ---- actions of interaction.yaml (each names one effect)

    def journal_request(self, *args: Any, **kwargs: Any) -> None:
        """Action ``journal_request``."""
        self.effects.append(JournalRequest())

    def refuse_too_large(self, *args: Any, **kwargs: Any) -> None:
        """Action ``refuse_too_large``."""
        self.effects.append(RefuseTooLarge(self.size_bytes))

    def show_request(self, *args: Any, **kwargs: Any) -> None:
        """Action ``show_request``."""
        self.effects.append(ShowRequest())

    def journal_declined(self, *args: Any, **kwargs: Any) -> None:
        """Action ``journal_declined``: nobody can answer (never "accepted")."""
        self._resolve(jr.InteractionDecision.declined, jr.InteractionBy.headless, None)

    def journal_answer(self, *args: Any, **kwargs: Any) -> None:
        """Action ``journal_answer``: the first decision."""
        assert self.new_decision is not None
        self._resolve(self.new_decision, self.new_by, self.new_reason)

    def journal_cancel(self, *args: Any, **kwargs: Any) -> None:
        """Action ``journal_cancel``: the turn ended before an answer."""
        self._resolve(jr.InteractionDecision.cancelled, self.new_by, None)

    def refuse_answer(self, *args: Any, **kwargs: Any) -> None:
        """Action ``refuse_answer``."""
        self.effects.append(AnswerRefused(self.size_bytes))

    def apply_decision(self, *args: Any, **kwargs: Any) -> None:
        """Action ``apply_decision``."""
        assert self.decision is not None
        self.effects.append(ApplyDecision(self.decision, self.reason))

    def stop_turn(self, *args: Any, **kwargs: Any) -> None:
        """Action ``stop_turn``: the turn is interrupted now."""
        self.effects.append(StopTurn())

    def ignore_answer(self, *args: Any, **kwargs: Any) -> None:
        """Action ``ignore_answer``: a repeated answer before it is applied."""
        self.effects.append(AnswerIgnored("answered", self.decision))

    def _resolve(self, decision: Decision, by: By, reason: str | None) -> None:
        self.decision, self.reason = decision, reason
        self.effects.append(JournalResolution(decision, by, reason))


@final
class InteractionMachine:
    """The typed wrapper of ``interaction.yaml`` for one interaction.

    The shell drives it: :meth:`request` (a new question) or :meth:`recorded`
    (one found in the journal), then :meth:`show`, :meth:`answer` (any number
    of times: only the first counts), :meth:`answerers_changed`,
    :meth:`cancel`, :meth:`apply`.
    """

    def __init__(self) -> None:
        self._data = _InteractionData()
        self._chart = created(InteractionChart(model=self._data))

    def __repr__(self) -> str:
        return f"InteractionMachine(state={self.state!r}, decision={self.decision!r})"

    @property
    def state(self) -> InteractionState:
        """The active state."""
        (leaf,) = [s.id for s in self._chart.configuration]
        return cast(InteractionState, leaf)

    @property
    def decision(self) -> Decision | None:
        """The decision that stands (first one), or None while unanswered."""
        return self._data.decision

    @property
    def reason(self) -> str | None:
        """The standing decision's reason, or None."""
        return self._data.reason

    @property
    def final(self) -> bool:
        """Nothing more happens to this interaction (:data:`FINAL_STATES`)."""
        return self.state in FINAL_STATES

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a ``TransitionCoverage``)."""
        add: Callable[[object], object] = self._chart.add_listener
        add(listener)

    # ------------------------------------------------------------------ events

    def request(self, *, size_bytes: int) -> list[Effect]:
        """A new question whose encoded record is ``size_bytes`` bytes:
        ``[JournalRequest()]`` (now ``requested``) or ``[RefuseTooLarge]``
        (``refused``)."""
        return self._send("request", size_bytes=size_bytes)

    def recorded(self, resolution: jr.InteractionResolved | None) -> list[Effect]:
        """The question is already in the journal (after a crash, or asked
        again by an idempotent re-drive): ``requested`` when unresolved (it is
        shown again, same id, never journaled twice), else ``answered`` with
        the recorded decision (applied, never asked again)."""
        effects = self._send("recorded", has_resolution=resolution is not None)
        if resolution is not None:  # only once the chart took it (a refusal changes nothing)
            self._data.decision = resolution.decision
            self._data.reason = resolution.reason if isinstance(resolution.reason, str) else None
        return effects

    def show(self, *, can_answer: bool) -> list[Effect]:
        """Show the durable request: ``[ShowRequest()]`` when someone can
        answer, else ``[JournalResolution(declined, headless)]`` (``declined``)."""
        return self._send("show", answering=can_answer)

    def answerers_changed(self, *, can_answer: bool) -> list[Effect]:
        """Who can answer a shown question changed (a reader of the turn's
        events left, or the caller began awaiting the turn): when nobody can
        now, ``[JournalResolution(declined, headless)]`` (``declined``: never a
        wait for an answer nobody can give); else ``[]`` (still ``shown``).

        Raises:
            IllegalTransition: the question is not ``shown`` (misuse).
        """
        return self._send("answerers_changed", answering=can_answer)

    def answer(
        self,
        decision: Decision,
        *,
        reason: str | None = None,
        by: By = jr.InteractionBy.person,
    ) -> list[Effect]:
        """An answer arrived. The first one that fits is journaled
        (``[JournalResolution]``); a reason over the limit is refused
        (``[AnswerRefused]``, still waiting); any later answer — or one in a
        final state — is ``[AnswerIgnored]`` (a no-op, never an error).

        Raises:
            IllegalTransition: answered before it was shown (``proposed`` /
                ``requested``: misuse; a request is shown before any answer).
        """
        if self.final:
            return [AnswerIgnored(self.state, self._data.decision)]
        size = len(reason.encode("utf-8", "surrogatepass")) if reason is not None else 0
        return self._send(
            "answer", size_bytes=size, new_decision=decision, new_reason=reason, new_by=by
        )

    def cancel(self, *, by: By = jr.InteractionBy.person) -> list[Effect]:
        """The turn ended before an answer: ``[JournalResolution(cancelled)]``."""
        return self._send("cancel", new_by=by)

    def apply(self) -> list[Effect]:
        """``answered -> applied``: ``[ApplyDecision]`` for the waiting call,
        then ``StopTurn`` when the decision is ``abort``."""
        return self._send("apply")

    def _send(self, event: InteractionEventName, **data: Any) -> list[Effect]:
        before = self.state
        model = self._data
        saved = {k: getattr(model, k) for k in data}
        model.effects = []
        for key, value in data.items():
            setattr(model, key, value)
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition(
                "interaction", event, before, configuration=frozenset({before})
            ) from error
        finally:
            for key, value in saved.items():
                setattr(model, key, value)
        effects, model.effects = model.effects, []
        return effects
