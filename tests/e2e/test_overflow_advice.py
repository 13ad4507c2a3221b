"""What a turn that overflows the window tells the person to do, where they
read it (docs/design/context.md §5): the REPL in a real pseudo-terminal and
``mind exec`` as a subprocess, both against the loopback fake model.

A message that alone is over the window can only be sent shorter (or to a
larger model); a conversation nothing could compact is compacted with
``/compact`` in the REPL, and from ``mind exec`` (no slash commands there)
by resuming the session in the REPL, or left for a new session.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pexpect

from tests.e2e.conftest import MindResult, RunMind, exec_on_fake
from tests.e2e.test_repl import _SCRUB, _SESSION_RE, ENTER, REPO, TIMEOUT_S, exit_cleanly, words
from tests.support.fake_model import FakeModel

WINDOW = 2_000
"""The fake server's window, tokens (8,000 bytes of request body)."""

TOO_BIG = "word " * 1_800
"""A prompt of 9,000 bytes: over the window with nothing else in the request."""

PASTE = "\x1b[200~{}\x1b[201~"
"""A bracketed paste of a text, as a terminal sends it."""

ALONE = "The message itself is too big for the model's context window of 2,000 tokens"


def _exec(run_mind: RunMind, model: FakeModel, tmp: Path, *extra: str) -> MindResult:
    return exec_on_fake(run_mind, model.base_url, tmp, *extra, env={"MIND_MAX_RETRIES": "0"})


def _one_line(text: str) -> str:
    return " ".join(text.split())


def test_exec_says_a_message_too_big_for_the_window_is_to_be_sent_shorter(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with FakeModel(context_window=WINDOW) as model:
        result = _exec(run_mind, model, tmp_path, TOO_BIG)
    assert result.returncode != 0
    said = _one_line(result.stderr)
    assert ALONE in said, said
    assert "send a shorter one, or use a model with a larger window" in said
    assert "/compact" not in said and "/new" not in said


def test_exec_names_the_resume_command_when_nothing_could_compact_the_conversation(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with FakeModel(summary_text="") as model:  # every summary comes back empty
        first = _exec(run_mind, model, tmp_path, "--json", "TOOL look")
        assert first.returncode == 0, first.stderr
        (started,) = first.of_type("session.started")
        sid = started["session_id"]
        model.overflow_next = 1
        second = _exec(run_mind, model, tmp_path, "--session", sid, "and now")
    assert second.returncode != 0
    said = _one_line(second.stderr)
    assert f"Compact it in the REPL (`mind resume {sid}`, then /compact with a focus)" in said
    assert "start a new session (`mind exec` without --session)" in said
    assert "/new" not in said and "Try /compact" not in said


def _repl(model: FakeModel, tmp_path: Path) -> pexpect.spawn:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        MIND_HOME=str(tmp_path / "home"),
        MIND_STATE_HOME=str(tmp_path / "state"),
        MIND_MAX_RETRIES="0",
        PYTHONPATH=str(REPO),
        TERM="xterm-256color",
        PROMPT_TOOLKIT_NO_CPR="1",
        COLUMNS="120",
        LINES="40",
    )
    args = ["-m", "mind.shell.cli", "--provider", "openai-chat", "--base-url", model.base_url]
    args += ["--model", "local-model", "--approval", "never", "--cwd", str(tmp_path)]
    child = pexpect.spawn(
        sys.executable,
        args,
        cwd=str(tmp_path),
        env=env,
        encoding="utf-8",
        timeout=TIMEOUT_S,
        dimensions=(40, 120),
    )
    child.expect(_SESSION_RE)
    child.expect("› ")
    return child


def test_the_repl_says_a_message_too_big_for_the_window_is_to_be_sent_shorter(
    tmp_path: Path,
) -> None:
    with FakeModel(context_window=WINDOW) as model:
        child = _repl(model, tmp_path)
        try:
            child.send(PASTE.format(TOO_BIG.strip()) + ENTER)  # one paste, not 9,000 keys
            child.expect(words("── failed"))
            said = _one_line(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(child.before)))
            assert ALONE in said, said
            assert "send a shorter one, or use a model with a larger window" in said
            assert "/compact" not in said.split(ALONE, 1)[1]
            exit_cleanly(child)
        finally:
            if child.isalive():
                child.terminate(force=True)


def test_the_repl_names_its_own_commands_when_nothing_could_compact_the_conversation(
    tmp_path: Path,
) -> None:
    with FakeModel(summary_text="") as model:  # every summary comes back empty
        child = _repl(model, tmp_path)
        try:
            child.send("TOOL look" + ENTER)
            child.expect(words("── completed"))
            model.overflow_next = 1
            child.send("and now" + ENTER)
            child.expect(words("Try /compact (with a focus), or start a new session with /new."))
            assert "mind resume" not in str(child.before)  # the failure's text, up to here
            child.expect(words("── failed"))
            exit_cleanly(child)
        finally:
            if child.isalive():
                child.terminate(force=True)


def test_a_compact_whose_provider_is_gone_says_so_in_one_sentence(tmp_path: Path) -> None:
    """The failure's sentence joins the note as a clause: one period, not two."""
    with FakeModel() as model:
        child = _repl(model, tmp_path)
        child.send("TOOL look" + ENTER)
        child.expect(words("── completed"))
    try:  # the server is gone: the summary request cannot connect
        child.send("/compact" + ENTER)
        child.expect(words("Not compacted:"))
        child.expect("› ")
        said = _one_line(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(child.before)))
        assert "could not be reached." in said, said
        assert ".." not in said, said
        exit_cleanly(child)
    finally:
        if child.isalive():
            child.terminate(force=True)


def test_the_repl_after_a_message_too_big_with_history_compacts_and_goes_on(
    tmp_path: Path,
) -> None:
    # History first: the advice is still that the message itself is too big;
    # then /compact cuts the refused message, and the session goes on.
    with FakeModel(context_window=WINDOW) as model:
        child = _repl(model, tmp_path)
        try:
            child.send("hello" + ENTER)
            child.expect(words("── completed"))
            child.send(PASTE.format(TOO_BIG.strip()) + ENTER)
            child.expect(words("── failed"))
            said = _one_line(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(child.before)))
            assert ALONE in said, said
            assert "Try /compact" not in said
            child.send("/compact" + ENTER)
            child.expect(words("compacted"))
            assert "Not compacted" not in str(child.before)
            child.send("hi" + ENTER)
            child.expect(words("── completed"))
            exit_cleanly(child)
        finally:
            if child.isalive():
                child.terminate(force=True)


def test_exec_after_a_refused_message_too_big_goes_on_in_the_same_session(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with FakeModel(context_window=WINDOW) as model:
        first = _exec(run_mind, model, tmp_path, "--json", "hello")
        assert first.returncode == 0, first.stderr
        (started,) = first.of_type("session.started")
        sid = started["session_id"]
        big = _exec(run_mind, model, tmp_path, "--session", sid, TOO_BIG)
        assert big.returncode != 0
        said = _one_line(big.stderr)
        assert ALONE in said and "/compact" not in said, said
        hi = _exec(run_mind, model, tmp_path, "--session", sid, "hi")
    assert hi.returncode == 0, hi.stderr
