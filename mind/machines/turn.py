"""The turn machine: one turn of a session (docs/design/turn.md, ``specs/statecharts/turn.yaml``).

:class:`TurnMachine` wraps the generated :class:`~mind.generated.turn_chart.TurnChart`
with the data its guards read and the actions that name effects. It decides
every branch a turn takes; the shell (``mind.shell.turn_driver``) sends facts
as events with data and performs the effects an event returns (h11's rule:
the machine takes events and returns effect descriptions). It never does I/O.

Size: over 500 lines because the guards, the effect types and the event
methods are one table read together (an event's data, the guard that reads
it, the effect it names); the pure guards are the part to move to
``turn_rules`` if the chart grows again.

Shape of a turn::

    accepted --start--> active{ sampling{requesting -> streaming}
                                running_tools{executing <-> awaiting_approval}
                                retrying{backing_off}
                                draining{checking_inbox} }
             --> exactly one of completed | interrupted | failed | aborted

Decisions (guards, pure functions of the event's data):

- ``round_done``: tool calls -> ``running_tools`` (:class:`RunTools`); a final
  answer -> ``draining`` (:class:`DrainOrSeal`); past ``max_output_mib``
  (:func:`within_output_cap`) -> ``failed`` ``output_limit``.
- ``round_failed``: a ``context_length`` error that taught the session a new
  window, once per round (:func:`can_rebuild_for_window`) -> ``requesting``
  (:class:`RebuildRequest`: the request is built again with that window's
  tool-output budgets, before anything is compacted); :func:`can_retry` (the
  retry policy's count, kind and total time) -> ``retrying``
  (:class:`StartBackoff`), else ``failed``.
- ``approval_needed``: a session grant covers the call -> it runs
  (:class:`RunGranted`); else the session can ask -> ``awaiting_approval``
  (:class:`AskApproval`); else the call is refused (:class:`RefuseCall`).
  ``call_refused``: the policy refuses it outright (:class:`RefuseCall`).
- ``context_measured`` (before each round's request is built): the projected
  context passes ``auto_compact_percent`` of the window and no automatic
  compaction ran in this round -> ``compacting`` (:class:`Compact` ``auto``);
  ``round_failed`` ``context_length`` with the turn's own input alone over
  the window (:func:`message_too_big`) -> ``failed`` at once ("the message
  itself is too big"); else ``context_length`` (:func:`can_compact_overflow`, once per
  round) -> ``compacting`` (:class:`Compact` ``overflow``); ``compaction_done``
  -> ``requesting`` (the request is built again, from the compacted view),
  except after an overflow when the context did not shrink
  (:func:`overflow_unshrunk`) -> ``failed`` with the round's ``context_length``.
- ``tools_done`` / ``steering_claimed``: another round within
  :func:`within_round_limit` -> ``sampling``, else ``failed`` ``internal``;
  after the tool results the boundary drain (:class:`DrainSteering`).
- ``inputs_claimed`` / ``steering_claimed`` carry the ids of the inputs the
  turn took (each journaled as a ``user_message`` first): the machine owns the
  turn's input list, live and in recovery (``turn_replay`` feeds it the same
  events from those records), so both acknowledge by the one rule.
- ``resume`` (a crashed turn replayed from its records, docs/design/recovery.md
  §8): the plan re-drives calls -> :class:`RedriveCalls` (still ``executing``);
  its round was fully answered -> on in ``requesting`` (the next model round).
  The state the replay reached and the fact must agree, else the chart refuses.
- every terminal: :class:`WriteTerminal` with the status, whether the inputs
  are acknowledged (:func:`acknowledges`), their ids and the failure;
  :meth:`TurnMachine.next_turn` then says whether the next turn starts.

Terminal states are absorbing: every event sent after one raises
:class:`~mind.errors.IllegalTransition`.

Errors: a disallowed event raises :class:`~mind.errors.IllegalTransition`
(``chart="turn"``; a ``RuntimeError``: the caller misused the machine; never
retried), the one refusal of every chart, so callers do not depend on the
engine; the engine error is chained as ``__cause__``. The machine is unchanged
when it is raised. The shell answers a refusal with :meth:`TurnMachine.fail_safe`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeAlias, final

from statemachine.exceptions import TransitionNotAllowed

from mind.context.usage import over_threshold
from mind.errors import CANONICAL_MESSAGES, TRANSIENT_KINDS, IllegalTransition
from mind.generated.turn_chart import TurnChart, TurnEventName
from mind.machines.chart_observers import created

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "FAIL_SAFE",
    "NOTHING_TO_COMPACT",
    "TERMINAL_STATES",
    "UNANSWERED_FAILURES",
    "AnnounceWaiting",
    "AskApproval",
    "Compact",
    "DrainOrSeal",
    "DrainSteering",
    "Effect",
    "LeaveForRecovery",
    "RebuildRequest",
    "RedriveCalls",
    "RefuseCall",
    "RetryRule",
    "RunGranted",
    "RunTools",
    "StartBackoff",
    "StartNextTurn",
    "TurnFailure",
    "TurnMachine",
    "WriteTerminal",
    "acknowledges",
    "can_compact_overflow",
    "can_rebuild_for_window",
    "can_retry",
    "input_over_window",
    "message_too_big",
    "next_turn_starts",
    "overflow_advice",
    "overflow_unshrunk",
    "round_limit_message",
    "within_output_cap",
    "within_round_limit",
]

TERMINAL_STATES: Final = frozenset({"completed", "interrupted", "failed", "aborted"})
"""Ids of the absorbing final states; the turn's status is the one it ends in."""

DEFAULT_MAX_ROUNDS: Final = 200
"""Model rounds per turn before the turn fails (guards a tool loop that never ends)."""

UNANSWERED_FAILURES: Final = frozenset(TRANSIENT_KINDS | {"output_limit", "storage"})
"""Failure kinds after which a failed turn's inputs are *not* acknowledged, so
they stay waiting and replay: a transient provider failure (a replay may
succeed), an answer cut at ``max_output_mib`` (the person never got an answer,
docs/design/turn.md §5) and a journal/inbox write that failed (the terminal record
may not be durable, docs/design/turn.md §3). Any other failure would meet the same
refusal again, so its inputs are consumed."""


# ------------------------------------------------------------------ guards (pure)


def acknowledges(status: str, failure_kind: str | None) -> bool:
    """Whether a turn that ended in ``status`` acknowledges (consumes) its inputs.

    The rule (docs/design/turn.md §3): ``completed`` and ``interrupted`` turns do; an
    ``aborted`` turn does not; a ``failed`` turn does unless its failure kind
    is in :data:`UNANSWERED_FAILURES`. Pure; never raises.

    Args:
        status: the terminal state id (see :data:`TERMINAL_STATES`).
        failure_kind: the failure kind of a failed turn (``None`` otherwise).
    """
    if status in ("completed", "interrupted"):
        return True
    return (
        status == "failed"
        and failure_kind is not None
        and (failure_kind not in UNANSWERED_FAILURES)
    )


def within_output_cap(used_bytes: int, limit_bytes: int) -> bool:
    """Whether a turn whose journaled-to-be rounds streamed ``used_bytes`` of
    model output (UTF-8 bytes of text, reasoning and tool-call arguments,
    summed over the turn's rounds) stays within ``max_output_mib``
    (``limit_bytes``).

    The rule (docs/design/turn.md §5): the cap holds for every provider, so it is
    decided after each round, before the round is kept or its tool calls
    run; a round that goes past it fails the turn ``output_limit`` (not
    acknowledged, see :func:`acknowledges`). Reaching the cap exactly is
    within it. Pure; never raises.
    """
    return used_bytes <= limit_bytes


def round_limit_message(max_rounds: int) -> str:
    """The ``round_limit`` failure's message: the limit ``max_rounds`` (model
    rounds per turn), the setting and how to go on."""
    rounds = "1 model round" if max_rounds == 1 else f"{max_rounds} model rounds"
    return (
        f"The turn reached its limit of {rounds} (max_rounds); raise it with "
        "MIND_MAX_ROUNDS or max_rounds in config.toml, or ask the model to go on."
    )


def within_round_limit(rounds_done: int, max_rounds: int) -> bool:
    """Whether a turn that has had ``rounds_done`` model rounds may have another.

    The rule: at most ``max_rounds`` rounds per turn (a tool loop that never
    ends fails ``internal``). Pure; never raises.
    """
    return rounds_done < max_rounds


class RetryRule(Protocol):
    """What the turn machine asks the retry policy
    (:class:`mind.effects.retry.RetryPolicy` satisfies it)."""

    def should_retry(self, attempt: int, kind: Any) -> bool:
        """Whether retry number ``attempt`` (1-based) may follow a ``kind`` failure."""
        ...

    def within_time(self, elapsed_s: float, delay_s: float) -> bool:
        """Whether a retry after ``delay_s`` more seconds starts inside the retry time."""
        ...

    def delay_s(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number ``attempt``."""
        ...


def can_retry(
    rule: RetryRule, *, attempt: int, kind: str, elapsed_s: float, delay_s: float
) -> bool:
    """Guard ``can_retry``: retry number ``attempt`` after a ``kind`` failure,
    ``elapsed_s`` seconds after the turn's first failed attempt, waiting
    ``delay_s``. The policy's count and kind rule and its total retry time
    must both allow it (docs/design/providers.md §3). Pure; never raises."""
    return rule.should_retry(attempt, kind) and rule.within_time(elapsed_s, delay_s)


def can_compact_overflow(failure_kind: str | None, *, already: bool) -> bool:
    """Guard ``can_compact_overflow``: a request that failed ``context_length``
    compacts and is sent once more; a second overflow in the same round fails
    the turn as before (docs/design/context.md §5). Pure; never raises."""
    return failure_kind == "context_length" and not already


def can_rebuild_for_window(
    failure_kind: str | None, *, window_learned: bool, already: bool
) -> bool:
    """Guard ``can_rebuild_for_window``: a request that failed ``context_length``
    with an error that taught the session a new window (``window_learned``:
    the window it plans with changed) is built again with that window's
    tool-output budgets (:func:`mind.context.tool_output.limits_for_window`)
    and sent, once per round (``already``), before any compaction: the
    budgets the request was built with were the unknown window's, and a
    compaction inside a first turn could only summarise the results the model
    has to go on from (docs/design/context.md §5). Pure; never raises."""
    return failure_kind == "context_length" and window_learned and not already


NOTHING_TO_COMPACT: Final = "nothing to compact yet"
"""A compaction's reason when the view held nothing it could summarise."""


def message_too_big(
    failure_kind: str | None, *, input_tokens: int | None, window: int | None
) -> bool:
    """Guard ``message_too_big``: a request that failed ``context_length``
    while the turn's own input alone (``input_tokens``: estimated tokens of
    its user messages, the instructions and the tool specs, the least any
    request of the turn carries) is at least the model's ``window`` (tokens):
    neither a rebuild nor a compaction can make it fit, so the turn fails at
    once, saying the message itself is too big (docs/design/context.md §5).
    Unknown sizes never decide it. Pure; never raises."""
    return failure_kind == "context_length" and input_over_window(input_tokens, window)


def input_over_window(input_tokens: int | None, window: int | None) -> bool:
    """Whether the turn's own input alone (``input_tokens``, estimated) is at
    least the ``window`` (tokens): then no compaction can make a request of
    the turn fit, and an automatic one is not run for it (it would only
    summarise the history uselessly). Unknown sizes: False. Pure."""
    return input_tokens is not None and window is not None and input_tokens >= window


def overflow_advice(
    message: str,
    reason: str | None,
    *,
    repl: bool,
    session_id: str,
    message_tokens: int | None = None,
    window: int | None = None,
    instructions: str | None = None,
    instructions_tokens: int | None = None,
    request_tokens: int | None = None,
) -> str:
    """The failure text of a turn whose overflow compaction did not shrink
    the context: the round's ``message``, why the compaction did not help and
    what the person can do next, true where they read it.

    Rule: when the model saw nothing but the turn's message (the request
    that overflowed: ``message_tokens`` estimated tokens, with the model's
    ``window`` when known), nothing can be compacted away: the message itself
    is too big; send a shorter one, or use a model with a larger window.
    Then the generic ``context_length`` sentence is dropped (the advice says
    it better) and, when known and larger, the whole request's
    ``request_tokens`` follow the message's. When the instructions files
    (``instructions``: their paths and sizes,
    about ``instructions_tokens``) are at least half the request that
    overflowed, they are named first: neither compaction nor a new session
    shrinks them. Otherwise ``reason`` (when known), then ``/compact`` (with
    a focus) or ``/new`` in the REPL (``repl``), ``/new`` alone when there
    was nothing to compact (a ``/compact`` would find nothing either);
    outside it (``mind exec``, the library: no slash commands there) ``mind
    resume <session_id>`` to run ``/compact`` in the REPL, or a new session.
    Pure; never raises.
    """
    text = message.rstrip()
    if instructions:
        about = f" (about {instructions_tokens:,} tokens)" if instructions_tokens else ""
        of = f" of {window:,} tokens" if window is not None else ""
        return (
            f"{text} Most of the request is the instructions files{about}: {instructions}. "
            "Compacting or a new session cannot shrink them: shorten them, or use a model "
            f"with a larger window; setting model_context_window to the model's window{of} "
            "makes mind cut them to a quarter of it."
        )
    if message_tokens is not None:
        of = f" of {window:,} tokens" if window is not None else ""
        lead = "" if text == CANONICAL_MESSAGES["context_length"] else f"{text} "
        whole = (
            f"; the request with it about {request_tokens:,}"
            if request_tokens is not None and request_tokens > message_tokens
            else ""
        )
        return (
            f"{lead}The message itself is too big for the model's context window{of} "
            f"(it is about {message_tokens:,} tokens{whole}): send a shorter "
            "one, or use a model with a larger window."
        )
    why = f" Compacting it did not help: {reason.rstrip('.')}." if reason else ""
    if repl and reason == NOTHING_TO_COMPACT:
        return (
            f"{text}{why} Send a shorter message, start a new session with /new, "
            "or use a model with a larger window."
        )
    if repl:
        return f"{text}{why} Try /compact (with a focus), or start a new session with /new."
    return (
        f"{text}{why} Compact it in the REPL (`mind resume {session_id}`, then /compact "
        "with a focus), or start a new session (`mind exec` without --session)."
    )


def overflow_unshrunk(trigger: str | None, *, shrank: bool) -> bool:
    """Guard ``overflow_unshrunk``: a compaction run for a ``context_length``
    failure (``trigger`` ``"overflow"``) that did not shrink the context
    (nothing to compact, or it failed) fails the turn with that failure: the
    same request would overflow again (docs/design/context.md §5). An
    automatic one that did nothing goes on to the request. Pure; never raises."""
    return trigger == "overflow" and not shrank


def next_turn_starts(
    status: str,
    *,
    send_pending: bool,
    input_waiting: bool,
    closing: bool,
    written: bool,
    damaged: bool = False,
) -> bool:
    """Whether the turn that ended in ``status`` starts the next turn at once.

    The rule (README.md): input still waiting runs on after a ``completed``
    turn, and after an ``interrupted`` one when the person asked to send it
    (Esc: ``send_pending``); never while the runtime is closing, nor when the
    terminal record could not be written (``written`` false: the journal is
    broken), nor once the journal was found damaged (``damaged``:
    docs/design/checkpoints.md §5, nothing new starts); after a failed or
    aborted turn it waits for the person. Pure; never raises.
    """
    runs_on = status == "completed" or (status == "interrupted" and send_pending)
    return runs_on and input_waiting and not closing and written and not damaged


# ------------------------------------------------------------------ effects


@dataclass(frozen=True, slots=True)
class TurnFailure:
    """Why a turn failed: a closed kind (the journal's ``FailureKind``) and its message.

    Attributes:
        kind: e.g. ``"server"``, ``"output_limit"``, ``"internal"``, ``"storage"``.
        message: the canonical, public message (no provider text).
    """

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class WriteTerminal:
    """Write the one terminal ``turn_completed`` record (fsync).

    Attributes:
        status: ``completed | interrupted | failed | aborted``.
        acknowledge: whether the record acknowledges the inputs the turn
            claimed (:func:`acknowledges`); ``False`` leaves them to replay.
        failure: the failure of a ``failed`` turn, else ``None``.
        acknowledged: the ids the record acknowledges, in claim order: the
            turn's inputs (``inputs_claimed`` / ``steering_claimed``) when
            ``acknowledge``, else ``()``.
    """

    status: str
    acknowledge: bool
    failure: TurnFailure | None = None
    acknowledged: tuple[str, ...] = ()


FAIL_SAFE: Final = WriteTerminal(status="aborted", acknowledge=False)
"""The terminal :meth:`TurnMachine.fail_safe` names when the chart refuses even
``abort``: an aborted turn acknowledges nothing, so no input is lost."""


@dataclass(frozen=True, slots=True)
class StartBackoff:
    """Wait ``delay_s`` seconds, then send ``retry_due`` (the frozen request is resent).

    Attributes:
        delay_s: the backoff, seconds (the policy's, or the server's ``retry-after``).
        attempt: the retry number this backoff precedes (1-based).
        failure: the transient failure being retried.
    """

    delay_s: float
    attempt: int
    failure: TurnFailure


@dataclass(frozen=True, slots=True)
class AskApproval:
    """Publish the approval request of ``call_id``; send ``approval_answered`` once answered."""

    call_id: str


@dataclass(frozen=True, slots=True)
class RefuseCall:
    """The call ``call_id`` is denied without running: nobody can be asked.

    Attributes:
        call_id: the tool call refused.
        reason: why it needed approval (the policy's words).
    """

    call_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RunGranted:
    """The call ``call_id`` runs without a question: a durable session grant
    covers it (docs/design/interactions.md §5)."""

    call_id: str


@dataclass(frozen=True, slots=True)
class LeaveForRecovery:
    """The terminal closed while the turn waited at an approval card: write
    nothing more (no terminal record, no resolution, no synthetic result) and
    let the process go; the journal then reads like a crash inside the tool
    round, so the next open resumes the turn and offers the card again with
    its id (docs/design/interactions.md §3, recovery.md §8)."""


@dataclass(frozen=True, slots=True)
class Compact:
    """Run a compaction (``compaction_started`` fsynced before its request),
    then send ``compaction_done`` whatever its end, saying whether it shrank
    the context (``compaction_completed`` is durable); the round's request is
    then built again from the journal, or, after an overflow that nothing
    shrank, the turn fails (docs/design/context.md §5).

    Attributes:
        trigger: ``auto`` (the projected context passed the threshold) or
            ``overflow`` (the request failed ``context_length``).
    """

    trigger: str


@dataclass(frozen=True, slots=True)
class RebuildRequest:
    """Build the round's request again, with the tool-output budgets of the
    window the failed request's error taught the session, and send it (no
    compaction first; docs/design/context.md §5)."""


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run the round's tool calls in order, journal each result, then send ``tools_done``."""


@dataclass(frozen=True, slots=True)
class RedriveCalls:
    """A resumed turn (docs/design/recovery.md §8): run the calls of its last
    round that still have no result, in call order (one answered meanwhile is
    skipped, never run twice), then send ``tools_done``."""


@dataclass(frozen=True, slots=True)
class DrainOrSeal:
    """One atomic mailbox step: claim new steering (send ``steering_claimed``)
    or seal the box (send ``seal``)."""


@dataclass(frozen=True, slots=True)
class DrainSteering:
    """At the model-request boundary after the tool results: claim the steering
    that arrived meanwhile (the mailbox's ``drain``), journal each as a
    ``user_message``, then send ``inputs_claimed`` with their ids."""


@dataclass(frozen=True, slots=True)
class StartNextTurn:
    """Start the next turn now with the input that waits."""


@dataclass(frozen=True, slots=True)
class AnnounceWaiting:
    """Input waits for a later turn: publish ``input.waiting`` (how to drop it)."""


Effect: TypeAlias = (
    WriteTerminal
    | StartBackoff
    | AskApproval
    | RefuseCall
    | RunGranted
    | LeaveForRecovery
    | Compact
    | RebuildRequest
    | RunTools
    | RedriveCalls
    | DrainOrSeal
    | DrainSteering
)
"""What an event asks the shell to do (the return value of every event method)."""


# ------------------------------------------------------------------ the model


@dataclass
class _TurnData:
    """The model bound to :class:`TurnChart`; satisfies ``TurnModel``.

    Event data (``tool_calls`` … ``elapsed_s``) is set by :class:`TurnMachine`
    for the duration of one event; guards read it, actions append effects.

    Attributes:
        retry: the retry policy the ``can_retry`` guard asks.
        max_rounds: model rounds allowed per turn.
        retries_used: retries taken so far in this turn.
        rounds_done: model rounds that ended (``round_done``) so far.
        effects: effects named by the event being processed.
        terminal: the effect of the terminal reached, once terminal.
        inputs: ids of the inputs the turn claimed, in claim order, no repeats.
        state: where python-statemachine stores the configuration value.
    """

    retry: RetryRule
    max_rounds: int
    retries_used: int = 0
    rounds_done: int = 0
    effects: list[Effect] = field(default_factory=list)
    terminal: WriteTerminal | None = None
    send_pending: bool = True
    inputs: list[str] = field(default_factory=list)
    # event data
    message_ids: tuple[str, ...] = ()
    tool_calls: int = 0
    output_bytes: int = 0
    output_limit: int = 0
    failure: TurnFailure | None = None
    retry_after_s: float | None = None
    elapsed_s: float = 0.0
    call_id: str = ""
    asking: bool = False
    grant: bool = False
    redrive: int = 0
    reason: str = ""
    projected: int | None = None
    window: int | None = None
    percent: int = 0
    auto_compacted: bool = False
    """An automatic compaction ran in this round (reset by ``round_done``)."""
    overflow_compacted: bool = False
    """An overflow compaction ran in this round (reset by ``round_done``)."""
    rebuilt: bool = False
    """The round's request was rebuilt for a learned window (reset by ``round_done``)."""
    window_learned: bool = False
    """Event data of ``round_failed``: its error taught the session a new window."""
    input_tokens: int | None = None
    sent_tokens: int | None = None
    """Event data of ``round_failed``: estimated tokens of the turn's own
    input alone, and of the request that failed (see :func:`message_too_big`)."""
    repl: bool = False
    session_id: str = ""
    message_tokens: int | None = None
    instructions: str | None = None
    instructions_tokens: int | None = None
    """Event data of ``compaction_done``: where the person reads the failure
    (the REPL or not), the session, the tokens of the turn's message
    when it alone overflowed, the instructions files when they are most of
    the request (see :func:`overflow_advice`)."""
    compaction_trigger: str | None = None
    """The trigger of the compaction running (``auto`` | ``overflow``)."""
    overflow: TurnFailure | None = None
    """The ``context_length`` failure the running overflow compaction answers."""
    shrank: bool = False
    compaction_reason: str | None = None
    """Why the compaction that just ended did not shrink the context (event data)."""
    state: object = None

    # ---- guards of turn.yaml

    @property
    def has_tool_calls(self) -> bool:
        """Guard ``has_tool_calls``: the round ended with tool calls."""
        return self.tool_calls > 0

    @property
    def within_output_cap(self) -> bool:
        """Guard ``within_output_cap``: see :func:`within_output_cap`."""
        return within_output_cap(self.output_bytes, self.output_limit)

    @property
    def within_round_limit(self) -> bool:
        """Guard ``within_round_limit``: see :func:`within_round_limit`."""
        return within_round_limit(self.rounds_done, self.max_rounds)

    @property
    def can_ask(self) -> bool:
        """Guard ``can_ask``: the session can ask the person (interactive)."""
        return self.asking

    @property
    def granted(self) -> bool:
        """Guard ``granted``: a durable session grant covers the call."""
        return self.grant

    @property
    def has_redrive(self) -> bool:
        """Guard ``has_redrive``: the resume plan re-drives some call."""
        return self.redrive > 0

    @property
    def over_compact_threshold(self) -> bool:
        """Guard ``over_compact_threshold``: :func:`mind.context.usage.over_threshold`,
        once per round."""
        # A request rebuilt for a learned window is sent before any compaction.
        fresh = not self.auto_compacted and not self.rebuilt
        useful = not input_over_window(self.input_tokens, self.window)
        return fresh and useful and over_threshold(self.projected, self.window, self.percent)

    @property
    def can_compact_overflow(self) -> bool:
        """Guard ``can_compact_overflow``: see :func:`can_compact_overflow`."""
        kind = self.failure.kind if self.failure is not None else None
        return can_compact_overflow(kind, already=self.overflow_compacted)

    @property
    def can_rebuild_for_window(self) -> bool:
        """Guard ``can_rebuild_for_window``: see :func:`can_rebuild_for_window`."""
        kind = self.failure.kind if self.failure is not None else None
        return can_rebuild_for_window(
            kind, window_learned=self.window_learned, already=self.rebuilt
        )

    @property
    def message_too_big(self) -> bool:
        """Guard ``message_too_big``: see :func:`message_too_big`."""
        kind = self.failure.kind if self.failure is not None else None
        return message_too_big(kind, input_tokens=self.input_tokens, window=self.window)

    @property
    def overflow_unshrunk(self) -> bool:
        """Guard ``overflow_unshrunk``: see :func:`overflow_unshrunk`."""
        return overflow_unshrunk(self.compaction_trigger, shrank=self.shrank)

    def _delay_s(self) -> float:
        return self.retry.delay_s(self.retries_used + 1, self.retry_after_s)

    @property
    def can_retry(self) -> bool:
        """Guard ``can_retry``: see :func:`can_retry`."""
        if self.failure is None:
            return False
        return can_retry(
            self.retry,
            attempt=self.retries_used + 1,
            kind=self.failure.kind,
            elapsed_s=self.elapsed_s,
            delay_s=self._delay_s(),
        )

    # ---- actions of turn.yaml (each names one effect)

    def run_tools(self, *args: Any, **kwargs: Any) -> None:
        """Action ``run_tools``."""
        self.effects.append(RunTools())

    def redrive_calls(self, *args: Any, **kwargs: Any) -> None:
        """Action ``redrive_calls`` (``resume`` in ``executing``)."""
        self.effects.append(RedriveCalls())

    def compact_auto(self, *args: Any, **kwargs: Any) -> None:
        """Action ``compact_auto``."""
        self.auto_compacted = True
        self.compaction_trigger = "auto"
        self.effects.append(Compact("auto"))

    def compact_overflow(self, *args: Any, **kwargs: Any) -> None:
        """Action ``compact_overflow``."""
        self.overflow_compacted = True
        self.compaction_trigger = "overflow"
        self.overflow = self.failure
        self.effects.append(Compact("overflow"))

    def rebuild_request(self, *args: Any, **kwargs: Any) -> None:
        """Action ``rebuild_request``."""
        self.rebuilt = True
        self.effects.append(RebuildRequest())

    def drain_or_seal(self, *args: Any, **kwargs: Any) -> None:
        """Action ``drain_or_seal`` (entry of ``draining``)."""
        self.effects.append(DrainOrSeal())

    def drain_steering(self, *args: Any, **kwargs: Any) -> None:
        """Action ``drain_steering`` (``tools_done`` -> ``sampling``)."""
        self.effects.append(DrainSteering())

    def note_inputs(self, *args: Any, **kwargs: Any) -> None:
        """Action ``note_inputs``: the claimed ids join the turn's inputs (an id
        claimed again, e.g. recorded twice, counts once)."""
        self.inputs.extend(i for i in dict.fromkeys(self.message_ids) if i not in self.inputs)

    def start_backoff(self, *args: Any, **kwargs: Any) -> None:
        """Action ``start_backoff``: takes one retry of the turn's budget."""
        assert self.failure is not None
        delay = self._delay_s()
        self.retries_used += 1
        self.effects.append(StartBackoff(delay, self.retries_used, self.failure))

    def ask_approval(self, *args: Any, **kwargs: Any) -> None:
        """Action ``ask_approval``."""
        self.effects.append(AskApproval(self.call_id))

    def refuse_call(self, *args: Any, **kwargs: Any) -> None:
        """Action ``refuse_call``."""
        self.effects.append(RefuseCall(self.call_id, self.reason))

    def run_granted(self, *args: Any, **kwargs: Any) -> None:
        """Action ``run_granted``."""
        self.effects.append(RunGranted(self.call_id))

    def leave_for_recovery(self, *args: Any, **kwargs: Any) -> None:
        """Action ``leave_for_recovery``."""
        self.effects.append(LeaveForRecovery())

    def fail_output_limit(self, *args: Any, **kwargs: Any) -> None:
        """Action ``fail_output_limit``: the failure a round past the cap ends in."""
        self.failure = TurnFailure("output_limit", CANONICAL_MESSAGES["output_limit"])

    def fail_overflow(self, *args: Any, **kwargs: Any) -> None:
        """Action ``fail_overflow``: the turn fails with the round's
        ``context_length`` failure (nothing shrank the context)."""
        failure = self.overflow or TurnFailure(
            "context_length", CANONICAL_MESSAGES["context_length"]
        )
        advice = overflow_advice(
            failure.message,
            self.compaction_reason,
            repl=self.repl,
            session_id=self.session_id,
            message_tokens=self.message_tokens,
            window=self.window,
            instructions=self.instructions,
            instructions_tokens=self.instructions_tokens,
        )
        self.failure = TurnFailure(failure.kind, advice)

    def fail_message_too_big(self, *args: Any, **kwargs: Any) -> None:
        """Action ``fail_message_too_big``: the turn fails with the round's
        ``context_length`` failure, saying the message itself is too big."""
        assert self.failure is not None
        advice = overflow_advice(
            self.failure.message,
            None,
            repl=False,
            session_id="",
            message_tokens=self.input_tokens or self.sent_tokens,
            request_tokens=self.sent_tokens,
            window=self.window,
        )
        self.failure = TurnFailure(self.failure.kind, advice)

    def fail_round_limit(self, *args: Any, **kwargs: Any) -> None:
        """Action ``fail_round_limit``: the failure of a turn out of rounds
        (kind ``round_limit``), naming the limit and the setting that raises it."""
        self.failure = TurnFailure("round_limit", round_limit_message(self.max_rounds))

    def write_terminal(self, *args: Any, state: Any = None, **kwargs: Any) -> None:
        """Action ``write_terminal`` (entry of every terminal state)."""
        status = str(state.id)
        failure = self.failure if status == "failed" else None
        acknowledge = acknowledges(status, failure.kind if failure else None)
        effect = WriteTerminal(
            status=status,
            acknowledge=acknowledge,
            failure=failure,
            acknowledged=tuple(self.inputs) if acknowledge else (),
        )
        self.terminal = effect
        self.effects.append(effect)


@final
class TurnMachine:
    """One turn's lifecycle: its decisions, its retry budget, its round count.

    Every event method returns the effects the transition named (see the
    classes above), in order; ``[]`` when the shell only goes on.

    Args:
        retry: the retry policy (count, kinds, delays, total time).
        max_rounds: model rounds allowed in this turn (``>= 1``).

    Raises:
        ValueError: ``max_rounds`` is below 1.
    """

    def __init__(self, *, retry: RetryRule, max_rounds: int = DEFAULT_MAX_ROUNDS) -> None:
        if max_rounds < 1:
            raise ValueError(f"max_rounds must be >= 1, got {max_rounds}")
        self._data = _TurnData(retry=retry, max_rounds=max_rounds)
        self._chart = created(TurnChart(model=self._data))

    def __repr__(self) -> str:
        return f"TurnMachine(state={self.state!r}, retries_used={self.retries_used})"

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> str:
        """Id of the active leaf state, e.g. ``"requesting"`` or ``"completed"``."""
        leaves = [s.id for s in self._chart.configuration if not s.states]
        return leaves[0]

    @property
    def configuration(self) -> frozenset[str]:
        """Ids of every active state, e.g. ``{"active", "sampling", "streaming"}``."""
        return frozenset(s.id for s in self._chart.configuration)

    @property
    def is_terminal(self) -> bool:
        """Whether the turn reached its one terminal state (absorbing)."""
        return self.state in TERMINAL_STATES

    @property
    def status(self) -> str | None:
        """``"completed" | "interrupted" | "failed" | "aborted"`` once terminal, else ``None``."""
        state = self.state
        return state if state in TERMINAL_STATES else None

    @property
    def terminal(self) -> WriteTerminal | None:
        """The terminal record the turn ended with (what ``write_terminal`` named)."""
        return self._data.terminal

    @property
    def inputs(self) -> tuple[str, ...]:
        """Ids of the inputs the turn claimed so far, in claim order."""
        return tuple(self._data.inputs)

    @property
    def retries_used(self) -> int:
        """Transient round failures retried so far in this turn (never reset)."""
        return self._data.retries_used

    @property
    def rounds_done(self) -> int:
        """Model rounds that ended in this turn (``round_done`` events)."""
        return self._data.rounds_done

    def observe(self, listener: object) -> None:
        """Attach a python-statemachine listener (e.g. a coverage recorder).

        The listener's ``after_transition(event, source, target, transition)``
        (any subset of those names) is called after each taken transition.
        Used by tests; listeners must not send events.
        """
        # ``add_listener`` is unannotated upstream; bind it to a typed name.
        add_listener: Callable[[object], object] = self._chart.add_listener
        add_listener(listener)

    def next_turn(
        self, *, input_waiting: bool, closing: bool, written: bool = True, damaged: bool = False
    ) -> StartNextTurn | AnnounceWaiting | None:
        """After the terminal record: what happens to the input that waits.

        Args:
            input_waiting: accepted input waits in the mailbox.
            closing: the runtime is closing.
            written: the terminal record is durable.
            damaged: the journal was found damaged (nothing new starts).

        Returns :class:`StartNextTurn` (:func:`next_turn_starts`),
        :class:`AnnounceWaiting` when input waits for the person, else ``None``.
        Before the turn is terminal (or after :data:`FAIL_SAFE`) the status
        is taken as ``aborted``.
        """
        status = self.status or "aborted"
        if next_turn_starts(
            status,
            send_pending=self._data.send_pending,
            input_waiting=input_waiting,
            closing=closing,
            written=written,
            damaged=damaged,
        ):
            return StartNextTurn()
        return AnnounceWaiting() if input_waiting else None

    # ------------------------------------------------------------------- events

    def _send(self, event: TurnEventName, **data: Any) -> list[Effect]:
        model = self._data
        saved = {name: getattr(model, name) for name in data}
        for name, value in data.items():
            setattr(model, name, value)
        model.effects = []
        try:
            self._chart.send(event)
        except TransitionNotAllowed as error:
            raise IllegalTransition(
                "turn", event, self.state, configuration=self.configuration
            ) from error
        finally:
            # Event data lives for one event only (a kept failure is in ``terminal``).
            for name, value in saved.items():
                setattr(model, name, value)
        return list(model.effects)

    def start(self) -> list[Effect]:
        """``accepted -> sampling``; send after ``turn_started`` is durable."""
        return self._send("start")

    def stream_opened(self) -> list[Effect]:
        """``requesting -> streaming``: the provider's stream answered."""
        return self._send("stream_opened")

    def round_done(self, *, tool_calls: int, output_bytes: int, output_limit: int) -> list[Effect]:
        """A round's stream ended: run its tools, drain-or-seal, or fail past the cap.

        Args:
            tool_calls: how many tool calls the round made.
            output_bytes: model output of the turn so far, this round included
                (UTF-8 bytes of text, reasoning and tool arguments).
            output_limit: the turn's cap in bytes (``max_output_mib``).

        Returns:
            ``[RunTools]``, ``[DrainOrSeal]`` or ``[WriteTerminal(failed, output_limit)]``.
        """
        self._data.rounds_done += 1
        # Each round may compact once automatically and once on overflow,
        # and be rebuilt once for a learned window.
        data = self._data
        flags = (data.auto_compacted, data.overflow_compacted, data.rebuilt)
        data.auto_compacted = data.overflow_compacted = data.rebuilt = False
        try:
            return self._send(
                "round_done",
                tool_calls=tool_calls,
                output_bytes=output_bytes,
                output_limit=output_limit,
            )
        except IllegalTransition:
            self._data.rounds_done -= 1
            data.auto_compacted, data.overflow_compacted, data.rebuilt = flags
            raise

    def round_failed(
        self,
        *,
        kind: str,
        message: str,
        retry_after_s: float | None = None,
        elapsed_s: float = 0.0,
        window_learned: bool = False,
        input_tokens: int | None = None,
        sent_tokens: int | None = None,
        window: int | None = None,
    ) -> list[Effect]:
        """The round failed: rebuild, compact, back off and retry, or fail the turn.

        Args:
            kind: the failure kind (retried only when the policy allows it).
            message: its canonical message.
            retry_after_s: the server's ``retry-after``, seconds, if any.
            elapsed_s: seconds since the turn's first failed attempt (0 at
                the first failure; the shell's monotonic clock).
            window_learned: the error stated a window that changed the one
                the session plans with (``Session.learn_window``), and the
                request built with its tool-output budgets differs from the
                one sent (else a rebuild would send the same request).
            input_tokens, sent_tokens, window: estimated tokens of the turn's
                own input alone (its user messages, instructions, tool specs)
                and of the request that failed, and the model's window
                (tokens; None: unknown), for :func:`message_too_big`.

        Returns:
            ``[WriteTerminal(failed)]`` at once when :func:`message_too_big`,
            ``[RebuildRequest]`` (a ``context_length`` that taught a new
            window, once per round; now ``requesting``),
            ``[Compact("overflow")]`` (a first ``context_length`` in the
            round otherwise), ``[StartBackoff]`` (``retries_used``
            incremented) or ``[WriteTerminal(failed)]``.
        """
        return self._send(
            "round_failed",
            failure=TurnFailure(kind, message),
            retry_after_s=retry_after_s,
            elapsed_s=elapsed_s,
            window_learned=window_learned,
            input_tokens=input_tokens,
            sent_tokens=sent_tokens,
            window=window,
        )

    def context_measured(
        self,
        *,
        projected: int | None,
        window: int | None,
        percent: int,
        input_tokens: int | None = None,
    ) -> list[Effect]:
        """Before a round's request is built: the projected context.

        Args:
            projected: projected input tokens of the next request (None: unknown).
            window: the model's context window in tokens (None: unknown).
            percent: ``auto_compact_percent`` (0 disables).
            input_tokens: estimated tokens of the turn's own input alone
                (None: unknown); at least ``window``, no automatic
                compaction runs (:func:`input_over_window`).

        Returns:
            ``[Compact("auto")]`` (now ``compacting``) when
            :func:`mind.context.usage.over_threshold` holds and no automatic
            compaction ran in this round; else ``[]`` (still ``requesting``).
        """
        return self._send(
            "context_measured",
            projected=projected,
            window=window,
            percent=percent,
            input_tokens=input_tokens,
        )

    def compaction_done(
        self,
        *,
        shrank: bool,
        reason: str | None = None,
        repl: bool = False,
        session_id: str = "",
        message_tokens: int | None = None,
        window: int | None = None,
        instructions: str | None = None,
        instructions_tokens: int | None = None,
    ) -> list[Effect]:
        """The compaction ended: ``compacting -> requesting`` (build the
        round's request again), or ``-> failed`` with the round's
        ``context_length`` failure when it ran for an overflow and did not
        shrink the context (:func:`overflow_unshrunk`).

        Args:
            shrank: a ``compaction_completed`` is durable (the view is smaller);
                false when it failed or found nothing to compact.
            reason: why it did not shrink it (said in the turn's failure).
            repl, session_id, message_tokens, window: what the failure's
                advice says (:func:`overflow_advice`): read in the REPL or
                not, the session, the tokens of the turn's message when it
                alone overflowed, the model's window in tokens, the
                instructions files and their tokens when they are most of
                the request.

        Returns:
            ``[]`` (``requesting``) or ``[WriteTerminal(failed, context_length)]``.
        """
        return self._send(
            "compaction_done",
            shrank=shrank,
            compaction_reason=reason,
            repl=repl,
            session_id=session_id,
            message_tokens=message_tokens,
            window=window,
            instructions=instructions,
            instructions_tokens=instructions_tokens,
        )

    def retry_due(self) -> list[Effect]:
        """``retrying -> sampling``: the backoff elapsed; resend the frozen request."""
        return self._send("retry_due")

    def approval_needed(
        self, *, call_id: str, can_ask: bool, reason: str = "", granted: bool = False
    ) -> list[Effect]:
        """A tool call needs the person's approval.

        Returns:
            ``[RunGranted(call_id)]`` (still ``executing``) when a session
            grant covers it; else ``[AskApproval(call_id)]`` (now
            ``awaiting_approval``) when the session can ask; else
            ``[RefuseCall(call_id, reason)]`` (still ``executing``: the call
            is denied without running).
        """
        return self._send(
            "approval_needed", call_id=call_id, asking=can_ask, reason=reason, grant=granted
        )

    def call_refused(self, *, call_id: str, reason: str) -> list[Effect]:
        """The policy refuses a call outright (no approval allows it):
        ``[RefuseCall(call_id, reason)]``, still ``executing``."""
        return self._send("call_refused", call_id=call_id, reason=reason)

    def approval_answered(self) -> list[Effect]:
        """``awaiting_approval -> executing``: the answer is in."""
        return self._send("approval_answered")

    def question_asked(self) -> list[Effect]:
        """``executing -> awaiting_approval``: a re-driven call whose outcome
        is unknown asks the person (the reconcile card; a hang-up or leaving
        there leaves the turn for the next open, the question unanswered);
        :meth:`approval_answered` when the answer is in. ``[]``."""
        return self._send("question_asked")

    def tools_done(self) -> list[Effect]:
        """Every tool result is journaled: sample again, or fail out of rounds.

        Resets nothing: the retry budget is per turn, not per round.
        """
        return self._send("tools_done")

    def inputs_claimed(self, message_ids: Iterable[str]) -> list[Effect]:
        """``requesting``: the turn took these inputs (its first ones after
        ``start``, or steering drained after the tool results, each journaled as
        a ``user_message`` first); they join :attr:`inputs`.

        Args:
            message_ids: the claimed ids, in claim order; none: nothing is sent
                (a drain that found nothing leaves no record to replay).

        Returns:
            ``[]``.
        """
        ids = tuple(message_ids)
        return self._send("inputs_claimed", message_ids=ids) if ids else []

    def steering_claimed(self, message_ids: Iterable[str] = ()) -> list[Effect]:
        """``draining -> sampling``: steering was claimed (or fail out of rounds).

        Args:
            message_ids: the claimed ids (journaled first); they join :attr:`inputs`.
        """
        return self._send("steering_claimed", message_ids=tuple(message_ids))

    def seal(self) -> list[Effect]:
        """``draining -> completed``: nothing to drain; the inbox is sealed."""
        return self._send("seal")

    def interrupt(self, *, send_pending: bool = True) -> list[Effect]:
        """``active -> interrupted``: the person cancelled the running turn.

        Args:
            send_pending: whether the input still waiting starts the next
                turn at once (:meth:`next_turn`).
        """
        self._data.send_pending = send_pending
        return self._send("interrupt")

    def hang_up(self) -> list[Effect]:
        """The terminal closed (SIGHUP/SIGTERM: not the person's Stop).
        ``awaiting_approval -> suspended``: ``[LeaveForRecovery()]`` (the turn
        is left for the next open to resume); from any other active state
        ``-> interrupted`` like :meth:`interrupt` (the waiting input stays
        waiting)."""
        self._data.send_pending = False
        return self._send("hang_up")

    def leave(self) -> list[Effect]:
        """The person left the REPL (/exit, Ctrl+D): ``awaiting_command |
        awaiting_approval -> suspended``: ``[LeaveForRecovery()]`` (a command a
        crash left running keeps running under its supervisor, a card's
        question stays unanswered; the next open waits for it / asks it
        again); from any other active state ``-> interrupted`` like
        :meth:`interrupt` (the waiting input stays waiting)."""
        self._data.send_pending = False
        return self._send("leave")

    def command_waited(self) -> list[Effect]:
        """``executing -> awaiting_command``: a re-driven call's command, left
        running by a crash, is waited for (its supervisor still runs)."""
        return self._send("command_waited")

    def command_ended(self) -> list[Effect]:
        """``awaiting_command -> executing``: that command's end was collected
        (or it was killed, or found unknown)."""
        return self._send("command_ended")

    def fail(self, *, kind: str = "internal", message: str = "internal error") -> list[Effect]:
        """``accepted | active -> failed``: an unrecoverable error outside a round."""
        return self._send("fail", failure=TurnFailure(kind, message))

    def abort(self) -> list[Effect]:
        """``accepted | active -> aborted``: the process is stopping; inputs replay later."""
        return self._send("abort")

    def fail_safe(self) -> WriteTerminal:
        """End the turn so no input is lost (docs/design/turn.md §8): after a
        refused transition, or when the runtime cancels the turn.

        The rule: a turn already terminal keeps the terminal it named; else
        ``abort`` (aborted, nothing acknowledged); if the chart refuses even
        that, :data:`FAIL_SAFE` (the same record, named here without the chart:
        :attr:`status` stays ``None`` and :meth:`next_turn` takes it as
        aborted). Never raises.

        Returns:
            The terminal record to write.
        """
        if self._data.terminal is None:
            try:
                self._send("abort")
            except IllegalTransition:
                self._data.terminal = FAIL_SAFE
        assert self._data.terminal is not None
        return self._data.terminal

    # Recovery: a crashed turn, replayed from its records (mind.machines.turn_replay).

    def resume(self, *, redrive: int) -> list[Effect]:
        """Go on with a crashed turn replayed from its records
        (docs/design/recovery.md §8; ``turn_replay.replayed_turn``).

        Args:
            redrive: how many unanswered calls of its last round the resume
                plan re-drives (``len(ResumePlan.redrive)``).

        Returns:
            ``[RedriveCalls()]`` when the replay stopped in ``executing`` and
            ``redrive`` > 0; ``[]`` when it stopped in ``requesting`` (the
            round was fully answered) and ``redrive`` is 0: the next model
            round follows.

        Raises:
            IllegalTransition: any other state or fact (the journal changed
                under the plan, the chart refused the replay): fail safe.
        """
        return self._send("resume", redrive=redrive)

    def recover(self) -> list[Effect]:
        """Close a crashed turn at startup: ``draining -> completed`` (its final
        answer was journaled), ``accepted | other active states -> aborted``."""
        return self._send("recover")
