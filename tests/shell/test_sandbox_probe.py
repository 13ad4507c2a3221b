"""The sandbox backend is probed in a worker thread (:class:`BackendProbe`),
and nothing that depends on it goes on before its answer: a session's
sandbox does not name a backend, nor let a command run, until the probe
(here a real ``bwrap`` stand-in on ``PATH`` that waits on a FIFO) answered.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mind.shell.sandbox import backend
from mind.shell.sandbox.command import session_sandbox
from mind.shell.tools import ToolRunner, session_boundary


@pytest.fixture
def blocking_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A ``bwrap`` first on ``PATH`` that writes ``started`` and then waits
    until a line is written to the FIFO it returns; it then exits 1 (bubblewrap
    does not work here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    started = tmp_path / "started"
    script = f'#!/bin/sh\n: > "{started}.tmp"; mv "{started}.tmp" "{started}"\n'
    script += f'read go < "{fifo}"\nexit 1\n'
    (bin_dir / "bwrap").write_text(script)
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    backend.bwrap_works.cache_clear()
    yield fifo
    backend.bwrap_works.cache_clear()


def _release(fifo: Path) -> None:
    with open(fifo, "w") as w:  # blocks until the stand-in opened it to read
        w.write("go\n")


def test_the_sandbox_answers_only_once_the_probe_has(blocking_bwrap: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    boundary = session_boundary(work, os.environ, state_roots=(tmp_path / "state",))
    sandbox = session_sandbox(boundary, environ={})  # returns while bwrap is still running
    probe = sandbox._probe
    assert probe is not None and not probe.done()  # the stand-in waits on the FIFO
    runner = ToolRunner(work, env=dict(os.environ), sandbox=sandbox)
    assert not probe.done()  # making the tool runner did not need the answer

    releaser = threading.Thread(target=_release, args=(blocking_bwrap,))
    releaser.start()
    described = sandbox.describe()  # waits for the probe
    releaser.join()
    assert probe.done()
    # The stand-in said bubblewrap does not work: the answer is the probe's, not a guess.
    assert sandbox.backend in ("landlock", "none")
    assert "bubblewrap" not in described
    assert runner.sandbox.backend == sandbox.backend
