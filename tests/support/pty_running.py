"""The steps of the REPL tests of a command ``kill -9`` of mind left running,
in a real pseudo-terminal (docs/design/effects.md §4): start the REPL
(``spawn`` of ``tests/e2e/test_repl.py``, approval ``never``) whose model
runs one shell command, kill it with SIGKILL once that command runs under
its supervisor (:func:`killed_while_running`), and resume the session to
the running card (:func:`resumed_at_the_running_card`)."""

from __future__ import annotations

from pathlib import Path

import pexpect

from tests.e2e.test_repl import ENTER, Spawn, session_id_of, words
from tests.e2e.test_repl_approval_restarts import _kill_9, _of, _shell
from tests.e2e.test_repl_steering import journal
from tests.support.process_trees import in_command_line, wait_until

Script = list[dict[str, object]]
"""The fake model's replies: the shell call, then its closing text."""


def killed_while_running(
    spawn: Spawn, tmp_path: Path, command: str, *, marker: str = "", tree: int = 0
) -> tuple[Script, str]:
    """Start the REPL whose model calls ``shell`` with ``command`` (then says
    "It was stopped."), send a prompt, wait until ``effect_running`` is
    durable — and, with ``tree``, until that many processes carry
    ``marker`` in their command line — then SIGKILL it.

    Returns:
        ``(the model's script, the session id)``, for the resume.
    """
    script: Script = [_shell(command), {"text": "It was stopped."}]
    child = spawn(script, "--approval", "never")
    sid = session_id_of(child)
    child.send("run it" + ENTER)
    wait_until(
        lambda: _of(journal(tmp_path, sid), "effect_running"), "effect_running never durable"
    )
    if tree:
        wait_until(lambda: len(in_command_line(marker)) >= tree, "the tree never grew")
    _kill_9(child)
    return script, sid


def resumed(spawn: Spawn, script: Script, sid: str) -> pexpect.spawn:
    """``mind resume`` of session ``sid`` (approval ``never``) with ``script``."""
    return spawn(script, "--approval", "never", "resume", sid)


def resumed_at_the_running_card(spawn: Spawn, script: Script, sid: str) -> pexpect.spawn:
    """:func:`resumed`, until the running card and its ``k`` are on screen."""
    child = resumed(spawn, script, sid)
    child.expect(words("Waiting for shell, already running:"))
    child.expect(words("k kill it"))
    return child
