"""Approval prompts and editor keys in a real pseudo-terminal (issue 7).

Each test runs the real ``python -m mind.shell.cli`` with the scripted
provider. "While a tool call runs" is a state the test controls: the call
blocks until the test creates the file ``go`` in the session's directory.
What the screen claims is checked against the session's journal.
"""

from __future__ import annotations

from pathlib import Path

from mind.shell.repl import command_word
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


def test_one_enter_accepts_a_tab_completion_and_runs_the_command(spawn: Spawn) -> None:
    child = spawn([{"text": "unused"}])
    child.send("/stat")
    child.expect("/stat")
    child.send("\t")
    child.expect("us")  # completed to /status
    child.send(ENTER)
    child.expect(words("state idle"))
    exit_cleanly(child)


def test_typing_yes_at_an_approval_approves_and_leaves_nothing_in_the_draft(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn(
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch approved"}}]},
            {"text": "Made it."},
            {"text": "Hello back."},
        ],
        "--approval",
        "untrusted",
    )
    sid = session_id_of(child)
    child.send("make it" + ENTER)
    child.expect(words("Allow shell?"))
    child.send("yes" + ENTER)  # the whole answer, as people type it
    child.expect(words("approved once"))
    child.expect(words("── completed"))
    child.send("hello" + ENTER)
    child.expect(words("Hello back."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert (tmp_path / "approved").exists()
    assert prompts(tmp_path, sid) == ["make it", "hello"]


def test_a_message_starting_with_a_path_is_sent_not_taken_for_a_command(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([{"text": "It is a file."}, {"text": "Slash kept."}])
    sid = session_id_of(child)
    child.send("/nosuch" + ENTER)  # looks like a command: refused, with the way out
    child.expect(words("Unknown command /nosuch."))
    child.expect(words("start it with // or a space"))
    child.sendcontrol("c")  # the refused line stays in the editor: clear it
    child.send("/tmp/x what is this?" + ENTER)
    child.expect(words("It is a file."))
    child.expect(words("── completed"))
    child.send(" /help is a word here" + ENTER)
    child.expect(words("Slash kept."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert prompts(tmp_path, sid) == ["/tmp/x what is this?", " /help is a word here"]


def test_only_a_slash_word_without_another_slash_is_a_command() -> None:
    assert command_word("/help") == ("help", "")
    assert command_word("/resume  0193 \n") == ("resume", "0193")
    assert command_word("/nosuch x") == ("nosuch", "x")
    assert command_word("/status\nmore") == ("status", "more")
    assert command_word("/tmp/x what is this?") is None
    assert command_word("//help") is None
    assert command_word(" /help") is None
    assert command_word("hello /help") is None


def test_esc_at_an_approval_says_the_call_never_ran(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn(
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "touch never"}}]}],
        "--approval",
        "untrusted",
    )
    sid = session_id_of(child)
    child.send("make it" + ENTER)
    child.expect(words("Allow shell?"))
    child.send("\x1b")
    child.expect(words("⊘ Interrupted shell touch never"))
    child.expect(words("interrupted by the user before it was approved: it never ran"))
    child.expect(words("── interrupted"))
    exit_cleanly(child)
    assert not (tmp_path / "never").exists()
    (result,) = [r for r in journal(tmp_path, sid) if r["type"] == "tool_result"]
    assert "it never ran" in result["output"]
