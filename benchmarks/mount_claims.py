"""``mount.claim x8`` for ``make bench``: claim latency under 8-process contention vs alone.

Each process claims then releases :data:`MOUNT_CLAIMS` distinct sessions, so
every claim is granted and the processes contend only for
``session-mounts.lock`` (docs/design/mounts.md §5: a contended lock costs 25–400 ms
backoff waits). The baseline is the same loop in one process with no peer.
Means of per-claim wall time (``time.perf_counter``), s, so backoff waits
count; the median and p95 are printed beside. Workers live in
this importable module because ``spawn`` children cannot import
``benchmarks.__main__``.
"""

from __future__ import annotations

import multiprocessing
import queue
import statistics
import time
from pathlib import Path
from typing import Any

from mind.errors import MountRefused
from mind.shell.mounts import MountLedger

MOUNT_PROCESSES = 8
MOUNT_CLAIMS = 40
"""Claims per process (and in the uncontended run)."""


def claim_latencies(root: Path, prefix: str, claims: int) -> tuple[list[float], int]:
    """Claim then release ``claims`` sessions; each claim's latency, s, and busy refusals."""
    ledger = MountLedger(root)
    latencies: list[float] = []
    refused = 0
    for i in range(claims):
        t0 = time.perf_counter()
        try:
            handle = ledger.claim(f"{prefix}-{i}")
        except MountRefused:
            refused += 1
            continue
        latencies.append(time.perf_counter() - t0)
        handle.release()
    ledger.close()
    return latencies, refused


def _worker(root: str, prefix: str, barrier: Any, out: Any) -> None:
    barrier.wait(60)
    out.put(claim_latencies(Path(root), prefix, MOUNT_CLAIMS))


def bench_mount_claims(tmp: Path) -> tuple[str, float, float]:
    """``(name, contended mean s, uncontended mean s)``; prints counts, medians, p95.

    Raises:
        RuntimeError: a worker process died.
    """
    alone, _ = claim_latencies(tmp / "alone", "solo", MOUNT_CLAIMS)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(MOUNT_PROCESSES)
    out = ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(str(tmp / "contended"), f"p{i}", barrier, out))
        for i in range(MOUNT_PROCESSES)
    ]
    for worker in workers:
        worker.start()
    contended: list[float] = []
    refused = 0
    received = 0
    while received < MOUNT_PROCESSES:
        try:
            latencies, count = out.get(timeout=1)
        except queue.Empty:
            if any(w.exitcode not in (None, 0) for w in workers):
                raise RuntimeError("a mount benchmark worker died") from None
            continue
        contended += latencies
        refused += count
        received += 1
    for worker in workers:
        worker.join(60)
    p95_ms = statistics.quantiles(contended, n=20)[-1] * 1e3
    print(
        f"(mount.claim: {MOUNT_PROCESSES} processes x {MOUNT_CLAIMS} claims, {refused} refused"
        f" busy; contended median {statistics.median(contended) * 1e3:.1f} ms, p95"
        f" {p95_ms:.1f} ms; alone median {statistics.median(alone) * 1e3:.1f} ms)"
    )
    return ("mount.claim x8", statistics.fmean(contended), statistics.fmean(alone))
