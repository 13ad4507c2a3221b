"""A damaged journal is refused, listing and opening agree, and nothing is
written over the damage (docs/design/checkpoints.md §5): a small covered
prefix is verified in the open itself; damage the session index recorded
for the file as it is now refuses the open at once; damage the background
check finds in a live session refuses its next input. Real files, real
subprocesses for ``mind exec`` and ``mind sessions``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import mind
from mind.errors import (
    DAMAGED_JOURNAL_NEXT_STEP,
    CompactionRefused,
    JournalCorruptError,
    SessionDamagedError,
)
from mind.shell import journal_open
from mind.shell.checkpoint import CHECKPOINT_NAME
from mind.shell.journal import Journal
from mind.shell.journal_open import PrefixCheck
from tests.shell.test_checkpoint_verify import WAIT_S, _config, _covered, _damaged, _grow_big
from tests.support.child_env import without_prefixes
from tests.support.exec_world import EXEC_TIMEOUT_S, exec_setup, run_exec
from tests.support.gate import Gate

NEXT_STEP = "mind changed nothing in it"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _mind(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_")
    env.update(MIND_HOME=str(tmp_path / "home"), MIND_STATE_HOME=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EXEC_TIMEOUT_S,
    )


def _exec(tmp_path: Path, sid: str, prompt: str) -> subprocess.CompletedProcess[str]:
    argv = ["exec", "--script", str(tmp_path / "s.yaml"), "--approval", "never"]
    return _mind(tmp_path, *argv, "--cwd", str(tmp_path / "cwd"), "--session", sid, prompt)


def _flip(path: Path, marker: bytes, start: int = 0) -> int:
    """Change one byte of ``marker`` (found from ``start``) in place; its 1-based line."""
    with path.open("r+b") as f:
        data = f.read()
        at = data.index(marker, start)
        f.seek(at)
        f.write(b"y" if data[at : at + 1] != b"y" else b"z")
    return data[:at].count(b"\n") + 1


@pytest.mark.parametrize("how", ["flipped_byte", "other_seq"])
def test_a_small_covered_prefix_is_verified_in_the_open_and_damage_refused(
    tmp_path: Path, how: str
) -> None:
    path, line, changed = _damaged(tmp_path, how)
    assert _covered(path) <= journal_open.SYNC_VERIFY_BYTES
    with pytest.raises(JournalCorruptError) as refused:
        Journal.open(path, session_id="s1", checkpoints=True)
    assert (refused.value.path, refused.value.line) == (path, line)
    assert path.read_bytes() == changed


def test_a_forged_line_in_a_small_prefix_is_read_whole_like_a_full_read(tmp_path: Path) -> None:
    path, _, changed = _damaged(tmp_path, "forged")
    with Journal.open(path, session_id="s1", checkpoints=True) as journal:
        assert journal.report.checkpoint not in ("", "used")  # the checkpoint was not trusted
        assert journal.verification is None  # nothing left to check
    assert path.read_bytes()[: len(changed)] == changed


def test_mind_exec_refuses_a_small_damaged_session_with_its_line_and_a_next_step(
    tmp_path: Path,
) -> None:
    exec_setup(tmp_path, [{"text": "answered"}] * 8)
    for n in range(3):
        run_exec(tmp_path, "s-small", f"message number {n} xxxxxxxx", new=n == 0)
    path = tmp_path / "state" / "sessions" / "s-small" / "journal.jsonl"
    with Journal.open(path, session_id="s-small", checkpoints=True) as journal:
        assert journal.write_checkpoint()
    line = _flip(path, b"number 1 xxxx")
    digest = _sha(path)
    proc = _exec(tmp_path, "s-small", "again")
    assert proc.returncode != 0 and proc.stdout == "", proc.stderr[-800:]
    assert f"{path}:{line}: integrity check failed" in proc.stderr
    assert NEXT_STEP in proc.stderr and "new session" in proc.stderr
    assert _sha(path) == digest


def test_damage_the_listing_recorded_refuses_the_open_at_once_while_it_is_current(
    tmp_path: Path,
) -> None:
    """A prefix too long to verify in the open (~45 MB) whose damage ``mind
    sessions`` found: the open refuses it from the index's record, before
    the first request; once the file changes (restored) the record is stale."""
    exec_setup(tmp_path, [{"text": "answered"}] * 8)
    run_exec(tmp_path, "s-big", "message number 0 xxxxxxxx", new=True)
    path = tmp_path / "state" / "sessions" / "s-big" / "journal.jsonl"
    _grow_big(path, "s-big", 3)
    assert _covered(path) > journal_open.SYNC_VERIFY_BYTES
    original = path.read_bytes()
    assert _mind(tmp_path, "sessions").returncode == 0  # the index accounts for all of it
    line = _flip(path, b"xxxx", len(original) // 2)
    listed = _mind(tmp_path, "sessions")
    assert f"{path}:{line}, integrity check failed" in listed.stdout, listed.stdout
    digest = _sha(path)
    proc = _exec(tmp_path, "s-big", "again")
    assert proc.returncode != 0 and proc.stdout == "", proc.stderr[-800:]
    assert f"{path}:{line}: integrity check failed" in proc.stderr
    assert NEXT_STEP in proc.stderr
    assert _sha(path) == digest
    assert (path.parent / CHECKPOINT_NAME).exists()  # the open changed nothing

    path.write_bytes(original)  # restored from a backup: the record no longer describes it
    proc = _exec(tmp_path, "s-big", "again")
    assert (proc.returncode, proc.stdout) == (0, "answered\n"), proc.stderr[-800:]


def test_damage_found_while_a_turn_runs_lets_it_finish_then_refuses_new_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The running turn finishes (its records are appended after the
    damage, nothing is lost); then nothing new starts, and the journal is
    not touched again. Deterministic: the turn is paused at a gate while a
    check of the prefix (the real one, started again) finds the damage."""
    monkeypatch.setattr(journal_open, "SYNC_VERIFY_BYTES", 0)  # checked in the background
    state = tmp_path / "state"

    async def first() -> tuple[str, Path]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path, [{"text": "a"}] * 3))
            for n in range(3):
                await s.submit(f"message number {n} xxxxxxxx").wait()
            assert s.journal.write_checkpoint()
            return s.session_id, s.journal.path

    sid, path = anyio.run(first)
    header = json.loads((path.parent / CHECKPOINT_NAME).read_bytes().partition(b"\n")[0])

    async def reopen(gate: Gate) -> tuple[int, str, SessionDamagedError]:
        async with mind.Runtime.open(state_root=state) as rt:
            replies = [{"text": "a"}] * 3 + [{"text": "answered", "pause": str(gate.path)}]
            s = await rt.open_session(sid, config=_config(tmp_path, replies))
            opened = s.journal.verification
            assert opened is not None and await anyio.to_thread.run_sync(opened.wait, WAIT_S)
            assert opened.state == "clean"
            turn = s.submit("again")
            assert await anyio.to_thread.run_sync(gate.wait_reached)
            line = _flip(path, b"number 1 xxxx")  # while the turn runs
            fd = os.open(path, os.O_RDONLY)
            try:
                # The startup's hook, as the open's own check has it.
                hook = opened._on_damage
                at = (header["journal_offset"], header["journal_crc32"])
                check = PrefixCheck(path, fd, *at, on_damage=hook)
            finally:
                os.close(fd)
            s.journal.verification = check
            assert await anyio.to_thread.run_sync(check.wait, WAIT_S)
            assert check.state == "damaged" and s.checkpoint_damage is not None
            gate.release()
            outcome = await turn.wait()
            assert outcome.final_text == "answered", outcome  # the running turn finished
            digest = _sha(path)
            with pytest.raises(SessionDamagedError) as refused:
                s.submit("more")
            with pytest.raises(SessionDamagedError):
                s.queue("later")
            assert s.resume_pending() is None and not s.busy and not s.reusable
            with pytest.raises(CompactionRefused, match=f"{path}:{line}"):
                await s.compact()
            assert not s.journal.write_checkpoint()
            assert _sha(path) == digest
            # The listing agrees though the journal grew after the damage
            # (a listing reads only appended bytes): the index holds it.
            (row,) = [r for r in rt.list_sessions() if r.session_id == sid]
            assert row.damage.startswith(f"{path}:{line}, integrity check failed"), row
            return line, digest, refused.value

    with Gate() as gate:
        line, digest, refused = anyio.run(reopen, gate)
    assert (refused.session_id, refused.path, refused.line) == (sid, path, line)
    assert refused.reason == "damaged"
    assert f"{path}:{line}" in refused.message and "left it as it is" in refused.message
    assert DAMAGED_JOURNAL_NEXT_STEP in refused.message
    assert _sha(path) == digest
    with pytest.raises(JournalCorruptError) as again:
        Journal.open(path, session_id=sid, checkpoints=True)
    assert again.value.line == line
    assert _sha(path) == digest

    async def resume() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(JournalCorruptError) as known:
                await rt.open_session(sid, config=_config(tmp_path, [{"text": "a"}]))
            assert (known.value.path, known.value.line) == (path, line)

    anyio.run(resume)
    assert _sha(path) == digest
