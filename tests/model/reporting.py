"""Shared by the model-based tests of every chart: the coverage report file
and the per-edge walk check."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.transition_coverage import TransitionCoverage, walk_every_edge


def write_report(request: pytest.FixtureRequest, name: str, coverage: TransitionCoverage) -> None:
    """Print the coverage report and keep it in
    ``.pytest_cache/d/transition-coverage/<name>.txt``."""
    report = coverage.report()
    print(report)
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        (cache.mkdir("transition-coverage") / f"{name}.txt").write_text(report)


def check_every_edge(request: pytest.FixtureRequest, chart: Any, edges: int) -> None:
    """Walk every edge of ``chart`` from its initial state; each must land
    where the chart says, and all ``edges`` must be taken (100% coverage)."""
    walks, coverage = walk_every_edge(chart)
    write_report(request, f"{chart.__name__}-edges", coverage)
    failures = [
        f"{w.edge}: path={[s.event for s in w.path]} fired={w.fired} "
        f"expected={sorted(w.expected)} actual={sorted(w.actual)}"
        for w in walks
        if not w.ok
    ]
    assert failures == []
    assert coverage.missed == ()
    assert len(walks) == len(coverage.edges) == edges
