"""A full disk ends the turn with a typed StorageError; nothing is lost (docs/design/journal.md §3).

The state root is a real 2 MiB tmpfs mounted for the test (root only; skipped
with the reason otherwise). It is filled with a ballast file until the
kernel answers ENOSPC, then a few pages are freed: the prompt's inbox write
and the turn's start fit, the model's 256 KiB answer does not. Through the
library API and through a real ``mind exec``: the typed outcome or one line
(exit 4), no traceback, then the ballast is removed and the session resumes
with every accepted input still there and the journal valid.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import anyio
import pytest

import mind
from mind.errors import InputRefused, StorageError
from mind.generated import journal as jr
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from tests.e2e.conftest import _SCRUB
from tests.support.loopback import LoopbackServer

ANSWER = "y" * (256 * 1024)
FREE_PAGES = 32  # left free after filling: the inbox and turn start fit, the answer does not


class _Answer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for i in range(0, len(ANSWER), 16384):
            chunk = {"choices": [{"index": 0, "delta": {"content": ANSWER[i : i + 16384]}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())


class BigAnswerModel(LoopbackServer):
    handler = _Answer
    thread_name = "big-answer-model"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs at ``tmp_path/disk``, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,nr_inodes=512", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> Path:
    """Write a ballast file until ENOSPC, then free ``FREE_PAGES`` pages of it."""
    ballast = disk / "ballast"
    # Every fill starts from no ballast, the same way (a second fill once met
    # ENOSPC opening the first one's file while the index thread was writing).
    ballast.unlink(missing_ok=True)
    with ballast.open("wb") as f:
        block = b"\0" * 65536
        try:
            while True:
                f.write(block)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
            size = f.tell()
    page = os.statvfs(disk).f_frsize
    os.truncate(ballast, max(0, (size // page - FREE_PAGES) * page))
    return ballast


def _check_journal(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as journal:  # valid: opens, at most a torn tail dropped
        return list(journal.records)


def test_a_full_disk_fails_the_turn_with_a_typed_outcome_and_resumes(
    tmp_path: Path, small_disk: Path
) -> None:
    state = small_disk / "state"
    with BigAnswerModel() as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="m",
            env={"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "0"},
        )

        async def full() -> tuple[mind.TurnOutcome, InputRefused, str]:
            async with mind.Runtime.open(state_root=state) as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                fill(small_disk)
                turn = session.submit("first question", message_id="msg-first")
                outcome = await turn.wait()
                with pytest.raises(InputRefused) as refused:
                    session.send("second question", message_id="msg-second")
                return outcome, refused.value, session.session_id

        outcome, refused, sid = anyio.run(full)  # no ExceptionGroup escapes
        # The terminal could not be written either: the turn reports what the
        # reopen will close it with (docs/design/turn.md §2).
        assert outcome.status == "aborted"
        assert outcome.event.failure is not None
        assert outcome.event.failure.kind == "storage"
        assert isinstance(outcome.error, StorageError)
        assert outcome.error.errno == errno.ENOSPC
        assert outcome.error.path == state / "sessions" / sid / "journal.jsonl"
        assert "ENOSPC" in outcome.event.failure.message
        assert refused.reason == "storage"

        (small_disk / "ballast").unlink()
        directory = state / "sessions" / sid
        _check_journal(directory / "journal.jsonl")

        async def resume() -> mind.TurnOutcome:
            async with mind.Runtime.open(state_root=state) as rt:
                session = await rt.open_session(sid, config=config)
                assert session.recovery is not None and session.recovery.replayed_inputs == 1
                turn = session.resume_pending()
                assert turn is not None
                assert [m.message_id for m in turn.inputs] == ["msg-first"]
                return await turn.wait()

        resumed = anyio.run(resume)
    assert resumed.status == "completed" and resumed.final_text == ANSWER
    records = _check_journal(directory / "journal.jsonl")
    done = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert [(str(r.status), r.acknowledged) for r in done] == [
        ("aborted", []),  # the reopen's receipt: what the live turn reported
        ("completed", ["msg-first"]),
    ]
    assert Inbox.open(directory / "inbox.json", acknowledged=()).entries == []


def test_send_on_a_full_disk_is_refused_with_a_typed_reason(
    tmp_path: Path, small_disk: Path
) -> None:
    config = mind.resolve_config(
        provider="openai-chat",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        env={"MIND_HOME": str(tmp_path / "home")},
    )

    async def main() -> InputRefused:
        async with mind.Runtime.open(state_root=small_disk / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            ballast = fill(small_disk)
            os.truncate(ballast, ballast.stat().st_size + FREE_PAGES * 4096)  # nothing free
            with pytest.raises(InputRefused) as refused:
                session.send("x" * 200_000)
            assert not session.busy and not session.waiting
            return refused.value

    refused = anyio.run(main)
    assert refused.reason == "storage"
    assert isinstance(refused.__cause__, StorageError)
    assert refused.__cause__.errno == errno.ENOSPC


def test_exec_on_a_full_disk_prints_one_line_exits_4_and_resumes(
    tmp_path: Path, small_disk: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(small_disk / "state"),
        MIND_MAX_RETRIES="0",
        PYTHONUNBUFFERED="1",
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mind.shell.cli", "exec", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    with BigAnswerModel() as model:
        common = ["--provider", "openai-chat", "--base-url", model.base_url, "--model", "m"]
        common += ["--cwd", str(tmp_path)]
        sid = "01234567-89ab-7def-8123-456789abcdef"
        # The session exists first (so the disk fills during the turn, not at creation).
        first = run(*common, "--new-session", sid, "hello")
        assert first.returncode == 0, first.stderr
        fill(small_disk)
        failed = run(*common, "--session", sid, "first question")
        (small_disk / "ballast").unlink()
        resumed = run(*common, "--session", sid)
    assert failed.returncode == 4, failed.stderr
    assert "Traceback" not in failed.stderr, failed.stderr
    lines = [line for line in failed.stderr.splitlines() if "ENOSPC" in line or "failed" in line]
    assert len(lines) == 1, failed.stderr  # one line for the failure …
    assert lines[0].startswith("mind: turn aborted (storage): could not write ")
    assert f"{sid}/journal.jsonl (ENOSPC)" in lines[0]
    assert "first question" in failed.stderr  # … then the usual notice: the input waits
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == ANSWER + "\n"
    records = _check_journal(small_disk / "state" / "sessions" / sid / "journal.jsonl")
    prompts = [r.text for r in records if isinstance(r, jr.UserMessage)]
    assert prompts.count("first question") >= 1 and set(prompts) == {"hello", "first question"}
    done = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done[-1].status == "completed" and len(done[-1].acknowledged) == 1


def test_a_broken_session_reopens_in_the_same_runtime_with_nothing_lost(
    tmp_path: Path, small_disk: Path
) -> None:
    state = small_disk / "state"
    with BigAnswerModel() as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="m",
            env={"MIND_HOME": str(tmp_path / "home"), "MIND_MAX_RETRIES": "0"},
        )

        async def main() -> tuple[str, mind.TurnOutcome, mind.TurnOutcome]:
            async with mind.Runtime.open(state_root=state) as rt:
                broken = await rt.create_session(cwd=tmp_path, config=config)
                sid = broken.session_id
                ballast = fill(small_disk)
                failed = await broken.submit("first question", message_id="msg-first").wait()
                assert failed.event.failure is not None
                assert failed.event.failure.kind == "storage"
                with pytest.raises(InputRefused) as refused:
                    broken.send("second question")
                assert "open_session" in refused.value.message  # how to go on
                assert rt.store.index.flush()  # the index's writer thread is done writing
                ballast = _fill_completely(small_disk)
                with pytest.raises(StorageError):  # still full: a typed refusal, retryable
                    await rt.open_session(sid, config=config)
                ballast.unlink()
                session = await rt.open_session(sid, config=config)
                # A fresh handle: the broken one was closed and its claims given back.
                assert session is not broken and broken.journal.closed
                assert broken.mount.state == "released"
                assert rt.mounts.handle(sid) is session.mount and session.mount.hosted
                assert rt.sessions[sid] is session
                assert await rt.open_session(sid, config=config) is session  # healthy: same handle
                assert session.recovery is not None
                assert session.recovery.aborted_turns == 1  # the failed turn, closed
                assert session.recovery.replayed_inputs == 1
                turn = session.resume_pending()
                assert turn is not None and [m.message_id for m in turn.inputs] == ["msg-first"]
                resumed = await turn.wait()
                later = await session.submit("third question", message_id="msg-third").wait()
                return sid, resumed, later

        sid, resumed, later = anyio.run(main)
    assert resumed.status == "completed" and resumed.final_text == ANSWER
    assert later.status == "completed"
    directory = state / "sessions" / sid
    records = _check_journal(directory / "journal.jsonl")
    acked = [m for r in records if isinstance(r, jr.TurnCompleted) for m in r.acknowledged]
    assert acked == ["msg-first", "msg-third"]
    assert Inbox.open(directory / "inbox.json", acknowledged=()).entries == []


def _fill_completely(disk: Path) -> Path:
    """Fill ``disk`` to 100%: not one page left free."""
    ballast = fill(disk)
    fd = os.open(ballast, os.O_WRONLY | os.O_APPEND)
    try:
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 4096):
                pass
    finally:
        os.close(fd)
    return ballast


def _exec_env(tmp_path: Path, disk: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(disk / "state"),
        MIND_MAX_RETRIES="0",
        PYTHONUNBUFFERED="1",
    )
    return env


def _mind(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _one_storage_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("mind:")]
    assert len(lines) == 1, proc.stderr
    assert "ENOSPC" in lines[0], proc.stderr
    return lines[0]


def test_exec_of_a_new_session_on_a_full_disk_exits_4_and_lists_nothing_after(
    tmp_path: Path, small_disk: Path
) -> None:
    env = _exec_env(tmp_path, small_disk)
    # The state root exists first (a fresh root needs the disk only for itself).
    common = ["exec", "--provider", "scripted", "--script", str(tmp_path / "s.yaml")]
    (tmp_path / "s.yaml").write_text("- text: hi\n", encoding="utf-8")
    assert _mind(env, *common, "--cwd", str(tmp_path), "hello").returncode == 0
    ballast = _fill_completely(small_disk)
    failed = _mind(env, *common, "--cwd", str(tmp_path), "--json", "another")
    _one_storage_line(failed)
    (last,) = [json.loads(line) for line in failed.stdout.splitlines()][-1:]
    assert last["type"] == "exec.failed" and last["kind"] == "storage", failed.stdout
    ballast.unlink()
    listed = _mind(env, "sessions")
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if re.match(r"[0-9a-f]{8}-", line)]
    assert len(rows) == 1, listed.stdout  # the failed creation left nothing listed
    assert len(list((small_disk / "state" / "sessions").iterdir())) == 1


def test_exec_of_an_existing_session_on_a_full_disk_exits_4(
    tmp_path: Path, small_disk: Path
) -> None:
    env = _exec_env(tmp_path, small_disk)
    (tmp_path / "s.yaml").write_text("- text: hi\n- text: again\n", encoding="utf-8")
    common = ["exec", "--provider", "scripted", "--script", str(tmp_path / "s.yaml")]
    common += ["--cwd", str(tmp_path)]
    sid = "01234567-89ab-7def-8123-456789abcdef"
    assert _mind(env, *common, "--new-session", sid, "hello").returncode == 0
    ballast = _fill_completely(small_disk)
    _one_storage_line(_mind(env, *common, "--session", sid, "p"))
    ballast.unlink()
    resumed = _mind(env, *common, "--session", sid, "p")
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "again\n"


def test_exec_with_a_state_root_it_cannot_create_on_a_full_disk_exits_4(
    tmp_path: Path, small_disk: Path
) -> None:
    env = _exec_env(tmp_path, small_disk)  # the state root does not exist yet
    (tmp_path / "s.yaml").write_text("- text: hi\n", encoding="utf-8")
    _fill_completely(small_disk)
    failed = _mind(env, "exec", "--provider", "scripted", "--script", str(tmp_path / "s.yaml"), "p")
    line = _one_storage_line(failed)
    assert str(small_disk / "state") in line


def test_exec_whose_state_root_cannot_be_made_for_want_of_inodes_exits_4(
    tmp_path: Path, small_disk: Path
) -> None:
    # Directories cost a tmpfs no data pages, only inodes: use them all up.
    with contextlib.suppress(OSError):
        for i in range(1_000_000):
            (small_disk / f"i{i}").mkdir()
    env = _exec_env(tmp_path, small_disk)  # the state root does not exist yet
    (tmp_path / "s.yaml").write_text("- text: hi\n", encoding="utf-8")
    failed = _mind(env, "exec", "--provider", "scripted", "--script", str(tmp_path / "s.yaml"), "p")
    line = _one_storage_line(failed)
    assert str(small_disk / "state") in line
