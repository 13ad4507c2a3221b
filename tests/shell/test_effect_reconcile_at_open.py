"""Reconciliation at open over a real journal file (docs/design/effects.md §4):
effects a crash left prepared — or running under a supervisor — and
unanswered, each through its machine; what the next open reads back."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from mind._version import __version__
from mind.conversation import ToolCall
from mind.effects.identity import interaction_id
from mind.errors import SupervisorIdentityUnknown
from mind.generated import journal as jr
from mind.shell import private_files, supervision
from mind.shell.effect_records import UnknownEffect
from mind.shell.effects import SessionEffects
from mind.shell.journal import Journal
from mind.shell.open_reconciliation import (
    CLOSED_TURN_GRACE_S,
    OpenReconciliation,
    reconcile_at_open,
)
from mind.shell.procs import start_identity
from mind.shell.running_effects import running_effects
from tests.support import records as rec
from tests.support.process_trees import marked, marker_env, new_marker, until

SID = "sess"
TURN = "turn_1"
SHELL = ToolCall(call_id="c1", name="shell", arguments='{"command": "make deploy"}')
LIST = ToolCall(call_id="c2", name="list_dir", arguments="{}")


def _crashed(tmp_path: Path, *, running: bool, supervisor: tuple[int, str] | None = None) -> Path:
    """A journal whose turn prepared both calls (and, ``running``, recorded
    their supervisor: ``supervisor`` or this process) before mind died;
    closed, as a crash leaves it."""
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
                # Default: a supervisor that has ended since (no live process
                # has this pid): a live one is waited for, whatever its directory says.
                pid, identity = supervisor or (2**22 + 1, "gone")
                if identity:
                    effects.running(inv, pid, identity)
                else:  # as a mind before the rule wrote it (the writer refuses it now)
                    journal.append(
                        jr.EffectRunning(
                            seq=0,
                            recorded_at_ms=0,
                            turn_id=TURN,
                            call_id=call.call_id,
                            effect_id=inv.effect_id,
                            supervisor_pid=pid,
                            supervisor_start="",
                        ),
                        sync=True,
                    )
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
    assert [r.supervisor_pid for r in running] == [2**22 + 1, 2**22 + 1]
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


def _supervised(tmp_path: Path, effect_id: str, command: str) -> Path:
    """``command`` run to its end by a real supervisor in ``effects/<effect_id>``."""
    directory = tmp_path / "effects" / effect_id

    async def run() -> None:
        handle = await supervision.start(
            directory,
            ["/bin/sh", "-c", command],
            cwd=tmp_path,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            timeout_s=30,
            max_output_bytes=4000,
        )
        await supervision.wait(handle)

    anyio.run(run)
    return directory


def _shell_effect(records: list[jr.JournalRecord]) -> str:
    (started,) = [r for r in records if isinstance(r, jr.ToolStarted) and r.name == "shell"]
    assert started.effect_id
    return started.effect_id


def test_a_finished_supervisor_s_exit_record_becomes_the_result(tmp_path: Path) -> None:
    """§4: the real output (redacted of the session's secrets) and exit
    status, ``failed`` for exit 3, evidence ``supervisor``; the directory
    goes once the result is durable; a second open finds nothing to do."""
    for running in (True, False):  # effect_running durable, or the crash came first
        where = tmp_path / str(running)
        where.mkdir()
        path = _crashed(where, running=running)
        ident = _shell_effect(_reopened(path))
        directory = _supervised(where, ident, "echo done sk-secret-1; exit 3")
        with Journal.open(path, session_id=SID) as journal:
            done = reconcile_at_open(
                journal, SID, can_ask=False, effects_dir=where / "effects", secrets=["sk-secret-1"]
            )
        assert (done.collected, done.told, done.waiting) == (1, 0, ())
        records = _reopened(path)
        (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
        assert (result.effect_id, result.status, result.effect_outcome, result.evidence) == (
            ident,
            jr.ToolStatus.error,
            jr.EffectOutcome.failed,
            jr.EffectEvidence.supervisor,
        )
        assert not result.synthetic
        assert result.output == "done ***\nexit code: 3"
        assert not directory.exists()
        assert [r for r in records if isinstance(r, jr.EffectReconciled)] == []
        with Journal.open(path, session_id=SID) as journal:
            again = reconcile_at_open(journal, SID, can_ask=False, effects_dir=where / "effects")
        assert again == OpenReconciliation()


def test_a_lost_or_damaged_supervisor_leaves_the_outcome_unknown(tmp_path: Path) -> None:
    path = _crashed(tmp_path, running=True)
    ident = _shell_effect(_reopened(path))
    directory = _supervised(tmp_path, ident, "true")
    (directory / "exit.json").write_text('{"version": 1, "exit_code": "zero"')  # damaged
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=False, effects_dir=tmp_path / "effects")
    assert (done.collected, done.told) == (0, 1)
    (result,) = [r for r in _reopened(path) if isinstance(r, jr.ToolResult)]
    assert (result.effect_outcome, result.evidence) == (
        jr.EffectOutcome.unknown,
        jr.EffectEvidence.none,
    )
    assert not directory.exists()


def test_a_shell_effect_that_provably_never_started_is_left_to_run(tmp_path: Path) -> None:
    """No directory (mind died before its supervisor started): safe to run —
    nothing is written at open; the resumed turn's re-drive runs it."""
    path = _crashed(tmp_path, running=False)
    before = len(_reopened(path))
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=False, effects_dir=tmp_path / "effects")
    assert done == OpenReconciliation()
    assert len(_reopened(path)) == before


def test_a_recorded_supervisor_whose_directory_is_gone_is_unknown_not_never_started(
    tmp_path: Path,
) -> None:
    """``effect_running`` is durable: a supervisor ran it. A missing
    directory then proves nothing — fail closed, never re-run."""
    path = _crashed(tmp_path, running=True)
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=False, effects_dir=tmp_path / "effects")
    assert (done.collected, done.told) == (0, 1)
    results = [r for r in _reopened(path) if isinstance(r, jr.ToolResult)]
    assert [(r.call_id, r.effect_outcome) for r in results] == [("c1", jr.EffectOutcome.unknown)]


def test_leftover_directories_of_answered_effects_are_removed_at_open(tmp_path: Path) -> None:
    """An interrupt's result is durable but a crash cut the cleanup: the raw
    output does not stay (processes.md §7). A directory a supervisor still
    holds is its own and stays."""
    path = _crashed(tmp_path, running=False)
    answered = _supervised(tmp_path, "ef_answered", "echo secret")
    held = tmp_path / "effects" / "ef_held"

    async def hold() -> None:
        handle = await supervision.start(
            held,
            ["sleep", "300"],
            cwd=tmp_path,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            timeout_s=30,
            max_output_bytes=100,
        )
        try:
            with anyio.fail_after(10):
                # Written under its lock before the command starts (processes.md §2).
                while not (held / "supervisor.json").exists():  # noqa: ASYNC110 - no event for it
                    await anyio.sleep(0.01)
            with Journal.open(path, session_id=SID) as journal:
                reconcile_at_open(journal, SID, can_ask=False, effects_dir=tmp_path / "effects")
            assert not answered.exists()
            assert held.exists()
        finally:
            with anyio.CancelScope(shield=True):
                await supervision.stop(handle)

    anyio.run(hold)


def test_a_journaled_supervisor_without_its_record_is_lost_once_gone_running_while_alive(
    tmp_path: Path,
) -> None:
    """processes.md §9.4: a spare is journaled before it gets the job and its
    ``supervisor.json`` is not fsynced, so a directory without
    ``supervisor.json`` and ``exit.json`` proves nothing: its journaled
    supervisor gone → Lost (unknown, never re-run); still running →
    Running (left to the re-drive) — never NeverStarted."""
    gone = subprocess.Popen(["sleep", "30"])
    identity = start_identity(gone.pid)
    gone.kill()
    gone.wait()
    for name, supervisor, told in (
        ("gone", (gone.pid, identity), 1),
        ("alive", (os.getpid(), start_identity(os.getpid())), 0),
    ):
        where = tmp_path / name
        where.mkdir()
        path = _crashed(where, running=True, supervisor=supervisor)
        ident = _shell_effect(_reopened(path))
        directory = where / "effects" / ident
        private_files.private_dir(directory)
        (directory / "supervisor.log").touch(mode=0o600)  # handed over; power cut
        with Journal.open(path, session_id=SID) as journal:
            done = reconcile_at_open(journal, SID, can_ask=False, effects_dir=where / "effects")
        assert done.told == told, name
        results = [r for r in _reopened(path) if isinstance(r, jr.ToolResult)]
        if told:
            shell = next(r for r in results if r.call_id == "c1")
            assert shell.effect_outcome == jr.EffectOutcome.unknown
        else:
            assert [r for r in results if r.call_id == "c1"] == []
            assert not (directory / "never_started").exists()  # its supervisor may still run it


def _open_beside_a_running_command(
    tmp_path: Path,
    command: str,
    env: dict[str, str],
    *,
    grown: Callable[[], bool] = lambda: True,
    secrets: Sequence[str] = (),
) -> tuple[OpenReconciliation, float]:
    """``command`` started under a real supervisor for the crashed turn's
    shell call (``effect_running`` journaled), a later turn started (so that
    turn is never resumed), then — once ``grown()`` — the open's repair and
    orphan steps run in a worker thread, as at startup. Returns what the
    repair did and how long the two steps took (s). One event loop: the
    supervisor, this test's child, is reaped by the wait that started it."""
    from mind.shell.recovery import close_orphan_calls

    path = tmp_path / "journal.jsonl"
    directory = tmp_path / "effects" / _shell_effect(_reopened(path))

    def reopen() -> OpenReconciliation:
        with Journal.open(path, session_id=SID) as journal:
            done = reconcile_at_open(
                journal, SID, can_ask=False, effects_dir=tmp_path / "effects", secrets=secrets
            )
            close_orphan_calls(journal)
        return done

    async def run() -> tuple[OpenReconciliation, float]:
        handle = await supervision.start(
            directory,
            ["/bin/sh", "-c", command],
            cwd=tmp_path,
            env=env,
            timeout_s=600,
            max_output_bytes=4000,
        )
        try:
            with Journal.open(path, session_id=SID) as journal:
                effects = SessionEffects(SID, journal)
                inv = effects.propose(TURN, SHELL)
                effects.running(inv, handle.pid, handle.start_identity, handle.proof_sha256)
                journal.append(rec.turn_started("turn_2"))  # turn_1 is not resumed
            assert await until(grown)
            began = time.monotonic()
            done = await anyio.to_thread.run_sync(reopen)
            return done, time.monotonic() - began
        finally:
            with anyio.CancelScope(shield=True):
                await supervision.wait(handle)  # reaps it (its record is gone by now)

    return anyio.run(run)


def test_a_command_still_running_in_an_earlier_unterminated_turn_is_waited_for_at_open(
    tmp_path: Path,
) -> None:
    """effects.md §4: a turn that is not the last unterminated one is never
    resumed, so its orphan calls get a result at open — a command still
    running there that ends within the grace is waited for and collected,
    never given a synthetic result while it runs."""
    path = _crashed(tmp_path, running=False)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done, _ = _open_beside_a_running_command(tmp_path, "sleep 0.3; echo done", env)
    assert done.collected == 1
    (result,) = [r for r in _reopened(path) if isinstance(r, jr.ToolResult) and r.call_id == "c1"]
    assert not result.synthetic
    assert (result.evidence, result.effect_outcome) == (
        jr.EffectEvidence.supervisor,
        jr.EffectOutcome.committed,
    )
    assert result.output == "done\nexit code: 0"


def test_a_command_still_running_in_an_earlier_turn_after_the_grace_is_stopped_at_open(
    tmp_path: Path,
) -> None:
    """effects.md §4: the earlier turn is closed at open, so its command is
    given :data:`CLOSED_TURN_GRACE_S` to end, then its whole tree — a
    ``setsid`` escapee too — is stopped; the result says why, with the
    output so far (redacted), and the open does not wait for its timeout."""
    marker = new_marker()
    path = _crashed(tmp_path, running=False)
    directory = tmp_path / "effects" / _shell_effect(_reopened(path))
    command = "echo so far sk-secret-2; bash -c 'sleep 300 & setsid sleep 300 & sleep 300'"
    done, took = _open_beside_a_running_command(
        tmp_path,
        command,
        marker_env(marker),
        grown=lambda: len(marked(marker, "sleep")) == 3,
        secrets=["sk-secret-2"],
    )
    assert took < CLOSED_TURN_GRACE_S + 3.0
    assert anyio.run(until, lambda: marked(marker) == [])
    assert done.collected == 1
    (result,) = [r for r in _reopened(path) if isinstance(r, jr.ToolResult) and r.call_id == "c1"]
    assert (result.status, result.evidence, result.effect_outcome) == (
        jr.ToolStatus.error,
        jr.EffectEvidence.supervisor,
        jr.EffectOutcome.failed,
    )
    assert result.output == (
        f"[stopped when the session was opened again: its turn ({TURN}) was cut short by a "
        "crash and could not be resumed, and the command was still running 2 s later; the "
        "output so far follows]\n"
        "so far ***\n"
        "stopped: the command and every process it started were killed"
    )
    assert not directory.exists()


def test_a_running_record_without_a_start_identity_is_refused_nothing_journaled(
    tmp_path: Path,
) -> None:
    """effects.md §4: a bare pid could name any later process, so the one
    writer of ``effect_running`` refuses a record without the identity."""
    path = _crashed(tmp_path, running=False)
    before = _reopened(path)
    with Journal.open(path, session_id=SID) as journal:
        inv = SessionEffects(SID, journal).propose(TURN, SHELL)
        with pytest.raises(SupervisorIdentityUnknown) as refused:
            SessionEffects(SID, journal).running(inv, os.getpid(), "")
    assert refused.value.pid == os.getpid()
    assert _reopened(path) == before


def test_a_running_record_with_an_empty_start_identity_is_never_waited_on_as_live(
    tmp_path: Path,
) -> None:
    """A record an older mind wrote without the identity names a live pid
    (this very process): it is not "running" — the open tells the model the
    outcome is unknown (its directory holds nothing), nothing lists it as
    running, and a collect returns at once instead of waiting for the pid."""
    path = _crashed(tmp_path, running=True, supervisor=(os.getpid(), ""))
    effects_dir = tmp_path / "effects"
    records = _reopened(path)
    assert running_effects(records, SID, effects_dir) == []

    async def collect() -> object:
        with Journal.open(path, session_id=SID) as journal:
            effects = SessionEffects(SID, journal, effects_dir)
            inv = effects.propose(TURN, SHELL)
            with anyio.fail_after(5):
                return await effects.collect(inv, can_ask=True)

    assert isinstance(anyio.run(collect), UnknownEffect)
    with Journal.open(path, session_id=SID) as journal:
        done = reconcile_at_open(journal, SID, can_ask=False, effects_dir=effects_dir)
    assert done.told == 1
    (result,) = [r for r in _reopened(path) if isinstance(r, jr.ToolResult) and r.call_id == "c1"]
    assert result.effect_outcome == jr.EffectOutcome.unknown
