"""A turn whose start cannot be made durable fails ``storage`` from its very
start — no model request, nothing acknowledged, reported ``aborted``: with no
durable record of the turn, that is all the next open can conclude — and its
input replays once the journal can be written again.

The write failure is real: a child process running the library lowers its
own ``RLIMIT_FSIZE`` to just above the journal's size (a 64 KiB prompt made
it the largest file the process writes), so the turn's first append gets
EFBIG from the kernel, as from a full disk or a quota; then it raises the
limit again and reopens the session. No root, no tmpfs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from mind.generated import journal as jr
from mind.shell.journal import Journal

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, resource, signal, sys
from pathlib import Path
import anyio, mind
from mind.generated.inbox import InboxEntry, InboxKind
from mind.shell.inbox import Inbox

state, cwd, script = map(Path, sys.argv[1:4])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write(), not death
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
config = mind.resolve_config(provider="scripted", script=str(script), env={})

async def first():
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.create_session(cwd=cwd, config=config)
        outcome = await session.run("p" * 65536)  # the journal is now well over 64 KiB
        return session.session_id, session.journal.path, outcome.status

async def second(sid, journal):
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.open_session(sid, config=config)
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(journal) + 64, hard))
        try:
            failed = await session.resume_pending().wait()
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        again = await rt.open_session(sid, config=config)  # broken: reopened afresh
        done = await again.resume_pending().wait()
        failure = failed.event.failure
        return failed.status, failure and str(failure.kind), failed.error.errno_name, done.status

sid, journal, status = anyio.run(first)
# Input accepted but not yet in a turn when the process stopped (it replays).
Inbox.open(journal.parent / "inbox.json", acknowledged=()).add(
    InboxEntry(message_id="msg-w", text="waiting", kind=InboxKind.prompt,
               accepted_at_ms=1, recovered=False))
failed, kind, errno_name, done = anyio.run(second, sid, journal)
print(json.dumps({"statuses": [status, failed, done], "kind": kind, "errno": errno_name,
                  "journal": str(journal)}))
"""


def test_a_turn_whose_start_cannot_be_written_fails_storage_and_its_input_replays(
    tmp_path: Path,
) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "ok"}, {"text": "done"}]), encoding="utf-8")
    argv = [sys.executable, "-c", CHILD, str(tmp_path / "state"), str(tmp_path), str(script)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["statuses"] == ["completed", "aborted", "completed"]
    assert (result["kind"], result["errno"]) == ("storage", "EFBIG")
    with Journal.open(Path(result["journal"])) as journal:  # valid: a torn tail is repaired
        records = list(journal.records)
    # The failed start sent no model request: only the first and the last turn answered.
    assert [r.text for r in records if isinstance(r, jr.ModelRound)] == ["ok", "done"]
    ends = [(r.status, r.acknowledged) for r in records if isinstance(r, jr.TurnCompleted)]
    assert ends[-1] == ("completed", ["msg-w"])
    assert sum(a.count("msg-w") for _s, a in ends) == 1  # consumed exactly once
