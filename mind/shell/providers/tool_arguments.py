"""A tool call assembled from stream fragments: its slot, and the one rule that
turns its argument fragments into raw JSON text (docs/design/providers.md §5).
Pure functions; no I/O."""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from typing import Any

from mind.conversation import without_lone_surrogates


@dataclass
class CallSlot:
    """A tool call being assembled from stream fragments.

    Attributes:
        call_id: provider id ("" until known).
        name: tool name ("" until known).
        fragments: argument fragments in arrival order.
        extra: unknown per-call fields kept verbatim (docs/design/providers.md §4).
        started: True once ToolCallStarted was emitted.
        closed: True when the server marked the call complete.
    """

    call_id: str = ""
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    started: bool = False
    closed: bool = False


_SURROGATE_ESCAPE_RE = re.compile(r"\\u[dD][89a-fA-F]")


def _normalise_surrogates(arguments: str) -> str:
    """Argument JSON whose string escapes decode to lone surrogates, re-serialised
    with them replaced by U+FFFD (the text the journal, tools and events see)."""
    if _SURROGATE_ESCAPE_RE.search(arguments) is None:
        return arguments
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    clean = without_lone_surrogates(value)
    return arguments if clean == value else json.dumps(clean, ensure_ascii=False)


def parses_as_json(text: str) -> bool:
    """Return True when ``text`` is one complete JSON value."""
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def finalize_arguments(fragments: list[str]) -> str:
    """Assemble a call's raw argument text from its fragments (docs/design/providers.md §5).

    Concatenate once at the end. Empty (or whitespace) means ``"{}"``. Only
    when the concatenation is not valid JSON, every non-empty fragment is a
    prefix of the next and the last one parses (a server resending the
    cumulative string, hermes-agent#35718), the last fragment is used. Never
    applied per fragment (hermes-agent#35860 reverted exactly that).

    Args:
        fragments: argument fragments in arrival order.

    Returns:
        Raw JSON text (may still be invalid JSON when the server sent
        garbage; the tool contract reports that to the model). Escapes of
        lone surrogates are replaced by U+FFFD (re-serialised).
    """
    joined = "".join(fragments)
    if not joined.strip():
        return "{}"
    if parses_as_json(joined):
        return _normalise_surrogates(joined)
    parts = [f for f in fragments if f]
    cumulative = len(parts) >= 2 and all(b.startswith(a) for a, b in itertools.pairwise(parts))
    if cumulative and parses_as_json(parts[-1]):
        return _normalise_surrogates(parts[-1])
    return joined
