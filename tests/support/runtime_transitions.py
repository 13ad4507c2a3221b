"""Transition coverage of the machines mind's runtime itself created.

The full test run (``pytest --transition-coverage``, see ``tests/conftest.py``)
sets ``MIND_TRANSITION_LOG`` so every process mind runs — the pytest
processes, ``mind exec``, the REPL in a pty, crash-test children — logs the
edges its runtime's charts take (``mind/shell/transition_log.py``). This
module reads those logs and checks them, per chart of
``specs/statecharts/*.yaml`` (data-driven: a new chart is counted with no
code change), against ``tests/model/runtime_unreachable.yaml``, the one list
of edges the runtime cannot take, each with its reason.

The rule: every edge not on that list was taken by the runtime at least once;
every edge on it exists and was not taken (a listed edge that was taken is no
longer unreachable). A logged edge that is not in its chart means stale
generated code. Each breach is a *problem* (a line of text); the run fails
if there is one.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from statemachine import StateChart

from tests.support.transition_coverage import Edge, TransitionCoverage

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs" / "statecharts"
UNREACHABLE = ROOT / "tests" / "model" / "runtime_unreachable.yaml"

LogKey = tuple[str, str, str, str, str]
"""``(chart class, source, event, target, guard)`` as one log line holds them."""


def spec_charts(specs: Path = SPECS) -> dict[str, type[StateChart[Any]]]:
    """Spec stem (``turn``) -> its generated chart class, for every ``*.yaml``.

    Raises:
        LookupError: a spec has no generated chart (run ``python -m codegen``).
    """
    charts: dict[str, type[StateChart[Any]]] = {}
    for path in sorted(specs.glob("*.yaml")):
        name = f"mind.generated.{path.stem}_chart"
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise LookupError(f"{path}: no generated module {name} ({exc})") from None
        found = [
            value
            for value in vars(module).values()
            if isinstance(value, type)
            and issubclass(value, StateChart)
            and value.__module__ == module.__name__
        ]
        if len(found) != 1:
            raise LookupError(f"{path}: {name} defines {len(found)} chart classes, expected 1")
        charts[path.stem] = found[0]
    return charts


def read_logs(directory: Path) -> Counter[LogKey]:
    """Count the lines of every ``*.tsv`` transition log in ``directory``.

    A line cut short by a process killed mid-write is skipped (each line is
    one ``write``, so only the last line of a file can be).
    """
    counts: Counter[LogKey] = Counter()
    for path in sorted(directory.glob("*.tsv")):
        for line in path.read_text(encoding="utf-8", errors="replace").split("\n"):
            fields = line.split("\t")
            if len(fields) == 5:
                counts[(fields[0], fields[1], fields[2], fields[3], fields[4])] += 1
    return counts


def load_unreachable(path: Path = UNREACHABLE) -> dict[str, dict[str, str]]:
    """Spec stem -> ``str(Edge)`` -> the reason the runtime cannot take it.

    Raises:
        ValueError: the file is not a mapping of mappings of non-empty strings.
    """
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of chart -> edge -> reason")
    out: dict[str, dict[str, str]] = {}
    for stem, edges in raw.items():
        if not isinstance(edges, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in edges.items()
        ):
            raise ValueError(f"{path}: {stem}: expected edge -> non-empty reason")
        out[str(stem)] = dict(edges)
    return out


@dataclass
class ChartRuntimeCoverage:
    """One chart's edges as the runtime took them.

    Attributes:
        stem: the spec's file stem (``turn``).
        coverage: hits per edge, counted from the logs.
        unreachable: edges the data file lists, with their reasons.
    """

    stem: str
    coverage: TransitionCoverage
    unreachable: dict[Edge, str]

    @property
    def missed(self) -> tuple[Edge, ...]:
        """Reachable edges the runtime never took."""
        return tuple(e for e in self.coverage.missed if e not in self.unreachable)

    def report(self) -> str:
        """One line per edge: hits, the edge, and a flag (never taken / unreachable)."""
        hits = self.coverage.hits
        reachable = [e for e in hits if e not in self.unreachable]
        taken = sum(1 for e in reachable if hits[e])
        lines = [
            f"runtime transition coverage {self.coverage.chart.__name__} "
            f"(specs/statecharts/{self.stem}.yaml): {taken}/{len(reachable)} reachable edges "
            f"taken, {len(self.unreachable)} unreachable"
        ]
        for edge, count in hits.items():
            if edge in self.unreachable:
                flag = f"  (unreachable: {self.unreachable[edge]})"
            else:
                flag = "  <-- never taken by the runtime" if count == 0 else ""
            lines.append(f"{count:6d}  {edge}{flag}")
        return "\n".join(lines) + "\n"


def runtime_coverage(
    counts: Counter[LogKey],
    unreachable: dict[str, dict[str, str]],
    charts: dict[str, type[StateChart[Any]]],
) -> tuple[list[ChartRuntimeCoverage], list[str]]:
    """Per chart, the runtime's coverage; and every breach of the rule (module doc).

    Args:
        counts: from :func:`read_logs`.
        unreachable: from :func:`load_unreachable`.
        charts: from :func:`spec_charts`.

    Returns:
        Coverage per chart (spec order) and the problems, as readable lines.
    """
    problems: list[str] = []
    results: list[ChartRuntimeCoverage] = []
    by_class = {chart.__name__: stem for stem, chart in charts.items()}
    for stem in sorted(set(unreachable) - set(charts)):
        problems.append(f"{UNREACHABLE.name}: no chart {stem!r} in specs/statecharts")
    for stem, chart in charts.items():
        coverage = TransitionCoverage(chart)
        by_key = {(e.source, e.event, e.target, e.guard): e for e in coverage.edges}
        by_text = {str(e): e for e in coverage.edges}
        listed: dict[Edge, str] = {}
        for text, reason in unreachable.get(stem, {}).items():
            if text in by_text:
                listed[by_text[text]] = reason
            else:
                problems.append(f"{UNREACHABLE.name}: {stem}: no edge {text!r} in the chart")
        for (name, source, event, target, guard), count in counts.items():
            if by_class.get(name) != stem:
                continue
            edge = by_key.get((source, event, target, guard))
            if edge is None:
                taken = Edge(-1, source, event, target, guard)
                problems.append(f"{stem}: the runtime took {taken}, which the chart lacks")
            else:
                coverage.hits[edge] += count
        result = ChartRuntimeCoverage(stem, coverage, listed)
        problems.extend(f"{stem}: never taken by the runtime: {edge}" for edge in result.missed)
        problems.extend(
            f"{stem}: listed unreachable but the runtime took it: {edge}"
            for edge in listed
            if coverage.hits[edge]
        )
        results.append(result)
    for name in sorted({key[0] for key in counts} - set(by_class)):
        problems.append(f"the runtime logged chart {name!r} which no spec generates")
    return results, problems
