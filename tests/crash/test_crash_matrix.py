"""The crash matrix: every durable boundary x four scenarios, as real processes.

Each case runs one real process with ``MIND_CRASH_AT=<boundary>:<n>`` — ``mind
exec`` for the plain and tool turns, :mod:`tests.crash.driver` (the library)
for the two steering scenarios — against the stateless fake model; checks it
died by SIGKILL when the scenario reaches the n-th hit of that boundary (and
ran to the end otherwise: "not reached"); restarts the session with ``mind
exec --session ID --json`` until nothing is left to recover; and checks the
invariants of :mod:`tests.crash.harness` on the journal, ``inbox.json``,
``effects.log`` and every request the model received.

Every hit of every boundary is tried (n = 1 .. hits), so the last hit is
always among them. A clean baseline per scenario checks the hit table below
against what the scenario really does.

The figures (scenarios, runs, reached / not reached cells, violations) go to
``.pytest_cache/d/crash-summary.txt`` and are printed (``-s``).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from mind.shell.faults import BOUNDARIES
from tests.crash import driver
from tests.crash.harness import (
    REPO,
    Case,
    Input,
    Report,
    boundary_hits,
    check,
    json_lines,
    record_cell,
    recover,
    run,
)

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Scenario:
    """How a scenario runs, and how often a clean run reaches each boundary."""

    name: str
    hits: dict[str, int]
    prompt: str | None = None  # mind exec scenarios
    steps: tuple[driver.Step, ...] = ()  # library driver scenarios
    steer_dispositions: tuple[str, ...] = ()


def _hits(*counts: int) -> dict[str, int]:
    names = (
        "after_inbox_write",
        "after_turn_started",
        "after_model_round",
        "after_tool_call",
        "interaction_requested",
        "interaction_shown",
        "interaction_answered_not_applied",
        "effect_prepared",
        "effect_executing",
        "effect_committed_not_delivered",
        "after_tool_result",
        "before_terminal",
        "after_terminal",
    )
    hits = dict(zip(names, counts, strict=True))
    # Sessions this short never reach a checkpoint (tests/shell/test_checkpoint.py crashes there),
    # and none compacts (tests/crash/test_compaction_crashes.py kills at those boundaries).
    hits.update(
        dict.fromkeys(("compaction_started", "compaction_request_sent", "compaction_completed"), 0)
    )
    hits["checkpoint_written"] = 0
    return hits


# The scenarios run with approval "never": no question is asked, so the
# interaction boundaries are not reached here; tests/crash/test_interaction_crashes.py
# crashes at each of them with a person answering.
SCENARIOS = {
    s.name: s
    for s in (
        # One text round.
        Scenario(
            "plain", _hits(1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1), prompt="plain prompt: say hi"
        ),
        # A tool-call round, the tool, a text round.
        Scenario("tool", _hits(1, 1, 2, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1), prompt="TOOL: tool prompt"),
        # The same with a read-only tool (list_dir): a crash inside the round
        # resumes the turn, which runs the call (docs/design/recovery.md §8).
        Scenario(
            "read", _hits(1, 1, 2, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1), prompt="LIST: read-only prompt"
        ),
        # The steering arrives while the tool runs; the second round answers it.
        Scenario(
            "steer_before",
            _hits(2, 1, 2, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1),
            steps=driver.SCENARIOS["steer_before"],
            steer_dispositions=("steering",),
        ),
        # The steering arrives after the seal: it runs as a second turn. (The
        # seal and the terminal record happen in one synchronous step, so the
        # turn is over when another task can send: the input starts the next
        # turn at once.)
        Scenario(
            "steer_after",
            _hits(2, 2, 3, 1, 0, 0, 0, 1, 1, 1, 1, 2, 2),
            steps=driver.SCENARIOS["steer_after"],
            steer_dispositions=("started", "next_turn"),
        ),
    )
}

# Boundaries during which no unanswered tool can have run (at
# effect_prepared its start is durable, the tool not yet run): a synthetic
# result there must leave no effect line.
_TOOLS_NOT_STARTED = ("after_model_round", "after_tool_call", "effect_prepared")


def _cells() -> list[object]:
    out: list[object] = []
    for scenario in SCENARIOS.values():
        for boundary in BOUNDARIES:
            hits = scenario.hits.get(boundary)
            ns = range(1, (hits or 0) + 1) if hits else [1]
            for n in ns:
                out.append(
                    pytest.param(scenario.name, boundary, n, id=f"{scenario.name}-{boundary}-{n}")
                )
    return out


def _start(
    scenario: Scenario, case: Case, crash_at: str | None
) -> tuple[int, list[Input], list[str]]:
    """Run the scenario's process once; returns (returncode, inputs, problems)."""
    env = case.env(crash_at)
    if scenario.prompt is not None:
        proc = run(case.exec_argv(scenario.prompt, new=True), env)
        # The prompt's inbox write is the first boundary mind exec reaches:
        # whatever the crash point, it was accepted.
        return proc.returncode, [Input(scenario.prompt, "durable")], _stderr(proc)
    proc = run(case.driver_argv(scenario.name), env)
    lines = json_lines(proc.stdout)
    intents = {str(x["intent"]) for x in lines if "intent" in x}
    accepted = {str(x["accepted"]): x for x in lines if "accepted" in x}
    problems = _stderr(proc)
    inputs = []
    boundary, _, n = (crash_at or "").partition(":")
    for index, step in enumerate(scenario.steps):
        if step.message_id in accepted:
            status = "durable"
        elif boundary == "after_inbox_write" and int(n) == index + 1:
            status = "durable"  # killed right after this input's inbox write
        elif step.message_id in intents:
            status = "uncertain"
        else:
            status = "unsent"
        inputs.append(Input(step.text, status, step.message_id))
        got = accepted.get(step.message_id)
        routed = got["disposition"] if got is not None else None
        if step.kind == "steer" and routed and routed not in scenario.steer_dispositions:
            problems.append(
                f"steering {step.message_id} was routed {routed!r}, "
                f"expected one of {scenario.steer_dispositions}"
            )
    return proc.returncode, inputs, problems


def _stderr(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """A traceback on stderr is a problem even when the exit code is right."""
    if "Traceback" in proc.stderr:
        return [f"stderr: {proc.stderr.strip()[-800:]}"]
    return []


def _finish(request: pytest.FixtureRequest, cell: dict[str, object], report: Report) -> None:
    cell.update(violations=len(report.violations), **report.stats)
    summary = record_cell(request.config, request.node.nodeid, cell)
    print(f"\n{request.node.name}: {report.stats}\n{summary}", end="")
    assert report.violations == [], "\n".join(report.violations)


@pytest.mark.parametrize(("scenario_name", "boundary", "n"), _cells())
def test_crash_at_boundary_then_restart(
    request: pytest.FixtureRequest, case: Case, scenario_name: str, boundary: str, n: int
) -> None:
    scenario = SCENARIOS[scenario_name]
    hits = scenario.hits.get(boundary)
    assert hits is not None, f"add boundary {boundary!r} to the hit table of {scenario_name!r}"
    reached = n <= hits
    returncode, inputs, problems = _start(scenario, case, f"{boundary}:{n}")
    expected_rc = -9 if reached else 0
    assert returncode == expected_rc, (
        f"{boundary}:{n} {'reached' if reached else 'not reached'}: "
        f"exit {returncode}, expected {expected_rc}"
    )
    recovery = recover(case)
    report = check(case, inputs, recovery, tools_never_started=boundary in _TOOLS_NOT_STARTED)
    report.violations[:0] = problems
    cell = {"kind": "matrix", "scenario": scenario_name, "boundary": boundary, "n": n}
    _finish(request, {**cell, "reached": reached}, report)


@pytest.mark.parametrize("scenario_name", sorted(SCENARIOS))
def test_clean_run_reaches_each_boundary_as_the_table_says(
    request: pytest.FixtureRequest, case: Case, scenario_name: str
) -> None:
    """No crash: the run completes, its hits match the table, nothing to recover."""
    scenario = SCENARIOS[scenario_name]
    returncode, inputs, problems = _start(scenario, case, None)
    assert returncode == 0
    assert all(i.status == "durable" for i in inputs), inputs
    assert boundary_hits(case, len(inputs)) == scenario.hits
    recovery = recover(case)
    report = check(case, inputs, recovery)
    report.violations[:0] = problems
    if recovery.restarts != 1:
        report.violations.append(f"a clean run needed {recovery.restarts} restarts")
    _finish(request, {"kind": "baseline", "scenario": scenario_name}, report)


def test_every_boundary_is_in_the_hit_tables() -> None:
    for scenario in SCENARIOS.values():
        assert sorted(scenario.hits) == sorted(BOUNDARIES), scenario.name


def test_mind_debug_boundaries_lists_every_boundary() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", "debug", "boundaries"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert (proc.returncode, proc.stdout.split()) == (0, list(BOUNDARIES))
