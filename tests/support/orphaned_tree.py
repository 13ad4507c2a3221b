"""A real ``mind exec`` killed with ``kill -9`` while its shell command runs,
for the crash tests of what a restart does with the command (docs/design/effects.md §4):
:func:`exec_killed_mid_command` kills it once ``effect_running`` is durable
(:func:`killed_mid_command` with the fake model that asks for it);
:func:`orphaned_tree` does so with a tree of three ``sleep`` processes (one
``setsid``) that outlives mind under its supervisor, and never leaves one
behind; :func:`reopened` is the restart, through the library."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import mind
from mind.generated import journal as jr
from tests.crash.harness import PROCESS_TIMEOUT_S, REPO, Case, new_case
from tests.support.fake_model import FakeModel
from tests.support.kill_when import first_record, kill_when
from tests.support.process_trees import in_command_line, wait_until

PROMPT = "TOOL supervised prompt"
"""The prompt whose one shell call the fake model asks for."""


def first_running(journal: Path) -> jr.EffectRunning | None:
    """The first ``effect_running`` of the journal file at ``journal`` (another
    process writes it), or None yet."""
    found = first_record(journal, lambda r: isinstance(r, jr.EffectRunning))
    return found if isinstance(found, jr.EffectRunning) else None


def exec_killed_mid_command(case: Case) -> jr.EffectRunning:
    """``mind exec`` :data:`PROMPT` in a new session of ``case``; SIGKILL it
    once ``effect_running`` is durable. Returns that record."""
    return kill_when(
        case.exec_argv(PROMPT, new=True),
        cwd=REPO,
        env=case.env(),
        found=lambda: first_running(case.session_dir / "journal.jsonl"),
        timeout_s=PROCESS_TIMEOUT_S,
        what="effect_running was journaled",
    )


@dataclass(frozen=True)
class KilledExec:
    """What :func:`killed_mid_command` left.

    Attributes:
        model: the fake model (still serving).
        case: the crash case (state, session, cwd).
        running: the command's ``effect_running``.
    """

    model: FakeModel
    case: Case
    running: jr.EffectRunning


@contextmanager
def killed_mid_command(tmp_path: Path, command: str) -> Iterator[KilledExec]:
    """A fake model whose shell calls run ``command`` (its template:
    :func:`tests.support.fake_model.decide`), and a new case whose
    ``mind exec`` was killed by :func:`exec_killed_mid_command`; the model
    serves until the block ends."""
    with FakeModel(record_path=tmp_path / "requests.jsonl", command=command) as model:
        case = new_case(tmp_path, model.base_url)
        yield KilledExec(model, case, exec_killed_mid_command(case))


@dataclass(frozen=True)
class OrphanedTree(KilledExec):
    """What :func:`orphaned_tree` left.

    Attributes:
        marker: what every process of the tree carries in its command line.
    """

    marker: str

    def wait_gone(self) -> None:
        """Until no process of the tree is left (the supervisor's SIGTERM,
        grace, SIGKILL), at most 10 s; else ``AssertionError``."""
        wait_until(
            lambda: not in_command_line(self.marker),
            f"descendants left: {in_command_line(self.marker)}",
            10,
        )


@contextmanager
def orphaned_tree(tmp_path: Path) -> Iterator[OrphanedTree]:
    """:func:`killed_mid_command` with a command that starts ``sleep`` and
    ``setsid sleep`` children and waits on a third, the three processes
    running (asserted within 10 s). On exit any of them still running is
    SIGKILLed: a test never leaves its tree behind."""
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"
    command = (
        "echo {call_id} >> {effects}; "
        f"bash -c 'sleep {marker} & setsid sleep {marker} & sleep {marker}'"
    )
    try:
        with killed_mid_command(tmp_path, command) as killed:
            wait_until(
                lambda: len(in_command_line(marker)) >= 3,
                f"the tree never grew: {in_command_line(marker)}",
                10,
            )
            yield OrphanedTree(killed.model, killed.case, killed.running, marker)
    finally:
        for pid in in_command_line(marker):
            os.kill(pid, signal.SIGKILL)


@asynccontextmanager
async def reopened(tree: OrphanedTree, *, interactive: bool = False) -> AsyncIterator[mind.Session]:
    """The restart: a runtime on the case's state opens its session
    (approval ``never``; ``interactive`` whether a person can answer)."""
    config = mind.resolve_config(
        provider="openai-chat", model="fake", base_url=tree.model.base_url, approval="never"
    )
    async with mind.Runtime.open(state_root=tree.case.state) as rt:
        yield await rt.open_session(tree.case.session_id, config=config, interactive=interactive)
