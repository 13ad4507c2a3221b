"""Questions that survive ``kill -9`` and ``mind resume``, in a real
pseudo-terminal (docs/design/interactions.md §5, §6; effects.md §4).

Each test runs the real REPL with the scripted provider (stateless: the
resumed process continues the script where the journal left it), kills it
with SIGKILL at a chosen point, reopens the session with ``mind resume`` and
checks the screen against the journal and a counter file the commands
append to (a command that ran twice leaves two lines):

- an unanswered approval card comes back with the same interaction id;
  approving runs the command exactly once and the turn finishes;
- "approve for this session" is honoured after the restart, listed by
  ``/permissions``; revoking it makes the next call ask;
- a stop (abort) at the card is final: never offered again;
- a command whose outcome a crash left unknown is asked about with the
  reconcile card (r / f / t); ``r`` runs it once more.
"""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.test_repl import ENTER, REPO, Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_steering import journal, session_dir
from tests.support.exec_world import exec_killed_at
from tests.support.pty_approvals import at_the_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl

UNTRUSTED = ("--approval", "untrusted")
COUNT = "echo ran >> counter"
"""A command that leaves one line in ``counter`` per run."""


def _shell(*commands: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": c}} for c in commands]}


def _kill_9(child: pexpect.spawn) -> None:
    """SIGKILL the REPL: no cleanup, no ``finally`` (what a crash leaves)."""
    os.kill(child.pid, signal.SIGKILL)
    child.expect(pexpect.EOF)
    child.close()
    assert child.signalstatus == signal.SIGKILL


def _of(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == kind]


def _runs(tmp_path: Path) -> int:
    counter = tmp_path / "counter"
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_an_unanswered_card_comes_back_after_kill_9_and_approving_runs_it_once(
    spawn: Spawn, tmp_path: Path
) -> None:
    script = [_shell(COUNT), {"text": "Counted."}]
    child, sid = at_the_card(spawn, "count once", script, *UNTRUSTED)
    (asked,) = _of(journal(tmp_path, sid), "interaction_requested")  # durable before shown
    _kill_9(child)
    assert _of(journal(tmp_path, sid), "tool_started") == [] and _runs(tmp_path) == 0

    child = spawn(script, *UNTRUSTED, "resume", sid)
    child.expect(words("asked before mind stopped; not answered yet"))
    child.expect(words("Allow shell?"))
    # The same question, not a new one: one request, its id, still unanswered.
    records = journal(tmp_path, sid)
    assert [r["interaction_id"] for r in _of(records, "interaction_requested")] == [
        asked["interaction_id"]
    ]
    assert _of(records, "interaction_resolved") == []
    child.send("y")
    child.expect(words("approved once"))
    child.expect(words("Counted."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert _runs(tmp_path) == 1
    records = journal(tmp_path, sid)
    (resolved,) = _of(records, "interaction_resolved")
    assert (resolved["interaction_id"], resolved["decision"]) == (
        asked["interaction_id"],
        "approve_once",
    )
    assert [r["status"] for r in _of(records, "turn_completed")] == ["completed"]
    assert len(_of(records, "turn_started")) == 1  # the same turn, resumed


def test_approve_for_this_session_survives_kill_9_and_resume(spawn: Spawn, tmp_path: Path) -> None:
    script = [
        _shell("mkdir -p d1"),
        {"text": "Made one."},
        _shell("mkdir -p d1"),
        {"text": "Made two."},
        _shell("mkdir -p d1"),
        {"text": "Asked again."},
    ]
    child, sid = at_the_card(spawn, "make one", script, *UNTRUSTED)
    child.send("a")
    child.expect(words("/permissions lists and revokes"))
    child.expect(words("Made one."))
    child.expect(words("── completed"))
    _kill_9(child)
    (granted,) = _of(journal(tmp_path, sid), "permission_granted")

    child = spawn(script, *UNTRUSTED, "resume", sid)
    child.send("make two" + ENTER)
    child.expect(words("Made two."))  # covered by the grant: not asked
    child.expect(words("── completed"))
    assert "Allow shell?" not in str(child.before)
    child.send("/permissions" + ENTER)
    child.expect(words("1. shell: only this exact command `mkdir -p d1`"))
    child.send("/permissions revoke 1" + ENTER)
    child.expect(words("Revoked: shell: only this exact command `mkdir -p d1`"))
    child.send("make three" + ENTER)
    child.expect(words("Allow shell?"))  # revoked: asked again
    child.send("y")
    child.expect(words("Asked again."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    records = journal(tmp_path, sid)
    assert [r["grant_id"] for r in _of(records, "permission_revoked")] == [granted["grant_id"]]
    # Asked twice in all: the first call and the one after the revoke.
    assert len(_of(records, "interaction_requested")) == 2
    ran = [r for r in _of(records, "tool_result") if r["status"] == "ok" and not r["synthetic"]]
    assert len(ran) == 3 and (tmp_path / "d1").is_dir()


def test_a_stop_at_the_card_is_final_after_kill_9_and_resume(spawn: Spawn, tmp_path: Path) -> None:
    script = [_shell(COUNT), {"text": "Should not be needed."}, {"text": "Fresh answer."}]
    child, sid = at_the_card(spawn, "count", script, *UNTRUSTED)
    child.send("s")
    child.expect(words("stopped the turn"))
    _kill_9(child)  # at once: the turn may not have written its end yet
    (asked,) = _of(journal(tmp_path, sid), "interaction_requested")

    child = spawn(script, *UNTRUSTED, "resume", sid)
    child.send("/status" + ENTER)
    child.expect(words("state idle"))
    assert "Allow shell?" not in str(child.before)
    exit_cleanly(child)
    records = journal(tmp_path, sid)
    assert [r["interaction_id"] for r in _of(records, "interaction_requested")] == [
        asked["interaction_id"]
    ]
    (resolved,) = _of(records, "interaction_resolved")
    assert (resolved["decision"], resolved["by"]) == ("abort", "person")
    assert _of(records, "tool_started") == [] and _runs(tmp_path) == 0
    assert [r["status"] for r in _of(records, "turn_completed")] == ["interrupted"]


def test_a_command_whose_outcome_is_unknown_is_asked_about_and_r_reruns_it(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Killed after the command ran, before its result was journaled, with
    its supervisor's record gone: nobody knows how it ended. The resumed
    turn asks (the reconcile card), ``r`` runs it once more."""
    script = [_shell(COUNT, "ls"), {"text": "Reconciled."}]
    exec_killed_at(tmp_path, script, "effect_executing:1", "count", "--approval", "never", cwd=REPO)
    assert _runs(tmp_path) == 1  # it ran; its result was never journaled
    (sid,) = [p.name for p in (tmp_path / "state" / "sessions").iterdir()]
    shutil.rmtree(session_dir(tmp_path, sid) / "effects", ignore_errors=True)  # no evidence

    child = spawn(script, "--approval", "never", "resume", sid)
    child.expect(words("Outcome unknown:"))
    child.expect(words("no exit status"))
    child.expect(words("Outcome of shell unknown:"))
    child.expect(words("r re-run it"))
    (asked,) = _of(journal(tmp_path, sid), "interaction_requested")
    assert (asked["kind"], asked["purpose"]) == ("reconcile", "unknown_outcome")
    child.send("y")  # not offered here: answers nothing
    child.expect(words("This question is answered with r re-run"))
    child.send("r")
    child.expect(words("running it again"))
    child.expect(words("Reconciled."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert _runs(tmp_path) == 2  # once before the crash, once on the person's word
    records = journal(tmp_path, sid)
    (resolved,) = _of(records, "interaction_resolved")
    assert (resolved["interaction_id"], resolved["decision"]) == (asked["interaction_id"], "rerun")
    assert [r["resolution"] for r in _of(records, "effect_reconciled")] == ["rerun"]
