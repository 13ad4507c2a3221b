"""``sandbox.true``: one sandboxed ``true`` through the shell tool, per backend,
against the same ``true`` run unsandboxed by the same tool."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio

from mind.effects.boundary import Boundary
from mind.shell.sandbox.backend import Backend, select_backend
from mind.shell.sandbox.command import Sandbox
from mind.shell.tools import ToolRunner

RUNS = 10


def _best_run_s(runner: ToolRunner) -> float:
    async def best() -> float:
        times: list[float] = []
        for _ in range(RUNS):
            start = anyio.current_time()
            outcome = await runner.run("shell", {"command": ["true"]})
            times.append(anyio.current_time() - start)
            if outcome.status != "ok":
                raise RuntimeError(outcome.output)
        return min(times)

    return anyio.run(best)


def bench_sandbox_start(tmp: Path) -> list[tuple[str, float, float]]:
    """Rows ``(sandbox.true.<backend>, sandboxed s, unsandboxed s)`` for each
    backend that works here."""
    subprocess.run(["git", "init", "-q", str(tmp)], check=True)
    env = dict(os.environ)
    base = _best_run_s(ToolRunner(tmp, env=env))
    boundary = Boundary(mode="workspace-write", writable_roots=(str(tmp),), home=str(tmp))
    rows: list[tuple[str, float, float]] = []
    backends: tuple[Backend, ...] = ("bwrap", "landlock")
    for backend in backends:
        if select_backend({"MIND_SANDBOX_BACKEND": backend})[0] != backend:
            continue
        sandbox = Sandbox(boundary=boundary, backend=backend)
        rows.append(
            (
                f"sandbox.true.{backend}",
                _best_run_s(ToolRunner(tmp, env=env, sandbox=sandbox)),
                base,
            )
        )
    return rows
