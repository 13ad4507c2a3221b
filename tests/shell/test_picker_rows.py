"""The /sessions picker says what ``mind sessions`` says."""

from __future__ import annotations

from mind.shell.repl import picker_rows
from mind.shell.store import INTERRUPTED, SessionSummary


def _summary(sid: str, **kw: object) -> SessionSummary:
    fields: dict[str, object] = {"cwd": "/w", "title": "", "updated_at_ms": 1, "last_status": ""}
    fields.update(kw)
    return SessionSummary(session_id=sid, **fields)  # type: ignore[arg-type]


def test_rows_of_sessions_not_hosted_here_use_the_listing_words() -> None:
    summaries = [
        _summary("killed", last_status="running"),  # no live holder: its process died
        _summary("leased", last_status="running", holder_pid=4242),  # not in the ledger
        _summary("ledger", last_status="completed"),
        _summary("broken", damage="/s/broken/journal.jsonl:3, integrity check failed"),
        _summary("blank", empty=True),
        _summary("done", last_status="completed"),
    ]
    rows = picker_rows(summaries, {}, "me", {"ledger": [77]}, now_ms=2)
    states = {r.session_id: (r.mark, r.state) for r in rows}
    assert states == {
        "me": ("●", "attached"),
        "killed": (" ", f"free · {INTERRUPTED}"),
        "leased": ("⊘", "occupied by pid 4242"),
        "ledger": ("⊘", "occupied by pid 77"),
        "broken": (" ", "damaged (/s/broken/journal.jsonl:3, integrity check failed)"),
        "blank": (" ", "empty"),
        "done": (" ", "free"),
    }
