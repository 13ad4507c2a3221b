"""Secret markers in the REPL: its banner and a failed turn's detail, in a real
pseudo-terminal, never show the API key or the base URL's secrets
(docs/design/secrets.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect

from tests.e2e.test_exec_secret_markers import KEY, MARKERS, PASSWORD, QUERY
from tests.e2e.test_repl import ENTER, REPO, words
from tests.support.child_env import without_prefixes
from tests.support.echo_server import EchoServer


def test_repl_banner_and_failure_show_no_marker(tmp_path: Path) -> None:
    with EchoServer("openai-chat") as server:
        base_url = f"http://u:{PASSWORD}@127.0.0.1:{server.port}/v1?token={QUERY}"
        env = without_prefixes("MIND_", "OPENAI_")
        env.update(
            MIND_HOME=str(tmp_path / "home"),
            MIND_STATE_HOME=str(tmp_path / "state"),
            MIND_MAX_RETRIES="0",
            OPENAI_API_KEY=KEY,
            PYTHONPATH=str(REPO),
            TERM="xterm-256color",
            PROMPT_TOOLKIT_NO_CPR="1",
        )
        child = pexpect.spawn(
            sys.executable,
            [
                *("-m", "mind.shell.cli", "--provider", "openai-chat", "--model", "http-401"),
                *("--base-url", base_url, "--cwd", str(tmp_path)),
            ],
            env=env,
            encoding="utf-8",
            timeout=20,
            dimensions=(40, 160),
        )
        transcript = []
        try:
            child.expect(words("approval"))
            transcript.append(str(child.before))
            child.expect("› ")
            child.send("hi" + ENTER)
            child.expect("refused")  # the detail row echoes the server's words
            transcript.append(str(child.before) + str(child.after))
            child.expect("› ")
            transcript.append(str(child.before))
            child.send("/exit" + ENTER)
            child.expect(pexpect.EOF)
            transcript.append(str(child.before))
        finally:
            child.terminate(force=True)
    screen = "".join(transcript)
    assert "127.0.0.1" in screen  # the banner named the server
    assert [m for m in MARKERS if m in screen] == []
    sent = {k.lower(): v for k, v in server.requests[0]["headers"].items()}
    assert sent["authorization"] == f"Bearer {KEY}"  # the key did go where it belongs
