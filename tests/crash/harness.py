"""Shared machinery of the crash tests: run real processes, restart, check the invariants.

A crash case is: one real process (``mind exec`` or :mod:`tests.crash.driver`)
against a :class:`~tests.support.fake_model.FakeModel`, stopped by SIGKILL
(``MIND_CRASH_AT`` or ``os.kill``); then ``mind exec --session ID --json``
without a prompt, repeated until a restart finds nothing to recover; then
:func:`check` on what is left on disk and what the model received.

The invariants (docs/design/recovery.md §4):

- no accepted input lost: each input that is surely durable is acknowledged
  by exactly one ``turn_completed``, and reached the model; an input the
  crash may have cut before acceptance is either that, or absent everywhere
  (journal, inbox, requests); an input never sent is absent everywhere;
- none delivered twice: no request carries the same user text twice, and no
  id is acknowledged twice;
- exactly one ``turn_completed`` per ``turn_started``;
- every recorded request is a valid Chat Completions body;
- no tool re-run: each marker line at most once in ``effects.log``, only for
  journaled calls; each call has exactly one result; a real (journaled)
  result means the call ran exactly once; a synthetic one means no restart
  ran it (and, when the crash came before the tool could start, it never ran);
- after the last restart ``inbox.json`` holds no acknowledged input and no
  input waits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.support.fake_model import EFFECTS_FILE, read_requests, user_texts
from tests.support.provider_rules import validate_openai_chat

REPO = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT_S = 60
MAX_RESTARTS = 4
SESSION_ID = "crash-session"

_SCRUB = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "MIND_PROVIDER",
    "MIND_MODEL",
    "MIND_MAX_RETRIES",
    "MIND_HOME",
    "MIND_STATE_HOME",
    "MIND_CRASH_AT",
)


@dataclass
class Case:
    """The files of one crash case (all under one tmp dir)."""

    root: Path
    base_url: str
    session_id: str = SESSION_ID

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    @property
    def requests_path(self) -> Path:
        return self.root / "requests.jsonl"

    @property
    def session_dir(self) -> Path:
        return self.state / "sessions" / self.session_id

    def env(self, crash_at: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env["MIND_HOME"] = str(self.root / "home")
        env["MIND_STATE_HOME"] = str(self.state)
        env["PYTHONUNBUFFERED"] = "1"
        if crash_at:
            env["MIND_CRASH_AT"] = crash_at
        return env

    def provider_args(self) -> list[str]:
        return [
            "--provider",
            "openai-chat",
            "--base-url",
            self.base_url,
            "--model",
            "fake",
            "--approval",
            "never",
        ]

    def exec_argv(self, prompt: str | None, *, new: bool = False) -> list[str]:
        argv = [sys.executable, "-m", "mind.shell.cli", "exec", *self.provider_args()]
        which = "--new-session" if new else "--session"
        argv += [which, self.session_id, "--cwd", str(self.cwd), "--json"]
        return argv + ([prompt] if prompt is not None else [])

    def driver_argv(self, scenario: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "tests.crash.driver",
            "--scenario",
            scenario,
            "--state",
            str(self.state),
            "--cwd",
            str(self.cwd),
            "--base-url",
            self.base_url,
            "--session",
            self.session_id,
        ]


def new_case(tmp_path: Path, base_url: str) -> Case:
    case = Case(tmp_path, base_url)
    for d in (case.state, case.cwd, tmp_path / "home"):
        d.mkdir(parents=True, exist_ok=True)
    return case


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a process to its end (or SIGKILL) from the repo root; stdin closed."""
    return subprocess.run(
        argv,
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_S,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """Parse JSON lines; a line cut by SIGKILL mid-write is dropped."""
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


@dataclass
class Recovery:
    """What the restarts did."""

    restarts: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    recovered: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def recover(case: Case) -> Recovery:
    """``mind exec --session ID --json`` (no prompt) until a restart finds nothing to do."""
    rec = Recovery()
    for _ in range(MAX_RESTARTS):
        # Killed before the session's journal existed: this restart creates
        # the session (nothing to recover, no session.recovered event).
        creates = not (case.session_dir / "journal.jsonl").exists()
        proc = run(case.exec_argv(None, new=creates), case.env())
        rec.restarts += 1
        events = json_lines(proc.stdout)
        rec.events += events
        if proc.returncode != 0:
            rec.problems.append(
                f"restart {rec.restarts} exited {proc.returncode}: {proc.stderr.strip()[-500:]}"
            )
            return rec
        found = [e for e in events if e.get("type") == "session.recovered"]
        if creates and not found:
            continue
        if len(found) != 1:
            rec.problems.append(f"restart {rec.restarts} printed {len(found)} session.recovered")
            return rec
        rec.recovered.append(found[0])
        counts = (found[0]["aborted_turns"], found[0]["synthetic_results"])
        idle = counts == (0, 0) and found[0]["replayed_inputs"] == 0
        ran = {"turn.started", "turn.resumed"}
        if idle and not any(e.get("type") in ran for e in events):
            return rec
    rec.problems.append(f"still recovering after {MAX_RESTARTS} restarts")
    return rec


@dataclass(frozen=True)
class Input:
    """An input a case tried to send, and what is known about its acceptance.

    ``status``: ``durable`` (it must be acknowledged exactly once),
    ``uncertain`` (the crash may have cut it before acceptance: acknowledged
    exactly once, or absent everywhere) or ``unsent`` (absent everywhere).
    """

    text: str
    status: str
    message_id: str | None = None


@dataclass
class Report:
    """Violations (empty when every invariant holds) and what the case did."""

    violations: list[str]
    stats: dict[str, int]


def check(
    case: Case,
    inputs: list[Input],
    recovery: Recovery,
    *,
    tools_never_started: bool = False,
) -> Report:
    """Check every invariant on the session's files and the recorded requests.

    Args:
        tools_never_started: the crash came before any unanswered tool could
            start, so a call with a synthetic result must have no effect line.
    """
    v: list[str] = list(recovery.problems)
    path = case.session_dir / "journal.jsonl"
    records: list[jr.JournalRecord] = []
    if path.exists():
        records, _report = read_records(path)
    requests = read_requests(case.requests_path)

    # One terminal per turn.
    started = Counter(r.turn_id for r in records if isinstance(r, jr.TurnStarted))
    ended = Counter(r.turn_id for r in records if isinstance(r, jr.TurnCompleted))
    for turn_id in sorted(set(started) | set(ended)):
        if (started[turn_id], ended[turn_id]) != (1, 1):
            v.append(
                f"turn {turn_id}: {started[turn_id]} turn_started, {ended[turn_id]} turn_completed"
            )

    # Acknowledgements: each id at most once.
    acks = Counter(
        mid for r in records if isinstance(r, jr.TurnCompleted) for mid in r.acknowledged
    )
    v += [f"input {mid} acknowledged {n} times" for mid, n in sorted(acks.items()) if n > 1]

    # Requests: valid, no user text twice.
    for i, body in enumerate(requests):
        try:
            validate_openai_chat(body)
        except AssertionError as exc:
            v.append(f"request {i} invalid: {exc}")
        texts = Counter(user_texts(body.get("messages") or []))
        v += [f"request {i} carries {t!r} {n} times" for t, n in texts.items() if n > 1]
    delivered = {t for body in requests for t in user_texts(body.get("messages") or [])}

    # Inputs: none lost, none invented.
    inbox_entries = _inbox_entries(case.session_dir / "inbox.json", v)
    journal_ids: dict[str, set[str]] = {}
    for r in records:
        if isinstance(r, jr.UserMessage):
            journal_ids.setdefault(r.text, set()).add(r.message_id)
    inbox_ids: dict[str, set[str]] = {}
    for e in inbox_entries:
        inbox_ids.setdefault(str(e.get("text")), set()).add(str(e.get("message_id")))
    known_texts = {i.text for i in inputs}
    for text in sorted((set(journal_ids) | set(inbox_ids)) - known_texts):
        v.append(f"unknown input {text!r} in the journal or inbox")
    for item in inputs:
        ids = journal_ids.get(item.text, set()) | inbox_ids.get(item.text, set())
        if len(ids) > 1 or (item.message_id is not None and ids - {item.message_id}):
            v.append(f"input {item.text!r} has ids {sorted(ids)} (expected {item.message_id})")
        acked = sum(acks[mid] for mid in ids)
        present = bool(ids) or item.text in delivered
        if item.status == "durable" or (item.status == "uncertain" and acked):
            if acked != 1:
                v.append(f"accepted input {item.text!r} acknowledged {acked} times (lost)")
            if item.text not in delivered:
                v.append(f"accepted input {item.text!r} never reached the model")
        elif present:
            v.append(
                f"{item.status} input {item.text!r} is not acknowledged but present "
                f"(journal/inbox ids {sorted(ids)}, delivered={item.text in delivered})"
            )

    # Inbox after the last restart.
    for e in inbox_entries:
        mid = str(e.get("message_id"))
        if acks[mid]:
            v.append(f"inbox.json still holds acknowledged input {mid}")
        else:
            v.append(f"inbox.json still holds unacknowledged input {mid} after recovery")

    # Tools: never re-run.
    calls = {c.call_id: c for r in records if isinstance(r, jr.ModelRound) for c in r.tool_calls}
    results: dict[str, list[jr.ToolResult]] = {}
    for r in records:
        if isinstance(r, jr.ToolResult):
            results.setdefault(r.call_id, []).append(r)
    effects_path = case.cwd / EFFECTS_FILE
    lines = effects_path.read_text().split() if effects_path.exists() else []
    effects = Counter(lines)
    v += [f"tool {m} ran {n} times" for m, n in sorted(effects.items()) if n > 1]
    v += [f"effect {m} has no journaled call" for m in sorted(set(effects) - set(calls))]
    rerun = {e["call_id"] for e in recovery.events if e.get("type") == "tool.call"} & set(results)
    for call_id in sorted(calls):
        got = results.get(call_id, [])
        if len(got) != 1:
            v.append(f"tool call {call_id} has {len(got)} results")
            continue
        if not got[0].synthetic:
            shell = calls[call_id].name == "shell"  # only shell calls leave a marker line
            if shell and effects[call_id] != 1 and got[0].status == jr.ToolStatus.ok:
                v.append(f"tool call {call_id} has a real result but ran {effects[call_id]} times")
            continue
        if call_id in rerun:
            v.append(f"tool call {call_id} with a synthetic result was run by a restart")
        if tools_never_started and effects[call_id]:
            v.append(f"tool call {call_id} has a synthetic result yet ran")

    stats = {
        "turns": len(started),
        "aborted": sum(
            1
            for r in records
            if isinstance(r, jr.TurnCompleted) and r.status == jr.TurnStatus.aborted
        ),
        "synthetic": sum(1 for rs in results.values() for r in rs if r.synthetic),
        "replayed": sum(e["replayed_inputs"] for e in recovery.recovered),
        "requests": len(requests),
        "tools_run": sum(effects.values()),
        "restarts": recovery.restarts,
    }
    return Report(violations=v, stats=stats)


def _inbox_entries(path: Path, v: list[str]) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return list(data["entries"])
    except (ValueError, KeyError, TypeError) as exc:
        v.append(f"inbox.json unreadable: {exc}")
        return []


def stage(case: Case) -> str:
    """Where a kill landed, read from the journal before any restart."""
    path = case.session_dir / "journal.jsonl"
    if not path.exists():
        return "before the session"
    records, _ = read_records(path)
    started = sum(1 for r in records if isinstance(r, jr.TurnStarted))
    ended = sum(1 for r in records if isinstance(r, jr.TurnCompleted))
    if started == 0:
        return "before a turn"
    if started == ended:
        return f"between turns (after turn {ended})"
    return f"inside turn {started}"


def boundary_hits(case: Case, inputs_sent: int) -> dict[str, int]:
    """How often a clean run reached each boundary, counted from its journal."""
    records, _ = read_records(case.session_dir / "journal.jsonl")
    ended = sum(1 for r in records if isinstance(r, jr.TurnCompleted))
    return {
        "after_inbox_write": inputs_sent,
        "after_turn_started": sum(1 for r in records if isinstance(r, jr.TurnStarted)),
        "after_model_round": sum(1 for r in records if isinstance(r, jr.ModelRound)),
        "after_tool_call": sum(len(r.tool_calls) for r in records if isinstance(r, jr.ModelRound)),
        "interaction_requested": sum(1 for r in records if isinstance(r, jr.InteractionRequested)),
        # Shown unless nobody could answer (declined by headless: never shown).
        "interaction_shown": sum(
            1
            for r in records
            if isinstance(r, jr.InteractionResolved) and r.by != jr.InteractionBy.headless
        ),
        "interaction_answered_not_applied": sum(
            1 for r in records if isinstance(r, jr.InteractionResolved)
        ),
        "effect_prepared": sum(1 for r in records if isinstance(r, jr.ToolStarted)),
        "checkpoint_written": 0,  # none is due in sessions this short
        "effect_executing": sum(1 for r in records if isinstance(r, jr.ToolStarted)),
        "effect_committed_not_delivered": sum(
            1
            for r in records
            if isinstance(r, jr.ToolResult) and r.effect_outcome and not r.synthetic
        ),
        "after_tool_result": sum(
            1 for r in records if isinstance(r, jr.ToolResult) and not r.synthetic
        ),
        "compaction_started": sum(1 for r in records if isinstance(r, jr.CompactionStarted)),
        # A completed compaction sent its request; a failed one may not have.
        "compaction_request_sent": sum(1 for r in records if isinstance(r, jr.CompactionCompleted)),
        "compaction_completed": sum(1 for r in records if isinstance(r, jr.CompactionCompleted)),
        "before_terminal": ended,
        "after_terminal": ended,
    }


# ---- the summary -------------------------------------------------------------

_RUN_UID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


def record_cell(config: pytest.Config, test_id: str, cell: dict[str, Any]) -> str:
    """Store one case's counts and rewrite the summary; returns the summary text.

    Files live in ``.pytest_cache/d/crash-cells/`` (one per test id, tagged
    with this test run's uid so an older run's files are ignored); the summary
    is ``.pytest_cache/d/crash-summary.txt``. Without a cache (``-p
    no:cacheprovider``) only the text is returned.
    """
    cache = getattr(config, "cache", None)
    if cache is None:
        return summarize([cell])
    cells_dir = Path(cache.mkdir("crash-cells"))
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in test_id)
    tmp = cells_dir / f".{name}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({**cell, "test_run": _RUN_UID}), encoding="utf-8")
    tmp.replace(cells_dir / f"{name}.json")
    cells = []
    for p in sorted(cells_dir.glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if data.get("test_run") == _RUN_UID:
            cells.append(data)
    text = summarize(cells)
    out = Path(cache.mkdir("crash-cells")).parent / "crash-summary.txt"
    tmp = out.with_name(f".crash-summary.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return text


def summarize(cells: list[dict[str, Any]]) -> str:
    """The closing-note figures for the cells recorded so far (one line per test file)."""
    matrix = [c for c in cells if c["kind"] == "matrix"]
    baseline = [c for c in cells if c["kind"] == "baseline"]
    rand = [c for c in cells if c["kind"] == "random"]
    lines = []
    if matrix or baseline:
        pairs: dict[tuple[str, str], bool] = {}
        for c in matrix:
            key = (c["scenario"], c["boundary"])
            pairs[key] = pairs.get(key, False) or c["reached"]
        reached = sum(1 for r in pairs.values() if r)
        scenarios = sorted({c["scenario"] for c in matrix + baseline})
        killed = sum(1 for c in matrix if c["reached"])
        lines.append(
            f"crash matrix: {len(scenarios)} scenarios ({', '.join(scenarios)}); "
            f"{len(pairs)} boundary x scenario cells: {reached} reached, "
            f"{len(pairs) - reached} not reached; {len(matrix)} crash runs ({killed} killed "
            f"at the boundary, {len(matrix) - killed} ran to the end) + {len(baseline)} clean "
            f"baselines; {sum(c['restarts'] for c in matrix + baseline)} restarts; "
            f"violations {sum(c['violations'] for c in matrix + baseline)}"
        )
    if rand:
        killed = sum(1 for c in rand if c["killed"])
        landed = Counter(str(c["stage"]) for c in rand)
        lines.append(
            f"random kill: {len(rand)} runs of scenario multi, {killed} killed, "
            f"{len(rand) - killed} finished first; landed: "
            + ", ".join(f"{k} {n}" for k, n in sorted(landed.items()))
            + f"; {sum(c['aborted'] for c in rand)} aborted turns, "
            f"{sum(c['synthetic'] for c in rand)} synthetic tool results, "
            f"{sum(c['replayed'] for c in rand)} inputs replayed; "
            f"{sum(c['restarts'] for c in rand)} restarts; "
            f"violations {sum(c['violations'] for c in rand)}"
        )
    return "\n".join(lines) + "\n"
