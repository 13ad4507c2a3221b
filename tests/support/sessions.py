"""Setting up real sessions for tests: a scripted provider's configuration,
a session created in a real runtime, and the journal and inbox a process
killed inside a tool round leaves (docs/design/recovery.md §8).

Everything is real: the runtime, its journal (fsynced), inbox, lease and
mount ledger in a temporary state root; only the model is the offline
``scripted`` provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from tests.support import records as rec


def scripted_config(
    tmp_path: Path,
    replies: Sequence[Mapping[str, Any]],
    *,
    approval: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "script.yaml",
) -> mind.ResolvedConfig:
    """The configuration of a session answered by the ``scripted`` provider:
    ``replies`` (one per model round, the script's format) written to
    ``tmp_path / name``; ``approval`` as ``--approval`` (None: the default);
    ``env`` the environment settings are read from (default: none)."""
    script = tmp_path / name
    script.write_text(yaml.safe_dump([dict(r) for r in replies]), encoding="utf-8")
    extra = {"approval": approval} if approval is not None else {}
    return mind.resolve_config(
        provider="scripted", script=str(script), env=dict(env or {}), **extra
    )


def created_session(state: Path, cwd: Path, config: mind.ResolvedConfig) -> str:
    """A new session under state root ``state``, working in ``cwd``, created
    in a runtime that is closed again; returns its id."""

    async def create() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            return (await rt.create_session(cwd=cwd, config=config)).session_id

    return anyio.run(create)


def add_inputs(directory: Path, kinds: Sequence[tuple[str, InboxKind]]) -> None:
    """Accept inputs into the inbox of the session in ``directory``: each
    ``(message id, kind)``, its text the id."""
    inbox = Inbox.open(directory / "inbox.json", acknowledged=())
    for mid, kind in kinds:
        inbox.add(
            InboxEntry(message_id=mid, text=mid, kind=kind, accepted_at_ms=1, recovered=False)
        )


def append_records(directory: Path, sid: str, records: Sequence[jr.JournalRecord]) -> None:
    """Append ``records`` (fsynced) to the journal of session ``sid`` in ``directory``."""
    with Journal.open(directory / "journal.jsonl", session_id=sid) as journal:
        for record in records:
            journal.append(record, sync=True)


def crashed_turn_session(
    tmp_path: Path,
    config: mind.ResolvedConfig,
    calls: Sequence[jr.RecordedToolCall],
    after_round: Sequence[jr.JournalRecord] = (),
) -> tuple[Path, str]:
    """A session in ``tmp_path / "state"`` (cwd ``tmp_path``, with
    ``notes.txt`` holding ``hello``) whose turn ``t1`` (input ``m1``)
    journaled a tool round with ``calls``, then ``after_round``, and stopped
    there (a crash); input ``m2`` was accepted later and waits.

    Returns:
        ``(state root, session id)``.
    """
    state = tmp_path / "state"
    (tmp_path / "notes.txt").write_text("hello\n", encoding="utf-8")
    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    add_inputs(directory, [("m1", InboxKind.prompt), ("m2", InboxKind.prompt)])
    append_records(
        directory,
        sid,
        [
            rec.turn_started("t1"),
            rec.user_message("t1", "m1", "m1", jr.Kind.prompt),
            rec.model_round("t1", "", list(calls)),
            *after_round,
        ],
    )
    return state, sid
