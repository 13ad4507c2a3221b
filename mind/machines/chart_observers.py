"""The seam through which the shell observes every chart a machine creates.

Each machine of this package passes each generated chart it creates through
:func:`created`, which attaches the listener every installed factory returns
for it. Nothing is installed in normal use, so :func:`created` only checks an
empty list; ``mind.shell.transition_log`` installs one when
``MIND_TRANSITION_LOG`` is set, so the test suite can count the edges the
runtime's own machines take (the machines never do that I/O themselves).

:func:`guard_label` names the guard of a transition the way coverage reports
and transition logs key their edges (``can_retry``, ``not can_retry``).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

if TYPE_CHECKING:  # installing a listener (mind --version under the test run) stays light
    from statemachine import StateChart
    from statemachine.transition import Transition

__all__ = ["ChartListenerFactory", "created", "guard_label", "install", "uninstall"]

ChartListenerFactory: TypeAlias = "Callable[[StateChart[Any]], object | None]"
"""Called with each new chart; returns a python-statemachine listener to
attach (e.g. one with ``after_transition(event, transition)``) or ``None``."""

_factories: list[ChartListenerFactory] = []

_C = TypeVar("_C", bound="StateChart[Any]")


def install(factory: ChartListenerFactory) -> None:
    """Attach ``factory``'s listener to every chart created from now on (idempotent)."""
    if factory not in _factories:
        _factories.append(factory)


def uninstall(factory: ChartListenerFactory) -> None:
    """Stop attaching ``factory``'s listeners; charts already created keep theirs."""
    if factory in _factories:
        _factories.remove(factory)


def created(chart: _C) -> _C:
    """Give ``chart`` the listeners of the installed factories; return it.

    Called by the machines right after constructing a generated chart (its
    initial state is entered: implicit initial transitions are not edges).
    Costs one empty-list check when nothing is installed.
    """
    if _factories:
        add_listener: Callable[..., object] = chart.add_listener  # unannotated upstream
        for factory in _factories:
            listener = factory(chart)
            if listener is not None:
                add_listener(listener)
    return chart


def guard_label(transition: Transition) -> str:
    """The guard of ``transition`` as text: ``"can_retry"``, ``"not can_retry"``,
    conditions joined by ``" and "``; ``""`` when unguarded."""
    parts = []
    for spec in transition.cond:
        expression = str(spec.func) if isinstance(spec.func, str) else str(spec.attr_name)
        parts.append(expression if spec.expected_value else f"not {expression}")
    return " and ".join(parts)
