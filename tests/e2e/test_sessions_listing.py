"""What ``mind sessions`` says about sessions, with real processes.

A killed holder leaves its session ``interrupted``, not ``running``; damaged
journals are listed as such; an ``index.db`` that another process keeps
locked, or that cannot be written, fails no command.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import RunMind
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, spawn, words

__all__ = ["spawn"]  # the fixture, re-used from test_repl

_LOCK_HOLDER = textwrap.dedent(
    """
    import sys
    import apsw

    con = apsw.Connection(sys.argv[1])
    con.execute("BEGIN IMMEDIATE")
    con.execute("UPDATE sessions SET title = title")
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def _common(tmp_path: Path, replies: list[dict[str, object]]) -> list[str]:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return ["--provider", "scripted", "--script", str(script), "--cwd", str(tmp_path)]


def _index_lines(stderr: str) -> int:
    return sum("index.db" in line for line in stderr.splitlines())


@pytest.fixture
def index_locker(mind_env: dict[str, str]) -> Iterator[list[subprocess.Popen[str]]]:
    made: list[subprocess.Popen[str]] = []
    yield made
    for proc in made:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_write_locked_index_fails_no_command(
    tmp_path: Path,
    run_mind: RunMind,
    mind_env: dict[str, str],
    index_locker: list[subprocess.Popen[str]],
) -> None:
    common = _common(tmp_path, [{"text": "first"}, {"text": "second"}])
    first = run_mind("exec", "--json", *common, "one")
    assert first.returncode == 0, first.stderr
    sid = first.events[0]["session_id"]
    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(Path(mind_env["MIND_HOME"]) / "index.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    index_locker.append(holder)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"

    started = time.monotonic()
    listing = run_mind("sessions")
    assert listing.returncode == 0, listing.stderr
    assert sid in listing.stdout and "completed" in listing.stdout
    assert "Traceback" not in listing.stderr
    assert time.monotonic() - started < 4  # no 5 s busy wait

    again = run_mind("exec", "--json", *common, "--session", sid, "two")
    assert again.returncode == 0, again.stderr
    assert again.of_type("message.completed")[-1]["text"] == "second"
    assert "Traceback" not in again.stderr
    assert _index_lines(again.stderr) == 1  # said once

    rebuilt = run_mind("sessions", "--rebuild-index")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "not rebuilt" in rebuilt.stderr and sid in rebuilt.stdout


def test_an_unusable_index_location_fails_no_command(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    (Path(mind_env["MIND_HOME"]) / "index.db").mkdir(parents=True)  # cannot be a database
    common = _common(tmp_path, [{"text": "first"}, {"text": "second"}])
    first = run_mind("exec", "--json", *common, "one")
    assert first.returncode == 0, first.stderr
    assert _index_lines(first.stderr) == 1, first.stderr
    sid = first.events[0]["session_id"]
    again = run_mind("exec", "--json", *common, "--session", sid, "two")
    assert again.returncode == 0, again.stderr
    listing = run_mind("sessions")
    assert listing.returncode == 0, listing.stderr
    line = next(x for x in listing.stdout.splitlines() if x.startswith(sid))
    assert "completed" in line and "one" in line  # from the session directory
    assert _index_lines(listing.stderr) == 1


_MIND_EXEC = (sys.executable, "-m", "mind.shell.cli", "exec", "--json")


def _row(stdout: str, sid: str) -> str:
    return next(line for line in stdout.splitlines() if line.split()[:1] == [sid])


def test_a_killed_holder_leaves_its_session_interrupted_not_running(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    common = _common(
        tmp_path,
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]}, {"text": "x"}],
    )
    holder = subprocess.Popen(
        [*_MIND_EXEC, "--approval", "never", *common, "--new-session", "held", "hold it"],
        env=mind_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert holder.stdout is not None
        for line in holder.stdout:  # wait until the holder is inside its tool call
            if json.loads(line)["type"] == "tool.call":
                break
        live = run_mind("sessions")
        assert _row(live.stdout, "held").split()[1] == "running"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    dead = run_mind("sessions")
    assert dead.returncode == 0, dead.stderr
    row = _row(dead.stdout, "held")
    assert "interrupted (resume to recover)" in row and "running" not in row
    again = run_mind("exec", "--json", *common, "--approval", "never", "--session", "held")
    assert again.returncode == 0, again.stderr
    assert _row(run_mind("sessions").stdout, "held").split()[1] == "completed"


def test_damaged_and_empty_sessions_are_listed_as_such_and_never_opened(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    common = _common(tmp_path, [{"text": "first"}, {"text": "second"}])
    made = run_mind("exec", "--json", *common, "--new-session", "good", "one")
    assert made.returncode == 0, made.stderr
    sessions = Path(mind_env["MIND_HOME"]) / "sessions"
    good = (sessions / "good" / "journal.jsonl").read_bytes()
    lines = good.splitlines(keepends=True)
    assert len(lines) >= 5
    damaged = {
        "mid": b"".join(lines[:2]) + lines[2].replace(b'"seq"', b'"sEq"') + b"".join(lines[3:]),
        "garbage": b"this is\nnot a\njournal\n",
        "headless": b"".join(lines[1:]),
        "zero": b"",
    }
    for sid in damaged:
        (sessions / sid).mkdir(mode=0o700)
        (sessions / sid / "journal.jsonl").write_bytes(good)
    (sessions / "trunc").mkdir(mode=0o700)
    (sessions / "trunc" / "journal.jsonl").write_bytes(good)
    (sessions / "nojournal").mkdir(mode=0o700)
    assert run_mind("sessions", "--rebuild-index").returncode == 0
    for sid, data in damaged.items():  # damaged after they were indexed healthy
        (sessions / sid / "journal.jsonl").write_bytes(data)
    # Cut inside the last turn's terminal record: a torn tail, the turn unfinished.
    (sessions / "trunc" / "journal.jsonl").write_bytes(good[: len(good) - len(lines[-1]) // 2])

    listing = run_mind("sessions")
    assert listing.returncode == 0, listing.stderr
    out = listing.stdout
    assert f"damaged ({sessions / 'mid' / 'journal.jsonl'}:3, " in _row(out, "mid")
    assert f"damaged ({sessions / 'garbage' / 'journal.jsonl'}:1, " in _row(out, "garbage")
    assert f"damaged ({sessions / 'headless' / 'journal.jsonl'}:1, " in _row(out, "headless")
    assert "interrupted (resume to recover)" in _row(out, "trunc")
    assert _row(out, "zero").split()[1] == "empty"
    assert _row(out, "nojournal").split()[1] == "empty"
    assert "completed" in _row(out, "good")

    for sid, data in damaged.items():
        path = sessions / sid / "journal.jsonl"
        r = run_mind("exec", "--json", *common, "--session", sid, "two")
        assert r.returncode != 0 and "Traceback" not in r.stderr, (sid, r.stderr)
        assert f"{path}:" in r.stderr, (sid, r.stderr)  # names path and line
        assert path.read_bytes() == data  # byte-identical


def test_the_repl_runs_a_turn_with_an_unusable_index(spawn: Spawn, tmp_path: Path) -> None:
    (tmp_path / "state" / "index.db").mkdir(parents=True)  # cannot be a database
    child = spawn([{"text": "Still here."}])
    child.send("are you there?" + ENTER)
    child.expect(words("Still here."))
    child.expect(words("── completed"))
    exit_cleanly(child)
