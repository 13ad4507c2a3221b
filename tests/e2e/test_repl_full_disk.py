"""The REPL on a full disk says so in one line and keeps running (docs/design/journal.md §3);
once space is freed the session goes on in the same process, nothing lost.

The state root is a real 2 MiB tmpfs (root only); the scripted model's tool
call carries 256 KiB of arguments, so its round cannot be journaled once the
disk is filled. The REPL prints the turn's ``storage`` failure, refuses the
next input with the reason (the text stays in the editor), never a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pexpect
import yaml

from mind.generated import journal as jr
from tests.e2e.test_repl import _SCRUB, _SESSION_RE, ENTER, REPO, TIMEOUT_S, exit_cleanly, words
from tests.shell.test_full_disk import _check_journal, fill, small_disk

__all__ = ["small_disk"]  # the fixture, used by name below


def test_repl_reports_a_full_disk_in_one_line_and_refuses_input(
    tmp_path: Path, small_disk: Path
) -> None:
    script = tmp_path / "script.yaml"
    big = {"command": "echo " + "y" * (256 * 1024)}
    script.write_text(
        yaml.safe_dump([{"tool_calls": [{"name": "shell", "arguments": big}]}]), encoding="utf-8"
    )
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(small_disk / "state"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    argv = ["-m", "mind.shell.cli", "--provider", "scripted", "--script", str(script)]
    child = pexpect.spawn(
        sys.executable,
        [*argv, "--cwd", str(tmp_path)],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )
    try:
        child.expect(_SESSION_RE)
        child.expect("› ")
        fill(small_disk)
        child.send("go" + ENTER)
        child.expect(words("could not write"))
        child.expect(r"journal\.jsonl(?:\x1b\[[0-9;?]*[A-Za-z])* \(ENOSPC\)")
        child.expect(words("── aborted"))  # as the reopen will close it
        child.send("again" + ENTER)
        child.expect(words("Not sent:"))
        child.expect(words("Your text is still in the editor."))
        assert child.isalive()
        assert "Traceback" not in str(child.before)
    finally:
        child.terminate(force=True)


BIG_TEXT = "z" * (160 * 1024)  # more than the pages left free: its round cannot be kept


def _spawn_big_answer(tmp_path: Path, disk: Path) -> pexpect.spawn:
    script = tmp_path / "script.yaml"
    replies = [{"text": BIG_TEXT}, {"text": "second answer"}]
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(disk / "state"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
    )
    argv = ["-m", "mind.shell.cli", "--provider", "scripted", "--script", str(script)]
    return pexpect.spawn(
        sys.executable,
        [*argv, "--cwd", str(tmp_path)],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )


def _fail_on_full_disk(child: pexpect.spawn, disk: Path) -> str:
    """Start the REPL's session, fill the disk, let a turn fail ``storage``
    (reported ``aborted``: what the reopen closes it with, nothing acknowledged)."""
    child.expect(_SESSION_RE)
    sid = str(child.match.group(1))
    child.expect("› ")
    ballast = fill(disk)
    child.send("go" + ENTER)
    child.expect(words("── aborted"))  # as the reopen will close it
    child.send("again" + ENTER)
    child.expect(words("Not sent:"))
    child.expect(words(f"free space, then /resume {sid}"))
    child.expect(words("Your text is still in the editor."))
    ballast.unlink()
    return sid


def _nothing_lost(disk: Path, sid: str) -> None:
    directory = disk / "state" / "sessions" / sid
    records = _check_journal(directory / "journal.jsonl")
    done = [r for r in records if isinstance(r, jr.TurnCompleted)]
    # The failed turn is closed by recovery (its own record could not be
    # written) as the live REPL reported it: aborted, nothing acknowledged.
    assert (done[0].status, done[0].acknowledged) == ("aborted", [])
    assert {r.status for r in done[1:]} == {"completed"}
    texts = {r.message_id: r.text for r in records if isinstance(r, jr.UserMessage)}
    assert [texts[m] for r in done[1:] for m in r.acknowledged] == ["go", "again"]
    assert json.loads((directory / "inbox.json").read_text("utf-8"))["entries"] == []


def test_repl_resume_of_the_broken_session_reopens_it_after_space_is_freed(
    tmp_path: Path, small_disk: Path
) -> None:
    child = _spawn_big_answer(tmp_path, small_disk)
    try:
        sid = _fail_on_full_disk(child, small_disk)
        child.send("\x15")  # Ctrl+U: clear the editor ("again" is sent later)
        child.send(f"/resume {sid}" + ENTER)
        child.expect(words(f"session {sid} (reopened)"))
        child.expect(words("a write of the session's state failed during a turn"))
        child.expect(words("zzzzzzzzzz"))  # the recovered "go" is answered
        child.expect(words("── completed"))
        child.send("again" + ENTER)
        child.expect(words("second answer"))
        child.expect(words("── completed"))
        assert "Already in session" not in str(child.before)
        exit_cleanly(child)
    finally:
        child.terminate(force=True)
    _nothing_lost(small_disk, sid)


def test_repl_enter_after_space_is_freed_reopens_and_sends(
    tmp_path: Path, small_disk: Path
) -> None:
    child = _spawn_big_answer(tmp_path, small_disk)
    try:
        sid = _fail_on_full_disk(child, small_disk)
        child.send(ENTER)  # "again" is still in the editor: send it now
        child.expect(words(f"session {sid} (reopened)"))
        child.expect(words("zzzzzzzzzz"))  # "go" first, then "again", answered
        child.expect(words("── completed"))
        exit_cleanly(child)
    finally:
        child.terminate(force=True)
    _nothing_lost(small_disk, sid)


def test_repl_new_then_resume_of_the_broken_session_reopens_it(
    tmp_path: Path, small_disk: Path
) -> None:
    child = _spawn_big_answer(tmp_path, small_disk)
    try:
        sid = _fail_on_full_disk(child, small_disk)
        child.sendcontrol("u")
        child.send("/new" + ENTER)
        child.expect(words("when you go back to it."))  # the new session is shown
        child.send(f"/resume {sid}" + ENTER)  # parked and broken: opened afresh
        child.expect(words(f"session {sid} (reopened)"))
        child.expect(words("zzzzzzzzzz"))
        child.expect(words("── completed"))
        child.send("again" + ENTER)
        child.expect(words("second answer"))
        child.expect(words("── completed"))
        exit_cleanly(child)
    finally:
        child.terminate(force=True)
    _nothing_lost(small_disk, sid)
