"""Refusing with a reason, and Enter while a card waits, in a real
pseudo-terminal (mind.shell.repl.approvals): ``n`` asks for an optional
one-line reason the model sees (Enter alone: none), shown on the card;
Enter during a card says what the card waits for and keeps the draft."""

from __future__ import annotations

import time
from pathlib import Path

from mind.shell.repl.approvals import TYPING_GAP_S
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_steering import journal
from tests.support.pty_approvals import at_the_card

__all__ = ["spawn"]  # the fixture, re-used from test_repl


def _touch(name: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": f"touch {name}"}}]}


def _resolved(tmp_path: Path, sid: str) -> list[tuple[str, str | None]]:
    return [
        (r["decision"], r.get("reason"))
        for r in journal(tmp_path, sid)
        if r["type"] == "interaction_resolved"
    ]


def _results(tmp_path: Path, sid: str) -> list[str]:
    return [r["output"] for r in journal(tmp_path, sid) if r["type"] == "tool_result"]


def test_n_then_a_reason_refuses_and_the_model_reads_the_reason(
    spawn: Spawn, tmp_path: Path
) -> None:
    child, sid = at_the_card(
        spawn,
        "make them",
        [_touch("first"), _touch("second"), {"text": "Understood."}],
        "--approval",
        "untrusted",
    )
    child.send("n")
    child.expect(words("Refusing shell: a reason for the model"))
    child.send("use the fixture instead" + ENTER)
    child.expect(words("↳ refused: use the fixture instead"))
    child.expect(words("Allow shell?"))  # the next call
    time.sleep(TYPING_GAP_S)  # the reason was just typed: a key now would be typing
    child.send("no" + ENTER)  # the whole word and Enter: refused, no reason
    child.expect(words("↳ refused"))
    child.expect(words("Understood."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert _resolved(tmp_path, sid) == [("deny", "use the fixture instead"), ("deny", None)]
    first, second = _results(tmp_path, sid)
    assert "Their reason: use the fixture instead" in first
    assert "Their reason" not in second
    assert not (tmp_path / "first").exists() and not (tmp_path / "second").exists()


def test_enter_during_a_card_says_what_it_waits_for_and_keeps_the_draft(
    spawn: Spawn, tmp_path: Path
) -> None:
    child, sid = at_the_card(
        spawn,
        "go",
        [_touch("x"), {"text": "Done."}, {"text": "Got it."}],
        "--approval",
        "untrusted",
    )
    child.send(ENTER)
    child.expect(words("Enter sends nothing while this question waits: answer y n a s"))
    child.send("fix" + ENTER)  # no answer key in it: typed into the draft
    child.expect(words("(your draft is kept)"))
    # The next key is an answer only after a typing pause (the rule under
    # test elsewhere); wait it out rather than race it.
    time.sleep(TYPING_GAP_S)
    child.send("y")
    child.expect(words("approved once"))
    child.expect(words("Done."))
    child.expect(words("── completed"))
    time.sleep(TYPING_GAP_S)  # an Enter right after an answer key ends that answer
    child.send(ENTER)  # the kept draft is sent now
    child.expect(words("Got it."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    prompts = [r["text"] for r in journal(tmp_path, sid) if r["type"] == "user_message"]
    assert prompts == ["go", "fix"]
