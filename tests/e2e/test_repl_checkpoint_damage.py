"""A resumed session whose checkpoint's prefix turns out damaged says so in
``/status`` with the journal's path and line, in a real pseudo-terminal
(docs/design/checkpoints.md §5)."""

from __future__ import annotations

from pathlib import Path

from mind.shell.checkpoint import CHECKPOINT_NAME
from mind.shell.journal import Journal
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words

__all__ = ["spawn"]  # the fixture, used by name


def test_status_names_the_damaged_line_of_a_resumed_session(spawn: Spawn, tmp_path: Path) -> None:
    replies = [{"text": "First answer."}, {"text": "Second answer."}, {"text": "Third answer."}]
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

    again = spawn(replies, "resume", sid)
    again.send("third words" + ENTER)  # the session still answers
    again.expect(words("Third answer."))
    again.expect(words("── completed"))
    again.send("/status" + ENTER)
    again.expect(words("journal damaged:"))
    again.expect(words(f"jsonl:{line}: integrity check failed"))  # the path wraps at 120
    exit_cleanly(again)
    assert not (path.parent / CHECKPOINT_NAME).exists()
