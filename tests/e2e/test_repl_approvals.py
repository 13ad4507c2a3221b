"""Approval prompts and editor keys in a real pseudo-terminal (issue 7).

Each test runs the real ``python -m mind.shell.cli`` with the scripted
provider. "While a tool call runs" is a state the test controls: the call
blocks until the test creates the file ``go`` in the session's directory.
What the screen claims is checked against the session's journal.
"""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.e2e.test_repl_steering import CALLING, GATED_TOOL, journal, outline

__all__ = ["spawn"]  # the fixture, re-used from test_repl

ALT_ENTER = "\x1b\r"
"""What a terminal sends for Alt+Enter: Esc, then Enter, in one write."""


def prompts(tmp_path: Path, sid: str) -> list[str]:
    """The texts of the session's journaled user messages, in order."""
    return [r["text"] for r in journal(tmp_path, sid) if r["type"] == "user_message"]


def test_alt_enter_during_a_running_tool_inserts_a_newline_and_interrupts_nothing(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn(
        [GATED_TOOL, {"text": "First done."}, {"text": "Got two lines."}], "--approval", "never"
    )
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("line one" + ALT_ENTER + "line two")
    child.expect("line two")
    (tmp_path / "go").touch()
    child.expect(words("✓ Called shell"))
    child.expect(words("First done."))
    child.expect(words("── completed"))
    child.send(ENTER)  # the draft survived, both lines: Enter sends it as the next prompt
    child.expect(words("Got two lines."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert outline(journal(tmp_path, sid)).count("end:completed") == 2
    assert "end:interrupted" not in outline(journal(tmp_path, sid))
    assert prompts(tmp_path, sid) == ["first", "line one\nline two"]
