"""A session's interactions: the one owner of every question to the person
(docs/design/interactions.md).

Two parts:

- :class:`InteractionLog`, the projector: folds the journal's append-only
  records (``interaction_requested`` / ``interaction_resolved`` /
  ``permission_granted`` / ``permission_revoked``) into what is asked, what
  was answered (first resolution wins, §3), which questions are recoverable
  (requested, never resolved: offered again with the same id after a crash,
  §6) and which session grants stand (§5). Pure over the records.
- :class:`Interactions`, the service: asks (:meth:`~Interactions.ask`),
  answers (:meth:`~Interactions.answer`), cancels and grants, driving one
  :class:`~mind.machines.interaction.InteractionMachine` per question and
  performing the effects it names. Every resolution is journaled (fsync)
  before it takes effect, every request before it is shown (§2).

An answer to an unknown, stale or already resolved id is an explicit no-op
(:class:`NotTaken` with a message), never an exception a client must catch.
Single task: every method runs on the runtime's event loop thread.

Size: just over 500 lines because the projector and the service change
together (what ``ask`` re-offers is what ``recoverable`` says); the
projector is the part to move to ``interaction_log`` if either grows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias, final

import anyio
import msgspec

from mind.effects.grants import GrantScope
from mind.errors import InteractionTooLarge, JournalError
from mind.generated import journal as jr
from mind.machines.interaction import (
    MAX_INTERACTION_BYTES,
    AnswerIgnored,
    AnswerRefused,
    ApplyDecision,
    Effect,
    InteractionMachine,
    JournalRequest,
    JournalResolution,
    RefuseTooLarge,
    ShowRequest,
    StopTurn,
)
from mind.shell import faults
from mind.shell.journal import Journal

__all__ = [
    "APPROVAL_CHOICES",
    "LEGACY_DECISIONS",
    "RECONCILE_CHOICES",
    "RUNNING_CHOICES",
    "AnswerResult",
    "Answered",
    "Decision",
    "Grant",
    "InteractionLog",
    "Interactions",
    "NotTaken",
    "Resolution",
    "as_decision",
    "withdraw_moot",
]

_Decision: TypeAlias = jr.InteractionDecision

Decision = Literal[
    "approve_once",
    "approve_session",
    "deny",
    "abort",
    "yes",
    "no",
    "always",
    "rerun",
    "mark_failed",
    "tell_model",
    "kill",
]
"""An answer as clients give it. To an approval: approve once, approve for
this session, deny (with an optional reason the model sees), abort the turn;
``yes`` | ``no`` | ``always`` are the older words for the first three. To a
``reconcile`` question (a call whose outcome is unknown after a crash):
``rerun``, ``mark_failed``, ``tell_model`` (docs/design/effects.md §4). To a
``running`` question (a command a crash left running, which the resumed turn
waits for): ``kill`` (its whole tree is stopped)."""

APPROVAL_CHOICES: Final[tuple[_Decision, ...]] = (
    jr.InteractionDecision.approve_once,
    jr.InteractionDecision.approve_session,
    jr.InteractionDecision.deny,
    jr.InteractionDecision.abort,
)
"""The decisions an approval offers (``approve_session`` left out when the
call's scope cannot be judged, mind.effects.grants)."""

RECONCILE_CHOICES: Final[tuple[_Decision, ...]] = (
    jr.InteractionDecision.rerun,
    jr.InteractionDecision.mark_failed,
    jr.InteractionDecision.tell_model,
)
"""The decisions a ``reconcile`` question may offer, best first (which of
them it does is :func:`mind.machines.effect.reconcile_choices`)."""

RUNNING_CHOICES: Final[tuple[_Decision, ...]] = (jr.InteractionDecision.kill,)
"""The decisions a ``running`` question offers (which it does is
:func:`mind.machines.effect.running_choices`: none where nobody can answer)."""

LEGACY_DECISIONS: Final[dict[str, _Decision]] = {
    "yes": jr.InteractionDecision.approve_once,
    "no": jr.InteractionDecision.deny,
    "always": jr.InteractionDecision.approve_session,
}
"""The words of ``Turn.decide`` before interactions, and what they mean now."""


def as_decision(value: str) -> _Decision:
    """``value`` as a decision: one of :data:`APPROVAL_CHOICES` or
    :data:`RECONCILE_CHOICES` or :data:`RUNNING_CHOICES` (by value) or of :data:`LEGACY_DECISIONS`'
    words. Whether the question asked offers it is checked by
    :meth:`Interactions.answer`.

    Raises:
        ValueError: none of those (misuse; a question never fails open).
            Only mind itself resolves ``declined`` / ``cancelled``.
    """
    if value in LEGACY_DECISIONS:
        return LEGACY_DECISIONS[value]
    offered = (*APPROVAL_CHOICES, *RECONCILE_CHOICES, *RUNNING_CHOICES)
    for choice in offered:
        if value == choice.value:
            return choice
    words = "', '".join([*(c.value for c in offered), *LEGACY_DECISIONS])
    raise ValueError(f"decision must be '{words}', not {value!r}")


# ------------------------------------------------------------------ results


@final
@dataclass(frozen=True)
class Resolution:
    """What a question came to, as the asking tool call applies it.

    Attributes:
        interaction_id: the question's id.
        decision: the standing decision.
        reason: its reason (on deny: what the model sees), or None.
        by: who decided.
        offered_again: the request was asked before (shown, or journaled by
            an earlier open) and is not journaled again now; not a question
            :meth:`Interactions.expect` journaled ahead and showed for the
            first time.
        stop_turn: the chart named ``StopTurn`` (an ``abort``): the asking
            call's turn is to be interrupted now.
    """

    interaction_id: str
    decision: _Decision
    reason: str | None
    by: jr.InteractionBy
    offered_again: bool = False
    stop_turn: bool = False


@final
@dataclass(frozen=True)
class Answered:
    """The answer was taken: journaled (fsync), the waiting call resumes."""

    interaction_id: str
    decision: _Decision


@final
@dataclass(frozen=True)
class NotTaken:
    """The answer changed nothing (an explicit no-op; nothing written).

    Attributes:
        interaction_id: the id answered.
        why: ``unknown`` (no such question in this session), ``resolved``
            (answered before: the first decision stands), ``stale`` (asked
            by an earlier process and not offered again yet), ``too_large``
            (the reason is over 128 KiB; the question still waits),
            ``not_shown`` (not shown yet), ``not_offered`` (the decision is
            not among the question's choices — ``rerun`` to an approval,
            ``approve_once`` to a reconcile question; it still waits).
        message: one sentence for the person.
        decision: the decision that stands, when there is one.
    """

    interaction_id: str
    why: Literal["unknown", "resolved", "stale", "too_large", "not_shown", "not_offered"]
    message: str
    decision: _Decision | None = None


AnswerResult: TypeAlias = Answered | NotTaken


@final
@dataclass(frozen=True)
class Grant:
    """A standing "approve for this session" grant (a ``permission_granted``
    record not revoked).

    Attributes:
        grant_id: its id (``gr_`` + the interaction id's hex).
        interaction_id: the answer that granted it.
        scope: what it covers (:class:`~mind.effects.grants.GrantScope`).
    """

    grant_id: str
    interaction_id: str
    scope: GrantScope


# ------------------------------------------------------------------ projector


@final
class InteractionLog:
    """The interactions and grants a session's journal records say (pure fold).

    Attributes:
        requested: ``interaction_requested`` records by id (the first one).
        resolved: the first ``interaction_resolved`` record per id.
        grants: standing grants by grant id, in the order granted.
    """

    def __init__(self) -> None:
        self.requested: dict[str, jr.InteractionRequested] = {}
        self.resolved: dict[str, jr.InteractionResolved] = {}
        self.grants: dict[str, Grant] = {}
        self.ended_turns: set[str] = set()
        """Turns with a ``turn_completed`` record: their questions can never
        be offered again."""
        self.begun_effects: set[str] = set()
        """Effect ids with a ``tool_started`` or ``tool_result``: the call got
        past its approval (its questions are not asked again before it runs)."""
        self.answered_effects: set[str] = set()
        """Effect ids with a ``tool_result``: nothing is left to ask about a
        ``running`` command of theirs."""

    @classmethod
    def of(cls, records: Iterable[jr.JournalRecord]) -> InteractionLog:
        """The projection of ``records`` (journal order)."""
        log = cls()
        for record in records:
            log.add(record)
        return log

    def add(self, record: jr.JournalRecord) -> None:
        """Fold one record (others are ignored)."""
        if isinstance(record, jr.InteractionRequested):
            self.requested.setdefault(record.interaction_id, record)
        elif isinstance(record, jr.InteractionResolved):
            self.resolved.setdefault(record.interaction_id, record)  # first wins (§3)
        elif isinstance(record, jr.PermissionGranted):
            self.grants[record.grant_id] = Grant(
                record.grant_id, record.interaction_id, _scope_of(record)
            )
        elif isinstance(record, jr.PermissionRevoked):
            self.grants.pop(record.grant_id, None)
        elif isinstance(record, jr.TurnCompleted):
            self.ended_turns.add(record.turn_id)
        elif isinstance(record, jr.ToolStarted | jr.ToolResult) and isinstance(
            record.effect_id, str
        ):
            self.begun_effects.add(record.effect_id)
            if isinstance(record, jr.ToolResult):
                self.answered_effects.add(record.effect_id)

    def recoverable(self, turn_id: str | None = None) -> list[jr.InteractionRequested]:
        """Requested, never resolved, and of a turn that has not ended
        (offered again with the same id when the turn is re-driven), in
        journal order; of one turn when ``turn_id`` is given."""
        return [
            r
            for iid, r in self.requested.items()
            if iid not in self.resolved
            and r.turn_id not in self.ended_turns
            and (turn_id is None or r.turn_id == turn_id)
        ]

    def moot(self) -> list[jr.InteractionRequested]:
        """Unresolved ``running`` questions whose command has its result (it
        ended, or was collected at open, while no process asked): nothing
        is left to decide, in journal order."""
        return [
            r
            for iid, r in self.requested.items()
            if iid not in self.resolved
            and r.kind == jr.InteractionKind.running
            and r.effect_id in self.answered_effects
        ]

    def awaiting(self) -> list[jr.InteractionRequested]:
        """The recoverable questions a resumed turn's re-drive asks again
        (docs/design/interactions.md §6), so they wait for an answer from the
        moment the session opens: those asked before their call was prepared
        (asked again before it runs), and ``running`` ones whose command has
        no result yet (asked again while the turn waits for it)."""
        return [
            r
            for r in self.recoverable()
            if r.effect_id not in self.begun_effects
            or (r.kind == jr.InteractionKind.running and r.effect_id not in self.answered_effects)
        ]


def withdraw_moot(journal: Journal) -> int:
    """Startup step ``repair_interactions``: every moot ``running`` question
    (:meth:`InteractionLog.moot` — its command got its result while no
    process asked, e.g. collected at open after a crash) is resolved
    ``cancelled`` by ``recovery`` (fsync), so every question is resolved
    once and none waits on a command that has ended. Idempotent.

    Returns:
        How many were withdrawn.

    Raises:
        JournalWriteError: a resolution could not be made durable.
    """
    moot = InteractionLog.of(journal.records).moot()
    for request in moot:
        journal.append(
            jr.InteractionResolved(
                seq=0,
                recorded_at_ms=0,
                interaction_id=request.interaction_id,
                decision=jr.InteractionDecision.cancelled,
                by=jr.InteractionBy.recovery,
            ),
            sync=True,
        )
    return len(moot)


def _scope_of(record: jr.PermissionGranted) -> GrantScope:
    sandbox = record.sandbox.value if isinstance(record.sandbox, jr.Sandbox1) else None
    prefix = tuple(record.prefix) if isinstance(record.prefix, list) else ()
    paths = tuple(record.paths) if isinstance(record.paths, list) else ()
    command = record.command if isinstance(record.command, str) else None
    scope: Literal["program", "command", "paths"] = record.scope.value
    return GrantScope(
        record.tool, scope, sandbox=sandbox, prefix=prefix, paths=paths, command=command
    )


# ------------------------------------------------------------------ service


@dataclass(eq=False)
class _Live:
    """One question this process is asking."""

    request: jr.InteractionRequested
    machine: InteractionMachine
    resolved: Callable[[jr.InteractionResolved], None]
    answered: anyio.Event = field(default_factory=anyio.Event)
    resolution: jr.InteractionResolved | None = None
    stop_turn: bool = False
    """The chart named ``StopTurn`` when the decision was applied."""
    failure: JournalError | None = None
    """Set when the resolution could not be made durable: the waiting call
    fails with it (fail closed: an answer not on disk never takes effect)."""


@final
class Interactions:
    """The service of one session's interactions (module docstring).

    Args:
        journal: the session's open journal; its records are projected now
            and every record the service appends is folded in as written.
        answerable: for a turn id, whether anyone may answer its questions
            now (a library caller awaiting the turn unread has no handler:
            False); asked when a question would be shown (default: yes).
    """

    def __init__(
        self, journal: Journal, answerable: Callable[[str], bool] = lambda _turn_id: True
    ) -> None:
        self._journal = journal
        self._answerable = answerable
        self.log = InteractionLog.of(journal.records)
        """The projection (requested, resolved, grants)."""
        self._live: dict[str, _Live] = {}
        self._expected: set[str] = set()
        """Ids :meth:`expect` journaled ahead that were not shown yet: their
        first showing is no ``offered_again`` (nobody was asked before)."""

    # ---- reading

    def pending(self, turn_id: str | None = None) -> list[jr.InteractionRequested]:
        """Questions waiting for an answer, in the order asked (of one turn
        when ``turn_id`` is given): those shown now, and — right after a
        reopen, before the resumed turn reaches them — the recoverable ones
        its re-drive asks again (:meth:`InteractionLog.awaiting`)."""
        shown = {iid for iid, live in self._live.items() if live.machine.state == "shown"}
        later = {r.interaction_id for r in self.log.awaiting()} - self._live.keys()
        return [
            r
            for iid, r in self.log.requested.items()
            if (iid in shown or iid in later) and (turn_id is None or r.turn_id == turn_id)
        ]

    def grants(self) -> list[Grant]:
        """The standing session grants, oldest first (honoured after resume)."""
        return list(self.log.grants.values())

    # ---- asking

    def expect(self, request: jr.InteractionRequested) -> bool:
        """Journal (fsync) a question known before its call reaches it — the
        ``running`` question about a command a crash left running in the
        turn being resumed — so it is pending and answerable from the moment
        the session opens (:meth:`pending`, :meth:`answer`); the re-drive's
        :meth:`ask` then finds it (and any answer) under its id. Nothing is
        written for an id already journaled, or a request over 128 KiB
        (:meth:`ask` refuses that one as it would anyway).

        Returns:
            Whether it was journaled now.

        Raises:
            JournalWriteError: the request could not be made durable.
        """
        if request.interaction_id in self.log.requested:
            return False
        machine = InteractionMachine()
        live = _Live(request, machine, _unheard)
        self._perform(live, machine.request(size_bytes=len(msgspec.json.encode(request))), _unheard)
        if machine.state == "refused":
            return False
        self._expected.add(request.interaction_id)
        return True

    async def ask(
        self,
        request: jr.InteractionRequested,
        *,
        can_answer: bool,
        show: Callable[[jr.InteractionRequested, bool], None],
        resolved: Callable[[jr.InteractionResolved], None],
        explicit_stop: Callable[[], bool],
        announce: Callable[[jr.InteractionRequested, bool], None] = lambda _r, _again: None,
        stop_by: Callable[[], jr.InteractionBy] = lambda: jr.InteractionBy.person,
    ) -> Resolution:
        """Ask one question and wait for its resolution (docs/design/interactions.md §2).

        Idempotent over the journal (§6): a request already journaled under
        this id is offered again (not journaled twice); one already resolved
        is applied without asking.

        Args:
            request: the record to journal (``seq``/``recorded_at_ms`` 0).
            can_answer: a person or handler can answer; else — or when the
                service's ``answerable`` says nobody reads the turn — the question
                is ``declined`` (durable, by ``headless``), never accepted.
            show: publishes the durable request as a card (called after the
                fsync, when someone can answer); its second argument says it
                was offered again (shown before, or journaled by an earlier open;
                not one :meth:`expect` journaled ahead and never showed).
            announce: publishes that the request is durable (before ``show``
                or the ``declined`` resolution; not for one already resolved).
            resolved: publishes a resolution once it is durable.
            explicit_stop: asked when the wait is cancelled: True when the
                person stopped the turn (the question is then cancelled,
                durably, never offered again); False when the process is
                stopping (it stays recoverable).
            stop_by: who cancelled it, asked with ``explicit_stop``: the
                person (they stopped the turn), or ``recovery`` (a
                ``running`` question whose command ended on its own).

        Raises:
            InteractionTooLarge: the encoded request is over 128 KiB; nothing
                was journaled or shown.
            JournalWriteError: the request or resolution could not be made
                durable (nothing shown / nothing applied).
        """
        iid = request.interaction_id
        if iid in self._live:
            raise ValueError(f"interaction {iid} is already being asked")
        machine = InteractionMachine()
        live = _Live(request, machine, resolved)
        earlier = self.log.requested.get(iid)
        # Offered again only when it was asked before: a question journaled
        # ahead by expect() is asked here for the first time.
        again = earlier is not None and iid not in self._expected
        if earlier is not None:
            live.request = earlier
            live.resolution = self.log.resolved.get(iid)
            self._perform(live, machine.recorded(live.resolution), resolved)
        else:
            size = len(msgspec.json.encode(request))
            self._perform(live, machine.request(size_bytes=size), resolved)
            if machine.state == "refused":
                raise InteractionTooLarge(iid, request.call_id, size, MAX_INTERACTION_BYTES)
        self._live[iid] = live
        try:
            if machine.state == "requested":
                announce(live.request, again)
                # Nobody to answer (a caller awaiting the turn unread): declined.
                reachable = can_answer and self._answerable(live.request.turn_id)
                self._perform(live, machine.show(can_answer=reachable), resolved)
                if machine.state in ("shown",):  # (`in`: re-read after the event)
                    show(live.request, again)
                    self._expected.discard(iid)
                    faults.boundary("interaction_shown")
                    try:
                        await live.answered.wait()
                        if live.failure is not None:
                            raise live.failure
                    except anyio.get_cancelled_exc_class():
                        if explicit_stop() and machine.state == "shown":
                            self._perform(live, machine.cancel(by=stop_by()), resolved)
                        raise
            if machine.state in ("answered",):  # declined is final: nothing to apply
                self._perform(live, machine.apply(), resolved)
        finally:
            del self._live[iid]
        assert live.resolution is not None and machine.decision is not None
        return Resolution(
            iid,
            machine.decision,
            machine.reason,
            live.resolution.by,
            again,
            live.stop_turn,
        )

    def answerers_changed(self, turn_id: str) -> None:
        """Who can answer turn ``turn_id``'s questions may have changed (a
        reader of its events left, or its end began to be awaited): each of
        its questions shown now is told the service's ``answerable`` fact,
        and the chart declines it when nobody can answer (durable, by
        ``headless``; the waiting call is refused without running,
        docs/design/interactions.md §2). A resolution that cannot be made
        durable fails the waiting call with that error (fail closed: the
        call never runs), not the caller that reported the change."""
        can_answer = self._answerable(turn_id)
        for live in list(self._live.values()):
            if live.request.turn_id != turn_id or live.machine.state != "shown":
                continue  # only a shown question waits for an answer
            try:
                effects = live.machine.answerers_changed(can_answer=can_answer)
                self._perform(live, effects, live.resolved)
            except JournalError as exc:
                live.failure = exc
                live.answered.set()

    def answer(
        self,
        interaction_id: str,
        decision: _Decision,
        *,
        reason: str | None = None,
        by: jr.InteractionBy = jr.InteractionBy.person,
    ) -> AnswerResult:
        """Answer a question by id. The first decision wins (§3).

        Returns:
            :class:`Answered` (journaled, fsync, before the call resumes; or
            the same decision again on a resolved question: idempotent,
            nothing written) or :class:`NotTaken` with the reason — an
            unknown or stale id, another decision on a resolved one, a reason
            over 128 KiB — never an exception for those.

        Raises:
            JournalError: the answer could not be made durable (a
                ``JournalWriteError``: disk full, I/O error…): it did not take
                effect, and the waiting call fails with the same error.
        """
        live = self._live.get(interaction_id)
        if live is None and interaction_id in {r.interaction_id for r in self.log.awaiting()}:
            # Recovered, not re-offered yet: answered now (durable), applied when
            # the re-drive reaches it (ask finds the resolution).
            live = _Live(self.log.requested[interaction_id], InteractionMachine(), _unheard)
            live.machine.recorded(None)
            live.machine.show(can_answer=True)
        if live is None:
            return self._not_live(interaction_id, decision)
        if decision not in live.request.choices and live.machine.state == "shown":
            # Only what the card offered can be decided: an approval word
            # never settles a reconcile question, nor the reverse.
            offered = ", ".join(c.value for c in live.request.choices)
            return NotTaken(
                interaction_id,
                "not_offered",
                f"{interaction_id} offers {offered}, not {decision.value}; "
                "the question still waits.",
            )
        effects = live.machine.answer(decision, reason=reason, by=by)
        try:
            self._perform(live, effects, live.resolved)
        except JournalError as exc:
            live.failure = exc
            live.answered.set()
            raise
        for effect in effects:
            if isinstance(effect, AnswerRefused):
                return NotTaken(
                    interaction_id,
                    "too_large",
                    f"The reason is {effect.size_bytes} bytes, over the "
                    f"{MAX_INTERACTION_BYTES}-byte limit; the question still waits.",
                )
            if isinstance(effect, AnswerIgnored):
                return _already(interaction_id, effect.decision, decision)
        return Answered(interaction_id, decision)

    def _not_live(self, interaction_id: str, decision: _Decision) -> AnswerResult:
        done = self.log.resolved.get(interaction_id)
        if done is not None:
            return _already(interaction_id, done.decision, decision)
        asked = self.log.requested.get(interaction_id)
        if asked is not None and asked.turn_id in self.log.ended_turns:
            return NotTaken(
                interaction_id,
                "stale",
                f"{interaction_id} was never answered and its turn ended; it is not asked again.",
            )
        if asked is not None:
            return NotTaken(
                interaction_id,
                "stale",
                f"{interaction_id} was asked before and is not being asked now; "
                "it is offered again when its turn resumes.",
            )
        return NotTaken(interaction_id, "unknown", f"No question {interaction_id} in this session.")

    # ---- grants

    def grant(self, interaction_id: str, scope: GrantScope) -> Grant:
        """Record an "approve for this session" grant (``permission_granted``,
        fsync) and honour it from now on — also after ``mind resume``.
        Idempotent per interaction."""
        grant_id = "gr_" + interaction_id.removeprefix("ia_")
        existing = self.log.grants.get(grant_id)
        if existing is not None:
            return existing
        record = jr.PermissionGranted(
            seq=0,
            recorded_at_ms=0,
            grant_id=grant_id,
            interaction_id=interaction_id,
            tool=scope.tool,
            scope=jr.Scope(scope.scope),
            sandbox=jr.Sandbox1(scope.sandbox) if scope.sandbox else msgspec.UNSET,
            prefix=list(scope.prefix) if scope.scope == "program" else msgspec.UNSET,
            paths=list(scope.paths) if scope.scope == "paths" else msgspec.UNSET,
            command=scope.command if scope.command is not None else msgspec.UNSET,
        )
        self.log.add(self._journal.append(record, sync=True))
        return self.log.grants[grant_id]

    def revoke(self, grant_id: str) -> bool:
        """Take a grant back (``permission_revoked``, fsync): later calls ask
        again. False (nothing written) when no such grant stands."""
        if grant_id not in self.log.grants:
            return False
        record = jr.PermissionRevoked(seq=0, recorded_at_ms=0, grant_id=grant_id)
        self.log.add(self._journal.append(record, sync=True))
        return True

    # ---- effects

    def _perform(
        self,
        live: _Live,
        effects: list[Effect],
        resolved: Callable[[jr.InteractionResolved], None],
    ) -> None:
        for effect in effects:
            if isinstance(effect, JournalRequest):
                written = self._journal.append(live.request, sync=True)
                assert isinstance(written, jr.InteractionRequested)
                live.request = written
                self.log.add(written)
                faults.boundary("interaction_requested")
            elif isinstance(effect, JournalResolution):
                record = jr.InteractionResolved(
                    seq=0,
                    recorded_at_ms=0,
                    interaction_id=live.request.interaction_id,
                    decision=effect.decision,
                    by=effect.by,
                    reason=effect.reason if effect.reason is not None else msgspec.UNSET,
                )
                written = self._journal.append(record, sync=True)
                assert isinstance(written, jr.InteractionResolved)
                live.resolution = written
                self.log.add(written)
                faults.boundary("interaction_answered_not_applied")
                live.answered.set()
                resolved(written)
            elif isinstance(effect, StopTurn):
                live.stop_turn = True  # the asking call performs it (it owns the turn)
            elif isinstance(
                effect, ShowRequest | RefuseTooLarge | AnswerRefused | AnswerIgnored | ApplyDecision
            ):
                pass  # ask() / answer() act on the state and return the result


def _unheard(_record: jr.InteractionResolved) -> None:
    """No turn publishes this resolution yet (it is applied on re-drive)."""


def _already(interaction_id: str, decision: _Decision | None, answered: _Decision) -> AnswerResult:
    """An answer to a resolved question: the same decision again is success
    (a retry is idempotent, nothing is written); another is a no-op."""
    if decision == answered:
        return Answered(interaction_id, decision)
    standing = decision.value if decision is not None else "a decision"
    return NotTaken(
        interaction_id,
        "resolved",
        f"{interaction_id} was already answered ({standing}); the first decision stands.",
        decision,
    )
