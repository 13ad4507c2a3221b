"""``mind inbox SESSION [--drop ID]``: see, and take back, input that waits in a session.

Input accepted by a session stays in its ``inbox.json`` until a turn that
consumed it completes; a turn that fails on a transient error (or is aborted)
gives it back, and it goes — first — into the next turn of that session. So
that it is never resent silently (docs/design/mailbox.md §6):

- ``mind inbox SESSION`` lists what waits: id, kind, age, first line, and
  ``in a turn`` for input an unfinished turn has taken. It only reads (the
  journal and ``inbox.json``), so it works while another process holds the
  session.
- ``mind inbox SESSION --drop ID`` (an id or a unique prefix of one) drops one
  message for good: the session is held for the drop like ``exec --session``
  holds it (mount claim + lease; exit 3 naming the pid when another live
  process holds it), opened with the usual recovery, and
  :meth:`mind.shell.runtime.Session.drop` makes the drop durable. No model is
  configured or called.

:func:`announce` is the notice ``mind exec`` prints on stderr when a turn
ends with input still waiting.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TextIO

from mind.conversation import ModelRequest, StreamEvent
from mind.errors import SessionError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.config import ResolvedConfig
from mind.shell.inbox import Inbox
from mind.shell.index import format_age
from mind.shell.journal import Journal
from mind.shell.providers import ProviderSettings
from mind.shell.recovery import unterminated_turns
from mind.shell.runtime import Runtime, first_line, settled_inputs
from mind.shell.store import resolve_session_id
from mind.shell.terminal_text import plain

__all__ = ["announce", "announce_replay", "run", "waiting_lines"]

EXIT_OK = 0


def waiting_lines(rows: Sequence[tuple[str, str, int, str, str]], now_ms: int) -> list[str]:
    """One line per message: ``id  kind  age  [note]  first line``.

    Args:
        rows: ``(message_id, kind, accepted_at_ms, note, first_line)``; ``note``
            is ``""`` or e.g. ``"in a turn"``.
        now_ms: the current time, Unix epoch milliseconds.
    """
    out = []
    for message_id, kind, accepted_at_ms, note, line in rows:
        age = format_age(accepted_at_ms, now_ms)
        extra = f"  ({note})" if note else ""
        # Prompt text must not drive the terminal: the one sanitiser.
        out.append(f"  {message_id}  {kind:<10} {age:<12}{extra}  {plain(line)}")
    return out


def _rows(event: ev.InputWaitingEvent) -> list[tuple[str, str, int, str, str]]:
    return [
        (m.message_id, m.kind.value, m.accepted_at_ms, "", m.first_line) for m in event.messages
    ]


def announce_replay(event: ev.InputWaitingEvent, err: TextIO) -> None:
    """``mind exec``'s stderr notice at start: earlier input that goes into this run first."""
    if not event.messages:
        return
    print("mind: sent first, accepted earlier and never answered:", file=err)
    for line in waiting_lines(_rows(event), time.time_ns() // 1_000_000):
        print(line, file=err)


def announce(event: ev.InputWaitingEvent, err: TextIO) -> None:
    """``mind exec``'s stderr notice at the end: what still waits, and how to drop it."""
    count = len(event.messages)
    if not count:
        return
    noun = "message waits" if count == 1 else "messages wait"
    now_ms = time.time_ns() // 1_000_000
    rows = _rows(event)
    print(
        f"mind: {count} {noun} in session {event.session_id} and will be sent "
        "again, first, with the next turn of this session:",
        file=err,
    )
    for line in waiting_lines(rows, now_ms):
        print(line, file=err)
    print(
        f"mind: drop one with: {event.drop_command.replace('ID', event.messages[0].message_id)}"
        + (" (or another id)" if count > 1 else ""),
        file=err,
    )


class _NoModel:
    """The provider of a session opened only to drop input: no turn runs."""

    name = "none"
    label = "no model (mind inbox)"

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        raise RuntimeError("mind inbox runs no turn")
        yield  # pragma: no cover - makes this an async generator

    async def aclose(self) -> None:
        """Nothing to release."""


_NO_MODEL_CONFIG = ResolvedConfig(
    provider=ProviderSettings(kind="scripted", model="none"), approval="on-request"
)


async def run(args: argparse.Namespace) -> int:
    """List (or drop) the waiting input of ``args.session_id``; the exit code.

    Raises:
        SessionLookupError: no session has that id or prefix, or several do
            (exit 2 through ``mind.shell.cli``).
        SessionOccupiedError, MountRefused: ``--drop`` while another live
            process holds the session (exit 3 through ``mind.shell.cli``).
        DropRefused: the message cannot be dropped (exit 1).
        JournalCorruptError, InboxCorruptError: the session is damaged.
    """
    async with Runtime.open() as rt:
        sid = resolve_session_id(args.session_id, rt.store.session_ids())
        if args.drop is not None:
            session = await rt.open_session(sid, config=_NO_MODEL_CONFIG, provider=_NoModel())
            dropped = session.drop(args.drop)
            print(
                f"dropped {dropped.message_id} ({dropped.kind}): {first_line(dropped.text)}",
                file=sys.stdout,
            )
            left = len(session.waiting)
            if left:
                print(
                    f"mind: {left} other message(s) still wait (mind inbox {sid})", file=sys.stderr
                )
            return EXIT_OK
        directory = rt.store.session_dir(sid)
    rows = _read_waiting(directory / "journal.jsonl", directory / "inbox.json")
    if not rows:
        print(f"mind: nothing waits in session {sid}", file=sys.stderr)
        return EXIT_OK
    for line in waiting_lines(rows, time.time_ns() // 1_000_000):
        print(line.strip())
    print(f"mind: drop one with: mind inbox {sid} --drop ID", file=sys.stderr)
    return EXIT_OK


def _read_waiting(journal_path: Path, inbox_path: Path) -> list[tuple[str, str, int, str, str]]:
    """Rows of the unacknowledged, undropped inputs, read without holding the session."""
    with Journal.open(journal_path) as journal:
        records = list(journal.records)
        folded = journal.folded.settled  # what the records no longer held settled
    settled = settled_inputs(records) | folded
    # Open turns by their start: a kept message of a compacted turn has no terminal in memory.
    running = set(unterminated_turns(records))
    in_turn = {
        r.message_id for r in records if isinstance(r, jr.UserMessage) and r.turn_id in running
    }
    try:
        entries = Inbox.open(inbox_path, acknowledged=settled).entries
    except OSError as exc:
        raise SessionError(journal_path.parent.name, f"cannot read {inbox_path}: {exc}") from exc
    return [
        (
            e.message_id,
            e.kind.value,
            e.accepted_at_ms,
            "in a turn" if e.message_id in in_turn else "",
            first_line(e.text),
        )
        for e in entries
    ]
