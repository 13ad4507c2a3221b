"""Reconciliation at open over a real journal file (docs/design/effects.md §4):
effects a crash left prepared — or running under a supervisor — and
unanswered, each through its machine; what the next open reads back."""

from __future__ import annotations

import os
from pathlib import Path

from mind._version import __version__
from mind.conversation import ToolCall
from mind.effects.identity import interaction_id
from mind.generated import journal as jr
from mind.shell.effects import SessionEffects, reconcile_at_open
from mind.shell.journal import Journal
from mind.shell.procs import start_identity
from tests.support import records as rec

SID = "sess"
TURN = "turn_1"
SHELL = ToolCall(call_id="c1", name="shell", arguments='{"command": "make deploy"}')
LIST = ToolCall(call_id="c2", name="list_dir", arguments="{}")


def _crashed(tmp_path: Path, *, running: bool) -> Path:
    """A journal whose turn prepared both calls (and, ``running``, recorded
    their supervisor) before mind died; closed, as a crash leaves it."""
    path = tmp_path / "journal.jsonl"
    with Journal.open(path, create=True, session_id=SID) as journal:
        journal.append(
            jr.SessionStarted(
                seq=0, recorded_at_ms=0, session_id=SID, cwd=str(tmp_path), mind_version=__version__
            ),
            sync=True,
        )
        journal.append(rec.turn_started(TURN))
        calls = [
            jr.RecordedToolCall(call_id=c.call_id, name=c.name, arguments=c.arguments)
            for c in (SHELL, LIST)
        ]
        journal.append(rec.model_round(TURN, "", calls))
        effects = SessionEffects(SID, journal)
        for call in (SHELL, LIST):
            inv = effects.propose(TURN, call)
            effects.prepare(inv)
            if running:
                effects.running(inv, os.getpid(), start_identity(os.getpid()))
    return path


def _reopened(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path, session_id=SID) as journal:
        return list(journal.records)


def test_a_running_shell_command_without_evidence_is_told_unknown_and_the_list_left(
    tmp_path: Path,
) -> None:
    path = _crashed(tmp_path, running=True)
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=False)
    assert (done.told, done.waiting) == (1, ())
    records = _reopened(path)
    running = [r for r in records if isinstance(r, jr.EffectRunning)]
    assert [r.supervisor_pid for r in running] == [os.getpid(), os.getpid()]
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert reconciled.effect_id == result.effect_id == running[0].effect_id
    assert (result.call_id, result.effect_outcome) == ("c1", jr.EffectOutcome.unknown)
    # Idempotent: a second open finds the effect answered.
    with Journal.open(path, session_id=SID) as journal:
        assert reconcile_at_open(journal, SID, can_ask=False).told == 0
    assert len(_reopened(path)) == len(records)


def test_when_a_person_can_answer_the_unknown_effect_waits_with_its_choices(
    tmp_path: Path,
) -> None:
    path = _crashed(tmp_path, running=False)
    before = len(_reopened(path))
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=True)
    (facts,) = done.waiting
    assert (facts.call_id, facts.name, facts.choices) == (
        "c1",
        "shell",
        ("rerun", "mark_failed", "tell_model"),
    )
    assert facts.effect_id.startswith("ef_") and facts.prepared_at_ms > 0
    assert facts.interaction_id == interaction_id(facts.effect_id, "unknown_outcome")
    assert len(_reopened(path)) == before  # nothing written: the person decides
