"""The mount ledger on real files (docs/design/mounts.md; mind/shell/mounts.py).

Permissions, strict vs lenient reads of damaged files (byte-identical after),
no write on the read path, a writer that lost its lock, the new-session
warning, idempotent re-entry, republish and close, the republish timer, stale
debris, and a read-only state directory (a loud refusal, no fallback).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mind.errors import MountRefused
from mind.machines.mount import BACKOFF_MS
from mind.shell import mounts, procs
from mind.shell.mounts import (
    LEDGER_NAME,
    LOCK_NAME,
    PUBLISH_INTERVAL_S,
    STALE_LOCK_S,
    MountLedger,
    OwnerRecord,
    RepublishTimer,
    claims,
    read_ledger_lenient,
    read_ledger_strict,
)

ME = os.getpid()
LIVE_OTHER = os.getppid()  # alive for the whole test, and not this process


def ledger_at(root: Path, **kwargs: Any) -> tuple[MountLedger, list[float]]:
    waits: list[float] = []
    return MountLedger(root, sleep_s=waits.append, **kwargs), waits


def file_state(path: Path) -> tuple[bytes, int, int] | None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    data = path.read_bytes() if stat.S_ISREG(info.st_mode) else b""
    return data, info.st_ino, info.st_mtime_ns


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def records(root: Path) -> list[tuple[int, list[str]]]:
    return [(o.pid, o.sessionIds) for o in read_ledger_strict(root / LEDGER_NAME)]


@contextlib.contextmanager
def logged(name: str) -> Iterator[list[str]]:
    """Warnings logged by ``name`` while the block runs (works without pytest's logging plugin)."""
    messages: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger = logging.getLogger(name)
    handler = Collect(logging.WARNING)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "state"


# ------------------------------------------------------------------ basics


def test_claim_creates_dir_0700_and_ledger_0600_and_leaves_no_lock(root: Path) -> None:
    ledger, waits = ledger_at(root)
    handle = ledger.claim("s1")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / LEDGER_NAME).stat().st_mode) == 0o600
    assert tree(root) == [LEDGER_NAME]
    data = msgspec.json.decode((root / LEDGER_NAME).read_bytes())
    assert data == {
        "version": 1,
        "owners": [
            {
                "pid": ME,
                "startedAt": ledger.started_at_ms,
                "sessionIds": ["s1"],
                "startIdentity": procs.start_identity(ME),
            }
        ],
    }
    assert (handle.state, handle.published, handle.warning, waits) == ("reserved", True, None, [])


def test_lock_file_is_created_0600_with_a_pid_nonce_identity_token(root: Path) -> None:
    ledger, _ = ledger_at(root)
    root.mkdir(mode=0o700)
    held = ledger.lock.acquire()
    lock = root / LOCK_NAME
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    token, _, identity = lock.read_text().partition("@")
    pid, _, nonce = token.partition("-")
    assert (int(pid), len(nonce) >= 16, lock.read_bytes()) == (ME, True, held.token)
    assert identity == procs.start_identity(ME) != ""
    ledger.lock.release(held)
    assert not lock.exists()


def test_reentry_is_idempotent_and_touches_no_file(root: Path) -> None:
    ledger, _ = ledger_at(root)
    handle = ledger.claim("s1")
    handle.settle(attached=False)
    before = file_state(root / LEDGER_NAME)
    assert ledger.claim("s1") is handle
    assert ledger.claim("s1", new_session=True) is handle
    assert (handle.state, file_state(root / LEDGER_NAME)) == ("parked", before)
    assert ledger.handle("s1") is handle and ledger.hosted() == {"s1"}


def test_published_set_is_hosted_plus_in_flight_and_release_unpublishes(root: Path) -> None:
    ledger, _ = ledger_at(root)
    a = ledger.claim("a")
    a.settle(attached=True)
    b = ledger.claim("b")  # in flight
    a.park()
    c = ledger.claim("c")
    c.settle(attached=True)
    assert records(root) == [(ME, ["a", "b", "c"])]
    assert b.abandon() and records(root) == [(ME, ["a", "c"])]
    assert a.release() and records(root) == [(ME, ["c"])]
    assert a.release()  # idempotent
    assert (a.state, b.state, c.state, ledger.hosted()) == (
        "released",
        "abandoned",
        "attached",
        {"c"},
    )
    again = ledger.claim("a")
    assert again is not a and records(root) == [(ME, ["a", "c"])]


def test_other_processes_records_are_kept_and_dead_ones_dropped_on_write(root: Path) -> None:
    root.mkdir(mode=0o700)
    dead = 2**22 + 12345  # above the default pid_max: never alive
    owners = [
        {"pid": LIVE_OTHER, "startedAt": 5, "sessionIds": ["x"]},
        {"pid": dead, "startedAt": 6, "sessionIds": ["s1"]},
    ]
    (root / LEDGER_NAME).write_bytes(msgspec.json.encode({"version": 1, "owners": owners}))
    ledger, _ = ledger_at(root)
    assert ledger.holders("s1") == []  # dead: ignored when read
    assert [r.pid for r in ledger.snapshot()] == [LIVE_OTHER]
    with pytest.raises(MountRefused, match=f"occupied by pid {LIVE_OTHER}") as refused:
        ledger.claim("x")
    assert (refused.value.kind, refused.value.pid) == ("occupied", LIVE_OTHER)
    ledger.claim("s1")
    assert records(root) == [(LIVE_OTHER, ["x"]), (ME, ["s1"])]
    assert ledger.snapshot() == [
        OwnerRecord(pid=LIVE_OTHER, started_at_ms=5, session_ids=("x",), is_self=False),
        OwnerRecord(pid=ME, started_at_ms=ledger.started_at_ms, session_ids=("s1",), is_self=True),
    ]
    assert ledger.holders("s1") == []  # this process's own sessions are never "occupied"


def test_reading_never_writes_even_with_dead_records(root: Path) -> None:
    root.mkdir(mode=0o700)
    owners = [{"pid": 2**22 + 1, "startedAt": 0, "sessionIds": ["s1"]}]
    (root / LEDGER_NAME).write_bytes(msgspec.json.encode({"version": 1, "owners": owners}))
    os.chmod(root / LEDGER_NAME, 0o644)
    before = file_state(root / LEDGER_NAME), tree(root)
    ledger, _ = ledger_at(root)
    for _ in range(3):
        assert ledger.holders("s1") == [] and ledger.snapshot() == []
    assert (file_state(root / LEDGER_NAME), tree(root)) == before
    assert stat.S_IMODE((root / LEDGER_NAME).stat().st_mode) == 0o644


# ------------------------------------------------------------------ damaged ledgers


DAMAGED = {
    "not json": b"{not json",
    "torn": b'{"version": 1, "owners": [{"pid": 1',
    "version 2": b'{"version": 2, "owners": []}',
    "no version": b'{"owners": []}',
    "not an object": b"[]",
    "pid is a string": b'{"version":1,"owners":[{"pid":"1","startedAt":0,"sessionIds":[]}]}',
    "missing field": b'{"version": 1, "owners": [{"pid": 1, "sessionIds": []}]}',
    "unknown field": b'{"version": 1, "owners": [], "host": "x"}',
    "empty session id": b'{"version":1,"owners":[{"pid":1,"startedAt":0,"sessionIds":[""]}]}',
    "empty file": b"",
    "deep nesting": b"[" * 100_000,
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_damaged_ledger_refuses_unavailable_reads_empty_and_stays_byte_identical(
    root: Path, damage: str
) -> None:
    root.mkdir(mode=0o700)
    path = root / LEDGER_NAME
    path.write_bytes(DAMAGED[damage])
    before = file_state(path)
    ledger, waits = ledger_at(root)
    with pytest.raises(MountRefused) as refused:
        ledger.claim("s1")
    assert refused.value.kind == "unavailable"
    assert str(path) in refused.value.detail
    assert "delete it when no other mind is running" in refused.value.detail
    assert (ledger.holders("s1"), ledger.snapshot(), read_ledger_lenient(path)) == ([], [], [])
    with pytest.raises(MountRefused, match="cannot check who holds it"):
        ledger.republish() if ledger.hosted() else ledger.claim("s2")
    with logged("mind.mounts") as messages:
        fresh = ledger.claim("new-id", new_session=True)  # a warning, not a refusal
    assert (fresh.state, fresh.published, fresh.warning and fresh.warning.kind) == (
        "reserved",
        False,
        "unavailable",
    )
    assert [m.startswith("new session new-id could not be published") for m in messages] == [True]
    with pytest.raises(MountRefused):
        ledger.republish()
    assert file_state(path) == before
    assert tree(root) == [LEDGER_NAME]  # no lock, no tmp left behind
    assert waits == []
    path.unlink()  # a person deletes it, as the message says
    ledger.republish()
    assert (records(root), fresh.published) == ([(ME, ["new-id"])], True)


@pytest.mark.parametrize("kind", ["directory", "symlink", "oversized"])
def test_ledger_that_is_not_a_small_regular_file_is_unavailable(root: Path, kind: str) -> None:
    root.mkdir(mode=0o700)
    path = root / LEDGER_NAME
    if kind == "directory":
        path.mkdir()
    elif kind == "symlink":
        (root / "elsewhere.json").write_bytes(b'{"version": 1, "owners": []}')
        path.symlink_to(root / "elsewhere.json")
    else:
        path.write_bytes(b'{"version": 1, "owners": []' + b" " * mounts.MAX_LEDGER_BYTES + b"}")
    before = file_state(path)
    ledger, _ = ledger_at(root)
    with pytest.raises(MountRefused) as refused:
        ledger.claim("s1")
    assert refused.value.kind == "unavailable"
    assert file_state(path) == before


def test_symlinked_lock_is_unavailable_and_left_alone(root: Path) -> None:
    root.mkdir(mode=0o700)
    (root / LOCK_NAME).symlink_to(root / "target")
    ledger, _ = ledger_at(root)
    with pytest.raises(MountRefused) as refused:
        ledger.claim("s1")
    assert refused.value.kind == "unavailable"
    assert (root / LOCK_NAME).is_symlink()


# ------------------------------------------------------------------ the lock


def test_writer_that_lost_its_lock_abandons_and_never_deletes_the_new_lock(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the locked read and the write, another process took the lock."""
    ledger, waits = ledger_at(root)
    ledger.claim("first")
    before = file_state(root / LEDGER_NAME)
    thief = f"{LIVE_OTHER}-7h1ef".encode()
    real_read = mounts.read_ledger_strict

    def read_then_lose_lock(path: Path) -> Any:
        owners = real_read(path)
        lock = root / LOCK_NAME
        if lock.exists() and lock.read_bytes().startswith(f"{ME}-".encode()):
            lock.unlink()  # as if reclaimed from us
            lock.write_bytes(thief)  # and taken by a live process
        return owners

    monkeypatch.setattr(claims, "read_ledger_strict", read_then_lose_lock)
    with pytest.raises(MountRefused) as refused:
        ledger.claim("second")
    assert refused.value.kind == "busy"  # the thief is alive: its lock is kept
    assert (root / LOCK_NAME).read_bytes() == thief
    assert file_state(root / LEDGER_NAME) == before  # nothing committed
    assert len(waits) == len(BACKOFF_MS)
    assert [n for n in os.listdir(root) if n.endswith(".tmp")] == []


@pytest.mark.parametrize(
    ("content", "age_s", "reclaimed"),
    [
        (b"", 0.0, False),
        (b"", STALE_LOCK_S + 5, True),
        (b"\x00junk", STALE_LOCK_S + 5, True),
        (f"{LIVE_OTHER}-abc".encode(), 10 * 365 * 24 * 3600.0, False),
        (f"{2**22 + 7}-abc".encode(), 0.0, True),
    ],
    ids=["unreadable-fresh", "unreadable-stale", "garbage-stale", "live-ancient", "dead-fresh"],
)
def test_only_dead_or_stale_unreadable_locks_are_reclaimed(
    root: Path, content: bytes, age_s: float, reclaimed: bool
) -> None:
    root.mkdir(mode=0o700)
    lock = root / LOCK_NAME
    lock.write_bytes(content)
    stamp = time.time() - age_s
    os.utime(lock, (stamp, stamp))
    before = file_state(lock)
    ledger, waits = ledger_at(root)
    if reclaimed:
        assert ledger.claim("s1").published
        assert not lock.exists() and waits == []
    else:
        with pytest.raises(MountRefused) as refused:
            ledger.claim("s1")
        assert (refused.value.kind, len(waits), file_state(lock)) == (
            "busy",
            len(BACKOFF_MS),
            before,
        )
        assert all(0.025 <= w <= 0.4 for w in waits)
    assert [n for n in os.listdir(root) if n.endswith(".reclaim")] == []


def test_busy_for_a_new_session_is_a_warning(root: Path) -> None:
    root.mkdir(mode=0o700)
    (root / LOCK_NAME).write_bytes(f"{LIVE_OTHER}-abc".encode())
    ledger, _ = ledger_at(root)
    handle = ledger.claim("brand-new", new_session=True)
    assert (handle.state, handle.published, handle.warning and handle.warning.kind) == (
        "reserved",
        False,
        "busy",
    )
    (root / LOCK_NAME).unlink()
    ledger.republish()
    assert handle.published and records(root) == [(ME, ["brand-new"])]


def test_debris_of_dead_processes_is_swept_on_the_write_path_only(root: Path) -> None:
    root.mkdir(mode=0o700)
    dead = 2**22 + 99
    names = [
        f"{LEDGER_NAME}.{dead}.1.1.tmp",
        f"{LOCK_NAME}.{dead}.ab.reclaim",
        f"{LEDGER_NAME}.{LIVE_OTHER}.1.1.tmp",
        "unrelated.tmp",
    ]
    for name in names:
        (root / name).write_bytes(b"x")
    ledger, _ = ledger_at(root)
    ledger.holders("s1")
    assert tree(root) == sorted(names)
    ledger.claim("s1")
    assert tree(root) == sorted([LEDGER_NAME, names[2], "unrelated.tmp"])


# ------------------------------------------------------------------ republish / close


def test_republish_repairs_a_lost_record_and_skips_when_nothing_is_hosted(root: Path) -> None:
    ledger, _ = ledger_at(root)
    ledger.republish()
    assert not root.exists()  # nothing to publish: no write, not even the directory
    ledger.claim("s1").settle(attached=True)
    (root / LEDGER_NAME).unlink()
    ledger.republish()
    assert records(root) == [(ME, ["s1"])]
    assert PUBLISH_INTERVAL_S == 15.0


def test_a_write_never_lists_a_session_another_live_process_now_holds(root: Path) -> None:
    """The model test's "a listed twice", played exactly (docs/design/mounts.md §7.2).

    2001 hosts ``a``; the ledger is damaged and a person deletes it; 2002 then
    claims ``a`` (the empty ledger lists nobody). 2001's next writes — the
    republish and the rewrite after a release — must leave ``a`` out while
    2002 lists it (2002 loses at the session lease and gives it back), and
    publish it again once 2002's record no longer does.
    """
    first_pid, second_pid = 2**22 + 2001, 2**22 + 2002  # above pid_max: never real processes
    alive = {first_pid, second_pid}
    live = lambda pid, _identity: pid in alive  # noqa: E731
    first, _ = ledger_at(root, pid=first_pid, alive=live)
    second, _ = ledger_at(root, pid=second_pid, alive=live)
    mine = first.claim("a")
    mine.settle(attached=True)
    first.claim("b").settle(attached=False)
    first.claim("c").settle(attached=False)
    (root / LEDGER_NAME).write_bytes(b"{nope")  # damaged ...
    (root / LEDGER_NAME).unlink()  # ... and deleted by a person
    theirs = second.claim("a")
    assert records(root) == [(second_pid, ["a"])]
    with logged("mind.mounts") as warnings:
        first.republish()
    assert records(root) == [(second_pid, ["a"]), (first_pid, ["b", "c"])]
    assert (mine.state, mine.published) == ("attached", False)
    assert any("a" in m and str(second_pid) in m for m in warnings), warnings
    assert first.handle("b") is not None and first.handle("b").release()  # the release path too
    assert records(root) == [(second_pid, ["a"]), (first_pid, ["c"])]
    assert theirs.abandon()  # 2002 met 2001's lease and gave the claim back
    first.republish()
    assert records(root) == [(first_pid, ["a", "c"])]
    assert mine.published


def test_close_removes_the_record_and_ends_every_claim(root: Path) -> None:
    other, _ = ledger_at(root, pid=LIVE_OTHER)
    other.claim("theirs")
    ledger, _ = ledger_at(root)
    settled = ledger.claim("a")
    settled.settle(attached=True)
    pending = ledger.claim("b")
    assert ledger.close()
    assert records(root) == [(LIVE_OTHER, ["theirs"])]
    assert (settled.state, pending.state, ledger.hosted()) == ("released", "abandoned", set())
    assert ledger.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        ledger.claim("c")
    ledger.republish()  # a late timer tick is a no-op
    assert records(root) == [(LIVE_OTHER, ["theirs"])]


def test_republish_timer_is_a_daemon_thread_and_stops(root: Path) -> None:
    ledger, _ = ledger_at(root)
    ledger.claim("s1")
    (root / LEDGER_NAME).unlink()
    done = threading.Event()
    real = ledger.republish

    def republish() -> None:
        real()
        done.set()

    ledger.republish = republish  # type: ignore[method-assign]
    timer = RepublishTimer(ledger, interval_s=0.01).start()
    assert timer.thread.daemon  # never keeps the process alive (docs/design/mounts.md §7)
    assert done.wait(timeout=30)
    timer.stop()
    assert not timer.thread.is_alive()
    assert records(root) == [(ME, ["s1"])]


# ------------------------------------------------------------------ read-only state directory


@pytest.fixture
def read_only_root(tmp_path: Path) -> Iterator[Path]:
    """A state directory this process cannot write to (chmod, or chattr +i as root)."""
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    if os.geteuid() != 0:
        root.chmod(0o500)
        yield root
        root.chmod(0o700)
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", str(root)], check=False).returncode:
        pytest.skip("running as root without chattr +i: cannot make a read-only directory")
    try:
        yield root
    finally:
        subprocess.run([chattr, "-i", str(root)], check=True)


def test_read_only_state_directory_is_a_loud_refusal_with_no_fallback(
    read_only_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    before = tree(tmp_path)
    ledger, _ = ledger_at(read_only_root)
    with pytest.raises(MountRefused) as refused:
        ledger.claim("s1")
    assert refused.value.kind == "unavailable"
    assert f"cannot create {read_only_root / LOCK_NAME}" in refused.value.detail
    assert "cannot check who holds it" in str(refused.value)
    fresh = ledger.claim("new-id", new_session=True)
    assert (fresh.published, fresh.warning and fresh.warning.kind) == (False, "unavailable")
    assert tree(tmp_path) == before  # nothing written anywhere else
