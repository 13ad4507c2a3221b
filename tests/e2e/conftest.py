"""Helpers that run the real ``mind`` command as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

_SCRUB = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "MIND_PROVIDER",
    "MIND_MODEL",
    "MIND_MAX_RETRIES",
    "MIND_MAX_RETRY_SECONDS",
    "MIND_STREAM_IDLE_TIMEOUT",
    "MIND_MAX_OUTPUT_MIB",
    "MIND_AUTO_COMPACT_PERCENT",
    "MIND_SANDBOX",
    "MIND_SANDBOX_NETWORK",
    "MIND_ADD_DIRS",
    "MIND_SANDBOX_BACKEND",
    "MIND_APPROVAL",
    "MIND_HOME",
    "MIND_STATE_HOME",
)


@dataclass
class MindResult:
    """What one ``mind`` process did."""

    returncode: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


RunMind = Callable[..., MindResult]


@pytest.fixture
def mind_env(tmp_path: Path) -> dict[str, str]:
    """A clean environment: no provider keys, MIND_HOME in tmp_path."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env["MIND_HOME"] = str(tmp_path / "mind-home")
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture
def run_mind(mind_env: dict[str, str]) -> RunMind:
    """Run ``python -m mind.shell.cli ARGS`` and parse ``--json`` stdout lines."""

    def run(
        *args: str,
        env: Mapping[str, str] | None = None,
        input: str | None = None,
        timeout: float = 60,
    ) -> MindResult:
        full_env = dict(mind_env)
        full_env.update(env or {})
        proc = subprocess.run(
            [sys.executable, "-m", "mind.shell.cli", *args],
            env=full_env,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
        )
        events = []
        if "--json" in args:
            for line in proc.stdout.splitlines():
                events.append(json.loads(line))  # stdout carries only JSON lines
        return MindResult(proc.returncode, proc.stdout, proc.stderr, events)

    return run


def exec_on_fake(
    run_mind: RunMind, base_url: str, cwd: Path, *extra: str, env: dict[str, str]
) -> MindResult:
    """``mind exec`` against the loopback fake model at ``base_url``
    (openai-chat, model ``local-model``, approval never, in ``cwd``), with
    ``extra`` arguments and ``env`` added to the test's environment."""
    return run_mind(
        "exec",
        "--provider",
        "openai-chat",
        "--base-url",
        base_url,
        "--model",
        "local-model",
        "--approval",
        "never",
        "--cwd",
        str(cwd),
        *extra,
        env=env,
    )
