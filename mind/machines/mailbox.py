"""The mailbox: the single active turn's input box (docs/design/mailbox.md).

Size: one owner for the mailbox and its per-message machines, whose limits
and drain-or-seal must change together; the obvious split (limits and
refusals into their own module) waits for the interaction chart of issue
#10, which adds a second input source.

Two generated charts, bound to their data here:

- :class:`~mind.generated.mailbox_chart.MailboxChart` (``specs/statecharts/mailbox.yaml``),
  one per session: ``no_owner --open_turn--> open --drain_or_seal[not has_new]--> sealed``,
  ``no_owner --resume_turn--> open`` (a crashed turn resumed at startup),
  ``open | sealed --end_turn--> no_owner``; ``drain`` and ``drain_or_seal[has_new]``
  stay ``open``; ``restore`` is only allowed with ``no_owner``;
  ``no_owner --begin_compaction--> compacting --end_compaction--> no_owner``
  (a manual compaction between turns: no turn opens the box meanwhile).
- :class:`~mind.generated.inbox_message_chart.InboxMessageChart`
  (``specs/statecharts/inbox_message.yaml``), one per accepted input:
  ``received --arrive--> queued | next_turn --claim--> claimed -->
  acknowledged | returned``; ``queued --defer--> next_turn`` when its turn ends
  before a drain took it; ``returned`` and ``next_turn`` are claimed by a later
  turn; ``queued | next_turn | returned --drop--> dropped`` when the person
  takes a waiting message back (:meth:`Mailbox.drop`; a claimed one cannot be).

Predicates (docs/design/mailbox.md §1): :attr:`Mailbox.is_active` is ``open`` — steering
reaches the running turn; :attr:`Mailbox.has_turn_owner` is ``open`` or
``sealed`` — a turn still owns the box; :attr:`Mailbox.has_owner` adds
``compacting`` — no turn may open the box (input waits). Anything that must not race a turn
(switching model, reloading the inbox, fork/rewind) checks ``has_turn_owner``;
only the choice "steer this turn or queue for the next" reads ``is_active``.

The one lock (docs/design/mailbox.md §4): every method is synchronous and the runtime
calls them from the single asyncio thread, so no other call can interleave
with one of them — that is the mailbox's only lock. In particular
:meth:`Mailbox.drain_or_seal` reads "is there new steering?" and either claims
it or seals the box in the same call; input that arrives after it returns finds
the box sealed and is marked ``next_turn``. Keep it so: never put an ``await``
between :meth:`Mailbox.admit`, the inbox write and :meth:`Mailbox.enqueue`, or
split the drain from the seal.

How the shell uses it (``mind.shell.runtime``; durable steps in brackets)::

    accept:  d = box.admit(id, text, kind=k)        # refusal check, nothing changes
             [inbox.add(entry)]                     # durable before accepted
             box.enqueue(id, text, kind=k)          # == d
    turn:    inputs = box.open_turn()               # [turn_started]
             ... at each model-request boundary: box.drain()
             ... when the model is done: box.drain_or_seal() -> more input, or sealed
    end:     ids = box.end_turn(acknowledge=completed)
             [turn_completed(acknowledged=ids)]; [inbox.remove(ids)]; box.forget(ids)
    reopen:  [Inbox.open(path, acknowledged=journal acks)]
             box.restore([(e.message_id, e.text, e.kind) ...], acknowledged=journal acks)
    drop:    box.check_drop(id)                     # the chart allows it, nothing changes
             [input_dropped]; [inbox.remove([id])]  # durable before done
             box.drop(id)                           # == the checked message, now gone

Limits (docs/design/mailbox.md §7): at most 20 user inputs (``prompt``,
``steer``, ``queue``) and at most 100 background completions totalling at most
7 MiB (``size_bytes``) may be accepted and not yet acknowledged; over a limit
:meth:`Mailbox.admit` and :meth:`Mailbox.enqueue` raise
:class:`~mind.errors.InputRefused` and nothing changes. Recovered input
(:meth:`Mailbox.restore`) obeys the same limits: what does not fit is held
back, in order, and enters as room appears, so no turn claims more than the
limits allow (docs/design/mailbox.md §7). The 8 MiB file cap is the inbox's
(``mind.shell.inbox``).

Idempotency (docs/design/mailbox.md §7): a message id seen before — waiting, claimed,
acknowledged, or forgotten after acknowledgement — is an idempotent success
returning its original disposition; the first text is kept.

Errors: a call the box chart does not allow in the current state (e.g.
``drain_or_seal`` with no owner) raises :class:`~mind.errors.IllegalTransition`
(``chart="mailbox"``; a ``RuntimeError``: caller misuse; never retried), with
the engine's ``TransitionNotAllowed`` chained; :meth:`Mailbox.forget` of a
message not yet acknowledged raises it with ``chart="inbox_message"``. A drop
the person asked for that the message chart does not allow raises
:class:`~mind.errors.DropNotAllowed` (a refusal, not misuse). The mailbox is
unchanged either way. Pure: no I/O, no clock.

One module (over 500 lines) because the mailbox chart and the per-message
charts share one state — the queue, the claims, the limits — and splitting
them would give an input's state two owners.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, final, get_args

from statemachine.exceptions import TransitionNotAllowed

from mind.errors import DropNotAllowed, IllegalTransition, InputRefused
from mind.generated.inbox_message_chart import InboxMessageChart, InboxMessageEventName
from mind.generated.mailbox_chart import MailboxChart, MailboxEventName
from mind.machines.chart_observers import created

__all__ = [
    "MAX_BACKGROUND_BYTES",
    "MAX_BACKGROUND_MESSAGES",
    "MAX_USER_MESSAGES",
    "USER_KINDS",
    "BoxState",
    "Mailbox",
    "MailboxLimits",
    "MailboxMessage",
    "MessageKind",
    "MessageState",
    "Placement",
]

Placement = Literal["steering", "next_turn"]
"""Where the mailbox puts an accepted input: the running turn (``steering``)
or a later one — two of the session's ``Disposition`` values
(``mind.generated.vocabulary``), which adds the runtime's ``started`` and
``pending``."""

MessageKind = Literal["prompt", "steer", "queue", "background"]
"""Where an input came from (same values as the inbox file's ``kind``)."""

MessageState = Literal["queued", "claimed", "acknowledged", "returned", "next_turn", "dropped"]
"""A message's state in ``inbox_message.yaml`` once it has arrived."""

BoxState = Literal["no_owner", "open", "sealed", "compacting"]
"""The box's state in ``mailbox.yaml``."""

USER_KINDS: Final[frozenset[MessageKind]] = frozenset({"prompt", "steer", "queue"})
"""Kinds typed by a person; they share the 20-message limit."""

MAX_USER_MESSAGES: Final = 20
"""User inputs accepted and not yet acknowledged (docs/design/mailbox.md §7)."""

MAX_BACKGROUND_MESSAGES: Final = 100
"""Background completions accepted and not yet acknowledged (docs/design/mailbox.md §7)."""

MAX_BACKGROUND_BYTES: Final = 7 * 1024 * 1024
"""Total ``size_bytes`` of unacknowledged background completions (~7 MiB,
docs/design/mailbox.md §7)."""

_KINDS: Final[frozenset[str]] = frozenset(get_args(MessageKind))
_WAITING: Final[frozenset[str]] = frozenset({"queued", "next_turn", "returned"})


@dataclass(frozen=True, slots=True)
class MailboxLimits:
    """Message limits of one mailbox; the defaults are the design's.

    Attributes:
        max_user_messages: unacknowledged ``prompt``/``steer``/``queue`` inputs.
        max_background_messages: unacknowledged ``background`` completions.
        max_background_bytes: their total ``size_bytes``.
    """

    max_user_messages: int = MAX_USER_MESSAGES
    max_background_messages: int = MAX_BACKGROUND_MESSAGES
    max_background_bytes: int = MAX_BACKGROUND_BYTES


@dataclass(frozen=True, slots=True)
class MailboxMessage:
    """A snapshot of one accepted input (a value; later changes are not reflected).

    Attributes:
        message_id: the caller's id (unique in the mailbox).
        text: the input text, as first accepted.
        kind: where it came from.
        size_bytes: size counted against the limits (UTF-8 length of ``text``
            unless the caller gave another, e.g. including metadata).
        state: ``queued | claimed | acknowledged | returned | next_turn``.
        disposition: what :meth:`Mailbox.enqueue` answered when it arrived.
        recovered: it came back from ``inbox.json`` on reopen (:meth:`Mailbox.restore`).
    """

    message_id: str
    text: str
    kind: MessageKind
    size_bytes: int
    state: MessageState
    disposition: Placement
    recovered: bool = False


@dataclass(eq=False)
class _Slot:
    """One message and the model bound to its ``InboxMessageChart``.

    Attributes:
        steering: guard ``steering`` of inbox_message.yaml (read by ``arrive`` only).
        state: where python-statemachine stores the state id.
    """

    message_id: str
    text: str
    kind: MessageKind
    size_bytes: int
    disposition: Placement
    recovered: bool
    steering: bool
    state: object = None
    chart: InboxMessageChart | None = None

    def send(self, event: InboxMessageEventName) -> None:
        assert self.chart is not None
        self.chart.send(event)

    @property
    def current(self) -> MessageState:
        state = self.state
        assert state in (
            "queued",
            "claimed",
            "acknowledged",
            "returned",
            "next_turn",
            "dropped",
        ), state
        return state

    def snapshot(self) -> MailboxMessage:
        return MailboxMessage(
            message_id=self.message_id,
            text=self.text,
            kind=self.kind,
            size_bytes=self.size_bytes,
            state=self.current,
            disposition=self.disposition,
            recovered=self.recovered,
        )


@dataclass(eq=False)
class _BoxData:
    """The model bound to ``MailboxChart``; satisfies ``MailboxModel``.

    Attributes:
        new_steering: counts messages in ``queued`` (steering not yet claimed).
        state: where python-statemachine stores the state id.
    """

    new_steering: Callable[[], int]
    state: object = None

    @property
    def has_new(self) -> bool:
        """Guard ``has_new`` of mailbox.yaml: steering arrived since the last claim."""
        return self.new_steering() > 0


@final
class Mailbox:
    """The input box of one session runtime, and every accepted input in it.

    Args:
        limits: message limits; the design's by default.

    Messages are kept in arrival order; every list a method returns is in
    that order.
    """

    def __init__(self, *, limits: MailboxLimits | None = None) -> None:
        self._limits = limits if limits is not None else MailboxLimits()
        self._slots: dict[str, _Slot] = {}
        self._settled: dict[str, Placement] = {}
        # Recovered input past the limits: plain data, no chart, in file order;
        # it enters the box as room appears (docs/design/mailbox.md §7).
        self._backlog: deque[tuple[str, str, MessageKind, int]] = deque()
        self._backlog_ids: set[str] = set()
        self._listeners: list[object] = []
        self._box_data = _BoxData(self._count_queued)
        self._box = created(MailboxChart(model=self._box_data))
        self._sent_while_compacting: list[str] = []

    def __repr__(self) -> str:
        return f"Mailbox(state={self.state!r}, messages={len(self._slots)})"

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> BoxState:
        """``"no_owner" | "open" | "sealed" | "compacting"``."""
        value = self._box_data.state
        assert value in ("no_owner", "open", "sealed", "compacting"), value
        return value

    @property
    def is_active(self) -> bool:
        """The box is ``open``: a ``steer`` input reaches the running turn."""
        return self.state == "open"

    @property
    def has_turn_owner(self) -> bool:
        """A turn owns the box: ``open`` or ``sealed`` (unlike :attr:`is_active`)."""
        return self.state in ("open", "sealed")

    @property
    def has_owner(self) -> bool:
        """A turn or a manual compaction owns the box: no turn may open it
        now, and input sent now is ``next_turn``."""
        return self.state != "no_owner"

    @property
    def limits(self) -> MailboxLimits:
        """The limits this mailbox enforces."""
        return self._limits

    def waiting(self) -> list[MailboxMessage]:
        """Messages not claimed yet (``queued``, ``next_turn``, ``returned``), in arrival order."""
        return [s.snapshot() for s in self._slots.values() if s.current in _WAITING]

    def claimed(self) -> list[MailboxMessage]:
        """Messages the current turn has claimed and not yet settled, in arrival order."""
        return [s.snapshot() for s in self._slots.values() if s.current == "claimed"]

    def messages(self) -> list[MailboxMessage]:
        """Every message held, acknowledged ones not yet forgotten included, in arrival order."""
        return [s.snapshot() for s in self._slots.values()]

    def message(self, message_id: str) -> MailboxMessage | None:
        """The message with this id, or ``None`` if unknown or forgotten."""
        slot = self._slots.get(message_id)
        return slot.snapshot() if slot is not None else None

    def knows(self, message_id: str) -> bool:
        """Whether ``message_id`` was accepted before (held, held back, or
        acknowledged and forgotten)."""
        return (
            message_id in self._slots
            or message_id in self._settled
            or message_id in self._backlog_ids
        )

    @property
    def held_back(self) -> int:
        """Recovered inputs not yet in the box because the limits were reached
        (they stay in ``inbox.json`` and enter, in order, as earlier input is
        acknowledged or dropped)."""
        return len(self._backlog)

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener to the box and to every message chart.

        The listener (e.g. a ``TransitionCoverage``) sees the box's transitions
        and those of every message, present and future; it must not call the
        mailbox. Used by tests.
        """
        self._listeners.append(listener)
        add_listener: Callable[[object], object] = self._box.add_listener
        add_listener(listener)
        for slot in self._slots.values():
            assert slot.chart is not None
            add_message_listener: Callable[[object], object] = slot.chart.add_listener
            add_message_listener(listener)

    # ------------------------------------------------------------------ input

    def admit(
        self, message_id: str, text: str, *, kind: MessageKind, size_bytes: int | None = None
    ) -> Placement:
        """What :meth:`enqueue` would answer now, without changing anything.

        The shell calls it before writing the input to ``inbox.json`` so a
        refused input is never written; with no ``await`` between this, the
        write and :meth:`enqueue`, the answer cannot change in between.

        Args:
            message_id: the caller's id (non-empty); reused on retry.
            text: the input text.
            kind: ``prompt | steer | queue | background``.
            size_bytes: bytes counted against the background budget
                (default: UTF-8 length of ``text``).

        Returns:
            ``"steering"`` if the box is open and ``kind`` is ``steer``, else
            ``"next_turn"``; for a known id, its original disposition.

        Raises:
            InputRefused: ``steering_full`` (20 user inputs unacknowledged),
                ``background_full`` (100 background completions) or
                ``background_bytes`` (their ~7 MiB budget); a known id is never
                refused.
            ValueError: empty id, unknown kind or negative ``size_bytes``.
        """
        size = self._check_arguments(message_id, text, kind, size_bytes)
        known = self._known(message_id)
        if known is not None:
            return known
        self._check_limits(message_id, kind, size)
        return "steering" if self.is_active and kind == "steer" else "next_turn"

    def enqueue(
        self, message_id: str, text: str, *, kind: MessageKind, size_bytes: int | None = None
    ) -> Placement:
        """Accept an input (already durable in the inbox): steering or next turn.

        A ``steer`` input while the box is ``open`` is ``queued`` for the
        running turn (claimed at its next :meth:`drain` or
        :meth:`drain_or_seal`); anything else — a sealed box, no owner, or a
        ``prompt``/``queue``/``background`` kind — is ``next_turn``.

        Args:
            message_id: the caller's id (non-empty); reused on retry.
            text: the input text.
            kind: ``prompt | steer | queue | background``.
            size_bytes: bytes counted against the background budget
                (default: UTF-8 length of ``text``).

        Returns:
            The disposition; for a known id (idempotent success) its original
            one, and nothing changes (the first text is kept).

        Raises:
            InputRefused: over a limit (see :meth:`admit`); nothing changed.
            ValueError: empty id, unknown kind or negative ``size_bytes``.
        """
        disposition = self.admit(message_id, text, kind=kind, size_bytes=size_bytes)
        if self.knows(message_id):
            return disposition
        size = size_bytes if size_bytes is not None else len(text.encode("utf-8"))
        self._add(message_id, text, kind, size, disposition, recovered=False)
        if self.state == "compacting":
            self._sent_while_compacting.append(message_id)
        return disposition

    def restore(
        self,
        messages: Sequence[tuple[str, str, MessageKind]],
        *,
        acknowledged: Collection[str] = (),
    ) -> None:
        """Reopen from disk: ``messages`` (the filtered ``inbox.json``) become ``next_turn``.

        Called with no turn owner, before any turn starts (docs/design/recovery.md §1 startup:
        the mailbox is repaired before input is accepted). Recovered inputs
        were accepted once, so they are never refused or dropped; but they
        obey the same limits as live input (docs/design/mailbox.md §7): the box takes
        them in file order while they fit, the rest is *held back* (plain
        data, :attr:`held_back`) and enters the box, in order, as
        :meth:`forget` or :meth:`drop` make room. A turn thus never claims
        more than the limits allow, however large the file.

        Args:
            messages: ``(message_id, text, kind)`` in file (arrival) order; ids
                already known are skipped.
            acknowledged: ids the journal acknowledges; a later
                :meth:`enqueue` of one is an idempotent success (answering
                ``next_turn``) and it is never claimed again.

        Raises:
            IllegalTransition: a turn owns the box; nothing changed.
            ValueError: an empty id or unknown kind; nothing changed.
        """
        for message_id, text, kind in messages:
            self._check_arguments(message_id, text, kind, None)
        self._send("restore")
        for message_id in acknowledged:
            if not self.knows(message_id):
                self._settled[message_id] = "next_turn"
        for message_id, text, kind in messages:
            if not self.knows(message_id):
                size = len(text.encode("utf-8"))
                self._backlog.append((message_id, text, kind, size))
                self._backlog_ids.add(message_id)
        self._refill()

    # ------------------------------------------------------------------ turn

    def open_turn(self) -> list[MailboxMessage]:
        """A turn takes the box (``no_owner -> open``) and claims every waiting input.

        Returns:
            The turn's input: every ``next_turn``/``returned``/``queued``
            message, now ``claimed``, in arrival order (older recovered input
            first: a new prompt never jumps ahead, docs/design/mailbox.md §2). May be
            empty.

        Raises:
            IllegalTransition: a turn already owns the box; nothing changed.
        """
        self._send("open_turn")
        return self._claim(_WAITING)

    def resume_turn(self, message_ids: Collection[str]) -> list[MailboxMessage]:
        """A crashed turn resumed at startup takes the box (``no_owner -> open``)
        and claims its own inputs again — nothing else (docs/design/recovery.md §8).

        Its inputs were never acknowledged, so :meth:`restore` brought them
        back as waiting; input that came after them stays waiting for the
        next turn. An id not waiting here (held back past the limits, or
        unknown) is not claimed.

        Args:
            message_ids: the ids the turn journaled (``user_message`` records).

        Returns:
            The claimed messages, in arrival order (may be empty).

        Raises:
            IllegalTransition: a turn already owns the box; nothing changed.
        """
        self._send("resume_turn")
        wanted = set(message_ids)
        claimed: list[MailboxMessage] = []
        for slot in self._slots.values():
            if slot.message_id in wanted and slot.current in _WAITING:
                slot.send("claim")
                claimed.append(slot.snapshot())
        return claimed

    def drain(self) -> list[MailboxMessage]:
        """At a model-request boundary, claim steering that arrived since the last claim.

        Never seals. Deliver the result after the pending tool results, never
        between a tool call and its result (docs/design/mailbox.md §3).

        Returns:
            The newly claimed ``queued`` messages in arrival order (may be empty).

        Raises:
            IllegalTransition: the box is not ``open``; nothing changed.
        """
        self._send("drain")
        return self._claim({"queued"})

    def drain_or_seal(self) -> list[MailboxMessage]:
        """Claim new steering, or seal the box if there is none — one atomic step.

        The check and the claim-or-seal happen in this one synchronous call
        (the "one lock", see the module docstring; docs/design/mailbox.md §4): no
        input can slip between "nothing new" and the seal. After a seal, new
        input is ``next_turn``.

        Returns:
            The newly claimed messages (box still ``open``: the turn samples
            again), or ``[]`` when the box is now ``sealed``.

        Raises:
            IllegalTransition: the box is not ``open``; nothing changed.
        """
        self._send("drain_or_seal")
        if self.state == "sealed":
            return []
        return self._claim({"queued"})

    def end_turn(self, *, acknowledge: bool, only: Collection[str] | None = None) -> list[str]:
        """The turn ended: settle what it claimed and give up the box (``-> no_owner``).

        Claimed messages become ``acknowledged`` (``acknowledge=True``: the
        turn's terminal acknowledges its inputs: completed, interrupted, a
        failure a replay would meet again) or ``returned`` (aborted, a
        transient failure: claimed again by the next turn,
        docs/design/mailbox.md §5). Steering still
        ``queued`` (arrived but never drained) becomes ``next_turn``.

        Args:
            acknowledge: whether the turn's terminal record acknowledges its inputs.
            only: when given, the ids the terminal acknowledges (the turn
                machine's ``WriteTerminal.acknowledged``); a claimed message
                not among them is ``returned``: its claim never reached the
                turn's records, so no receipt will name it.

        Returns:
            The acknowledged ids in arrival order, to be written in the
            terminal ``turn_completed.acknowledged``; ``[]`` when
            ``acknowledge`` is false.

        Raises:
            IllegalTransition: no turn owns the box; nothing changed.
        """
        self._send("end_turn")
        settled: list[str] = []
        for slot in self._slots.values():
            state = slot.current
            if state == "claimed":
                settles = acknowledge and (only is None or slot.message_id in only)
                slot.send("acknowledge" if settles else "release")
                if settles:
                    settled.append(slot.message_id)
            elif state == "queued":
                slot.send("defer")
        return settled

    def begin_compaction(self) -> None:
        """A manual compaction takes the box (``no_owner -> compacting``): no
        turn opens it until :meth:`end_compaction`; input sent meanwhile is
        ``next_turn`` (docs/design/context.md §5).

        Raises:
            IllegalTransition: a turn or another compaction owns the box;
                nothing changed.
        """
        self._send("begin_compaction")
        self._sent_while_compacting = []

    def end_compaction(self) -> bool:
        """The compaction ended (``compacting -> no_owner``).

        Returns:
            Whether input sent during it still waits: then the next turn
            starts now and takes it (with any older waiting input first), as
            that input would have started one on an idle session. Input that
            waited from before (e.g. after a failed turn) still waits for the
            person.

        Raises:
            IllegalTransition: no compaction owns the box; nothing changed.
        """
        self._send("end_compaction")
        sent, self._sent_while_compacting = self._sent_while_compacting, []
        return any(
            (slot := self._slots.get(i)) is not None and slot.current in _WAITING for i in sent
        )

    def forget(self, ids: Iterable[str]) -> None:
        """Drop acknowledged messages once ``inbox.json`` no longer holds them.

        Their ids stay known: enqueuing one again is an idempotent success.

        Args:
            ids: message ids; unknown or already forgotten ids are ignored.

        Raises:
            IllegalTransition: one of them is held and not ``acknowledged``;
                nothing changed.
        """
        wanted = [i for i in dict.fromkeys(ids) if i in self._slots]
        for message_id in wanted:
            state = self._slots[message_id].current
            if state != "acknowledged":
                raise IllegalTransition(
                    "inbox_message",
                    "forget",
                    state,
                    detail=f"{message_id!r} is {state}, not acknowledged",
                )
        for message_id in wanted:
            slot = self._slots.pop(message_id)
            self._settled[message_id] = slot.disposition
        self._refill()

    def check_drop(self, message_id: str) -> MailboxMessage:
        """What :meth:`drop` would take back now, without changing anything.

        The shell calls it before making the drop durable (journal record,
        inbox rewrite); with no ``await`` in between, the answer holds.

        Returns:
            A snapshot of the waiting message.

        Raises:
            DropNotAllowed: the id is unknown (or already
                settled), or ``inbox_message.yaml`` has no ``drop`` from the
                message's state (``claimed`` by the running turn, or
                ``acknowledged``). Nothing changed.
        """
        slot = self._slots.get(message_id)
        if slot is None:
            raise DropNotAllowed(message_id, None, f"{message_id!r} is not waiting here")
        assert slot.chart is not None
        if "drop" not in {e.id for e in slot.chart.allowed_events}:
            why = {
                "claimed": "the running turn has already taken it as its input",
                "acknowledged": "a turn has already consumed it",
            }.get(slot.current, f"it is {slot.current}")
            raise DropNotAllowed(
                message_id, slot.current, f"{message_id!r} cannot be dropped: {why}"
            )
        return slot.snapshot()

    def drop(self, message_id: str) -> MailboxMessage:
        """Take a waiting message back (``queued | next_turn | returned -> dropped``).

        The message leaves the mailbox; its id stays known, so enqueuing it
        again is an idempotent success that changes nothing. Call only once
        the drop is durable (see the module docstring).

        Returns:
            The message as it was, with ``state="dropped"``.

        Raises:
            DropNotAllowed: as :meth:`check_drop`; nothing changed.
        """
        self.check_drop(message_id)
        slot = self._slots.pop(message_id)
        slot.send("drop")
        self._settled[message_id] = slot.disposition
        self._refill()
        return slot.snapshot()

    # ------------------------------------------------------------------ internals

    def _refill(self) -> None:
        """Move held-back recovered input into the box, in order, while it fits."""
        while self._backlog:
            message_id, text, kind, size = self._backlog[0]
            if self._refusal(message_id, kind, size) is not None:
                return
            self._backlog.popleft()
            self._backlog_ids.discard(message_id)
            self._add(message_id, text, kind, size, "next_turn", recovered=True)

    def _send(self, event: MailboxEventName) -> None:
        try:
            self._box.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition("mailbox", event, self.state) from error

    def _count_queued(self) -> int:
        return sum(1 for s in self._slots.values() if s.current == "queued")

    def _known(self, message_id: str) -> Placement | None:
        slot = self._slots.get(message_id)
        if slot is not None:
            return slot.disposition
        if message_id in self._backlog_ids:
            return "next_turn"
        return self._settled.get(message_id)

    def _check_arguments(
        self, message_id: str, text: str, kind: str, size_bytes: int | None
    ) -> int:
        if not message_id:
            raise ValueError("message_id must be non-empty")
        if kind not in _KINDS:
            raise ValueError(f"unknown input kind {kind!r}; expected one of {sorted(_KINDS)}")
        if size_bytes is None:
            return len(text.encode("utf-8"))
        if size_bytes < 0:
            raise ValueError(f"size_bytes must be >= 0, got {size_bytes}")
        return size_bytes

    def _check_limits(self, message_id: str, kind: MessageKind, size_bytes: int) -> None:
        if self._backlog:
            # Older recovered input is held back: new input would jump ahead of it.
            raise InputRefused(
                "steering_full" if kind in USER_KINDS else "background_full",
                f"{len(self._backlog)} older recovered inputs are still waiting to enter "
                "a turn; send this one after they are taken",
                message_id=message_id,
            )
        refusal = self._refusal(message_id, kind, size_bytes)
        if refusal is not None:
            raise refusal

    def _refusal(self, message_id: str, kind: MessageKind, size_bytes: int) -> InputRefused | None:
        """The refusal a message of ``kind`` and size would meet now, else None."""
        pending = [s for s in self._slots.values() if s.current != "acknowledged"]
        limits = self._limits
        if kind in USER_KINDS:
            users = sum(1 for s in pending if s.kind in USER_KINDS)
            if users >= limits.max_user_messages:
                return InputRefused(
                    "steering_full",
                    f"{users} messages are already waiting (limit {limits.max_user_messages}); "
                    "send this one after the current turn has taken them",
                    message_id=message_id,
                )
            return None
        background = [s for s in pending if s.kind == "background"]
        if len(background) >= limits.max_background_messages:
            return InputRefused(
                "background_full",
                f"{len(background)} background completions are already waiting "
                f"(limit {limits.max_background_messages})",
                message_id=message_id,
            )
        total = sum(s.size_bytes for s in background) + size_bytes
        if total > limits.max_background_bytes:
            return InputRefused(
                "background_bytes",
                f"background completions would total {total} bytes "
                f"(limit {limits.max_background_bytes})",
                message_id=message_id,
            )
        return None

    def _add(
        self,
        message_id: str,
        text: str,
        kind: MessageKind,
        size_bytes: int,
        disposition: Placement,
        *,
        recovered: bool,
    ) -> None:
        slot = _Slot(
            message_id=message_id,
            text=text,
            kind=kind,
            size_bytes=size_bytes,
            disposition=disposition,
            recovered=recovered,
            steering=disposition == "steering",
        )
        slot.chart = created(InboxMessageChart(model=slot, listeners=list(self._listeners) or None))
        slot.send("arrive")
        self._slots[message_id] = slot

    def _claim(self, states: Collection[str]) -> list[MailboxMessage]:
        claimed: list[MailboxMessage] = []
        for slot in self._slots.values():
            if slot.current in states:
                slot.send("claim")
                claimed.append(slot.snapshot())
        return claimed
