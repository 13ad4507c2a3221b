"""Crashes at the interaction boundaries, with a person answering (docs/design/interactions.md §6).

Scenario ``approve`` (:mod:`tests.crash.driver`): an interactive library
session with approval ``untrusted``; the prompt's shell call asks, and the
driver answers every card the moment it is shown. Each case kills the real
process with ``MIND_CRASH_AT=<boundary>:1`` — when the question is
journaled but not shown, shown but not answered, answered (fsync) but not
applied, and around it — then reopens the session with the same driver
(``--restart``, answering again) until nothing is left, and checks:

- every answered approval is never asked again;
- every unanswered one is asked again, with the same id (``offered_again``);
- a question is journaled once, and ends with exactly one resolution;
- no command ran twice, each call has one result, every request the model
  received is valid, the input is acknowledged once
  (:func:`tests.crash.harness.check`).

A clean baseline checks the boundary hit table against the journal. The
figures (scenarios x runs, violations) are printed and recorded with the
crash matrix's summary.
"""

from __future__ import annotations

from typing import Any

import pytest

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.crash.harness import (
    MAX_RESTARTS,
    Case,
    Input,
    Recovery,
    boundary_hits,
    check,
    json_lines,
    record_cell,
    run,
)

pytestmark = pytest.mark.slow

PROMPT = "TOOL: approve prompt"
HITS = {
    "after_inbox_write": 1,
    "after_turn_started": 1,
    "after_model_round": 2,
    "after_tool_call": 1,
    "interaction_requested": 1,
    "interaction_shown": 1,
    "interaction_answered_not_applied": 1,
    "effect_prepared": 1,
    "effect_executing": 1,
    "effect_committed_not_delivered": 1,
    "after_tool_result": 1,
    "compaction_started": 0,
    "compaction_request_sent": 0,
    "compaction_completed": 0,
    "checkpoint_written": 0,
    "before_terminal": 1,
    "after_terminal": 1,
}
"""How often a clean run of the scenario reaches each boundary."""

CRASH_AT = (
    "after_tool_call",
    "interaction_requested",
    "interaction_shown",
    "interaction_answered_not_applied",
    "effect_prepared",
    "after_tool_result",
)
RUNS = 2
"""Each boundary is crashed at this many times (fresh cases)."""


def _driver(case: Case, crash_at: str | None, *, restart: bool) -> tuple[int, list[dict[str, Any]]]:
    argv = case.driver_argv("approve") + (["--restart"] if restart else [])
    proc = run(argv, case.env(crash_at))
    return proc.returncode, json_lines(proc.stdout)


def _journal(case: Case) -> list[jr.JournalRecord]:
    path = case.session_dir / "journal.jsonl"
    return read_records(path)[0] if path.exists() else []


def _questions(records: list[jr.JournalRecord]) -> tuple[set[str], set[str]]:
    """(requested ids, resolved ids) in ``records``."""
    asked = {r.interaction_id for r in records if isinstance(r, jr.InteractionRequested)}
    done = {r.interaction_id for r in records if isinstance(r, jr.InteractionResolved)}
    return asked, done


def _crash_and_restart(case: Case, boundary: str) -> tuple[list[str], dict[str, Any]]:
    """One case: crash at ``boundary``, restart until idle; (violations, stats)."""
    v: list[str] = []
    rc, _lines = _driver(case, f"{boundary}:1", restart=False)
    if rc != -9:
        v.append(f"{boundary}: exit {rc}, expected -9 (SIGKILL at the boundary)")
    asked_before, answered_before = _questions(_journal(case))
    unanswered = asked_before - answered_before
    recovery = Recovery()
    offered: list[dict[str, Any]] = []
    for _ in range(MAX_RESTARTS):
        rc, lines = _driver(case, None, restart=True)
        recovery.restarts += 1
        if rc != 0:
            recovery.problems.append(f"restart {recovery.restarts} exited {rc}")
            break
        offered += [x for x in lines if "asked" in x]
        done = [x["done"] for x in lines if "done" in x]
        if done == [[]]:  # nothing ran: idle
            break
    else:
        recovery.problems.append(f"still running after {MAX_RESTARTS} restarts")
    for item in offered:
        iid = item["asked"]
        if iid in answered_before:
            v.append(f"{boundary}: {iid} was answered before the crash and asked again")
    again = {x["asked"] for x in offered if x["again"]}
    for iid in sorted(unanswered - again):
        v.append(f"{boundary}: unanswered {iid} was not offered again with its id")
    records = _journal(case)
    requests = [r.interaction_id for r in records if isinstance(r, jr.InteractionRequested)]
    resolutions = [r.interaction_id for r in records if isinstance(r, jr.InteractionResolved)]
    for iid in sorted(set(requests)):
        if requests.count(iid) != 1 or resolutions.count(iid) != 1:
            v.append(
                f"{boundary}: {iid} requested {requests.count(iid)}x, "
                f"resolved {resolutions.count(iid)}x"
            )
    report = check(
        case,
        [Input(PROMPT, "durable", "m-prompt")],
        recovery,
        tools_never_started=boundary in ("after_tool_call", "interaction_requested"),
    )
    stats = {
        **report.stats,
        "offered_again": len(again),
        "answered_before": len(answered_before),
    }
    return v + report.violations, stats


@pytest.mark.parametrize("run_no", range(1, RUNS + 1))
@pytest.mark.parametrize("boundary", CRASH_AT)
def test_crash_at_an_interaction_boundary_then_restart(
    request: pytest.FixtureRequest, case: Case, boundary: str, run_no: int
) -> None:
    violations, stats = _crash_and_restart(case, boundary)
    cell = {
        "kind": "matrix",
        "scenario": "approve",
        "boundary": boundary,
        "n": run_no,
        "reached": True,
        "violations": len(violations),
        **stats,
    }
    summary = record_cell(request.config, request.node.nodeid, cell)
    print(f"\n{request.node.name}: {stats}\n{summary}", end="")
    assert violations == [], "\n".join(violations)


def test_clean_run_asks_once_and_reaches_each_boundary_as_the_table_says(
    request: pytest.FixtureRequest, case: Case
) -> None:
    rc, lines = _driver(case, None, restart=False)
    assert rc == 0
    assert [x["kind"] for x in lines if "asked" in x] == ["approval"]
    assert all(x["taken"] for x in lines if "answered" in x)
    assert boundary_hits(case, 1) == HITS
    report = check(case, [Input(PROMPT, "durable", "m-prompt")], Recovery())
    cell = {"kind": "baseline", "scenario": "approve", "restarts": 0}
    record_cell(request.config, request.node.nodeid, {**cell, "violations": len(report.violations)})
    assert report.violations == [], report.violations
