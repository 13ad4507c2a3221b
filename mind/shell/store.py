"""Where mind keeps its files: the config root and the state root (docs/design/state.md).

``MIND_HOME`` (default ``~/.mind``) holds ``config.toml``; ``MIND_STATE_HOME``
(default: ``MIND_HOME``) holds ``sessions/<session_id>/`` and the derived
session index ``index.db`` (:mod:`mind.shell.index`). The state root must
be creatable and writable: an explicit root that fails stops startup with
:class:`~mind.errors.StateDirError`, never a fallback to another location.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Final

import msgspec

from mind.errors import (
    JournalCorruptError,
    PrivateStateError,
    SessionLookupError,
    StateDirError,
    as_storage_error,
)
from mind.shell import index, lease, private_files
from mind.shell.index import ReadRange
from mind.shell.terminal_text import plain

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""Accepted session ids: a safe directory name (no separators, no leading dot)."""


AMBIGUOUS_LISTED = 10
"""How many candidates an ambiguous-prefix message names."""


def resolve_session_id(prefix: str, candidates: Iterable[str]) -> str:
    """The one session id among ``candidates`` that equals or starts with ``prefix``.

    The one rule for ids typed by a person (``mind resume``, ``/resume``,
    ``mind exec --session``): an exact id wins, else a unique prefix.

    Raises:
        SessionLookupError: no id matches, or several do (the message names
            up to :data:`AMBIGUOUS_LISTED` of them; all are in ``candidates``).
    """
    ids = sorted(set(candidates))
    if prefix in ids:
        return prefix
    matches = tuple(sid for sid in ids if sid.startswith(prefix))
    if not matches:
        raise SessionLookupError(prefix, "no such session (`mind sessions` lists them)")
    if len(matches) > 1:
        shown = ", ".join(matches[:AMBIGUOUS_LISTED])
        more = (
            f" and {len(matches) - AMBIGUOUS_LISTED} more"
            if len(matches) > AMBIGUOUS_LISTED
            else ""
        )
        raise SessionLookupError(
            prefix,
            f"ambiguous: {len(matches)} sessions start with it ({shown}{more}); "
            "type more of the id",
            matches,
        )
    return matches[0]


def mind_home(env: Mapping[str, str]) -> Path:
    """The config root: ``$MIND_HOME`` or ``~/.mind``."""
    raw = env.get("MIND_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".mind"


def state_home(env: Mapping[str, str]) -> Path:
    """The state root: ``$MIND_STATE_HOME``, else :func:`mind_home`."""
    raw = env.get("MIND_STATE_HOME")
    return Path(raw).expanduser() if raw else mind_home(env)


INTERRUPTED: Final = "interrupted (resume to recover)"
"""How a session is shown whose last turn has no terminal record while no live
process holds it: the process running it died (resuming closes the turn)."""
NOTHING_SENT: Final = "new (nothing sent)"
"""The state of an indexed session with no turn yet: created, and left (kill
-9, a closed terminal before the REPL could clean up) before any input."""


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``mind sessions``.

    Attributes:
        session_id: directory name under ``sessions/``.
        cwd: the session's frozen working directory ("" if unknown).
        title: first prompt, truncated to 80 characters ("" if none yet or
            not indexed).
        updated_at_ms: last known activity, Unix epoch milliseconds (the
            journal's modification time when not indexed).
        last_status: "running" (the last turn has no terminal record), the
            status of the last terminal record, or "" (no turn yet, or not
            indexed). See :attr:`status` for what to show.
        created_at_ms: session start, Unix epoch milliseconds (0 if unknown).
        indexed: False when the session has no row in ``index.db`` (listed
            from its journal's first record only; ``mind sessions
            --rebuild-index`` adds it). True also when ``index.db`` is
            unavailable and the row was read from the journal's head and tail.
        holder_pid: the live process holding the session's lease (pid and
            start identity checked), 0 when none; read only for sessions whose
            ``last_status`` is "running".
        damage: ``"<journal path>:<line>, <reason>"`` when the journal cannot
            be opened (as far as listing read it), else "".
        empty: the session directory has no journal, or a 0-byte one (a
            session whose creation never wrote its first record).
    """

    session_id: str
    cwd: str
    title: str
    updated_at_ms: int
    last_status: str
    created_at_ms: int = 0
    indexed: bool = True
    holder_pid: int = 0
    damage: str = ""
    empty: bool = False

    @property
    def status(self) -> str:
        """What to show: ``empty``, ``damaged (path:line, reason)``, ``running``
        (only while a live process holds it), :data:`INTERRUPTED` (a last turn
        without terminal and without a live holder), else :attr:`last_status`;
        an indexed session with no turn is :data:`NOTHING_SENT`, an unindexed
        one whose state is unknown ``-``."""
        if self.empty:
            return "empty"
        if self.damage:
            return f"damaged ({self.damage})"
        if self.last_status == "running":
            return "running" if self.holder_pid else INTERRUPTED
        return self.last_status or (NOTHING_SENT if self.indexed else "-")


class Store:
    """The state root, its per-session directories and the session index.

    Args:
        root: the state root, resolved once with ``realpath`` (a symlink
            above it is allowed); it and ``sessions/`` are created 0700 if
            missing and must be private and owned (``docs/design/state.md``).
        read_range: how listing reads journal bytes (default
            :func:`~mind.shell.index.read_range`; tests inject a counting one).

    Attributes:
        index: the session index ``<root>/index.db``. It is derived: when it
            cannot be used its ``unavailable`` says why and listing reads the
            session directories instead (never an error).

    Raises:
        StateDirError: the root cannot be created or is not writable.
        StorageError: the storage refused to create it (full disk, quota,
            I/O error, read-only file system).
        PrivateStateError: the root or ``sessions/`` is a symlink, owned by
            another user or group/world-writable (nothing is created in it).
    """

    def __init__(self, root: Path, *, read_range: ReadRange | None = None) -> None:
        root = private_files.resolve_root(root)  # a symlink above the root is the user's
        self.root = root
        self.sessions_dir = root / "sessions"
        try:
            private_files.private_dir(root)
            private_files.private_dir(self.sessions_dir)
        except OSError as exc:
            raise as_storage_error(exc, root, "create the state directory") or StateDirError(
                root, exc.strerror or str(exc)
            ) from exc
        if not os.access(self.sessions_dir, os.W_OK | os.X_OK):
            raise StateDirError(root, "not writable")
        self._read: ReadRange = read_range or index.read_range
        self.index = index.SessionIndex.open(self)

    def close(self) -> None:
        """Close the session index. Idempotent."""
        self.index.close()

    def session_dir(self, session_id: str) -> Path:
        """``<root>/sessions/<session_id>``; the id must match :data:`SESSION_ID_RE`.

        Raises:
            ValueError: the id is not a safe directory name.
        """
        if not SESSION_ID_RE.match(session_id):
            raise ValueError(f"invalid session id {session_id!r}")
        return self.sessions_dir / session_id

    def journal_path(self, session_id: str) -> Path:
        """``<root>/sessions/<session_id>/journal.jsonl``."""
        return self.session_dir(session_id) / "journal.jsonl"

    def recorded_damage(self, session_id: str) -> JournalCorruptError | None:
        """The damage the session index recorded for this session's journal
        (what ``mind sessions`` lists) when its row still describes the file
        as it is now — the listing's own rule: the same length, modification
        time (ns) and CRC-32 of the last 4 KiB (one ``stat``, one read) —
        else None (no row, no damage, or the file changed since: the open's
        own reading decides then). Opening refuses such a session at once,
        before its checkpoint is trusted (docs/design/checkpoints.md §5).

        Returns:
            The error a full read raises: the journal's path, the 1-based
            line and why; None as above. Never raises.
        """
        entry = self.index.entries().get(session_id)
        if entry is None or not entry.damage_line or not entry.journal_mtime_ns:
            return None
        path = self.journal_path(session_id)
        try:
            st = os.stat(path, follow_symlinks=False)
            same = (st.st_size, st.st_mtime_ns) == (
                entry.journal_size_bytes,
                entry.journal_mtime_ns,
            )
            if not same or index.tail_fingerprint(path, st.st_size, self._read) != (
                entry.journal_tail_crc
            ):
                return None
        except OSError:
            return None  # the open reads it and says what is wrong
        return JournalCorruptError(path, entry.damage_line, entry.damage_reason)

    def session_ids(self) -> list[str]:
        """Ids of every session directory that holds a journal, oldest first."""
        out = [
            p.name
            for p in self.sessions_dir.iterdir()
            # lexists: a journal that is not a regular file is still a session
            # (opening it names what is wrong), not "no such session".
            if SESSION_ID_RE.match(p.name) and os.path.lexists(p / "journal.jsonl")
        ]
        return sorted(out)

    def _journal_files(self) -> Iterator[tuple[str, str]]:
        """``(session_id, journal path)`` per directory with a valid id (journal unchecked)."""
        base = os.fspath(self.sessions_dir)
        with os.scandir(base) as it:
            for d in it:
                if SESSION_ID_RE.match(d.name) and d.is_dir(follow_symlinks=False):
                    yield d.name, f"{base}/{d.name}/journal.jsonl"

    def rebuild_index(self) -> int:
        """Rebuild ``index.db`` from every journal (each read once, in order).

        Returns:
            The number of sessions indexed.

        Raises:
            StateDirError: the index cannot be written.
        """
        return self.index.rebuild(self)

    def summaries(self) -> list[SessionSummary]:
        """A :class:`SessionSummary` per session directory.

        Indexed sessions come first, most recently updated first; then the
        sessions without an index row, grouped by cwd (cwds in order, most
        recent first within one). Never parses whole journals it has seen:
        per session one ``stat``; a journal longer than its row accounts for
        is caught up from its appended bytes only (at most
        :data:`~mind.shell.index.CATCH_UP_MAX_BYTES`); one that shrank,
        changed without growing (another mtime), or whose appended bytes hold
        damage before their end is checked again in full; both are saved back
        to the index. A session without a row costs one read of its first
        record. A session whose last turn is "running" costs one read of its
        lease (is a live process holding it?). A directory without a journal,
        or with a 0-byte one, is listed ``empty``; damage is listed with its
        path and line (:attr:`SessionSummary.damage`). A damaged ``index.db``
        is rebuilt from the journals first. When the index is unavailable
        (locked by another process, unwritable, full disk) every session is
        listed from its directory instead: its head record and at most
        :data:`~mind.shell.index.CATCH_UP_MAX_BYTES` from the end of its
        journal; the order is then most recent first.
        """
        rows = self.index.entries()
        direct = bool(self.index.unavailable)
        listed: list[SessionSummary] = []
        unindexed: list[SessionSummary] = []
        forward: list[index.IndexEntry] = []
        rescanned: list[index.IndexEntry] = []
        for sid, raw_path in self._journal_files():
            path = Path(raw_path)
            try:
                st = os.stat(raw_path, follow_symlinks=False)
            except FileNotFoundError:
                listed.append(self._empty(sid, path.parent))
                continue
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                # Listed as damage naming the file and its fix, so opening the
                # session says the same (never "no such session").
                listed.append(self._not_regular(sid, path, st))
                continue
            if st.st_size == 0:
                listed.append(self._empty(sid, path))
                continue
            entry = rows.get(sid)
            if entry is None and direct:
                head = index.peek_head(sid, path, self._read)  # accounts for 0 bytes
                grown = (
                    index.catch_up(head, path, st.st_size, self._read)
                    if not head.damage_line
                    else head
                )
                listed.append(self._summary(grown or self._scan(sid, path, head), indexed=True))
                continue
            if entry is None:
                unindexed.append(
                    self._summary(index.peek_head(sid, path, self._read), indexed=False)
                )
                continue
            if st.st_size > entry.journal_size_bytes:
                grown = index.catch_up(entry, path, st.st_size, self._read, mtime_ns=st.st_mtime_ns)
                if grown is None:
                    entry = self._scan(sid, path, entry)
                    rescanned.append(entry)
                else:
                    entry = grown
                    forward.append(entry)
            elif st.st_size < entry.journal_size_bytes or (
                entry.journal_mtime_ns and st.st_mtime_ns != entry.journal_mtime_ns
            ):
                entry = self._scan(sid, path, entry)
                rescanned.append(entry)
            listed.append(self._summary(entry, indexed=True))
        if forward or rescanned:
            self.index.store_caught_up(forward, rescanned)
        listed.sort(key=lambda s: (-s.updated_at_ms, s.session_id))
        unindexed.sort(key=lambda s: (s.cwd, -s.updated_at_ms, s.session_id))
        return listed + unindexed

    @staticmethod
    def _scan(sid: str, path: Path, fallback: index.IndexEntry) -> index.IndexEntry:
        """The whole journal checked again (it changed unlike an append)."""
        try:
            return index.scan_journal(sid, path)
        except OSError:
            return fallback

    @staticmethod
    def _not_regular(sid: str, path: Path, st: os.stat_result) -> SessionSummary:
        """A session whose journal is a symlink, FIFO, directory or device:
        damaged, with :func:`private_files.open_file`'s refusal (which never
        blocks on a FIFO nor follows a link)."""
        damage = f"{path}: is not a regular file"
        try:
            os.close(private_files.open_file(path, os.O_RDONLY))
        except PrivateStateError as exc:
            damage = f"{path}: {exc.detail}"
        except OSError as exc:
            damage = f"{path}: cannot open ({exc.strerror})"
        return SessionSummary(
            session_id=sid,
            cwd="",
            title="",
            updated_at_ms=st.st_mtime_ns // 1_000_000,
            last_status="",
            damage=damage,
        )

    @staticmethod
    def _empty(sid: str, path: Path) -> SessionSummary:
        try:
            mtime_ms = os.stat(path).st_mtime_ns // 1_000_000
        except OSError:
            mtime_ms = 0
        return SessionSummary(
            session_id=sid, cwd="", title="", updated_at_ms=mtime_ms, last_status="", empty=True
        )

    def _summary(self, entry: index.IndexEntry, *, indexed: bool) -> SessionSummary:
        holder = 0
        if entry.last_status == "running" and not entry.damage_line:
            found = lease.read_holder(self.session_dir(entry.session_id) / "lease")
            holder = found.pid if found is not None else 0
        damage = ""
        if entry.damage_line:
            where = self.journal_path(entry.session_id)
            damage = f"{where}:{entry.damage_line}, {entry.damage_reason}"
        return SessionSummary(
            session_id=entry.session_id,
            cwd=entry.cwd,
            title=entry.title,
            updated_at_ms=entry.updated_at_ms,
            last_status=entry.last_status,
            created_at_ms=entry.created_at_ms,
            indexed=indexed,
            holder_pid=holder,
            damage=damage,
        )


def listing_lines(rows: list[SessionSummary], now_ms: int) -> list[str]:
    """The text of ``mind sessions``: one line per session, then the unindexed ones.

    Indexed sessions: ``id  status  age  cwd  title`` in the order given (most
    recent first from :meth:`Store.summaries`). Sessions without an index row
    follow under a heading, grouped by cwd. Titles and paths go through
    :func:`~mind.shell.terminal_text.plain` (prompt text must not drive the terminal).

    Args:
        rows: summaries as returned by :meth:`Store.summaries`.
        now_ms: the current time, Unix epoch milliseconds (for "3 min ago").

    Returns:
        Lines without newlines; ``["no sessions yet"]`` for no rows.
    """
    if not rows:
        return ["no sessions yet"]
    out = [
        f"{s.session_id}  {s.status:<11}  "
        f"{index.format_age(s.updated_at_ms, now_ms):<12}  "
        f"{plain(s.cwd)}  {plain(s.title)}".rstrip()
        for s in rows
        if s.indexed
    ]
    loose = [s for s in rows if not s.indexed]
    if loose:
        if out:
            out.append("")
        out.append(
            f"not in the index ({len(loose)}; `mind sessions --rebuild-index` adds them), by cwd:"
        )
        cwd: str | None = None
        for s in loose:
            if s.cwd != cwd:
                cwd = s.cwd
                out.append(f"  {plain(cwd) or '(unknown cwd)'}")
            age = index.format_age(s.updated_at_ms, now_ms)
            state = "" if s.status == "-" else f"  {s.status}"
            out.append(f"    {s.session_id}  {age}{state}")
    return out
