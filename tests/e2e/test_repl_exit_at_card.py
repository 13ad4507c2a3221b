"""``/exit`` (or ``/quit``) at any card leaves, as at the "Already running"
card (docs/design/interactions.md §3): leaving is no Stop, so the question
stays unanswered — no ``interaction_resolved``, the turn left open (no
``turn_completed``) — and the next ``mind resume`` asks it again with the
same id; answered then, it is resolved once. Real REPL in a pseudo-terminal,
the session's journal checked."""

from __future__ import annotations

import shutil
from pathlib import Path

import pexpect
import pytest

from tests.e2e.test_repl import ENTER, REPO, Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_approval_restarts import COUNT, _of, _runs, _shell
from tests.e2e.test_repl_steering import journal, session_dir
from tests.support.exec_world import exec_killed_at
from tests.support.pty_approvals import at_the_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl


def _leave(child: pexpect.spawn, command: str) -> str:
    """Type ``command`` and Enter at the card; the REPL must end (status 0)."""
    child.send(command + ENTER)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


def _left_unanswered(tmp_path: Path, sid: str) -> str:
    """The one question is asked and unanswered, its turn left open; its id."""
    records = journal(tmp_path, sid)
    (asked,) = _of(records, "interaction_requested")
    assert _of(records, "interaction_resolved") == []
    assert _of(records, "turn_completed") == []
    return str(asked["interaction_id"])


def _asked_once_resolved_once(tmp_path: Path, sid: str, iid: str, decision: str) -> None:
    records = journal(tmp_path, sid)
    assert [r["interaction_id"] for r in _of(records, "interaction_requested")] == [iid]
    resolved = [(r["interaction_id"], r["decision"]) for r in _of(records, "interaction_resolved")]
    assert resolved == [(iid, decision)]


@pytest.mark.parametrize("command", ["/exit", "/quit"])
def test_exit_at_an_approval_card_leaves_it_unanswered_for_the_next_resume(
    spawn: Spawn, tmp_path: Path, command: str
) -> None:
    script = [_shell(COUNT), {"text": "Counted."}]
    child, sid = at_the_card(spawn, "count", script, "--approval", "untrusted")
    out = _leave(child, command)
    assert "Enter sends nothing" not in out, out
    iid = _left_unanswered(tmp_path, sid)
    assert _runs(tmp_path) == 0

    again = spawn(script, "--approval", "untrusted", "resume", sid)
    again.expect(words("(asked before mind stopped; not answered yet)"))
    again.expect(words("Allow shell?"))
    again.send("y")
    again.expect(words("── completed"))
    exit_cleanly(again)
    assert _runs(tmp_path) == 1
    _asked_once_resolved_once(tmp_path, sid, iid, "approve_once")


def test_exit_at_an_outcome_unknown_card_leaves_it_unanswered_for_the_next_resume(
    spawn: Spawn, tmp_path: Path
) -> None:
    script = [_shell(COUNT), {"text": "Told."}]
    exec_killed_at(tmp_path, script, "effect_executing:1", "count", "--approval", "never", cwd=REPO)
    (sid,) = [p.name for p in (tmp_path / "state" / "sessions").iterdir()]
    shutil.rmtree(session_dir(tmp_path, sid) / "effects", ignore_errors=True)  # no evidence

    child = spawn(script, "--approval", "never", "resume", sid)
    child.expect(words("Outcome of shell unknown:"))
    child.expect(words("t tell the model"))
    out = _leave(child, "/exit")  # its t is typing, not "tell the model"
    assert "Enter sends nothing" not in out, out
    iid = _left_unanswered(tmp_path, sid)

    again = spawn(script, "--approval", "never", "resume", sid)
    again.expect(words("(asked before mind stopped; not answered yet)"))
    again.expect(words("Outcome of shell unknown:"))
    again.send("t")
    again.expect(words("── completed"))
    exit_cleanly(again)
    assert _runs(tmp_path) == 1  # only the run before the crash
    _asked_once_resolved_once(tmp_path, sid, iid, "tell_model")
