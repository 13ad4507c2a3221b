"""The README's setup commands run clean."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_PROVIDER_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MIND_PROVIDER", "MIND_MODEL")


def test_pyproject_license_is_an_spdx_expression() -> None:
    # A `license = {text = ...}` table makes setuptools print ~45 lines of
    # deprecation warnings on every `make run` that (re)installs.
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert data["project"]["license"] == "MIT"
    assert "setuptools>=77" in data["build-system"]["requires"]  # SPDX strings need 77


_NEEDS_VENV = pytest.mark.skipif(
    not (ROOT / ".venv" / "bin" / "mind").exists(), reason="needs the checkout's .venv (make dev)"
)


def _make_run(home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS}
    env["MIND_HOME"] = str(home)
    env.pop("MAKEFLAGS", None)
    # -o: the .venv this test runs from is the installed one; never reinstall here.
    return subprocess.run(
        ["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed", "run"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


@_NEEDS_VENV
def test_make_run_without_a_model_explains_and_does_not_fail(tmp_path: Path) -> None:
    proc = _make_run(tmp_path / "home")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No model provider is configured" in out
    assert "Error" not in out and "make:" not in out
    assert not (tmp_path / "home" / "sessions").exists()


@_NEEDS_VENV
def test_make_run_fails_on_any_other_configuration_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('provider = "openai-chat"\nmodle = "typo"\n')
    proc = _make_run(home)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "unknown key(s) modle" in proc.stderr
