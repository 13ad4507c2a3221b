"""Invocation identities: stable across calls, different whenever any part differs."""

from __future__ import annotations

import pytest

from mind.call_pairing import pair_calls
from mind.effects.identity import arguments_sha256, effect_id, interaction_id
from mind.generated import journal as jr
from tests.support import records as rec


def test_effect_id_is_stable_and_depends_on_every_part() -> None:
    sha = arguments_sha256('{"command": "ls"}')
    base = effect_id("s1", "t1", "call_0", 0, sha)
    assert base == effect_id("s1", "t1", "call_0", 0, sha)
    assert base.startswith("ef_") and len(base) == 35
    others = {
        effect_id("s2", "t1", "call_0", 0, sha),
        effect_id("s1", "t2", "call_0", 0, sha),
        effect_id("s1", "t1", "call_1", 0, sha),
        effect_id("s1", "t1", "call_0", 1, sha),
        effect_id("s1", "t1", "call_0", 0, arguments_sha256('{"command": "rm"}')),
    }
    assert base not in others and len(others) == 5


def test_interaction_id_differs_per_purpose() -> None:
    eff = effect_id("s", "t", "c", 0, arguments_sha256("{}"))
    ids = {interaction_id(eff, p) for p in ("run", "rerun_outside", "unknown_outcome")}
    assert len(ids) == 3 and all(i.startswith("ia_") for i in ids)
    assert interaction_id(eff, "run") == interaction_id(eff, "run")


def test_negative_occurrence_is_refused() -> None:
    with pytest.raises(ValueError, match="occurrence"):
        effect_id("s", "t", "c", -1, "x")


def test_occurrence_counts_reused_ids_within_a_turn_only() -> None:
    call = jr.RecordedToolCall(call_id="call_0", name="shell", arguments="{}")
    records = [
        rec.model_round("t1", "", [call, call]),
        rec.model_round("t1", "", [call], index=1),
        rec.model_round("t2", "", [call]),
    ]
    assert [p.occurrence for p in pair_calls(records)] == [0, 1, 2, 0]
