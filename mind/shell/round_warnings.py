"""The warning a model round's finish calls for (docs/design/providers.md §9).

A round that stopped at the output token limit (finish ``length``) or was
stopped by the provider's content filter (``content_filter``) did not fail:
its text is kept and journaled with that finish. But the answer is not whole,
so the person (REPL, ``mind exec`` stderr) and ``--json`` readers get a
``turn.warning`` saying so. Pure; no I/O.
"""

from __future__ import annotations

from typing import Final

from mind.conversation import FinishReason
from mind.generated import events as ev

__all__ = ["finish_warning"]

_WARNINGS: Final[dict[str, tuple[ev.WarningKind, str]]] = {
    "length": (
        ev.WarningKind.output_truncated,
        "the answer was cut off at the model's output token limit",
    ),
    "content_filter": (
        ev.WarningKind.content_filtered,
        "the provider's content filter stopped the answer",
    ),
}


def finish_warning(turn_id: str, finish: FinishReason) -> ev.TurnWarningEvent | None:
    """The ``turn.warning`` for a round of ``turn_id`` that ended with
    ``finish``, or None for a whole answer (``stop``, ``tool_calls``, ``other``)."""
    found = _WARNINGS.get(finish)
    if found is None:
        return None
    kind, message = found
    return ev.TurnWarningEvent(turn_id=turn_id, kind=kind, message=message)
