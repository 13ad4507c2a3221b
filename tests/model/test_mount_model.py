"""Model-based tests of the mount chart and the ledger (docs/design/mounts.md).

1. Per edge, deterministic: :func:`walk_every_edge` reaches and fires every
   transition of ``MountChart`` and checks the configuration each lands in.
2. Interleavings: a hypothesis ``RuleBasedStateMachine`` drives several real
   :class:`MountLedger` objects — one per simulated process, each with its
   own pid — over one real state directory, with an injected liveness
   predicate (so a process can "die" with ``kill -9`` semantics: its record
   and any lock it held stay behind), an injected sleep (backoff waits are
   recorded and checked to be 25–400 ms, never slept) and planted files: a
   lock held by a live peer (released after k waits, or never), a lock of a
   dead pid, an unreadable lock fresh or past the stale window, records of
   other live or dead processes, and a damaged ledger (bad JSON, version 2,
   wrong shape). Every step is compared with a reference model written by
   hand from docs/design/mounts.md (plain lists and dicts): the outcome of each call
   (granted, same handle, occupied with exact holders, busy, unavailable,
   reserved-but-unpublished for a new id), every handle's state, each
   process's published set, the waits taken, and the whole ledger file
   (decoded records, or the exact bytes when damaged) and the lock file.
   Invariants: no session is listed by two live processes; nothing is left
   behind (no tmp, no lock of ours); display reads never write.

Transition coverage of ``MountChart`` is recorded over each whole run, written
to ``.pytest_cache/d/transition-coverage/`` and printed; every edge must be
taken by the run itself (the deterministic tour of real ledgers is a test of
its own and counts in no report; the runtime's own claims are counted in
``MountChart-runtime.txt`` by the full run).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mind.errors import IllegalTransition, MountHolder, MountRefused
from mind.generated.mount_chart import MountChart
from mind.shell.mounts import LEDGER_NAME, LOCK_NAME, MountHandle, MountLedger
from tests.model.reporting import check_every_edge, write_report
from tests.support.transition_coverage import TransitionCoverage

CI = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=200,
    stateful_step_count=40,
)

SESSIONS = ("a", "b", "c")
PEER = 999  # a live process that is not simulated: plants locks and records
DEAD = 998  # a pid that is never alive
MAX_WAITS = 5  # backoff waits before `busy`
FIRST_PID = 2**22 + 2001
"""Simulated processes get pids from here: above Linux's largest pid_max, so the
process table never answers for them (a real process there would put its start
identity and start time into the records the reference does not predict)."""
NOW_S = 1_800_000_000.0
"""The ledgers' clock and the planted locks' mtimes, s: a fixed instant, so a
fresh unreadable lock stays inside the stale window however slowly a run goes."""


# ------------------------------------------------------------------ per edge


def test_every_edge_is_walked_and_lands_where_the_chart_says(
    request: pytest.FixtureRequest,
) -> None:
    check_every_edge(request, MountChart, 18)


# ------------------------------------------------------------------ reference model


@dataclass(frozen=True)
class RefLock:
    """A lock file planted by the test (never one of the ledgers' own)."""

    content: bytes
    age_s: float


@dataclass
class RefProcess:
    pid: int
    ledger: MountLedger
    handles: dict[str, MountHandle] = field(default_factory=dict)  # hosted or reserved
    states: dict[str, str] = field(default_factory=dict)
    published: dict[str, bool] = field(default_factory=dict)
    on_disk: frozenset[str] = frozenset()  # the set its last successful write listed

    def hosted(self) -> frozenset[str]:
        return frozenset(s for s, st_ in self.states.items() if st_ in HOSTED)


HOSTED = {"reserved", "attached", "parked"}
Record = tuple[int, tuple[str, ...]]


class LedgerAgainstReference(RuleBasedStateMachine):
    """Real MountLedgers of simulated processes on one directory, against a reference."""

    coverage: TransitionCoverage  # set per run by the test
    seen: set[str]  # kinds of outcomes over the whole run

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="mind-mount-model-")) / "state"
        self.alive: set[int] = {PEER}
        self.next_pid = FIRST_PID
        self.procs: dict[int, RefProcess] = {}
        # reference of the files
        self.records: list[tuple[int, int, tuple[str, ...]]] | None = None  # None: no file
        self.damaged: bytes | None = None
        self.lock: RefLock | None = None
        # the world: the planted lock's live holder drops it after this many waits
        self.countdown: int | None = None
        self.predicted: tuple[RefLock | None, int | None] | None = None
        self.expected_waits = 0
        self.fresh = 0
        self.waits_ms: list[float] = []
        for _ in range(3):
            self._spawn()

    def teardown(self) -> None:
        shutil.rmtree(self.root.parent, ignore_errors=True)

    # ------------------------------------------------------------ plumbing

    def _spawn(self) -> None:
        pid = self.next_pid
        self.next_pid += 1
        self.alive.add(pid)
        ledger = MountLedger(
            self.root,
            pid=pid,
            alive=lambda pid, _identity: pid in self.alive,
            sleep_s=self._sleep,
            clock_s=lambda: NOW_S,
            rng=random.Random(pid),
        )
        ledger.observe(self.coverage)
        self.procs[pid] = RefProcess(pid, ledger)

    def _sleep(self, seconds: float) -> None:
        """The ledgers' injected sleep: record the wait; maybe the peer drops its lock."""
        self.waits_ms.append(seconds * 1000)
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown == 0:
                (self.root / LOCK_NAME).unlink()
                self.countdown = None

    def _plant_lock(self, lock: RefLock, release_after: int | None) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_NAME
        path.write_bytes(lock.content)
        stamp = NOW_S - lock.age_s
        os.utime(path, (stamp, stamp))
        self.lock = lock
        self.countdown = release_after

    def _settle_lock(self) -> None:
        """After the real call: the lock is what the reference predicted."""
        if self.predicted is not None:
            self.lock, countdown = self.predicted
            assert self.countdown == countdown or self.lock is None
            self.countdown = countdown
            self.predicted = None

    def _write_file(self, data: bytes) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / LEDGER_NAME).write_bytes(data)

    def _encode(self, records: list[tuple[int, int, tuple[str, ...]]]) -> bytes:
        owners = [{"pid": p, "startedAt": t, "sessionIds": list(s)} for p, t, s in records]
        return msgspec.json.encode({"version": 1, "owners": owners})

    # ------------------------------------------------------------ reference steps

    def _ref_lock(self) -> tuple[str, int]:
        """Take the lock as the ledger does: ("ok" | "busy", waits taken).

        Works on copies; the prediction of the lock afterwards is applied by
        :meth:`_settle_lock` once the real call has run.
        """
        lock, countdown = self.lock, self.countdown
        waits = 0
        result = "ok"
        while lock is not None:
            token_pid = _token_pid(lock.content)
            held = lock.age_s <= 10.0 if token_pid is None else token_pid in self.alive
            if not held:  # reclaimed: a dead pid, or unreadable past the window
                lock, countdown = None, None
                break
            if waits == MAX_WAITS:
                result = "busy"
                break
            waits += 1
            if countdown is not None:
                countdown -= 1
                if countdown == 0:
                    lock, countdown = None, None
        self.predicted = (lock, countdown)
        return result, waits

    def _ref_holders(self, session: str, me: int) -> tuple[MountHolder, ...]:
        if self.damaged is not None or self.records is None:
            return ()
        found: dict[int, MountHolder] = {}
        for pid, started, sessions in self.records:
            if pid != me and pid not in found and session in sessions and pid in self.alive:
                found[pid] = MountHolder(pid, started)
        return tuple(found[p] for p in sorted(found))

    def _ref_write(self, proc: RefProcess, sessions: frozenset[str]) -> None:
        """docs/design/mounts.md §7.2: a session a live other record lists is left out."""
        old = self.records or []
        listed_by_others = {s for p, _t, ss in old if p != proc.pid and p in self.alive for s in ss}
        if sessions & listed_by_others:
            self.seen.add("withheld")
        sessions -= listed_by_others
        mine = (proc.pid, proc.ledger.started_at_ms, tuple(sorted(sessions)))
        out: list[tuple[int, int, tuple[str, ...]]] = []
        placed = False
        for record in old:
            if record[0] == proc.pid:
                if sessions and not placed:
                    out.append(mine)
                    placed = True
            elif record[0] in self.alive:
                out.append(record)
        if sessions and not placed:
            out.append(mine)
        self.records = out
        proc.on_disk = sessions
        proc.published = {s: s in sessions for s in proc.states}

    def _ref_commit(self, proc: RefProcess, sessions: frozenset[str]) -> str:
        """A non-claim publish: "ok" | "busy" | "unavailable" | "skipped"."""
        if not sessions and not proc.on_disk:
            return "skipped"
        got, waits = self._ref_lock()
        self.expected_waits += waits
        if got == "busy":
            return "busy"
        if self.damaged is not None:
            return "unavailable"
        self._ref_write(proc, sessions)
        return "ok"

    # ------------------------------------------------------------ rules: claims

    def _proc(self, data: Any) -> RefProcess:
        return self.procs[data.draw(st.sampled_from(sorted(self.procs)))]

    @rule(data=st.data(), session=st.sampled_from(SESSIONS), new_session=st.booleans())
    def claim(self, data: Any, session: str, new_session: bool) -> None:
        """Claim a shared session id, or a brand-new one (a fresh id nobody else uses:
        docs/design/mounts.md §6 relies on that, so the model keeps to it)."""
        proc = self._proc(data)
        if new_session:
            self.fresh += 1
            session = f"new{self.fresh}"
        self._claim(proc, session, new_session)

    @precondition(lambda self: len(self._hosted_elsewhere()) > 0)
    @rule(data=st.data())
    def claim_a_session_hosted_elsewhere(self, data: Any) -> None:
        """Another process claims a shared session one process hosts: ``occupied``
        while the host's record is in the ledger; granted once a person deleted
        the ledger, after which the host's writes must leave the session out
        (docs/design/mounts.md §7.2)."""
        pid, session = data.draw(st.sampled_from(self._hosted_elsewhere()))
        self._claim(self.procs[pid], session, False)

    def _hosted_elsewhere(self) -> list[tuple[int, str]]:
        """(claimer pid, session) pairs: a shared session hosted by a process other than it."""
        return sorted(
            (pid, s)
            for pid, proc in self.procs.items()
            for other in self.procs.values()
            if other is not proc
            for s in other.hosted()
            if s in SESSIONS and s not in proc.hosted()
        )

    def _claim(self, proc: RefProcess, session: str, new_session: bool) -> None:
        self.expected_waits = 0
        before_waits = len(self.waits_ms)
        existing = proc.handles.get(session)
        expected: tuple[Any, ...]
        if existing is not None and proc.states[session] in HOSTED:
            expected = ("same", proc.states[session])
        elif early := self._ref_holders(session, proc.pid):
            expected = ("occupied", early)
        else:
            got, waits = self._ref_lock()
            self.expected_waits = waits
            if got == "busy":
                expected = ("reserved-unpublished", "busy") if new_session else ("busy",)
            elif self.damaged is not None:
                expected = (
                    ("reserved-unpublished", "unavailable") if new_session else ("unavailable",)
                )
            else:
                # the lock-free read and the locked re-read see the same file here
                self._ref_write(proc, proc.hosted() | {session})
                expected = ("granted",)
        try:
            handle = proc.ledger.claim(session, new_session=new_session)
        except MountRefused as refused:
            self._settle_lock()
            actual: tuple[Any, ...] = (refused.kind,)
            if refused.kind == "occupied":
                actual = ("occupied", refused.holders)
            assert refused.session_id == session
        else:
            self._settle_lock()
            if existing is handle:
                actual = ("same", handle.state)
            elif handle.warning is not None:
                actual = ("reserved-unpublished", handle.warning.kind)
                assert (handle.state, handle.published) == ("reserved", False)
            else:
                actual = ("granted",)
                assert (handle.state, handle.published) == ("reserved", True)
            if existing is not handle:
                proc.handles[session] = handle
                proc.states[session] = "reserved"
                proc.published[session] = expected == ("granted",)
        assert actual == expected
        assert len(self.waits_ms) - before_waits == self.expected_waits
        self.seen.add(
            expected[0] if expected[0] != "reserved-unpublished" else "new:" + expected[1]
        )

    def _any_in(self, states: set[str]) -> bool:
        """Some process has a handle in one of ``states`` (rules on handles run only then,
        so runs spend their steps on chains such as claim, settle, park, attach)."""
        return any(st_ in states for p in self.procs.values() for st_ in p.states.values())

    def _hosted_handle(self, data: Any, states: set[str]) -> tuple[RefProcess, str] | None:
        """A handle in one of ``states``: the state drawn first, so the few settled
        handles are picked as often as the many reserved ones (every edge out of
        each state is taken many times, not by luck of the draw)."""
        present = sorted({st_ for p in self.procs.values() for st_ in p.states.values()} & states)
        if not present:
            return None
        state = data.draw(st.sampled_from(present))
        choices = [
            (pid, s) for pid, p in self.procs.items() for s, st_ in p.states.items() if st_ == state
        ]
        pid, session = data.draw(st.sampled_from(sorted(choices)))
        return self.procs[pid], session

    @precondition(lambda self: self._any_in(HOSTED))
    @rule(data=st.data(), new_session=st.booleans())
    def reenter(self, data: Any, new_session: bool) -> None:
        """Entering a session this process hosts: the same handle, no file touched."""
        picked = self._hosted_handle(data, HOSTED)
        if picked is None:
            return
        proc, session = picked
        before = _file_state(self.root / LEDGER_NAME)
        assert proc.ledger.claim(session, new_session=new_session) is proc.handles[session]
        assert proc.handles[session].state == proc.states[session]
        assert _file_state(self.root / LEDGER_NAME) == before
        self.seen.add("same")

    @precondition(lambda self: self._any_in({"reserved"}))
    @rule(data=st.data(), attached=st.sampled_from([True, False]))
    def settle(self, data: Any, attached: bool) -> None:
        picked = self._hosted_handle(data, {"reserved"})
        if picked is None:
            return
        proc, session = picked
        proc.handles[session].settle(attached=attached)
        proc.states[session] = "attached" if attached else "parked"

    @precondition(lambda self: self._any_in({"attached", "parked"}))
    @rule(data=st.data())
    def park_or_attach(self, data: Any) -> None:
        picked = self._hosted_handle(data, {"attached", "parked"})
        if picked is None:
            return
        proc, session = picked
        handle = proc.handles[session]
        if proc.states[session] == "attached":
            handle.park()
            proc.states[session] = "parked"
        else:
            handle.attach()
            proc.states[session] = "attached"

    @precondition(lambda self: self._any_in(HOSTED))
    @rule(data=st.data())
    def give_back(self, data: Any) -> None:
        """abandon a reserved claim or release a hosted session."""
        picked = self._hosted_handle(data, HOSTED)
        if picked is None:
            return
        proc, session = picked
        handle = proc.handles.pop(session)
        state = proc.states.pop(session)
        del proc.published[session]
        self.expected_waits = 0
        before_waits = len(self.waits_ms)
        outcome = self._ref_commit(proc, proc.hosted())
        ok = handle.abandon() if state == "reserved" else handle.release()
        self._settle_lock()
        assert ok == (outcome in ("ok", "skipped"))
        assert handle.state == ("abandoned" if state == "reserved" else "released")
        assert not handle.published
        assert len(self.waits_ms) - before_waits == self.expected_waits

    @precondition(lambda self: self._any_in(HOSTED))
    @rule(data=st.data())
    def misuse_is_refused(self, data: Any) -> None:
        picked = self._hosted_handle(data, HOSTED)
        if picked is None:
            return
        proc, session = picked
        handle = proc.handles[session]
        call = {"reserved": handle.park, "attached": handle.attach, "parked": handle.park}[
            proc.states[session]
        ]
        with pytest.raises(IllegalTransition):
            call()
        assert handle.state == proc.states[session]

    # ------------------------------------------------------------ rules: processes

    @rule(data=st.data())
    def republish(self, data: Any) -> None:
        self._republish(self._proc(data))

    def _republish(self, proc: RefProcess) -> None:
        self.expected_waits = 0
        before_waits = len(self.waits_ms)
        outcome = self._ref_commit(proc, proc.hosted())
        try:
            proc.ledger.republish()
        except MountRefused as refused:
            actual = refused.kind
        else:
            actual = "ok"
        self._settle_lock()
        assert actual == ("ok" if outcome == "skipped" else outcome)
        assert len(self.waits_ms) - before_waits == self.expected_waits

    @rule(data=st.data())
    def exit_normally(self, data: Any) -> None:
        """close() (the exit funnel, Ctrl+C included), then the process is gone."""
        proc = self._proc(data)
        self.expected_waits = 0
        outcome = self._ref_commit(proc, frozenset())
        assert proc.ledger.close() == (outcome in ("ok", "skipped"))
        self._settle_lock()
        for session, handle in proc.handles.items():
            assert handle.state == (
                "abandoned" if proc.states[session] == "reserved" else "released"
            )
        with pytest.raises(RuntimeError, match="closed"):
            proc.ledger.claim("a")
        self.alive.discard(proc.pid)
        del self.procs[proc.pid]
        self._spawn()

    @rule(data=st.data())
    def kill_9(self, data: Any) -> None:
        """The process dies with no cleanup: its record stays, ignored from now on."""
        proc = self._proc(data)
        self.alive.discard(proc.pid)
        del self.procs[proc.pid]
        self._spawn()

    # ------------------------------------------------------------ rules: planted files

    @precondition(lambda self: self.lock is None)
    @rule(
        kind=st.sampled_from(["live", "dead", "unreadable-fresh", "unreadable-old", "live-old"]),
        release_after=st.sampled_from([1, 2, 5, None]),
    )
    def plant_lock(self, kind: str, release_after: int | None) -> None:
        content = {
            "live": f"{PEER}-abc123".encode(),
            "live-old": f"{PEER}-abc124".encode(),
            "dead": f"{DEAD}-abc125".encode(),
            "unreadable-fresh": b"",
            "unreadable-old": b"\x00garbage",
        }[kind]
        age = 3600.0 if kind.endswith("old") else 0.0
        self._plant_lock(RefLock(content, age), release_after)

    @precondition(lambda self: self.lock is not None)
    @rule()
    def peer_drops_lock(self) -> None:
        (self.root / LOCK_NAME).unlink()
        self.lock = None
        self.countdown = None

    @precondition(lambda self: self.damaged is None)
    @rule(kind=st.sampled_from(["not json", "version 2", "wrong shape", "not an object", "torn"]))
    def damage_ledger(self, kind: str) -> None:
        current = self._encode(self.records or [])
        data = {
            "not json": b"{nope",
            "version 2": b'{"version": 2, "owners": []}',
            "wrong shape": b'{"version": 1, "owners": [{"pid": "12", "startedAt": 0}]}',
            "not an object": b"[1, 2]",
            "torn": current[: len(current) // 2],
        }[kind]
        self._write_file(data)
        self.damaged = data

    @precondition(lambda self: self.damaged is not None)
    @rule()
    def person_deletes_damaged_ledger(self) -> None:
        self._delete_ledger()

    @precondition(lambda self: self.damaged is None and len(self._hosted_elsewhere()) > 0)
    @rule(data=st.data())
    def record_lost_then_session_claimed_elsewhere(self, data: Any) -> None:
        """A person deletes the ledger while sessions are hosted (every record is
        lost, the processes go on), another process claims one of them (granted:
        nothing lists it) and the host republishes: the host's record must leave
        the session out (docs/design/mounts.md §7.2; "a listed twice" before)."""
        pid, session = data.draw(st.sampled_from(self._hosted_elsewhere()))
        host = min(
            (p for p in self.procs.values() if p.pid != pid and session in p.hosted()),
            key=lambda p: p.pid,
        )
        self._delete_ledger()
        self._claim(self.procs[pid], session, False)
        self._republish(host)

    def _delete_ledger(self) -> None:
        (self.root / LEDGER_NAME).unlink(missing_ok=True)
        self.damaged = None
        self.records = None  # each process still believes its last write (on_disk)

    @precondition(lambda self: self.damaged is None)
    @rule(pid=st.sampled_from([PEER, DEAD]), sessions=st.sets(st.sampled_from(SESSIONS)))
    def foreign_record(self, pid: int, sessions: set[str]) -> None:
        """Another process (live or dead) published a record (appended by hand).

        Only sessions no other live record lists: a live peer went through the
        same protocol, so it could not have claimed a held session.
        """
        taken = {s for p, _t, ss in self.records or [] if p != pid and p in self.alive for s in ss}
        sessions -= taken
        records = [r for r in self.records or [] if r[0] != pid]
        records.append((pid, 1_700_000_000_000, tuple(sorted(sessions))))
        self._write_file(self._encode(records))
        self.records = records

    # ------------------------------------------------------------ display reads

    @rule(data=st.data(), session=st.sampled_from(SESSIONS))
    def display(self, data: Any, session: str) -> None:
        proc = self._proc(data)
        path = self.root / LEDGER_NAME
        before = _file_state(path)
        holders = proc.ledger.holders(session)
        snapshot = proc.ledger.snapshot()
        assert holders == list(self._ref_holders(session, proc.pid))
        live = [
            (pid, sessions)
            for pid, _t, sessions in (self.records or [])
            if self.damaged is None and pid in self.alive
        ]
        assert [(r.pid, r.session_ids) for r in snapshot] == live
        assert [r.is_self for r in snapshot] == [pid == proc.pid for pid, _ in live]
        assert _file_state(path) == before  # no write on the read path

    # ------------------------------------------------------------ invariants

    @invariant()
    def files_match_the_reference(self) -> None:
        path = self.root / LEDGER_NAME
        if self.damaged is not None:
            assert path.read_bytes() == self.damaged
        elif self.records is None:
            assert not path.exists()
        else:
            decoded = msgspec.json.decode(path.read_bytes())
            assert decoded == {
                "version": 1,
                "owners": [
                    {"pid": p, "startedAt": t, "sessionIds": list(s)} for p, t, s in self.records
                ],
            }
            assert (path.stat().st_mode & 0o777) in (0o600, 0o644)  # 0644: planted by hand
        lock = self.root / LOCK_NAME
        if self.lock is None:
            assert not lock.exists()
        else:
            assert lock.read_bytes() == self.lock.content
        if self.root.exists():
            debris = [n for n in os.listdir(self.root) if n.endswith((".tmp", ".reclaim"))]
            assert debris == []

    @invariant()
    def published_sets_and_states_match(self) -> None:
        for proc in self.procs.values():
            assert proc.ledger.hosted() == proc.hosted()
            for session, handle in proc.handles.items():
                assert handle.state == proc.states[session]
                assert handle.published == proc.published[session]
                assert proc.ledger.handle(session) is handle

    @invariant()
    def no_session_has_two_live_holders(self) -> None:
        if self.damaged is not None or self.records is None:
            return
        listed: dict[str, int] = {}
        for pid, _t, sessions in self.records:
            if pid not in self.alive:
                continue
            for session in sessions:
                assert listed.setdefault(session, pid) == pid, f"{session} listed twice"

    @invariant()
    def waits_are_bounded(self) -> None:
        assert all(25 <= w <= 400 for w in self.waits_ms)


def _token_pid(content: bytes) -> int | None:
    text = content.decode("ascii", "replace")
    head, sep, nonce = text.partition("-")
    return int(head) if sep and head.isdigit() and nonce.isalnum() else None


def _file_state(path: Path) -> tuple[bytes, int, int] | None:
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    return path.read_bytes(), info.st_ino, info.st_mtime_ns


def test_a_tour_of_every_outcome_through_real_ledgers(tmp_path: Path) -> None:
    """Each outcome of a claim once, through real ledgers, deterministically.

    Not counted in any coverage report: a hand-written path proves only
    itself (the per-edge walk and the run against the reference do)."""
    root = tmp_path / "state"
    alive = {1, 2, PEER}
    waits: list[float] = []
    a = MountLedger(root, pid=1, alive=lambda pid, _identity: pid in alive, sleep_s=waits.append)
    b = MountLedger(root, pid=2, alive=lambda pid, _identity: pid in alive, sleep_s=waits.append)
    h = a.claim("s")  # claim, grant
    assert a.claim("s") is h  # reenter (reserved)
    h.settle(attached=True)
    assert a.claim("s") is h  # reenter (attached)
    h.park()
    assert a.claim("s") is h  # reenter (parked)
    h.attach()
    with pytest.raises(MountRefused, match="occupied by pid 1"):
        b.claim("s")  # conflict
    (root / LOCK_NAME).write_bytes(f"{PEER}-abc".encode())
    with pytest.raises(MountRefused) as busy:
        b.claim("t")  # contend, retry (x5), contend -> busy
    assert busy.value.kind == "busy"
    assert b.claim("new-1", new_session=True).warning is not None  # contend -> reserved
    (root / LOCK_NAME).unlink()
    (root / LEDGER_NAME).write_bytes(b"{")
    with pytest.raises(MountRefused) as unavailable:
        b.claim("t")  # fail -> unavailable
    assert unavailable.value.kind == "unavailable"
    g = b.claim("new-2", new_session=True)  # fail -> reserved
    (root / LEDGER_NAME).unlink()
    g.abandon()  # abandon
    b.claim("t").settle(attached=False)  # settle parked
    assert h.release()  # release
    assert a.close() and b.close()
    assert len(waits) == 10


def test_ledgers_against_reference_with_transition_coverage(
    request: pytest.FixtureRequest,
) -> None:
    coverage = TransitionCoverage(MountChart)
    seen: set[str] = set()
    LedgerAgainstReference.coverage = coverage
    LedgerAgainstReference.seen = seen
    run_state_machine_as_test(LedgerAgainstReference, settings=CI)
    write_report(request, "MountChart-ledger", coverage)
    assert coverage.missed == (), coverage.report()
    assert seen >= {
        "granted",
        "same",
        "occupied",
        "busy",
        "unavailable",
        "new:busy",
        "new:unavailable",
        "withheld",
    }
