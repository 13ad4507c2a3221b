"""SIGKILL a real library process at a random moment, restart, check the invariants.

Each run starts :mod:`tests.crash.driver` on the ``multi`` scenario (two turns,
four tool calls, steering before the seal in both turns, a queued follow-up)
against a slowed fake model, kills it with ``os.kill(pid, SIGKILL)`` a delay
drawn from a seeded RNG after its first output line — the one place a delay is an input of a test,
never an assertion — then restarts the session with ``mind exec --session ID
--json`` until nothing is left to recover and checks the invariants of
:mod:`tests.crash.harness`. A run the process finishes before its kill is
still checked (and counted apart).

What the driver printed tells which inputs were accepted: an ``accepted``
line means durable; an ``intent`` without one means the kill may have cut the
call (acknowledged exactly once, or absent everywhere); no ``intent`` means
never sent (absent everywhere).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
from typing import IO

import pytest

from tests.crash import driver
from tests.crash.harness import (
    PROCESS_TIMEOUT_S,
    REPO,
    Case,
    Input,
    check,
    json_lines,
    record_cell,
    recover,
    stage,
)
from tests.support.fake_model import FakeModel


class _Reader:
    """Drain a pipe in a thread; :attr:`first_line` is set on the first line (or EOF)."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        assert pipe is not None
        self._pipe = pipe
        self._chunks: list[bytes] = []
        self.first_line = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._pipe:
            for line in self._pipe:
                self._chunks.append(line)
                self.first_line.set()
        self.first_line.set()

    def text(self) -> str:
        self._thread.join(timeout=PROCESS_TIMEOUT_S)
        return b"".join(self._chunks).decode("utf-8", errors="replace")


pytestmark = pytest.mark.slow

SEED = 20260611
RUNS = 25
CHUNK_DELAY_S = 0.01
"""Pause before each SSE chunk: a model round takes ~80 ms."""
TOOL_SLEEP_S = 0.05
"""Each tool command sleeps this long before writing its effect line, so some
kills land while a tool runs (its result will be synthetic)."""
KILL_AFTER_S = (0.0, 0.8)
"""Range of the kill delay, counted from the driver's first line (the prompt is
about to be sent; runtime and session are open) to about the end of a clean
run (~0.75 s from there), so most kills land inside a turn."""

_rng = random.Random(SEED)
DELAYS_S = [round(_rng.uniform(*KILL_AFTER_S), 3) for _ in range(RUNS)]


@pytest.mark.parametrize(
    ("run_index", "delay_s"),
    [pytest.param(i, d, id=f"run{i:02d}-{d:.3f}s") for i, d in enumerate(DELAYS_S)],
)
def test_sigkill_at_a_random_moment_then_restart(
    request: pytest.FixtureRequest,
    case: Case,
    fake_model: FakeModel,
    run_index: int,
    delay_s: float,
) -> None:
    fake_model.chunk_delay_s = CHUNK_DELAY_S
    fake_model.tool_sleep_s = TOOL_SLEEP_S
    proc = subprocess.Popen(
        case.driver_argv("multi"),
        cwd=REPO,
        env=case.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out = _Reader(proc.stdout)
    err = _Reader(proc.stderr)
    try:
        # The clock starts when the prompt is about to be sent (runtime and
        # session are open), so the kill lands inside the run however long the
        # interpreter took to start on a loaded machine.
        out.first_line.wait(timeout=PROCESS_TIMEOUT_S)
        try:
            proc.wait(timeout=delay_s)
            killed = False
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            killed = True
        proc.wait(timeout=PROCESS_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stdout, stderr = out.text(), err.text()
    killed = killed and proc.returncode == -signal.SIGKILL
    if not killed:
        assert proc.returncode == 0, stderr[-2000:]

    lines = json_lines(stdout)
    intents = {x["intent"] for x in lines if "intent" in x}
    accepted = {x["accepted"] for x in lines if "accepted" in x}
    inputs = [
        Input(
            step.text,
            "durable"
            if step.message_id in accepted
            else "uncertain"
            if step.message_id in intents
            else "unsent",
            step.message_id,
        )
        for step in driver.SCENARIOS["multi"]
    ]
    landed = stage(case) if killed else "finished first"
    recovery = recover(case)
    report = check(case, inputs, recovery)
    if "Traceback" in stderr:
        report.violations.insert(0, f"driver stderr: {stderr.strip()[-800:]}")
    cell = {
        "kind": "random",
        "scenario": "multi",
        "run_index": run_index,
        "delay_s": delay_s,
        "killed": killed,
        "stage": landed,
        "accepted_before_kill": len(accepted),
        "violations": len(report.violations),
        **report.stats,
    }
    summary = record_cell(request.config, request.node.nodeid, cell)
    print(f"\n{request.node.name}: {landed} {report.stats}\n{summary}", end="")
    assert report.violations == [], "\n".join(report.violations)
