"""Model-based tests of the startup chart (docs/design/recovery.md, the startup order).

1. Per edge, deterministic: every kind of startup (create, open, open of a
   missing session, re-open of a hosted one) with every step failing in
   turn, compared with the reference below; together they take every edge
   of ``SessionStartupChart`` (the generic :func:`walk_every_edge` search
   tries every guard assignment for every event from every state — 32 x 17
   x 19 replays for this chart, over a minute — so the cases are listed).
2. Whole startups: hypothesis draws the facts known before startup (hosted
   here, broken, busy, journal present, may create, directory made here) and
   which step fails, then drives the real :class:`SessionStartup` the way the
   shell does and compares every effect with a reference written by hand
   from docs/design/recovery.md (a list of steps and a stack of what was taken, not derived
   from the chart). Transition coverage over the whole run must be 100%.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mind.generated.session_startup_chart import SessionStartupChart
from mind.machines.session_startup import SessionStartup
from tests.model.reporting import write_report
from tests.support.transition_coverage import TransitionCoverage

CI = settings(derandomize=True, database=None, deadline=None, max_examples=100)


# ------------------------------------------------------------------ reference model

# Seed 000 SessionRuntime.initialize, written out: step -> what it takes
# (given back on a later failure, last taken first).
REPAIRS = [
    "repair_processes",
    "repair_interactions",
    "open_inbox",
    "close_orphan_calls",
    "close_turns",
    "host",
]
TAKES = {"claim_mount": "release_mount", "take_lease": "release_lease"}


def reference(facts: dict[str, bool], fail_at: int | None) -> tuple[list[str], str]:
    """The effects a startup performs and how it ends; ``fail_at`` indexes
    the forward steps (after a ``close_broken``, which never fails here)."""
    if facts["create"]:
        new = True
        effects: list[str] = []
    elif facts["hosted"]:
        if facts["busy"] or not facts["broken"]:
            return [], "reused"
        new, effects = False, ["close_broken"]
    elif not facts["journal"]:
        if not facts["may_create"]:
            return [], "failed"
        new, effects = True, []
    else:
        new, effects = False, []
    steps = ["claim_mount", "take_lease", "create_journal" if new else "open_journal", *REPAIRS]
    taken: list[str] = []
    for index, step in enumerate(steps):
        effects.append(step)
        if index == fail_at:
            releases = list(reversed(taken))
            if new and not facts["directory_existed"] and "release_mount" in releases:
                releases.append("discard_directory")
            return effects + releases, "failed"
        if step in TAKES:
            taken.append(TAKES[step])
        elif step.endswith("_journal"):
            taken.append("close_journal")
    return effects, "ready"


FACTS = st.fixed_dictionaries(
    {
        name: st.booleans()
        for name in ("create", "hosted", "broken", "busy", "journal", "may_create")
    }
    | {"directory_existed": st.booleans()}
)


def drive(machine: SessionStartup, facts: dict[str, bool], fail_at: int | None) -> list[str]:
    """Start as the shell does: the forward step number ``fail_at`` fails."""
    if facts["create"]:
        machine.create(directory_existed=facts["directory_existed"])
    else:
        machine.open(
            already_hosted=facts["hosted"],
            broken=facts["broken"],
            busy=facts["busy"],
            journal_exists=facts["journal"],
            may_create=facts["may_create"],
            directory_existed=facts["directory_existed"],
        )
    effects: list[str] = []
    forward = 0
    while (effect := machine.effect) is not None:
        effects.append(effect)
        if effect == "close_broken" or machine.releasing:
            machine.done()
            continue
        if forward == fail_at:
            machine.step_failed()
        else:
            machine.done()
        forward += 1
    return effects


NO = dict.fromkeys(("create", "hosted", "broken", "busy", "journal", "may_create"), False)
KINDS = {
    "create, directory made here": NO | {"create": True, "directory_existed": False},
    "create, directory there": NO | {"create": True, "directory_existed": True},
    "open": NO | {"journal": True, "directory_existed": True},
    "open missing, may create": NO | {"may_create": True, "directory_existed": False},
    "open missing": NO | {"directory_existed": False},
    "hosted": NO | {"hosted": True, "journal": True, "directory_existed": True},
    "hosted, broken, busy": NO
    | {"hosted": True, "broken": True, "busy": True, "journal": True, "directory_existed": True},
    "hosted, broken": NO
    | {"hosted": True, "broken": True, "journal": True, "directory_existed": True},
}


def test_every_startup_edge_is_walked_against_the_reference(
    request: pytest.FixtureRequest,
) -> None:
    coverage = TransitionCoverage(SessionStartupChart)
    outcomes: set[str] = set()
    for facts in KINDS.values():
        for fail_at in (None, *range(9)):
            machine = SessionStartup()
            machine.observe(coverage)
            effects = drive(machine, facts, fail_at)
            assert (effects, machine.outcome) == reference(facts, fail_at), (facts, fail_at)
            outcomes.add(str(machine.outcome))
    write_report(request, "SessionStartupChart-edges", coverage)
    assert coverage.missed == ()
    assert len(coverage.edges) == 32
    assert outcomes == {"ready", "reused", "failed"}


def test_startups_against_the_reference(request: pytest.FixtureRequest) -> None:
    coverage = TransitionCoverage(SessionStartupChart)

    @CI
    @given(facts=FACTS, fail_at=st.none() | st.integers(min_value=0, max_value=8))
    def one_startup(facts: dict[str, bool], fail_at: int | None) -> None:
        machine = SessionStartup()
        machine.observe(coverage)
        effects = drive(machine, facts, fail_at)
        assert (effects, machine.outcome) == reference(facts, fail_at)

    one_startup()
    write_report(request, "SessionStartupChart-model", coverage)
