"""Finding a test's processes by a marker in their environment, and waiting
for the system under a bounded deadline (never a sleep for timing): how the
supervision tests tell "zero descendants left"."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

DEADLINE_S = 10.0
"""Generous bound for waiting on the system (never a timing assertion)."""

MARKER_VARIABLE = "MIND_TREE_MARKER"
"""The environment variable a test's command carries its marker in."""


def new_marker() -> str:
    """A marker no other test's process carries."""
    return f"mind-tree-{uuid.uuid4().hex}"


def marker_env(marker: str) -> dict[str, str]:
    """A command's environment: ``PATH`` and the marker (:data:`MARKER_VARIABLE`)."""
    return {"PATH": os.environ["PATH"], MARKER_VARIABLE: marker}


def marked(marker: str, comm: str | None = None) -> list[int]:
    """Pids of live (non-zombie) processes whose environment holds
    ``marker``; with ``comm``, only those whose command name is ``comm``."""
    needle = marker.encode()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdecimal():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        state = stat.rpartition(")")[2].split()[0]
        name_of = stat[stat.index("(") + 1 : stat.rindex(")")]
        if needle in environ and state not in ("Z", "X") and comm in (None, name_of):
            found.append(int(name))
    return found


async def until(condition: Callable[[], bool], deadline_s: float = DEADLINE_S) -> bool:
    """Poll ``condition`` every 10 ms until true or ``deadline_s`` seconds
    passed; returns its last value."""
    with anyio.move_on_after(deadline_s):
        while not condition():  # noqa: ASYNC110 - no event tells when a process is gone
            await anyio.sleep(0.01)
    return condition()


@pytest.fixture
def marker() -> str:
    """A fresh marker for the test's processes (:func:`new_marker`)."""
    return new_marker()


@pytest.fixture
def anyio_backend() -> str:
    """The supervision tests run on asyncio (the runtime's backend)."""
    return "asyncio"


def in_command_line(marker: str) -> list[int]:
    """Pids whose command line holds ``marker`` (a command whose arguments
    carry it, e.g. ``sleep 300.123456789``: for trees whose environment a
    sandbox or the tool's allow-list rewrites)."""
    needle = marker.encode()
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdecimal():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if needle in cmdline:
            found.append(int(name))
    return found


def wait_until(condition: Callable[[], object], what: str, deadline_s: float = 15.0) -> None:
    """Poll ``condition`` every 10 ms (the files and processes of other
    processes, which send no event) until true; ``AssertionError(what)``
    once ``deadline_s`` seconds passed."""
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)
