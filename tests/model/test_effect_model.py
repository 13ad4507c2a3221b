"""Model-based tests of the effect chart (docs/design/effects.md §3, §4).

1. Per edge, deterministic: :func:`check_every_edge` reaches and fires every
   transition of ``EffectChart`` and checks the state each lands in.
2. Sequences: hypothesis sends random facts (approve, deny, prepare,
   execute, finish with a status, recover with what the supervisor's
   directory says, reconcile with a resolution) to a
   real :class:`EffectMachine` of each effect class and compares the state
   and the actions named after every fact with a reference written by hand
   from docs/design/effects.md (a table, not derived from the chart); a fact
   the reference refuses must raise ``IllegalTransition`` and leave the
   machine unchanged. Transition coverage over the whole run must be 100%.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mind.errors import IllegalTransition
from mind.generated.effect_chart import EffectChart
from mind.machines.effect import (
    Collect,
    Commit,
    DeliverUnknown,
    EffectClass,
    EffectMachine,
    Prepare,
    RecordResolution,
    Resolve,
    Run,
)
from tests.model.reporting import check_every_edge, write_report
from tests.support.transition_coverage import TransitionCoverage

CI = settings(derandomize=True, database=None, deadline=None, max_examples=300)
CLASSES: tuple[EffectClass, ...] = ("read_only", "idempotent", "non_idempotent")


def test_every_edge_is_walked_and_lands_where_the_chart_says(
    request: pytest.FixtureRequest,
) -> None:
    check_every_edge(request, EffectChart, 15)


def reference(
    state: str, effect_class: EffectClass, fact: tuple[str, Any]
) -> tuple[str, list[object]] | None:
    """The design's table: (next state, actions), or None when refused."""
    name, arg = fact
    rerun_safe = effect_class != "non_idempotent"
    if state == "proposed" and name == "approve":
        return "approved", [Prepare()]
    if state == "proposed" and name == "deny":
        return "denied", []
    if state == "approved" and name == "persisted":
        return "prepared", [Run()]
    if state == "prepared" and name == "execute":
        return "executing", []
    if state == "executing" and name == "finish":
        ok = arg == "ok"
        return ("committed" if ok else "failed"), [Commit("committed" if ok else "failed", "ran")]
    if state in ("prepared", "executing") and name == "recover":
        can_ask, process, killed = arg
        if process in ("finished", "running"):  # its end is collected, never re-run
            # A person may stop a command still running; headless only waits.
            kill: tuple[Literal["kill"], ...] = (
                ("kill",) if process == "running" and can_ask else ()
            )
            return "executing", [Collect(kill)]
        # The person's kill left no record: never asked. Only a command that
        # ran (executing) can be killed; a merely prepared one ignores the fact.
        if killed and state == "executing":
            return "reconciled", [RecordResolution("killed"), DeliverUnknown("failed")]
        if rerun_safe or process == "never_started":
            return "executing", [Run()]
        choices = ("rerun", "mark_failed", "tell_model") if can_ask else ("tell_model",)
        return "unknown", [Resolve(choices)]
    if state == "unknown" and name == "reconcile":
        if arg == "rerun":
            return "executing", [RecordResolution("rerun"), Run()]
        outcome = "failed" if arg == "mark_failed" else "unknown"
        return "reconciled", [RecordResolution(arg), DeliverUnknown(outcome)]
    return None


def send(machine: EffectMachine, fact: tuple[str, Any]) -> list[object]:
    name, arg = fact
    if name == "finish":
        return list(machine.finish(arg))
    if name == "recover":
        return list(machine.recover(can_ask=arg[0], process=arg[1], killed=arg[2]))
    if name == "reconcile":
        return list(machine.reconcile(arg))
    return list(getattr(machine, name)())


FACTS = st.one_of(
    st.sampled_from([("approve", None), ("deny", None), ("persisted", None), ("execute", None)]),
    st.tuples(st.just("finish"), st.sampled_from(["ok", "error", "denied", "interrupted"])),
    st.tuples(
        st.just("recover"),
        st.tuples(
            st.booleans(),
            st.sampled_from(["finished", "running", "never_started", "lost", "none"]),
            st.booleans(),
        ),
    ),
    st.tuples(st.just("reconcile"), st.sampled_from(["rerun", "mark_failed", "tell_model"])),
)
# Mostly the lifecycle's next fact, so runs get deep; random ones in between.
LIFECYCLE = [("approve", None), ("persisted", None), ("execute", None)]


@st.composite
def runs(draw: st.DrawFn) -> tuple[EffectClass, list[tuple[str, Any]]]:
    effect_class = draw(st.sampled_from(CLASSES))
    facts: list[tuple[str, Any]] = []
    for step in range(draw(st.integers(1, 9))):
        if step < len(LIFECYCLE) and draw(st.booleans()):
            facts.append(LIFECYCLE[step])
        else:
            facts.append(draw(FACTS))
    return effect_class, facts


COVERAGE = TransitionCoverage(EffectChart)


_LIFE = [("approve", None), ("persisted", None)]


@CI
@given(runs())
# The unknown branch from both sources, for certain (not left to the draw).
@example(("non_idempotent", [*_LIFE, ("recover", (True, "lost", False)), ("reconcile", "rerun")]))
@example(
    (
        "non_idempotent",
        [
            *_LIFE,
            ("execute", None),
            ("recover", (False, "none", False)),
            ("reconcile", "tell_model"),
        ],
    )
)
@example(("non_idempotent", [*_LIFE, ("execute", None), ("recover", (True, "lost", True))]))
def _random_runs_match_the_reference(run: tuple[EffectClass, list[tuple[str, Any]]]) -> None:
    effect_class, facts = run
    machine = EffectMachine("ef_" + "0" * 32, effect_class)
    machine.observe(COVERAGE)
    state = "proposed"
    for fact in facts:
        expected = reference(state, effect_class, fact)
        if expected is None:
            with pytest.raises(IllegalTransition):
                send(machine, fact)
            assert machine.state == state
            continue
        actions = send(machine, fact)
        state, want = expected
        assert (machine.state, actions) == (state, want), (effect_class, facts, fact)
        assert machine.prepared == (state not in ("proposed", "approved", "denied"))


def test_random_fact_sequences_match_the_reference_and_take_every_edge(
    request: pytest.FixtureRequest,
) -> None:
    _random_runs_match_the_reference()
    write_report(request, "EffectChart", COVERAGE)
    assert COVERAGE.missed == ()
