"""The ``mind`` REPL driven in a real pseudo-terminal with the scripted provider.

Every test runs the real command (``python -m mind.shell.cli``) under pexpect
with its state in ``tmp_path`` and checks what a person sees — and, where the
REPL claims something happened (a tool ran, a call was refused, a session was
created), the file system too.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 20
_SCRUB = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "MIND_PROVIDER",
    "MIND_MODEL",
    "MIND_MAX_RETRIES",
    "MIND_HOME",
    "MIND_STATE_HOME",
)
_SESSION_RE = r"session\S*\s+(?:\x1b\[[0-9;]*m)*([0-9a-f]{8}-[0-9a-f-]{27})"
ENTER = "\r"  # a terminal's Enter; "\n" is Ctrl+J (a newline in the editor)


def words(text: str) -> str:
    """A regex matching ``text`` as seen on screen: styling escapes may sit
    between any two characters, and any run of spaces may be wider."""
    esc = r"(?:\x1b\[[0-9;?]*[A-Za-z])*"
    parts = []
    for word in text.split():
        parts.append(esc.join(re.escape(ch) for ch in word))
    return (esc + r"(?:\s|\x1b\[[0-9;?]*[A-Za-z])+" + esc).join(parts)


Spawn = Callable[..., pexpect.spawn]


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawn]:
    """Start the REPL: ``spawn(replies, *flags)`` with the reply list as the script."""
    children: list[pexpect.spawn] = []

    def start(replies: list[dict[str, object]], *flags: str) -> pexpect.spawn:
        script = tmp_path / f"script{len(children)}.yaml"
        script.write_text(yaml.safe_dump(replies), encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
        env.update(
            MIND_HOME=str(tmp_path / "home"),
            MIND_STATE_HOME=str(tmp_path / "state"),
            PYTHONPATH=str(REPO),
            TERM="xterm-256color",
            PROMPT_TOOLKIT_NO_CPR="1",
            COLUMNS="120",
            LINES="40",
        )
        child = pexpect.spawn(
            sys.executable,
            [
                "-m",
                "mind.shell.cli",
                "--provider",
                "scripted",
                "--script",
                str(script),
                "--cwd",
                str(tmp_path),
                *flags,
            ],
            cwd=str(tmp_path),
            env=env,
            encoding="utf-8",
            timeout=TIMEOUT_S,
            dimensions=(40, 120),
        )
        children.append(child)
        child.expect(_SESSION_RE)
        _banner_ids[id(child)] = child.match.group(1)
        child.expect(words("approval"))
        _banners[id(child)] = str(child.before)
        child.expect("› ")
        return child

    yield start
    for child in children:
        if child.isalive():
            child.terminate(force=True)


_banner_ids: dict[int, str] = {}
_banners: dict[int, str] = {}


def session_id_of(child: pexpect.spawn) -> str:
    """The session id the REPL printed in its banner."""
    return _banner_ids[id(child)]


def exit_cleanly(child: pexpect.spawn, keys: str = "/exit" + ENTER) -> str:
    """Leave the REPL with ``keys``; return what it printed; assert exit status 0."""
    child.send(keys)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    return str(child.before)


def test_plain_answer_streams_and_exit_prints_how_to_resume(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "The answer is **forty-two**.\n\nSecond paragraph."}])
    sid = session_id_of(child)
    assert re.search(words("provider scripted"), _banners[id(child)])  # visibly labelled
    # Where commands run is said up front, backend included.
    assert re.search(words("sandbox workspace-write (bubblewrap)"), _banners[id(child)])
    child.send("what is the answer?" + ENTER)
    child.expect(words("The answer is forty-two."))
    child.expect(words("Second paragraph."))
    child.expect(words("── completed"))
    out = exit_cleanly(child)
    assert f"mind resume {sid}" in out
    history = tmp_path / "home" / "history"
    assert "what is the answer?" in history.read_text(encoding="utf-8")
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_a_tool_command_has_no_controlling_terminal(spawn: Spawn) -> None:
    """The REPL runs in a terminal; a command the model runs must not reach it
    (no ``/dev/tty``, so no ``TIOCSTI`` typing into mind's input)."""
    probe = "if (exec 3</dev/tty) 2>/dev/null; then echo HAS-TTY; else echo NO-CTTY; fi"
    child = spawn(
        [{"tool_calls": [{"name": "shell", "arguments": {"command": probe}}]}, {"text": "ok"}],
        "--approval",
        "never",
    )
    child.send("probe" + ENTER)
    child.expect(words("── completed"))
    screen = str(child.before)
    assert "NO-CTTY" in screen and "HAS-TTY" not in screen.replace("echo HAS-TTY", "")
    exit_cleanly(child)


def test_tool_call_shows_calling_then_called_with_a_short_result(spawn: Spawn) -> None:
    child = spawn(
        [
            {
                "tool_calls": [
                    {"name": "shell", "arguments": {"command": "echo tool-output-marker"}}
                ]
            },
            {"text": "Ran it."},
        ],
        "--approval",
        "never",
    )
    child.send("run echo" + ENTER)
    child.expect(words("⏺ Calling shell echo tool-output-marker"))
    child.expect(words("✓ Called shell echo tool-output-marker"))
    child.expect(words("⎿"))
    child.expect("tool-output-marker")
    child.expect(words("Ran it."))
    child.expect(words("── completed"))
    exit_cleanly(child)


def test_approval_yes_runs_the_tool_and_no_refuses_it(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn(
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch approved-file"}}]},
            {"text": "Made the first file."},
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch refused-file"}}]},
            {"text": "Could not make the second file."},
        ],
        "--approval",
        "untrusted",
    )
    child.send("make the first file" + ENTER)
    child.expect(words("Approval needed:"))
    child.expect(words("Allow shell?"))
    child.send("y")
    child.expect(words("approved once"))
    child.expect(words("✓ Called shell touch approved-file"))
    child.expect(words("── completed"))
    assert (tmp_path / "approved-file").exists()

    child.send("make the second file" + ENTER)
    child.expect(words("Allow shell?"))
    child.send("n")
    child.expect(words("Refusing shell"))  # an optional reason; Enter alone gives none
    child.send(ENTER)
    child.expect(words("refused"))
    child.expect(words("⊘ Refused shell touch refused-file"))
    child.expect(words("Could not make the second file."))
    child.expect(words("── completed"))
    assert not (tmp_path / "refused-file").exists()
    exit_cleanly(child)


def test_ctrl_c_interrupts_a_long_tool_call_and_the_prompt_returns(spawn: Spawn) -> None:
    child = spawn(
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 30"}}]},
            {"text": "Slept."},
        ],
        "--approval",
        "never",
    )
    child.send("sleep please" + ENTER)
    child.expect(words("⏺ Calling shell sleep 30"))
    started = time.monotonic()
    child.sendcontrol("c")
    child.expect(words("── interrupted"))
    assert time.monotonic() - started < 10
    child.send("/status" + ENTER)
    child.expect(words("state idle"))
    exit_cleanly(child)


def test_bracketed_paste_stays_in_the_editor_until_enter(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "Got both lines."}])
    sid = session_id_of(child)
    child.send("\x1b[200~paste-line-one\npaste-line-two\x1b[201~")
    child.expect("paste-line-two")
    child.send(ENTER)
    child.expect(words("Got both lines."))
    child.expect(words("── completed"))
    journal = (tmp_path / "state" / "sessions" / sid / "journal.jsonl").read_text("utf-8")
    assert "paste-line-one\\npaste-line-two" in journal
    exit_cleanly(child)


def test_new_starts_another_session(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "hi"}])
    first = session_id_of(child)
    child.send("/new" + ENTER)
    child.expect(r"new session\S*\s+(?:\x1b\[[0-9;]*m)*([0-9a-f]{8}-[0-9a-f-]{27})")
    second = child.match.group(1)
    assert second != first
    assert (tmp_path / "state" / "sessions" / second / "journal.jsonl").exists()
    child.send("hello" + ENTER)  # the new session's turns are rendered too
    child.expect(words("› hello"))
    child.expect(words("hi"))
    child.expect(words("── completed"))
    child.send("/sessions" + ENTER)
    child.expect(re.escape(first))
    out = exit_cleanly(child)
    assert f"mind resume {second}" in out


def test_ctrl_d_on_an_empty_line_exits(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "hi"}])
    child.send("hello" + ENTER)
    child.expect(words("── completed"))
    sid = session_id_of(child)
    out = exit_cleanly(child, "\x04")
    assert f"mind resume {sid}" in out
    assert (tmp_path / "state" / "sessions" / sid / "journal.jsonl").exists()


def test_a_start_without_input_leaves_no_session(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "hi"}])
    child.send("/new" + ENTER)  # a second untouched session, made by /new
    child.expect(r"new session\S*\s+(?:\x1b\[[0-9;]*m)*([0-9a-f]{8}-[0-9a-f-]{27})")
    out = exit_cleanly(child, "\x04")
    assert "mind resume" not in out
    assert re.search(words("Nothing was sent: no session was kept."), out)
    sessions = tmp_path / "state" / "sessions"
    assert [(p.name, sorted(os.listdir(p))) for p in sessions.iterdir()] == []


def test_ctrl_c_twice_when_idle_exits_and_once_clears_a_draft(spawn: Spawn) -> None:
    child = spawn([{"text": "hi"}])
    child.send("a draft")
    child.expect("a draft")
    child.sendcontrol("c")  # clears the draft
    child.sendcontrol("c")  # asks to confirm
    child.expect(words("Press Ctrl+C again to exit"))
    exit_cleanly(child, "\x03")


@pytest.mark.parametrize("sig", ["SIGHUP", "SIGTERM"])
def test_closing_the_terminal_interrupts_the_turn_and_kills_its_tool(
    spawn: Spawn, tmp_path: Path, sig: str
) -> None:
    """A closed terminal (SIGHUP) or SIGTERM leaves like /exit: the running
    tool's process group is killed and the turn is closed `interrupted`, so no
    orphan finishes a side effect the journal calls "not completed"."""
    import signal as signals

    marker = tmp_path / "late-effect"
    child = spawn(
        [{"tool_calls": [{"name": "shell", "arguments": {"command": f"sleep 2; touch {marker}"}}]}],
        "--approval",
        "never",
    )
    child.send("go" + ENTER)
    child.expect(words("⏺ Calling shell"))
    os.kill(child.pid, getattr(signals, sig))
    child.expect(pexpect.EOF)
    child.close()
    journal = next((tmp_path / "state" / "sessions").iterdir()) / "journal.jsonl"
    lines = [__import__("json").loads(line) for line in journal.read_text().splitlines()]
    ends = [x for x in lines if x["type"] == "turn_completed"]
    assert [x["status"] for x in ends] == ["interrupted"]
    deadline = time.monotonic() + 4  # past the 2 s the killed command would have slept
    while time.monotonic() < deadline and not marker.exists():
        time.sleep(0.2)  # waiting out the killed command's would-be runtime, not a timing assertion
    assert not marker.exists()
