"""The startup machine: opening one session in this process (docs/design/recovery.md).

:class:`SessionStartup` wraps the generated
:class:`~mind.generated.session_startup_chart.SessionStartupChart`
(``specs/statecharts/session_startup.yaml``) with the facts its guards read
and one typed method per fact. It names the next step (:attr:`SessionStartup.effect`);
the shell (:meth:`mind.shell.runtime.Runtime.open_session`) performs it and
reports :meth:`~SessionStartup.done` or :meth:`~SessionStartup.step_failed`::

    idle --create | open--> claiming_mount -> leasing -> creating_journal | opening_journal
         -> repairing_processes -> repairing_interactions -> opening_inbox
         -> closing_orphan_calls -> closing_turns -> hosting -> ready
    idle --open [hosted, usable or busy]--> reused
    idle --open [hosted, broken, no turn]--> closing_broken -> claiming_mount ...
    idle --open [no journal, may not create]--> failed
    a failed step -> closing_journal -> releasing_lease -> releasing_mount
                  -> discarding_directory [new session, directory made here] -> failed
                  (entered at the release matching what was taken)

The shell never picks the order or what to give back: it runs
:attr:`~SessionStartup.effect` until it is ``None`` and reads
:attr:`~SessionStartup.outcome`.

Errors: a fact the chart does not allow in the current state raises
:class:`~mind.errors.IllegalTransition` (a ``RuntimeError``: caller misuse); the
machine is unchanged. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, cast, final

from statemachine.exceptions import TransitionNotAllowed

from mind.errors import IllegalTransition
from mind.generated.session_startup_chart import (
    SessionStartupChart,
    SessionStartupEventName,
    SessionStartupStateId,
)
from mind.machines.chart_observers import created

__all__ = [
    "RELEASE_EFFECTS",
    "SessionStartup",
    "StartupEffect",
    "StartupOutcome",
    "reusable",
]

StartupEffect = Literal[
    "close_broken",
    "claim_mount",
    "take_lease",
    "create_journal",
    "open_journal",
    "repair_processes",
    "repair_interactions",
    "open_inbox",
    "close_orphan_calls",
    "close_turns",
    "host",
    "close_journal",
    "release_lease",
    "release_mount",
    "discard_directory",
]
"""What the shell does next; each is one state of the chart (see :data:`_STEPS`)."""

StartupOutcome = Literal["ready", "reused", "failed"]
"""How startup ended: the session is hosted and accepts input (``ready``), the
handle this process already hosts is returned (``reused``), or nothing is
hosted and everything taken was given back (``failed``)."""

RELEASE_EFFECTS: Final[frozenset[StartupEffect]] = frozenset(
    {"close_journal", "release_lease", "release_mount", "discard_directory"}
)
"""The steps that give back what was taken. They are best effort: the shell
logs a failed release and reports :meth:`SessionStartup.done` anyway, so the
chain always reaches ``failed``."""

# state -> (effect the shell performs there, event reporting it done)
_STEPS: Final[dict[str, tuple[StartupEffect, SessionStartupEventName]]] = {
    "closing_broken": ("close_broken", "broken_closed"),
    "claiming_mount": ("claim_mount", "mount_claimed"),
    "leasing": ("take_lease", "lease_taken"),
    "creating_journal": ("create_journal", "journal_opened"),
    "opening_journal": ("open_journal", "journal_opened"),
    "repairing_processes": ("repair_processes", "processes_repaired"),
    "repairing_interactions": ("repair_interactions", "interactions_repaired"),
    "opening_inbox": ("open_inbox", "inbox_opened"),
    "closing_orphan_calls": ("close_orphan_calls", "orphan_calls_closed"),
    "closing_turns": ("close_turns", "turns_closed"),
    "hosting": ("host", "session_hosted"),
    "closing_journal": ("close_journal", "journal_closed"),
    "releasing_lease": ("release_lease", "lease_released"),
    "releasing_mount": ("release_mount", "mount_released"),
    "discarding_directory": ("discard_directory", "directory_discarded"),
}

_OUTCOMES: Final[frozenset[str]] = frozenset({"ready", "reused", "failed"})


@dataclass(eq=False)
class _StartupData:
    """The model bound to :class:`SessionStartupChart`; satisfies ``SessionStartupModel``.

    Attributes:
        creating: startup began with ``create`` (a brand-new session).
        already_hosted: this runtime already hosts the session.
        broken: the hosted session's journal refuses appends.
        busy: the hosted session runs a turn.
        journal_exists: the session's ``journal.jsonl`` exists.
        may_create: ``open`` may create the session when it does not exist.
        directory_existed: the session directory existed before this startup
            (only a directory made here is removed on failure).
        state: where python-statemachine stores the configuration value.
    """

    creating: bool = False
    already_hosted: bool = False
    broken: bool = False
    busy: bool = False
    journal_exists: bool = False
    may_create: bool = False
    directory_existed: bool = True
    state: object = None

    @property
    def reusable(self) -> bool:
        """Guard ``reusable``: the hosted handle is returned as it is — its
        journal works, or a turn runs on it (never closed under a turn)."""
        return reusable(broken=self.broken, busy=self.busy)

    @property
    def openable(self) -> bool:
        """Guard ``openable``: the journal exists, or may be created here."""
        return self.journal_exists or self.may_create

    @property
    def new_session(self) -> bool:
        """Guard ``new_session``: the journal is created here (``create``, or
        ``open`` of a missing session that may be created; never one hosted here)."""
        return self.creating or not (
            self.already_hosted or self.journal_exists or not self.may_create
        )

    @property
    def discards_directory(self) -> bool:
        """Guard ``discards_directory``: a failed new session's directory was
        made by this startup, so it is removed (no ``empty`` session is left)."""
        return self.new_session and not self.directory_existed


def reusable(*, broken: bool, busy: bool) -> bool:
    """Whether re-opening a session this runtime hosts returns its handle.

    The rule (docs/design/journal.md §3): yes unless its journal is broken (a write
    failed: disk full, quota, I/O error) and no turn runs — then the handle
    is closed and the session opened afresh, so after space is freed it goes
    on in this process. A running turn is never closed under it. Pure.
    """
    return busy or not broken


@final
class SessionStartup:
    """The typed wrapper of ``session_startup.yaml`` for one open of one session.

    Drive it with :meth:`create` or :meth:`open` (the facts known before any
    step), then, while :attr:`effect` is not ``None``, perform it and report
    :meth:`done` or :meth:`step_failed`; finally read :attr:`outcome`.
    """

    def __init__(self) -> None:
        self._data = _StartupData()
        self._chart = created(SessionStartupChart(model=self._data))
        self._failed_step: StartupEffect | None = None

    def __repr__(self) -> str:
        return f"SessionStartup(state={self.state!r})"

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> SessionStartupStateId:
        """The active state id."""
        (leaf,) = (s.id for s in self._chart.configuration)
        return cast(SessionStartupStateId, leaf)

    @property
    def effect(self) -> StartupEffect | None:
        """The step the shell performs now; ``None`` before :meth:`open` /
        :meth:`create` and once startup has ended (see :attr:`outcome`)."""
        step = _STEPS.get(self.state)
        return step[0] if step is not None else None

    @property
    def releasing(self) -> bool:
        """Whether :attr:`effect` gives something back (:data:`RELEASE_EFFECTS`)."""
        return self.effect in RELEASE_EFFECTS

    @property
    def outcome(self) -> StartupOutcome | None:
        """``ready`` | ``reused`` | ``failed`` once startup ended, else ``None``."""
        state = self.state
        return cast(StartupOutcome, state) if state in _OUTCOMES else None

    @property
    def failed_step(self) -> StartupEffect | None:
        """The step whose failure started the release chain; ``None`` when
        none failed (a ``failed`` outcome then means: no such session)."""
        return self._failed_step

    @property
    def new_session(self) -> bool:
        """Whether the journal is created by this startup."""
        return self._data.new_session

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a ``TransitionCoverage``)."""
        add: Callable[[object], object] = self._chart.add_listener
        add(listener)

    # ------------------------------------------------------------------ events

    def create(self, *, directory_existed: bool) -> None:
        """``idle -> claiming_mount`` for a brand-new session id.

        Args:
            directory_existed: the session directory was already there (it is
                then never removed on failure).
        """
        self._data.creating = True
        self._data.directory_existed = directory_existed
        self._send("create")

    def open(
        self,
        *,
        already_hosted: bool,
        broken: bool,
        busy: bool,
        journal_exists: bool,
        may_create: bool,
        directory_existed: bool,
    ) -> None:
        """Open an existing session; the chart decides from the facts:

        - hosted here and usable, or running a turn -> ``reused`` (same handle);
        - hosted here with a broken journal and no turn -> ``closing_broken``,
          then the whole order again (docs/design/journal.md §3: after space is freed it
          goes on in this process);
        - not hosted, journal present (or missing and ``may_create``: created
          here) -> ``claiming_mount``;
        - not hosted, no journal, may not create -> ``failed`` (no such session).

        Raises:
            IllegalTransition: not ``idle``.
        """
        self._data.already_hosted = already_hosted
        self._data.broken = broken
        self._data.busy = busy
        self._data.journal_exists = journal_exists
        self._data.may_create = may_create
        self._data.directory_existed = directory_existed
        self._send("open")

    def done(self) -> None:
        """The step named by :attr:`effect` succeeded (a release: was attempted).

        Raises:
            IllegalTransition: no step is running (idle or ended).
        """
        step = _STEPS.get(self.state)
        if step is None:
            raise IllegalTransition("session_startup", "done", self.state)
        self._send(step[1])

    def step_failed(self) -> None:
        """The step named by :attr:`effect` failed: the chart moves to the
        release matching what was taken (or straight to ``failed``).

        Raises:
            IllegalTransition: idle, ended, or a release step (those
                are best effort: report :meth:`done`).
        """
        effect = self.effect
        self._send("step_failed")
        self._failed_step = effect

    def _send(self, event: SessionStartupEventName) -> None:
        before = self.state
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition("session_startup", event, before) from error
