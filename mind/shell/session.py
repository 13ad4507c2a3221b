"""A session: its journal, inbox, mailbox and settings; accepting input
(``send`` / ``steer`` / ``queue`` / ``drop``) and starting turns.

One module (over 500 lines) because ``Session`` is the library surface:
its methods are short delegations to the mailbox, the interactions, the
effects and the turn driver, kept together so the public API reads in one place.
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Literal, final

import msgspec

from mind.context.usage import (
    ContextUsage,
    context_usage,
    context_window,
    learned_window,
    window_mismatch,
)
from mind.conversation import (
    has_lone_surrogates,
)
from mind.effects.policy import (
    ApprovalPolicy,
)
from mind.effects.retry import RetryPolicy
from mind.errors import (
    DAMAGED_JOURNAL_NEXT_STEP,
    CompactionRefused,
    DropNotAllowed,
    DropRefused,
    InputRefused,
    JournalCorruptError,
    SessionBusyError,
    SessionDamagedError,
    StorageError,
)
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.generated.vocabulary import DispositionName
from mind.machines.mailbox import Mailbox, MailboxMessage
from mind.machines.session_startup import reusable
from mind.machines.turn import next_turn_starts
from mind.machines.turn_replay import ResumePlan
from mind.shell import compaction, faults
from mind.shell.config import ResolvedConfig, session_secrets
from mind.shell.ids import new_id
from mind.shell.inbox import Inbox
from mind.shell.instructions import Instructions
from mind.shell.interactions import AnswerResult, Decision, Interactions, as_decision
from mind.shell.journal import Journal, read_records
from mind.shell.lease import SessionLease
from mind.shell.mounts import MountHandle
from mind.shell.providers import Provider, make_provider
from mind.shell.running_effects import RunningEffect, kill_running, running_effects
from mind.shell.sandbox.command import session_sandbox
from mind.shell.tool_env import tool_environment
from mind.shell.tools import ToolRunner, session_boundary
from mind.shell.turn_driver import TurnDriver, request_overhead_bytes
from mind.shell.turn_handle import EventChannel, EventFanOut, Turn, TurnOutcome

if TYPE_CHECKING:
    from mind.shell.runtime import Runtime


InputKind = Literal["prompt", "steer", "queue"]
"""How an input is meant: a prompt (start a turn when idle), steering for the
running turn, or text queued for the next turn."""

Disposition = DispositionName
"""Where an accepted input went (one definition: ``events.schema.json``): it
started a turn; it steers the running turn; it waits for the next turn
(queued, or the running turn was already sealed); or it runs behind older
recovered input."""


@final
class InputReceipt(msgspec.Struct, frozen=True, kw_only=True):
    """The answer to :meth:`Session.send`: the input is durable.

    Attributes:
        message_id: the input's id (the caller's, or a fresh one).
        disposition: where it went (see :data:`Disposition`).
        duplicate: True when this id was already accepted — an idempotent
            success that changed nothing (callers reuse ids on retry).
    """

    message_id: str
    disposition: Disposition
    duplicate: bool = False


@final
class Session:
    """One session: its journal, inbox, settings and at most one running turn.

    Create with :meth:`Runtime.create_session` or :meth:`Runtime.open_session`;
    the session holds its lease until the runtime closes. ``settled`` are
    the input ids no turn may take again (acknowledged by a terminal record
    or dropped), as startup found them in the journal
    (:func:`mind.shell.recovery.settled_inputs`, computed once there).
    """

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        journal: Journal,
        inbox: Inbox,
        lease: SessionLease,
        cwd: Path,
        config: ResolvedConfig,
        *,
        interactive: bool,
        provider: Provider | None = None,
        mount: MountHandle | None = None,
        settled: Collection[str] = (),
    ) -> None:
        self.runtime = runtime
        self.mount = mount if mount is not None else runtime.mounts.claim(session_id)
        self.session_id = session_id
        self.journal = journal
        self.inbox = inbox
        self.lease = lease
        self.cwd = cwd
        self.config = config
        self.interactive = interactive
        self.provider: Provider = provider or make_provider(config.provider)
        boundary = session_boundary(
            cwd,
            os.environ,
            mode=config.sandbox,
            add_dirs=config.add_dirs,
            state_roots=(runtime.store.root,),
            network=config.sandbox_network,
        )
        # One boundary for both: the file tools judge paths by it, the sandbox confines by it.
        self.sandbox = session_sandbox(boundary, environ=os.environ)
        self.tools = ToolRunner(
            cwd,
            env=tool_environment(os.environ, config.shell_environment),
            sandbox=self.sandbox,
            effects_dir=runtime.store.session_dir(session_id) / "effects",
        )
        self.secrets = session_secrets(config)
        """What :func:`~mind.shell.redact.redact` masks in this session's
        messages and tool results: the API key, the base URL's secrets and
        every provider key in mind's environment."""
        self._learned_window = learned_window(journal.records, config.provider.model)
        """The window the server's own error stated for this model (journaled), or None."""
        self._window_warned = False
        """A ``window_mismatch`` warning was emitted by this open session."""
        self.instructions = Instructions(
            cwd,
            os.environ,
            self.secrets,
            window=lambda: context_window(
                config.provider.model,
                configured=config.model_context_window,
                learned=self._learned_window,
            ),
        )
        """The system instructions: mind's prompt and the instructions files
        (read here and at each turn start; docs/design/context.md §4)."""
        self.interactions = Interactions(journal, answerable=self._answerable)
        """The session's questions to the person and its grants (their one
        owner; projected from the journal, so grants hold after resume)."""
        self.retry_policy = RetryPolicy(
            max_retries=config.max_retries, max_retry_s=config.max_retry_s
        )
        self.current: Turn | None = None
        self.resumed_turn: Turn | None = None
        """The turn a crash stopped inside a tool round that this open resumed
        (docs/design/recovery.md §8): running when the session is returned,
        iterate it like any ``Turn``; None when no turn was resumed."""
        self.turn_observers: list[object] = []
        """python-statemachine listeners attached to the turn machine of every
        turn this session starts (transition coverage, tracing, and the tests
        that make the chart refuse an event); they must not send events."""
        self.mailbox = Mailbox()
        # Ids no turn may take again (acknowledged by a terminal record, or
        # dropped): from here on the mailbox alone answers for them.
        self.mailbox.restore(
            [(e.message_id, e.text, e.kind.value) for e in inbox.entries],
            acknowledged=settled,
        )
        self.recovery: ev.SessionRecoveredEvent | None = None
        """What opening the session repaired (None for a new session)."""
        self.fanout = EventFanOut()
        """Where this session's turns publish their events, once per event."""
        self._events = self.fanout.subscribe(EventChannel())
        """The ``events()`` consumer's channel (bounded, see :class:`EventChannel`);
        session-level events (``input.accepted``, ``input.waiting``) go into it alone."""
        self._inputs: dict[str, jr.UserMessage] = {}
        """Journaled inputs by id, the last journaled of each (for :meth:`claimed_inputs`)."""
        self._inputs_indexed = 0
        """The seq up to which :attr:`_inputs` accounts for the journal (it only grows)."""
        self._consuming = False
        self._usage: tuple[int, ContextUsage] | None = None
        """:attr:`context_usage` and the journal length it was computed at."""

    @property
    def approval(self) -> ApprovalPolicy:
        """The session's approval policy."""
        return self.config.approval

    @property
    def busy(self) -> bool:
        """True while a turn owns the mailbox (the mailbox's ``has_turn_owner``:
        from the turn's start until its terminal record is written)."""
        return self.mailbox.has_turn_owner

    @property
    def compacting(self) -> bool:
        """True while a manual compaction (:meth:`compact`) runs between
        turns: it owns the mailbox, so input sent meanwhile waits for its end."""
        return self.mailbox.has_owner and not self.mailbox.has_turn_owner

    @property
    def untouched(self) -> bool:
        """True when nothing was ever sent to the session: its journal holds
        only ``session_started``, its inbox is empty and no turn runs (a start
        without input, which the REPL does not keep)."""
        records = self.journal.records
        return (
            self.journal.next_seq == 1
            and isinstance(records[0], jr.SessionStarted)
            and not self.inbox.entries
            and not self.busy
        )

    @property
    def checkpoint_fallback(self) -> str | None:
        """Why this open could not use the session's checkpoint and read its
        whole journal (docs/design/checkpoints.md §4: damaged, missing when
        one was due, another session's…), or ``None`` when it did not have
        to. Reported by the open that fell back only: it wrote a new one."""
        note = self.journal.report.checkpoint
        return None if note in ("", "used") else note

    @property
    def checkpoint_damage(self) -> str | None:
        """Damage the background check found in the journal prefix the
        opening checkpoint covered (docs/design/checkpoints.md §5:
        ``path:line: reason``), or ``None`` (none found, or not yet). Once
        set the checkpoint is gone and none is written again: the next open
        reads the journal whole and refuses it at that line."""
        check = self.journal.verification
        return None if check is None else check.damage

    def _damaged_at(self) -> JournalCorruptError | None:
        """:attr:`checkpoint_damage` as the error (path, line, why), or None."""
        check = self.journal.verification
        return None if check is None else check.damaged_at

    @property
    def storage_broken(self) -> str | None:
        """Why the session's journal refuses appends (a write or fsync failed:
        disk full, quota, I/O error), or ``None`` while it works. Once set, the
        session goes on only when opened afresh."""
        return self.journal.broken

    @property
    def reusable(self) -> bool:
        """Whether entering this hosted session again returns this handle: the
        startup chart's guard (:func:`mind.machines.session_startup.reusable`)
        on this session's facts. False: its storage is broken and no turn
        runs, so it is to be opened afresh."""
        broken = self.storage_broken is not None or self._damaged_at() is not None
        return reusable(broken=broken, busy=self.busy)

    @property
    def context_usage(self) -> ContextUsage:
        """The session's context usage now (docs/design/context.md §1): the
        last request's reported tokens, the model's window, the projected
        size of the next request; each ``None`` when unknown, never invented.

        Computed from the journal by :func:`mind.context.usage.context_usage`
        (reading back to the last model round), again only once the journal
        has grown.
        """
        records = self.journal.records
        # The newest seq, not the count: a compaction prunes what is held.
        newest = records[-1].seq if records else -1
        if self._usage is None or self._usage[0] != newest:
            fact = context_usage(
                records,
                model=self.config.provider.model,
                configured=self.config.model_context_window,
                learned=self._learned_window,
                output_limits=self.config.tool_output,
            )
            self._usage = (newest, fact)
        return self._usage[1]

    def context_usage_event(self, turn_id: str) -> ev.ContextUsageEvent:
        """The ``context.usage`` event of :attr:`context_usage` (unknown values
        left out; its ``basis`` is for the screen, not the event)."""
        fact = self.context_usage
        known = {
            k: v for k, v in msgspec.structs.asdict(fact).items() if v is not None and k != "basis"
        }
        return ev.ContextUsageEvent(turn_id=turn_id, **known)

    @property
    def stated_window(self) -> int | None:
        """The window (tokens) the server's own context-length error stated
        for this model (journaled ``context_window_learned``), or None."""
        return self._learned_window

    @property
    def window_mismatch(self) -> str | None:
        """Why the configured ``model_context_window`` contradicts the window
        the server stated for this model (:func:`mind.context.usage.window_mismatch`),
        or None. ``/status`` shows it; a turn warns once per open session."""
        return window_mismatch(self.config.model_context_window, self._learned_window)

    def window_warning(self, turn_id: str) -> ev.TurnWarningEvent | None:
        """The ``turn.warning`` (``window_mismatch``) for turn ``turn_id`` the
        first time this open session finds the mismatch; None after, or when
        there is none."""
        said = self.window_mismatch
        if said is None or self._window_warned:
            return None
        self._window_warned = True
        return ev.TurnWarningEvent(
            turn_id=turn_id, kind=ev.WarningKind.window_mismatch, message=said
        )

    def learn_window(self, window: int, turn_id: str) -> None:
        """Keep the window (tokens) the server's own context-length error stated:
        journaled (``context_window_learned``, made durable with the turn's
        next fsync), so it holds after a restart.

        The same window stated again is not journaled again (a session that
        keeps overflowing would otherwise grow a record per error).

        Raises:
            JournalWriteError: the record could not be written.
        """
        if window == self._learned_window:
            return
        self.journal.append(
            jr.ContextWindowLearned(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn_id,
                model=self.config.provider.model,
                window=window,
            )
        )
        self._learned_window = window
        # The instructions' caps scale to the window (context.md §4).
        self.instructions.refresh()

    def claimed_inputs(self, message_ids: list[str]) -> list[jr.UserMessage]:
        """The journaled inputs with these ids (an ``input.claimed`` event's
        ``message_ids``), in the order given; ids not journaled are left out.

        A claim is journaled before it is announced, so every id of an
        ``input.claimed`` event is found; an input claimed again after
        recovery is found as last journaled. Incremental: each journal record
        is read once over the session's life, whatever the number of look-ups.
        """
        if self._inputs_indexed < self.journal.next_seq:
            # By seq: a checkpoint replaces the retained list (an input of
            # an open turn is always retained, so none is missed).
            records = self.journal.records
            start = bisect.bisect_left(records, self._inputs_indexed, key=lambda r: r.seq)
            for record in records[start:]:
                if isinstance(record, jr.UserMessage):
                    self._inputs[record.message_id] = record
            self._inputs_indexed = self.journal.next_seq
        return [self._inputs[m] for m in message_ids if m in self._inputs]

    def pending_interactions(self) -> list[jr.InteractionRequested]:
        """Questions waiting for an answer, oldest first (each names its
        ``interaction_id``, ``call_id``, the full ``text``, ``cwd``, ``reason``
        and ``choices``; docs/design/interactions.md §7): those shown now and,
        right after :meth:`Runtime.open_session`, a crashed turn's unanswered
        ones its resume asks again (answerable at once, §6)."""
        return self.interactions.pending()

    def answer(
        self, interaction_id: str, decision: Decision, reason: str | None = None
    ) -> AnswerResult:
        """Answer a question by its id. The first decision wins.

        Args:
            interaction_id: the question's ``ia_…`` id (from
                :meth:`pending_interactions` or the ``approval.requested`` event).
            decision: to an approval ``approve_once`` | ``approve_session`` |
                ``deny`` | ``abort`` (or ``yes`` | ``no`` | ``always``); to a
                ``reconcile`` question (``kind`` ``reconcile``: a call whose
                outcome is unknown after a crash) ``rerun`` | ``mark_failed``
                | ``tell_model``. Only the question's ``choices`` are taken.
            reason: on deny, what the model is told (at most 128 KiB).

        Returns:
            ``Answered`` (durable, fsync, before the call resumes) or
            ``NotTaken`` with a message: an unknown, stale or already
            answered id, a decision the question does not offer, or a reason
            over 128 KiB — never an exception for those.

        Raises:
            ValueError: ``decision`` is not one of the above (misuse).
            JournalWriteError: the answer could not be made durable.
        """
        return self.interactions.answer(interaction_id, as_decision(decision), reason=reason)

    def running_effects(self) -> list[RunningEffect]:
        """Shell commands a crash of mind left running under their
        supervisors (docs/design/effects.md §4), in journal order: the
        resumed turn waits for each; :meth:`kill_effect` stops one. Reads
        their directories (short, blocking)."""
        effects_dir = self.tools.effects_dir
        if effects_dir is None:
            return []
        return running_effects(self.journal.records, self.session_id, effects_dir)

    def kill_effect(self, effect_id: str) -> bool:
        """Stop a command :meth:`running_effects` lists, as a whole tree
        (SIGTERM to its supervisor, which kills every descendant, ``setsid``
        ones too, then records ``killed``: docs/design/processes.md §4).
        Returns without waiting; the turn waiting for it then gets that
        result (``failed``, evidence ``supervisor``).

        Returns:
            True when its live supervisor (the one its directory or its
            journaled ``effect_running`` names) was signalled; False when
            ``effect_id`` names no running effect of this session.
        """
        effects_dir = self.tools.effects_dir
        if effects_dir is None:
            return False
        return kill_running(self.journal.records, self.session_id, effects_dir, effect_id)

    def history(self) -> list[jr.JournalRecord]:
        """Every record of the session's journal in order, read from the file
        when asked (memory holds only what the runtime retains:
        docs/design/checkpoints.md §1), for showing what happened before;
        facts a client acts on have their own properties.

        Raises:
            JournalError: the file cannot be read; JournalCorruptError: it
                was damaged since the session opened (path, line).
        """
        return read_records(self.journal.path)[0]

    @property
    def events_read(self) -> bool:
        """Whether an :meth:`events` iteration runs now (its consumer sees every card)."""
        return self._consuming

    def _answerable(self, turn_id: str) -> bool:
        """Whether someone may answer a question of turn ``turn_id``
        (:attr:`Turn.answerable`; a turn this process does not run: yes)."""
        turn = self.current
        return turn is None or turn.turn_id != turn_id or turn.answerable

    @property
    def waiting(self) -> list[MailboxMessage]:
        """Accepted input not yet claimed by a turn, in order (shown under the prompt)."""
        return self.mailbox.waiting()

    def waiting_event(self) -> ev.InputWaitingEvent:
        """The ``input.waiting`` event for the input that waits now (may list none).

        ``first_line`` is the first non-empty line of each text, at most 120
        characters; ``accepted_at_ms`` comes from ``inbox.json``.
        """
        accepted = {e.message_id: e.accepted_at_ms for e in self.inbox.entries}
        return ev.InputWaitingEvent(
            session_id=self.session_id,
            messages=[
                ev.WaitingInput(
                    message_id=m.message_id,
                    kind=ev.WaitingKind(m.kind),
                    accepted_at_ms=accepted.get(m.message_id, 0),
                    first_line=first_line(m.text),
                )
                for m in self.mailbox.waiting()
            ],
            drop_command=f"mind inbox {self.session_id} --drop ID",
        )

    def drop(self, message_id: str) -> MailboxMessage:
        """Take back one waiting input for good (docs/design/mailbox.md §6).

        The mailbox charts decide what can be dropped: a message waiting for
        a turn (``queued`` steering, ``next_turn``, or ``returned`` by a turn
        that failed or was aborted) — never one the running turn has claimed.
        The drop is durable before this returns: an ``input_dropped`` journal
        record (fsync) — so recovery filters the id like an acknowledgement
        and the model never sees the earlier ``user_message`` records of a
        failed turn — then ``inbox.json`` rewritten without it (fsync).

        Args:
            message_id: the message id, or a prefix matching exactly one
                message held (waiting or claimed).

        Returns:
            The dropped message (its text, e.g. for the REPL's editor).

        Raises:
            DropRefused: no such message, an ambiguous prefix, or claimed by
                the running turn; nothing was written.
            StorageError: a write failed (path, errno); the message still waits (and
                replays, unless the journal record made it).
        """
        held = [m for m in self.mailbox.messages() if m.state != "acknowledged"]
        matches = [m for m in held if m.message_id == message_id] or [
            m for m in held if message_id and m.message_id.startswith(message_id)
        ]
        if not matches:
            raise DropRefused(self.session_id, message_id, f"no waiting message {message_id!r}")
        if len(matches) > 1:
            names = ", ".join(m.message_id for m in matches[:5])
            raise DropRefused(
                self.session_id, message_id, f"{message_id!r} matches several: {names}"
            )
        mid = matches[0].message_id
        try:
            self.mailbox.check_drop(mid)
        except DropNotAllowed as exc:
            detail = str(exc).removeprefix("mailbox: 'drop' ")
            raise DropRefused(self.session_id, message_id, detail) from exc
        self.journal.append(jr.InputDropped(seq=0, recorded_at_ms=0, message_id=mid), sync=True)
        self.inbox.remove([mid])
        return self.mailbox.drop(mid)

    def park(self) -> None:
        """Another session is shown; this one stays hosted and its turn keeps running."""
        if self.mount.state == "attached":
            self.mount.park()

    def attach(self) -> None:
        """This session is shown again."""
        if self.mount.state == "parked":
            self.mount.attach()

    @property
    def instructions_sources(self) -> list[ev.InstructionSource]:
        """The instructions files the model requests carry, in reading order
        (``AGENTS.md`` / ``CLAUDE.md``: path, scope, bytes, whether cut, or
        why skipped), as last read (at open or the latest turn start)."""
        return self.instructions.sources

    def instructions_event(self) -> ev.InstructionsLoadedEvent:
        """The ``instructions.loaded`` event for :attr:`instructions_sources`."""
        return ev.InstructionsLoadedEvent(
            session_id=self.session_id, sources=self.instructions.sources
        )

    def started_event(self) -> ev.SessionStartedEvent:
        """The ``session.started`` event for this session."""
        return ev.SessionStartedEvent(session_id=self.session_id)

    # ---- input ---------------------------------------------------------------

    def send(
        self, text: str, *, kind: InputKind = "prompt", message_id: str | None = None
    ) -> InputReceipt:
        """Accept one input: durable in ``inbox.json`` first, then routed.

        Idle session: the input starts a turn (``started``), or — when older
        recovered input waits — a turn that takes the older input first
        (``pending``; it never jumps ahead). Running turn: ``steer`` input
        steers it while its mailbox is open (``steering``); anything else, or
        steering after the seal, waits for the next turn (``next_turn``).

        Args:
            text: the text, kept verbatim.
            kind: ``prompt`` | ``steer`` | ``queue``.
            message_id: caller-chosen id; sending the same id again is an
                idempotent success (``duplicate=True``).

        Raises:
            InputRefused: empty text, text with lone surrogates (``not_text``),
                a mailbox limit (20 steering messages), the 8 MiB inbox cap,
                or ``storage``: the inbox write failed (disk full, quota, I/O
                error; the StorageError is the ``__cause__``) or the journal
                failed earlier (reopen the session). Nothing was accepted;
                keep the text.
            SessionDamagedError: (an ``InputRefused``, ``damaged``) the
                background check found the journal damaged: no input is
                taken any more (docs/design/checkpoints.md §5).
        """
        mid = message_id or new_id("msg")
        known = self._known_disposition(mid)
        if known is not None:
            return InputReceipt(message_id=mid, disposition=known, duplicate=True)
        if not text.strip():
            raise InputRefused("empty", "the input is empty", message_id=mid)
        if has_lone_surrogates(text):
            raise InputRefused(
                "not_text",
                "the input holds lone surrogates (undecodable bytes); replace them first, "
                "e.g. with mind.conversation.replace_lone_surrogates",
                message_id=mid,
            )
        damaged = self._damaged_at()
        if damaged is not None:  # nothing new starts over a damaged journal (§5)
            raise SessionDamagedError(
                self.session_id, damaged.path, damaged.line, damaged.detail, message_id=mid
            )
        if self.journal.broken is not None:
            raise InputRefused(
                "storage",
                f"the session's journal could not be written ({self.journal.broken}); "
                f"free space, then reopen session {self.session_id} "
                "(Runtime.open_session: nothing accepted is lost)",
                message_id=mid,
            )
        self.mailbox.admit(mid, text, kind=kind)
        try:
            self.inbox.add(
                InboxEntry(
                    message_id=mid,
                    text=text,
                    kind=InboxKind(kind),
                    accepted_at_ms=time.time_ns() // 1_000_000,
                    recovered=False,
                )
            )
        except StorageError as exc:
            why = exc.errno_name or "I/O error"
            raise InputRefused(
                "storage",
                f"could not save the input to {exc.path} ({why}); free space and send it again",
                message_id=mid,
            ) from exc
        faults.boundary("after_inbox_write")
        routed = self.mailbox.enqueue(mid, text, kind=kind)
        disposition: Disposition
        if self.mailbox.has_owner:  # a turn, or a compaction the input waits for
            disposition = routed
        else:
            older = len(self.mailbox.waiting()) > 1
            self._start_turn()
            disposition = "pending" if older else "started"
        self._events.put(
            ev.InputAcceptedEvent(message_id=mid, disposition=ev.Disposition(disposition))
        )
        return InputReceipt(message_id=mid, disposition=disposition)

    def _known_disposition(self, message_id: str) -> Disposition | None:
        """Where an id the mailbox already knows went (``None``: a new id).

        The mailbox owns idempotency: ``steering`` if it steered a turn,
        ``next_turn`` while it still waits, ``started`` once a turn took it.
        """
        if not self.mailbox.knows(message_id):
            return None
        held = self.mailbox.message(message_id)
        if held is not None and held.disposition == "steering":
            return "steering"
        if held is not None and held.state in ("queued", "next_turn", "returned"):
            return "next_turn"
        return "started"

    def steer(self, text: str, *, message_id: str | None = None) -> InputReceipt:
        """:meth:`send` with ``kind="steer"``: reach the running turn if it still listens."""
        return self.send(text, kind="steer", message_id=message_id)

    def queue(self, text: str, *, message_id: str | None = None) -> InputReceipt:
        """:meth:`send` with ``kind="queue"``: wait for the next turn."""
        return self.send(text, kind="queue", message_id=message_id)

    def submit(self, text: str, *, message_id: str | None = None) -> Turn:
        """Start a turn for ``text`` and return its handle at once.

        Raises:
            SessionBusyError: a turn of this session is still running (use
                :meth:`steer` or :meth:`queue`), or a manual compaction is
                (use :meth:`send`: the input waits for it); nothing accepted.
            InputRefused: as :meth:`send`.
        """
        if self.busy:
            raise SessionBusyError(self.session_id, "a turn is already running")
        if self.mailbox.has_owner:
            raise SessionBusyError(
                self.session_id, "a compaction is running; send the input and it waits for it"
            )
        self.send(text, kind="prompt", message_id=message_id)
        assert self.current is not None
        return self.current

    def resume_pending(self) -> Turn | None:
        """Start a turn with the input that waits (recovered after a crash,
        or returned by a failed turn), if any and if idle."""
        if self.mailbox.has_owner or not self.mailbox.waiting() or self._damaged_at():
            return None
        return self._start_turn()

    async def run(self, text: str) -> TurnOutcome:
        """Submit ``text`` and wait for the end of the turn, dropping events."""
        turn = self.submit(text)
        async for _ in turn:
            pass
        return turn.outcome

    async def compact(self, focus: str | None = None) -> compaction.CompactionOutcome:
        """Compact the conversation now, between turns (docs/design/context.md §5).

        The model's context becomes a summary of it, the most recent user
        messages and what follows; the journal (and so :meth:`history`, the
        transcript) keeps every original record. On completion
        ``context.compacted`` is published to :meth:`events`. No turn starts
        while it runs: input sent meanwhile waits (``next_turn``), and a turn
        takes it as soon as the compaction ends.

        Args:
            focus: what the summary should keep above all (``/compact FOCUS``).

        Returns:
            The outcome: completed, or why not (``compaction_failed`` written
            with the reason; "nothing to compact yet" writes nothing).

        Raises:
            CompactionRefused: a turn is running (compaction runs between
                turns; an automatic one runs inside turns as needed), or
                another compaction of this session is running, or the
                journal was found damaged (docs/design/checkpoints.md §5).
            StorageError: a compaction record could not be made durable.
        """
        damaged = self._damaged_at()
        if damaged is not None:
            raise CompactionRefused(
                self.session_id,
                f"its journal is damaged ({damaged}); nothing more starts in this session: "
                f"{DAMAGED_JOURNAL_NEXT_STEP}",
            )
        if self.busy:
            raise CompactionRefused(
                self.session_id, "a turn is running; compact after it ends (or interrupt it)"
            )
        if self.mailbox.has_owner:
            raise CompactionRefused(self.session_id, "a compaction is already running")
        self.mailbox.begin_compaction()
        try:
            return await compaction.compact(
                self,
                trigger="manual",
                focus=focus or None,
                emit=self._events.put,
                overhead_bytes=request_overhead_bytes(self),
            )
        finally:
            # Input sent meanwhile runs on as after a completed turn (the one
            # rule: not while closing, nor with a broken journal).
            if next_turn_starts(
                "completed",
                send_pending=False,
                input_waiting=self.mailbox.end_compaction(),
                closing=self.runtime.closing,
                written=self.journal.broken is None,
                damaged=self._damaged_at() is not None,
            ):
                self._start_turn()

    async def events(self) -> AsyncIterator[ev.Event]:
        """Every event of this session (all turns, accepted inputs), in order,
        until the session is idle: no turn running and none about to start.

        What a consumer gets: every lifecycle event, and the deltas, which
        coalesce when it falls behind (:class:`EventChannel`). While no
        ``events()`` iteration runs, the session keeps only the events since
        the latest turn started (iterating the ``Turn`` handles instead leaves
        no backlog).

        Raises:
            RuntimeError: another ``events()`` iteration of this session is
                still running (one consumer at a time; a second would silently
                steal events).
        """
        if self._consuming:
            raise RuntimeError(f"session {self.session_id}: events() already has a consumer")
        self._consuming = True
        try:
            while True:
                if not self.busy and not len(self._events):
                    return
                event = await self._events.get()
                if event is None:
                    return
                yield event
        finally:
            self._consuming = False
            if self.current is not None:  # the reader left: who answers may have changed
                self.current.answerers_changed()

    # ---- the turn ------------------------------------------------------------

    def _resume_turn(self, plan: ResumePlan) -> Turn:
        """Startup's hosting step: the crashed turn ``plan`` names goes on
        (docs/design/recovery.md §8). It claims its own journaled inputs
        again (the mailbox's ``resume_turn``); the session is busy from here."""
        turn = Turn(self, plan.turn_id, self.mailbox.resume_turn(plan.inputs))
        self.current = self.resumed_turn = turn
        self.runtime._spawn(TurnDriver(self, resume=plan).run, turn)
        return turn

    def _start_turn(self) -> Turn:
        if not self._consuming:
            # Nobody reads events(): keep this turn's events for a consumer
            # that may still come, not every earlier turn's (one bound).
            self._events.clear()
        if self.current is not None:
            # A turn that never reached its end must not see the next one's events.
            self.fanout.unsubscribe(self.current._events)
        # Claiming happens here, synchronously, so input sent right after
        # this call already sees an open mailbox.
        turn = Turn(self, new_id("turn"), self.mailbox.open_turn())
        self.current = turn
        self.runtime._spawn(TurnDriver(self).run, turn)
        return turn


def first_line(text: str, limit: int = 120) -> str:
    """The first non-empty line of ``text``, stripped, cut to ``limit`` characters (with …)."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"
