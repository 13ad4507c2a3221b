"""A shell command outlives a ``kill -9`` of mind and its end is collected
(docs/design/effects.md §4, docs/design/processes.md §6): real ``mind exec``
processes against the fake model, killed once ``effect_running`` is durable.

- finished before the restart: its real output and exit status become the
  result (``failed``, evidence ``supervisor``), it is not run again (the
  counter file), the effect directory is gone, every request stays valid;
- still running at the restart: the turn is resumed and waits for it, then
  collects it the same way;
- a tree with ``setsid`` children still running: the restarted library
  session lists it (``Session.running_effects``) and kills it as a whole tree
  (``Session.kill_effect``): no process of it is left; and where a person can
  answer, the resumed turn asks the ``running`` question and its ``kill``
  answer (by interaction id) leaves none either.

Figures (runs, violations, how killed-mid-tool effects ended) join
``.pytest_cache/d/effect-crash-summary.txt`` (``test_effect_crashes``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest

from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.interactions import Answered
from mind.shell.journal import Journal, read_records
from mind.shell.open_reconciliation import CLOSED_TURN_GRACE_S, reconcile_at_open
from tests.crash.harness import PROCESS_TIMEOUT_S, REPO, Case, Input, check, recover
from tests.crash.test_effect_crashes import _summary
from tests.support.crashed_commands import EARLIER, SID, started_then_killed
from tests.support.fake_model import EFFECTS_FILE
from tests.support.orphaned_tree import PROMPT, killed_mid_command, orphaned_tree, reopened
from tests.support.process_trees import marked, new_marker, wait_until

pytestmark = pytest.mark.slow

RUNS = 3


def _collected(case: Case, running: jr.EffectRunning) -> tuple[list[str], jr.ToolResult | None]:
    """Checks common to a collected effect; returns (violations, its result)."""
    v: list[str] = []
    records, _ = read_records(case.session_dir / "journal.jsonl")
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    (answer,) = [r for r in results if r.effect_id == running.effect_id] or [None]
    if answer is None:
        return [f"effect {running.effect_id} has no result"], None
    if answer.synthetic or answer.evidence != jr.EffectEvidence.supervisor:
        v.append(f"effect {running.effect_id} ended {answer.effect_outcome}/{answer.evidence}")
    if any(isinstance(r, jr.EffectReconciled) for r in records):
        v.append("a collected effect was reconciled")
    lines = Counter((case.cwd / EFFECTS_FILE).read_text().split())
    if lines[running.call_id] != 1:
        v.append(f"call {running.call_id} ran {lines[running.call_id]} times")
    if (case.session_dir / "effects" / running.effect_id).exists():
        v.append(f"effect directory {running.effect_id} left after its result")
    return v, answer


def _cell(
    request: pytest.FixtureRequest, boundary: str, answer: jr.ToolResult | None, v: int
) -> str:
    ended = "missing" if answer is None else f"{answer.effect_outcome}/{answer.evidence}"
    cell = {"id": request.node.nodeid, "boundary": boundary, "ended": ended}
    return _summary(request.config, {**cell, "violations": v, "tools_run": 1})


@pytest.mark.parametrize("repeat", range(RUNS))
def test_kill_9_mid_command_its_exit_status_and_output_are_collected(
    request: pytest.FixtureRequest, tmp_path: Path, repeat: int
) -> None:
    command = "echo {call_id} >> {effects}; sleep 1; echo done; exit 3"
    with killed_mid_command(tmp_path, command) as killed:
        case, running = killed.case, killed.running
        exit_file = case.session_dir / "effects" / running.effect_id / "exit.json"
        deadline = time.monotonic() + 10
        while not exit_file.exists():
            assert time.monotonic() < deadline, "the orphaned command never finished"
            time.sleep(0.01)  # the supervisor finishes it on its own
        recovery = recover(case)
        report = check(case, [Input(PROMPT, "durable")], recovery)
    extra, answer = _collected(case, running)
    report.violations += extra
    if answer is not None:
        if answer.effect_outcome != jr.EffectOutcome.failed or answer.status != jr.ToolStatus.error:
            report.violations.append(f"exit 3 recorded {answer.effect_outcome}/{answer.status}")
        if "done" not in answer.output or "exit code: 3" not in answer.output:
            report.violations.append(f"output not collected: {answer.output!r}")
    print(f"\n{_cell(request, 'kill-9 mid command, finished', answer, len(report.violations))}")
    assert report.violations == [], "\n".join(report.violations)


@pytest.mark.parametrize("repeat", range(RUNS))
def test_kill_9_mid_long_command_the_restart_waits_for_it_and_collects_it(
    request: pytest.FixtureRequest, tmp_path: Path, repeat: int
) -> None:
    # It runs until the restarted mind waits on its directory (then "go").
    command = "echo {call_id} >> {effects}; while [ ! -e go ]; do sleep 0.02; done; echo done"
    with killed_mid_command(tmp_path, command) as killed:
        case, running = killed.case, killed.running
        directory = case.session_dir / "effects" / running.effect_id
        waiter = threading.Thread(
            target=_go_once_waited_on, args=(directory, running.supervisor_pid, case.cwd / "go")
        )
        waiter.start()
        try:
            recovery = recover(case)
        finally:
            (case.cwd / "go").touch()
            waiter.join()
        report = check(case, [Input(PROMPT, "durable")], recovery)
    extra, answer = _collected(case, running)
    report.violations += extra
    if recovery.recovered and recovery.recovered[0]["resumed_turns"] != 1:
        report.violations.append(f"the turn was not resumed: {recovery.recovered[0]}")
    if answer is not None and (
        answer.effect_outcome != jr.EffectOutcome.committed or "done" not in answer.output
    ):
        report.violations.append(f"not collected: {answer.effect_outcome} {answer.output!r}")
    print(f"\n{_cell(request, 'kill-9 mid command, running', answer, len(report.violations))}")
    assert report.violations == [], "\n".join(report.violations)


def _go_once_waited_on(directory: Path, supervisor: int, go: Path) -> None:
    """Touch ``go`` once a restarted mind (``mind.shell.cli``; not the
    supervisor or its command, which may hold the directory too) holds
    ``directory`` open — waiting on its lock — or after a bounded wait (the
    test then fails on what it finds)."""
    deadline = time.monotonic() + PROCESS_TIMEOUT_S
    while not go.exists() and time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == supervisor:
                continue
            try:
                if b"mind.shell.cli" not in Path(f"/proc/{entry}/cmdline").read_bytes():
                    continue
                links = [
                    os.readlink(f"/proc/{entry}/fd/{fd}") for fd in os.listdir(f"/proc/{entry}/fd")
                ]
            except OSError:
                continue  # ended meanwhile, or not ours
            if str(directory) in links:
                go.touch()
                return
        time.sleep(0.01)  # polling the process table of other processes
    go.touch()


def test_kill_9_then_kill_at_restart_leaves_no_descendant(tmp_path: Path) -> None:
    with orphaned_tree(tmp_path) as tree:

        async def restart() -> tuple[list[str], bool, str]:
            async with reopened(tree) as session:
                listed = [e.effect_id for e in session.running_effects()]
                killed = session.kill_effect(tree.running.effect_id)
                assert session.resumed_turn is not None
                with anyio.fail_after(15):
                    outcome = await session.resumed_turn.wait()
                return listed, killed, outcome.status

        listed, killed, status = anyio.run(restart)
        assert listed == [tree.running.effect_id]
        assert killed
        assert status == "completed"
        tree.wait_gone()
    records, _ = read_records(tree.case.session_dir / "journal.jsonl")
    (answer,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert (answer.effect_outcome, answer.evidence) == (
        jr.EffectOutcome.failed,
        jr.EffectEvidence.supervisor,
    )
    assert "every process it started were killed" in answer.output


def test_kill_9_then_the_kill_answer_at_restart_leaves_no_descendant(tmp_path: Path) -> None:
    """The issue's "kill it" at restart through the library: the resumed turn
    waits for the orphaned tree and asks (kind ``running``); answering
    ``kill`` by the card's interaction id stops every process of it, and the
    model is told it was killed at the person's request."""
    with orphaned_tree(tmp_path) as tree:

        async def restart() -> tuple[str, object, str]:
            async with reopened(tree, interactive=True) as session:
                turn = session.resumed_turn
                assert turn is not None
                with anyio.fail_after(15):
                    async for event in turn:
                        if isinstance(event, ev.ApprovalRequestedEvent):
                            assert event.kind == ev.Kind.running
                            assert isinstance(event.interaction_id, str)
                            answered = session.answer(event.interaction_id, "kill")
                            kind = event.kind.value
                    outcome = await turn.wait()
                return kind, answered, outcome.status

        kind, answered, status = anyio.run(restart)
        assert kind == "running"
        assert isinstance(answered, Answered)
        assert status == "completed"
        tree.wait_gone()
    records, _ = read_records(tree.case.session_dir / "journal.jsonl")
    (resolved,) = [r for r in records if isinstance(r, jr.InteractionResolved)]
    assert resolved.decision == jr.InteractionDecision.kill
    (answer,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert answer.effect_id == tree.running.effect_id
    assert (answer.effect_outcome, answer.evidence) == (
        jr.EffectOutcome.failed,
        jr.EffectEvidence.supervisor,
    )
    assert "killed at the user's request" in answer.output


def test_kill_9_with_three_commands_running_in_an_earlier_turn_the_open_waits_once(
    tmp_path: Path,
) -> None:
    """effects.md §4: a mind killed with three commands running in a turn
    that is not resumed (a later one started); the open gives them one
    shared :data:`CLOSED_TURN_GRACE_S` to end — not one each — then stops
    every tree still running (``setsid`` escapees too), and each result
    says it was stopped, with its output so far."""
    marker = new_marker()
    journal = tmp_path / "journal.jsonl"
    effects_dir = tmp_path / "effects"
    command = "echo so far; bash -c 'sleep 300 & setsid sleep 300 & sleep 300'"
    try:
        started_then_killed(journal, effects_dir, 3, marker, command, cwd=REPO)
        wait_until(lambda: len(marked(marker, "sleep")) == 9, "the three trees never grew")
        began = time.monotonic()
        with Journal.open(journal, session_id=SID) as reopened:
            done = reconcile_at_open(reopened, SID, can_ask=False, effects_dir=effects_dir)
        took = time.monotonic() - began
        wait_until(lambda: marked(marker) == [], f"processes left: {marked(marker)}")
    finally:
        for pid in marked(marker):  # never leave a test's tree behind
            os.kill(pid, signal.SIGKILL)
    assert took < CLOSED_TURN_GRACE_S + 2.0, f"the open waited {took:.1f} s"
    assert done.collected == 3
    records, _ = read_records(journal)
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    assert sorted(r.call_id for r in results) == ["c0", "c1", "c2"]
    for result in results:
        assert (result.status, result.evidence, result.effect_outcome) == (
            jr.ToolStatus.error,
            jr.EffectEvidence.supervisor,
            jr.EffectOutcome.failed,
        )
        assert result.output.startswith(
            f"[stopped when the session was opened again: its turn ({EARLIER}) was cut short"
        )
        assert "so far\n" in result.output
        assert result.output.endswith(
            "stopped: the command and every process it started were killed"
        )
    assert os.listdir(effects_dir) == []
