"""The session index ``index.db`` with real journals and real files.

Journals are written with the real :class:`~mind.shell.journal.Journal`; the
only thing injected is the byte reader of a listing (a counting wrapper of
:func:`mind.shell.index.read_range`), to prove listing never reads whole
journals.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import apsw
import msgspec
import pytest

from mind.errors import JournalCorruptError, StateDirError
from mind.generated import journal as jr
from mind.shell import index
from mind.shell.index import IndexEntry, SessionIndex, format_age
from mind.shell.index.writer import WriteQueue
from mind.shell.journal import Journal, read_records
from mind.shell.store import SessionSummary, Store, listing_lines
from tests.support import records as rec

ROOT = Path(__file__).resolve().parents[2]


class CountingReader:
    """A :data:`~mind.shell.index.ReadRange` that counts the bytes it returns per file."""

    def __init__(self) -> None:
        self.bytes_by_path: dict[Path, int] = {}

    def __call__(self, path: Path, offset: int, max_bytes: int) -> bytes:
        data = index.read_range(path, offset, max_bytes)
        self.bytes_by_path[path] = self.bytes_by_path.get(path, 0) + len(data)
        return data

    @property
    def total(self) -> int:
        return sum(self.bytes_by_path.values())


def _clock(start_ms: int) -> Iterator[int]:
    return itertools.count(start_ms, 10)


def write_session(
    store: Store,
    sid: str,
    *,
    cwd: str,
    turns: Sequence[tuple[str, str | None]],
    start_ms: int,
    padding: int = 0,
) -> Path:
    """Write a real journal: ``turns`` is ``[(prompt, status or None=running)]``.

    ``padding`` adds that many characters of model text per turn (a big journal).
    """
    path = store.journal_path(sid)
    clock = _clock(start_ms)
    with Journal.open(path, create=True, clock_ms=lambda: next(clock)) as j:
        j.append(
            jr.SessionStarted(seq=0, recorded_at_ms=0, session_id=sid, cwd=cwd, mind_version="t")
        )
        append_turns(j, turns, padding=padding)
    return path


def append_turns(j: Journal, turns: Sequence[tuple[str, str | None]], *, padding: int = 0) -> None:
    z: dict[str, Any] = {"seq": 0, "recorded_at_ms": 0}
    for n, (prompt, status) in enumerate(turns, start=j.next_seq):
        tid = f"turn_{n}"
        j.append(
            jr.TurnStarted(**z, turn_id=tid, provider="p", model="m", approval=jr.Approval.never)
        )
        j.append(
            jr.UserMessage(**z, turn_id=tid, message_id=f"m{n}", text=prompt, kind=jr.Kind.prompt)
        )
        j.append(rec.model_round(tid, "x" * padding, provider="p"))
        if status is not None:
            j.append(
                jr.TurnCompleted(
                    **z,
                    turn_id=tid,
                    status=jr.TurnStatus(status),
                    usage=jr.Usage(input_tokens=1, output_tokens=1),
                    acknowledged=[f"m{n}"] if status == "completed" else [],
                )
            )


def expected_entry(path: Path) -> IndexEntry:
    """What the index must say about a journal, derived with the strict reader."""
    records, _ = read_records(path)
    started = records[0]
    assert isinstance(started, jr.SessionStarted)
    prompts = [r for r in records if isinstance(r, jr.UserMessage) and r.kind == jr.Kind.prompt]
    status = ""
    last_ms = 0
    for r in records:
        if isinstance(r, jr.TurnStarted):
            status = "running"
        elif isinstance(r, jr.TurnCompleted):
            status = r.status.value
        if not isinstance(r, jr.ModelRound | jr.ToolResult):
            last_ms = r.recorded_at_ms
    return IndexEntry(
        session_id=started.session_id,
        cwd=started.cwd,
        title=" ".join(prompts[0].text.split())[:80] if prompts else "",
        created_at_ms=started.recorded_at_ms,
        updated_at_ms=last_ms,
        last_status=status,
        journal_size_bytes=path.stat().st_size,
        journal_mtime_ns=path.stat().st_mtime_ns,
        journal_tail_crc=zlib.crc32(path.read_bytes()[-index.FINGERPRINT_BYTES :]),
    )


def summary_of(entry: IndexEntry, *, indexed: bool = True) -> SessionSummary:
    return SessionSummary(
        session_id=entry.session_id,
        cwd=entry.cwd,
        title=entry.title,
        updated_at_ms=entry.updated_at_ms,
        last_status=entry.last_status,
        created_at_ms=entry.created_at_ms,
        indexed=indexed,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "state")
    yield s
    s.close()


def populate(store: Store) -> dict[str, Path]:
    return {
        "a1": write_session(
            store,
            "a1",
            cwd="/work/a",
            turns=[("fix   the\nbug " + "long " * 30, "completed"), ("again", "failed")],
            start_ms=1_000,
        ),
        "a2": write_session(store, "a2", cwd="/work/a", turns=[("run", None)], start_ms=5_000),
        "b1": write_session(store, "b1", cwd="/work/b", turns=[], start_ms=3_000),
        "b2": write_session(
            store, "b2", cwd="/work/b", turns=[("stop", "interrupted")], start_ms=4_000
        ),
    }


# --- rebuild ---------------------------------------------------------------


def test_rebuild_matches_the_journals(store: Store) -> None:
    paths = populate(store)
    assert store.rebuild_index() == 4
    expected = {sid: expected_entry(p) for sid, p in paths.items()}
    assert store.index.entries() == expected
    assert expected["a1"].title.startswith("fix the bug long")
    assert len(expected["a1"].title) == 80
    assert [e.last_status for e in expected.values()] == ["failed", "running", "", "interrupted"]
    by_recent = sorted(expected.values(), key=lambda e: e.updated_at_ms, reverse=True)
    assert store.summaries() == [summary_of(e) for e in by_recent]


def test_rebuild_drops_rows_of_removed_sessions_and_keeps_damaged_journals(store: Store) -> None:
    paths = populate(store)
    store.index.note("gone", cwd="/nowhere", status="completed")
    # A journal damaged in the middle still gets a row, saying where and why.
    raw = bytearray(paths["a1"].read_bytes())
    second_line = raw.index(b"\n") + 1
    raw[second_line : second_line + 20] = b"#" * 20
    paths["a1"].write_bytes(bytes(raw))
    with pytest.raises(JournalCorruptError) as err:
        read_records(paths["a1"])
    assert store.rebuild_index() == 4
    entries = store.index.entries()
    assert sorted(entries) == ["a1", "a2", "b1", "b2"]
    a1 = entries["a1"]
    assert (a1.cwd, a1.damage_line, a1.damage_reason) == ("/work/a", 2, err.value.detail)
    (row,) = [s for s in store.summaries() if s.session_id == "a1"]
    assert row.status == f"damaged ({paths['a1']}:2, {err.value.detail})"


# --- sessions without a row --------------------------------------------------


def test_sessions_without_index_entries_are_listed_grouped_by_cwd(store: Store) -> None:
    paths = populate(store)
    store.rebuild_index()
    # Two more sessions written by "an older version": no note, no row.
    write_session(store, "c1", cwd="/work/b", turns=[("old", "completed")], start_ms=9_000)
    write_session(store, "c2", cwd="/work/0", turns=[], start_ms=9_500)
    os.utime(store.journal_path("c1"), ns=(9_000 * 10**6, 9_000 * 10**6))
    os.utime(store.journal_path("c2"), ns=(9_500 * 10**6, 9_500 * 10**6))
    for sid, mtime_ms in (("a1", 7_000), ("a2", 7_100), ("b1", 8_000), ("b2", 8_100)):
        os.utime(paths[sid], ns=(mtime_ms * 10**6, mtime_ms * 10**6))
    indexed = sorted(
        (expected_entry(p) for p in paths.values()), key=lambda e: e.updated_at_ms, reverse=True
    )
    unindexed = [
        SessionSummary(
            session_id="c2",
            cwd="/work/0",
            title="",
            updated_at_ms=9_500,
            last_status="",
            created_at_ms=9_500,
            indexed=False,
        ),
        SessionSummary(
            session_id="c1",
            cwd="/work/b",
            title="",
            updated_at_ms=9_000,
            last_status="",
            created_at_ms=9_000,
            indexed=False,
        ),
    ]
    assert store.summaries() == [summary_of(e) for e in indexed] + unindexed

    # The index deleted: it is created again, and every session is still listed.
    store.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store.index.path}{suffix}").unlink(missing_ok=True)
    again = Store(store.root)
    try:
        rows = again.summaries()
        assert [(r.session_id, r.cwd, r.indexed) for r in rows] == [
            ("c2", "/work/0", False),
            ("a2", "/work/a", False),
            ("a1", "/work/a", False),
            ("c1", "/work/b", False),
            ("b2", "/work/b", False),
            ("b1", "/work/b", False),
        ]
        assert again.index.path.is_file()
    finally:
        again.close()


def test_listing_text_groups_unindexed_sessions_by_cwd() -> None:
    now = 10 * 86_400_000
    rows = [
        SessionSummary(
            session_id="s1",
            cwd="/p",
            title="fix it",
            updated_at_ms=now - 3 * 60_000,
            last_status="completed",
        ),
        SessionSummary(
            session_id="s2", cwd="/p", title="", updated_at_ms=now - 1_000, last_status=""
        ),
        SessionSummary(
            session_id="u1",
            cwd="/a",
            title="",
            updated_at_ms=now - 2 * 3_600_000,
            last_status="",
            indexed=False,
        ),
        SessionSummary(
            session_id="u2",
            cwd="/b",
            title="",
            updated_at_ms=now - 2 * 86_400_000,
            last_status="",
            indexed=False,
        ),
        SessionSummary(
            session_id="u3", cwd="/b", title="", updated_at_ms=0, last_status="", indexed=False
        ),
    ]
    assert listing_lines(rows, now) == [
        "s1  completed    3 min ago     /p  fix it",
        "s2  new (nothing sent)  just now      /p",  # indexed, no turn yet
        "",
        "not in the index (3; `mind sessions --rebuild-index` adds them), by cwd:",
        "  /a",
        "    u1  2 h ago",
        "  /b",
        "    u2  2 days ago",
        "    u3  unknown",
    ]
    assert listing_lines([], now) == ["no sessions yet"]


@pytest.mark.parametrize(
    ("ago_ms", "text"),
    [
        (0, "just now"),
        (59_999, "just now"),
        (60_000, "1 min ago"),
        (3 * 60_000 + 59_000, "3 min ago"),
        (3_600_000, "1 h ago"),
        (86_400_000, "1 day ago"),
        (29 * 86_400_000, "29 days ago"),
        (-5_000, "just now"),  # a clock step back is not "in the future"
    ],
)
def test_format_age(ago_ms: int, text: str) -> None:
    now = 1_800_000_000_000
    assert format_age(now - ago_ms, now) == text


def test_format_age_old_and_unknown() -> None:
    now = 1_800_000_000_000
    assert format_age(0, now) == "unknown"
    assert len(format_age(now - 400 * 86_400_000, now)) == len("2026-01-01")


# --- damaged index ------------------------------------------------------------


def test_a_garbage_index_is_rebuilt_from_the_journals(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = Store(tmp_path / "state")
    paths = populate(first)
    first.close()
    db = tmp_path / "state" / "index.db"
    db.write_bytes(b"this is not a database " * 500)
    second = Store(tmp_path / "state")
    try:
        expected = {sid: expected_entry(p) for sid, p in paths.items()}
        with caplog.at_level(logging.WARNING, logger="mind.index"):
            assert second.index.entries() == expected  # opened (and rebuilt) on first use
        assert "is damaged" in caplog.text
        assert all(s.indexed for s in second.summaries())
    finally:
        second.close()


def test_an_index_damaged_while_open_is_rebuilt_on_the_next_listing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    paths = populate(store)
    store.rebuild_index()
    store.index.close()
    # Reopen a connection on the file, then damage the whole file under it
    # (another process writing a second index page, say).
    store.index = SessionIndex.open(store)
    size = store.index.path.stat().st_size
    store.index.path.write_bytes(b"garbage " * (size // 8 + 1))
    with caplog.at_level(logging.WARNING, logger="mind.index"):
        rows = store.summaries()
    assert "is damaged" in caplog.text
    expected = sorted(
        (expected_entry(p) for p in paths.values()), key=lambda e: e.updated_at_ms, reverse=True
    )
    assert rows == [summary_of(e) for e in expected]


def test_an_index_of_another_schema_version_is_rebuilt(tmp_path: Path) -> None:
    first = Store(tmp_path / "state")
    paths = populate(first)
    first.rebuild_index()
    first.close()
    con = apsw.Connection(str(tmp_path / "state" / "index.db"))
    con.execute("DROP TABLE sessions; CREATE TABLE sessions(x); PRAGMA user_version = 99")
    con.close()
    second = Store(tmp_path / "state")
    try:
        assert second.index.entries() == {sid: expected_entry(p) for sid, p in paths.items()}
    finally:
        second.close()


def test_an_unusable_index_path_lists_from_the_session_directories(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The index is derived: a directory where index.db should be fails nothing;
    listing reads each journal's head and tail instead, and says so once."""
    (tmp_path / "state" / "index.db").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="mind.index"):
        store = Store(tmp_path / "state")
        try:
            paths = populate(store)
            assert "is a directory" in store.index.unavailable
            assert store.index.note("a1", status="running") is False
            rows = store.summaries()
            assert store.index.entries() == {}
            with pytest.raises(StateDirError, match=r"index\.db"):
                store.rebuild_index()
        finally:
            store.close()
    want = [expected_entry(p) for p in paths.values()]
    assert sorted((s.session_id, s.title, s.last_status, s.cwd) for s in rows) == sorted(
        (e.session_id, e.title, e.last_status, e.cwd) for e in want
    )
    assert [s.updated_at_ms for s in rows] == sorted((s.updated_at_ms for s in rows), reverse=True)
    warned = [r for r in caplog.records if r.name == "mind.index"]
    assert len(warned) == 1 and "index.db" in warned[0].getMessage()


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_a_read_only_state_dir_is_a_state_dir_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "sessions").mkdir(parents=True)
    state.chmod(0o500)
    try:
        with pytest.raises(StateDirError):
            Store(state)
    finally:
        state.chmod(0o700)


# --- listing never reads whole journals --------------------------------------


def test_an_up_to_date_index_lists_without_reading_journals(tmp_path: Path) -> None:
    reader = CountingReader()
    store = Store(tmp_path / "state", read_range=reader)
    try:
        paths = populate(store)
        store.rebuild_index()
        before = store.summaries()
        assert store.summaries() == before
        assert reader.total == 0
        # Damage a middle line in place (same size): the journal's mtime moved,
        # so it is checked again and listed damaged, naming path and line.
        raw = bytearray(paths["a1"].read_bytes())
        middle = len(raw) // 2
        raw[middle : middle + 8] = b"\x00" * 8
        paths["a1"].write_bytes(bytes(raw))
        with pytest.raises(JournalCorruptError) as err:
            read_records(paths["a1"])
        rows = {s.session_id: s for s in store.summaries()}
        assert rows["a1"].damage == f"{paths['a1']}:{err.value.line}, {err.value.detail}"
        assert err.value.line == raw[:middle].count(b"\n") + 1
        assert {k: v for k, v in rows.items() if k != "a1"} == {
            s.session_id: s for s in before if s.session_id != "a1"
        }
        assert store.index.entries()["a1"].damage_line == err.value.line  # saved
    finally:
        store.close()


def test_a_grown_journal_is_caught_up_from_its_new_bytes_only(tmp_path: Path) -> None:
    reader = CountingReader()
    store = Store(tmp_path / "state", read_range=reader)
    try:
        path = write_session(
            store, "s", cwd="/w", turns=[("first", "completed")] * 20, start_ms=1, padding=5_000
        )
        store.rebuild_index()
        old_size = path.stat().st_size
        clock = _clock(50_000)
        with Journal.open(path, clock_ms=lambda: next(clock)) as j:
            append_turns(j, [("second", "failed"), ("third", None)])
        # The new bytes, and the fingerprinted end of the accounted prefix.
        grown = path.stat().st_size - old_size + min(old_size, index.FINGERPRINT_BYTES)
        [row] = store.summaries()
        assert reader.bytes_by_path == {path: grown}
        assert row == summary_of(expected_entry(path))
        assert row.last_status == "running" and row.title == "first"
        # Saved back: the next listing reads nothing.
        assert store.index.entries()["s"] == expected_entry(path)
        store.summaries()
        assert reader.bytes_by_path == {path: grown}
    finally:
        store.close()


def test_catch_up_reads_at_most_its_window(tmp_path: Path) -> None:
    reader = CountingReader()
    store = Store(tmp_path / "state", read_range=reader)
    try:
        path = write_session(store, "s", cwd="/w", turns=[("first", "completed")], start_ms=1)
        store.rebuild_index()
        indexed = min(path.stat().st_size, index.FINGERPRINT_BYTES)
        with Journal.open(path) as j:
            append_turns(j, [("more", "completed")] * 40 + [("last", "failed")], padding=20_000)
        assert path.stat().st_size > 3 * index.CATCH_UP_MAX_BYTES
        [row] = store.summaries()
        assert reader.total == index.CATCH_UP_MAX_BYTES + indexed
        assert (row.last_status, row.title) == ("failed", "first")
    finally:
        store.close()


def test_an_unindexed_session_costs_one_head_read(tmp_path: Path) -> None:
    reader = CountingReader()
    store = Store(tmp_path / "state", read_range=reader)
    try:
        path = write_session(
            store, "big", cwd="/w", turns=[("p", "completed")] * 50, start_ms=7, padding=10_000
        )
        [row] = store.summaries()
        assert (row.session_id, row.cwd, row.created_at_ms, row.indexed) == ("big", "/w", 7, False)
        assert reader.total <= 4096 < path.stat().st_size // 100
    finally:
        store.close()


# --- note ------------------------------------------------------------------------


def test_note_merges_fields_by_its_rules(store: Store) -> None:
    write_session(store, "s", cwd="/from/journal", turns=[], start_ms=100)
    idx = store.index
    assert idx.note("s", updated_at_ms=1_000)  # cwd taken from the journal head
    assert idx.note("s", title="  first\n prompt ", status="running", updated_at_ms=2_000)
    assert idx.note("s", title="second prompt", status="completed", updated_at_ms=1_500)
    assert idx.note("s", cwd="/other", updated_at_ms=3_000)
    assert idx.note("s", title="x" * 200, status="running")  # default: now
    entry = idx.entries()["s"]
    assert entry.cwd == "/from/journal"  # the first cwd stays
    assert entry.title == "first prompt"  # the first prompt stays
    assert entry.last_status == "running"
    assert entry.created_at_ms == 1_000
    assert entry.updated_at_ms > 3_000
    assert entry.journal_size_bytes == store.journal_path("s").stat().st_size
    assert idx.note("new", cwd="/n", updated_at_ms=5)
    assert idx.entries()["new"] == IndexEntry(
        session_id="new", cwd="/n", created_at_ms=5, updated_at_ms=5
    )


def test_note_never_raises_for_index_trouble(store: Store) -> None:
    assert store.index.note("../escape", status="running") is False  # not a session id
    store.index.close()
    assert store.index.note("s", status="running") is False
    assert store.index.store_caught_up([IndexEntry(session_id="s")]) is False


# --- the file ----------------------------------------------------------------------


def test_the_index_is_a_private_wal_database(store: Store) -> None:
    store.index.note("s", cwd="/w")
    assert store.index.flush()  # the writer thread opened the file for the note
    assert (store.index.path.stat().st_mode & 0o777) == 0o600
    con = apsw.Connection(str(store.index.path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        assert con.pragma("journal_mode") == "wal"
        assert con.pragma("user_version") == index.SCHEMA_VERSION
    finally:
        con.close()


_NOTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from mind.shell.store import Store

    root, role, n = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\\n"
    store = Store(root)
    ok = 0
    for i in range(n):
        sid = f"s{i:04d}"
        if role == "creator":
            ok += store.index.note(sid, cwd=f"/w/{i}", title=f"prompt {i}", updated_at_ms=i)
            ok += store.index.note(f"c{i:04d}", cwd="/c", updated_at_ms=i)
        else:
            ok += store.index.note(sid, status="completed", updated_at_ms=10_000 + i)
            ok += store.index.note(f"f{i:04d}", status="failed", updated_at_ms=i)
    store.close()
    print(ok, flush=True)
    """
)


def test_concurrent_notes_from_two_processes_lose_no_update(tmp_path: Path) -> None:
    n = 300
    root = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _NOTER, str(root), role, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for role in ("creator", "finisher")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    for p in procs:  # both start opening and writing at once
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [f"{2 * n}\n", f"{2 * n}\n"]
    store = Store(root)
    try:
        entries = store.index.entries()
    finally:
        store.close()
    expected = {
        **{
            f"s{i:04d}": IndexEntry(
                session_id=f"s{i:04d}",
                cwd=f"/w/{i}",
                title=f"prompt {i}",
                created_at_ms=entries[f"s{i:04d}"].created_at_ms,  # whichever came first
                updated_at_ms=10_000 + i,
                last_status="completed",
            )
            for i in range(n)
        },
        **{
            f"c{i:04d}": IndexEntry(
                session_id=f"c{i:04d}", cwd="/c", created_at_ms=i, updated_at_ms=i
            )
            for i in range(n)
        },
        **{
            f"f{i:04d}": IndexEntry(
                session_id=f"f{i:04d}", last_status="failed", created_at_ms=i, updated_at_ms=i
            )
            for i in range(n)
        },
    }
    assert entries == expected
    assert {entries[f"s{i:04d}"].created_at_ms for i in range(n)} <= {
        v for i in range(n) for v in (i, 10_000 + i)
    }


# --- the command -----------------------------------------------------------------------


def test_mind_sessions_rebuild_index_says_how_many_and_lists(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(state)
    try:
        populate(store)
    finally:
        store.close()
    env = {k: v for k, v in os.environ.items() if k not in ("MIND_HOME", "MIND_STATE_HOME")}
    env |= {"MIND_HOME": str(tmp_path / "home"), "MIND_STATE_HOME": str(state)}
    env["PYTHONPATH"] = str(ROOT)

    def mind(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mind.shell.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    before = mind("sessions")
    assert before.returncode == 0, before.stderr
    assert before.stdout.splitlines()[0].startswith("not in the index (4;")
    r = mind("sessions", "--rebuild-index")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "mind: indexed 4 session(s) from their journals\n"
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["a2", "b2", "b1", "a1"]
    assert lines[0].split()[1:2] == ["interrupted"]  # no live process holds it
    assert "(resume to recover)" in lines[0]
    assert "fix the bug long" in lines[3] and "failed" in lines[3]


_EXCLUSIVE_HOLDER = textwrap.dedent(
    """
    import sys
    import apsw

    con = apsw.Connection(sys.argv[1])
    con.pragma("locking_mode", "exclusive")  # readers are locked out too
    con.execute("BEGIN EXCLUSIVE")
    con.execute("UPDATE sessions SET title = title")
    print("held", flush=True)
    sys.stdin.readline()
    """
)


def test_an_exclusively_locked_index_lists_from_the_directories_within_a_second(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    store = Store(state)
    try:
        paths = populate(store)
        store.rebuild_index()
    finally:
        store.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", _EXCLUSIVE_HOLDER, str(state / "index.db")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        started = time.monotonic()
        store = Store(state)
        try:
            assert "locked" in store.index.unavailable
            rows = store.summaries()
        finally:
            store.close()
        assert time.monotonic() - started < 3  # the open waits QUICK_BUSY_TIMEOUT_MS once
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()
    assert sorted((s.session_id, s.last_status) for s in rows) == sorted(
        (e.session_id, e.last_status) for e in map(expected_entry, paths.values())
    )


def test_damage_is_found_in_an_unindexed_head_and_in_appended_bytes(store: Store) -> None:
    """Without a row only the first line is read: damage there is listed at
    line 1. Appended bytes with a damaged line before their end make the
    listing check the whole journal and say where."""
    paths = populate(store)
    store.rebuild_index()
    # An unindexed session whose first line fails its check.
    write_session(store, "u1", cwd="/work/u", turns=[], start_ms=9_000)
    head = bytearray(store.journal_path("u1").read_bytes())
    head[5] ^= 0x01
    store.journal_path("u1").write_bytes(bytes(head))
    # An indexed session that grew by a damaged line and a sound one after it.
    with Journal.open(paths["b1"]) as j:
        append_turns(j, [("more", "completed")])
    data = bytearray(paths["b1"].read_bytes())
    grown_from = store.index.entries()["b1"].journal_size_bytes
    data[grown_from + 10] ^= 0x01  # inside the first appended line
    paths["b1"].write_bytes(bytes(data))
    with pytest.raises(JournalCorruptError) as err:
        read_records(paths["b1"])
    rows = {s.session_id: s for s in store.summaries()}
    assert rows["u1"].status.startswith(f"damaged ({store.journal_path('u1')}:1, ")
    assert rows["b1"].damage == f"{paths['b1']}:{err.value.line}, {err.value.detail}"
    assert rows["a1"].damage == rows["b2"].damage == ""


@pytest.mark.parametrize("damage", ["duplicated middle line", "crlf line endings"])
def test_a_journal_damaged_before_its_indexed_offset_is_checked_in_full(
    store: Store, damage: str
) -> None:
    """The bytes before a row's offset are fingerprinted: damage there that
    also made the journal grow (so the listing would only read new bytes) is
    still found, listed with path and line, and saved."""
    path = write_session(store, "s", cwd="/w", turns=[("p", "completed")] * 3, start_ms=1)
    store.rebuild_index()
    lines = path.read_bytes().splitlines(keepends=True)
    if damage == "duplicated middle line":
        lines.insert(len(lines) // 2, lines[len(lines) // 2])
        new = b"".join(lines)
    else:
        new = b"".join(line.replace(b"\n", b"\r\n") for line in lines)
    path.write_bytes(new)
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    [row] = store.summaries()
    assert row.damage == f"{path}:{err.value.line}, {err.value.detail}"
    assert store.index.entries()["s"].damage_line == err.value.line  # saved


# --- non-blocking notes ------------------------------------------------------------


def test_a_note_returns_at_once_while_another_connection_holds_the_write_lock(
    store: Store,
) -> None:
    """A note is called on the event loop (turn start and end): it must not
    wait for SQLite's write lock; the row lands once the lock is free."""
    write_session(store, "s", cwd="/w", turns=[], start_ms=100)
    assert store.index.note("s", updated_at_ms=1_000)
    store.index.flush()
    holder = apsw.Connection(str(store.index.path))
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held by another connection
        started = time.perf_counter()
        assert store.index.note("s", title="hello", status="running", updated_at_ms=2_000)
        elapsed_s = time.perf_counter() - started
        assert elapsed_s <= 0.020, f"note() blocked {elapsed_s * 1000:.1f} ms"
        started = time.perf_counter()
        assert not store.index.flush(timeout_s=0.05)  # still waiting for the lock
        # The wait holds no GIL: this thread ran on (apsw's ``with con:`` stalled it 1 s).
        assert time.perf_counter() - started < 0.5
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.index.flush()
    entry = store.index.entries()["s"]
    assert (entry.title, entry.last_status, entry.updated_at_ms) == ("hello", "running", 2_000)


def test_notes_of_a_session_land_in_order_and_close_flushes_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = Store(state)
    write_session(store, "s", cwd="/w", turns=[], start_ms=100)
    for n in range(50):
        status = "completed" if n % 2 else "running"
        assert store.index.note("s", title=f"p{n}", status=status, updated_at_ms=n)
    store.close()  # flushes: nothing noted is lost
    store = Store(state)
    try:
        entry = store.index.entries()["s"]
    finally:
        store.close()
    assert (entry.title, entry.last_status, entry.updated_at_ms) == ("p0", "completed", 49)


def test_appended_bytes_are_read_by_the_journals_own_rules(store: Store) -> None:
    """A last line that is valid JSON but fails its integrity check is a torn
    tail: opening drops it, so the listing must not take its status either
    (a second, schema-less reader in the index once did)."""
    path = write_session(store, "s", cwd="/w", turns=[("p", None)], start_ms=1)
    store.rebuild_index()
    completed = jr.TurnCompleted(
        seq=4,
        recorded_at_ms=99,
        turn_id="turn_1",
        status=jr.TurnStatus.completed,
        usage=jr.Usage(input_tokens=1, output_tokens=1),
        acknowledged=[],
    )
    torn = msgspec.json.encode(completed)[:-1] + b',"crc32":"00000000"}\n'
    with path.open("ab") as f:
        f.write(torn)
    records, report = read_records(path)
    assert report.torn_tail_dropped and not isinstance(records[-1], jr.TurnCompleted)
    [row] = store.summaries()
    assert row.last_status == "running"
    assert store.index.entries()["s"].last_status == "running"


def test_the_write_queue_is_bounded_and_refuses_when_full_or_closed() -> None:
    started, release = threading.Event(), threading.Event()
    done: list[int] = []

    def blocking() -> None:
        started.set()
        assert release.wait(timeout=10)

    queue = WriteQueue(name="test-index-writer", max_pending=2)
    assert queue.submit(blocking)
    assert started.wait(timeout=10)  # running: no longer counted as pending
    assert queue.submit(lambda: done.append(1))
    assert queue.submit(lambda: done.append(2))
    assert not queue.submit(lambda: done.append(3))  # full: refused at once
    assert not queue.flush(timeout_s=0.01)
    release.set()
    assert queue.flush(timeout_s=10)
    assert done == [1, 2]
    assert queue.close(timeout_s=10)
    assert not queue.submit(lambda: done.append(4))


_LAZY_OPEN = """
import sys, threading
from pathlib import Path

opened_by = []

def hook(event, args):
    if event == "open" and str(args[0]).endswith("index.db"):
        opened_by.append(threading.current_thread().name)

sys.addaudithook(hook)
from mind.shell.store import Store

root = Path(sys.argv[1])
store = Store(root)
sid = "0190a0a0-0000-7000-8000-000000000001"
store.session_dir(sid).mkdir(mode=0o700)
store.journal_path(sid).write_bytes(b"")
before = (root / "index.db").exists()
assert store.index.note(sid, cwd="/w", status="running")
assert store.index.flush()
print(before, sorted(set(opened_by)), sorted(store.index.entries()))
store.close()
"""


def test_the_index_is_opened_by_its_writer_thread_on_the_first_note(tmp_path: Path) -> None:
    """``Store()`` opens no ``index.db`` (``mind exec`` pays nothing for it
    before its first request); the first note opens it on the writer thread."""
    proc = subprocess.run(
        [sys.executable, "-c", _LAZY_OPEN, str(tmp_path / "state")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split(" ", 1) == [
        "False",
        "['mind-index-writer'] ['0190a0a0-0000-7000-8000-000000000001']\n",
    ]
