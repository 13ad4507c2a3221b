"""Every runtime dependency in ``pyproject.toml`` is imported by ``mind``.

A dependency nothing imports is weight every install pays for (and a
supply-chain surface) with no use; dev tools live in the ``dev`` extra and are
not checked here.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported_top_levels() -> set[str]:
    """Top-level module names imported anywhere under ``mind/``."""
    names: set[str] = set()
    for path in (ROOT / "mind").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def _distribution_name(requirement: str) -> str:
    """``"httpx-sse>=0.4"`` -> ``"httpx-sse"`` (extras and markers dropped)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return match.group(0)


def test_every_runtime_dependency_is_imported_by_mind() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    modules_of: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    imported = _imported_top_levels()
    unused = []
    for requirement in project["dependencies"]:
        dist = _distribution_name(requirement).lower().replace("_", "-")
        modules = modules_of.get(dist)
        assert modules, f"{dist} is declared but not installed (make dev)"
        if not modules & imported:
            unused.append(dist)
    assert unused == []
