"""``shell.true.supervised``: the shell tool running ``true`` under its
supervisor (docs/design/processes.md) against the direct spawn it replaced:
the command in its own session, both pipes read to EOF, then waited for."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio

from mind.shell.tools import ToolRunner

RUNS = 10


async def _direct_true(cwd: Path) -> None:
    """What the shell tool did before the supervisor (one process, two pipes)."""
    async with await anyio.open_process(
        ["true"], stdin=subprocess.DEVNULL, cwd=cwd, start_new_session=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        async for _ in process.stdout:
            pass
        async for _ in process.stderr:
            pass
        await process.wait()


def bench_shell_supervised(tmp: Path) -> tuple[str, float, float]:
    """``(shell.true.supervised, supervised s, direct s)``, best of :data:`RUNS`."""
    runner = ToolRunner(tmp, env=dict(os.environ), effects_dir=tmp / "effects")

    async def best() -> tuple[float, float]:
        mine: list[float] = []
        base: list[float] = []
        for _ in range(RUNS):
            start = anyio.current_time()
            outcome = await runner.run("shell", {"command": ["true"]})
            mine.append(anyio.current_time() - start)
            if outcome.status != "ok":
                raise RuntimeError(outcome.output)
            start = anyio.current_time()
            await _direct_true(tmp)
            base.append(anyio.current_time() - start)
        return min(mine), min(base)

    supervised, direct = anyio.run(best)
    return ("shell.true.supervised", supervised, direct)
