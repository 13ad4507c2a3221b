"""Fault injection at named durable boundaries (docs/design/turn.md §2).

``MIND_CRASH_AT=<boundary>[:<n>]`` makes the process die with SIGKILL — no
cleanup, no ``finally``, exactly like ``kill -9`` — the n-th time (default 1st)
it reaches ``<boundary>``. Several may be given, comma-separated. Crash tests
use it to stop a real ``mind`` process at each boundary and check the
invariants after restart. ``mind debug boundaries`` lists the names.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping

BOUNDARIES: tuple[str, ...] = (
    "after_inbox_write",
    "after_turn_started",
    "after_model_round",
    "after_tool_call",
    "interaction_requested",
    "interaction_shown",
    "interaction_answered_not_applied",
    "effect_prepared",
    "effect_executing",
    "effect_committed_not_delivered",
    "after_tool_result",
    "compaction_started",
    "compaction_request_sent",
    "compaction_completed",
    "before_terminal",
    "after_terminal",
    "checkpoint_written",
)
"""Every named durable boundary, in the order a turn reaches them.

- ``after_inbox_write``: an input is durable in ``inbox.json`` (accepted), not yet in a turn.
- ``after_turn_started``: ``turn_started`` + the turn's inputs are fsynced; no model request yet.
- ``after_model_round``: a ``model_round`` record is journaled (each round).
- ``after_tool_call``: a journaled tool call is about to run (once per call).
- ``interaction_requested``: a question's ``interaction_requested`` is fsynced;
  no card is shown yet (docs/design/interactions.md §2).
- ``interaction_shown``: its card was published (an answer may now arrive).
- ``interaction_answered_not_applied``: its ``interaction_resolved`` is fsynced
  (the person's answer, ``declined``, ``cancelled``); the waiting call has not
  acted on it yet.
- ``effect_prepared``: the call's ``tool_started`` (effect id, class) is fsynced;
  the tool has not started (docs/design/effects.md §3).
- ``effect_executing``: the tool ran (it may have finished); its result is not
  journaled yet.
- ``effect_committed_not_delivered``: the call's ``tool_result`` (its outcome) is
  fsynced; no event or request carried it yet.
- ``after_tool_result``: a ``tool_result`` record is journaled (once per call).
- ``compaction_started``: a ``compaction_started`` is fsynced; its summarisation
  request is not sent yet (docs/design/context.md §5).
- ``compaction_request_sent``: the summarisation request is sent and its answer
  is streaming; no ``compaction_completed`` yet.
- ``compaction_completed``: ``compaction_completed`` is fsynced; no request has
  used it yet.
- ``before_terminal``: the turn's outcome is decided; ``turn_completed`` not yet written.
- ``after_terminal``: ``turn_completed`` (with the acknowledgements) is fsynced; the
  acknowledged inputs are still in ``inbox.json``.
- ``checkpoint_written``: a new ``checkpoint.json`` is written and fsynced under
  its tmp name, not yet renamed over the old one (docs/design/checkpoints.md §3).
"""


class CrashPlan:
    """Which boundary hit kills the process; counts hits per boundary.

    Args:
        spec: the ``MIND_CRASH_AT`` value (``name[:n]``, comma-separated), or "".

    Raises:
        ValueError: an unknown boundary name or a count < 1.
    """

    def __init__(self, spec: str) -> None:
        self._targets: dict[str, int] = {}
        self._hits: dict[str, int] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            name, _, count = part.partition(":")
            if name not in BOUNDARIES:
                raise ValueError(
                    f"MIND_CRASH_AT: unknown boundary {name!r} (see `mind debug boundaries`)"
                )
            n = int(count) if count else 1
            if n < 1:
                raise ValueError(f"MIND_CRASH_AT: count must be >= 1 in {part!r}")
            self._targets[name] = n

    def reach(self, boundary: str) -> None:
        """Record that ``boundary`` was reached; SIGKILL self on the planned hit."""
        if boundary not in BOUNDARIES:  # a typo in mind's own code, not user input
            raise RuntimeError(f"unknown durable boundary {boundary!r}")
        target = self._targets.get(boundary)
        if target is None:
            return
        hits = self._hits.get(boundary, 0) + 1
        self._hits[boundary] = hits
        if hits == target:
            os.kill(os.getpid(), signal.SIGKILL)


_plan: CrashPlan | None = None


def configure(env: Mapping[str, str]) -> None:
    """(Re)read ``MIND_CRASH_AT`` from ``env``. Raises ValueError on a bad spec."""
    global _plan
    _plan = CrashPlan(env.get("MIND_CRASH_AT", ""))


def boundary(name: str) -> None:
    """Mark that the process reached the durable boundary ``name``."""
    if _plan is None:
        configure(os.environ)
    assert _plan is not None
    _plan.reach(name)
