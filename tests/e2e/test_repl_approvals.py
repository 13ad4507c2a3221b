"""Approval prompts and editor keys in a real pseudo-terminal.

Each test runs the real ``python -m mind.shell.cli`` with the scripted
provider. "While a tool call runs" is a state the test controls: the call
blocks until the test creates the file ``go`` in the session's directory.
What the screen claims is checked against the session's journal.
"""

from __future__ import annotations

import time
from pathlib import Path

from mind.shell.call_summary import describe_arguments
from mind.shell.repl import command_word
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words
from tests.e2e.test_repl_steering import CALLING, GATED_TOOL, journal, outline
from tests.support.pty_approvals import at_the_card

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
    child, sid = at_the_card(
        spawn,
        "make it",
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch approved"}}]},
            {"text": "Made it."},
            {"text": "Hello back."},
        ],
        "--approval",
        "untrusted",
    )
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
    child, sid = at_the_card(
        spawn,
        "make it",
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "touch never"}}]}],
        "--approval",
        "untrusted",
    )
    child.send("\x1b")
    child.expect(words("⊘ Interrupted shell touch never"))
    child.expect(words("interrupted by the user before it was approved: it never ran"))
    child.expect(words("── interrupted"))
    exit_cleanly(child)
    assert not (tmp_path / "never").exists()
    (result,) = [r for r in journal(tmp_path, sid) if r["type"] == "tool_result"]
    assert "it never ran" in result["output"]


def test_a_long_command_shows_head_and_tail_and_y_waits_until_v_showed_it_all(
    spawn: Spawn, tmp_path: Path
) -> None:
    filler = "x" * 6000
    command = f": {filler} MIDDLE-MARK {filler}; touch ran-it"
    child = spawn(
        [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, {"text": "Ran."}],
        "--approval",
        "untrusted",
    )
    sid = session_id_of(child)
    child.send("go" + ENTER)
    child.expect(words("Approval needed:"))
    child.expect(words("characters hidden"))
    seen = str(child.before)
    child.expect(words("press v to view all"))
    child.expect(words("touch ran-it"))  # the tail: the end of a command is never hidden
    child.expect(words("Allow shell?"))
    seen += str(child.before)
    assert "MIDDLE-MARK" not in seen
    child.send("y")
    child.expect(words("Not approved:"))
    child.expect(words("Press v to view all, then y"))
    assert "approved once" not in str(child.before)
    child.send("v")
    child.expect("MIDDLE-MARK")
    child.send("y")
    child.expect(words("approved once"))
    child.expect(words("Ran."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert (tmp_path / "ran-it").exists()
    assert [r["type"] for r in journal(tmp_path, sid)].count("tool_started") == 1


GREEN_PLUS = r"\x1b\[[0-9;]*32m\+"
RED_MINUS = r"\x1b\[[0-9;]*31m-"


def test_write_file_approval_shows_a_coloured_diff_against_the_current_file(
    spawn: Spawn, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    child = spawn(
        [
            {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {"path": "notes.txt", "content": "one\nTWO\nthree\n"},
                    }
                ]
            },
            {"text": "Wrote it."},
        ],
        "--approval",
        "untrusted",
    )
    child.send("change it" + ENTER)
    child.expect(words("Approval needed:"))
    child.expect(words("--- a/notes.txt"))
    child.expect(words("+++ b/notes.txt"))
    child.expect(RED_MINUS + "two")
    child.expect(GREEN_PLUS + "TWO")
    child.expect(words("Allow write_file?"))
    child.send("y")
    child.expect(words("✓ Called write_file notes.txt"))
    child.expect(words("+1 −1"))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "one\nTWO\nthree\n"


def test_apply_patch_approval_shows_each_files_diff_and_the_result_counts_lines(
    spawn: Spawn, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    patch = (
        "*** Begin Patch\n"
        "*** Add File: new.txt\n+hello\n+world\n"
        "*** Update File: notes.txt\n@@\n one\n-two\n+TWO\n three\n"
        "*** End Patch\n"
    )
    child = spawn(
        [
            {"tool_calls": [{"name": "apply_patch", "arguments": {"patch": patch}}]},
            {"text": "Patched."},
        ],
        "--approval",
        "untrusted",
    )
    child.send("patch it" + ENTER)
    child.expect(words("--- /dev/null"))
    child.expect(words("+++ b/new.txt"))
    child.expect(GREEN_PLUS + "hello")
    child.expect(words("--- a/notes.txt"))
    child.expect(RED_MINUS + "two")
    child.expect(GREEN_PLUS + "TWO")
    child.expect(words("Allow apply_patch?"))
    child.send("y")
    child.expect(words("✓ Called apply_patch"))
    child.expect(words("A new.txt +2 −0"))
    child.expect(words("M notes.txt +1 −1"))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert (tmp_path / "new.txt").read_text(encoding="utf-8") == "hello\nworld\n"


def test_a_patch_call_is_summarised_by_the_files_it_touches() -> None:
    patch = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Delete File: old.txt\n*** End Patch\n"
    assert describe_arguments("apply_patch", {"patch": patch}) == "new.txt, old.txt"
    assert describe_arguments("apply_patch", {"patch": "bad"}) == '{"patch": "bad"}'


def test_tab_completes_a_command_while_a_turn_runs_instead_of_queueing_it(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([GATED_TOOL, {"text": "Done."}], "--approval", "never")
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("/stat")
    child.expect("/stat")
    child.send("\t")
    child.expect("us")
    child.send(ENTER)
    child.expect(words("state running a turn"))
    (tmp_path / "go").touch()
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert prompts(tmp_path, sid) == ["first"]  # nothing was queued


def test_backslash_enter_at_an_approval_inserts_a_newline_in_the_draft(
    spawn: Spawn, tmp_path: Path
) -> None:
    child, sid = at_the_card(
        spawn,
        "go",
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch never"}}]},
            {"text": "Two lines."},
        ],
        "--approval",
        "untrusted",
    )
    child.send("p\\" + ENTER + "q")  # \ then Enter: a newline, as in every other state
    child.expect("q")
    child.send("\x1b")  # leave the question unanswered: the call never runs
    child.expect(words("── interrupted"))
    child.send(ENTER)
    child.expect(words("Two lines."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert prompts(tmp_path, sid) == ["go", "p\nq"]


def test_a_lone_esc_then_typing_a_moment_later_is_esc_and_the_typed_keys(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([{"text": "unused"}])
    child.send("/sessions" + ENTER)
    child.expect(words("Esc closes"))
    child.send("\x1b")  # closes the picker
    # A person's next key comes a moment after Esc, never in the same write
    # as a terminal's Alt+key: this gap is the input under test, not a wait.
    time.sleep(0.2)
    child.send("/status" + ENTER)
    child.expect(words("state idle"))  # the command ran: "/" was not eaten as Alt+/
    assert "Nothing was sent" in exit_cleanly(child)  # "status" never went to the model


def test_viewing_one_call_never_counts_for_a_later_call_with_the_same_id(
    spawn: Spawn, tmp_path: Path
) -> None:
    """A server that repeats ``dup1`` in one round: the second call's hidden
    text must be viewed before y approves it (the first call's ``v`` is not it)."""
    filler = "x" * 6000
    calls = [
        {
            "id": "dup1",
            "name": "shell",
            "arguments": {"command": f": {filler} {m} {filler}; touch {m}"},
        }
        for m in ("FIRST-MARK", "SECOND-MARK")
    ]
    child = spawn([{"tool_calls": calls}, {"text": "Ran."}], "--approval", "untrusted")
    child.send("go" + ENTER)
    child.expect(words("Allow shell?"))
    child.send("v")
    child.expect("FIRST-MARK")
    child.send("y")
    child.expect(words("approved once"))
    child.expect(words("touch SECOND-MARK"))
    child.expect(words("Allow shell?"))
    child.send("y")
    child.expect(words("Not approved:"))
    child.send("v")
    child.expect("SECOND-MARK")
    child.send("y")
    child.expect(words("Ran."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert (tmp_path / "FIRST-MARK").exists() and (tmp_path / "SECOND-MARK").exists()
