"""Stable identities of one tool invocation, its effect and its interactions
(docs/design/effects.md §1).

A provider-minted call id names no call for good: servers reuse ``call_0``
in every turn and some repeat an id within a round. An invocation is named
instead by what the journal fixes durably — the session, the turn, the
call id, which occurrence of that id in the turn it is
(:attr:`mind.call_pairing.PairedCall.occurrence`) and a hash of the frozen
arguments — so the same invocation gets the same ids after a restart, and a
reused call id with other arguments never matches an old approval. Pure.
"""

from __future__ import annotations

import hashlib
from typing import Final, Literal

__all__ = ["Purpose", "arguments_sha256", "effect_id", "interaction_id"]

Purpose = Literal["run", "rerun_outside", "unknown_outcome", "still_running"]
"""Why an invocation asks the person: run it at all; run it again outside
the sandbox after the sandbox refused it; decide what to do with an effect
whose outcome is unknown after a crash; whether to stop a command a crash
left running (the resumed turn waits for it)."""

_ID_HEX: Final = 32
"""Hex digits kept of each SHA-256 (128 bits: collisions are not a concern
within one session)."""


def arguments_sha256(arguments: str) -> str:
    """Hex SHA-256 of a call's raw argument text as recorded in its
    ``model_round`` (UTF-8; lone surrogates were replaced before recording)."""
    return hashlib.sha256(arguments.encode("utf-8", "surrogatepass")).hexdigest()


def effect_id(
    session_id: str, turn_id: str, call_id: str, occurrence: int, arguments_sha: str
) -> str:
    """The id of one invocation's effect: ``ef_`` + 32 hex digits.

    Shell commands see it as ``MIND_EFFECT_ID`` (to deduplicate their own
    external calls), and it names the effect's records and its supervisor
    directory.

    Raises:
        ValueError: ``occurrence`` is negative.
    """
    if occurrence < 0:
        raise ValueError(f"occurrence must be >= 0, not {occurrence}")
    key = "\0".join((session_id, turn_id, call_id, str(occurrence), arguments_sha))
    return "ef_" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_ID_HEX]


def interaction_id(effect: str, purpose: Purpose) -> str:
    """The id of the interaction that asks about ``effect`` for ``purpose``:
    ``ia_`` + 32 hex digits. The same invocation asked for the same purpose
    after a restart gets the same id, so an unanswered request is offered
    again under it and an answered one is recognised."""
    key = f"{effect}\0{purpose}"
    return "ia_" + hashlib.sha256(key.encode()).hexdigest()[:_ID_HEX]
