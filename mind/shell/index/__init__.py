"""The session index ``<state root>/index.db``: derived rows for listing sessions.

- :mod:`mind.shell.index.db` — the SQLite file: schema, queries, the
  unusable-index fallback (:class:`SessionIndex`).
- :mod:`mind.shell.index.writer` — the background thread that performs
  :meth:`SessionIndex.note` so that the event loop never waits for SQLite.
- :mod:`mind.shell.index.rows` — rows derived from journals through the
  journal's own reader (:mod:`mind.shell.journal`).
- :mod:`mind.shell.index.age` — "3 min ago".
"""

from __future__ import annotations

from mind.shell.index.age import format_age
from mind.shell.index.db import (
    BUSY_TIMEOUT_MS,
    FLUSH_TIMEOUT_S,
    INDEX_FILE,
    QUICK_BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    SessionIndex,
    SessionSource,
)
from mind.shell.index.rows import (
    CATCH_UP_MAX_BYTES,
    FINGERPRINT_BYTES,
    HEAD_PEEK_MAX_BYTES,
    TITLE_MAX_CHARS,
    IndexEntry,
    ReadRange,
    catch_up,
    peek_head,
    read_range,
    scan_journal,
    tail_fingerprint,
    title_of,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "CATCH_UP_MAX_BYTES",
    "FINGERPRINT_BYTES",
    "FLUSH_TIMEOUT_S",
    "HEAD_PEEK_MAX_BYTES",
    "INDEX_FILE",
    "QUICK_BUSY_TIMEOUT_MS",
    "SCHEMA_VERSION",
    "TITLE_MAX_CHARS",
    "IndexEntry",
    "ReadRange",
    "SessionIndex",
    "SessionSource",
    "catch_up",
    "format_age",
    "peek_head",
    "read_range",
    "scan_journal",
    "tail_fingerprint",
    "title_of",
]
