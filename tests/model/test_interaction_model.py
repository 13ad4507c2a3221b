"""Model-based tests of the interaction chart (docs/design/interactions.md §1).

1. Per edge, deterministic: :func:`walk_every_edge` reaches and fires every
   transition of ``InteractionChart`` and checks where it lands; the
   coverage report must show every edge taken.
2. Interleavings: hypothesis drives the real :class:`InteractionMachine`
   with any sequence of events and data, against a reference written by
   hand from docs/design/interactions.md (a dict: state, decision), and
   checks every effect; coverage over the whole run must be 100%.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings, target
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mind.errors import IllegalTransition
from mind.generated import journal as jr
from mind.generated.interaction_chart import InteractionChart
from mind.machines.interaction import (
    MAX_INTERACTION_BYTES,
    AnswerIgnored,
    AnswerRefused,
    ApplyDecision,
    InteractionMachine,
    JournalRequest,
    JournalResolution,
    RefuseTooLarge,
    ShowRequest,
    StopTurn,
)
from tests.model.reporting import check_every_edge, write_report
from tests.support.transition_coverage import TransitionCoverage

CI = settings(
    derandomize=True, database=None, deadline=None, max_examples=200, stateful_step_count=12
)

D = jr.InteractionDecision
FINAL = {"applied", "declined", "cancelled", "refused"}


def test_every_interaction_edge_is_walked_and_lands_where_the_chart_says(
    request: pytest.FixtureRequest,
) -> None:
    check_every_edge(request, InteractionChart, 14)


DECISIONS = st.sampled_from([D.approve_once, D.approve_session, D.deny, D.abort])


def _resolution(decision: jr.InteractionDecision | None) -> jr.InteractionResolved | None:
    if decision is None:
        return None
    return jr.InteractionResolved(
        seq=1, recorded_at_ms=0, interaction_id="ia_x", decision=decision, by="person"
    )


class AgainstReference(RuleBasedStateMachine):
    """Any events, any data; the reference says what must happen."""

    coverage: TransitionCoverage

    def __init__(self) -> None:
        super().__init__()
        self.machine = InteractionMachine()
        self.machine.observe(self.coverage)
        self.ref: dict[str, Any] = {"state": "proposed", "decision": None, "reason": None}
        self.steps: set[tuple[str, str]] = set()

    def _refused(self, call: Any) -> None:
        before = self.machine.state
        with pytest.raises(IllegalTransition):
            call()
        assert self.machine.state == before

    def _in(*states: str) -> Any:
        return precondition(lambda self: self.ref["state"] in states)

    @_in("proposed")
    @rule()
    def request_small(self) -> None:
        self._request(100)

    @_in("proposed")
    @rule()
    def request_too_large(self) -> None:
        self._request(MAX_INTERACTION_BYTES + 1)

    def _request(self, size: int) -> None:
        effects = self.machine.request(size_bytes=size)
        if size <= MAX_INTERACTION_BYTES:
            assert effects == [JournalRequest()]
            self.ref["state"] = "requested"
        else:
            assert effects == [RefuseTooLarge(size)]
            self.ref["state"] = "refused"

    @_in("proposed")
    @rule()
    def recorded_unresolved(self) -> None:
        self._recorded(None)

    @_in("proposed")
    @rule()
    def recorded_aborted(self) -> None:
        self._recorded(D.abort)

    @_in("proposed")
    @rule(resolved=DECISIONS)
    def recorded_resolved(self, resolved: jr.InteractionDecision) -> None:
        self._recorded(resolved)

    def _recorded(self, resolved: jr.InteractionDecision | None) -> None:
        assert self.machine.recorded(_resolution(resolved)) == []
        self.ref["state"] = "requested" if resolved is None else "answered"
        self.ref["decision"] = resolved

    @_in("requested")
    @rule()
    def show_to_a_person(self) -> None:
        self._show(True)

    @_in("requested")
    @rule()
    def show_headless(self) -> None:
        self._show(False)

    def _show(self, can_answer: bool) -> None:
        effects = self.machine.show(can_answer=can_answer)
        if can_answer:
            assert effects == [ShowRequest()]
            self.ref["state"] = "shown"
        else:
            assert effects == [JournalResolution(D.declined, jr.InteractionBy.headless)]
            self.ref.update(state="declined", decision=D.declined)

    @_in("shown", "answered", *FINAL)
    @rule()
    def approve(self) -> None:
        self._answer(D.approve_once, None)

    @_in("shown", "answered", *FINAL)
    @rule()
    def stop(self) -> None:
        """An abort (its own rule: applying it is the StopTurn edge)."""
        self._answer(D.abort, None)

    @_in("shown", "answered", *FINAL)
    @rule(decision=DECISIONS)
    def answer_with_a_reason(self, decision: jr.InteractionDecision) -> None:
        self._answer(decision, "no")

    @_in("shown", "answered", *FINAL)
    @rule()
    def answer_too_large(self) -> None:
        self._answer(D.deny, "x" * (MAX_INTERACTION_BYTES + 1))

    def _answer(self, decision: jr.InteractionDecision, reason: str | None) -> None:
        state = self.ref["state"]
        effects = self.machine.answer(decision, reason=reason)
        if state == "shown":
            if reason is not None and len(reason) > MAX_INTERACTION_BYTES:
                assert effects == [AnswerRefused(len(reason))]
            else:
                assert effects == [JournalResolution(decision, jr.InteractionBy.person, reason)]
                self.ref.update(state="answered", decision=decision, reason=reason)
        else:  # first decision wins: a no-op naming the one that stands
            assert effects == [AnswerIgnored(state, self.ref["decision"])]

    @_in("shown")
    @rule()
    def a_reader_remains(self) -> None:
        self._answerers_changed(True)

    @_in("shown")
    @rule()
    def nobody_answers_any_more(self) -> None:
        self._answerers_changed(False)

    def _answerers_changed(self, can_answer: bool) -> None:
        """Who can answer changed: nobody now declines it (by headless)."""
        effects = self.machine.answerers_changed(can_answer=can_answer)
        if can_answer:
            assert effects == []
        else:
            assert effects == [JournalResolution(D.declined, jr.InteractionBy.headless)]
            self.ref.update(state="declined", decision=D.declined)

    @_in("shown")
    @rule()
    def cancel(self) -> None:
        assert self.machine.cancel() == [JournalResolution(D.cancelled, jr.InteractionBy.person)]
        self.ref.update(state="cancelled", decision=D.cancelled)

    @_in("answered")
    @rule()
    def apply(self) -> None:
        applied = [ApplyDecision(self.ref["decision"], self.ref["reason"])]
        if self.ref["decision"] == D.abort:  # the turn is stopped now
            applied.append(StopTurn())
        assert self.machine.apply() == applied
        self.ref["state"] = "applied"

    @rule(
        event=st.sampled_from(
            ["request", "recorded", "show", "answer", "answerers_changed", "cancel", "apply"]
        )
    )
    def misuse_is_refused(self, event: str) -> None:
        """An event the chart does not allow here is refused, the machine unchanged."""
        state = self.ref["state"]
        allowed = {
            "request": {"proposed"},
            "recorded": {"proposed"},
            "show": {"requested"},
            "answer": {"shown", "answered", *FINAL},
            "answerers_changed": {"shown"},
            "cancel": {"shown"},
            "apply": {"answered"},
        }[event]
        if state in allowed:
            return
        calls = {
            "request": lambda: self.machine.request(size_bytes=1),
            "recorded": lambda: self.machine.recorded(None),
            "show": lambda: self.machine.show(can_answer=True),
            "answer": lambda: self.machine.answer(D.deny),
            "answerers_changed": lambda: self.machine.answerers_changed(can_answer=False),
            "cancel": self.machine.cancel,
            "apply": self.machine.apply,
        }
        self._refused(calls[event])

    @invariant()
    def matches(self) -> None:
        self.steps.add((self.ref["state"], str(self.ref["decision"])))

    def teardown(self) -> None:
        target(float(len(self.steps)), label="distinct states")
        assert self.machine.state == self.ref["state"]
        assert self.machine.decision == self.ref["decision"]
        assert self.machine.final == (self.ref["state"] in FINAL)


def test_interaction_machine_against_reference_model(request: pytest.FixtureRequest) -> None:
    coverage = TransitionCoverage(InteractionChart)
    AgainstReference.coverage = coverage
    run_state_machine_as_test(AgainstReference, settings=CI)
    write_report(request, "InteractionChart-reference", coverage)
    assert coverage.missed == (), coverage.report()
