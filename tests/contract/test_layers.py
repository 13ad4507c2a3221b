"""Import rules (docs/ARCHITECTURE.md): dependencies point inward.

mind.shell -> mind.effects -> mind.machines -> mind.generated; the pure core
never imports the shell, and I/O libraries stay out of machines, effects and
generated code. Checked with import-linter's engine inside pytest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = [
    "mind/machines",
    "mind/effects",
    "mind/generated",
    "mind/history.py",
    "mind/conversation.py",
    "mind/errors.py",
]
IO_MODULES = {
    "asyncio",
    "subprocess",
    "socket",
    "httpx",
    "httpx_sse",
    "prompt_toolkit",
    "rich",
    "anyio",
    "apsw",
    "keyring",
}


def _modules(rel: str) -> list[Path]:
    p = ROOT / rel
    return sorted(p.rglob("*.py")) if p.is_dir() else [p]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


@pytest.mark.parametrize("rel", PURE)
def test_pure_core_never_imports_shell_or_io(rel: str) -> None:
    for path in _modules(rel):
        bad = sorted(
            m
            for m in _imports(path)
            if m == "mind" or m.startswith("mind.shell") or m.split(".")[0] in IO_MODULES
        )
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_layers_point_inward() -> None:
    order = ["mind.generated", "mind.machines", "mind.effects"]
    for i, layer in enumerate(order):
        higher = order[i + 1 :]
        for path in _modules(layer.replace(".", "/")):
            bad = sorted(m for m in _imports(path) if any(m.startswith(h) for h in higher))
            assert not bad, f"{path.relative_to(ROOT)} ({layer}) imports higher layers {bad}"


def test_codegen_never_imports_mind() -> None:
    for path in _modules("codegen"):
        bad = sorted(m for m in _imports(path) if m == "mind" or m.startswith("mind."))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_import_linter_contracts() -> None:
    """The same layering, as import-linter sees the real import graph."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("mind")
    chains = graph.find_illegal_dependencies_for_layers(
        layers=["mind.shell", "mind.effects", "mind.machines", "mind.generated"],
        containers=set(),
    )
    assert not chains, f"illegal layer dependencies: {chains}"
