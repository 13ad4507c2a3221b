"""A call that a crash left prepared, re-driven through ``ToolCalls.run`` —
what a resumed turn does (docs/design/effects.md §4): a rerun-safe one runs
again under the same effect id; a non_idempotent one is never re-run without
a person's word, the model is told what is known. A real hosted session and
its journal; the crash is the state its records leave."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

import mind
from mind.conversation import ToolCall
from mind.generated import journal as jr
from mind.shell import private_files
from mind.shell.effects import SessionEffects
from mind.shell.tool_calls import ToolCalls
from mind.shell.turn_handle import Turn
from tests.support import records as rec

TURN = "turn_redrive"


def _redrive(
    tmp_path: Path, call: ToolCall, *, legacy: bool = False, lost: bool = False
) -> list[jr.JournalRecord]:
    script = tmp_path / "s.yaml"
    script.write_text("- text: unused\n", encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})
    out: list[jr.JournalRecord] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            journal = session.journal
            journal.append(rec.turn_started(TURN))
            recorded = jr.RecordedToolCall(
                call_id=call.call_id, name=call.name, arguments=call.arguments
            )
            journal.append(rec.model_round(TURN, "", [recorded]))
            effects = SessionEffects(session.session_id, journal)
            if legacy:  # a journal written before effects: no effect id on the start
                journal.append(
                    jr.ToolStarted(
                        seq=0, recorded_at_ms=0, turn_id=TURN, call_id=call.call_id, name=call.name
                    ),
                    sync=True,
                )
            else:
                inv = effects.propose(TURN, call)
                effects.prepare(inv)  # then mind "crashed"
                if lost:  # its supervisor ran (supervisor.json) and died unrecorded
                    directory = session.tools.effect_directory(inv.effect_id)
                    assert directory is not None
                    private_files.private_dir(directory)
                    record = {"version": 1, "pid": 1, "start_identity": "gone"}
                    private_files.write_atomic(
                        directory / "supervisor.json", json.dumps(record).encode()
                    )
            machine = rec.tools_machine()
            await ToolCalls(session).run(Turn(session, TURN, []), machine, call)
            out.extend(journal.records)

    anyio.run(main)
    return out


def test_a_prepared_shell_command_whose_supervisor_was_lost_is_not_run_again(
    tmp_path: Path,
) -> None:
    call = ToolCall(call_id="c1", name="shell", arguments='{"command": "touch ran"}')
    records = _redrive(tmp_path, call, lost=True)
    assert not (tmp_path / "ran").exists()
    (started,) = [r for r in records if isinstance(r, jr.ToolStarted)]
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert reconciled.resolution == jr.EffectResolution.tell_model
    assert (result.effect_id, result.effect_outcome, result.status) == (
        started.effect_id,
        jr.EffectOutcome.unknown,
        jr.ToolStatus.interrupted,
    )
    assert "It was not run again" in result.output


def test_a_prepared_shell_command_that_provably_never_started_runs_once(tmp_path: Path) -> None:
    """No supervisor directory: the command never started (it runs only
    under its supervisor there): safe to run, evidence ``ran``; then its
    directory is gone with the durable result."""
    call = ToolCall(call_id="c1", name="shell", arguments='{"command": "echo x >> ran"}')
    records = _redrive(tmp_path, call)
    assert (tmp_path / "ran").read_text() == "x\n"
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert [r for r in records if isinstance(r, jr.EffectReconciled)] == []
    assert (result.effect_outcome, result.evidence) == (
        jr.EffectOutcome.committed,
        jr.EffectEvidence.ran,
    )
    running = [r for r in records if isinstance(r, jr.EffectRunning)]
    assert [r.effect_id for r in running] == [result.effect_id]
    assert result.effect_id and list((tmp_path / "state").rglob(result.effect_id)) == []


def test_a_prepared_read_only_call_runs_again_under_the_same_effect(tmp_path: Path) -> None:
    (tmp_path / "seen.txt").write_text("x", encoding="utf-8")
    call = ToolCall(call_id="c1", name="list_dir", arguments="{}")
    records = _redrive(tmp_path, call)
    (started,) = [r for r in records if isinstance(r, jr.ToolStarted)]
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert [r for r in records if isinstance(r, jr.EffectReconciled)] == []
    assert (result.effect_id, result.effect_outcome, result.evidence, result.synthetic) == (
        started.effect_id,
        jr.EffectOutcome.committed,
        jr.EffectEvidence.ran,
        False,
    )
    assert "seen.txt" in result.output


def test_a_call_started_by_an_older_mind_is_not_run_again(tmp_path: Path) -> None:
    """Fail closed: its start names no effect, yet it started — unknown, never re-run."""
    call = ToolCall(call_id="c1", name="shell", arguments='{"command": "touch ran"}')
    records = _redrive(tmp_path, call, legacy=True)
    assert not (tmp_path / "ran").exists()
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert result.effect_outcome == jr.EffectOutcome.unknown
    assert [r.effect_id for r in records if isinstance(r, jr.EffectReconciled)] == [
        result.effect_id
    ]
