"""The effect machine: one tool call's side effect (docs/design/effects.md §3, §4).

:class:`EffectMachine` wraps the generated
:class:`~mind.generated.effect_chart.EffectChart`
(``specs/statecharts/effect.yaml``). Each fact the shell reports returns the
typed actions the chart names; the shell (:mod:`mind.shell.effects`)
performs them in order::

    proposed --approve--> approved   -> Prepare (fsync `tool_started`)
    proposed --deny--> denied        -> nothing runs
    approved --persist--> prepared   -> Run
    prepared --execute--> executing
    executing --finish--> committed | failed   -> Commit(outcome, evidence)
    prepared | executing --recover--> executing (evidence remains) -> Collect
                                    | executing (safe to re-run) -> Run
                                    | unknown   (non_idempotent) -> Resolve(choices)
    executing --recover--> reconciled (killed by the person, no exit record)
                                    -> RecordResolution(killed), DeliverUnknown(failed)
    unknown --reconcile--> executing (rerun) -> RecordResolution, Run
                         | reconciled        -> RecordResolution, DeliverUnknown

Guards are pure functions of this module (:func:`evidence_remains`,
:func:`safe_to_rerun`, :func:`redrivable`, :func:`reconcile_choices`).
Errors: a fact the chart does not allow in the current state raises
:class:`~mind.errors.IllegalTransition` (caller misuse); the machine is
unchanged. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, cast, final

from statemachine.exceptions import TransitionNotAllowed

from mind.errors import IllegalTransition
from mind.generated.effect_chart import EffectChart, EffectEventName, EffectStateId
from mind.machines.chart_observers import created

__all__ = [
    "Collect",
    "Commit",
    "DeliverUnknown",
    "EffectAction",
    "EffectClass",
    "EffectMachine",
    "Evidence",
    "Outcome",
    "Prepare",
    "ProcessFact",
    "RecordResolution",
    "Resolution",
    "Resolve",
    "Run",
    "RunningChoice",
    "evidence_remains",
    "outcome_of",
    "person_answers",
    "reconcile_choices",
    "redrivable",
    "running_choices",
    "safe_to_rerun",
]

EffectClass = Literal["read_only", "idempotent", "non_idempotent"]
"""What running a tool again does (docs/design/effects.md §2)."""

Outcome = Literal["committed", "failed", "unknown"]
"""How an effect ended, as its ``tool_result`` records it."""

Evidence = Literal["ran", "supervisor", "none"]
"""What an outcome rests on: mind saw the tool end (``ran``), a supervisor's
exit record after a crash (``supervisor``), nothing (``none``)."""

Resolution = Literal["rerun", "mark_failed", "tell_model", "killed"]
"""What is done with an effect whose outcome is unknown (§4): a reconcile
answer (``rerun``, ``mark_failed``, ``tell_model``), or ``killed`` — the
person stopped it with ``kill`` while it still ran after a restart and no
exit record was left (never offered as a reconcile choice)."""

RunningChoice = Literal["kill"]
"""What a person may do about a command a crash left running, which the
resumed turn waits for: stop its whole tree (§4). Waiting is no choice: it
is what happens unasked."""

ProcessFact = Literal["finished", "running", "never_started", "lost", "none"]
"""What an effect's supervisor directory says after a crash
(:func:`mind.shell.supervision.inspect`): its exit record is there
(``finished``), its supervisor still holds it (``running``), it provably
never started (``never_started``), it started and ended unrecorded or the
directory is damaged (``lost``); ``none``: the tool runs no process (file
tools) — nothing to read."""

RERUN_SAFE: Final[frozenset[EffectClass]] = frozenset({"read_only", "idempotent"})


def evidence_remains(process: ProcessFact) -> bool:
    """Guard ``evidence_remains``: the effect's supervisor finished (its exit
    record is the outcome) or still runs (wait for that record): its end is
    collected, it never runs again (docs/design/effects.md §4)."""
    return process in ("finished", "running")


def safe_to_rerun(effect_class: EffectClass, process: ProcessFact = "none") -> bool:
    """Guard ``safe_to_rerun``: running the tool again cannot do what it did
    twice — it changes nothing (``read_only``), leaves the same state
    (``idempotent``: ``write_file`` of the same content), or it provably
    never started (``process`` is ``never_started``: no supervisor ran it,
    and none ever will). A ``non_idempotent`` effect (a shell command, a
    patch) otherwise never re-runs without a person's word (§4)."""
    return effect_class in RERUN_SAFE or process == "never_started"


def redrivable(effect_class: EffectClass, process: ProcessFact = "none") -> bool:
    """Whether ``recover`` takes a prepared effect to ``executing`` (collect
    its evidence or run it again) rather than ``unknown``: the rule a
    resumed turn's re-drive rests on (:func:`mind.machines.turn_replay.resume_plan`)."""
    return evidence_remains(process) or safe_to_rerun(effect_class, process)


def reconcile_choices(effect_class: EffectClass, *, can_ask: bool) -> tuple[Resolution, ...]:
    """The choices a reconcile question offers for an effect whose outcome
    is unknown (an interaction of kind ``reconcile``, asked by
    ``mind.shell.interactions``), best first.

    - rerun-safe classes: none (they re-run without asking: ``()``);
    - ``non_idempotent`` and a person can answer: ``rerun``, ``mark_failed``,
      ``tell_model``;
    - nobody can answer (``exec``, a library caller without a handler):
      ``tell_model`` only — the model gets an "outcome unknown" result, never
      a silent re-run.
    """
    if safe_to_rerun(effect_class):
        return ()
    if not can_ask:
        return ("tell_model",)
    return ("rerun", "mark_failed", "tell_model")


def running_choices(process: ProcessFact, *, can_ask: bool) -> tuple[RunningChoice, ...]:
    """The choices offered while a resumed turn waits for a command a crash
    left running (``process`` is ``running``; an interaction of kind
    ``running``): ``kill`` when a person can answer; none otherwise —
    headless (``exec``, a library caller without a handler) only ever waits,
    never kills on its own (docs/design/effects.md §4)."""
    return ("kill",) if process == "running" and can_ask else ()


def person_answers(choices: tuple[str, ...]) -> bool:
    """Whether a question offering ``choices`` is shown to a person: only
    when it offers something beyond what mind does unasked — ``tell_model``
    for an unknown outcome, waiting for a running command (no choice). Where
    nobody can answer, :func:`reconcile_choices` and :func:`running_choices`
    leave only that, so the question is ``declined`` unshown."""
    return any(choice != "tell_model" for choice in choices)


def outcome_of(status: str) -> Outcome:
    """The outcome a finished tool's status gives: ``ok`` is ``committed``,
    anything else (``error``, ``denied``, ``interrupted``) ``failed``."""
    return "committed" if status == "ok" else "failed"


@dataclass(frozen=True, slots=True)
class Prepare:
    """Journal the prepared effect (``tool_started`` with id, class and the
    arguments' SHA-256) and fsync it before anything runs."""


@dataclass(frozen=True, slots=True)
class Run:
    """Run the tool (a shell command sees ``MIND_EFFECT_ID``)."""


@dataclass(frozen=True, slots=True)
class Collect:
    """Read the supervisor's exit record (waiting while it still runs) and
    ``finish`` with its status, evidence ``supervisor``; never run again.

    Attributes:
        choices: what the person may do while it is waited for
            (:func:`running_choices`): ``("kill",)`` for a command still
            running where a person can answer, else none.
    """

    choices: tuple[RunningChoice, ...] = ()


@dataclass(frozen=True, slots=True)
class Commit:
    """Journal the result (``tool_result`` with ``effect_outcome``, ``evidence``), fsynced."""

    outcome: Outcome
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class Resolve:
    """The outcome is unknown: ask (``choices`` has more than ``tell_model``)
    or take the only choice."""

    choices: tuple[Resolution, ...]


@dataclass(frozen=True, slots=True)
class RecordResolution:
    """Journal ``effect_reconciled`` (fsync) before the resolution takes effect."""

    resolution: Resolution


@dataclass(frozen=True, slots=True)
class DeliverUnknown:
    """Journal the result that says what is known (``failed`` when the person
    marked it so, else ``unknown``), evidence ``none``."""

    outcome: Outcome


EffectAction: TypeAlias = (
    Prepare | Run | Collect | Commit | Resolve | RecordResolution | DeliverUnknown
)
"""Everything the effect machine names."""


@dataclass(eq=False)
class _EffectData:
    """The model bound to :class:`EffectChart`; satisfies ``EffectModel``."""

    effect_class: EffectClass
    status: str = ""
    resolution: Resolution | None = None
    process: ProcessFact = "none"
    killed: bool = False
    state: object = None

    @property
    def evidence_remains(self) -> bool:
        """Guard ``evidence_remains`` (:func:`evidence_remains`)."""
        return evidence_remains(self.process)

    @property
    def safe_to_rerun(self) -> bool:
        """Guard ``safe_to_rerun`` (:func:`safe_to_rerun`)."""
        return safe_to_rerun(self.effect_class, self.process)

    @property
    def killed_by_person(self) -> bool:
        """Guard ``killed_by_person``: the person's ``kill`` at the
        ``running`` question stopped the command (a fact the shell reports)."""
        return self.killed

    @property
    def succeeded(self) -> bool:
        """Guard ``succeeded``: the finished tool's status is ``ok``."""
        return outcome_of(self.status) == "committed"

    @property
    def rerun_chosen(self) -> bool:
        """Guard ``rerun_chosen``: the reconciliation's resolution is ``rerun``."""
        return self.resolution == "rerun"


@final
class EffectMachine:
    """The typed wrapper of ``effect.yaml`` for one invocation.

    Args:
        effect_id: the invocation's id (``mind.effects.identity.effect_id``).
        effect_class: the tool's class (``mind.effects.tools``).
    """

    def __init__(self, effect_id: str, effect_class: EffectClass) -> None:
        self.effect_id = effect_id
        self.effect_class: EffectClass = effect_class
        self._data = _EffectData(effect_class)
        self._chart = created(EffectChart(model=self._data))

    def __repr__(self) -> str:
        return f"EffectMachine({self.effect_id!r}, state={self.state!r})"

    @property
    def state(self) -> EffectStateId:
        """The active state id."""
        (leaf,) = (s.id for s in self._chart.configuration)
        return cast(EffectStateId, leaf)

    @property
    def prepared(self) -> bool:
        """Whether a ``tool_started`` was (or must be taken as) journaled:
        every state past ``approved`` except ``denied``."""
        return self.state not in ("proposed", "approved", "denied")

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a ``TransitionCoverage``)."""
        add: Callable[[object], object] = self._chart.add_listener
        add(listener)

    def approve(self) -> list[EffectAction]:
        """The call may run (policy or the person): ``[Prepare]``."""
        self._send("approve")
        return [Prepare()]

    def deny(self) -> list[EffectAction]:
        """The call is refused (policy, the person, bad arguments): it never runs."""
        self._send("deny")
        return []

    def persisted(self) -> list[EffectAction]:
        """``tool_started`` is durable (event ``persist``): ``[Run]``."""
        self._send("persist")
        return [Run()]

    def execute(self) -> list[EffectAction]:
        """The tool was started."""
        self._send("execute")
        return []

    def finish(self, status: str, evidence: Evidence = "ran") -> list[EffectAction]:
        """The tool ended with ``status`` (``ok`` | ``error`` | ``denied`` |
        ``interrupted``), known from ``evidence``: ``[Commit]``."""
        self._data.status = status
        self._send("finish")
        return [Commit(outcome_of(status), evidence)]

    def recover(
        self, *, can_ask: bool, process: ProcessFact = "none", killed: bool = False
    ) -> list[EffectAction]:
        """After a crash: the effect was prepared (maybe executing) and has
        no result; ``process`` is what its supervisor's directory says. Its
        supervisor's evidence is collected (``[Collect]``: finished or still
        running); one the person stopped with ``kill`` (``killed``) that
        left no exit record is resolved ``killed`` unasked
        (``[RecordResolution, DeliverUnknown(failed)]``); a rerun-safe one
        (or one that provably never started) runs again (``[Run]``); else it
        becomes ``unknown``: ``[Resolve(choices)]`` (:func:`reconcile_choices`)."""
        self._data.process = process
        self._data.killed = killed
        self._send("recover")
        if self.state == "reconciled":
            # Killed on the person's word: it did not complete, by their decision.
            return [RecordResolution("killed"), DeliverUnknown("failed")]
        if self.state == "executing":
            if evidence_remains(process):
                return [Collect(running_choices(process, can_ask=can_ask))]
            return [Run()]
        return [Resolve(reconcile_choices(self.effect_class, can_ask=can_ask))]

    def reconcile(self, resolution: Resolution) -> list[EffectAction]:
        """The unknown effect's resolution (the person's answer, or
        ``tell_model`` when nobody can answer): record it, then run again
        (``rerun``) or deliver what is known."""
        self._data.resolution = resolution
        self._send("reconcile")
        if resolution == "rerun":
            return [RecordResolution(resolution), Run()]
        outcome: Outcome = "failed" if resolution in ("mark_failed", "killed") else "unknown"
        return [RecordResolution(resolution), DeliverUnknown(outcome)]

    def _send(self, event: EffectEventName) -> None:
        before = self.state
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition("effect", event, before) from error
