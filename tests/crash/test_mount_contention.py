"""The mount ledger across real processes (docs/design/mounts.md).

- Contention: 8 processes race to claim the same session, round after round
  (:data:`ROUNDS`, default 500: 4,000 claims). Two independent observers:
  every winner creates ``round-<n>`` with ``O_EXCL`` (a second winner in the
  same round fails to), and the test process — not a racer — reads the
  ledger strictly while the winner still holds the session and checks that
  exactly the reported winner is listed. Losers must be refused ``occupied``
  naming that winner, or ``busy``; never ``unavailable``. The counts are
  printed and written to ``.pytest_cache/d/mount-summary.txt``.
- ``kill -9`` of a holder (session listed) and of a lock holder: the next
  claim succeeds with no manual cleanup.
- A lock holder paused with SIGSTOP keeps its lock, however old the file,
  while its pid lives; after SIGCONT it finishes and the claim succeeds.
- A pid reused by an unrelated live process (a ``sleep`` we spawn, so its
  start identity is not the writer's): per docs/design/mounts.md §3, §4 the lock token
  and the ledger record have no start identity, so they are *not* reclaimed
  while that process lives (busy / occupied: the accepted cost, never a
  false "free") and are reclaimed by the first claim after it exits; the
  session lease (which has a start identity, docs/design/lease.md §1) is reclaimed at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mind.errors import MountRefused, SessionOccupiedError
from mind.machines.mount import BACKOFF_MS
from mind.shell import procs
from mind.shell.lease import LeaseRecord, SessionLease
from mind.shell.mounts import LEDGER_NAME, LOCK_NAME, MountLedger, read_ledger_strict

ROOT = Path(__file__).resolve().parents[2]
RACERS = 8
ROUNDS = int(os.environ.get("MIND_MOUNT_ROUNDS", "500"))
SESSION = "contended"
BARRIER_TIMEOUT_S = 60.0


# ------------------------------------------------------------------ contention


def _racer(root: str, markers: str, rounds: int, barrier: Any, results: Any) -> None:
    """One racing process: claim, report, hold until observed, release; every round."""
    ledger = MountLedger(Path(root))
    pid = os.getpid()
    for n in range(rounds):
        barrier.wait(BARRIER_TIMEOUT_S)  # start together
        handle = None
        try:
            handle = ledger.claim(SESSION)
        except MountRefused as refused:
            results.put((n, pid, refused.kind, [h.pid for h in refused.holders], False))
        else:
            exclusive = True
            try:
                fd = os.open(Path(markers) / f"round-{n}", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                exclusive = False
            else:
                os.write(fd, str(pid).encode())
                os.close(fd)
            results.put((n, pid, "won", [], exclusive))
        barrier.wait(BARRIER_TIMEOUT_S)  # everyone tried; the observer reads
        barrier.wait(BARRIER_TIMEOUT_S)  # observed
        if handle is not None:
            handle.settle(attached=True)
            assert handle.release()
    ledger.close()


def test_eight_processes_racing_never_have_two_holders(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    root = tmp_path / "state"
    markers = tmp_path / "markers"
    markers.mkdir()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(RACERS + 1)
    results = ctx.Queue()
    racers = [
        ctx.Process(target=_racer, args=(str(root), str(markers), ROUNDS, barrier, results))
        for _ in range(RACERS)
    ]
    for racer in racers:
        racer.start()
    outcomes: Counter[str] = Counter()
    violations: list[str] = []  # anything wrong, double owners included
    double_owner = 0  # rounds in which two processes held the session
    no_winner = 0
    started = time.monotonic()
    try:
        for n in range(ROUNDS):
            barrier.wait(BARRIER_TIMEOUT_S)
            barrier.wait(BARRIER_TIMEOUT_S)
            got = [results.get(timeout=BARRIER_TIMEOUT_S) for _ in range(RACERS)]
            assert {g[0] for g in got} == {n}
            winners = [g[1] for g in got if g[2] == "won"]
            outcomes.update(g[2] for g in got)
            # observer 1: the O_EXCL markers
            clash = [g[1] for g in got if g[2] == "won" and not g[4]]
            # observer 2: a strict read of the ledger while the winner holds it
            listed = [
                o.pid
                for o in read_ledger_strict(root / LEDGER_NAME)
                if SESSION in o.sessionIds and procs.is_alive(o.pid)
            ]
            if clash or len(winners) > 1 or len(listed) > 1:
                double_owner += 1
                violations.append(f"round {n}: two holders: {winners=} {listed=} {clash=}")
            elif listed != winners:
                violations.append(f"round {n}: ledger lists {listed}, winners {winners}")
            if not winners:
                no_winner += 1
            for _n, pid, kind, holders, _x in got:
                if kind == "occupied" and holders != winners:
                    violations.append(f"round {n}: {pid} refused occupied by {holders}")
                if kind not in ("won", "occupied", "busy"):
                    violations.append(f"round {n}: {pid} refused {kind}")
            barrier.wait(BARRIER_TIMEOUT_S)
    finally:
        for racer in racers:
            racer.join(timeout=BARRIER_TIMEOUT_S)
            if racer.is_alive():
                racer.kill()
    elapsed_s = time.monotonic() - started
    attempted = RACERS * ROUNDS
    summary = (
        f"mount contention: {RACERS} processes x {ROUNDS} rounds = {attempted} claims attempted; "
        f"won {outcomes['won']}, occupied {outcomes['occupied']}, busy {outcomes['busy']}, "
        f"rounds without a winner {no_winner}; double-owner violations {double_owner}; "
        f"other violations {len(violations) - double_owner}; {elapsed_s:.1f} s\n"
    )
    print(summary)
    cache = getattr(request.config, "cache", None)  # absent under -p no:cacheprovider
    if cache is not None:
        directory = Path(cache.mkdir("mount-summary"))
        (directory / "summary.txt").write_text(summary)
        (directory.parent / "mount-summary.txt").write_text(summary)  # .pytest_cache/d/
    assert all(r.exitcode == 0 for r in racers), [r.exitcode for r in racers]
    assert violations == []
    assert outcomes["won"] + outcomes["occupied"] + outcomes["busy"] == attempted
    assert outcomes["won"] == ROUNDS - no_winner
    assert not (root / LOCK_NAME).exists()
    assert read_ledger_strict(root / LEDGER_NAME) == []  # every racer cleared its record


# ------------------------------------------------------------------ helpers


HOLDER = """
import sys
from pathlib import Path
from mind.shell.mounts import MountLedger
ledger = MountLedger(Path(sys.argv[1]))
mode = sys.argv[2]
if mode == "session":
    ledger.claim(sys.argv[3]).settle(attached=True)
    print("ready", flush=True)
else:
    held = ledger.lock.acquire()
    print("locked " + held.token.decode(), flush=True)
    sys.stdin.readline()  # released on request
    ledger.lock.release(held)
    print("released", flush=True)
sys.stdin.readline()
"""


class Child:
    """A real process running :data:`HOLDER` (stdin/stdout lines to drive it)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        self.first_line = self.proc.stdout.readline().strip()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, line: str = "") -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def kill_9(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def children() -> Iterator[list[Child]]:
    made: list[Child] = []
    yield made
    for child in made:
        child.close()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated live process whose pid the test pretends was reused."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def no_wait_ledger(root: Path, **kwargs: Any) -> tuple[MountLedger, list[float]]:
    """A ledger whose backoff waits are recorded, not slept."""
    waits: list[float] = []
    return MountLedger(root, sleep_s=waits.append, **kwargs), waits


# ------------------------------------------------------------------ kill -9


def test_holder_killed_with_sigkill_frees_the_session_without_cleanup(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "state"
    holder = Child(str(root), "session", "s1")
    children.append(holder)
    assert holder.first_line == "ready"
    ledger = MountLedger(root)
    assert [h.pid for h in ledger.holders("s1")] == [holder.pid]
    with pytest.raises(MountRefused, match=f"occupied by pid {holder.pid}") as refused:
        ledger.claim("s1")
    assert (refused.value.kind, refused.value.pid) == ("occupied", holder.pid)
    holder.kill_9()
    assert ledger.holders("s1") == []  # read path: ignored, not written
    assert [o.pid for o in read_ledger_strict(root / LEDGER_NAME)] == [holder.pid]
    handle = ledger.claim("s1")
    assert handle.published
    assert [(o.pid, o.sessionIds) for o in read_ledger_strict(root / LEDGER_NAME)] == [
        (os.getpid(), ["s1"])
    ]  # the dead record was dropped by this write
    ledger.close()


def test_lock_holder_killed_with_sigkill_is_reclaimed(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "state"
    holder = Child(str(root), "lock")
    children.append(holder)
    assert holder.first_line.startswith(f"locked {holder.pid}-")
    ledger, waits = no_wait_ledger(root)
    with pytest.raises(MountRefused) as busy:
        ledger.claim("s1")
    assert busy.value.kind == "busy"
    assert len(waits) == len(BACKOFF_MS)
    holder.kill_9()
    handle = ledger.claim("s1")
    assert (handle.state, handle.published, len(waits)) == ("reserved", True, len(BACKOFF_MS))
    assert not (root / LOCK_NAME).exists()
    ledger.close()


# ------------------------------------------------------------------ SIGSTOP


def test_paused_lock_holder_keeps_the_lock_while_its_pid_lives(
    tmp_path: Path, children: list[Child]
) -> None:
    root = tmp_path / "state"
    holder = Child(str(root), "lock")
    children.append(holder)
    token = holder.first_line.removeprefix("locked ")
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        lock = root / LOCK_NAME
        old = time.time() - 7 * 24 * 3600
        os.utime(lock, (old, old))  # however old the file is (docs/design/mounts.md §3)
        before = lock.read_bytes(), lock.stat().st_ino
        far_future = time.time() + 365 * 24 * 3600
        ledger, waits = no_wait_ledger(root, clock_s=lambda: far_future)
        with pytest.raises(MountRefused) as busy:
            ledger.claim("s1")
        assert busy.value.kind == "busy"
        assert [25 <= w * 1000 <= 400 for w in waits] == [True] * len(BACKOFF_MS)
        assert (lock.read_bytes(), lock.stat().st_ino) == before == (token.encode(), before[1])
        assert not (root / LEDGER_NAME).exists()
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    assert holder.send() == "released"  # it still owned its lock and deleted it
    assert not (root / LOCK_NAME).exists()
    handle = ledger.claim("s1")
    assert handle.published
    ledger.close()


# ------------------------------------------------------------------ pid reuse


def test_lock_naming_a_reused_pid_is_kept_until_that_process_exits(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    lock = root / LOCK_NAME
    lock.write_bytes(f"{sleeper.pid}-0dead0".encode())  # left by a dead writer whose pid is reused
    old = time.time() - 24 * 3600
    os.utime(lock, (old, old))
    before = lock.read_bytes(), lock.stat().st_ino, lock.stat().st_mtime_ns
    ledger, waits = no_wait_ledger(root)
    with pytest.raises(MountRefused) as busy:
        ledger.claim("s1")
    assert (busy.value.kind, len(waits)) == ("busy", len(BACKOFF_MS))  # never a false "free"
    assert (lock.read_bytes(), lock.stat().st_ino, lock.stat().st_mtime_ns) == before
    sleeper.kill()
    sleeper.wait(timeout=10)
    handle = ledger.claim("s1")  # the first claim after it exits reclaims the lock
    assert handle.published and not lock.exists()
    ledger.close()


def test_record_naming_a_reused_pid_is_occupied_until_that_process_exits(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    record = {"pid": sleeper.pid, "startedAt": 1, "sessionIds": ["s1"]}
    (root / LEDGER_NAME).write_bytes(msgspec.json.encode({"version": 1, "owners": [record]}))
    ledger = MountLedger(root)
    with pytest.raises(MountRefused, match=f"occupied by pid {sleeper.pid}"):
        ledger.claim("s1")
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert ledger.claim("s1").published
    assert [o.pid for o in read_ledger_strict(root / LEDGER_NAME)] == [os.getpid()]
    ledger.close()


def test_lock_whose_token_names_a_reused_pid_is_reclaimed_at_once(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A token with a start identity (docs/design/mounts.md §3): a live pid that now runs
    another process is dead for the lock, even while the file is fresh."""
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    identity = procs.start_identity(sleeper.pid)
    assert identity
    (root / LOCK_NAME).write_bytes(f"{sleeper.pid}-0dead0@{identity}9".encode())
    ledger, waits = no_wait_ledger(root)
    handle = ledger.claim("s1")
    assert (handle.published, waits, (root / LOCK_NAME).exists()) == (True, [], False)
    ledger.close()


def test_lock_left_under_this_pid_before_a_container_restart_is_reclaimed(
    tmp_path: Path,
) -> None:
    """After a container restart the new mind may get its predecessor's pid:
    a token naming this pid with another start identity (or none: this mind
    always writes one) is a predecessor's, never this process's own."""
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    mine = procs.start_identity(os.getpid())
    boot = mine.rpartition(":")[0]
    for token in (f"{os.getpid()}-0dead0@{boot}:1", f"{os.getpid()}-0dead0"):
        (root / LOCK_NAME).write_bytes(token.encode())
        ledger, waits = no_wait_ledger(root)
        handle = ledger.claim("s1")
        assert (handle.published, waits, (root / LOCK_NAME).exists()) == (True, [], False)
        ledger.close()


def test_busy_names_the_lock_file_and_its_holder(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    identity = procs.start_identity(sleeper.pid)
    (root / LOCK_NAME).write_bytes(f"{sleeper.pid}-0a1b2c@{identity}".encode())  # really held
    ledger, _ = no_wait_ledger(root)
    with pytest.raises(MountRefused) as busy:
        ledger.claim("s1")
    assert busy.value.kind == "busy"
    assert f"{root / LOCK_NAME} is held by pid {sleeper.pid}" in str(busy.value)


def test_record_naming_a_reused_pid_by_its_start_identity_is_dead(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """A ledger record carries its writer's start identity: a live pid whose
    identity differs does not occupy the session; one whose identity matches does."""
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    identity = procs.start_identity(sleeper.pid)
    reused = {"pid": sleeper.pid, "startedAt": 1, "sessionIds": ["s1"], "startIdentity": "x:1"}
    live = {"pid": sleeper.pid, "startedAt": 1, "sessionIds": ["s2"], "startIdentity": identity}
    ledger_file = root / LEDGER_NAME
    ledger_file.write_bytes(msgspec.json.encode({"version": 1, "owners": [reused]}))
    ledger = MountLedger(root)
    assert ledger.holders("s1") == []
    assert ledger.claim("s1").published
    ledger.close()
    assert [o.pid for o in read_ledger_strict(ledger_file)] == []  # dropped on the write path
    ledger_file.write_bytes(msgspec.json.encode({"version": 1, "owners": [live]}))
    ledger = MountLedger(root)
    with pytest.raises(MountRefused, match=f"occupied by pid {sleeper.pid}"):
        ledger.claim("s2")
    ledger.close()


def test_lease_naming_a_reused_pid_is_reclaimed_at_once(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    """The session lease has a start identity (docs/design/lease.md §1), so pid reuse frees it."""
    path = tmp_path / "lease"
    identity = procs.start_identity(sleeper.pid)
    assert identity
    stale = LeaseRecord(pid=sleeper.pid, start_identity=identity + "0", owner_id="own_old")
    path.write_bytes(msgspec.json.encode(stale))
    lease = SessionLease.acquire(path, "s1")
    assert lease.record.pid == os.getpid()
    lease.release()
    live = LeaseRecord(pid=sleeper.pid, start_identity=identity, owner_id="own_live")
    path.write_bytes(msgspec.json.encode(live))
    with pytest.raises(SessionOccupiedError, match=f"occupied by pid {sleeper.pid}"):
        SessionLease.acquire(path, "s1")
