"""mind's own state is private and owned (docs/design/state.md).

Real files, real FIFOs, real ownership (the suite runs as root: foreign
ownership is made with ``chown 65534``). A FIFO case runs in a child process
with a timeout, so a regression that blocks on it cannot hang the suite.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from mind.errors import JournalReplacedError, MindError, PrivateStateError
from mind.generated import journal as jr
from mind.shell import private_files
from mind.shell.config import load_config_file
from mind.shell.inbox import Inbox, InboxEntry, encode_inbox
from mind.shell.journal import Journal
from mind.shell.lease import LeaseRecord, SessionLease
from mind.shell.mounts import MountLedger
from mind.shell.repl import history_file
from mind.shell.store import Store

REPO = Path(__file__).resolve().parents[2]
FOREIGN = 65534
SID = "s1"
CHILD_TIMEOUT_S = 20


def _started(sid: str = SID) -> jr.SessionStarted:
    return jr.SessionStarted(seq=0, recorded_at_ms=0, session_id=sid, cwd="/", mind_version="t")


def _journal_bytes(path: Path, sid: str = SID) -> bytes:
    with Journal.open(path, create=True) as journal:
        journal.append(_started(sid), sync=True)
    return path.read_bytes()


def _valid_content(target: str, scratch: Path) -> bytes:
    """Bytes a sound ``target`` file could hold (so only its kind/owner is wrong)."""
    if target == "journal.jsonl":
        return _journal_bytes(scratch / "j" / "journal.jsonl")
    if target == "inbox.json":
        return encode_inbox([])
    if target == "lease":
        return msgspec.json.encode(LeaseRecord(pid=2**22 + 1, start_identity="x", owner_id="o"))
    if target == "session-mounts.json":
        return b'{"version": 1, "owners": []}'
    return b""


def _place(path: Path, kind: str, content: bytes) -> None:
    """Put a ``kind`` thing at ``path``: fifo, directory, symlink, foreign, writable."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
    elif kind == "symlink":
        target = path.parent.parent / f"elsewhere-{path.name}"
        target.write_bytes(content)
        os.chmod(target, 0o600)
        path.symlink_to(target)
    else:
        path.write_bytes(content)
        os.chmod(path, 0o600 if kind == "foreign" else 0o666)
        if kind == "foreign":
            os.chown(path, FOREIGN, FOREIGN)


def _snapshot(path: Path) -> tuple[int, int, int, int, bytes]:
    info = os.lstat(path)
    data = b""
    if stat.S_ISREG(info.st_mode):
        data = path.read_bytes()
    elif stat.S_ISLNK(info.st_mode):
        data = Path(os.readlink(path)).read_bytes()
    return info.st_mode, info.st_uid, info.st_ino, info.st_size, data


def _layout(base: Path) -> tuple[Path, Path]:
    """``(config home, state root)`` with a session directory ``s1`` (0700)."""
    home, root = base / "home", base / "state"
    (root / "sessions" / SID).mkdir(parents=True, mode=0o700)
    home.mkdir(mode=0o700)
    for d in (base, home, root, root / "sessions", root / "sessions" / SID):
        os.chmod(d, 0o700)
    return home, root


def _path_of(target: str, home: Path, root: Path) -> Path:
    if target in ("config.toml", "history"):
        return home / target
    if target in ("session-mounts.json", "session-mounts.lock", "index.db"):
        return root / target
    return root / "sessions" / SID / target


def attempt(target: str, home: Path, root: Path) -> str:
    """Use the state file ``target`` as mind does; the refusal's message, or "" if used."""
    directory = root / "sessions" / SID
    try:
        if target == "journal.jsonl":
            Journal.open(directory / target).close()
        elif target == "inbox.json":
            Inbox.open(directory / target, acknowledged=())
        elif target in ("lease", "lease.lock"):
            SessionLease.acquire(directory / "lease", SID).release()
        elif target in ("session-mounts.json", "session-mounts.lock"):
            ledger = MountLedger(root, sleep_s=lambda _s: None)
            try:
                ledger.claim(SID).release()
            finally:
                ledger.close()
        elif target == "index.db":
            store = Store(root)
            store.close()
            return store.index.unavailable
        elif target == "config.toml":
            load_config_file(home / target)
        elif target == "history":
            history_file({"MIND_HOME": str(home)})
    except MindError as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


TARGETS = (
    "journal.jsonl",
    "inbox.json",
    "lease",
    "lease.lock",
    "session-mounts.json",
    "session-mounts.lock",
    "index.db",
    "config.toml",
    "history",
)


def _child_attempt(target: str, home: Path, root: Path) -> str:
    """:func:`attempt` in a child process with a timeout (a FIFO must not hang us)."""
    code = (
        "import sys; from pathlib import Path; "
        "from tests.shell.test_private_state import attempt; "
        "print(attempt(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, target, str(home), str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("kind", ["fifo", "directory", "symlink", "foreign", "writable"])
@pytest.mark.parametrize("target", TARGETS)
def test_a_state_file_that_is_not_private_is_refused_and_left_untouched(
    tmp_path: Path, target: str, kind: str
) -> None:
    home, root = _layout(tmp_path)
    path = _path_of(target, home, root)
    if target == "index.db":
        Store(root).close()
        for name in ("index.db", "index.db-wal", "index.db-shm"):
            (root / name).unlink(missing_ok=True)
    _place(path, kind, _valid_content(target, tmp_path / "scratch"))
    before = _snapshot(path)
    run = _child_attempt if kind == "fifo" else attempt
    refusal = run(target, home, root)
    assert str(path) in refusal
    assert _snapshot(path) == before


@pytest.mark.parametrize(
    ("where", "kind"),
    [
        (where, kind)
        for where in ("root", "sessions", "session")
        for kind in ("symlink", "foreign", "writable")
        if (where, kind) != ("root", "symlink")  # resolved at start: see the test after next
    ],
)
def test_a_state_directory_that_is_not_private_is_refused(
    tmp_path: Path, where: str, kind: str
) -> None:
    _home, root = _layout(tmp_path)
    path = {"root": root, "sessions": root / "sessions", "session": root / "sessions" / SID}[where]
    if kind == "symlink":
        real = tmp_path / f"real-{where}"
        path.rename(real)
        path.symlink_to(real)
    elif kind == "foreign":
        os.chown(path, FOREIGN, FOREIGN)
    else:
        os.chmod(path, 0o777)
    with pytest.raises(PrivateStateError) as refused:
        store = Store(root)
        try:
            SessionLease.acquire(store.session_dir(SID) / "lease", SID).release()
        finally:
            store.close()
    assert str(path) in str(refused.value)
    assert (
        "chmod 700" in str(refused.value)
        or "chown" in str(refused.value)
        or "remove" in str(refused.value)
    )


def test_a_world_writable_config_home_is_refused(tmp_path: Path) -> None:
    home, _ = _layout(tmp_path)
    (home / "config.toml").write_bytes(b"")
    os.chmod(home / "config.toml", 0o600)
    os.chmod(home, 0o777)
    with pytest.raises(PrivateStateError, match=f"{home}.*chmod 700 {home}"):
        load_config_file(home / "config.toml")
    with pytest.raises(PrivateStateError, match=str(home)):
        history_file({"MIND_HOME": str(home)})


def test_a_symlink_above_the_state_root_is_followed_once(tmp_path: Path) -> None:
    real = tmp_path / "data" / "mind"
    real.mkdir(parents=True, mode=0o700)
    link = tmp_path / "dot-mind"
    link.symlink_to(real)
    store = Store(link)
    try:
        assert store.root == real
        SessionLease.acquire(store.session_dir(SID) / "lease", SID).release()
    finally:
        store.close()
    assert (real / "sessions" / SID).is_dir()


def test_a_dangling_lease_lock_link_creates_no_file_outside(tmp_path: Path) -> None:
    _, root = _layout(tmp_path)
    outside = tmp_path / "outside-lock"
    (root / "sessions" / SID / "lease.lock").symlink_to(outside)
    with pytest.raises(PrivateStateError, match=r"lease\.lock"):
        SessionLease.acquire(root / "sessions" / SID / "lease", SID)
    assert not os.path.lexists(outside)


def test_files_and_directories_are_created_private_under_umask_000(tmp_path: Path) -> None:
    code = """
import os, sys
from pathlib import Path
os.umask(0)
from mind.shell.store import Store
from mind.shell.lease import SessionLease
from mind.shell.journal import Journal
from mind.shell.inbox import Inbox, InboxEntry
from mind.shell.mounts import MountLedger
from mind.shell.repl import history_file
from mind.generated import journal as jr
from mind.generated.inbox import InboxKind
base = Path(sys.argv[1])
store = Store(base / "state" / "deeper")
d = store.session_dir("s1")
lease = SessionLease.acquire(d / "lease", "s1")
with Journal.open(d / "journal.jsonl", create=True) as j:
    j.append(jr.SessionStarted(seq=0, recorded_at_ms=0, session_id="s1", cwd="/", mind_version="t"))
inbox = Inbox.open(d / "inbox.json", acknowledged=())
inbox.add(InboxEntry(message_id="m1", text="hi", kind=InboxKind.prompt, accepted_at_ms=1,
    recovered=False))
ledger = MountLedger(store.root)
ledger.claim("s1")
history_file({"MIND_HOME": str(base / "home")})
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr
    seen: dict[str, int] = {}
    for top in (tmp_path / "state", tmp_path / "home"):
        for dirpath, dirnames, filenames in os.walk(top):
            for name in dirnames:
                seen[f"{dirpath}/{name}/"] = stat.S_IMODE(os.lstat(f"{dirpath}/{name}").st_mode)
            for name in filenames:
                seen[f"{dirpath}/{name}"] = stat.S_IMODE(os.lstat(f"{dirpath}/{name}").st_mode)
        seen[f"{top}/"] = stat.S_IMODE(os.lstat(top).st_mode)
    assert any(p.endswith("inbox.json") for p in seen) and any(p.endswith("history") for p in seen)
    wrong = {p: f"{m:o}" for p, m in seen.items() if m != (0o700 if p.endswith("/") else 0o600)}
    assert wrong == {}


def test_a_session_creates_missing_config_and_state_parents_0700_under_umask_000(
    tmp_path: Path,
) -> None:
    """The session itself (not only the store) makes ``MIND_HOME`` before its
    sandbox binds it read-only: every missing parent is 0700 too."""
    (tmp_path / "work").mkdir()
    script = tmp_path / "s.yaml"
    script.write_text("- text: hi\n", encoding="utf-8")
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "MIND_HOME": str(tmp_path / "a" / "b" / ".mind"),
        "MIND_STATE_HOME": str(tmp_path / "c" / "d" / "state"),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.umask(0); from mind.shell.cli import main; sys.exit(main())",
            "exec",
            "--provider",
            "scripted",
            "--script",
            str(script),
            "--cwd",
            str(tmp_path / "work"),
            "hi",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    made = [tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / ".mind"]
    made += [tmp_path / "c", tmp_path / "c" / "d", tmp_path / "c" / "d" / "state"]
    modes = {str(p): f"{stat.S_IMODE(os.lstat(p).st_mode):o}" for p in made}
    assert set(modes.values()) == {"700"}, modes


def _ticking() -> Callable[[], int]:
    """A journal clock one second further at each call (the same-file check
    runs at most every ``SAME_FILE_CHECK_MS`` between synced appends)."""
    ticks = itertools.count(1_000_000, 1000)
    return lambda: next(ticks)


def test_a_journal_replaced_under_a_running_mind_is_damage(tmp_path: Path) -> None:
    _, root = _layout(tmp_path)
    path = root / "sessions" / SID / "journal.jsonl"
    other = _journal_bytes(tmp_path / "other" / "journal.jsonl", sid="someone-else")
    journal = Journal.open(path, create=True, session_id=SID, clock_ms=_ticking())
    journal.append(_started(), sync=True)
    replacement = path.with_name("swap")
    replacement.write_bytes(other)
    os.chmod(replacement, 0o600)
    os.replace(replacement, path)
    with pytest.raises(JournalReplacedError, match=str(path)):
        journal.append(_started())
    journal.close()
    assert path.read_bytes() == other  # nothing glued onto either file
    with pytest.raises(JournalReplacedError, match=f"{path}.*someone-else"):
        Journal.open(path, session_id=SID)


def test_a_replaced_journal_is_caught_at_the_next_synced_append(tmp_path: Path) -> None:
    _, root = _layout(tmp_path)
    path = root / "sessions" / SID / "journal.jsonl"
    with Journal.open(path, create=True, session_id=SID, clock_ms=lambda: 5) as journal:
        journal.append(_started(), sync=True)
        path.rename(path.with_name("moved-away"))
        path.write_bytes(b"")
        with pytest.raises(JournalReplacedError, match="replaced"):
            journal.append(_started(), sync=True)  # same clock: only the sync checks
    assert path.read_bytes() == b""


def test_a_removed_journal_stops_appends(tmp_path: Path) -> None:
    _, root = _layout(tmp_path)
    path = root / "sessions" / SID / "journal.jsonl"
    with Journal.open(path, create=True, session_id=SID, clock_ms=_ticking()) as journal:
        journal.append(_started(), sync=True)
        path.unlink()
        with pytest.raises(JournalReplacedError, match="removed"):
            journal.append(_started())
        with pytest.raises(JournalReplacedError, match="removed"):  # and stays refused
            journal.append(_started())


def test_inbox_entries_survive_the_private_writer(tmp_path: Path) -> None:
    _, root = _layout(tmp_path)
    path = root / "sessions" / SID / "inbox.json"
    inbox = Inbox.open(path, acknowledged=())
    from mind.generated.inbox import InboxKind

    inbox.add(
        InboxEntry(
            message_id="m1", text="hi", kind=InboxKind.prompt, accepted_at_ms=1, recovered=False
        )
    )
    assert [e.message_id for e in Inbox.open(path, acknowledged=()).entries] == ["m1"]
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600


def test_a_turn_on_a_replaced_journal_ends_with_the_damage(tmp_path: Path) -> None:
    """A journal replaced underneath a running session is refused, not written:
    the turn ends ``aborted`` — nothing of it is durable, so that is what the
    next open concludes — naming the replacement (its input not acknowledged)
    and the replaced file is left byte-identical."""
    import anyio
    import yaml

    import mind

    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "done"}]), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={})
    swapped: list[bytes] = []

    async def main() -> mind.TurnOutcome:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            path = session.journal.path
            copy = path.with_name("copy")
            copy.write_bytes(path.read_bytes())
            os.chmod(copy, 0o600)
            os.replace(copy, path)
            swapped.append(path.read_bytes())
            turn = session.submit("go")
            async for _ in turn:
                pass
            return turn.outcome

    outcome = anyio.run(main)
    assert outcome.status == "aborted"
    failure = outcome.event.failure
    assert failure is not None and "replaced" in failure.message
    journal = next((tmp_path / "state" / "sessions").iterdir()) / "journal.jsonl"
    assert journal.read_bytes() == swapped[0]  # the turn wrote nowhere


def test_listing_reads_of_a_fifo_journal_return_at_once(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    os.mkfifo(path, 0o600)
    code = (
        "import sys; from pathlib import Path; from mind.shell import index; "
        "print(index.peek_head('s1', Path(sys.argv[1])).journal_size_bytes)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "0"), done.stderr
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


_STORAGE = Path(__file__).resolve().parents[2] / "mind" / "shell"


def test_state_files_are_opened_and_replaced_in_one_module() -> None:
    """Journal, inbox, lease, mount ledger and index open, replace and sync
    state files only through private_files (one no-follow, one atomic write)."""
    hand_written = re.compile(
        r"os\.open\(|os\.replace\(|os\.fsync\(\s*(dfd|dir)|O_NOFOLLOW|O_DIRECTORY"
    )
    owners = [
        *(_STORAGE / name for name in ("journal.py", "inbox.py", "lease.py", "store.py")),
        *(_STORAGE / "mounts").glob("*.py"),
        *(_STORAGE / "index").glob("*.py"),
    ]
    found = [
        f"{path.relative_to(_STORAGE)}:{n}: {line.strip()}"
        for path in owners
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if hand_written.search(line) and not line.lstrip().startswith(("#", '"', "``"))
    ]
    assert found == []


def test_a_directory_is_opened_without_following_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PrivateStateError, match="symbolic link"):
        private_files.open_dir(tmp_path / "link")
    with pytest.raises(PrivateStateError, match="not a directory"):
        (tmp_path / "file").write_text("")
        private_files.open_dir(tmp_path / "file")
    fd = private_files.open_dir(real)
    try:
        assert stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
