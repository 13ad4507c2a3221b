"""Transition coverage for generated charts: enumerate, record, walk, report.

Generic over every ``StateChart`` class codegen emits (turn today; mailbox,
mount, interaction and effect later), so each chart's model-based tests get
the same three tools (the rule: a transition-coverage report lists every
transition of every chart, and the test fails when one is never taken):

- :func:`chart_edges` lists every event-triggered (or eventless) transition of
  a chart class, one :class:`Edge` per event, in document order; the
  library's implicit initial transitions of compound states are not edges.
- :class:`TransitionCoverage` is a python-statemachine listener
  (``after_transition``) counting hits per edge; :meth:`~TransitionCoverage.report`
  lists every edge with its count and marks the missed ones.
- :func:`walk_every_edge` is the deterministic per-edge test (hypothesis' stateful
  testing alone may miss rare edges): for each edge it breadth-first-searches the
  shortest event path from the initial configuration to one where the edge's
  source is active, sets guard inputs so this edge (and no other) is taken,
  fires it and compares the configuration with the one SCXML semantics predict
  from the chart's structure.

Guards are read from a plain attribute model (one ``bool`` per guard name), so
a chart must keep its guards as names (codegen enforces that). Pure: no I/O;
writing a report to a file is the caller's business.
"""

from __future__ import annotations

import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from statemachine import State, StateChart
from statemachine.exceptions import TransitionNotAllowed
from statemachine.transition import Transition

from mind.machines.chart_observers import guard_label

__all__ = [
    "Edge",
    "EdgeWalk",
    "Step",
    "TransitionCoverage",
    "action_names",
    "bare_model",
    "chart_edges",
    "expected_configuration",
    "guard_names",
    "walk_every_edge",
]

Chart = type[StateChart[Any]]
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GUARD_WORDS = frozenset({"and", "or", "not", "True", "False"})
_MAX_GUARDS = 12


@dataclass(frozen=True, order=True)
class Edge:
    """One transition of a chart for one of its events.

    Attributes:
        index: position in document order (stable report order).
        source: id of the state the transition is declared on.
        event: event id, ``""`` for an eventless transition.
        target: id of the target state.
        guard: readable guard, e.g. ``"can_retry"`` or ``"not can_retry"``; ``""`` if none.
    """

    index: int
    source: str
    event: str
    target: str
    guard: str

    def __str__(self) -> str:
        guard = f" [{self.guard}]" if self.guard else ""
        return f"{self.source} --{self.event or '(eventless)'}{guard}--> {self.target}"


def _transitions(chart: Chart) -> Iterator[tuple[Transition, str]]:
    for state in chart.states_map.values():
        for transition in state.transitions:
            if transition.initial:
                continue
            events = [str(e) for e in transition.events] or [""]
            for event in events:
                yield transition, event


def chart_edges(chart: Chart) -> tuple[Edge, ...]:
    """Every transition of ``chart``, one per event, in document order.

    Returns:
        Edges with ``index`` 0..n-1.
    """
    return tuple(
        Edge(
            index=index,
            source=transition.source.id,
            event=event,
            target=transition.target.id if transition.target is not None else transition.source.id,
            guard=guard_label(transition),
        )
        for index, (transition, event) in enumerate(_transitions(chart))
    )


def action_names(chart: Chart) -> tuple[str, ...]:
    """Sorted names of the chart's declared actions (state ``enter``/``exit``,
    transition ``before``/``on``/``after``); naming conventions excluded.

    A bare model must define them (python-statemachine refuses a chart whose
    named callbacks it cannot find); :func:`walk_every_edge` binds no-ops.
    """
    names: set[str] = set()
    for state in chart.states_map.values():
        specs = [*state.enter, *state.exit]
        for transition in state.transitions:
            specs += [*transition.before, *transition.on, *transition.after]
        names.update(
            str(spec.func)
            for spec in specs
            if not spec.is_convention and isinstance(spec.func, str)
        )
    return tuple(sorted(names))


def guard_names(chart: Chart) -> tuple[str, ...]:
    """Sorted names read by the chart's ``cond``/``unless`` guards."""
    names: set[str] = set()
    for transition, _event in _transitions(chart):
        for spec in transition.cond:
            text = str(spec.func) if isinstance(spec.func, str) else str(spec.attr_name)
            names.update(n for n in _NAME.findall(text) if n not in _GUARD_WORDS)
    return tuple(sorted(names))


@dataclass
class TransitionCoverage:
    """Hit counts per edge of one chart class; also a python-statemachine listener.

    Attach with ``Chart(listeners=[cov])``, ``chart.add_listener(cov)`` or
    ``TurnMachine.observe(cov)``; merge several with :meth:`merge`.

    Attributes:
        chart: the chart class whose edges are counted.
        hits: edge -> number of times taken (every edge present, from 0).
    """

    chart: Chart
    hits: dict[Edge, int] = field(init=False)
    _by_transition: dict[tuple[int, str], Edge] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        edges = chart_edges(self.chart)
        self.hits = dict.fromkeys(edges, 0)
        self._by_transition = {
            (id(transition), event): edge
            for (transition, event), edge in zip(_transitions(self.chart), edges, strict=True)
        }

    def after_transition(self, event: str, transition: Transition) -> None:
        """Listener hook (python-statemachine injects the arguments by name)."""
        edge = self._by_transition.get((id(transition), str(event)))
        if edge is None and not transition.events:
            edge = self._by_transition.get((id(transition), ""))
        if edge is not None:
            self.hits[edge] += 1

    def edge_of(self, event: str, transition: Transition) -> Edge | None:
        """The edge a taken ``transition`` on ``event`` counts for, if it is one."""
        return self._by_transition.get((id(transition), str(event) if transition.events else ""))

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every edge of the chart in document order."""
        return tuple(self.hits)

    @property
    def missed(self) -> tuple[Edge, ...]:
        """Edges never taken, in document order."""
        return tuple(edge for edge, count in self.hits.items() if count == 0)

    def merge(self, other: TransitionCoverage) -> None:
        """Add ``other``'s counts (same chart class) to this one.

        Raises:
            ValueError: ``other`` counts another chart.
        """
        if other.chart is not self.chart:
            raise ValueError(f"cannot merge coverage of {other.chart} into {self.chart}")
        for edge, count in other.hits.items():
            self.hits[edge] += count

    def report(self) -> str:
        """Plain-text table: one line per edge with its hit count; missed ones flagged.

        Returns:
            Text ending with a newline; first line names the chart and
            ``taken/total``.
        """
        taken = len(self.hits) - len(self.missed)
        lines = [f"transition coverage {self.chart.__name__}: {taken}/{len(self.hits)} edges taken"]
        width = max((len(edge.source) for edge in self.hits), default=0)
        event_width = max((len(edge.event) for edge in self.hits), default=0)
        for edge, count in self.hits.items():
            flag = "  <-- never taken" if count == 0 else ""
            guard = f" [{edge.guard}]" if edge.guard else ""
            event = edge.event or "(eventless)"
            lines.append(
                f"{count:6d}  {edge.source:<{width}}  {event:<{event_width}}  -> {edge.target}"
                f"{guard}{flag}"
            )
        return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ structure


def _ancestors(state: State) -> list[State]:
    """Proper ancestors, nearest first."""
    out: list[State] = []
    parent = state.parent
    while parent is not None:
        out.append(parent)
        parent = parent.parent
    return out


def _is_descendant(state: State, ancestor: State) -> bool:
    return any(a is ancestor for a in _ancestors(state))


def _default_entry(state: State) -> set[str]:
    """``state`` plus the states its default entry activates (initials; all regions)."""
    entered = {state.id}
    if state.states:
        children = list(state.states)
        chosen = children if state.parallel else [next(c for c in children if c.initial)]
        for child in chosen:
            entered |= _default_entry(child)
    return entered


def _domain(transition: Transition) -> State | None:
    source, target = transition.source, transition.target
    assert target is not None
    if transition.internal and source.states and _is_descendant(target, source):
        return source
    for ancestor in _ancestors(source):
        if ancestor.states and not ancestor.parallel and _is_descendant(target, ancestor):
            return ancestor
    return None


def expected_configuration(
    chart: Chart, prior: Iterable[str], transition: Transition
) -> frozenset[str]:
    """Configuration SCXML semantics predict after taking ``transition`` from ``prior``.

    The transition domain is the source for an internal transition into its own
    descendant, else the least common compound ancestor of source and target;
    active states inside the domain are exited; the target, its ancestors below
    the domain, the default entry of the target and the other regions of any
    parallel ancestor crossed are entered (W3C SCXML, "Algorithm for SCXML
    Interpretation").

    Args:
        chart: the chart class ``transition`` belongs to.
        prior: ids of the active states before the transition.
        transition: a transition with a target.

    Returns:
        Ids of the active states after it.
    """
    target = transition.target
    assert target is not None
    domain = _domain(transition)
    states = {s.id: s for s in chart.states_map.values()}
    kept: set[str] = set()
    if domain is not None:
        kept = {sid for sid in prior if not _is_descendant(states[sid], domain)}
    entered = _default_entry(target)
    previous = target
    for ancestor in _ancestors(target):
        if ancestor is domain:
            break
        entered.add(ancestor.id)
        if ancestor.parallel:
            for region in ancestor.states:
                if region is not previous:
                    entered |= _default_entry(region)
        previous = ancestor
    return frozenset(kept | entered)


# ------------------------------------------------------------------ walking


@dataclass(frozen=True)
class Step:
    """One event sent with the guard inputs in force while it is processed.

    Attributes:
        event: the event id.
        guards: ``(name, value)`` pairs, sorted by name; unnamed guards read ``False``.
    """

    event: str
    guards: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class EdgeWalk:
    """The result of walking to one edge and firing it.

    Attributes:
        edge: the edge under test.
        path: steps from the initial configuration to the edge's source.
        fired: the step that took the edge, or ``None`` if no guard input did.
        before: configuration before ``fired``.
        expected: configuration predicted by the chart's structure.
        actual: configuration the engine reached.
    """

    edge: Edge
    path: tuple[Step, ...]
    fired: Step | None
    before: frozenset[str]
    expected: frozenset[str]
    actual: frozenset[str]

    @property
    def ok(self) -> bool:
        """The edge was taken and the engine reached the predicted configuration."""
        return self.fired is not None and self.expected == self.actual


def _noop(*args: Any, **kwargs: Any) -> None:
    """An action of a bare model: walking a chart performs no effect."""


def bare_model(chart: Chart, guards: Sequence[str]) -> SimpleNamespace:
    """A plain model for ``chart``: every guard ``False``, every action a no-op."""
    actions = dict.fromkeys(action_names(chart), _noop)
    return SimpleNamespace(state=None, **actions, **dict.fromkeys(guards, False))


def _configuration(machine: StateChart[Any]) -> frozenset[str]:
    return frozenset(s.id for s in machine.configuration)


class _LastTaken:
    def __init__(self) -> None:
        self.taken: list[tuple[str, Transition]] = []

    def after_transition(self, event: str, transition: Transition) -> None:
        self.taken.append((str(event), transition))


def _replay(
    chart: Chart, guards: Sequence[str], steps: Iterable[Step], listener: object | None = None
) -> StateChart[Any]:
    model = bare_model(chart, guards)
    machine = chart(model=model, listeners=[listener] if listener is not None else None)
    for step in steps:
        for name in guards:
            setattr(model, name, False)
        for name, value in step.guards:
            setattr(model, name, value)
        machine.send(step.event)
    return machine


def _event_guards(chart: Chart, event: str, guards: Sequence[str]) -> tuple[str, ...]:
    """The guard names the transitions of ``event`` read (the others cannot
    change which of its transitions is taken)."""
    read: set[str] = set()
    for transition, name in _transitions(chart):
        if name == event:
            for spec in transition.cond:
                text = str(spec.func) if isinstance(spec.func, str) else str(spec.attr_name)
                read.update(n for n in _NAME.findall(text) if n not in _GUARD_WORDS)
    return tuple(g for g in guards if g in read)


def _assignments(names: Sequence[str]) -> list[tuple[tuple[str, bool], ...]]:
    return [
        tuple(zip(names, values, strict=True))
        for values in itertools.product((False, True), repeat=len(names))
    ]


def _moves(chart: Chart, guards: Sequence[str]) -> list[Step]:
    events = list(dict.fromkeys(str(e) for e in chart._events))
    return [
        Step(event, assignment)
        for event in events
        for assignment in _assignments(_event_guards(chart, event, guards))
    ]


def walk_every_edge(chart: Chart) -> tuple[tuple[EdgeWalk, ...], TransitionCoverage]:
    """Walk to and fire every edge of ``chart`` deterministically.

    Args:
        chart: a generated chart class whose guards are plain names.

    Returns:
        One :class:`EdgeWalk` per edge (document order) and the coverage
        recorded while firing the edges (path steps are not counted).

    Raises:
        ValueError: more than 12 guard names (each event tries the guards it reads).
    """
    guards = guard_names(chart)
    if len(guards) > _MAX_GUARDS:
        raise ValueError(f"{chart.__name__}: too many guards to enumerate ({len(guards)})")
    moves = _moves(chart, guards)
    start = _configuration(_replay(chart, guards, ()))
    paths: dict[frozenset[str], tuple[Step, ...]] = {start: ()}
    queue: deque[frozenset[str]] = deque([start])
    while queue:
        node = queue.popleft()
        for move in moves:
            path = (*paths[node], move)
            try:
                reached = _configuration(_replay(chart, guards, path))
            except TransitionNotAllowed:
                continue
            if reached not in paths:
                paths[reached] = path
                queue.append(reached)
    coverage = TransitionCoverage(chart)
    walks = [_walk_edge(chart, guards, edge, paths, coverage) for edge in coverage.edges]
    return tuple(walks), coverage


def _walk_edge(
    chart: Chart,
    guards: Sequence[str],
    edge: Edge,
    paths: Mapping[frozenset[str], tuple[Step, ...]],
    coverage: TransitionCoverage,
) -> EdgeWalk:
    candidates = [c for c in paths if edge.source in c]
    if not candidates:
        return EdgeWalk(edge, (), None, frozenset(), frozenset(), frozenset())
    # Shortest path first; ties broken by the sorted state ids (deterministic).
    node = min(candidates, key=lambda c: (len(paths[c]), sorted(c)))
    path = paths[node]
    for assignment in _assignments(_event_guards(chart, edge.event, guards)):
        step = Step(edge.event, assignment)
        recorder = _LastTaken()
        machine = _replay(chart, guards, path, recorder)
        del recorder.taken[:]
        try:
            _replay_step(machine, guards, step)
        except TransitionNotAllowed:
            continue
        taken = [coverage.edge_of(event, t) for event, t in recorder.taken]
        if taken[:1] != [edge]:
            continue
        transition = recorder.taken[0][1]
        for event, t in recorder.taken:
            coverage.after_transition(event, t)
        expected = expected_configuration(chart, node, transition)
        return EdgeWalk(edge, path, step, node, expected, _configuration(machine))
    return EdgeWalk(edge, path, None, node, frozenset(), frozenset())


def _replay_step(machine: StateChart[Any], guards: Sequence[str], step: Step) -> None:
    model = machine.model
    for name in guards:
        setattr(model, name, False)
    for name, value in step.guards:
        setattr(model, name, value)
    machine.send(step.event)
