"""Running one compaction of a session's context (docs/design/context.md §5).

The journal keeps every original record; a compaction only appends:
``compaction_started`` (fsynced before the summarisation request), then
``compaction_completed`` (fsynced before any request uses it) or
``compaction_failed`` with the reason. What the model then sees is the pure
view of :mod:`mind.context.compaction`. A crash in between leaves a started
record with no end: the old context stands and a later compaction runs again.

The summarisation request goes to the session's own provider: the context up
to the cut (:func:`mind.context.compaction.clean_through`, never between a
call and its result), then :data:`SUMMARY_REQUEST` (with the person's focus),
and no tools. If that request itself overflows the window, the oldest items
are dropped (a user message, or a round with all its results) and it is sent
again. A transient failure of it (rate_limited, overloaded, server, network,
stream_cut) is retried with the session's retry policy, the same backoff and
limits as a turn's round (:func:`mind.machines.turn.can_retry`). The summary
must be non-empty and smaller than what it replaces.
Commands still running and questions still waiting are named after the
summary, so the model keeps knowing them.

One module (over 500 lines) because one compaction is one durable sequence:
the cut, fitting the summarisation request to the window, the request with
its retries, and the checks of the summary share the records they journal.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import anyio
import msgspec

from mind.context.compaction import (
    clean_through,
    compacted_view,
    kept_budget,
    kept_user_messages,
    refused_turns,
    too_big_to_keep,
)
from mind.context.tool_output import (
    OLD_RESULT_BYTES,
    OutputLimits,
    bound_output,
    limits_for_window,
    utf8_size,
)
from mind.context.usage import BYTES_PER_TOKEN, estimate_tokens, over_threshold
from mind.conversation import (
    AssistantMessage,
    Message,
    ModelRequest,
    StreamDone,
    ToolResultMessage,
    UserMessage,
)
from mind.errors import ProviderError, StorageError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.history import build_messages
from mind.machines.turn import NOTHING_TO_COMPACT, can_retry
from mind.shell import faults
from mind.shell.ids import new_id
from mind.shell.redact import redact, redact_round

if TYPE_CHECKING:
    from mind.shell.session import Session

__all__ = [
    "SUMMARY_REQUEST",
    "SUMMARY_SYSTEM",
    "CompactionOutcome",
    "compact",
    "fit_to_window",
    "left_out_note",
    "refused_note",
    "session_window",
    "summary_notes",
]

SUMMARY_SYSTEM: Final = (
    "You summarise a conversation between a person and mind, a coding agent working "
    "in a terminal, so that the agent can go on from the summary alone."
)
"""The instructions of a summarisation request."""

SUMMARY_REQUEST: Final = (
    "Summarise the conversation above for yourself, to continue the work from it. "
    "Keep: what the person asked for and decided, files read or changed (paths), "
    "commands run and what they showed, errors met, and what is left to do. "
    "Be concise; write only the summary."
)
"""The last user message of a summarisation request (the focus follows it)."""

SUMMARY_MAX_OUTPUT_BYTES: Final = 64 * 1024
"""Most UTF-8 bytes a summary may stream: it must be far smaller than a window."""


@dataclass(frozen=True, slots=True)
class CompactionOutcome:
    """How one compaction ended.

    Attributes:
        compaction_id: ``cp_…`` ("" when it was refused before starting).
        completed: ``compaction_completed`` is durable.
        reason: why it failed or was refused (None when completed): a clause,
            without a final period (those who show it end the sentence).
        before_tokens: estimated tokens of the context before, when known.
        after_tokens: estimated tokens of the context after (completed only).
        message_alone: nothing to compact because the turn's own messages
            are all the model sees besides a summary: an overflow then means
            the message itself is too big for the window.
    """

    compaction_id: str
    completed: bool
    reason: str | None = None
    before_tokens: int | None = None
    after_tokens: int | None = None
    message_alone: bool = False


def session_window(session: Session) -> int | None:
    """The context window the session plans against, in tokens, or None.

    The one place compaction reads it: the session's context-usage fact
    (``model_context_window``, else the window the server's error stated,
    else the built-in table; docs/design/context.md §1).
    """
    return session.context_usage.window


def summary_notes(session: Session) -> str:
    """What must stay known to the model after a compaction: commands still
    running (with their effect ids) and questions still waiting for the person.
    "" when there are none."""
    lines: list[str] = []
    for effect in session.running_effects():
        try:
            command = msgspec.json.decode(effect.arguments).get("command", effect.arguments)
        except (msgspec.DecodeError, AttributeError):
            command = effect.arguments
        lines.append(f"- still running: shell `{command}` (effect {effect.effect_id})")
    for asked in session.pending_interactions():
        lines.append(
            f"- waiting for the person's answer: {asked.kind.value} for call {asked.call_id} "
            f"(interaction {asked.interaction_id})"
        )
    return "\n".join(lines)


def _items(messages: Sequence[Message]) -> list[list[Message]]:
    """Messages grouped so no call is separated from its results: a round
    with tool calls and the results after it are one item."""
    items: list[list[Message]] = []
    for msg in messages:
        if isinstance(msg, ToolResultMessage) and items:
            items[-1].append(msg)
        elif isinstance(msg, AssistantMessage) and msg.tool_calls:
            items.append([msg])
        else:
            items.append([msg])
    return items


def _size(messages: Sequence[Message]) -> int:
    return len(msgspec.json.encode(list(messages)))


SUMMARY_INPUT_SHARE: Final = 3 / 4
"""Share of a known window the summarisation request's messages may fill
(the rest: its instructions, the summary it streams, the estimate's error)."""


def _cut_item(item: list[Message], max_bytes: int) -> list[Message]:
    """An item with each user text and tool output over ``max_bytes`` cut to
    its head and tail (:func:`~mind.context.tool_output.bound_output`)."""
    out: list[Message] = []
    for msg in item:
        if isinstance(msg, UserMessage) and utf8_size(msg.text) > max_bytes:
            msg = UserMessage(text=bound_output(msg.text, max_bytes, what="message"))
        elif isinstance(msg, ToolResultMessage) and utf8_size(msg.output) > max_bytes:
            msg = msgspec.structs.replace(msg, output=bound_output(msg.output, max_bytes))
        out.append(msg)
    return out


def fit_to_window(
    messages: Sequence[Message], window: int | None, limits: OutputLimits
) -> tuple[list[Message], int]:
    """The summarisation request's messages fitted to a known ``window``
    before it is sent (docs/design/context.md §5), and how many of the oldest
    items had to be left out.

    Rule: while their size (JSON bytes at :data:`BYTES_PER_TOKEN`) is over
    :data:`SUMMARY_INPUT_SHARE` of the window, the oldest items first have
    their user texts and tool outputs cut to head and tail, to the window's
    per-result budget (``limits.per_call_bytes``), then, if still over, to
    :data:`~mind.context.tool_output.OLD_RESULT_BYTES`; only then are whole
    oldest items (a round with its results) left out, down to one. An
    unknown window changes nothing (the server's refusals drop items then).
    Pure; never raises.
    """
    items = _items(messages)
    if window is None:
        return [m for item in items for m in item], 0
    budget = int(window * SUMMARY_INPUT_SHARE) * BYTES_PER_TOKEN - utf8_size(
        SUMMARY_SYSTEM + SUMMARY_REQUEST
    )
    sizes = [_size(item) for item in items]
    for piece in (limits.per_call_bytes, OLD_RESULT_BYTES):
        for i, item in enumerate(items):
            if sum(sizes) <= budget:
                break
            items[i] = _cut_item(item, piece)
            sizes[i] = _size(items[i])
    dropped = 0
    while sum(sizes) > budget and len(items) > 1:
        items.pop(0)
        sizes.pop(0)
        dropped += 1
    return [m for item in items for m in item], dropped


def left_out_note(dropped: int) -> str:
    """What the summary says of the oldest items :func:`fit_to_window` left
    out ("" for none): they are gone from the model's view, said so."""
    if not dropped:
        return ""
    what = "message or round" if dropped == 1 else "messages or rounds"
    return (
        f"[The {dropped} oldest {what} of the conversation did not fit in the model's "
        "context window for this summary and are left out of it.]"
    )


async def _summarise(
    session: Session, messages: list[Message], focus: str | None
) -> tuple[str | None, str | None]:
    """Send the summarisation request, dropping the oldest items while it
    overflows and retrying a transient failure as the turn's retry policy
    allows (count, backoff, total time; its own budget, counted from this
    request's first failure). Returns ``(summary, None)`` or ``(None, reason)``.

    The reason says what happened, in the summary's own terms: an answer
    past the request's output cap (:data:`SUMMARY_MAX_OUTPUT_BYTES`, or
    ``max_output_mib`` when smaller; a tool call's arguments count) is the
    summary's cap; an answer with a tool call instead of a summary is that
    (the tool is never run); no input waits on a compaction's request.
    """
    instruction = SUMMARY_REQUEST + (f"\n\nFocus on: {focus}" if focus else "")
    items = _items(messages)
    policy = session.retry_policy
    retries = 0
    first_failure: float | None = None
    cap = min(SUMMARY_MAX_OUTPUT_BYTES, session.config.max_output_bytes)
    while items:
        request = ModelRequest(
            model=session.config.provider.model,
            system=SUMMARY_SYSTEM,
            messages=[m for item in items for m in item] + [UserMessage(text=instruction)],
            tools=[],
            max_output_bytes=cap,
        )
        done: StreamDone | None = None
        try:
            sent = False
            async for item in session.provider.stream(request):
                if not sent:
                    sent = True
                    faults.boundary("compaction_request_sent")
                if isinstance(item, StreamDone):
                    done = redact_round(item, session.secrets)
            if done is None:  # as a round's stream: cut before its final event
                raise ProviderError("stream_cut", detail="stream ended without a final event")
        except ProviderError as exc:
            if exc.kind == "context_length" and len(items) > 1:
                items = items[1:]  # the oldest item, whole (a round with its results)
                continue
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            delay = policy.delay_s(retries + 1, exc.retry_after_s)
            if can_retry(
                policy,
                attempt=retries + 1,
                kind=exc.kind,
                elapsed_s=now - first_failure,
                delay_s=delay,
            ):
                retries += 1
                await anyio.sleep(delay)  # the backoff (a cancellation interrupts it)
                continue
            if exc.kind == "output_limit":  # the turn's wording names a turn's limit
                return None, (
                    f"the model's answer went past the summary's cap of {_kib(cap)} "
                    "(a tool call's arguments count); the stream was closed"
                )
            # A reason is a clause (the REPL, events and advice end it): the
            # provider's sentence joins it without its period.
            return None, f"the summarisation request failed: {exc.message.rstrip('.')}"
        if done.tool_calls:
            names = ", ".join(sorted({c.name[:40] for c in done.tool_calls}))  # model-chosen
            return None, (
                f"the model answered with a tool call ({names}) instead of a summary; "
                "it was not run"
            )
        return done.text, None
    return None, "nothing to summarise"


def _kib(size: int) -> str:
    """``size`` bytes as a person reads a cap: ``64 KiB``, or bytes below 1 KiB."""
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size:,} bytes"


def refused_note(
    records: Sequence[jr.JournalRecord], kept: Sequence[int], window: int | None
) -> str:
    """What the summary says of kept messages the model refused (their turn
    failed ``context_length``) and that the view shows cut: they were too big
    and not answered, so the model neither answers them as whole nor takes
    them as done (docs/design/context.md §5). "" when there are none."""
    refused = refused_turns(records)
    lines = [
        "- the person's message that starts "
        f"{' '.join(r.text.split()[:8])!r} was too big for the model's context window: "
        "it was refused and not answered; below it is cut to its start and its end"
        for r in records
        if isinstance(r, jr.UserMessage)
        and r.seq in kept
        and r.turn_id in refused
        and too_big_to_keep(r, window)
    ]
    return "\n".join(lines)


def _has_work(records: Sequence[jr.JournalRecord], through: int, window: int | None) -> bool:
    """Whether a cut at ``through`` shrinks what the model sees now: it
    replaces a round or a tool result, or covers a user message too big to
    keep whole (:func:`~mind.context.compaction.too_big_to_keep`: the kept
    messages show it cut), e.g. one the model refused as over its window."""
    return any(
        r.seq <= through
        and (
            isinstance(r, jr.ModelRound | jr.ToolResult)
            or (isinstance(r, jr.UserMessage) and too_big_to_keep(r, window))
        )
        for r in compacted_view(records).records
    )


def _cut(
    records: Sequence[jr.JournalRecord], turn_id: str | None, window: int | None = None
) -> int | None:
    """Where the compaction cuts (``through_seq``), or None: nothing to compact.

    Rule: a cut falls only where no call is unanswered
    (:func:`~mind.context.compaction.clean_through`) and must replace work
    (a round or a result, or a user message too big to keep whole, in
    ``window`` tokens). Between turns (``turn_id`` None): the newest such
    point. Inside a turn (automatic or overflow): before that turn when there
    is work there, so the running turn's rounds and results stay verbatim;
    else the newest such point before the turn's latest model round, so that
    round and its results stay verbatim after the kept user messages: the
    model goes on from a result, it never reads as not run and is never
    asked for again. If that leaves nothing, there is nothing to compact (an
    overflow then fails the turn; its latest results are never lost).
    """
    if turn_id is None:
        latest = clean_through(records)
        return latest if latest is not None and _has_work(records, latest, window) else None
    start = next(
        (r.seq for r in records if isinstance(r, jr.TurnStarted) and r.turn_id == turn_id),
        None,
    )
    early = clean_through([r for r in records if start is None or r.seq < start])
    if start is not None and early is not None and _has_work(records, early, window):
        return early
    rounds = [r.seq for r in records if isinstance(r, jr.ModelRound) and r.turn_id == turn_id]
    if not rounds:
        return None
    before = clean_through([r for r in records if r.seq < rounds[-1]])
    return before if before is not None and _has_work(records, before, window) else None


def _message_alone(records: Sequence[jr.JournalRecord], turn_id: str | None) -> bool:
    """Whether, inside a turn, the model sees only that turn's own messages
    (and a summary): no round, no result, no earlier message to cut."""
    view = compacted_view(records).records
    return turn_id is not None and all(
        isinstance(r, jr.UserMessage) and r.turn_id == turn_id
        for r in view
        if isinstance(r, jr.ModelRound | jr.ToolResult | jr.UserMessage)
    )


async def compact(
    session: Session,
    *,
    trigger: str,
    focus: str | None = None,
    turn_id: str | None = None,
    emit: Callable[[ev.Event], None] | None = None,
    overhead_bytes: int = 0,
    sent_tokens: int | None = None,
) -> CompactionOutcome:
    """Compact the session's context once (see the module docstring).

    Args:
        trigger: ``manual`` | ``auto`` | ``overflow`` (journaled).
        focus: what the person asked the summary to focus on.
        turn_id: the turn an automatic or overflow compaction runs inside.
        emit: publishes ``context.compacting`` once ``compaction_started``
            is durable, then ``context.compacted`` when it completes or
            ``context.compaction_failed`` (with the reason) when it fails.
        overhead_bytes: bytes every request carries besides its messages
            (instructions, tool specs), counted in ``after_tokens``.
        sent_tokens: estimated tokens of the request that overflowed (an
            overflow compaction): its ``before_tokens``, the size of what
            the server refused (the projection may predate the budgets it
            was built with); None: the projected context.

    Returns:
        The outcome; a compaction with nothing to compact (no round or
        result before the cut) is refused with a reason and journals nothing.

    Raises:
        StorageError: a compaction record could not be made durable.
        Cancellation: the person interrupted; ``compaction_failed`` is
            written first (the old context stands).
    """
    records = list(session.journal.records)
    through = _cut(records, turn_id, session_window(session))
    if through is None:
        alone = _message_alone(records, turn_id)
        return CompactionOutcome("", False, NOTHING_TO_COMPACT, message_alone=alone)
    before = sent_tokens if sent_tokens is not None else session.context_usage.projected_tokens
    compaction_id = new_id("cp")
    extra = {"turn_id": turn_id} if turn_id is not None else {}
    if focus:
        extra["focus"] = focus
    session.journal.append(
        jr.CompactionStarted(
            seq=0,
            recorded_at_ms=0,
            compaction_id=compaction_id,
            trigger=jr.CompactionTrigger(trigger),
            through_seq=through,
            **extra,
        ),
        sync=True,
    )
    faults.boundary("compaction_started")
    turn_field = {"turn_id": turn_id} if turn_id is not None else {}
    if emit is not None:
        emit(
            ev.ContextCompactingEvent(
                compaction_id=compaction_id, trigger=ev.CompactionTrigger(trigger), **turn_field
            )
        )
    upto = [r for r in records if r.seq <= through]
    # The turn's own budgets (context.md §3): a result as the model saw it, not bigger.
    limits = limits_for_window(session.config.tool_output, session_window(session))
    messages = build_messages(upto, output_limits=limits)
    replaced_bytes = _size(messages)
    if before is None:
        before = estimate_tokens(replaced_bytes)

    def failed(reason: str) -> CompactionOutcome:
        session.journal.append(
            jr.CompactionFailed(
                seq=0, recorded_at_ms=0, compaction_id=compaction_id, reason=reason
            ),
            sync=True,
        )
        if emit is not None:  # durable first, then said (context.md §5)
            emit(
                ev.ContextCompactionFailedEvent(
                    compaction_id=compaction_id,
                    trigger=ev.CompactionTrigger(trigger),
                    reason=reason,
                    **turn_field,
                )
            )
        return CompactionOutcome(compaction_id, False, reason, before)

    # Fitted to a known window before it is sent (§5): nothing is lost unsaid.
    fitted, dropped = fit_to_window(messages, session_window(session), limits)
    if dropped:
        fitted = [UserMessage(text=left_out_note(dropped)), *fitted]
    try:
        summary, reason = await _summarise(session, fitted, focus)
    except anyio.get_cancelled_exc_class():
        # The interrupt wins: a journal that cannot take the record leaves a
        # started one with no end, which means the same (the old context).
        with contextlib.suppress(StorageError):
            failed("interrupted")
        raise
    except Exception as exc:  # a bug or a transport surprise: the old context stands
        return failed(redact(f"internal error: {exc}", session.secrets))
    if summary is None:
        return failed(reason or "no summary")
    summary = summary.strip()
    if not summary:
        return failed("the summary was empty")
    if len(summary.encode("utf-8", "replace")) >= replaced_bytes:
        return failed("the summary was not smaller than what it replaces")
    if dropped:
        summary = left_out_note(dropped) + "\n\n" + summary
    notes = summary_notes(session)
    if notes:
        summary += "\n\n" + notes
    window = session_window(session)
    kept = kept_user_messages(records, through, kept_budget(window))
    if refused := refused_note(records, kept, window):
        summary += "\n\n" + refused
    # A result over the threshold would compact again at once (or overflow):
    # keep fewer messages, oldest out first, down to the newest alone (§5).
    percent = session.config.auto_compact_percent or 100
    while True:
        probe = jr.CompactionCompleted(
            seq=(records[-1].seq + 2) if records else 0,
            recorded_at_ms=0,
            compaction_id=compaction_id,
            through_seq=through,
            summary=summary,
            kept=kept,
            kept_max_bytes=kept_budget(window) * BYTES_PER_TOKEN,
        )
        after = estimate_tokens(
            _size(build_messages([*records, probe], output_limits=limits)) + overhead_bytes
        )
        if len(kept) <= 1 or not over_threshold(after, window, percent):
            break
        kept = kept[1:]
    session.journal.append(
        msgspec.structs.replace(
            probe,
            seq=0,
            before_tokens=before,
            after_tokens=after,
            # The loss is a fact the person is told too, not only the model.
            left_out=dropped or msgspec.UNSET,
        ),
        sync=True,
    )
    faults.boundary("compaction_completed")
    if emit is not None:
        emit(
            ev.ContextCompactedEvent(
                compaction_id=compaction_id,
                trigger=ev.CompactionTrigger(trigger),
                before_tokens=before,
                after_tokens=after,
                left_out=dropped or msgspec.UNSET,
                **turn_field,
            )
        )
    return CompactionOutcome(compaction_id, True, None, before, after)
