"""What the running card says, true to the facts, in a real pseudo-terminal
(docs/design/interactions.md §6, §7): a command ``kill -9`` of mind left
running is waited for by the resumed turn behind an "Already running" card.

- The card says it was "asked before mind stopped" only when it was: the
  first open after the crash asks it for the first time; an open after
  ``/exit`` at the card offers the same question again.
- A command that ends on its own is said to have ended on its own (no
  kill was asked for, so none is mentioned).
- ``/exit`` at the card leaves the command running and the turn open: it
  is said so, with the command that resumes it; the turn's own prompt is
  not counted as a message waiting to be sent (only input no turn claimed).

And a resumed call whose outcome is unknown is said to be asked about, not
run, and its result tells the model in sentences.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import ENTER, REPO, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.e2e.test_repl_approval_restarts import COUNT, _kill_9, _of, _shell
from tests.e2e.test_repl_steering import journal, session_dir
from tests.support.exec_world import exec_killed_at
from tests.support.process_trees import in_command_line, wait_until

__all__ = ["spawn"]  # the fixture, re-used from test_repl

ASKED_BEFORE = "asked before mind stopped"
_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _screen_text(data: str) -> str:
    """``data`` without terminal escapes, its whitespace runs as one space."""
    return " ".join(_ESCAPE_RE.sub("", data).split())


@pytest.fixture
def marker() -> Iterator[str]:
    mark = f"300.{uuid.uuid4().int % 10**9:09d}"
    yield mark
    for pid in in_command_line(mark):  # never leave a test's tree behind
        os.kill(pid, signal.SIGKILL)


def _running_after_kill_9(spawn: Spawn, tmp_path: Path, script: list[dict[str, object]]) -> str:
    """Start the REPL on ``script``, send a prompt, SIGKILL it once the
    command's ``effect_running`` is durable; returns the session id."""
    child = spawn(script, "--approval", "never")
    sid = session_id_of(child)
    child.send("run it" + ENTER)
    wait_until(
        lambda: _of(journal(tmp_path, sid), "effect_running"), "effect_running never durable"
    )
    _kill_9(child)
    return sid


def _at_the_card(child: pexpect.spawn) -> str:
    """Wait until the running card and its status line are shown; what was printed."""
    child.expect(words("Already running:"))
    seen = str(child.after)
    child.expect(words("Waiting for shell, already running:"))
    seen += str(child.before)
    child.expect(words("k kill it"))
    return _screen_text(seen)


def test_a_card_first_asked_after_the_restart_is_not_said_asked_before_and_ends_on_its_own(
    spawn: Spawn, tmp_path: Path, marker: str
) -> None:
    go = tmp_path / "go"
    command = f"bash -c ': {marker}; until [ -e {go} ]; do sleep 0.05; done; echo ended'"
    script = [_shell(command), {"text": "It ended."}]
    sid = _running_after_kill_9(spawn, tmp_path, script)
    assert _of(journal(tmp_path, sid), "interaction_requested") == []  # nothing asked before

    child = spawn(script, "--approval", "never", "resume", sid)
    seen = _at_the_card(child)
    assert ASKED_BEFORE not in seen, seen
    go.touch()  # the command ends on its own; nobody pressed k
    child.expect(words("it ended on its own; its result follows"))
    said = _screen_text(str(child.before) + str(child.after))
    child.expect(words("── completed"))
    assert "nothing to kill" not in said + _screen_text(str(child.before)), said
    exit_cleanly(child)
    (resolved,) = _of(journal(tmp_path, sid), "interaction_resolved")
    assert (resolved["decision"], resolved["by"]) == ("cancelled", "recovery")


def test_exit_at_the_card_says_the_command_is_left_running_and_the_card_comes_back_asked_before(
    spawn: Spawn, tmp_path: Path, marker: str
) -> None:
    command = f"bash -c 'sleep {marker}'"
    script = [_shell(command), {"text": "It was stopped."}]
    sid = _running_after_kill_9(spawn, tmp_path, script)

    child = spawn(script, "--approval", "never", "resume", sid)
    _at_the_card(child)
    child.send("please note" + ENTER)  # typed at the card: waits, claimed by no turn yet
    wait_until(
        lambda: "please note" in (tmp_path / "state" / "sessions" / sid / "inbox.json").read_text(),
        "the line typed at the running card was not sent",
    )
    out = _screen_text(exit_cleanly(child))
    assert "Interrupted" not in out, out
    assert "Left running shell" in out and "it keeps running" in out, out
    assert f"The open turn goes on with: mind resume {sid}" in out, out
    assert "1 message(s) wait in this session" in out, out  # "please note", not "run it"
    assert in_command_line(marker)

    child = spawn(script, "--approval", "never", "resume", sid)
    seen = _at_the_card(child)
    assert "(asked before mind stopped; not answered yet)" in seen, seen
    child.send("k")
    child.expect(words("── completed"))
    exit_cleanly(child)
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")


def test_a_call_whose_outcome_is_unknown_is_announced_as_asked_about_and_told_in_sentences(
    spawn: Spawn, tmp_path: Path
) -> None:
    """A resumed turn's call whose end was never recorded (its evidence
    gone) is not going to run: the resume note and its call line say its
    outcome is unknown and the person is asked — never "to run" nor
    "Calling" — and ``t``'s result tells the model in whole sentences."""
    script = [_shell(COUNT), {"text": "Told."}]
    exec_killed_at(tmp_path, script, "effect_executing:1", "count", "--approval", "never", cwd=REPO)
    (sid,) = [p.name for p in (tmp_path / "state" / "sessions").iterdir()]
    shutil.rmtree(session_dir(tmp_path, sid) / "effects", ignore_errors=True)  # no evidence

    child = spawn(script, "--approval", "never", "resume", sid)
    seen = ""
    for shown in (
        "resuming the turn mind stopped in: 1 call whose outcome is unknown (you are asked)",
        "Outcome unknown shell",
        "Outcome unknown:",
        "t tell the model",
    ):
        child.expect(words(shown))
        seen += str(child.before) + str(child.after)
    seen = _screen_text(seen)
    assert "Calling" not in seen and "to run" not in seen, seen
    child.send("t")
    child.expect(words("── completed"))
    exit_cleanly(child)
    (result,) = _of(journal(tmp_path, sid), "tool_result")
    told = result["output"]
    # "this `shell` call (effect ef_…) started at … UTC and its effect directory was gone"
    assert re.search(r"call \(effect ef_\w+\) started at [0-9: -]+ UTC and its effect", told), told
