"""Diagrams of generated chart classes: Mermaid always, SVG when Graphviz is there.

Mermaid comes from python-statemachine's own formatter
(``statemachine.contrib.diagram.formatter``), rendered from the *generated*
class, so the picture shows exactly what runs; it is deterministic and
committed. The library's DOT output is not deterministic (``id()`` node
names) and needs pydot, so SVG is drawn from a small DOT text built here
and piped to the Graphviz ``dot`` binary; SVGs are for review and are not
checked for drift.

The class is imported from the generated *file* (not as ``mind.generated``),
so codegen never imports ``mind`` and ``--check`` can draw from a temp dir.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

from statemachine import State, StateChart
from statemachine.contrib.diagram import formatter

__all__ = ["chart_dot", "import_chart", "mermaid", "render_svg"]


def import_chart(module_file: Path, class_name: str) -> type[StateChart[Any]]:
    """Import a generated chart module from its file and return the chart class.

    Args:
        module_file: path of a generated ``<stem>_chart.py``.
        class_name: the ``StateChart`` subclass to return.

    Returns:
        The class, built (and validated) by python-statemachine on import.

    Raises:
        ImportError: the file cannot be loaded or lacks ``class_name``.
        statemachine.exceptions.InvalidDefinition: the library rejects the chart.
    """
    unique = f"_codegen_chart_{abs(hash(module_file.resolve()))}_{module_file.stem}"
    spec = importlib.util.spec_from_file_location(unique, module_file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {module_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[unique] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[unique]
    chart = getattr(module, class_name, None)
    if not (isinstance(chart, type) and issubclass(chart, StateChart)):
        raise ImportError(f"{module_file} has no StateChart class {class_name!r}")
    return chart


def mermaid(chart: type[StateChart[Any]], header: str) -> str:
    """Mermaid ``stateDiagram-v2`` text of a chart class, ``header`` first.

    Args:
        chart: the generated class.
        header: comment lines (each starting ``%%``), ending with a newline.

    Returns:
        Deterministic Mermaid source ending with a newline.
    """
    return header + formatter.render(chart, "mermaid")


def _dot_id(state: State) -> str:
    return f'"{state.id}"'


def _dot_states(states: list[State], indent: str, out: list[str]) -> None:
    for state in states:
        if state.states:
            out.append(f'{indent}subgraph "cluster_{state.id}" {{')
            style = "dashed" if state.parallel else "rounded"
            out.append(f'{indent}  label="{state.name}"; style={style};')
            out.append(f'{indent}  "{state.id}" [shape=point, width=0.12];')
            _dot_states(list(state.states), indent + "  ", out)
            out.append(f"{indent}}}")
        else:
            shape = "doublecircle" if state.final else "box"
            out.append(
                f'{indent}"{state.id}" [label="{state.name}", shape={shape}, style=rounded];'
            )


def chart_dot(chart: type[StateChart[Any]]) -> str:
    """Graphviz DOT text of a chart class (deterministic; node ids are state ids).

    A compound state is a cluster whose point node stands for the state itself,
    so transitions from or to a compound attach to its cluster.
    """
    out = ["digraph chart {", "  compound=true; rankdir=LR; node [fontname=Helvetica];"]
    _dot_states(list(chart.states), "  ", out)
    for state in chart.states_map.values():
        for transition in state.transitions:
            if transition.initial:
                continue
            label = " ".join(str(e) for e in transition.events) or "(eventless)"
            guards = [
                spec.attr_name if spec.expected_value else f"not {spec.attr_name}"
                for spec in transition.cond
            ]
            if guards:
                label += f" [{', '.join(guards)}]"
            attributes = [f'label="{label}"']
            if transition.source.states:
                attributes.append(f'ltail="cluster_{transition.source.id}"')
            if transition.target is not None and transition.target.states:
                attributes.append(f'lhead="cluster_{transition.target.id}"')
            target = transition.target.id if transition.target is not None else state.id
            out.append(f'  "{state.id}" -> "{target}" [{", ".join(attributes)}];')
    out.append("}")
    return "\n".join(out) + "\n"


def render_svg(chart: type[StateChart[Any]], out_file: Path, *, dot: str | None) -> bool:
    """Write ``out_file`` as SVG if the Graphviz binary is available.

    Args:
        chart: the generated class.
        out_file: where to write the SVG.
        dot: path of the Graphviz ``dot`` binary (``shutil.which("dot")``), or
            ``None`` when it is not installed.

    Returns:
        ``True`` if written; ``False`` when ``dot`` is ``None`` (not an
        error: CI has no Graphviz).

    Raises:
        subprocess.CalledProcessError: ``dot`` rejected the graph.
    """
    if dot is None:
        return False
    result = subprocess.run(
        [dot, "-Tsvg"], input=chart_dot(chart).encode(), capture_output=True, check=True
    )
    out_file.write_bytes(result.stdout)
    return True
