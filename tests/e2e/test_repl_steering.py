"""The REPL's steering keys in a real pseudo-terminal (README.md).

Each test runs the real ``python -m mind.shell.cli`` with the scripted
provider. The first reply calls a shell tool that blocks until the test
creates the file ``go`` in the session's directory, so "while a tool call
runs" is a state the test controls, not a race against a timer. What the
screen claims is checked against the session's journal and ``inbox.json``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pexpect

from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, session_id_of, spawn, words

__all__ = ["spawn"]  # the fixture, re-used from test_repl

GATED_TOOL: dict[str, object] = {
    "tool_calls": [
        {
            "name": "shell",
            "arguments": {"command": "while [ ! -e go ]; do sleep 0.05; done; echo released"},
        }
    ]
}
"""A first reply whose tool call runs until the test creates ``go``."""

CALLING = words("⏺ Calling shell while")
ESC = "\x1b"
TAB = "\t"


def session_dir(tmp_path: Path, sid: str) -> Path:
    return tmp_path / "state" / "sessions" / sid


def journal(tmp_path: Path, sid: str) -> list[dict[str, Any]]:
    path = session_dir(tmp_path, sid) / "journal.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def inbox(tmp_path: Path, sid: str) -> list[dict[str, Any]]:
    path = session_dir(tmp_path, sid) / "inbox.json"
    entries: list[dict[str, Any]] = json.loads(path.read_text("utf-8"))["entries"]
    return entries


def outline(records: list[dict[str, Any]]) -> list[str]:
    """The journal as ``type[:detail]`` strings (user messages with kind and
    text), without ``effect_running`` records."""
    out = []
    for r in records:
        if r["type"] == "effect_running":
            continue  # the effect's own record (docs/design/effects.md): not about steering
        if r["type"] == "user_message":
            out.append(f"user:{r['kind']}:{r['text']}")
        elif r["type"] == "turn_completed":
            out.append(f"end:{r['status']}")
        elif r["type"] == "tool_result":
            out.append(f"tool_result:{r['status']}")
        else:
            out.append(r["type"])
    return out


def press_ctrl_c_until_exit(child: pexpect.spawn) -> str:
    """Confirm exit with Ctrl+C; re-arm if the 2 s window ran out meanwhile."""
    for _ in range(3):
        child.sendcontrol("c")
        if child.expect([pexpect.EOF, words("Press Ctrl+C again to exit")]) == 0:
            out = str(child.before)
            child.close()
            assert child.exitstatus == 0, out
            return out
    raise AssertionError("Ctrl+C did not exit")


def test_enter_during_a_tool_call_steers_the_running_turn(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([GATED_TOOL, {"text": "Saw the steering."}], "--approval", "never")
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("also check the README" + ENTER)
    child.expect(words("↳ steer also check the README reaches the model next"))
    (tmp_path / "go").touch()
    child.expect(words("✓ Called shell"))
    child.expect(words("› also check the README (steering)"))
    child.expect(words("Saw the steering."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert outline(journal(tmp_path, sid)) == [
        "session_started",
        "turn_started",
        "user:prompt:first",
        "model_round",
        "tool_started",  # durable before the tool ran
        "tool_result:ok",
        "user:steer:also check the README",  # after the result, before the next round
        "model_round",
        "end:completed",
    ]
    assert inbox(tmp_path, sid) == []


def test_tab_queues_the_text_and_the_runtime_runs_it_next(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn(
        [GATED_TOOL, {"text": "First turn done."}, {"text": "Answer to the queued one."}],
        "--approval",
        "never",
    )
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("later please" + TAB)
    child.expect(words("↳ next turn later please"))
    (tmp_path / "go").touch()
    child.expect(words("First turn done."))
    child.expect(words("── completed"))
    child.expect(words("› later please (queued)"))
    child.expect(words("Answer to the queued one."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert outline(journal(tmp_path, sid)) == [
        "session_started",
        "turn_started",
        "user:prompt:first",
        "model_round",
        "tool_started",  # durable before the tool ran
        "tool_result:ok",
        "model_round",
        "end:completed",
        "turn_started",
        "user:queue:later please",
        "model_round",
        "end:completed",
    ]


def test_esc_interrupts_and_the_waiting_steering_becomes_the_next_turn(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([GATED_TOOL, {"text": "Doing Z now."}], "--approval", "never")
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("stop, do Z instead" + ENTER)
    child.expect(words("Esc: interrupt + send waiting"))  # the status line, then the pending line
    child.expect(words("↳ steer stop, do Z instead"))
    child.send(ESC)
    child.expect(words("⊘ Interrupted shell"))
    child.expect(words("── interrupted"))
    child.expect(words("› stop, do Z instead"))
    child.expect(words("Doing Z now."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    assert outline(journal(tmp_path, sid)) == [
        "session_started",
        "turn_started",
        "user:prompt:first",
        "model_round",
        "tool_started",  # durable before the tool ran
        "tool_result:interrupted",
        "end:interrupted",
        "turn_started",
        "user:steer:stop, do Z instead",
        "model_round",
        "end:completed",
    ]
    assert inbox(tmp_path, sid) == []


def test_ctrl_c_interrupts_keeps_the_steering_waiting_and_resume_sends_it(
    spawn: Spawn, tmp_path: Path
) -> None:
    replies = [GATED_TOOL, {"text": "Answered the kept message."}]
    child = spawn(replies, "--approval", "never")
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("keep me" + ENTER)
    child.expect(words("↳ steer keep me"))
    child.sendcontrol("c")
    child.expect(words("── interrupted"))
    child.expect(words("Press Ctrl+C again to exit"))
    child.expect(words("↳ waiting keep me"))
    assert [(e["text"], e["kind"]) for e in inbox(tmp_path, sid)] == [("keep me", "steer")]
    out = press_ctrl_c_until_exit(child)
    assert "1 message(s) wait in this session" in out
    assert outline(journal(tmp_path, sid))[-1] == "end:interrupted"
    assert [e["text"] for e in inbox(tmp_path, sid)] == ["keep me"]  # still durable

    again = spawn(replies, "--approval", "never", "--session", sid)
    again.expect(words("1 message(s) accepted earlier were never answered; sending them now."))
    again.expect(words("› keep me (recovered)"))
    again.expect(words("Answered the kept message."))
    again.expect(words("── completed"))
    exit_cleanly(again)
    assert outline(journal(tmp_path, sid))[-4:] == [
        "turn_started",
        "user:steer:keep me",
        "model_round",
        "end:completed",
    ]
    assert inbox(tmp_path, sid) == []


def test_a_refused_message_stays_in_the_editor(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn(
        [GATED_TOOL, {"text": "Read all nineteen."}, {"text": "And the twentieth."}],
        "--approval",
        "never",
    )
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    for n in range(1, 20):  # the running prompt + 19 steering messages: the limit of 20
        child.send(f"steer-{n}" + ENTER)
    child.send("the twentieth" + ENTER)
    child.expect(words("Not sent: 20 messages are already waiting"))
    child.expect(words("Your text is still in the editor."))
    (tmp_path / "go").touch()
    child.expect(words("› steer-19 (steering)"))
    child.expect(words("Read all nineteen."))
    child.expect(words("── completed"))
    child.send(ENTER)  # the refused text never left the editor: Enter sends it now
    child.expect(words("› the twentieth"))
    child.expect(words("And the twentieth."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    records = outline(journal(tmp_path, sid))
    assert records.count("end:completed") == 2
    assert records[-4:] == [
        "turn_started",
        "user:prompt:the twentieth",
        "model_round",
        "end:completed",
    ]


UP = "\x1b[A"
DOWN = "\x1b[B"


def test_waiting_messages_can_be_selected_then_dropped_or_taken_back_into_the_editor(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Issue 7 item 11: Down selects a waiting message; d drops it for good, e
    drops it and puts its text in the editor; neither is ever sent as it was."""
    child = spawn(
        [GATED_TOOL, {"text": "First turn done."}, {"text": "Answer to the edited one."}],
        "--approval",
        "never",
    )
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("later one" + TAB)
    child.expect(words("↳ next turn later one"))
    child.send("later two" + TAB)
    child.expect(words("↳ next turn later two"))
    child.expect(words("↓ to edit or drop a waiting message"))
    child.send(DOWN)  # the list is under the input: the oldest first
    child.expect(words("› next turn later one"))
    child.expect(words("Esc back"))  # the keys of the list (only changed cells are redrawn)
    child.send(DOWN)
    child.expect(words("› next turn later two"))
    child.send("d")
    child.expect(words("Dropped: later two"))
    child.expect(words("› next turn later one"))  # the selection moved to the neighbour
    child.send(UP)  # past the oldest: out of the list
    child.expect(words("↳ next turn later one"))
    child.send(DOWN + "e")
    # Back in the editor as a draft (the journal below shows it was sent as
    # edited); the screen only redraws changed cells, so wait on the inbox.
    deadline = time.monotonic() + 10
    while [e["text"] for e in inbox(tmp_path, sid)] != ["first"]:  # both drops durable
        assert time.monotonic() < deadline, inbox(tmp_path, sid)
        child.expect([pexpect.TIMEOUT, r"."], timeout=0.05)
    (tmp_path / "go").touch()
    child.expect(words("First turn done."))
    child.expect(words("── completed"))
    child.send(" edited" + ENTER)
    child.expect(words("Answer to the edited one."))
    child.expect(words("── completed"))
    exit_cleanly(child)
    records = journal(tmp_path, sid)
    assert outline(records) == [
        "session_started",
        "turn_started",
        "user:prompt:first",
        "model_round",
        "tool_started",
        "input_dropped",  # both while the tool call ran
        "input_dropped",
        "tool_result:ok",
        "model_round",
        "end:completed",
        "turn_started",
        "user:prompt:later one edited",
        "model_round",
        "end:completed",
    ]
    assert inbox(tmp_path, sid) == []


def test_each_steering_message_is_echoed_once_where_the_turn_takes_it(
    spawn: Spawn, tmp_path: Path
) -> None:
    """Two messages sent while a tool runs are claimed together after its
    result (one ``input.claimed``): each is echoed once, in order, between
    the tool's result and the answer that reads them."""
    child = spawn([GATED_TOOL, {"text": "Read both."}], "--approval", "never")
    sid = session_id_of(child)
    child.send("first" + ENTER)
    child.expect(CALLING)
    child.send("alpha note" + ENTER)
    child.expect(words("↳ steer alpha note reaches the model next"))
    child.send("beta note" + ENTER)
    child.expect(words("↳ steer beta note"))
    (tmp_path / "go").touch()
    child.expect(words("✓ Called shell"))
    child.expect(words("── completed"))
    between = str(child.before)
    exit_cleanly(child)
    alpha = [m.start() for m in re.finditer(words("› alpha note (steering)"), between)]
    beta = [m.start() for m in re.finditer(words("› beta note (steering)"), between)]
    answer = [m.start() for m in re.finditer(words("Read both."), between)]
    assert len(alpha) == 1 and len(beta) == 1 and answer, between
    assert alpha[0] < beta[0] < answer[0]
    assert outline(journal(tmp_path, sid))[5:8] == [
        "tool_result:ok",
        "user:steer:alpha note",
        "user:steer:beta note",
    ]
