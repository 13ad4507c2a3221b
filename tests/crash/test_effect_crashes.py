"""Effects across crashes (docs/design/effects.md §3, §4): a real ``mind exec``
turn of three shell calls (each appends its id to ``effects.log``, the
side-effect counter) killed by ``MIND_CRASH_AT`` at each effect boundary, at
each call, twice; restarted until nothing is left to recover; then the
invariants of :mod:`tests.crash.harness` (no tool ran twice, every call
answered once, every request a valid Chat Completions body, no input lost)
and the effect records:

- every ``tool_started`` names its effect (id, class, argument hash) and
  every real result its outcome, with evidence ``ran`` or ``supervisor``;
- killed at ``effect_prepared`` (its start durable, no supervisor ever ran
  it): provably never ran, so the resumed turn runs it once (evidence ``ran``);
- killed at ``effect_executing`` (the command ended, its result not yet
  journaled): the supervisor's kept exit record is the result (evidence
  ``supervisor``), it never ran again, nothing is reconciled;
- killed at ``effect_committed_not_delivered``: the committed result stands,
  nothing is reconciled.

Figures (runs, violations, how killed-mid-tool effects ended) go to
``.pytest_cache/d/effect-crash-summary.txt`` and are printed (``-s``).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.crash.harness import (
    PROCESS_TIMEOUT_S,
    REPO,
    Case,
    Input,
    check,
    new_case,
    recover,
    run,
)
from tests.support.fake_model import EFFECTS_FILE, FakeModel
from tests.support.kill_when import first_record, kill_when

pytestmark = pytest.mark.slow

PROMPT = "TOOLS=3 effects prompt"
BOUNDARIES = ("effect_prepared", "effect_executing", "effect_committed_not_delivered")
CALLS = 3
REPEATS = 2


def _effect_violations(case: Case, boundary: str, n: int) -> tuple[list[str], str]:
    """Checks on the effect records; returns (violations, how the killed effect ended)."""
    v: list[str] = []
    records, _ = read_records(case.session_dir / "journal.jsonl")
    starts = [r for r in records if isinstance(r, jr.ToolStarted)]
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    reconciled = {r.effect_id: r for r in records if isinstance(r, jr.EffectReconciled)}
    for s in starts:
        if not (s.effect_id and s.effect_class and s.arguments_sha256):
            v.append(f"tool_started of {s.call_id} names no effect")
    for r in results:
        real = (jr.EffectEvidence.ran, jr.EffectEvidence.supervisor)
        if not r.synthetic and (not r.effect_outcome or r.evidence not in real):
            v.append(f"real result of {r.call_id} has outcome {r.effect_outcome}/{r.evidence}")
    if len(starts) < n:
        return [*v, f"only {len(starts)} calls prepared, killed at hit {n}"], "missing"
    killed = starts[n - 1]
    (answer,) = [r for r in results if r.effect_id == killed.effect_id] or [None]
    if answer is None:
        return [*v, f"killed effect {killed.effect_id} has no result"], "missing"
    log = case.cwd / EFFECTS_FILE
    lines = Counter(log.read_text().split() if log.exists() else [])
    ended = f"{answer.effect_outcome}/{answer.evidence}"
    if boundary == "effect_committed_not_delivered":
        if answer.synthetic or answer.effect_outcome != jr.EffectOutcome.committed:
            v.append(f"committed effect {killed.effect_id} was replaced: {answer}")
        if killed.effect_id in reconciled:
            v.append(f"committed effect {killed.effect_id} was reconciled")
        return v, ended
    # Killed mid command (any moment after the start): either evidence is real.
    wanted = {
        "effect_prepared": {jr.EffectEvidence.ran},
        "effect_executing": {jr.EffectEvidence.supervisor},
    }.get(boundary, {jr.EffectEvidence.ran, jr.EffectEvidence.supervisor})
    if answer.synthetic or answer.effect_outcome != jr.EffectOutcome.committed:
        v.append(f"killed effect {killed.effect_id} ended {ended}")
    elif answer.evidence not in wanted:
        v.append(f"killed effect {killed.effect_id} ended {ended} (want {wanted})")
    if killed.effect_id in reconciled:
        v.append(f"killed effect {killed.effect_id} was reconciled")
    if lines[killed.call_id] != 1:
        v.append(f"killed call {killed.call_id} ran {lines[killed.call_id]} times")
    if (case.session_dir / "effects" / killed.effect_id).exists():
        v.append(f"effect directory {killed.effect_id} left after its result")
    return v, ended


def _summary(config: pytest.Config, cell: dict[str, object]) -> str:
    cache = getattr(config, "cache", None)
    cells: list[dict[str, object]] = [cell]
    if cache is not None:
        folder = Path(cache.mkdir("effect-crash-cells"))
        name = "".join(c if c.isalnum() else "_" for c in str(cell["id"]))
        (folder / f"{name}.json").write_text(json.dumps(cell), encoding="utf-8")
        cells = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))]
    ended = Counter(str(c["ended"]) for c in cells)
    per = Counter(str(c["boundary"]) for c in cells)
    text = (
        f"effect crashes: {len(cells)} runs ("
        + ", ".join(f"{k} {n}" for k, n in sorted(per.items()))
        + f"); tools run {sum(int(str(c['tools_run'])) for c in cells)}, "
        f"violations {sum(int(str(c['violations'])) for c in cells)}; killed effects ended: "
        + ", ".join(f"{k} {n}" for k, n in sorted(ended.items()))
        + "\n"
    )
    if cache is not None:
        (Path(cache.mkdir("effect-crash-cells")).parent / "effect-crash-summary.txt").write_text(
            text, encoding="utf-8"
        )
    return text


@pytest.mark.parametrize("repeat", range(REPEATS))
@pytest.mark.parametrize("n", range(1, CALLS + 1))
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_killed_at_an_effect_boundary_no_effect_runs_twice(
    request: pytest.FixtureRequest, case: Case, boundary: str, n: int, repeat: int
) -> None:
    proc = run(case.exec_argv(PROMPT, new=True), case.env(f"{boundary}:{n}"))
    assert proc.returncode == -9, proc.stderr[-800:]
    recovery = recover(case)
    report = check(case, [Input(PROMPT, "durable")], recovery)
    extra, ended = _effect_violations(case, boundary, n)
    report.violations += extra
    cell = {
        "id": request.node.nodeid,
        "boundary": boundary,
        "ended": ended,
        "violations": len(report.violations),
        "tools_run": report.stats["tools_run"],
    }
    print(f"\n{request.node.name}: {report.stats}\n{_summary(request.config, cell)}", end="")
    assert report.violations == [], "\n".join(report.violations)


KILLS = 3
TOOL_SLEEP_S = 0.4


@pytest.mark.parametrize("repeat", range(KILLS))
def test_kill_9_while_a_slow_command_runs_it_is_never_run_again(
    request: pytest.FixtureRequest, tmp_path: Path, repeat: int
) -> None:
    """``kill -9`` of mind once the command's effect is prepared, the
    command sleeping: its supervisor never started (then it provably never
    ran and runs once at the restart) or it finishes on its own and its exit
    record is collected; either way it ran exactly once and ended
    ``committed`` with real evidence."""
    with FakeModel(record_path=tmp_path / "requests.jsonl", tool_sleep_s=TOOL_SLEEP_S) as model:
        case = new_case(tmp_path, model.base_url)
        prompt = "TOOL slow effects prompt"
        journal = case.session_dir / "journal.jsonl"
        kill_when(
            case.exec_argv(prompt, new=True),
            cwd=REPO,
            env=case.env(),
            found=lambda: first_record(journal, _prepared),
            timeout_s=PROCESS_TIMEOUT_S,
            what="its tool was prepared",
        )
        recovery = recover(case)
        report = check(case, [Input(prompt, "durable")], recovery)
    extra, ended = _effect_violations(case, "kill-9 mid command", 1)
    report.violations += extra
    cell = {
        "id": request.node.nodeid,
        "boundary": "kill-9 mid command",
        "ended": ended,
        "violations": len(report.violations),
        "tools_run": report.stats["tools_run"],
    }
    print(f"\n{request.node.name}: {ended} {report.stats}", end="")
    print(f"\n{_summary(request.config, cell)}", end="")
    assert report.violations == [], "\n".join(report.violations)


def _prepared(record: jr.JournalRecord) -> bool:
    return isinstance(record, jr.ToolStarted) and bool(record.effect_id)
