"""Import rules (docs/ARCHITECTURE.md): dependencies point inward.

The rules are import-linter contracts in ``pyproject.toml``
(``[tool.importlinter]``: mind.shell -> mind.effects -> mind.machines ->
mind.generated, no I/O library in the pure core, the shell's parts kept
apart); ``make lint`` runs them and so does this test, so a bare ``pytest``
checks them too. codegen sits outside the package and is checked here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_import_linter_contracts_are_kept() -> None:
    """Every contract holds on the real import graph (fails, never skips,
    when lint-imports is missing: it is a dev dependency)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "importlinter"
    ]["contracts"]
    assert LINT_IMPORTS.is_file(), f"{LINT_IMPORTS} missing: run `make dev`"
    proc = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Contracts: {len(contracts)} kept, 0 broken." in proc.stdout, proc.stdout


def test_codegen_never_imports_mind() -> None:
    for path in sorted((ROOT / "codegen").rglob("*.py")):
        bad = sorted(m for m in _imports(path) if m == "mind" or m.startswith("mind."))
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"
