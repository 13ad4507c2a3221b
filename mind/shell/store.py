"""Where mind keeps its files: the config root and the state root (DESIGN §4).

``MIND_HOME`` (default ``~/.mind``) holds ``config.toml``; ``MIND_STATE_HOME``
(default: ``MIND_HOME``) holds ``sessions/<session_id>/``. The state root must
be creatable and writable: an explicit root that fails stops startup with
:class:`~mind.errors.StateDirError`, never a fallback to another location.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from mind.errors import StateDirError

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""Accepted session ids: a safe directory name (no separators, no leading dot)."""


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
        title: first prompt, truncated to 80 characters ("" if none yet).
        updated_at_ms: journal mtime, Unix epoch milliseconds.
        last_status: status of the last terminal record, "running"/"" if none.
    """

    session_id: str
    cwd: str
    title: str
    updated_at_ms: int
    last_status: str


class Store:
    """The state root and its per-session directories.

    Args:
        root: the state root; created with mode 0700 if missing.

    Raises:
        StateDirError: the root cannot be created or is not writable.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sessions_dir = root / "sessions"
        try:
            self.sessions_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StateDirError(root, exc.strerror or str(exc)) from exc
        if not os.access(self.sessions_dir, os.W_OK | os.X_OK):
            raise StateDirError(root, "not writable")

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

    def summaries(self) -> list[SessionSummary]:
        """A :class:`SessionSummary` per session, most recently updated first.

        Reads only the head (first 64 KiB) and the tail (last 64 KiB) of each
        journal — never whole journals. Damaged heads/tails show as blanks.
        """
        out = [_summarise(sid, self.journal_path(sid)) for sid in self.session_ids()]
        out.sort(key=lambda s: s.updated_at_ms, reverse=True)
        return out


_PEEK_BYTES = 64 * 1024


def _summarise(session_id: str, path: Path) -> SessionSummary:
    cwd = title = status = ""
    try:
        st = path.stat()
        with path.open("rb") as f:
            head = f.read(_PEEK_BYTES)
            f.seek(max(0, st.st_size - _PEEK_BYTES))
            tail = f.read(_PEEK_BYTES)
    except OSError:
        return SessionSummary(
            session_id=session_id, cwd="", title="", updated_at_ms=0, last_status=""
        )
    for line in head.split(b"\n")[:-1]:
        rec = _loose(line)
        if rec.get("type") == "session_started" and not cwd:
            cwd = str(rec.get("cwd", ""))
        if rec.get("type") == "user_message" and not title:
            title = " ".join(str(rec.get("text", "")).split())[:80]
            break
    for line in reversed(tail.split(b"\n")):
        rec = _loose(line)
        if rec.get("type") == "turn_completed":
            status = str(rec.get("status", ""))
            break
        if rec.get("type") == "turn_started":
            status = "running"
            break
    return SessionSummary(
        session_id=session_id,
        cwd=cwd,
        title=title,
        updated_at_ms=st.st_mtime_ns // 1_000_000,
        last_status=status,
    )


def _loose(line: bytes) -> dict[str, object]:
    """Lenient decode for display only (never used to grant or replay anything)."""
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
