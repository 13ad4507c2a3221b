"""The library API: a runtime hosting sessions (``Runtime``).

The parts: :mod:`mind.shell.session` (input, the mailbox), :mod:`mind.shell.turn_driver`
(the turn loop), :mod:`mind.shell.tool_calls` (one tool call), :mod:`mind.shell.turn_handle`
(``Turn``, ``TurnOutcome``), :mod:`mind.shell.recovery` (closing what a crash left open).
The names of the public API are re-exported here.

``mind exec``, the REPL and embedders all use this one code path::

    async with Runtime.open() as rt:                       # state root from MIND_STATE_HOME
        session = await rt.create_session(cwd=Path.cwd(), config=resolved)
        turn = session.submit("fix the failing test")
        async for event in turn:                            # typed mind.generated.events structs
            if isinstance(event, ApprovalRequestedEvent):   # journaled before this event
                session.answer(event.interaction_id, "approve_once")  # -> Answered | NotTaken
        print(turn.outcome.status)

Input (docs/design/mailbox.md): every input — a prompt, steering for the running
turn, or text queued for the next turn — is durable in the session's
``inbox.json`` before it is accepted (:meth:`Session.send`). The pure
:class:`~mind.machines.mailbox.Mailbox` decides where it goes; a turn claims
its inputs when it opens, takes steering at each model-request boundary
(after the pending tool results) and finally drains-or-seals.

A turn is driven by :class:`mind.machines.turn.TurnMachine` (the machine
decides which transitions are legal; this module performs the I/O and feeds
results back as events). Durable boundaries (docs/design/turn.md §2; named in
:mod:`mind.shell.faults`): ``turn_started`` and the turn's inputs are fsynced
before the first model request; every model round and tool result is
journaled as it completes; the terminal ``turn_completed`` record — which
also acknowledges the inputs the turn consumed — is fsynced, and only then
are those inputs removed from the inbox. An aborted turn, or one that failed
on a transient error, acknowledges nothing: its inputs replay.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, final

import anyio

from mind.errors import (
    MountRefused,
)
from mind.machines.session_startup import SessionStartup
from mind.shell.config import ResolvedConfig
from mind.shell.ids import new_session_id
from mind.shell.interactions import Answered, NotTaken
from mind.shell.keyed_mutex import KeyedMutex
from mind.shell.mounts import PUBLISH_INTERVAL_S, MountLedger
from mind.shell.providers import Provider
from mind.shell.recovery import (
    ABORTED_OUTPUT,
    ABORTED_UNSTARTED_OUTPUT,
    CRASHED_OUTPUT,
    CRASHED_UNSTARTED_OUTPUT,
    INTERRUPTED_OUTPUT,
    INTERRUPTED_UNAPPROVED_OUTPUT,
    INTERRUPTED_UNSTARTED_OUTPUT,
    close_open_calls,
    recover_journal,
    settled_inputs,
)
from mind.shell.session import Disposition, InputKind, InputReceipt, Session, first_line
from mind.shell.startup import Opening, run_startup
from mind.shell.store import SessionSummary, Store, state_home
from mind.shell.turn_handle import Decision, Turn, TurnOutcome

log = logging.getLogger("mind.runtime")


@final
class Runtime:
    """Hosts sessions of one state root and runs their turns in a task group.

    Use :meth:`open` as an async context manager; leaving it cancels running
    turns (they end ``aborted``: their inputs replay next time), closes
    providers and journals, and releases the session leases.
    """

    def __init__(self, store: Store, tg: anyio.abc.TaskGroup) -> None:
        self.store = store
        self._tg = tg
        self._sessions: dict[str, Session] = {}
        self._opening: KeyedMutex[str] = KeyedMutex()
        """Serialises opens of one session id (docs/design/processes.md §8): a
        second open waits and finds the first's handle instead of racing
        its claim, lease and journal."""
        self.closing = False
        self.mounts = MountLedger(store.root)
        """This process's record in ``session-mounts.json`` (docs/design/mounts.md): which
        sessions it hosts, published for other mind processes to see."""

    @classmethod
    @asynccontextmanager
    async def open(
        cls, *, state_root: Path | None = None, env: Mapping[str, str] | None = None
    ) -> AsyncIterator[Runtime]:
        """Open the runtime on ``state_root`` (default from ``MIND_STATE_HOME``).

        Raises:
            StateDirError: the state root cannot be created or written.
        """
        root = state_root if state_root is not None else state_home(env or os.environ)
        store = Store(root)
        body_error: BaseException | None = None
        async with anyio.create_task_group() as tg:
            rt = cls(store, tg)
            tg.start_soon(rt._republish_forever)
            try:
                yield rt
            except BaseException as exc:  # re-raised below, unwrapped by the task group
                body_error = exc
            finally:
                rt.closing = True
                tg.cancel_scope.cancel()
        for s in rt._sessions.values():
            with anyio.CancelScope(shield=True):
                await s.provider.aclose()
        with anyio.CancelScope(shield=True):  # leaving always gives back what was taken
            await anyio.to_thread.run_sync(rt._give_back_all)
        if body_error is not None:
            raise body_error

    def _give_back_all(self) -> None:
        """On leaving: close every journal, then release the leases, this
        process's ledger record and the index — in that order (no write may
        follow a claim's release, docs/design/mounts.md §5). Blocking (the
        ledger rewrite backs off up to ~1 s while another process holds its
        lock, the index writer is joined): called in a worker thread."""
        for s in self._sessions.values():
            s.journal.close()
            s.lease.release()
        # Normal exit clears this record (docs/design/mounts.md §7); when the
        # rewrite is refused, readers ignore a dead pid's record anyway.
        if not self.mounts.close():
            log.warning("could not clear this process's session mounts")
        self.store.close()

    async def _close_broken(self, session: Session) -> None:
        """Stop hosting a session whose journal refuses appends, so it can be
        opened afresh: the journal is closed before the lease and the mount
        claim are given back (no write may follow the claim's release, docs/design/mounts.md §5), in
        a worker thread (the claim's release takes the ledger lock, with its backoff); the provider
        is closed in the background."""
        del self._sessions[session.session_id]
        self._tg.start_soon(session.provider.aclose)

        def give_back() -> None:
            session.journal.close()
            session.lease.release()
            if not session.mount.release():
                log.warning("could not clear session %s from session mounts", session.session_id)

        with anyio.CancelScope(shield=True):  # taken out of hosting: always given back
            await anyio.to_thread.run_sync(give_back)

    def _spawn(self, fn: Callable[[Turn], Any], turn: Turn) -> None:
        self._tg.start_soon(fn, turn)

    async def _republish_forever(self) -> None:
        """Rewrite this process's ledger record every 15 s (docs/design/mounts.md §7), so a
        record lost to a concurrent writer's crash comes back. Runs in the
        runtime's task group: it never keeps the process alive."""
        while True:
            await anyio.sleep(PUBLISH_INTERVAL_S)
            try:
                await anyio.to_thread.run_sync(self.mounts.republish)
            except MountRefused as exc:  # busy or damaged ledger: try again next time
                log.warning("could not republish session mounts: %s", exc)

    @property
    def sessions(self) -> dict[str, Session]:
        """The sessions this runtime hosts, by id (attached or parked)."""
        return dict(self._sessions)

    def list_sessions(self) -> list[SessionSummary]:
        """Summaries of every session of the state root, most recent first."""
        return self.store.summaries()

    async def create_session(
        self,
        *,
        cwd: Path,
        config: ResolvedConfig,
        session_id: str | None = None,
        interactive: bool = False,
    ) -> Session:
        """Create a new session (lease, journal + ``session_started``) and host it.

        The steps and what a failure gives back are the startup chart's
        (``specs/statecharts/session_startup.yaml``, performed by
        :mod:`mind.shell.startup`); a directory made here for the new id is
        removed again when creation fails. Nothing blocks the event loop: the
        file steps — the mount claim with its backoff (up to ~1 s), the
        lease's ``flock``, journal and inbox writes — run in worker threads.

        Args:
            cwd: working directory, frozen for the session (made absolute).
            config: provider settings and approval policy.
            session_id: caller-chosen id (default: a fresh UUIDv7).
            interactive: whether approvals can be asked (False: refused).

        Raises:
            SessionError: a session with that id already exists.
            SessionOccupiedError: another live process is creating it.
            MountRefused: the session is mounted by another process.
            ValueError: the id is not a safe directory name.
        """
        sid = session_id or new_session_id()
        opening = Opening(self, sid, config, interactive, cwd)
        machine = SessionStartup()
        machine.create(directory_existed=os.path.lexists(opening.directory))
        return await self._started(opening, machine)

    async def open_session(
        self,
        session_id: str,
        *,
        config: ResolvedConfig,
        interactive: bool = False,
        create: bool = False,
        cwd: Path | None = None,
        provider: Provider | None = None,
    ) -> Session:
        """Open an existing session (or create it when ``create``), recovering it.

        Startup order (docs/design/recovery.md §2; the chart
        ``specs/statecharts/session_startup.yaml`` decides it, and
        :mod:`mind.shell.startup` performs each step): claim the mount, take
        the lease, open the journal, repair orphan processes and pending
        interactions (nothing records them yet), open the inbox filtered by
        the journal's acknowledgements (rewriting the file when a crash left
        acknowledged input in it), give each orphan tool call a durable
        synthetic result (it is never re-run), close each unterminated turn
        — what remains in the inbox is recovered input that replays, in
        order, with the next turn (:meth:`Session.resume_pending` or the next
        :meth:`Session.send`). A failure part-way gives back what was taken,
        in reverse. Opens of one id are serialised (docs/design/processes.md
        §8). Re-opening a session this runtime already hosts returns
        the same handle — unless its journal is broken (a write failed: disk
        full, quota, I/O error) and no turn runs: then that handle is closed
        (journal, lease, mount claim given back, in that order) and the
        session is opened afresh by these same rules, so after space is freed
        it goes on in this process with nothing lost (docs/design/recovery.md §2).
        ``provider`` replaces the one ``config`` describes (``mind inbox
        --drop`` opens a session that runs no turn). As in
        :meth:`create_session`, the file steps run in worker threads: the
        event loop never waits on the mount lock, the lease or a journal.

        Raises:
            SessionError: no such session and not ``create``.
            SessionOccupiedError: another live process holds the session.
            MountRefused: the session is mounted by another process.
            JournalCorruptError: the journal is damaged (path and line named).
            InboxCorruptError: the inbox is damaged or oversized (path named).
        """
        async with self._opening.hold(session_id):
            hosted = self._sessions.get(session_id)
            opening = Opening(
                self,
                session_id,
                config,
                interactive,
                cwd or Path.cwd(),
                provider=provider,
                hosted=hosted,
            )
            machine = SessionStartup()
            machine.open(
                already_hosted=hosted is not None,
                broken=hosted is not None and hosted.journal.broken is not None,
                busy=hosted is not None and hosted.busy,
                journal_exists=opening.journal_path.exists(),
                may_create=create,
                directory_existed=os.path.lexists(opening.directory),
            )
            return await self._started(opening, machine)

    async def _started(self, opening: Opening, machine: SessionStartup) -> Session:
        session = await run_startup(opening, machine)
        self._sessions[session.session_id] = session
        return session


__all__ = [
    "ABORTED_OUTPUT",
    "ABORTED_UNSTARTED_OUTPUT",
    "CRASHED_OUTPUT",
    "CRASHED_UNSTARTED_OUTPUT",
    "INTERRUPTED_OUTPUT",
    "INTERRUPTED_UNAPPROVED_OUTPUT",
    "INTERRUPTED_UNSTARTED_OUTPUT",
    "Answered",
    "Decision",
    "Disposition",
    "InputKind",
    "InputReceipt",
    "NotTaken",
    "Runtime",
    "Session",
    "Turn",
    "TurnOutcome",
    "close_open_calls",
    "first_line",
    "recover_journal",
    "settled_inputs",
]
