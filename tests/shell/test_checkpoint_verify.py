"""The prefix a checkpoint covers is verified in the background after an
open through it: the journal's running CRC-32 at the checkpoint's offset
against the bytes now there (mind/shell/journal_open.py;
docs/design/checkpoints.md §5). Real files, real threads."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import zlib
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.errors import DAMAGED_JOURNAL_NEXT_STEP, JournalCorruptError, SessionDamagedError
from mind.generated import journal as jr
from mind.shell import journal_open
from mind.shell.checkpoint import CHECKPOINT_NAME
from mind.shell.journal import Journal, read_records
from tests.support import records as rec
from tests.support.child_env import without_prefixes
from tests.support.exec_world import EXEC_TIMEOUT_S, exec_setup, run_exec
from tests.support.journals import generated_session

WAIT_S = 10.0  # bounded wait for the background check (it takes milliseconds here)
_CRC_SUFFIX = len(b',"crc32":"00000000"}')


def _write(directory: Path, sid: str = "s1", turns: int = 30) -> Path:
    """A session appended through mind's journal as a hosting process does
    (checkpoints where due), then a checkpoint at its end."""
    records = generated_session(random.Random(5), sid, turns=turns, payload_bytes=400)
    path = directory / "sessions" / sid / "journal.jsonl"
    with Journal.open(path, create=True, session_id=sid, checkpoints=True) as journal:
        for record in records:
            journal.append(record, sync=isinstance(record, jr.TurnCompleted))
        assert journal.write_checkpoint()
    return path


def _covered(path: Path) -> int:
    head = (path.parent / CHECKPOINT_NAME).read_bytes().partition(b"\n")[0]
    offset = json.loads(head)["journal_offset"]
    assert isinstance(offset, int)
    return offset


def _middle_line(data: bytes, covered: int, pattern: bytes) -> tuple[int, int, int]:
    """``(1-based line, start, end)`` of the first line matching ``pattern``
    in the middle third of the covered prefix (neither its first nor its
    last line, the two lines the open proves)."""
    start = 0
    for number, line in enumerate(data[:covered].split(b"\n")[:-1], 1):
        end = start + len(line) + 1
        if covered // 3 < start and end < covered * 2 // 3 and re.search(pattern, line):
            return number, start, end
        start = end
    raise AssertionError(f"no line matching {pattern!r} in the middle")


def _resealed(line: bytes, edit: tuple[bytes, bytes]) -> bytes:
    """``line`` (with its newline) with one same-length edit of its record,
    carrying a valid CRC again: a sound line, as a forger who knows the
    format would write it."""
    body = line[: -1 - _CRC_SUFFIX]
    old, new = edit
    assert len(old) == len(new) and old in body
    body = body.replace(old, new, 1)
    return body + b',"crc32":"%08x"}\n' % zlib.crc32(body)


def _damaged(tmp_path: Path, how: str) -> tuple[Path, int, bytes]:
    """A session whose covered prefix was changed in the middle; returns
    the journal, the changed line and the journal's bytes after the change."""
    path = _write(tmp_path)
    data = path.read_bytes()
    covered = _covered(path)
    number, start, end = _middle_line(data, covered, rb'"type":"tool_result"')
    line = data[start:end]
    if how == "flipped_byte":
        at = start + line.index(b"xxxx")
        changed = data[:at] + b"y" + data[at + 1 :]
    else:
        seq = re.search(rb'"seq":([0-9]+),', line)
        assert seq is not None
        if how == "other_seq":  # a sound line that is not the one expected here
            other = str(int(seq[1]) + 1).encode()
            assert len(other) == len(seq[1])
            edit = (seq[0], b'"seq":' + other + b",")
        else:  # "forged": its own seq, another text, a valid CRC
            edit = (b"xxxx", b"yyyy")
        changed = data[:start] + _resealed(line, edit) + data[end:]
    assert len(changed) == len(data) and changed != data
    path.write_bytes(changed)
    return path, number, changed


@pytest.fixture(autouse=True)
def _in_background(monkeypatch: pytest.MonkeyPatch) -> None:
    """These small journals are checked in the background (an open verifies
    a prefix up to SYNC_VERIFY_BYTES itself: tests/shell/test_damaged_session.py)."""
    monkeypatch.setattr(journal_open, "SYNC_VERIFY_BYTES", 0)


def _open(path: Path) -> Journal:
    return Journal.open(path, session_id="s1", checkpoints=True)


@pytest.mark.parametrize("how", ["flipped_byte", "other_seq"])
def test_damage_inside_the_covered_prefix_is_found_after_the_open_and_refused_next(
    tmp_path: Path, how: str
) -> None:
    path, line, changed = _damaged(tmp_path, how)
    with _open(path) as journal:
        assert journal.report.checkpoint == "used"  # the open did not read the prefix
        check = journal.verification
        assert check is not None
        assert check.wait(WAIT_S)
        assert check.state == "damaged"
        assert check.damage is not None and f"{path}:{line}:" in check.damage
        assert not (path.parent / CHECKPOINT_NAME).exists()  # invalidated
        assert not journal.write_checkpoint()  # never one over the damage
        assert not (path.parent / CHECKPOINT_NAME).exists()
    with pytest.raises(JournalCorruptError) as refused:
        _open(path)
    assert (refused.value.path, refused.value.line) == (path, line)
    assert path.read_bytes() == changed


def test_a_forged_line_is_found_by_the_running_crc_though_every_line_passes(
    tmp_path: Path,
) -> None:
    """What the CRC chain can and cannot do: it sees that the covered bytes
    changed, but a line rewritten with a valid check of its own is a sound
    line to a full read, which then accepts the journal as it now is."""
    path, _, changed = _damaged(tmp_path, "forged")
    with _open(path) as journal:
        check = journal.verification
        assert check is not None and check.wait(WAIT_S)
        assert check.state == "damaged"
        assert check.damage is not None and str(path) in check.damage
        assert "every line passes its own check" in check.damage
        assert not (path.parent / CHECKPOINT_NAME).exists()
    with _open(path) as journal:
        assert journal.report.checkpoint.startswith("no checkpoint")  # read whole
    assert read_records(path)[0]
    assert path.read_bytes()[: len(changed)] == changed


def test_a_clean_prefix_is_verified_in_the_background_and_reports_nothing(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path)
    before = path.read_bytes()
    with _open(path) as journal:
        check = journal.verification
        assert check is not None and check.wait(WAIT_S)
        assert (check.state, check.damage) == ("clean", None)
        journal.append(jr.InputDropped(seq=0, recorded_at_ms=0, message_id="late"))
        assert journal.write_checkpoint()  # its running CRC goes on over the appends
    assert path.read_bytes().startswith(before)
    with _open(path) as journal:
        check = journal.verification
        assert check is not None and check.wait(WAIT_S)
        assert (check.state, check.damage) == ("clean", None)


def test_closing_the_journal_while_its_prefix_is_verified_leaves_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path)
    # One byte a read: the check outlasts the open by far (real preads).
    monkeypatch.setattr(journal_open, "VERIFY_CHUNK_BYTES", 1)
    journal = _open(path)
    check = journal.verification
    assert check is not None and check.state == "running"
    journal.close()
    assert check.state == "stopped"
    assert not [t for t in threading.enumerate() if t.name == journal_open.VERIFY_THREAD_NAME]
    assert (path.parent / CHECKPOINT_NAME).exists()  # stopping is not damage


def _config(tmp_path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})


def test_a_resumed_session_reports_the_damage_and_refuses_new_input(tmp_path: Path) -> None:
    state = tmp_path / "state"

    async def first() -> tuple[str, Path]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path, [{"text": "a"}] * 3))
            for n in range(3):
                await s.submit(f"message number {n} xxxxxxxx").wait()
            assert s.journal.write_checkpoint()
            return s.session_id, s.journal.path

    sid, path = anyio.run(first)
    data = path.read_bytes()
    at = data.index(b"message number 1 xxxx")
    line = data[:at].count(b"\n") + 1
    changed = data[:at] + b"M" + data[at + 1 :]
    path.write_bytes(changed)

    async def reopen() -> str | None:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=_config(tmp_path, [{"text": "a"}] * 4))
            check = s.journal.verification
            assert check is not None
            assert await anyio.to_thread.run_sync(check.wait, WAIT_S)
            # A turn running meanwhile finishes: tests/shell/test_damaged_session.py.
            with pytest.raises(SessionDamagedError):
                s.submit("again")
            # The listing agrees: the index holds the damage the check found.
            (row,) = [r for r in rt.list_sessions() if r.session_id == sid]
            assert row.damage.startswith(f"{path}:{line}, integrity check failed"), row
            return s.checkpoint_damage

    damage = anyio.run(reopen)
    assert damage is not None and f"{path}:{line}:" in damage
    assert not (path.parent / CHECKPOINT_NAME).exists()
    with pytest.raises(JournalCorruptError) as refused:
        Journal.open(path, session_id=sid)
    assert (refused.value.path, refused.value.line) == (path, line)
    assert path.read_bytes()[: len(changed)] == changed


def _grow_big(path: Path, sid: str, outputs: int) -> None:
    """A turn with ``outputs`` tool results of 15 MB each, then a compaction
    of it: a long covered prefix, a small checkpoint (what is retained)."""
    with Journal.open(path, session_id=sid, checkpoints=True) as journal:
        journal.append(rec.turn_started("big"))
        calls = [rec.call(f"c{k}", "shell", '{"command":"true"}') for k in range(outputs)]
        journal.append(rec.model_round("big", "", calls, 0))
        for c in calls:
            journal.append(
                jr.ToolStarted(
                    seq=0, recorded_at_ms=0, turn_id="big", call_id=c.call_id, name="shell"
                )
            )
            journal.append(
                jr.ToolResult(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id="big",
                    call_id=c.call_id,
                    name="shell",
                    status=jr.ToolStatus.ok,
                    output="x" * (15 << 20),
                    synthetic=False,
                )
            )
        journal.append(rec.model_round("big", "done", None, 1))
        journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id="big",
                status=jr.TurnStatus.completed,
                usage=jr.Usage(input_tokens=1, output_tokens=1),
                acknowledged=[],
            ),
            sync=True,
        )
        through = journal.next_seq - 1
        journal.append(
            jr.CompactionStarted(
                seq=0,
                recorded_at_ms=0,
                compaction_id="cbig",
                trigger=jr.CompactionTrigger.manual,
                through_seq=through,
            ),
            sync=True,
        )
        journal.append(
            jr.CompactionCompleted(
                seq=0,
                recorded_at_ms=0,
                compaction_id="cbig",
                through_seq=through,
                summary="s",
                kept=[],
            ),
            sync=True,
        )  # a checkpoint is written after it


def test_mind_exec_on_a_damaged_session_answers_then_says_where_on_stderr(
    tmp_path: Path,
) -> None:
    """A one-shot run lets the check end before it closes the session: the
    prefix here (~120 MB) takes longer to check than the turn takes, yet even
    a session only ever resumed by ``mind exec`` has its prefix checked."""
    exec_setup(tmp_path, [{"text": "answered"}] * 4)  # by round, whatever came before
    run_exec(tmp_path, "s-exec", "message number 0 xxxxxxxx", new=True)
    path = tmp_path / "state" / "sessions" / "s-exec" / "journal.jsonl"
    _grow_big(path, "s-exec", 8)
    assert _covered(path) == path.stat().st_size
    with path.open("r+b") as f:  # one byte of the 5th output, in place
        data = f.read()
        at = data.index(b"xxxx", len(data) // 2)
        line = data[:at].count(b"\n") + 1
        f.seek(at)
        f.write(b"y")
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(MIND_HOME=str(tmp_path / "home"), MIND_STATE_HOME=str(tmp_path / "state"))
    argv = [sys.executable, "-m", "mind.shell.cli", "exec", "--script", str(tmp_path / "s.yaml")]
    argv += ["--approval", "never", "--cwd", str(tmp_path / "cwd"), "--session", "s-exec"]
    proc = subprocess.run(
        [*argv, "again"],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXEC_TIMEOUT_S,
    )
    assert (proc.returncode, proc.stdout) == (0, "answered\n"), proc.stderr[-800:]
    assert f"{path}:{line}: integrity check failed" in proc.stderr
    assert "nothing more starts in this session" in proc.stderr  # and what to do:
    assert DAMAGED_JOURNAL_NEXT_STEP in proc.stderr
    assert not (path.parent / CHECKPOINT_NAME).exists()
