"""The interaction machine's pure rules and its typed refusals
(docs/design/interactions.md §1, §3, §4)."""

from __future__ import annotations

import pytest

from mind.errors import IllegalTransition
from mind.generated import journal as jr
from mind.machines.interaction import (
    MAX_INTERACTION_BYTES,
    AnswerIgnored,
    ApplyDecision,
    InteractionMachine,
    JournalResolution,
    first_resolution,
    fits,
)

D = jr.InteractionDecision


def _resolved(iid: str, decision: jr.InteractionDecision, seq: int) -> jr.InteractionResolved:
    return jr.InteractionResolved(
        seq=seq, recorded_at_ms=0, interaction_id=iid, decision=decision, by="person"
    )


def test_the_limit_is_128_kib_inclusive() -> None:
    assert fits(MAX_INTERACTION_BYTES)
    assert not fits(MAX_INTERACTION_BYTES + 1)
    assert MAX_INTERACTION_BYTES == 131072


def test_the_first_resolution_in_journal_order_wins() -> None:
    records = [_resolved("ia_b", D.deny, 1), _resolved("ia_a", D.abort, 2)]
    records.append(_resolved("ia_a", D.approve_once, 3))
    found = first_resolution(records, "ia_a")
    assert found is not None and found.decision == D.abort and found.seq == 2
    assert first_resolution(records, "ia_c") is None


def test_an_answer_before_the_request_is_shown_is_refused_unchanged() -> None:
    machine = InteractionMachine()
    machine.request(size_bytes=10)
    with pytest.raises(IllegalTransition) as refused:
        machine.answer(D.approve_once)
    assert refused.value.chart == "interaction" and refused.value.state == "requested"
    assert machine.state == "requested" and machine.decision is None


def test_a_repeated_answer_keeps_the_first_and_says_so() -> None:
    machine = InteractionMachine()
    machine.request(size_bytes=10)
    machine.show(can_answer=True)
    assert machine.answer(D.deny, reason="not now") == [
        JournalResolution(D.deny, jr.InteractionBy.person, "not now")
    ]
    assert machine.answer(D.approve_once) == [AnswerIgnored("answered", D.deny)]
    assert machine.apply() == [ApplyDecision(D.deny, "not now")]
    assert machine.answer(D.approve_once) == [AnswerIgnored("applied", D.deny)]
    assert machine.final


def test_a_recorded_resolution_is_applied_with_its_reason() -> None:
    machine = InteractionMachine()
    record = jr.InteractionResolved(
        seq=4, recorded_at_ms=0, interaction_id="ia_a", decision=D.deny, by="person", reason="r"
    )
    assert machine.recorded(record) == []
    assert machine.apply() == [ApplyDecision(D.deny, "r")]
