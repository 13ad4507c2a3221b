"""The session picker (``/sessions``): its rows, its focus, and how it is drawn.

The rows say, for every session this process hosts and every listed one,
whether it is attached, parked, occupied by another process or free, with
the runtime's wording (docs/design/mounts.md §1). While shown, the rows are re-read on
the REPL's tick, never from a snapshot taken at render time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, final

from prompt_toolkit.formatted_text import StyleAndTextTuples

from mind.errors import MindError
from mind.shell.call_summary import shorten
from mind.shell.index import format_age
from mind.shell.runtime import Session
from mind.shell.store import INTERRUPTED, SessionSummary

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

PICKER_REFRESH_S: Final = 2.0
"""While the session picker is shown, occupancy and the list are re-read this often
(docs/design/mounts.md §7: the screen's own tick, never a snapshot taken at render time)."""

PICKER_ROWS: Final = 12
"""Sessions shown at once in the picker; the window scrolls with the focus."""


@dataclass(frozen=True)
class PickerRow:
    """One line of the session picker (``/sessions``).

    Attributes:
        session_id: the session.
        mark: ``●`` attached, ``◐`` parked, ``⊘`` occupied by another process,
            `` `` free.
        state: ``attached``, ``parked``, ``parked · running``, ``occupied by pid N``
            (the runtime's wording) or ``free``.
        age: when it was last active, for people.
        title: its first prompt ("" if none).
        cwd: its working directory.
        group: for sessions without an index entry, the cwd heading printed
            before the first row of its group; else None.
    """

    session_id: str
    mark: str
    state: str
    age: str
    title: str
    cwd: str
    group: str | None = None

    @property
    def occupied(self) -> bool:
        """True when another live process holds the session (entry is refused)."""
        return self.mark == "⊘"


def picker_rows(
    summaries: list[SessionSummary],
    hosted: Mapping[str, Session],
    attached: str,
    holders: Mapping[str, list[int]],
    now_ms: int,
) -> list[PickerRow]:
    """The picker's rows: the attached session, the parked ones, then the others.

    Args:
        summaries: :meth:`Runtime.list_sessions` (indexed most recent first,
            then the unindexed ones grouped by cwd).
        hosted: this process's sessions by id (attached and parked).
        attached: the id of the session shown.
        holders: pids of *other* live processes listing a session, by id
            (sessions this process hosts are never occupied).
        now_ms: the current time, Unix epoch milliseconds.

    Returns:
        Every hosted session and every listed one, once each. A session not
        hosted here is "occupied by pid N" (a live ledger record, else a live
        lease holder), "empty", "damaged (path:line, reason)", "free ·
        interrupted (resume to recover)" (its process died mid-turn) or "free"
        — the same words as ``mind sessions``.
    """
    by_id = {s.session_id: s for s in summaries}
    rows: list[PickerRow] = []

    def row(sid: str, mark: str, state: str, group: str | None = None) -> PickerRow:
        summary = by_id.get(sid)
        session = hosted.get(sid)
        cwd = summary.cwd if summary else str(session.cwd) if session else ""
        return PickerRow(
            session_id=sid,
            mark=mark,
            state=state,
            age=format_age(summary.updated_at_ms, now_ms) if summary else "just now",
            title=summary.title if summary else "",
            cwd=cwd,
            group=group,
        )

    order = [attached] + [sid for sid in hosted if sid != attached]
    for sid in order:
        if sid == attached:
            rows.append(row(sid, "●", "attached"))
        else:
            running = hosted[sid].busy
            rows.append(row(sid, "◐", "parked · running" if running else "parked"))
    last_group: str | None = None
    for summary in summaries:
        sid = summary.session_id
        if sid in hosted:
            continue
        pids = holders.get(sid) or ([summary.holder_pid] if summary.holder_pid else [])
        if pids:  # the ledger's live records, else the session's live lease holder
            mark, state = "⊘", "occupied by pid " + ", ".join(map(str, pids))
        elif summary.empty or summary.damage:
            mark, state = " ", summary.status
        elif summary.status == INTERRUPTED:
            mark, state = " ", f"free · {INTERRUPTED}"
        else:
            mark, state = " ", "free"
        group = None
        if not summary.indexed and summary.cwd != last_group:
            last_group = summary.cwd
            group = summary.cwd or "(unknown cwd)"
        rows.append(row(sid, mark, state, group))
    return rows


@final
class Picker:
    """The picker shown under the input while ``/sessions`` is open.

    The focus is kept as a session id (the one fact it is derived from), so
    a re-read that reorders the rows keeps it on the same session.

    Args:
        repl: the REPL it belongs to (its runtime, hosted sessions, console).
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl
        self.rows: list[PickerRow] | None = None
        """The rows of the session picker while it is shown, else None."""
        self._focus: str | None = None
        """The focused row's session id: the one fact the focus is derived from."""
        self._read_at = -math.inf

    @property
    def shown(self) -> bool:
        """True while the picker is shown."""
        return self.rows is not None

    def open(self) -> None:
        """Show the session picker under the input (focus on the attached session)."""
        self._focus = self._repl.session.session_id
        self.refresh()

    def close(self) -> None:
        """Hide the session picker."""
        if self.rows is not None:
            self.rows = None
            self._repl.invalidate()

    def refresh(self) -> None:
        """Re-read the session list and who holds what (lenient ledger read, no write)."""
        repl = self._repl
        holders: dict[str, list[int]] = {}
        for record in repl.runtime.mounts.snapshot():
            if not record.is_self:
                for sid in record.session_ids:
                    holders.setdefault(sid, []).append(record.pid)
        try:
            summaries = repl.runtime.list_sessions()
        except MindError as exc:  # the hosted sessions are still shown
            repl.view.note(f"Could not list sessions: {exc}", style="yellow")
            summaries = []
        hosted = {sid: h.session for sid, h in repl.hosting.by_id.items()}
        self.rows = picker_rows(
            summaries, hosted, repl.session.session_id, holders, time.time_ns() // 1_000_000
        )
        self._read_at = repl.clock()
        repl.invalidate()

    def refresh_if_due(self) -> None:
        """Re-read the rows when shown and last read ``PICKER_REFRESH_S`` ago or more."""
        if self.rows is not None and self._repl.clock() - self._read_at >= PICKER_REFRESH_S:
            self.refresh()

    def focused(self) -> str | None:
        """The focused row's session id; None when there are no rows."""
        rows = self.rows or []
        return rows[self._focus_index(rows)].session_id if rows else None

    def _focus_index(self, rows: list[PickerRow]) -> int:
        """The focused row, derived from the focused session id (first row if gone)."""
        for i, row in enumerate(rows):
            if row.session_id == self._focus:
                return i
        return 0

    def move_focus(self, step: int) -> None:
        """Move the focus ``step`` rows (negative: up), stopping at the ends."""
        rows = self.rows or []
        if not rows:
            return
        index = min(max(0, self._focus_index(rows) + step), len(rows) - 1)
        self._focus = rows[index].session_id
        self._repl.invalidate()

    def lines(self) -> StyleAndTextTuples:
        """The session picker: a title, a window of rows around the focus, the keys."""
        rows = self.rows or []
        out: StyleAndTextTuples = [("class:picker.title", "Sessions"), ("", "\n")]
        if not rows:
            out += [("class:status.dim", "  no sessions yet\n")]
        focus = self._focus_index(rows)
        first = min(max(0, focus - PICKER_ROWS // 2), max(0, len(rows) - PICKER_ROWS))
        if first:
            out += [("class:status.dim", f"  ↑ {first} more\n")]
        width = max(40, self._repl.console.width)
        state_width = max([22, *(len(row.state) + 2 for row in rows)])
        here = str(self._repl.session.cwd)
        for i, row in enumerate(rows[first : first + PICKER_ROWS], start=first):
            if row.group is not None:
                out += [("class:picker.group", f"  not in the index · {row.group}\n")]
            style = {
                "●": "class:picker.attached",
                "◐": "class:picker.parked",
                "⊘": "class:picker.occupied",
            }.get(row.mark, "")
            state_style = style or "class:status.dim"
            head = f"{'›' if i == focus else ' '} {row.mark} {row.session_id}  "
            state = row.state.ljust(state_width)
            age = f"{row.age:<13}"
            room = width - len(head) - len(state) - len(age) - 2
            tail = " ".join((row.title or "(no prompt yet)").split())
            if row.cwd and row.cwd != here:
                tail += f" · {row.cwd}"
            tail = shorten(tail, max(10, room))
            focus_style = " class:picker.focus" if i == focus else ""
            out += [
                (style + focus_style, head),
                (state_style + focus_style, state),
                ("class:status.dim" + focus_style, age),
                (focus_style.strip(), tail),
                ("", "\n"),
            ]
        rest = len(rows) - first - PICKER_ROWS
        if rest > 0:
            out += [("class:status.dim", f"  ↓ {rest} more\n")]
        out += [
            (
                "class:status.dim",
                "  ↑↓ move · Enter enters · Esc closes · Ctrl+L re-lists"
                " · ● attached ◐ parked ⊘ occupied\n",
            )
        ]
        return out
