"""Killing a real ``mind`` child with SIGKILL at a point its journal shows,
for crash tests: start it, poll what another process writes (the only way
to see it), kill it there, reap it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from mind.errors import JournalError
from mind.generated import journal as jr
from mind.shell.journal import read_records

T = TypeVar("T")


def first_record(
    journal: Path, match: Callable[[jr.JournalRecord], bool]
) -> jr.JournalRecord | None:
    """The first record of the journal file at ``journal`` that ``match``
    accepts; None when there is none, or the file is not there yet or is
    being created (another process writes it)."""
    try:
        records, _ = read_records(journal)
    except (OSError, JournalError):
        return None
    return next((r for r in records if match(r)), None)


def kill_when(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    found: Callable[[], T | None],
    timeout_s: float,
    what: str,
) -> T:
    """Run ``argv`` (output discarded) and SIGKILL it as soon as ``found()``
    gives a value, polled every 10 ms; reaps the child and returns that value.

    Asserts the child is still running until then and that ``what`` (the
    awaited point, for the message) happens within ``timeout_s`` seconds.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout_s
        while (value := found()) is None:
            assert proc.poll() is None, f"mind ended before {what}"
            assert time.monotonic() < deadline, f"never: {what}"
            time.sleep(0.01)  # polling a file written by another process
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=timeout_s)
    return value
