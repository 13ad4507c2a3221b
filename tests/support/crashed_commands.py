"""A stand-in for a mind that dies while commands of an earlier turn run:
run as ``python -m tests.support.crashed_commands JOURNAL EFFECTS_DIR COUNT
MARKER COMMAND``, it journals a session whose turn ``turn_1`` prepared
``COUNT`` shell calls, starts each under a real supervisor (``COMMAND``,
environment :func:`tests.support.process_trees.marker_env` of ``MARKER``)
with its ``effect_running`` fsynced, then starts ``turn_2`` (so ``turn_1``
is never resumed) and waits to be killed (:func:`started_then_killed`).
The real effect and supervision code writes every record and process."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

from mind._version import __version__
from mind.conversation import ToolCall
from mind.generated import journal as jr
from mind.shell import supervision
from mind.shell.effects import SessionEffects
from mind.shell.journal import Journal
from tests.support import records as rec
from tests.support.kill_when import first_record, kill_when
from tests.support.process_trees import marker_env

SID = "sess"
EARLIER = "turn_1"
LATER = "turn_2"


def calls(count: int) -> list[ToolCall]:
    """The ``count`` shell calls of ``turn_1`` (ids ``c0``, ``c1``, ...)."""
    return [
        ToolCall(call_id=f"c{n}", name="shell", arguments=f'{{"command": "job {n}"}}')
        for n in range(count)
    ]


async def _crash_with(
    journal_path: Path, effects_dir: Path, count: int, marker: str, command: str
) -> None:
    with Journal.open(journal_path, create=True, session_id=SID) as journal:
        journal.append(
            jr.SessionStarted(
                seq=0,
                recorded_at_ms=0,
                session_id=SID,
                cwd=str(effects_dir.parent),
                mind_version=__version__,
            ),
            sync=True,
        )
        journal.append(rec.turn_started(EARLIER))
        recorded = [
            jr.RecordedToolCall(call_id=c.call_id, name=c.name, arguments=c.arguments)
            for c in calls(count)
        ]
        journal.append(rec.model_round(EARLIER, "", recorded))
        effects = SessionEffects(SID, journal, effects_dir)
        for call in calls(count):
            inv = effects.propose(EARLIER, call)
            effects.prepare(inv)
            handle = await supervision.start(
                effects_dir / inv.effect_id,
                ["/bin/sh", "-c", command],
                cwd=effects_dir.parent,
                env=marker_env(marker),
                timeout_s=600,
                max_output_bytes=4000,
            )
            effects.running(inv, handle.pid, handle.start_identity, handle.proof_sha256)
        journal.append(rec.turn_started(LATER), sync=True)
        await anyio.sleep_forever()  # until the test's SIGKILL


def started_then_killed(
    journal_path: Path, effects_dir: Path, count: int, marker: str, command: str, *, cwd: Path
) -> None:
    """Run this module as a child and SIGKILL it once ``turn_2`` is
    journaled (every command then runs under its supervisor, which outlives
    the child)."""
    kill_when(
        [
            sys.executable,
            "-m",
            __name__,
            str(journal_path),
            str(effects_dir),
            str(count),
            marker,
            command,
        ],
        cwd=cwd,
        env={"PATH": marker_env(marker)["PATH"], "PYTHONPATH": str(cwd)},
        found=lambda: first_record(
            journal_path, lambda r: isinstance(r, jr.TurnStarted) and r.turn_id == LATER
        ),
        timeout_s=30,
        what=f"{count} commands ran and {LATER} was journaled",
    )


if __name__ == "__main__":
    journal_arg, effects_arg, count_arg, marker_arg, command_arg = sys.argv[1:]
    anyio.run(
        _crash_with, Path(journal_arg), Path(effects_arg), int(count_arg), marker_arg, command_arg
    )
