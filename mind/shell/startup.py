"""Performing the startup chart's steps for one session (``session_startup.yaml``).

:class:`~mind.machines.session_startup.SessionStartup` names each step;
:class:`Opening` performs it and holds what was taken (mount claim, lease,
journal, inbox), so a failure part-way gives back exactly what the chart
names, in its order. :func:`run_startup` is the loop
:meth:`mind.shell.runtime.Runtime.open_session` and ``create_session`` use.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread

from mind._version import __version__
from mind.errors import JournalCorruptError, SessionError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.session_startup import SessionStartup, StartupEffect
from mind.machines.turn_replay import ResumePlan
from mind.shell.call_questions import expect_running_questions
from mind.shell.config import ResolvedConfig, session_secrets
from mind.shell.effect_records import UnknownEffect
from mind.shell.inbox import Inbox
from mind.shell.interactions import withdraw_moot
from mind.shell.journal import Journal
from mind.shell.lease import SessionLease
from mind.shell.mounts import MountHandle
from mind.shell.open_reconciliation import reconcile_at_open, redrive_rule
from mind.shell.providers import Provider, make_provider
from mind.shell.recovery import (
    ClosedTurns,
    close_orphan_calls,
    close_unterminated_turns,
    resumable_turn,
    settled_inputs,
)
from mind.shell.session import Session

if TYPE_CHECKING:
    from mind.shell.runtime import Runtime

log = logging.getLogger("mind.runtime")

__all__ = ["Opening", "run_startup"]


@dataclass(eq=False)
class Opening:
    """One startup of one session: its inputs and what its steps took.

    Attributes:
        runtime: the runtime that will host the session.
        session_id: the session's id.
        config: provider settings and approval policy.
        interactive: whether approvals can be asked.
        cwd: the working directory of a new session (absolute once created).
        provider: the provider to use (``None``: made from ``config``).
        hosted: the handle this runtime already holds (reused or closed).
        settled: input ids the journal settles (acknowledged or dropped),
            found once by ``open_inbox`` and handed to the session.
        unknown_effects: effects whose outcome is unknown after a crash, left
            for a person's ``reconcile`` answer (only when ``interactive``).
        resume: the crashed turn this startup resumes instead of closing
            (docs/design/recovery.md §8), decided at ``closing_orphan_calls``.
    """

    runtime: Runtime
    session_id: str
    config: ResolvedConfig
    interactive: bool
    cwd: Path
    provider: Provider | None = None
    hosted: Session | None = None
    mount: MountHandle | None = None
    lease: SessionLease | None = None
    journal: Journal | None = None
    inbox: Inbox | None = None
    synthetic: int = 0
    unknown_effects: list[UnknownEffect] = field(default_factory=list)
    closed: ClosedTurns = field(default_factory=ClosedTurns)
    settled: frozenset[str] = frozenset()
    resume: ResumePlan | None = None
    session: Session | None = None

    @property
    def directory(self) -> Path:
        """``sessions/<id>/`` under the state root."""
        return self.runtime.store.session_dir(self.session_id)

    @property
    def journal_path(self) -> Path:
        """The session's ``journal.jsonl``."""
        return self.directory / "journal.jsonl"

    async def perform(self, effect: StartupEffect, machine: SessionStartup) -> None:
        """Do one step the chart named. A forward step raises on failure; a
        release (best effort) logs instead. File steps run in a worker thread
        (the mount claim's lock backoff sleeps up to ~1 s, the lease takes a
        blocking ``flock``, journal and inbox writes fsync), so the event
        loop never stalls on them; hosting touches the runtime and runs on
        the loop, as does closing a broken hosted handle (its releases in a
        thread).

        Raises:
            MountRefused, SessionOccupiedError, SessionError, JournalCorruptError,
            InboxCorruptError, StorageError: the step failed; nothing of this
            step is left taken.
        """
        steps: dict[StartupEffect, Callable[[SessionStartup], None]] = {
            "claim_mount": self._claim_mount,
            "take_lease": self._take_lease,
            "create_journal": self._create_journal,
            "open_journal": self._open_journal,
            "repair_processes": self._repair_processes,
            "repair_interactions": self._repair_interactions,
            "open_inbox": self._open_inbox,
            "close_orphan_calls": self._close_orphan_calls,
            "close_turns": self._close_turns,
            "host": self._host,
            "close_journal": self._close_journal,
            "release_lease": self._release_lease,
            "release_mount": self._release_mount,
            "discard_directory": self._discard_directory,
        }
        if effect == "close_broken":
            assert self.hosted is not None
            await self.runtime._close_broken(self.hosted)  # its releases run in a thread
            self.hosted = None
        elif effect == "host":  # touches the runtime's own state: on the loop
            steps[effect](machine)
        else:
            await anyio.to_thread.run_sync(steps[effect], machine)

    # ------------------------------------------------------------ forward steps

    def _claim_mount(self, machine: SessionStartup) -> None:
        self.mount = self.runtime.mounts.claim(self.session_id, new_session=machine.new_session)

    def _take_lease(self, _machine: SessionStartup) -> None:
        self.lease = SessionLease.acquire(self.directory / "lease", self.session_id)

    def _create_journal(self, _machine: SessionStartup) -> None:
        if self.journal_path.exists():
            raise SessionError(self.session_id, "already exists")
        journal = Journal.open(
            self.journal_path, create=True, session_id=self.session_id, checkpoints=True
        )
        try:
            journal.append(
                jr.SessionStarted(
                    seq=0,
                    recorded_at_ms=0,
                    session_id=self.session_id,
                    cwd=str(self.cwd.resolve()),
                    mind_version=__version__,
                ),
                sync=True,
            )
        except BaseException:
            journal.close()  # the step takes the journal whole or not at all
            raise
        self.journal = journal

    def _open_journal(self, _machine: SessionStartup) -> None:
        # Listing and opening agree: damage the index found in this very
        # file refuses the open, though its checkpoint would prove itself.
        known = self.runtime.store.recorded_damage(self.session_id)
        if known is not None:
            raise known
        self.journal = Journal.open(
            self.journal_path,
            session_id=self.session_id,
            checkpoints=True,
            on_damage=self._record_damage,
        )

    def _record_damage(self, found: JournalCorruptError) -> None:
        """Damage the background check found goes into the session index, so
        ``mind sessions`` and the next open say it (never raises)."""
        if found.line:  # 0: no line to name (a read error, or sound lines)
            self.runtime.store.index.note(self.session_id, damage=(found.line, found.detail))

    def _repair_processes(self, _machine: SessionStartup) -> None:
        """Effects a crash left prepared and unanswered, before orphan calls
        are closed (docs/design/effects.md §4): a finished supervisor's exit
        record becomes the result; a running one is left to the resumed
        turn, which waits for it; an unknown non_idempotent one
        is never re-run; when nobody can answer, the model is told what is
        known; otherwise it waits for the person's ``reconcile`` answer."""
        assert self.journal is not None
        done = reconcile_at_open(
            self.journal,
            self.session_id,
            can_ask=self.interactive,
            effects_dir=self.directory / "effects",
            secrets=session_secrets(self.config),
        )
        self.synthetic += done.told  # each got a synthetic "outcome unknown" result
        self.unknown_effects = list(done.waiting)

    def _repair_interactions(self, _machine: SessionStartup) -> None:
        """Questions the repairs made moot (a ``running`` question whose
        command was just collected) are withdrawn, durably
        (docs/design/interactions.md §6); unanswered others stay, re-offered
        when their turn is re-driven."""
        assert self.journal is not None
        withdraw_moot(self.journal)

    def _open_inbox(self, _machine: SessionStartup) -> None:
        assert self.journal is not None
        # The records retained, and what those a compaction let go of settled.
        acknowledged = settled_inputs(self.journal.records) | self.journal.folded.settled
        self.settled = frozenset(acknowledged)  # computed once: the session gets it too
        inbox = Inbox.open(self.directory / "inbox.json", acknowledged=acknowledged)
        # The file too: a crash after the terminal record, before the
        # cleanup, left acknowledged input in it (docs/design/mailbox.md §3).
        inbox.remove(acknowledged)
        self.inbox = inbox

    def _close_orphan_calls(self, _machine: SessionStartup) -> None:
        assert self.journal is not None
        # The guard (turn_replay.resume_plan) decides which crashed turn goes
        # on: its re-driven calls get no synthetic result (recovery.md §8).
        records = self.journal.records
        rule = redrive_rule(records, self.session_id, self.directory / "effects")
        self.resume = resumable_turn(records, redrivable=rule, can_ask=self.interactive)
        self.synthetic += close_orphan_calls(self.journal, resume=self.resume)

    def _close_turns(self, _machine: SessionStartup) -> None:
        assert self.journal is not None and self.inbox is not None
        self.closed = close_unterminated_turns(self.journal, resume=self.resume)
        # As at the end of any turn: the receipt is durable, then its inputs leave the inbox.
        self.inbox.remove(self.closed.acknowledged)

    def _host(self, machine: SessionStartup) -> None:
        assert self.journal is not None and self.inbox is not None
        assert self.lease is not None and self.mount is not None and self.provider is not None
        started = next((r for r in self.journal.records if isinstance(r, jr.SessionStarted)), None)
        cwd = Path(started.cwd) if started else self.cwd
        if machine.new_session:
            self.runtime.store.index.note(self.session_id, cwd=str(cwd))
        session = Session(
            self.runtime,
            self.session_id,
            self.journal,
            self.inbox,
            self.lease,
            cwd,
            self.config,
            interactive=self.interactive,
            provider=self.provider,
            mount=self.mount,
            settled=self.settled | set(self.closed.acknowledged),
        )
        if not machine.new_session:
            resumed = set(self.resume.inputs) if self.resume is not None else set()
            session.recovery = ev.SessionRecoveredEvent(
                session_id=self.session_id,
                aborted_turns=self.closed.aborted,
                completed_turns=self.closed.completed,
                resumed_turns=int(self.resume is not None),
                synthetic_results=self.synthetic,
                # A resumed turn's own inputs are its, not replayed by a new turn.
                replayed_inputs=sum(e.message_id not in resumed for e in self.inbox.entries),
            )
        if self.resume is not None:
            # Known from the journal now: its running commands' questions
            # are pending (and answerable) before the turn is iterated.
            expect_running_questions(session, self.resume.turn_id)
        self.mount.settle(attached=True)  # last: a failure before it leaves the claim reserved
        if self.resume is not None:
            # The session opens busy with the resumed turn (nothing can fail here).
            session._resume_turn(self.resume)
        self.session = session

    # ------------------------------------------------------------ releases

    def _close_journal(self, _machine: SessionStartup) -> None:
        if self.journal is not None:
            self.journal.close()

    def _release_lease(self, _machine: SessionStartup) -> None:
        if self.lease is not None:
            self.lease.release()

    def _release_mount(self, _machine: SessionStartup) -> None:
        if self.mount is not None and not self.mount.abandon():
            log.warning("could not clear session %s from session mounts", self.session_id)

    def _discard_directory(self, _machine: SessionStartup) -> None:
        """Remove the directory of a session whose creation failed (disk full,
        a refused lease…), so no ``empty`` session is listed once space is
        freed. The chart names this step only for a directory this startup
        made for a brand-new id, after its lease and mount claim were given
        back; best effort (a leftover is listed ``empty``, as after a crash)."""
        shutil.rmtree(self.directory)


async def run_startup(opening: Opening, machine: SessionStartup) -> Session:
    """Perform the steps ``machine`` names until startup ends.

    Returns:
        The hosted session (``ready``), or the handle already hosted (``reused``).

    Raises:
        SessionError: no such session (the chart refused at ``idle``).
        BaseException: the error of the step that failed, after the chart's
            releases ran (a release that fails is logged, never raised).
    """
    error: BaseException | None = None
    while (effect := machine.effect) is not None:
        if machine.releasing:
            # Shielded: a cancelled startup still gives back what it took.
            with anyio.CancelScope(shield=True):
                try:
                    await opening.perform(effect, machine)
                except Exception as exc:  # best effort: the next release still runs
                    log.warning("session %s: %s failed: %s", opening.session_id, effect, exc)
            machine.done()
            continue
        try:
            if effect == "claim_mount":
                # A bad script or provider setting fails here, before anything is taken.
                opening.provider = opening.provider or make_provider(opening.config.provider)
            await opening.perform(effect, machine)
        except BaseException as exc:  # re-raised once what was taken is given back
            error = exc
            machine.step_failed()
        else:
            machine.done()
    if machine.outcome == "ready":
        assert opening.session is not None
        return opening.session
    if machine.outcome == "reused":
        assert opening.hosted is not None
        return opening.hosted
    if error is not None:
        raise error
    raise SessionError(opening.session_id, "no such session")
