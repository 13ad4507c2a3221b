"""A command still running after ``kill -9`` of mind, in a real
pseudo-terminal (docs/design/effects.md §4, interactions.md §7): the resumed
turn says it waits for a command that is already running — its command
text, since when — and that ``k`` stops it; ``k`` kills its whole tree
(``setsid`` children too: zero descendants left) and the model is told it
was killed at the person's request. No reconcile card is shown for it."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_approval_restarts import _of
from tests.e2e.test_repl_steering import journal
from tests.support.process_trees import in_command_line, wait_until
from tests.support.pty_running import killed_while_running, resumed, resumed_at_the_running_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl


@pytest.fixture
def marker() -> Iterator[str]:
    mark = f"300.{uuid.uuid4().int % 10**9:09d}"
    yield mark
    for pid in in_command_line(mark):  # never leave a test's tree behind
        os.kill(pid, signal.SIGKILL)


def test_a_command_left_running_is_waited_for_and_k_kills_its_whole_tree(
    spawn: Spawn, tmp_path: Path, marker: str
) -> None:
    command = f"bash -c 'sleep {marker} & setsid sleep {marker} & sleep {marker}'"
    script, sid = killed_while_running(spawn, tmp_path, command, marker=marker, tree=3)
    assert len(in_command_line(marker)) >= 3  # it outlives mind under its supervisor

    child = resumed(spawn, script, sid)
    child.expect(words("Already running:"))
    child.expect(words("is still running; the turn waits for it to end"))
    child.expect(words(f"sleep {marker} & setsid sleep {marker}"))
    child.expect(words("Waiting for shell, already running:"))
    child.expect(words("k kill it"))
    assert "Outcome unknown" not in str(child.before)
    # The card holds no editor: a line typed while it waits is sent (steering).
    child.send("please note" + ENTER)
    wait_until(
        lambda: "please note" in (tmp_path / "state" / "sessions" / sid / "inbox.json").read_text(),
        "the line typed at the running card was not sent",
    )
    (asked,) = _of(journal(tmp_path, sid), "interaction_requested")
    assert (asked["kind"], asked["purpose"], asked["choices"]) == (
        "running",
        "still_running",
        ["kill"],
    )
    child.send("k")
    child.expect(words("killing it and every process it started"))
    child.expect(words("It was stopped."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")
    records = journal(tmp_path, sid)
    (resolved,) = _of(records, "interaction_resolved")
    assert (resolved["interaction_id"], resolved["decision"], resolved["by"]) == (
        asked["interaction_id"],
        "kill",
        "person",
    )
    (result,) = _of(records, "tool_result")
    assert "killed at the user's request" in result["output"]
    assert (result["effect_outcome"], result["evidence"]) == ("failed", "supervisor")
    assert len(_of(records, "tool_started")) == 1  # never run again
    assert _of(records, "effect_reconciled") == []
    assert "please note" in [m["text"] for m in _of(records, "user_message")]


def test_the_resumed_turn_says_the_command_is_already_running_not_that_it_is_called(
    spawn: Spawn, tmp_path: Path, marker: str
) -> None:
    """Before the running card, the resume note and the call's line say the
    command is already running (waited for, not run again) — never "to run"
    nor "Calling"."""
    command = f"bash -c 'sleep {marker} & sleep {marker}'"
    script, sid = killed_while_running(spawn, tmp_path, command)

    child = resumed(spawn, script, sid)
    seen = ""
    for shown in (
        "resuming the turn mind stopped in: 1 command already running",
        "waited for, not run again",
        "Already running shell",
        "Already running:",
    ):
        child.expect(words(shown))
        seen += str(child.before) + str(child.after)
    assert "Calling" not in seen and "to run" not in seen, seen
    child.send("k")
    child.expect(words("── completed"))
    exit_cleanly(child)
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")


def test_exit_at_the_running_card_leaves_it_running_and_esc_kills_its_tree(
    spawn: Spawn, tmp_path: Path, marker: str
) -> None:
    """Leaving (/exit) while the resumed turn waits for a command a crash
    left running is not a Stop (the turn chart's ``leave`` → ``suspended``):
    the command keeps running under its supervisor and the next ``mind
    resume`` waits for it again, card and all. Esc there is a Stop: its
    whole tree is killed and the model is told so."""
    command = f"bash -c 'sleep {marker} & setsid sleep {marker} & sleep {marker}'"
    script, sid = killed_while_running(spawn, tmp_path, command, marker=marker, tree=3)

    child = resumed_at_the_running_card(spawn, script, sid)
    exit_cleanly(child)
    assert len(in_command_line(marker)) >= 3  # left running, whole tree
    records = journal(tmp_path, sid)
    assert _of(records, "tool_result") == [] and _of(records, "interaction_resolved") == []
    assert _of(records, "turn_completed") == []  # left like a crash: resumed next

    # The terminal closing there (SIGHUP) is no Stop either (the chart's hang_up).
    child = resumed_at_the_running_card(spawn, script, sid)
    os.kill(child.pid, signal.SIGHUP)
    child.expect(pexpect.EOF)
    child.close()
    assert len(in_command_line(marker)) >= 3  # still running, whole tree
    records = journal(tmp_path, sid)
    assert _of(records, "tool_result") == [] and _of(records, "turn_completed") == []

    child = resumed_at_the_running_card(spawn, script, sid)
    child.send("\x1b")  # Esc: the person's Stop
    child.expect(words("── interrupted"))
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")
    exit_cleanly(child)
    (result,) = _of(journal(tmp_path, sid), "tool_result")
    assert "killed with every process it started" in result["output"]
    assert "process group" not in result["output"]
