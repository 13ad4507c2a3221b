"""Resuming a session whose checkpoint's prefix is damaged is refused with
the journal's path and line and what the person can do, in a real
pseudo-terminal (docs/design/checkpoints.md §5)."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pexpect
import yaml

from mind.shell.checkpoint import CHECKPOINT_NAME
from mind.shell.journal import Journal
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
from tests.shell.test_checkpoint_verify import _grow_big

__all__ = ["spawn"]  # the fixture, used by name


def test_resuming_a_small_damaged_session_is_refused_with_its_line_and_a_next_step(
    spawn: Spawn, tmp_path: Path
) -> None:
    replies = [{"text": "First answer."}, {"text": "Second answer."}]
    child = spawn(replies)
    sid = session_id_of(child)
    for text in ("first words xxxxxxxx", "second words"):
        child.send(text + ENTER)
        child.expect(words("── completed"))
    exit_cleanly(child)
    path = tmp_path / "state" / "sessions" / sid / "journal.jsonl"
    with Journal.open(path, session_id=sid, checkpoints=True) as journal:
        assert journal.write_checkpoint()
    data = path.read_bytes()
    at = data.index(b"first words xxxx")
    line = data[:at].count(b"\n") + 1
    path.write_bytes(data[:at] + b"F" + data[at + 1 :])
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(replies), encoding="utf-8")

    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    # A prefix this small is verified by the open itself (a longer one in the
    # background, then /status names it: tests/shell/test_damaged_session.py).
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        COLUMNS="120",
    )
    argv = ["-m", "mind.shell.cli", "--provider", "scripted", "--script", str(tmp_path / "s.yaml")]
    again = pexpect.spawn(
        sys.executable,
        [*argv, "--cwd", str(tmp_path), "resume", sid],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )
    again.expect(words(f"jsonl:{line}: integrity check failed"))  # the path wraps at 120
    again.expect(words("mind changed nothing in it"))
    again.expect(words("restore the journal from a backup, or start a new session"))
    again.expect(pexpect.EOF)
    again.close()
    assert again.exitstatus != 0
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert (path.parent / CHECKPOINT_NAME).exists()  # the refused open changed nothing


def test_a_damage_found_after_resuming_refuses_the_next_input_with_a_next_step(
    spawn: Spawn, tmp_path: Path
) -> None:
    """A prefix too long for the open (~45 MB) is checked in the background;
    once the damage is found the REPL says where, and refuses new input
    saying what to do, keeping the text; the journal is not touched."""
    child = spawn([{"text": "First answer."}])
    sid = session_id_of(child)
    child.send("first words" + ENTER)
    child.expect(words("── completed"))
    exit_cleanly(child)
    path = tmp_path / "state" / "sessions" / sid / "journal.jsonl"
    _grow_big(path, sid, 3)
    with path.open("r+b") as f:  # one byte in the middle, in place
        data = f.read()
        at = data.index(b"xxxx", len(data) // 2)
        line = data[:at].count(b"\n") + 1
        f.seek(at)
        f.write(b"y")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    again = spawn([{"text": "First answer."}, {"text": "Not to be sent."}], "resume", sid)
    # The check's warning reaches the terminal (stderr): the person is told.
    again.expect(words("journal damaged inside its checkpoint's prefix"))
    again.expect(words("nothing more starts in this session"))
    assert not (path.parent / CHECKPOINT_NAME).exists()
    again.send("/status" + ENTER)
    again.expect(words("journal damaged:"))
    again.expect(words(f"jsonl:{line}: integrity check failed"))
    again.send("more words" + ENTER)
    again.expect(words("Not sent:"))
    again.expect(words("left it as it is and starts nothing more in this session"))
    again.expect(words("restore the journal from a backup, or start a new session"))
    again.expect(words("Your text is still in the editor."))
    exit_cleanly(again, "\x15/exit" + ENTER)  # Ctrl-U: the kept text goes first
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
