"""The REPL shows a turn resumed at open (docs/design/recovery.md §8): a real
``mind exec`` killed inside a tool round by ``MIND_CRASH_AT``, then ``mind
resume`` in a pseudo-terminal: the turn goes on, its call runs and the
answer is printed, without a prompt being typed."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_repl import REPO, Spawn, exit_cleanly, spawn, words
from tests.support.exec_world import exec_killed_at

__all__ = ["spawn"]  # the fixture, re-used from test_repl

SCRIPT: list[dict[str, object]] = [
    {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
    {"text": "Resumed answer."},
]


def test_mind_resume_shows_the_resumed_turn_to_its_end(spawn: Spawn, tmp_path: Path) -> None:
    exec_killed_at(tmp_path, SCRIPT, "effect_prepared:1", "look around", cwd=REPO)

    child = spawn(SCRIPT, "resume")
    child.expect(words("that turn goes on"))
    child.expect("look around")  # its input, echoed first as the turn's question
    child.expect(words("resuming the turn mind stopped in: 1 tool call(s) to run"))
    child.expect("list_dir")
    child.expect("Resumed answer.")
    child.expect(words("── completed"))
    exit_cleanly(child)
