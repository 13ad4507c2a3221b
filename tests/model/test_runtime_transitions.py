"""The check of the full run's runtime transition coverage
(``tests/support/runtime_transitions.py``), on logs written for the test."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from mind.generated.turn_chart import TurnChart
from tests.support import runtime_transitions as rt
from tests.support.transition_coverage import chart_edges

TURN = {"turn": TurnChart}
ABORT = "accepted --abort--> aborted"


def _log(tmp_path: Path, skip: set[str]) -> Path:
    lines = [
        f"TurnChart\t{e.source}\t{e.event}\t{e.target}\t{e.guard}\n"
        for e in chart_edges(TurnChart)
        if str(e) not in skip
    ]
    (tmp_path / "1-a.tsv").write_text("".join(lines[:3]), encoding="utf-8")
    # A process killed mid-write leaves a cut last line: skipped, not an error.
    (tmp_path / "2-b.tsv").write_text("".join(lines[3:]) + "TurnChart\tacc", encoding="utf-8")
    return tmp_path


def test_every_spec_chart_is_counted_and_the_unreachable_list_names_real_edges() -> None:
    charts = rt.spec_charts()
    stems = {p.stem for p in rt.SPECS.glob("*.yaml")}
    assert set(charts) == stems and {"turn", "mailbox", "inbox_message", "mount"} <= stems
    results, problems = rt.runtime_coverage(Counter(), rt.load_unreachable(), charts)
    # With nothing logged, every problem is a missed reachable edge, never a bad entry.
    assert problems and all(": never taken by the runtime: " in p for p in problems)
    listed = sum(len(r.unreachable) for r in results)
    assert listed == sum(len(v) for v in rt.load_unreachable().values())


def test_all_reachable_edges_taken_is_no_problem(tmp_path: Path) -> None:
    counts = rt.read_logs(_log(tmp_path, {ABORT}))
    results, problems = rt.runtime_coverage(counts, {"turn": {ABORT: "why"}}, TURN)
    assert problems == []
    (turn,) = results
    assert turn.missed == ()
    reachable = len(chart_edges(TurnChart)) - 1
    assert f"{reachable}/{reachable} reachable edges taken, 1 unreachable" in turn.report()


def test_a_reachable_edge_never_taken_fails(tmp_path: Path) -> None:
    seal = "draining --seal--> completed"
    counts = rt.read_logs(_log(tmp_path, {ABORT, seal}))
    results, problems = rt.runtime_coverage(counts, {"turn": {ABORT: "why"}}, TURN)
    assert problems == [f"turn: never taken by the runtime: {seal}"]
    assert f"{seal}  <-- never taken by the runtime" in results[0].report()


def test_a_listed_edge_that_was_taken_or_does_not_exist_fails(tmp_path: Path) -> None:
    counts = rt.read_logs(_log(tmp_path, set()))
    listed = {"turn": {ABORT: "why", "accepted --nap--> aborted": "gone"}, "tour": {"x": "y"}}
    _results, problems = rt.runtime_coverage(counts, listed, TURN)
    assert sorted(problems) == sorted(
        [
            f"turn: listed unreachable but the runtime took it: {ABORT}",
            "runtime_unreachable.yaml: turn: no edge 'accepted --nap--> aborted' in the chart",
            "runtime_unreachable.yaml: no chart 'tour' in specs/statecharts",
        ]
    )


def test_an_edge_or_chart_the_specs_lack_fails(tmp_path: Path) -> None:
    (tmp_path / "1-a.tsv").write_text(
        "TurnChart\taccepted\tnap\taborted\t\nOldChart\ta\tb\tc\t\n", encoding="utf-8"
    )
    _results, problems = rt.runtime_coverage(rt.read_logs(tmp_path), {}, TURN)
    assert "turn: the runtime took accepted --nap--> aborted, which the chart lacks" in problems
    assert "the runtime logged chart 'OldChart' which no spec generates" in problems


def _inner_pytest(*args: str) -> subprocess.CompletedProcess[str]:
    """A real pytest run of one quick test of this file, with this suite's plugin."""
    test = f"{Path(__file__).relative_to(rt.ROOT)}::test_all_reachable_edges_taken_is_no_problem"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", test, *args],
        cwd=rt.ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_the_option_fails_a_run_whose_runtime_missed_an_edge() -> None:
    # One real inner run (a few seconds); without the option nothing is checked,
    # as every ordinary subset run of this suite shows.
    checked = _inner_pytest("--transition-coverage")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "transition coverage of the runtime's machines" in checked.stdout
    assert "turn: never taken by the runtime: accepted --start--> sampling" in checked.stdout
    assert "1 passed" in checked.stdout  # the tests passed; the coverage check failed the run
