"""Where mind keeps its files: the config root and the state root (DESIGN §4).

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

import msgspec

from mind.errors import SessionLookupError, StateDirError
from mind.shell import index
from mind.shell.index import ReadRange

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


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``mind sessions``.

    Attributes:
        session_id: directory name under ``sessions/``.
        cwd: the session's frozen working directory ("" if unknown).
        title: first prompt, truncated to 80 characters ("" if none yet or
            not indexed).
        updated_at_ms: last known activity, Unix epoch milliseconds (the
            journal's modification time when not indexed).
        last_status: "running", the status of the last terminal record, or ""
            (no turn yet, or not indexed).
        created_at_ms: session start, Unix epoch milliseconds (0 if unknown).
        indexed: False when the session has no row in ``index.db`` (listed
            from its journal's first record only; ``mind sessions
            --rebuild-index`` adds it).
    """

    session_id: str
    cwd: str
    title: str
    updated_at_ms: int
    last_status: str
    created_at_ms: int = 0
    indexed: bool = True


class Store:
    """The state root, its per-session directories and the session index.

    Args:
        root: the state root; created with mode 0700 if missing.
        read_range: how listing reads journal bytes (default
            :func:`~mind.shell.index.read_range`; tests inject a counting one).

    Attributes:
        index: the open session index ``<root>/index.db``.

    Raises:
        StateDirError: the root cannot be created or is not writable, or
            ``index.db`` cannot be created or written.
    """

    def __init__(self, root: Path, *, read_range: ReadRange | None = None) -> None:
        self.root = root
        self.sessions_dir = root / "sessions"
        try:
            created_root = not root.exists()
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            if created_root:
                root.chmod(0o700)  # private: mkdir's mode is narrowed by the umask only
            self.sessions_dir.mkdir(exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StateDirError(root, exc.strerror or str(exc)) from exc
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

    def session_ids(self) -> list[str]:
        """Ids of every session directory that holds a journal, oldest first."""
        out = [
            p.name
            for p in self.sessions_dir.iterdir()
            if SESSION_ID_RE.match(p.name) and (p / "journal.jsonl").is_file()
        ]
        return sorted(out)

    def _journal_files(self) -> Iterator[tuple[str, str]]:
        """``(session_id, journal path)`` per directory entry with a valid id (unchecked)."""
        base = os.fspath(self.sessions_dir)
        with os.scandir(base) as it:
            for d in it:
                if SESSION_ID_RE.match(d.name):
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
        """A :class:`SessionSummary` per session directory holding a journal.

        Indexed sessions come first, most recently updated first; then the
        sessions without an index row, grouped by cwd (cwds in order, most
        recent first within one). Never parses whole journals: per session
        one ``stat``; a journal longer than its row accounts for is caught up
        from its appended bytes only (at most
        :data:`~mind.shell.index.CATCH_UP_MAX_BYTES`, saved back to the
        index); a session without a row costs one read of its first record.
        A damaged ``index.db`` is rebuilt from the journals first.

        Raises:
            StateDirError: ``index.db`` is damaged and cannot be rebuilt.
        """
        rows = self.index.entries()
        listed: list[SessionSummary] = []
        unindexed: list[SessionSummary] = []
        forward: list[index.IndexEntry] = []
        for sid, raw_path in self._journal_files():
            try:
                st = os.stat(raw_path, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            size, path = st.st_size, Path(raw_path)
            entry = rows.get(sid)
            if entry is None:
                unindexed.append(_summary(index.peek_head(sid, path, self._read), indexed=False))
                continue
            if size > entry.journal_size_bytes:
                entry = index.catch_up(entry, path, size, self._read)
                forward.append(entry)
            listed.append(_summary(entry, indexed=True))
        if forward:
            self.index.store_caught_up(forward)
        listed.sort(key=lambda s: (-s.updated_at_ms, s.session_id))
        unindexed.sort(key=lambda s: (s.cwd, -s.updated_at_ms, s.session_id))
        return listed + unindexed


def _summary(entry: index.IndexEntry, *, indexed: bool) -> SessionSummary:
    return SessionSummary(
        session_id=entry.session_id,
        cwd=entry.cwd,
        title=entry.title,
        updated_at_ms=entry.updated_at_ms,
        last_status=entry.last_status,
        created_at_ms=entry.created_at_ms,
        indexed=indexed,
    )


def listing_lines(rows: list[SessionSummary], now_ms: int) -> list[str]:
    """The text of ``mind sessions``: one line per session, then the unindexed ones.

    Indexed sessions: ``id  status  age  cwd  title`` in the order given (most
    recent first from :meth:`Store.summaries`). Sessions without an index row
    follow under a heading, grouped by cwd.

    Args:
        rows: summaries as returned by :meth:`Store.summaries`.
        now_ms: the current time, Unix epoch milliseconds (for "3 min ago").

    Returns:
        Lines without newlines; ``["no sessions yet"]`` for no rows.
    """
    if not rows:
        return ["no sessions yet"]
    out = [
        f"{s.session_id}  {s.last_status or '-':<11}  "
        f"{index.format_age(s.updated_at_ms, now_ms):<12}  {s.cwd}  {s.title}".rstrip()
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
                out.append(f"  {cwd or '(unknown cwd)'}")
            out.append(f"    {s.session_id}  {index.format_age(s.updated_at_ms, now_ms)}")
    return out
