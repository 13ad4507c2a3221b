"""The mount machine: one process claiming one session (docs/design/mounts.md).

:class:`MountMachine` wraps the generated
:class:`~mind.generated.mount_chart.MountChart` (``specs/statecharts/mount.yaml``)
with the data its guards read — the lock retry budget, whether the id is
brand new, whether to settle attached — and one typed method per event::

    free --claim--> reserving --grant--> reserved --settle--> settled{attached <-> parked}
                    reserving --conflict--> occupied
                    reserving --contend[can_retry]--> backing_off --retry--> reserving
                    reserving --contend[no retry left]--> busy          (new id: reserved)
                    reserving --fail--> unavailable                     (new id: reserved)
                    reserved --abandon--> abandoned;  settled --release--> released
                    reserved | attached | parked --reenter--> unchanged

Beside the machine, the pure rules of the ledger protocol (docs/design/mounts.md),
so the shell (:mod:`mind.shell.mounts`) only does I/O:

- :func:`holders_of` — the authoritative conflict check: live records of
  *other* processes listing the session (liveness is a caller-supplied
  predicate; docs/design/mounts.md §4: signal 0, EPERM alive);
- :func:`with_own_record` — the write path's new owner list: dead records
  dropped (cleanup happens only when writing, docs/design/mounts.md §4), this process's
  record replaced by its current published set minus the sessions a live
  other process lists (never two live listers of one session);
- :func:`lock_verdict` — whether ``session-mounts.lock`` may be reclaimed:
  only when the process in its ``<pid>-<nonce>@<start identity>`` token is
  dead (a reused pid counts as dead), or the token is
  unreadable *and* older than the create-to-write window (docs/design/mounts.md §3);
- :func:`backoff_ms` — the bounded backoff between lock attempts
  (25–400 ms, docs/design/mounts.md §5).

Errors: an event the chart does not allow raises
:class:`~mind.errors.IllegalTransition` (``chart="mount"``; a ``RuntimeError``:
caller misuse; never retried); the machine is unchanged.
Pure: no I/O, no clock, no randomness (jitter is an argument).

Size: just over 500 lines because the machine and the ledger's pure rules
change together (a claim's outcome is what ``holders_of`` and
``with_own_record`` say); the rules are the part to move to
``mount_rules`` if the ledger protocol grows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple, cast, final

import msgspec
from statemachine.exceptions import TransitionNotAllowed

from mind.errors import IllegalTransition, MountHolder
from mind.generated.mount_chart import MountChart, MountEventName
from mind.generated.session_mounts import MountOwner
from mind.machines.chart_observers import created

__all__ = [
    "BACKOFF_MS",
    "HOSTED_STATES",
    "MAX_BACKOFF_MS",
    "MIN_BACKOFF_MS",
    "REFUSAL_STATES",
    "Liveness",
    "LockToken",
    "LockVerdict",
    "MountMachine",
    "MountState",
    "OwnRecord",
    "backoff_ms",
    "format_token",
    "holders_of",
    "identity_of",
    "lock_verdict",
    "parse_token",
    "with_own_record",
]

MountState = Literal[
    "free",
    "reserving",
    "backing_off",
    "reserved",
    "attached",
    "parked",
    "occupied",
    "busy",
    "unavailable",
    "abandoned",
    "released",
]
"""The active leaf of ``mount.yaml`` (``settled`` shows as ``attached`` or ``parked``)."""

HOSTED_STATES: Final[frozenset[str]] = frozenset({"reserved", "attached", "parked"})
"""States whose session is in this process's published set: claims in flight
(``reserved``) and hosted sessions (``attached``, ``parked``) — docs/design/mounts.md §7
"registry ∪ in-flight operations"."""

REFUSAL_STATES: Final[frozenset[str]] = frozenset({"occupied", "busy", "unavailable"})
"""The three distinct refusals (docs/design/mounts.md §6)."""

MIN_BACKOFF_MS: Final = 25
"""Shortest wait between lock attempts, ms (docs/design/mounts.md §5)."""

MAX_BACKOFF_MS: Final = 400
"""Longest wait between lock attempts, ms (docs/design/mounts.md §5)."""

BACKOFF_MS: Final[tuple[int, ...]] = (25, 50, 100, 200, 400)
"""Base waits before each retry of a contended lock, ms: five retries, then
``busy`` (at most six lock attempts; with jitter at most ~0.96 s in all)."""


@dataclass(eq=False)
class _MountData:
    """The model bound to :class:`MountChart`; satisfies ``MountModel``.

    Attributes:
        new_session: the id was generated just now (/new, fork, startup): a
            claim that cannot be published is a warning, not a refusal.
        retries_used: lock retries taken so far in this claim.
        attached: guard for ``settle`` (set for the duration of that event).
        state: where python-statemachine stores the configuration value (an
            ``OrderedSet`` inside ``settled``; read the leaf via the chart).
    """

    new_session: bool
    retries_used: int = 0
    attached: bool = False
    state: object = None

    @property
    def can_retry(self) -> bool:
        """Guard ``can_retry``: a backoff step is left (docs/design/mounts.md §5: bounded)."""
        return self.retries_used < len(BACKOFF_MS)


@final
class MountMachine:
    """The typed wrapper of ``mount.yaml`` for one claim of one session.

    Args:
        new_session: the session id is brand new (see :class:`_MountData`).

    The shell drives it: :meth:`claim`, then for each lock attempt one of
    :meth:`grant`, :meth:`conflict`, :meth:`contend` (then :meth:`retry` after
    waiting :meth:`next_backoff_ms` if the state is ``backing_off``) or
    :meth:`fail`; on success :meth:`settle`, :meth:`park`/:meth:`attach`,
    :meth:`reenter`, and finally :meth:`abandon` or :meth:`release`.
    """

    def __init__(self, *, new_session: bool = False) -> None:
        self._data = _MountData(new_session=new_session)
        self._chart = created(MountChart(model=self._data))
        self._unpublished = False

    def __repr__(self) -> str:
        return f"MountMachine(state={self.state!r}, new_session={self.new_session})"

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> MountState:
        """The active leaf state."""
        leaves = [s.id for s in self._chart.configuration if not s.states]
        assert len(leaves) == 1 and leaves[0] in _STATE_IDS, leaves
        return cast(MountState, leaves[0])

    @property
    def new_session(self) -> bool:
        """Whether the claim is for a brand-new session id."""
        return self._data.new_session

    @property
    def hosted(self) -> bool:
        """The session belongs to this process's published set (:data:`HOSTED_STATES`)."""
        return self.state in HOSTED_STATES

    @property
    def unpublished(self) -> bool:
        """Reserved by the new-session exception without being written to the ledger."""
        return self._unpublished

    @property
    def retries_used(self) -> int:
        """Lock retries taken in this claim (0..len(BACKOFF_MS))."""
        return self._data.retries_used

    def next_backoff_ms(self, jitter: float) -> int:
        """The wait before the next :meth:`retry`, ms (see :func:`backoff_ms`).

        Raises:
            IllegalTransition: not ``backing_off``.
        """
        if self.state != "backing_off":
            raise IllegalTransition("mount", "retry", self.state)
        return backoff_ms(self._data.retries_used, jitter)

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a ``TransitionCoverage``)."""
        add: Callable[[object], object] = self._chart.add_listener
        add(listener)

    # ------------------------------------------------------------------ events

    def claim(self) -> None:
        """``free -> reserving``: about to take the cross-process lock."""
        self._send("claim")

    def grant(self) -> None:
        """``reserving -> reserved``: re-read, re-checked and written inside the lock."""
        self._send("grant")

    def conflict(self) -> None:
        """``reserving -> occupied``: a live holder is named; nothing was written."""
        self._send("conflict")

    def contend(self) -> None:
        """The lock is held by a live peer, or was lost before writing.

        ``-> backing_off`` while retries are left; then ``-> busy``, or
        ``-> reserved`` (unpublished) for a brand-new id.
        """
        self._send("contend")
        if self.state == "reserved":
            self._unpublished = True

    def fail(self) -> None:
        """The ledger cannot be read or written: ``-> unavailable``, or
        ``-> reserved`` (unpublished) for a brand-new id."""
        self._send("fail")
        if self.state == "reserved":
            self._unpublished = True

    def retry(self) -> None:
        """``backing_off -> reserving`` after the wait; uses one retry."""
        if self.state != "backing_off":
            raise IllegalTransition("mount", "retry", self.state)
        self._data.retries_used += 1
        self._send("retry")

    def reenter(self) -> None:
        """Idempotent re-entry of a session this process holds: state unchanged
        (docs/design/mounts.md §5: never the adoption path that would dispose it)."""
        self._send("reenter")

    def settle(self, *, attached: bool) -> None:
        """``reserved -> attached | parked``: the resume finished; the session is hosted."""
        self._data.attached = attached
        try:
            self._send("settle")
        finally:
            self._data.attached = False

    def park(self) -> None:
        """``attached -> parked``: another session is shown; this one keeps running."""
        self._send("park")

    def attach(self) -> None:
        """``parked -> attached``: this session is shown again."""
        self._send("attach")

    def abandon(self) -> None:
        """``reserved -> abandoned``: the resume failed; the claim is given back."""
        self._send("abandon")

    def release(self) -> None:
        """``attached | parked -> released``: closed, or the process exits."""
        self._send("release")

    def _send(self, event: MountEventName) -> None:
        before = self.state
        configuration = frozenset(s.id for s in self._chart.configuration)
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition("mount", event, before, configuration=configuration) from error


_STATE_IDS: Final[frozenset[str]] = frozenset(
    {
        "free",
        "reserving",
        "backing_off",
        "reserved",
        "attached",
        "parked",
        "occupied",
        "busy",
        "unavailable",
        "abandoned",
        "released",
    }
)


# ---------------------------------------------------------------------- rules


def backoff_ms(retry_index: int, jitter: float) -> int:
    """The wait before lock retry number ``retry_index`` (0-based), ms.

    The base doubles from 25 ms (:data:`BACKOFF_MS`); ``jitter`` in [0, 1)
    scales it by 0.5–1.5 so racing processes spread out; the result is always
    within 25–400 ms (docs/design/mounts.md §5).

    Raises:
        ValueError: ``retry_index`` outside the schedule or ``jitter`` outside [0, 1].
    """
    if not 0 <= retry_index < len(BACKOFF_MS):
        raise ValueError(f"retry index {retry_index} outside 0..{len(BACKOFF_MS) - 1}")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter {jitter} outside [0, 1]")
    wait = round(BACKOFF_MS[retry_index] * (0.5 + jitter))
    return max(MIN_BACKOFF_MS, min(MAX_BACKOFF_MS, wait))


class LockToken(NamedTuple):
    """A parsed ``session-mounts.lock`` token.

    Attributes:
        pid: the holder's process id (positive).
        nonce: whose lock it is (``[0-9a-z]+``).
        start_identity: the holder's start identity
            (:func:`mind.shell.procs.start_identity`); "" in an old-format
            token, which then names its holder by pid alone.
    """

    pid: int
    nonce: str
    start_identity: str = ""


_IDENTITY_MAX_CHARS: Final = 128


def parse_token(raw: bytes) -> LockToken | None:
    """``b"<pid>-<nonce>[@<start identity>]"`` -> :class:`LockToken`; ``None`` if malformed.

    The pid is a positive decimal integer, the nonce non-empty ``[0-9a-z]``
    (docs/design/mounts.md §2: the nonce says whose lock it is, the pid whether it may be
    taken). The start identity (docs/design/mounts.md §3: beyond the pid-only rule) is printable
    ASCII without spaces, at most 128 characters; tokens of older minds have none.
    """
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        return None
    text, at, identity = text.partition("@")
    if at and (
        not identity
        or len(identity) > _IDENTITY_MAX_CHARS
        or not identity.isprintable()
        or " " in identity
    ):
        return None
    pid_text, sep, nonce = text.partition("-")
    if not sep or not pid_text.isdigit() or not nonce or not nonce.isalnum():
        return None
    if not nonce.isascii() or nonce.lower() != nonce or len(pid_text) > 10:
        return None
    pid = int(pid_text)
    return LockToken(pid, nonce, identity) if pid > 0 else None


def format_token(pid: int, nonce: str, start_identity: str) -> bytes:
    """The lock token :func:`parse_token` reads back (no ``@`` part when the identity is "")."""
    token = f"{pid}-{nonce}"
    return (f"{token}@{start_identity}" if start_identity else token).encode()


Liveness = Callable[[int, str], bool]
"""``(pid, recorded start identity) -> alive``: the process that wrote a record
or token still runs. An empty identity (old format, or no ``/proc``) falls back
to the pid alone (signal 0, EPERM alive — docs/design/mounts.md §4); otherwise a live pid
whose start identity differs is a reused pid, hence dead (docs/design/mounts.md §3)
(:func:`mind.shell.procs.same_process`)."""


def identity_of(owner: MountOwner) -> str:
    """The recorded start identity of a ledger record ("" for old-format records)."""
    return owner.startIdentity if isinstance(owner.startIdentity, str) else ""


LockVerdict = Literal["held", "dead", "stale"]
"""What a found lock is: ``held`` (leave it), ``dead`` (its pid is gone: may be
reclaimed), ``stale`` (unreadable token older than the create-to-write window:
may be reclaimed)."""


def lock_verdict(
    raw: bytes, *, age_s: float, stale_after_s: float, alive: Liveness, me: int = 0
) -> LockVerdict:
    """Decide whether a ``session-mounts.lock`` with content ``raw`` may be reclaimed.

    Only a dead holder loses the lock (docs/design/mounts.md §3): a readable token
    whose pid is alive is ``held`` however old the file is — a holder that is
    merely paused (SIGSTOP) must not lose it, since on resuming it could
    commit a snapshot derived before. A token carrying a start identity is
    ``dead`` once its pid runs another process (a reused pid, or this mind's
    own pid after a container restart — docs/design/mounts.md §3, beyond the pid-only rule); an
    old-format token (no identity) keeps the pid-only rule, except that one
    naming ``me`` is ``dead``: this process writes identities, so such a token
    is a predecessor's. An unreadable token is ``held`` during the
    create-to-write window and ``stale`` after it.

    Args:
        raw: the lock file's bytes.
        age_s: now minus the file's modification time, s (negative: clock skew,
            treated as fresh).
        stale_after_s: the create-to-write window, s.
        alive: liveness of a recorded process (:data:`Liveness`).
        me: this process's pid when it writes start identities (0: unknown,
            or no ``/proc``, so its own tokens have none either).
    """
    token = parse_token(raw)
    if token is None:
        return "stale" if age_s > stale_after_s else "held"
    if not token.start_identity and token.pid == me:
        return "dead"
    return "held" if alive(token.pid, token.start_identity) else "dead"


def holders_of(
    owners: Iterable[MountOwner], session_id: str, *, me: int, alive: Liveness
) -> tuple[MountHolder, ...]:
    """Live processes other than ``me`` whose record lists ``session_id``.

    A record counts only while its process is alive (:data:`Liveness`: the
    pid, and its start identity when recorded); this process's own record
    never conflicts (a parked session is not occupied,
    docs/design/mounts.md §1). Sorted by pid, one entry per pid.
    """
    found: dict[int, MountHolder] = {}
    for owner in owners:
        if owner.pid == me or owner.pid in found or session_id not in owner.sessionIds:
            continue
        if alive(owner.pid, identity_of(owner)):
            found[owner.pid] = MountHolder(pid=owner.pid, started_at_ms=owner.startedAt)
    return tuple(found[pid] for pid in sorted(found))


class OwnRecord(NamedTuple):
    """What :func:`with_own_record` decided for one write of the ledger.

    Attributes:
        owners: the whole owner list to write, in file order.
        published: the sessions this process's record lists after the write.
        withheld: sessions of this process left out of its record because a
            live other process lists them, each with those holders (sorted by
            pid); empty when nothing was left out.
    """

    owners: list[MountOwner]
    published: frozenset[str]
    withheld: Mapping[str, tuple[MountHolder, ...]]


def with_own_record(
    owners: Sequence[MountOwner],
    *,
    me: int,
    started_at_ms: int,
    session_ids: Iterable[str],
    alive: Liveness,
    start_identity: str = "",
) -> OwnRecord:
    """The owner list to write: live others kept in order, this process's record replaced.

    Dead records are dropped here, on the write path only (docs/design/mounts.md
    §4.4: no write on the read path). This process's record holds
    ``session_ids`` sorted and unique, minus every session a live other
    record lists (:func:`holders_of`), and ``start_identity`` (omitted when
    ""), in the position of its old record (else last); with no sessions left
    it is removed (§7.4: normal exit clears the record).

    The withholding is the rule "no two live processes ever list one session"
    (§7.2) on every write that is not a grant — republish, abandon, release,
    close — which carry no conflict check of their own. Such a session got
    listed by another process while this one's record was lost (a damaged
    ledger deleted by a person); the session lease decides which of the two
    writes it, the loser gives its claim back, and the next write lists it
    again.
    """
    wanted = sorted(set(session_ids))
    withheld = {
        sid: found for sid in wanted if (found := holders_of(owners, sid, me=me, alive=alive))
    }
    ids = [sid for sid in wanted if sid not in withheld]
    mine = (
        MountOwner(
            pid=me,
            startedAt=started_at_ms,
            sessionIds=ids,
            startIdentity=start_identity or msgspec.UNSET,
        )
        if ids
        else None
    )
    out: list[MountOwner] = []
    seen: set[int] = set()
    for owner in owners:
        if owner.pid == me:
            if mine is not None and me not in seen:
                out.append(mine)
                seen.add(me)
            continue
        if alive(owner.pid, identity_of(owner)):
            out.append(owner)
    if mine is not None and me not in seen:
        out.append(mine)
    return OwnRecord(owners=out, published=frozenset(ids), withheld=withheld)
