"""One REPL hosting several sessions, and two REPLs side by side (docs/design/mounts.md §1).

Real ``python -m mind.shell.cli`` processes in real pseudo-terminals, with
the scripted provider. A turn is kept running deterministically by a shell
tool call that waits for a file the test creates: each call takes the next
number ``n`` (``started-n``) and waits for ``go-n``, so the test releases the
turns of two sessions one at a time. What the screen says is checked against
the journals.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.test_repl import (
    _SCRUB,
    ENTER,
    REPO,
    TIMEOUT_S,
    Spawn,
    exit_cleanly,
    session_id_of,
    spawn,
    words,
)

__all__ = ["spawn"]  # the fixture, re-used from test_repl

NUMBERED_GATE: dict[str, object] = {
    "tool_calls": [
        {
            "name": "shell",
            "arguments": {
                "command": "n=$(ls | grep -c '^started-'); touch started-$n; "
                "while [ ! -e go-$n ]; do sleep 0.05; done; echo released $n"
            },
        }
    ]
}
"""A reply whose tool call runs until the test creates ``go-<n>`` (n: 0, 1, ...)."""

CALLING = words("⏺ Calling shell n=")
ESC = "\x1b"
DOWN = "\x1b[B"
_NEW_SESSION_RE = r"new session\S*\s+(?:\x1b\[[0-9;]*m)*([0-9a-f]{8}-[0-9a-f-]{27})"


def one_env(tmp_path: Path) -> dict[str, str]:
    """The environment the ``spawn`` fixture gives its REPLs (same state root)."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    return env


def journal(tmp_path: Path, sid: str) -> list[dict[str, Any]]:
    path = tmp_path / "state" / "sessions" / sid / "journal.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def turn_ends(tmp_path: Path, sid: str) -> list[str]:
    return [r["status"] for r in journal(tmp_path, sid) if r["type"] == "turn_completed"]


def user_texts(tmp_path: Path, sid: str) -> list[str]:
    return [r["text"] for r in journal(tmp_path, sid) if r["type"] == "user_message"]


def test_new_parks_a_running_turn_which_completes_while_the_new_session_works(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([NUMBERED_GATE, {"text": "Turn done."}], "--approval", "never")
    first = session_id_of(child)
    child.send("first task" + ENTER)
    child.expect(CALLING)

    child.send("/new" + ENTER)  # allowed while the turn runs: it is parked, not stopped
    child.expect(_NEW_SESSION_RE)
    second = child.match.group(1)
    child.expect(words("parked"))

    child.send("/sessions" + ENTER)
    child.expect(words(f"● {second} attached"))
    child.expect(words(f"◐ {first} parked · running"))
    child.send(ESC)

    child.send("second task" + ENTER)  # the new session works while the parked turn runs
    child.expect(words("› second task"))
    child.expect(CALLING)
    (tmp_path / "go-0").touch()  # releases the parked session's tool call only
    child.expect(words(f"session {first[:13]}… (parked) completed"))
    assert turn_ends(tmp_path, first) == ["completed"]
    assert turn_ends(tmp_path, second) == []  # still running, attached

    (tmp_path / "go-1").touch()
    child.expect(words("Turn done."))
    child.expect(words("── completed"))

    child.send(f"/resume {first[:20]}" + ENTER)  # a unique prefix is enough
    child.expect(words(f"session {first} (back from parked)"))
    child.send("/status" + ENTER)
    child.expect(words(f"session {first}"))
    child.expect(words("state idle"))
    out = exit_cleanly(child)
    assert f"mind resume {first}" in out
    assert re.search(words(f"Also used in this run: {second}"), out)
    assert turn_ends(tmp_path, second) == ["completed"]
    assert user_texts(tmp_path, first) == ["first task"]
    assert user_texts(tmp_path, second) == ["second task"]


def test_a_second_repl_sees_the_first_ones_session_occupied_until_it_exits(
    spawn: Spawn, tmp_path: Path
) -> None:
    one = spawn([{"text": "First answer."}])
    first = session_id_of(one)
    one.send("hi from one" + ENTER)  # a session is kept only once input reaches it
    one.expect(words("── completed"))
    # The scripted reply is the one after those already in the session.
    two = spawn([{"text": "unused"}, {"text": "Answered in the first session."}])
    second = session_id_of(two)
    holder = f"occupied by pid {one.pid}"

    two.send(f"/resume {first}" + ENTER)  # the same wording as the runtime's refusal
    two.expect(words(f"Cannot enter session {first}: {holder}"))

    two.send("/sessions" + ENTER)
    two.expect(words(f"● {second} attached"))
    two.expect(words(f"⊘ {first} {holder}"))
    two.send(DOWN + ENTER)  # focus the occupied row and try to enter it
    two.expect(words(f"Cannot enter session {first}: {holder}"))

    exit_cleanly(one)  # its ledger record is cleared on a normal exit
    two.expect(words(f"{first} free"))  # the picker re-reads the ledger by itself
    two.send(ENTER)  # the focus stayed on that session across refreshes
    two.expect(words(f"session {first} (resumed)"))
    two.send("hello from two" + ENTER)
    two.expect(words("Answered in the first session."))
    two.expect(words("── completed"))
    exit_cleanly(two)
    assert user_texts(tmp_path, first) == ["hi from one", "hello from two"]
    assert turn_ends(tmp_path, first) == ["completed", "completed"]


def test_mind_resume_opens_the_latest_session_of_the_directory(
    spawn: Spawn, tmp_path: Path
) -> None:
    one = spawn([{"text": "First answer."}, {"text": "Second answer."}])
    first = session_id_of(one)
    one.send("remember this" + ENTER)
    one.expect(words("── completed"))
    script = tmp_path / "script0.yaml"  # written by the fixture for the first REPL

    refused = pexpect.spawn(
        sys.executable,
        [
            *("-m", "mind.shell.cli", "--provider", "scripted", "--script", str(script)),
            *("--cwd", str(tmp_path), "resume"),
        ],
        cwd=str(tmp_path),
        env=one_env(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )
    refused.expect(words(f"occupied by pid {one.pid}"))
    refused.expect(pexpect.EOF)
    refused.close()
    assert refused.exitstatus == 3
    exit_cleanly(one)

    again = spawn([{"text": "First answer."}, {"text": "Second answer."}], "resume")
    assert session_id_of(again) == first
    again.send("and now?" + ENTER)
    again.expect(words("Second answer."))
    again.expect(words("── completed"))
    exit_cleanly(again)
    assert user_texts(tmp_path, first) == ["remember this", "and now?"]
