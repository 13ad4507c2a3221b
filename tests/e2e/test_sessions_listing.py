"""What ``mind sessions`` says about sessions, with real processes (issue #7 items 18-21).

A killed holder leaves its session ``interrupted``, not ``running``; damaged
journals are listed as such; an ``index.db`` that another process keeps
locked, or that cannot be written, fails no command.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import RunMind

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
