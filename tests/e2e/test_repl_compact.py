"""``/compact [focus]`` in the REPL, in a real pseudo-terminal (docs/design/context.md §5)."""

from __future__ import annotations

from pathlib import Path

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.support.gate import Gate

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


def test_a_line_sent_while_compact_runs_waits_for_it_then_runs(
    spawn: Spawn, tmp_path: Path
) -> None:
    with Gate() as gate:
        child = spawn(
            [
                {"text": "The first answer, with enough words."},
                {"text": "They said hi.", "pause": str(gate.path)},  # the summary, held
            ]
        )
        sid = session_id_of(child)
        child.send("hello there" + ENTER)
        child.expect(words("── completed"))
        child.send("/compact" + ENTER)
        assert gate.wait_reached(), "the summarisation request never arrived"
        child.send("sent meanwhile" + ENTER)  # while the compaction runs
        child.expect(words("sent meanwhile"))
        gate.release()
        child.expect(words("context compacted:"))
        child.expect(words("── completed"))  # the turn that took it, after the compaction
        exit_cleanly(child)
    records, _ = read_records(tmp_path / "state" / "sessions" / sid / "journal.jsonl")
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    started = [r for r in records if isinstance(r, jr.TurnStarted)]
    assert len(started) == 2 and started[1].seq > done.seq
    (during,) = [r for r in records if isinstance(r, jr.UserMessage) and r.text == "sent meanwhile"]
    assert during.turn_id == started[1].turn_id


def test_the_status_line_says_compacting_while_a_compaction_inside_a_turn_runs(
    spawn: Spawn, tmp_path: Path
) -> None:
    """A 2000-token window compacted at 5%: the second turn compacts first;
    while its summary is held, the status line says so (context.md §5)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("auto_compact_percent = 5\n", encoding="utf-8")
    with Gate() as gate:
        child = spawn(
            [
                {"text": "The first answer, " + "with enough words " * 20},
                {"text": "They said hi.", "pause": str(gate.path)},  # the summary, held
            ],
            "--model-context-window",
            "2000",
        )
        child.send("hello there" + ENTER)
        child.expect(words("── completed"))
        child.send("and again" + ENTER)
        assert gate.wait_reached(), "the summarisation request never arrived"
        child.expect(words("compacting the context"))
        gate.release()
        child.expect(words("context compacted (automatic)"))
        # After the summary the request holds no answer: the script plays its first again.
        child.expect(words("── completed"))
        exit_cleanly(child)


def test_the_hint_for_a_line_sent_while_compact_runs_says_it_waits(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Enter sends nothing while the compaction runs: the hint says when it goes."""
    with Gate() as gate:
        child = spawn(
            [
                {"text": "The first answer, with enough words."},
                {"text": "They said hi.", "pause": str(gate.path)},  # the summary, held
            ]
        )
        child.send("hello there" + ENTER)
        child.expect(words("── completed"))
        child.send("/compact" + ENTER)
        assert gate.wait_reached(), "the summarisation request never arrived"
        child.send("sent meanwhile" + ENTER)
        child.expect(words("1 waiting · sent when the compaction ends"))
        gate.release()
        child.expect(words("── completed"))
        screen = exit_cleanly(child)
    assert "Enter sends now" not in screen
