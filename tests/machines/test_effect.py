"""The effect machine's pure guards (mind.machines.effect; docs/design/effects.md §4)."""

from __future__ import annotations

import pytest

from mind.errors import IllegalTransition
from mind.machines.effect import (
    Collect,
    Commit,
    DeliverUnknown,
    EffectMachine,
    RecordResolution,
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


def test_a_command_the_person_killed_that_left_no_exit_record_is_resolved_killed_unasked() -> None:
    """effects.md §4: the chart, not the shell, decides that a kill which
    left no exit record is resolved ``killed`` — no reconcile question;
    without the kill the same fact is ``unknown`` and asked."""
    killed = EffectMachine("ef_k", "non_idempotent")
    killed.approve(), killed.persisted(), killed.execute()
    assert killed.recover(can_ask=True, process="running") == [Collect(("kill",))]
    assert killed.recover(can_ask=True, process="lost", killed=True) == [
        RecordResolution("killed"),
        DeliverUnknown("failed"),
    ]
    assert killed.state == "reconciled"
    asked = EffectMachine("ef_a", "non_idempotent")
    asked.approve(), asked.persisted(), asked.execute()
    assert asked.recover(can_ask=True, process="lost", killed=False) == [
        Resolve(("rerun", "mark_failed", "tell_model"))
    ]
    assert asked.state == "unknown"
    # Evidence beats the kill: an exit record is collected, whatever was answered.
    recorded = EffectMachine("ef_r", "non_idempotent")
    recorded.approve(), recorded.persisted(), recorded.execute()
    assert recorded.recover(can_ask=True, process="finished", killed=True) == [Collect(())]
