"""One-line texts of turn events and of the context, shared by the REPL
and ``mind exec``: a resumed turn's first steps, a wait for a command a
crash left running, a compaction and its failure, token counts, the
context's size and window, durations. Pure: strings from events."""

from __future__ import annotations

from mind.context.usage import ContextUsage, counts
from mind.generated import events as ev
from mind.shell.terminal_text import plain


def describe_compaction_failure(event: ev.ContextCompactionFailedEvent) -> str:
    """One line for a failed compaction: ``compacting the context failed
    (automatic): the summary was empty; the model still sees the whole
    conversation``."""
    why = {"manual": "", "auto": " (automatic)", "overflow": " (the context was full)"}[
        event.trigger.value
    ]
    return (
        f"compacting the context failed{why}: {plain(event.reason).rstrip('.')}; "
        "the model still sees the whole conversation"
    )


def describe_compaction(event: ev.ContextCompactedEvent) -> str:
    """One line for a completed compaction: ``context compacted (automatic):
    ~12.3k → ~1.2k tokens; the model now sees a summary of the earlier turns``
    (sizes left out when unknown), then ``; the 10 oldest messages or rounds
    were left out of the summary`` when its request had to leave some out."""
    why = {"manual": "", "auto": " (automatic)", "overflow": " (the context was full)"}[
        event.trigger.value
    ]
    sizes = ""
    before, after = event.before_tokens, event.after_tokens
    if isinstance(before, int) and isinstance(after, int):
        sizes = f": ~{_compact(before)} → ~{_compact(after)} tokens"
    lost = ""
    if isinstance(event.left_out, int):
        lost = f"; the {event.left_out} oldest messages or rounds were left out of the summary"
    return f"context compacted{why}{sizes}; the model now sees a summary of the earlier turns{lost}"


def format_tokens(usage: ev.Usage) -> str:
    """``1.2k in · 340 out tokens`` for a usage record; an unreported count shows as ``?``."""
    known = counts(usage)
    return f"{_compact(known.input_tokens)} in · {_compact(known.output_tokens)} out tokens"


def _compact(n: int | None) -> str:
    if n is None:
        return "?"
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def _round_k(n: int) -> str:
    """``950``, ``1.2k``, ``12k``, ``128k``, ``1.0M``: a token count at a glance."""
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{round(n / 1000)}k"
    return f"{n / 1_000_000:.1f}M"


def format_context(usage: ContextUsage) -> str:
    """The context usage in a few words: ``12k / 128k tokens (9%)``; ``12k
    tokens`` when the window is unknown; ``""`` while the size is unknown
    (no request reported one): nothing is shown rather than a guess
    (docs/design/context.md §1)."""
    size, window = usage.projected_tokens, usage.window
    if size is None:
        return ""
    if window is None:
        return f"{_round_k(size)} tokens"
    return f"{_round_k(size)} / {_round_k(window)} tokens ({usage.percent}%)"


def describe_context(usage: ContextUsage) -> str:
    """``/status``'s line: what the context is and what that rests on
    (``usage.basis``), each state said as it is: nothing sent yet; sent
    but refused as over the window (no count reported); the
    estimate a compaction left (``~N tokens``, no request since); the last
    request's counts as reported (cache reads and writes when reported); or
    unknown because the server reports none. The window follows when there
    is no count to set it against."""
    window = f"window {_round_k(usage.window)} tokens" if usage.window else "window unknown"
    if usage.basis == "unsent":
        return f"nothing sent yet ({window})"
    if usage.basis == "refused":
        return f"unknown: the model refused the requests as over its window ({window})"
    if usage.basis == "compacted":
        shown = format_context(usage)
        size = f"~{shown}" if shown else "unknown"
        return f"{size} (estimated since the compaction; no request since)"
    if usage.basis == "unreported" or usage.input_tokens is None:
        return f"unknown: the server reports no usage ({window})"
    cache = [
        f"{_compact(n)} {word}"
        for n, word in (
            (usage.cache_read_tokens, "cached"),
            (usage.cache_write_tokens, "cache write"),
        )
        if n
    ]
    last = f"{_compact(usage.input_tokens)} in" + (f" ({', '.join(cache)})" if cache else "")
    shown = format_context(usage) or "unknown"
    return f"{shown} · last request {last} · {_compact(usage.output_tokens)} out"


def format_duration(seconds: float) -> str:
    """``0.4s``, ``12s``, ``3m05s``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


def describe_resume(event: ev.TurnResumedEvent) -> str:
    """What a resumed turn (recovery.md §8) does first, for the REPL's note
    and ``mind exec``'s stderr, in one line: ``1 result collected after the
    restart, 2 tool call(s) to run, 1 command already running, waited for,
    not run again, 1 call whose outcome is unknown (you are asked)``; with
    none of these, that the round's results go to the model. Never "to run"
    for a command a crash left running (waited for) or a call whose outcome
    is unknown (asked about first), docs/design/effects.md §4."""
    parts = []
    collected = event.collected_ids if isinstance(event.collected_ids, list) else []
    running = len(event.running_call_ids) if isinstance(event.running_call_ids, list) else 0
    unknown = len(event.unknown_call_ids) if isinstance(event.unknown_call_ids, list) else 0
    if collected:
        parts.append(f"{len(collected)} result(s) collected after the restart")
    to_run = len(event.call_ids) - running - unknown
    if to_run:
        parts.append(f"{to_run} tool call(s) to run")
    if running:
        noun = "command" if running == 1 else "commands"
        parts.append(f"{running} {noun} already running, waited for, not run again")
    if unknown:
        noun = "call whose outcome is" if unknown == 1 else "calls whose outcomes are"
        parts.append(f"{unknown} {noun} unknown (you are asked)")
    return ", ".join(parts) or "its tool results go to the model"


def describe_waiting(event: ev.ToolWaitingEvent, now_ms: int) -> str:
    """``waiting for shell, started 12s ago before mind stopped, to end`` —
    a ``tool.waiting`` wait (nobody to ask; it ends or times out)."""
    ago = format_duration(max(0, now_ms - event.started_at_ms) / 1000)
    return (
        f"waiting for {plain(event.name, keep_joiners=False)}, already running "
        f"(started {ago} ago, before mind stopped), to end or time out"
    )


__all__ = [
    "describe_compaction",
    "describe_compaction_failure",
    "describe_context",
    "describe_resume",
    "describe_waiting",
    "format_context",
    "format_duration",
    "format_tokens",
]
