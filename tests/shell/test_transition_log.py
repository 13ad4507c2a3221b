"""``MIND_TRANSITION_LOG=DIR``: every chart mind's runtime creates logs the
edges it takes to a per-process file in DIR — also in a ``mind exec``
subprocess — while charts created by test code directly are not logged
(they are the model tests' business, not the runtime's)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import yaml

import mind
from mind.effects.retry import RetryPolicy
from mind.machines.turn import TurnMachine
from mind.shell import transition_log
from mind.shell.mounts import MountLedger


def _script(tmp_path: Path) -> Path:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "hello there, person"}]), encoding="utf-8")
    return script


def _lines(directory: Path) -> list[tuple[str, ...]]:
    return [
        tuple(line.split("\t"))
        for path in sorted(directory.iterdir())
        for line in path.read_text(encoding="utf-8").splitlines()
    ]


@pytest.fixture
def log_dir(tmp_path: Path) -> Iterator[Path]:
    """A transition log installed in this process for one test only."""
    directory = tmp_path / "transitions"
    directory.mkdir()
    log = transition_log.TransitionLog(directory)
    log.install()
    try:
        yield directory
    finally:
        log.uninstall()


def test_runtime_machines_are_logged_and_bare_ones_are_not(tmp_path: Path, log_dir: Path) -> None:
    bare = TurnMachine(retry=RetryPolicy())
    bare.start()
    bare.abort()
    assert _lines(log_dir) == []  # created by this test, not by the runtime

    config = mind.resolve_config(provider="scripted", script=str(_script(tmp_path)), env={})

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            await session.run("hi")

    anyio.run(main)
    turn = [line[1:4] for line in _lines(log_dir) if line[0] == "TurnChart"]
    assert turn == [
        ("accepted", "start", "sampling"),
        ("requesting", "inputs_claimed", "requesting"),
        ("requesting", "context_measured", "requesting"),  # under the compaction threshold
        ("requesting", "stream_opened", "streaming"),
        ("sampling", "round_done", "draining"),
        ("draining", "seal", "completed"),
    ]
    charts = {line[0] for line in _lines(log_dir)}
    assert {"MailboxChart", "InboxMessageChart", "MountChart"} <= charts


def test_a_mind_exec_subprocess_logs_to_its_own_file(tmp_path: Path) -> None:
    directory = tmp_path / "transitions"
    directory.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI", "ANTHR"))}
    env.update(MIND_HOME=str(tmp_path / "home"), MIND_TRANSITION_LOG=str(directory))
    command = [sys.executable, "-m", "mind.shell.cli", "exec", "--provider", "scripted"]
    command += ["--script", str(_script(tmp_path)), "--cwd", str(tmp_path), "hi"]
    proc = subprocess.run(
        command,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    files = list(directory.iterdir())
    (log,) = files  # one process, one file; named for its own pid, not this one's
    assert not log.name.startswith(f"{os.getpid()}-")
    edges = {line[:4] for line in _lines(directory)}
    assert ("TurnChart", "draining", "seal", "completed") in edges
    assert any(line[0] == "MountChart" for line in edges)


def test_a_component_a_test_drives_alone_is_not_the_runtime(tmp_path: Path, log_dir: Path) -> None:
    ledger = MountLedger(tmp_path / "state")
    ledger.claim("s-1").settle(attached=True)  # shell code, but no Runtime or Session behind it
    ledger.close()
    assert _lines(log_dir) == []
