"""Checkpoints: startup reads the newest valid one and only the journal's tail;
damage falls back to a full read with the same state, reported once
(mind/shell/checkpoint.py; docs/design/checkpoints.md)."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.context.retention import Folded, Retention, retained
from mind.generated import journal as jr
from mind.shell.checkpoint import CHECKPOINT_NAME
from mind.shell.journal import Journal, read_records
from tests.support.journals import generated_session

REPO = Path(__file__).resolve().parents[2]


def _write(directory: Path, records: list[jr.JournalRecord], sid: str = "s1") -> Path:
    """``records`` appended through mind's journal, as a hosting process does
    (checkpoints written where they are due)."""
    path = directory / "sessions" / sid / "journal.jsonl"
    with Journal.open(path, create=True, session_id=sid, checkpoints=True) as journal:
        for record in records:
            journal.append(record, sync=isinstance(record, jr.TurnCompleted))
    return path


def _compacted(seed: int = 5, turns: int = 30) -> list[jr.JournalRecord]:
    records = generated_session(random.Random(seed), "s1", turns=turns, payload_bytes=400)
    assert any(isinstance(r, jr.CompactionCompleted) for r in records)
    return records


def _open(path: Path, sid: str = "s1") -> Journal:
    return Journal.open(path, session_id=sid, checkpoints=True)


def test_startup_reads_the_checkpoint_and_only_the_tail(tmp_path: Path) -> None:
    records = _compacted()
    path = _write(tmp_path, records)
    assert (path.parent / CHECKPOINT_NAME).exists()
    whole = read_records(path)[0]
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"
        assert journal.bytes_read < path.stat().st_size // 3
        assert journal.records == retained(whole)
        assert journal.folded == _folded(whole)
        assert journal.next_seq == len(whole)
        appended = journal.append(records[-1].__class__(**_fields(records[-1])))
        assert appended.seq == len(whole)
    assert read_records(path)[0][-1] == appended


def _folded(records: list[jr.JournalRecord]) -> Folded:
    retention = Retention()
    retention.extend(records)
    return retention.folded


def _fields(record: jr.JournalRecord) -> dict[str, object]:
    return {f: getattr(record, f) for f in record.__struct_fields__}


def _damage_cases() -> list[str]:
    return [
        "deleted",
        "truncated",
        "hash_mismatch",
        "no_running_crc",
        "older_than_journal",
        "journal_begun_again",
        "other_session",
    ]


@pytest.mark.parametrize("damage", _damage_cases())
def test_a_damaged_checkpoint_falls_back_to_a_full_read_reported_once(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    records = _compacted()
    cut = len(records) * 2 // 3
    path = _write(tmp_path, records[:cut])
    checkpoint = path.parent / CHECKPOINT_NAME
    older = tmp_path / "older.jsonl"
    shutil.copy(path, older)
    with _open(path) as journal:
        for record in records[cut:]:
            journal.append(record)
        assert journal.write_checkpoint()
    if damage == "deleted":
        checkpoint.unlink()
    elif damage == "truncated":
        data = checkpoint.read_bytes()
        checkpoint.write_bytes(data[: len(data) - 100])
    elif damage == "hash_mismatch":
        head, _, body = checkpoint.read_bytes().partition(b"\n")
        header = json.loads(head)
        header["last_line_sha256"] = "0" * 64
        checkpoint.write_bytes(json.dumps(header).encode() + b"\n" + body)
    elif damage == "no_running_crc":  # written before checkpoints kept it
        head, _, body = checkpoint.read_bytes().partition(b"\n")
        header = json.loads(head)
        del header["journal_crc32"]
        checkpoint.write_bytes(json.dumps(header).encode() + b"\n" + body)
    elif damage == "older_than_journal":
        os.replace(older, path)  # the journal as it was before the checkpoint
    elif damage == "journal_begun_again":  # same session id, another journal, longer
        again = _write(tmp_path / "again", _compacted(seed=6, turns=45))
        os.replace(again, path)
    else:
        other = _write(tmp_path, generated_session(random.Random(1), "s2", turns=3), "s2")
        shutil.copy(other.parent / CHECKPOINT_NAME, checkpoint)
    whole = read_records(path)[0]
    with caplog.at_level(logging.WARNING, logger="mind.shell.journal"), _open(path) as journal:
        assert journal.report.checkpoint not in ("", "used")
        if damage == "journal_begun_again":
            assert "differ" in journal.report.checkpoint  # proved by its first line, not size
        assert journal.records == retained(whole)
        assert journal.folded == _folded(whole)
        assert journal.next_seq == len(whole)
    reports = [r for r in caplog.records if "checkpoint not used" in r.getMessage()]
    assert len(reports) == 1, caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mind.shell.journal"), _open(path) as journal:
        assert journal.report.checkpoint == "used"  # the fallback wrote a new one
        assert journal.records == retained(whole)
    assert "checkpoint" not in caplog.text


def test_a_stale_checkpoint_is_used_with_a_longer_tail(tmp_path: Path) -> None:
    records = _compacted()
    path = _write(tmp_path, records)
    with _open(path) as journal:
        covered = path.stat().st_size
        later = generated_session(random.Random(9), "s1", turns=3, turn_prefix="u")[1:]
        for record in later:
            if not isinstance(record, jr.CompactionStarted | jr.CompactionCompleted):
                journal.append(record)
    whole = read_records(path)[0]
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"
        assert journal.bytes_read == path.stat().st_size - covered
        assert journal.records == retained(whole)


def test_a_torn_tail_after_a_checkpoint_is_dropped_then_vouched_for(tmp_path: Path) -> None:
    records = _compacted()
    path = _write(tmp_path, records)
    with path.open("ab") as f:
        f.write(b'{"type":"turn_started","seq"')
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"
        assert journal.report.torn_tail_dropped
        assert not journal.write_checkpoint()  # never over unclosed torn bytes
        journal.append(records[-1].__class__(**_fields(records[-1])))
        assert journal.write_checkpoint()
    whole = read_records(path)[0]
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"
        assert journal.records == retained(whole)
        assert journal.bytes_read == 0
        # The running CRC went on over the torn bytes, the separator and the
        # vouching line: the new checkpoint's prefix verifies clean (in the
        # open, being small: a mismatch would have read the journal whole).
        assert journal.verification is None


_CRASHER = """
import sys
from pathlib import Path
from mind.generated import journal as jr
from mind.shell.journal import Journal
with Journal.open(Path(sys.argv[1]), session_id="s1", checkpoints=True) as journal:
    journal.append(jr.CompactionStarted(seq=0, recorded_at_ms=0, compaction_id="cx",
        trigger=jr.CompactionTrigger.manual, through_seq=journal.next_seq - 1), sync=True)
    journal.append(jr.CompactionCompleted(seq=0, recorded_at_ms=0, compaction_id="cx",
        through_seq=journal.next_seq - 2, summary="s", kept=[]))
"""


def test_a_crash_while_a_checkpoint_is_written_leaves_a_usable_session(tmp_path: Path) -> None:
    path = _write(tmp_path, _compacted())
    before = (path.parent / CHECKPOINT_NAME).read_bytes()
    env = {**os.environ, "MIND_CRASH_AT": "checkpoint_written"}
    proc = subprocess.run(
        [sys.executable, "-c", _CRASHER, str(path)], env=env, cwd=REPO, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL
    assert (path.parent / CHECKPOINT_NAME).read_bytes() == before  # the old one stands
    assert list(path.parent.glob(f".{CHECKPOINT_NAME}.*.tmp"))  # the new one never replaced it
    whole = read_records(path)[0]
    assert isinstance(whole[-1], jr.CompactionCompleted)
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"  # the old checkpoint, then the tail
        assert journal.records == retained(whole)
        assert journal.write_checkpoint()
    assert not list(path.parent.glob(f".{CHECKPOINT_NAME}.*.tmp"))


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32),
    turns=st.integers(1, 12),
    checkpoint_at=st.lists(st.floats(0, 1), max_size=3),
)
def test_checkpoint_and_tail_give_the_state_of_a_full_read(
    tmp_path_factory: pytest.TempPathFactory, seed: int, turns: int, checkpoint_at: list[float]
) -> None:
    records = generated_session(random.Random(seed), "s1", turns=turns)
    marks = {max(1, int(len(records) * f)) for f in checkpoint_at}
    path = tmp_path_factory.mktemp("j") / "sessions" / "s1" / "journal.jsonl"
    with Journal.open(path, create=True, session_id="s1", checkpoints=True) as journal:
        for n, record in enumerate(records, 1):
            journal.append(record)
            if n in marks:
                journal.write_checkpoint()
    whole = read_records(path)[0]
    with _open(path) as journal:
        via_checkpoint, folded = journal.records, journal.folded
        next_seq = journal.next_seq
    (path.parent / CHECKPOINT_NAME).unlink(missing_ok=True)
    with Journal.open(path, session_id="s1") as full:
        assert full.report.checkpoint in ("", "no checkpoint")
        assert via_checkpoint == full.records == retained(whole)
        assert folded == full.folded == _folded(whole)
        assert next_seq == full.next_seq == len(whole)


def test_a_running_session_lets_go_of_what_a_compaction_superseded(tmp_path: Path) -> None:
    records = _compacted()
    path = tmp_path / "sessions" / "s1" / "journal.jsonl"
    with Journal.open(path, create=True, session_id="s1", checkpoints=True) as journal:
        for n, record in enumerate(records, 1):
            journal.append(record)
            if isinstance(record, jr.CompactionCompleted):
                assert [r.seq for r in journal.records] == [r.seq for r in retained(records[:n])]
        assert [r.seq for r in journal.records] == [r.seq for r in retained(records)]
        assert len(journal.records) < len(records) // 2
        assert journal.next_seq == len(records)


def test_a_checkpoint_open_to_others_is_replaced_and_the_note_says_so(tmp_path: Path) -> None:
    """The note says what mind did (wrote a new private checkpoint), not a
    ``chmod`` for the person to run on a file that is already gone."""
    path = _write(tmp_path, _compacted())
    target = path.parent / CHECKPOINT_NAME
    os.chmod(target, 0o666)
    with _open(path) as journal:
        note = journal.report.checkpoint
    assert "writable by other users (mode 0666)" in note
    assert "chmod" not in note and "fix:" not in note
    assert "mind wrote a new private one" in note
    assert target.stat().st_mode & 0o777 == 0o600
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"
