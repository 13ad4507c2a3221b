"""The startup machine, pure (docs/design/recovery.md; session_startup.yaml).

Each test drives :class:`SessionStartup` the way the shell does — perform
:attr:`effect`, report done or failed — and compares the whole list of
effects, so a wrong step anywhere shows in the diff.
"""

from __future__ import annotations

import pytest

from mind.errors import IllegalTransition
from mind.machines.session_startup import (
    RELEASE_EFFECTS,
    SessionStartup,
    reusable,
)

OPEN_ORDER = [
    "claim_mount",
    "take_lease",
    "open_journal",
    "repair_processes",
    "repair_interactions",
    "open_inbox",
    "close_orphan_calls",
    "close_turns",
    "host",
]


def run(machine: SessionStartup, fail_at: str | None = None) -> list[str]:
    """Perform every effect; the one named ``fail_at`` fails."""
    effects: list[str] = []
    while (effect := machine.effect) is not None:
        effects.append(effect)
        if effect == fail_at and not machine.releasing:
            machine.step_failed()
        else:
            machine.done()
    return effects


def opened(**facts: bool) -> SessionStartup:
    machine = SessionStartup()
    defaults = {
        "already_hosted": False,
        "broken": False,
        "busy": False,
        "journal_exists": True,
        "may_create": False,
        "directory_existed": True,
    }
    machine.open(**(defaults | facts))
    return machine


def test_open_runs_the_seed_000_order_then_is_ready() -> None:
    machine = opened()
    assert run(machine) == OPEN_ORDER
    assert machine.outcome == "ready"
    assert machine.failed_step is None
    assert not machine.new_session


def test_create_writes_a_new_journal_and_runs_the_same_repairs() -> None:
    machine = SessionStartup()
    machine.create(directory_existed=False)
    assert machine.new_session
    assert run(machine) == ["claim_mount", "take_lease", "create_journal", *OPEN_ORDER[3:]]
    assert machine.outcome == "ready"


def test_open_of_a_missing_session_that_may_be_created_creates_it() -> None:
    machine = opened(journal_exists=False, may_create=True, directory_existed=False)
    assert machine.new_session
    assert run(machine)[:3] == ["claim_mount", "take_lease", "create_journal"]


def test_open_of_a_missing_session_fails_with_nothing_taken() -> None:
    machine = opened(journal_exists=False)
    assert run(machine) == []
    assert machine.outcome == "failed"
    assert machine.failed_step is None


@pytest.mark.parametrize(
    ("fail_at", "releases"),
    [
        ("claim_mount", []),
        ("take_lease", ["release_mount"]),
        ("open_journal", ["release_lease", "release_mount"]),
        *((step, ["close_journal", "release_lease", "release_mount"]) for step in OPEN_ORDER[3:]),
    ],
)
def test_a_failure_part_way_gives_back_what_was_taken_in_reverse(
    fail_at: str, releases: list[str]
) -> None:
    machine = opened()
    effects = run(machine, fail_at)
    assert effects == [*OPEN_ORDER[: OPEN_ORDER.index(fail_at) + 1], *releases]
    assert machine.outcome == "failed"
    assert machine.failed_step == fail_at


def test_a_failed_new_session_removes_only_a_directory_it_made() -> None:
    made = SessionStartup()
    made.create(directory_existed=False)
    assert run(made, "create_journal")[-3:] == [
        "release_lease",
        "release_mount",
        "discard_directory",
    ]
    kept = SessionStartup()
    kept.create(directory_existed=True)
    assert run(kept, "create_journal")[-2:] == ["release_lease", "release_mount"]
    assert made.outcome == kept.outcome == "failed"


def test_an_existing_sessions_directory_is_never_discarded() -> None:
    machine = opened(directory_existed=False)  # odd, but the journal is there
    assert "discard_directory" not in run(machine, "open_inbox")


@pytest.mark.parametrize(
    ("broken", "busy", "expected"),
    [
        (False, False, "reused"),
        (False, True, "reused"),
        (True, True, "reused"),  # a running turn keeps its handle
        (True, False, "ready"),  # closed, then opened afresh
    ],
)
def test_a_hosted_session_is_reused_unless_broken_and_idle(
    broken: bool, busy: bool, expected: str
) -> None:
    machine = opened(already_hosted=True, broken=broken, busy=busy)
    effects = run(machine)
    assert machine.outcome == expected
    assert effects == ([] if expected == "reused" else ["close_broken", *OPEN_ORDER])


def test_misuse_is_refused_and_changes_nothing() -> None:
    machine = SessionStartup()
    with pytest.raises(IllegalTransition, match="'done' is not allowed in state 'idle'"):
        machine.done()
    run(machine := opened())
    with pytest.raises(IllegalTransition):
        machine.step_failed()
    with pytest.raises(IllegalTransition):
        machine.open(
            already_hosted=False,
            broken=False,
            busy=False,
            journal_exists=True,
            may_create=False,
            directory_existed=True,
        )
    assert machine.state == "ready"


def test_a_release_cannot_fail_the_chain() -> None:
    releasing = opened()
    for _ in range(6):
        releasing.done()
    releasing.step_failed()
    assert releasing.effect == "close_journal" and releasing.releasing
    with pytest.raises(IllegalTransition):
        releasing.step_failed()
    assert releasing.effect in RELEASE_EFFECTS


def test_reusable_is_false_only_for_a_broken_idle_handle() -> None:
    assert [reusable(broken=b, busy=u) for b in (False, True) for u in (False, True)] == [
        True,
        True,
        False,
        True,
    ]
