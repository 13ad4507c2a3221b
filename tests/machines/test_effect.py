"""The effect machine's pure guards (mind.machines.effect; docs/design/effects.md §4)."""

from __future__ import annotations

import pytest

from mind.errors import IllegalTransition
from mind.machines.effect import (
    Collect,
    Commit,
    EffectMachine,
    Resolve,
    Run,
    outcome_of,
    person_answers,
    reconcile_choices,
    running_choices,
    safe_to_rerun,
)


def test_only_read_only_and_idempotent_effects_are_safe_to_rerun() -> None:
    assert [safe_to_rerun(c) for c in ("read_only", "idempotent", "non_idempotent")] == [
        True,
        True,
        False,
    ]


def test_reconcile_choices_never_rerun_without_a_person() -> None:
    assert reconcile_choices("non_idempotent", can_ask=True) == (
        "rerun",
        "mark_failed",
        "tell_model",
    )
    assert reconcile_choices("non_idempotent", can_ask=False) == ("tell_model",)
    assert reconcile_choices("idempotent", can_ask=False) == ()
    assert reconcile_choices("read_only", can_ask=True) == ()


def test_a_question_is_shown_only_when_a_person_can_choose_more_than_mind_would() -> None:
    """The reconcile card's ``can_answer`` is the chart's: shown with its
    three choices where a person can answer, declined unshown headless."""
    assert person_answers(reconcile_choices("non_idempotent", can_ask=True))
    assert not person_answers(reconcile_choices("non_idempotent", can_ask=False))
    assert person_answers(running_choices("running", can_ask=True))
    assert not person_answers(running_choices("running", can_ask=False))


def test_a_running_command_is_collected_and_only_a_person_may_kill_it() -> None:
    for can_ask, choices in ((True, ("kill",)), (False, ())):
        machine = EffectMachine("ef_x", "non_idempotent")
        machine.approve()
        machine.persisted()
        machine.execute()
        assert machine.recover(can_ask=can_ask, process="running") == [Collect(choices)]
    assert running_choices("finished", can_ask=True) == ()


def test_outcome_of_a_status() -> None:
    assert [outcome_of(s) for s in ("ok", "error", "denied", "interrupted")] == [
        "committed",
        "failed",
        "failed",
        "failed",
    ]


def test_a_live_effect_commits_and_a_recovered_shell_command_becomes_unknown() -> None:
    live = EffectMachine("ef_a", "non_idempotent")
    live.approve()
    assert live.persisted() == [Run()]
    live.execute()
    assert live.finish("error") == [Commit("failed", "ran")]
    assert live.state == "failed"
    crashed = EffectMachine("ef_b", "non_idempotent")
    crashed.approve()
    crashed.persisted()
    assert crashed.recover(can_ask=False) == [Resolve(("tell_model",))]
    with pytest.raises(IllegalTransition) as caught:
        crashed.execute()  # an unknown effect never runs again without a resolution
    assert (caught.value.chart, caught.value.state) == ("effect", "unknown")
