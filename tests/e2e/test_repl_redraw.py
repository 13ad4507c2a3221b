"""Redraws of the REPL as a person sees them: a real pseudo-terminal whose
output is interpreted by a terminal emulator (:mod:`tests.support.screen`),
against a loopback OpenAI Chat server (:mod:`tests.support.replay_server`)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pexpect
import pytest
import yaml

from tests.e2e.test_repl import ENTER, words
from tests.support.child_env import without_prefixes
from tests.support.replay_server import ReplayServer, Reply
from tests.support.screen import Screen

REPO = Path(__file__).resolve().parents[2]
ROWS, COLS = 40, 120


def sse_delta(text: str) -> bytes:
    """One OpenAI Chat SSE event carrying ``text``."""
    chunk = {"id": "r", "choices": [{"index": 0, "delta": {"content": text}}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def chat_sse(deltas: list[str]) -> bytes:
    """An OpenAI Chat SSE body streaming ``deltas``, then stop with usage."""
    out = b"".join(sse_delta(d) for d in deltas)
    end = {
        "id": "r",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": len(deltas)},
    }
    return out + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


def spawn_repl(
    tmp_path: Path,
    *args: str,
    reflow: bool = False,
    cpr: bool = False,
    approval: str = "never",
    extra_env: dict[str, str] | None = None,
    cols: int = COLS,
) -> tuple[pexpect.spawn, Screen]:
    """The REPL with ``args`` (provider flags), its screen, at the prompt.

    ``cpr``: the screen answers cursor position queries (as real terminals do),
    so prompt_toolkit gives the prompt every row down to the screen bottom.
    ``COLUMNS``/``LINES`` are not inherited (pytest-xdist workers carry 80x24,
    which rich would take over the pty's size); ``extra_env`` adds variables.
    """
    env = without_prefixes("MIND_", "OPENAI_", "ANTHROPIC_", drop=("COLUMNS", "LINES"))
    env.update(extra_env or {})
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        MIND_MAX_RETRIES="2",
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
    )
    if not cpr:
        env["PROMPT_TOOLKIT_NO_CPR"] = "1"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "mind.shell.cli", *args, "--approval", approval, "--cwd", str(tmp_path)],
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=20,
        dimensions=(ROWS, cols),
    )
    screen = Screen.attach(child, rows=ROWS, cols=cols, reflow=reflow, answer=cpr)
    child.expect("› ")
    return child, screen


@pytest.fixture
def repl(tmp_path: Path) -> Iterator[tuple[pexpect.spawn, Screen, ReplayServer]]:
    """The REPL on an openai-chat provider served by a ReplayServer (queue it first)."""
    server = ReplayServer().start()
    child, screen = spawn_repl(
        tmp_path, "--provider", "openai-chat", "--base-url", server.url + "/v1", "--model", "m"
    )
    try:
        yield child, screen, server
    finally:
        child.terminate(force=True)
        server.stop()


def resize(child: pexpect.spawn, screen: Screen, rows: int, cols: int) -> None:
    """Resize the terminal as a person does: the terminal re-wraps what it shows
    (what the child printed so far is interpreted first), then the child gets
    SIGWINCH.

    The child is stopped meanwhile, so the resize falls between two of its
    frames: a frame drawn for the old width but read after the resize would
    be misplaced by any terminal, and under load the test would otherwise
    read such a frame late and blame the REPL for it.
    """
    os.kill(child.pid, signal.SIGSTOP)
    try:
        with contextlib.suppress(pexpect.TIMEOUT):
            while True:
                child.read_nonblocking(1 << 16, timeout=0.05)
        screen.resize(rows, cols)
        child.setwinsize(rows, cols)
    finally:
        os.kill(child.pid, signal.SIGCONT)


def wait_for_screen(
    child: pexpect.spawn, screen: Screen, done: Callable[[list[str]], bool], timeout: float = 10
) -> None:
    """Read the child's output until ``done(screen.lines())`` (bounded by ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    while not done(screen.lines()):
        assert time.monotonic() < deadline, screen.transcript()
        with contextlib.suppress(pexpect.TIMEOUT):
            child.read_nonblocking(1 << 16, timeout=0.05)


def under_input(screen: Screen) -> list[str]:
    """The rows under the one the cursor is on (the input line), to the last written."""
    lines = screen.lines()
    rows = lines[screen.cursor_line() + 1 :]
    while rows and not rows[-1]:
        rows.pop()
    return rows


_USAGE_LINE = re.compile(r"^[\d.]+k? (/ [\d.]+k? )?tokens( \(\d+%\))?$")
"""The idle status line's context usage (``215 tokens``, ``12k / 128k tokens (9%)``)."""


def waiting_under_input(screen: Screen) -> list[str]:
    """:func:`under_input` without the idle context-usage line: what still waits or works."""
    return [row for row in under_input(screen) if not _USAGE_LINE.match(row.strip())]


def shown_under_input(screen: Screen, text: str) -> bool:
    """Whether a row under the input line contains ``text``."""
    return any(text in row for row in under_input(screen))


def input_line(screen: Screen) -> str:
    """The row the cursor is on (the input line)."""
    return screen.lines()[screen.cursor_line()]


GATED_SCRIPT: Final = [
    {
        "tool_calls": [
            {
                "name": "shell",
                "arguments": {"command": "while [ ! -e go ]; do sleep 0.05; done; echo released"},
            }
        ]
    },
    {"text": "First turn done."},
    {"text": "Answer to the queued one."},
]
"""Replies whose first tool call runs until the test creates ``go``."""


def scripted(tmp_path: Path, replies: list[dict[str, object]]) -> tuple[str, ...]:
    """Provider flags of the scripted provider playing ``replies``."""
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return ("--provider", "scripted", "--script", str(script))


def journal_records(tmp_path: Path) -> list[dict[str, object]]:
    (path,) = (tmp_path / "state").rglob("journal.jsonl")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_retried_stream_replaces_its_partial_answer_on_screen(
    repl: tuple[pexpect.spawn, Screen, ReplayServer], tmp_path: Path
) -> None:
    child, screen, server = repl
    answer = "Alpha paragraph one.\n\nBravo paragraph two.\n\nCharlie the end."
    deltas = [answer[i : i + 4] for i in range(0, len(answer), 4)]
    body = chat_sse(deltas)
    # Cut after the chunk carrying "Char": both first paragraphs were printed.
    cut = body.index(b"\n\n", body.index(b'"Char"')) + 2
    server.enqueue(Reply(body=body, truncate_at=cut), Reply(body=body))
    child.send("go" + ENTER)
    child.expect(words("── completed"))
    shown = screen.transcript()
    assert "↻" in shown  # the retry is said
    assert shown.count("Alpha paragraph one.") == 1, shown
    assert shown.count("Bravo paragraph two.") == 1, shown
    assert shown.count("Charlie the end.") == 1, shown
    texts = [r["text"] for r in journal_records(tmp_path) if r["type"] == "model_round"]
    assert texts == [answer]  # the abandoned attempt is not in the session's history


def _tool_script(tmp_path: Path, echo: int, gate: bool = False) -> Path:
    """A script whose one shell call prints ``echo`` x's; with ``gate`` the call
    waits until the test creates ``go`` in the working directory (so the result
    is printed only after what the test did in between, whatever the load)."""
    script = tmp_path / "script.yaml"
    wait = "while [ ! -e go ]; do sleep 0.02; done" if gate else "sleep 1.5"
    command = wait + "; echo " + "x" * echo
    replies = [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}]
    replies.append({"text": "All done."})
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return script


@pytest.mark.parametrize("exported", [{}, {"COLUMNS": "80"}], ids=["live", "columns-exported"])
def test_a_calling_line_stays_whole_when_the_terminal_narrows_mid_call(
    tmp_path: Path, exported: dict[str, str]
) -> None:
    # The Calling line is cut to one row (120 columns, or the 80 an exported
    # COLUMNS pins rich's width to, which a resize does not change).
    script = _tool_script(tmp_path, echo=150, gate=True)
    child, screen = spawn_repl(
        tmp_path, "--provider", "scripted", "--script", str(script), reflow=True, extra_env=exported
    )
    try:
        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell"))
        resize(child, screen, ROWS, 64)  # the Calling line now takes two rows
        (tmp_path / "go").touch()  # the call ends only after the resize
        child.expect(words("── completed"))
        lines = screen.lines()
        calling = [i for i, line in enumerate(lines) if line.startswith("⏺ Calling")]
        called = [i for i, line in enumerate(lines) if line.startswith("✓ Called")]
        assert len(calling) == 1 and len(called) == 1, screen.transcript()
        # In place was impossible: the Calling line is kept whole (both rows)
        # and the Called line follows it; erasing one row would have left half.
        assert lines[calling[0] + 1].endswith("x…"), screen.transcript()
        assert called[0] == calling[0] + 2, screen.transcript()
    finally:
        child.terminate(force=True)


def test_a_called_line_replaces_its_calling_line_when_the_width_did_not_change(
    tmp_path: Path,
) -> None:
    script = _tool_script(tmp_path, echo=10, gate=True)
    child, screen = spawn_repl(
        tmp_path, "--provider", "scripted", "--script", str(script), extra_env={"COLUMNS": "80"}
    )
    try:
        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell"))
        (tmp_path / "go").touch()
        child.expect(words("── completed"))
        lines = screen.lines()
        assert not [line for line in lines if line.startswith("⏺ Calling")], screen.transcript()
        assert len([line for line in lines if line.startswith("✓ Called")]) == 1
    finally:
        child.terminate(force=True)


def test_an_exported_columns_does_not_override_the_terminal_width(tmp_path: Path) -> None:
    # An exported COLUMNS=80 on a 64-column terminal: rich would cut lines to
    # 79 columns (two rows each) and keep that width through resizes; the REPL
    # follows the terminal, so the Calling line fits one row and its Called
    # line replaces it in place.
    script = _tool_script(tmp_path, echo=150, gate=True)
    child, screen = spawn_repl(
        tmp_path,
        *("--provider", "scripted", "--script", str(script)),
        cols=64,
        extra_env={"COLUMNS": "80"},
    )
    try:
        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell"))
        (tmp_path / "go").touch()
        child.expect(words("── completed"))
        lines = screen.lines()
        calling = [i for i, line in enumerate(lines) if line.startswith("⏺ Calling")]
        called = [i for i, line in enumerate(lines) if line.startswith("✓ Called")]
        assert calling == [] and len(called) == 1, screen.transcript()
        assert len(lines[called[0]]) <= 64, screen.transcript()
    finally:
        child.terminate(force=True)


def test_no_stale_working_line_remains_after_the_terminal_narrows(tmp_path: Path) -> None:
    # A status line above the cursor re-wraps into two rows when narrowed and
    # prompt_toolkit's erase (up by the rows it drew) missed the top one; the
    # status area sits under the input, where its erase-down clears it.
    script = _tool_script(tmp_path, echo=10)
    child, screen = spawn_repl(
        tmp_path, "--provider", "scripted", "--script", str(script), reflow=True
    )
    try:
        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell"))
        child.expect("Working")
        resize(child, screen, ROWS, 40)
        child.expect(words("── completed"))
        assert not [line for line in screen.lines() if "Working" in line], screen.transcript()
    finally:
        child.terminate(force=True)


def test_lines_of_a_long_fence_appear_while_the_stream_is_paused_inside_it(
    repl: tuple[pexpect.spawn, Screen, ReplayServer],
) -> None:
    child, screen, server = repl
    code = "".join(f"step_{i} = {i} * 2\n" for i in range(30))
    answer = "Here:\n\n```python\n" + code + "```\n\nThat is all."
    deltas = [answer[i : i + 4] for i in range(0, len(answer), 4)]
    body = chat_sse(deltas)
    release = threading.Event()
    # Paused inside the fence: step_19's line is complete, step_20's has begun.
    inside = answer.index("step_20") // 4 + 1
    hold = sum(len(sse_delta(d)) for d in deltas[:inside])
    server.enqueue(Reply(body=body, hold_at=hold, release=release))
    try:
        child.send("show me" + ENTER)
        # Printed as output (one column in, as code), not only the preview line.
        wait_for_screen(child, screen, lambda lines: " step_19 = 19 * 2" in lines)
        lines = screen.lines()
        assert " step_0 = 0 * 2" in lines and " step_20 = 20 * 2" not in lines
        assert not any("completed" in line for line in lines)
    finally:
        release.set()
    child.expect(words("── completed"))
    shown = screen.transcript()
    assert shown.count("step_0 = 0 * 2") == 1 and shown.count("step_29 = 29 * 2") == 1
    assert "```" not in shown and "That is all." in shown


def test_the_status_area_and_the_command_menu_open_under_the_input(tmp_path: Path) -> None:
    # A terminal that reports the cursor position: prompt_toolkit gives the
    # prompt every row down to the screen bottom; the status area must stay
    # right under the input, not be pushed to the bottom.
    child, screen = spawn_repl(tmp_path, *scripted(tmp_path, GATED_SCRIPT), cpr=True)
    try:
        child.send("/sessions" + ENTER)
        wait_for_screen(child, screen, lambda _: under_input(screen)[:1] == ["Sessions"])
        assert input_line(screen) == "›", screen.transcript()
        assert under_input(screen)[1].startswith("› ● "), screen.transcript()  # the focus
        child.send("\x1b")  # closes the picker: nothing of it is left
        wait_for_screen(child, screen, lambda lines: "Sessions" not in lines)
        assert under_input(screen) == [], screen.transcript()

        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell while"))
        wait_for_screen(child, screen, lambda _: "Working" in "".join(under_input(screen)[:1]))
        assert input_line(screen) == "›", screen.transcript()
        child.send("one\ntwo")  # a two-line draft: the status stays under its last line
        wait_for_screen(child, screen, lambda _: input_line(screen) == "  two")
        assert screen.lines()[screen.cursor_line() - 1] == "› one", screen.transcript()
        assert "Working" in under_input(screen)[0], screen.transcript()
        child.sendcontrol("c")  # clears the draft

        child.send("/")  # the command menu opens under the cursor, over the status area
        wait_for_screen(child, screen, lambda _: shown_under_input(screen, "/sessions"))
        assert shown_under_input(screen, "/help"), screen.transcript()
        assert shown_under_input(screen, "/exit"), screen.transcript()
        child.sendcontrol("c")
        (tmp_path / "go").touch()
        child.expect(words("── completed"))
        child.send("\x04")
        child.expect(pexpect.EOF)
        shown = screen.transcript()
        assert "Resume this session with" in shown
        # The last frame left in the scrollback holds no status line or menu.
        assert "Working" not in shown and "show keys and commands" not in shown, shown
    finally:
        child.terminate(force=True)


def test_the_approval_question_and_waiting_messages_sit_under_the_input(tmp_path: Path) -> None:
    child, screen = spawn_repl(tmp_path, *scripted(tmp_path, GATED_SCRIPT), approval="untrusted")
    try:
        child.send("run it" + ENTER)
        wait_for_screen(
            child, screen, lambda _: "".join(under_input(screen)[:1]).startswith("Allow shell?")
        )
        assert input_line(screen) == "›", screen.transcript()
        child.send("y")
        child.expect(words("approved once"))
        child.send("later please\t")  # queued for the next turn
        wait_for_screen(
            child,
            screen,
            lambda _: shown_under_input(screen, "↳ next turn later please"),
        )
        assert input_line(screen) == "›", screen.transcript()
        assert "Working" in under_input(screen)[0], screen.transcript()
        (tmp_path / "go").touch()
        child.expect(words("Answer to the queued one."))
        child.expect(words("── completed"))
        wait_for_screen(child, screen, lambda _: not waiting_under_input(screen))
        child.send("\x04")
        child.expect(pexpect.EOF)
        shown = screen.transcript()
        assert "↳ next turn" not in shown and "Working" not in shown, shown
        assert "Allow shell?" not in shown, shown
    finally:
        child.terminate(force=True)


def test_no_stale_status_rows_remain_when_a_waiting_message_is_listed_and_it_narrows(
    tmp_path: Path,
) -> None:
    child, screen = spawn_repl(tmp_path, *scripted(tmp_path, GATED_SCRIPT), reflow=True)
    try:
        child.send("run it" + ENTER)
        child.expect(words("⏺ Calling shell while"))
        child.send("also this" + ENTER)  # steering: listed while the call runs
        wait_for_screen(child, screen, lambda _: shown_under_input(screen, "↳ steer"))
        resize(child, screen, ROWS, 40)  # both status rows are wider than 40 columns
        wait_for_screen(child, screen, lambda _: shown_under_input(screen, "↳ steer"))
        (tmp_path / "go").touch()
        child.expect(words("── completed"))
        wait_for_screen(child, screen, lambda _: not waiting_under_input(screen))
        stale = [row for row in screen.lines() if "Working" in row or "↳ steer" in row]
        assert not stale, screen.transcript()
    finally:
        child.terminate(force=True)


def test_a_failed_turn_shows_the_providers_detail_under_the_failure_line(
    repl: tuple[pexpect.spawn, Screen, ReplayServer],
) -> None:
    child, screen, server = repl
    server.enqueue(
        Reply(status=404, body=b'{"error": {"message": "no such route"}}', content_type="")
    )
    child.send("hello" + ENTER)
    wait_for_screen(child, screen, lambda lines: any("── failed" in ln for ln in lines))
    lines = screen.lines()
    (at,) = [i for i, ln in enumerate(lines) if ln.startswith("✗ ")]
    assert "does not serve /v1/chat/completions" in lines[at + 1], screen.transcript()
    assert "check --base-url" in lines[at + 1]


def test_a_huge_command_viewed_with_v_ends_with_what_was_shown_and_y_then_runs_it(
    tmp_path: Path,
) -> None:
    command = ": " + "x" * 35_000 + " MIDDLE " + "y" * 35_000 + "; touch ran-it"
    replies = [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}]
    child, screen = spawn_repl(
        tmp_path, *scripted(tmp_path, [*replies, {"text": "Ran."}]), approval="untrusted"
    )
    try:
        child.send("go" + ENTER)
        wait_for_screen(child, screen, lambda _: shown_under_input(screen, "Allow shell?"))
        (footer,) = [row for row in under_input(screen) if row.startswith("Allow shell?")]
        assert len(footer) < COLS and footer.endswith(("kept)", "the turn", "stop")), footer
        child.send("v")
        child.expect(words(f"{len(command)} characters, 1 line shown"))
        child.send("y")
        child.expect(words("approved once"))
        child.expect(words("── completed"))
        assert (tmp_path / "ran-it").exists()
    finally:
        child.terminate(force=True)


def test_resuming_a_session_with_recovered_input_draws_nothing_above_the_banner(
    tmp_path: Path,
) -> None:
    flags = scripted(tmp_path, GATED_SCRIPT)
    child, _ = spawn_repl(tmp_path, *flags)
    child.send("first" + ENTER)
    child.expect(words("⏺ Calling shell"))
    child.send("keep me" + ENTER)  # steering that the interrupt leaves waiting
    child.expect(words("↳ steer keep me"))
    os.kill(child.pid, signal.SIGKILL)  # mind stops mid-turn: the next open recovers it
    child.expect(pexpect.EOF)
    (sid,) = [p.name for p in (tmp_path / "state" / "sessions").iterdir()]
    (tmp_path / "go").touch()
    again, screen = spawn_repl(tmp_path, *flags, "--session", sid, cpr=True)
    try:
        # The shell call it stopped in has no recorded end: the resumed turn
        # may ask about it (docs/design/effects.md §4) — t tells the model.
        if again.expect([words("Outcome of shell unknown:"), words("── completed")]) == 0:
            again.send("t")
            again.expect(words("── completed"))
        rows = [row for row in screen.transcript().split("\n") if row.strip()]
        assert rows[0].startswith("mind "), screen.transcript()
        banner_end = next(i for i, row in enumerate(rows) if row.startswith("Enter sends"))
        assert not any("Working" in row or row.startswith("›") for row in rows[:banner_end])
    finally:
        again.terminate(force=True)


def test_the_resume_recap_never_passes_control_sequences(tmp_path: Path) -> None:
    # The last answer of a resumed session is shown in the banner's recap: a
    # hostile answer must not set the window title or clear the screen there.
    script = tmp_path / "script.yaml"
    script.write_text(
        yaml.safe_dump([{"text": "A\x1b]0;PWNED\x07\x1b[2JB"}, {"text": "again"}]),
        encoding="utf-8",
    )
    child, screen = spawn_repl(tmp_path, "--provider", "scripted", "--script", str(script))
    child.send("first" + ENTER)
    child.expect(words("── completed"))
    child.sendcontrol("d")
    child.expect(pexpect.EOF)
    child.close()
    child, screen = spawn_repl(
        tmp_path, "--provider", "scripted", "--script", str(script), "resume"
    )
    try:
        # The recap's answer line comes after its "last" line: wait for it
        # (a cleared screen or a swallowed answer never shows it).
        wait_for_screen(child, screen, lambda lines: any("AB" in ln for ln in lines))
        lines = screen.lines()
        assert screen._screen.title != "PWNED", screen.transcript()
        assert any(ln.startswith("mind ") for ln in lines), screen.transcript()  # not cleared
        assert any("AB" in ln for ln in lines), screen.transcript()
    finally:
        child.terminate(force=True)
