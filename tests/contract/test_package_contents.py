"""The wheel ships the product only: test tooling lives under ``tests/``.

The packages shipped are the ones ``pyproject.toml`` names
(``[tool.setuptools.packages.find] include``); none of their modules may
define the transition-coverage tooling of ``tests/support/transition_coverage.py``
(it used to be ``mind/machines/coverage.py``, shipped to every user).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from setuptools import find_packages

from tests.support import transition_coverage

ROOT = Path(__file__).resolve().parents[2]


def _shipped_modules() -> list[Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(where=str(ROOT), include=include)
    assert "mind.machines" in packages  # the lookup found the product, not nothing
    return sorted(
        path for package in packages for path in (ROOT / package.replace(".", "/")).glob("*.py")
    )


def test_no_shipped_module_defines_the_transition_coverage_tooling() -> None:
    tooling = set(transition_coverage.__all__)
    offenders = []
    for path in _shipped_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in tooling
        }
        if defined:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(defined)}")
    assert offenders == []


def test_the_programs_mind_runs_by_path_ship_in_the_wheel() -> None:
    """The supervisor and the sandbox launcher are started as files
    (``python -I -S PATH``), never imported: a wheel without them would
    refuse every shell command (docs/design/processes.md §1)."""
    from mind.shell import supervision
    from mind.shell.sandbox import command

    shipped = set(_shipped_modules())
    assert Path(supervision.SUPERVISOR) in shipped
    assert Path(command._LAUNCHER) in shipped
