"""``/compact [focus]`` in the REPL, in a real pseudo-terminal (docs/design/context.md §5)."""

from __future__ import annotations

from pathlib import Path

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words

__all__ = ["spawn"]  # the fixture, re-used from test_repl


def test_compact_between_turns_says_what_it_did_and_the_transcript_stays(
    spawn: Spawn, tmp_path: Path
) -> None:
    # The scripted provider picks a reply by the answers in the request: the
    # summarisation request (one answer so far) plays the second reply.
    child = spawn([{"text": "The first answer, with enough words."}, {"text": "They said hi."}])
    sid = session_id_of(child)
    child.send("hello there" + ENTER)
    child.expect(words("── completed"))
    child.send("/compact the greeting" + ENTER)
    child.expect(words("context compacted:"))
    child.expect(words("tokens; the model now sees a summary of the earlier turns"))
    screen = exit_cleanly(child)
    assert "Not compacted" not in screen
    records, _ = read_records(tmp_path / "state" / "sessions" / sid / "journal.jsonl")
    (started,) = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert (started.trigger, started.focus) == (jr.CompactionTrigger.manual, "the greeting")
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert done.summary == "They said hi."
    # The journal keeps the originals.
    assert [r.text for r in records if isinstance(r, jr.UserMessage)] == ["hello there"]
