"""Statechart YAML -> typed python-statemachine ``StateChart`` source.

A chart is read in python-statemachine 3.2's own YAML vocabulary, validated
against the JSON Schema bundled with the library
(``statemachine/io/schemas/statechart.schema.json``), turned into a small
intermediate tree (:class:`ChartSpec`) and emitted as Python source
(docs/ARCHITECTURE.md). The emitted class:

- is ``class <Name>Chart(StateChart[<Name>Model])`` where ``<Name>Model`` is a
  ``Protocol`` naming every guard (``cond``/``unless``) and action of the chart,
  so mypy checks the model a wrapper binds to the chart;
- sets ``allow_event_without_transition = False`` and
  ``catch_errors_as_events = False`` (plus the two other engine switches at
  their ``StateChart`` values, so ``statemachine.io.load`` of the same YAML
  behaves the same), and keeps the library's build-time validations on;
- declares compound states as ``State.Compound`` / ``State.Parallel`` nested
  classes and every transition, in document order, as one class attribute per
  event.

Supported vocabulary: ``name``, ``description``, ``states`` (nested),
``initial``, ``final``, ``parallel``, ``enter``/``exit`` and transition
``on``/``before``/``after`` given as callback *names*, and ``transitions`` with
one ``event`` (or none: eventless), one ``target``, ``cond``/``unless`` guards
made of names, ``and``, ``or``, ``not`` and parentheses, and ``internal``.
Anything else (``datamodel``, ``history``, ``invoke``, ``donedata``,
structured actions, several events or targets on one transition) raises
:class:`SpecError` rather than being silently dropped.

Size: over 500 lines because reading, validating and emitting share the one
intermediate tree; emission is the part to move to ``statechart_source`` if
the vocabulary grows.
"""

from __future__ import annotations

import importlib.resources
import json
import keyword
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

__all__ = [
    "ChartSpec",
    "SpecError",
    "StateSpec",
    "TransitionSpec",
    "emit_chart",
    "load_chart",
    "statechart_schema",
]

_FLAG_TRUE = {True, "true", "yes", "on"}
_GUARD_TOKEN = re.compile(r"\s*(\(|\)|[A-Za-z_][A-Za-z0-9_]*)")
_GUARD_WORDS = frozenset({"and", "or", "not"})
# Attributes a StateChart subclass already has; an event or a top-level state
# named like one of these would shadow the engine.
_RESERVED = frozenset(
    {
        "add_listener",
        "allowed_events",
        "cancel_event",
        "configuration",
        "configuration_values",
        "current_state",
        "current_state_value",
        "enabled_events",
        "events",
        "final_states",
        "history_values",
        "id",
        "initial_state",
        "is_terminated",
        "model",
        "name",
        "raise_",
        "send",
        "state_field",
        "states",
        "states_map",
    }
)


class SpecError(ValueError):
    """A statechart spec is invalid or uses vocabulary codegen does not support.

    Raised by :func:`load_chart`; the message names the spec file and the
    offending state or transition. Nothing is written when it is raised.
    """


@dataclass(frozen=True)
class TransitionSpec:
    """One transition as written in the YAML.

    Attributes:
        event: the event id, or ``""`` for an eventless transition.
        target: id of the target state.
        cond: guard expressions that must all be true.
        unless: guard expressions that must all be false.
        internal: SCXML internal transition (does not exit a compound source).
        on: callback names run during the transition.
        before: callback names run before exiting the source.
        after: callback names run after entering the target.
    """

    event: str
    target: str
    cond: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    internal: bool = False
    on: tuple[str, ...] = ()
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class StateSpec:
    """One state and its subtree, in document order.

    Attributes:
        id: state id, unique in the whole chart (a Python identifier).
        path: attribute path from the chart class, e.g. ``("active", "sampling")``.
        initial: ``initial: true`` was written (otherwise the library picks the
            first child in document order, for YAML and class alike).
        final: a final state (no children, no transitions).
        parallel: a parallel state (all children active together).
        children: child states.
        transitions: outgoing transitions in document order.
        enter: callback names run on entry.
        exit: callback names run on exit.
    """

    id: str
    path: tuple[str, ...]
    initial: bool
    final: bool
    parallel: bool
    children: tuple[StateSpec, ...]
    transitions: tuple[TransitionSpec, ...]
    enter: tuple[str, ...] = ()
    exit: tuple[str, ...] = ()

    def walk(self) -> Iterator[StateSpec]:
        """Yield this state, then every descendant, pre-order (document order)."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True)
class ChartSpec:
    """A parsed, validated chart.

    Attributes:
        stem: file stem of the spec (``turn``); the module is ``<stem>_chart``.
        name: chart name (``Turn``); the class is ``<name>Chart``.
        description: one-line description for the class docstring.
        spec_path: repository-relative POSIX path of the YAML file.
        states: top-level states in document order.
    """

    stem: str
    name: str
    description: str
    spec_path: str
    states: tuple[StateSpec, ...]

    @property
    def class_name(self) -> str:
        """Name of the generated ``StateChart`` subclass."""
        return f"{self.name}Chart"

    @property
    def model_name(self) -> str:
        """Name of the generated model ``Protocol``."""
        return f"{self.name}Model"

    @property
    def module_name(self) -> str:
        """Module name of the generated file under ``mind/generated``."""
        return f"{self.stem}_chart"

    def all_states(self) -> Iterator[StateSpec]:
        """Yield every state of the chart, pre-order (document order)."""
        for state in self.states:
            yield from state.walk()

    def events(self) -> tuple[str, ...]:
        """Distinct non-empty event ids in order of first appearance."""
        seen: dict[str, None] = {}
        for state in self.all_states():
            for transition in state.transitions:
                if transition.event:
                    seen.setdefault(transition.event, None)
        return tuple(seen)

    def guard_names(self) -> tuple[str, ...]:
        """Sorted names read by ``cond``/``unless`` expressions."""
        names: set[str] = set()
        for state in self.all_states():
            for transition in state.transitions:
                for expression in (*transition.cond, *transition.unless):
                    names.update(_guard_names(expression))
        return tuple(sorted(names))

    def action_names(self) -> tuple[str, ...]:
        """Sorted callback names used by ``enter``/``exit``/``on``/``before``/``after``."""
        names: set[str] = set()
        for state in self.all_states():
            names.update(state.enter, state.exit)
            for transition in state.transitions:
                names.update(transition.on, transition.before, transition.after)
        return tuple(sorted(names))


def statechart_schema() -> dict[str, Any]:
    """Return python-statemachine's bundled statechart JSON Schema (draft 2020-12).

    Raises:
        FileNotFoundError: the installed python-statemachine has no bundled schema.
    """
    resource = importlib.resources.files("statemachine.io") / "schemas/statechart.schema.json"
    schema: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return schema


def load_chart(path: Path, *, root: Path) -> ChartSpec:
    """Read, schema-validate and parse one statechart YAML file.

    Args:
        path: the ``specs/statecharts/<stem>.yaml`` file.
        root: repository root; ``spec_path`` is recorded relative to it.

    Returns:
        The parsed chart.

    Raises:
        SpecError: the document fails the bundled schema, or uses vocabulary
            codegen does not support, or names states/events that cannot be
            Python attributes, or a target that does not exist.
    """
    spec_path = path.relative_to(root).as_posix()
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(statechart_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{spec_path}: does not match the python-statemachine statechart schema:"]
        for error in errors:
            where = "/".join(str(p) for p in error.absolute_path) or "<root>"
            lines.append(f"  at {where}: {error.message}")
        raise SpecError("\n".join(lines))
    if "datamodel" in document:
        raise SpecError(f"{spec_path}: 'datamodel' is not supported; keep data in the model")
    stem = path.name.removesuffix(".yaml").removesuffix(".yml")
    _require_identifier(stem, spec_path, "file stem")
    name = str(document.get("name") or "".join(p.title() for p in stem.split("_")))
    _require_identifier(name, spec_path, "chart name")
    states = tuple(
        _parse_state(state_id, body or {}, (), spec_path)
        for state_id, body in document["states"].items()
    )
    chart = ChartSpec(
        stem=stem,
        name=name,
        description=str(document.get("description", "")).strip(),
        spec_path=spec_path,
        states=states,
    )
    _check_references(chart)
    return chart


def _flag(value: object) -> bool:
    return value in _FLAG_TRUE


def _require_identifier(value: str, spec_path: str, what: str) -> None:
    if not value.isidentifier() or keyword.iskeyword(value):
        raise SpecError(f"{spec_path}: {what} {value!r} is not a Python identifier")


def _names(value: object, spec_path: str, where: str) -> tuple[str, ...]:
    """Normalise a guard or action field (string or list of strings) to a tuple."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise SpecError(f"{spec_path}: {where}: only callback names are supported")
    return tuple(items)


def _guard_names(expression: str) -> list[str]:
    return [t for t in _tokens(expression) if t not in _GUARD_WORDS and t not in "()"]


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(expression.rstrip()):
        match = _GUARD_TOKEN.match(expression, position)
        if match is None:
            raise ValueError(expression)
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def _check_guard(expression: str, spec_path: str, where: str) -> None:
    try:
        names = _guard_names(expression)
    except ValueError:
        names = []
    if not names:
        raise SpecError(
            f"{spec_path}: {where}: guard {expression!r} must be names joined by "
            "'and', 'or', 'not' and parentheses"
        )
    for name in names:
        _require_identifier(name, spec_path, f"{where}: guard name")


def _parse_state(
    state_id: str, body: Mapping[str, Any], parent: tuple[str, ...], spec_path: str
) -> StateSpec:
    where = f"state {state_id!r}"
    _require_identifier(state_id, spec_path, where)
    for unsupported in ("history", "invoke", "donedata"):
        if unsupported in body:
            raise SpecError(f"{spec_path}: {where}: {unsupported!r} is not supported by codegen")
    path = (*parent, state_id)
    children = tuple(
        _parse_state(child_id, child or {}, path, spec_path)
        for child_id, child in (body.get("states") or {}).items()
    )
    transitions = tuple(
        _parse_transition(raw, spec_path, f"{where} transition #{index}")
        for index, raw in enumerate(body.get("transitions") or [])
    )
    state = StateSpec(
        id=state_id,
        path=path,
        initial=_flag(body.get("initial", False)),
        final=_flag(body.get("final", False)),
        parallel=_flag(body.get("parallel", False)),
        children=children,
        transitions=transitions,
        enter=_names(body.get("enter"), spec_path, f"{where} enter"),
        exit=_names(body.get("exit"), spec_path, f"{where} exit"),
    )
    if state.final and (children or transitions):
        raise SpecError(f"{spec_path}: {where}: a final state has no children or transitions")
    if state.parallel and not children:
        raise SpecError(f"{spec_path}: {where}: a parallel state needs child states")
    return state


def _parse_transition(raw: Mapping[str, Any], spec_path: str, where: str) -> TransitionSpec:
    if "initial" in raw:
        raise SpecError(f"{spec_path}: {where}: 'initial' transitions are not supported")
    event = str(raw.get("event", "")).strip()
    if len(event.split()) > 1:
        raise SpecError(f"{spec_path}: {where}: one event per transition (write one each)")
    target = str(raw.get("target", "")).strip()
    if not target or len(target.split()) > 1:
        raise SpecError(f"{spec_path}: {where}: exactly one target is required")
    cond = _names(raw.get("cond"), spec_path, f"{where} cond")
    unless = _names(raw.get("unless"), spec_path, f"{where} unless")
    for expression in (*cond, *unless):
        _check_guard(expression, spec_path, where)
    actions = {
        key: _names(raw.get(key), spec_path, f"{where} {key}") for key in ("on", "before", "after")
    }
    for name in (n for names in actions.values() for n in names):
        _require_identifier(name, spec_path, f"{where}: action name")
    return TransitionSpec(
        event=event,
        target=target,
        cond=cond,
        unless=unless,
        internal=_flag(raw.get("internal", False)),
        on=actions["on"],
        before=actions["before"],
        after=actions["after"],
    )


def _check_references(chart: ChartSpec) -> None:
    ids: dict[str, StateSpec] = {}
    for state in chart.all_states():
        if state.id in ids:
            raise SpecError(f"{chart.spec_path}: state id {state.id!r} is used twice")
        if state.id in _RESERVED:
            raise SpecError(f"{chart.spec_path}: state id {state.id!r} shadows a StateChart name")
        ids[state.id] = state
        for name in (*state.enter, *state.exit):
            _require_identifier(name, chart.spec_path, f"state {state.id!r}: action name")
    for state in chart.all_states():
        for transition in state.transitions:
            if transition.target not in ids:
                raise SpecError(
                    f"{chart.spec_path}: state {state.id!r}: unknown target {transition.target!r}"
                )
    for event in chart.events():
        if event in ids:
            raise SpecError(f"{chart.spec_path}: event {event!r} has the id of a state")
        if event in _RESERVED or event.startswith("_"):
            raise SpecError(f"{chart.spec_path}: event {event!r} shadows a StateChart name")
    overlap = set(chart.guard_names()) & set(chart.action_names())
    if overlap:
        raise SpecError(f"{chart.spec_path}: names used as guard and action: {sorted(overlap)}")


# --------------------------------------------------------------------------- emit


def _event_attribute(event: str) -> str:
    """Python attribute for an event id (``done.state.x`` -> ``done_state_x``)."""
    candidate = re.sub(r"\W", "_", event)
    if not candidate.isidentifier() or keyword.iskeyword(candidate):
        candidate = f"event_{candidate}"
    return candidate


def _emit_states(states: Sequence[StateSpec], indent: str) -> list[str]:
    """Class-body lines declaring ``states``; compound siblings are set apart by a blank line."""
    out: list[str] = []
    for index, state in enumerate(states):
        if index and (state.children or states[index - 1].children):
            out.append("")
        kwargs: list[str] = []
        if state.initial:
            kwargs.append("initial=True")
        if state.final:
            kwargs.append("final=True")
        if state.enter:
            kwargs.append(f"enter={list(state.enter)!r}")
        if state.exit:
            kwargs.append(f"exit={list(state.exit)!r}")
        if not state.children:
            out.append(f"{indent}{state.id} = State({', '.join(kwargs)})")
            continue
        base = "State.Parallel" if state.parallel else "State.Compound"
        # A compound's own options are class keywords, passed on to ``State(...)``.
        keywords = "".join(f", {k}" for k in kwargs)
        out.append(f"{indent}class {state.id}({base}{keywords}):")
        out.extend(_emit_states(state.children, indent + "    "))
    return out


def _emit_transition(
    chart_states: Mapping[str, StateSpec], src: StateSpec, t: TransitionSpec
) -> str:
    target = ".".join(chart_states[t.target].path)
    kwargs = []
    for key in ("cond", "unless"):
        values: tuple[str, ...] = getattr(t, key)
        if values:
            value = repr(values[0]) if len(values) == 1 else repr(list(values))
            kwargs.append(f"{key}={value}")
    if t.internal:
        kwargs.append("internal=True")
    for key in ("on", "before", "after"):
        names: tuple[str, ...] = getattr(t, key)
        if names:
            kwargs.append(f"{key}={list(names)!r}")
    tail = "".join(f", {k}" for k in kwargs)
    return f"_to({'.'.join(src.path)}, {target}{tail})"


def emit_chart(chart: ChartSpec, header: str) -> str:
    """Render the Python module for one chart.

    Args:
        chart: the parsed chart.
        header: the AUTOGENERATED comment block to put first (ends with a newline).

    Returns:
        The module source, ending with a newline; a pure function of its inputs.
    """
    by_id = {s.id: s for s in chart.all_states()}
    out: list[str] = [header.rstrip("\n")]
    out.append(f'"""{chart.name} statechart, compiled from ``{chart.spec_path}``.')
    out.append("")
    out.append(f"{chart.description or chart.name}")
    out.append('"""')
    out.append("")
    out.append("from __future__ import annotations")
    out.append("")
    out.append("from typing import Any, Final, Literal, Protocol, cast")
    out.append("")
    out.append("from statemachine import State, StateChart")
    out.append("from statemachine.state import NestedStateFactory")
    out.append("from statemachine.transition_list import TransitionList")
    out.append("")
    exports = [
        chart.class_name,
        f"{chart.name.upper()}_EVENTS",
        f"{chart.name.upper()}_STATES",
        f"{chart.name}EventName",
        chart.model_name,
        f"{chart.name}StateId",
        "SPEC_PATH",
    ]
    out.append("__all__ = [")
    out.extend(f"    {json.dumps(name)}," for name in sorted(exports))
    out.append("]")
    out.append("")
    out.append(f"SPEC_PATH: Final = {json.dumps(chart.spec_path)}")
    out.append('"""Repository-relative path of the spec this module is compiled from."""')
    out.append("")
    events = chart.events()
    state_ids = [s.id for s in chart.all_states()]
    out.append(f"{chart.name}EventName = Literal[")
    out.extend(f"    {json.dumps(e)}," for e in events)
    out.append("]")
    out.append('"""Every event id of the chart, in order of first appearance."""')
    out.append("")
    out.append(f"{chart.name}StateId = Literal[")
    out.extend(f"    {json.dumps(s)}," for s in state_ids)
    out.append("]")
    out.append('"""Every state id of the chart, in document order."""')
    out.append("")
    out.append(f"{chart.name.upper()}_EVENTS: Final[tuple[{chart.name}EventName, ...]] = (")
    out.extend(f"    {json.dumps(e)}," for e in events)
    out.append(")")
    out.append(f"{chart.name.upper()}_STATES: Final[tuple[{chart.name}StateId, ...]] = (")
    out.extend(f"    {json.dumps(s)}," for s in state_ids)
    out.append(")")
    out.append("")
    out.append("")
    out.append(f"class {chart.model_name}(Protocol):")
    out.append(f'    """What ``{chart.class_name}`` reads from its model: guards, then actions."""')
    for guard in chart.guard_names():
        out.append("")
        out.append("    @property")
        out.append(f"    def {guard}(self) -> bool: ...")
    for action in chart.action_names():
        out.append("")
        out.append(f"    def {action}(self, *args: Any, **kwargs: Any) -> object: ...")
    out.append("")
    out.append("")
    out.append(
        "def _to(\n"
        "    source: State | NestedStateFactory,\n"
        "    target: State | NestedStateFactory,\n"
        "    **options: Any,\n"
        ") -> TransitionList:\n"
        '    """``source.to(target, **options)``, typed.\n'
        "\n"
        "    A nested ``State.Compound`` class *is* a ``State`` at run time; its\n"
        "    metaclass only types ``.to`` as a builder for mypy.\n"
        '    """\n'
        "    transitions: TransitionList = cast(State, source).to(target, **options)\n"
        "    return transitions"
    )
    out.append("")
    out.append("")
    out.append(f"class {chart.class_name}(StateChart[{chart.model_name}]):")
    out.append(f'    """{chart.description or chart.name}')
    out.append("")
    out.append(f"    Compiled from ``{chart.spec_path}``. A disallowed event raises")
    out.append("    ``TransitionNotAllowed``; an exception in a guard or action propagates.")
    out.append('    """')
    out.append("")
    out.append("    allow_event_without_transition = False")
    out.append("    catch_errors_as_events = False")
    out.append("    enable_self_transition_entries = True")
    out.append("    atomic_configuration_update = False")
    out.append("    validate_disconnected_states = True")
    out.append("    validate_trap_states = True")
    out.append("    validate_final_reachability = True")
    out.append("")
    out.extend(_emit_states(chart.states, "    "))
    out.append("")
    grouped: dict[str, list[str]] = {}
    eventless: list[str] = []
    for state in chart.all_states():
        for transition in state.transitions:
            line = _emit_transition(by_id, state, transition)
            if transition.event:
                grouped.setdefault(transition.event, []).append(line)
            else:
                eventless.append(line)
    for event, lines in grouped.items():
        attribute = _event_attribute(event)
        if len(lines) == 1:
            joined = lines[0]
        else:
            joined = "(\n        " + "\n        | ".join(lines) + "\n    )"
        if attribute == event:
            out.append(f"    {attribute} = {joined}")
        else:
            out.append(f"    {attribute} = Event({joined}, id={json.dumps(event)})")
    for line in eventless:
        out.append(f"    {line}  # eventless")
    source = "\n".join(out) + "\n"
    if any(_event_attribute(e) != e for e in events):
        source = source.replace(
            "from statemachine import State, StateChart",
            "from statemachine import Event, State, StateChart",
        )
    return source
