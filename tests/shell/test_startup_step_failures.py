"""A session open that fails after its journal was opened (``session_startup.yaml``:
``<step> --step_failed--> closing_journal``) refuses with the step's error and
gives back, in reverse, everything it took — the journal closed, the lease and
the mount claim released — so the next open succeeds with nothing accepted lost.

The failures are real: a cancellation landing between two steps, a journal
append refused by the kernel (``RLIMIT_FSIZE`` in a child process, as a full
disk or a quota: EFBIG), and a config root the sandbox refuses to trust.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.errors import PrivateStateError
from mind.generated import journal as jr
from mind.generated.inbox import InboxEntry, InboxKind
from mind.machines import chart_observers
from mind.shell.inbox import Inbox
from mind.shell.journal import Journal
from mind.shell.lease import read_holder
from mind.shell.mounts import MountLedger
from mind.shell.recovery import CRASHED_OUTPUT
from tests.support import records as rec
from tests.support.sessions import append_records, created_session

ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "hi"}]), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), env={})


def _open_fds_to(path: Path) -> list[str]:
    """This process's descriptors that point at ``path``."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                found.append(fd)
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return found


def _crashed_session(
    tmp_path: Path, config: mind.ResolvedConfig, *, with_call: bool, prompt: str = "m1"
) -> tuple[Path, str]:
    """A session whose process died in a turn: ``turn_started`` and its input
    ``m1`` journaled (still in the inbox), and, ``with_call``, a model round
    with a shell call that started and has no result (never re-run: the turn
    is closed, not resumed). Returns (state root, session id)."""
    state = tmp_path / "state"

    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    Inbox.open(directory / "inbox.json", acknowledged=()).add(
        InboxEntry(
            message_id="m1", text="m1", kind=InboxKind.prompt, accepted_at_ms=1, recovered=False
        )
    )
    records: list[jr.JournalRecord] = [
        rec.turn_started("t1"),
        rec.user_message("t1", "m1", prompt, jr.Kind.prompt),
    ]
    if with_call:
        records.append(rec.model_round("t1", "", [rec.call("c1")]))
        records.append(
            jr.ToolStarted(seq=0, recorded_at_ms=0, turn_id="t1", call_id="c1", name="shell")
        )
    with Journal.open(directory / "journal.jsonl", session_id=sid) as journal:
        for record in records:
            journal.append(record, sync=True)
    return state, sid


def _given_back(state: Path, sid: str, rt: mind.Runtime) -> dict[str, Any]:
    """What a failed open must have given back, as facts a test asserts."""
    directory = state / "sessions" / sid
    return {
        "journal_fds": _open_fds_to((directory / "journal.jsonl").resolve()),
        "lease_holder": read_holder(directory / "lease") is not None,
        "mount_holders": len(MountLedger(state).holders(sid)),
        "hosted": sorted(rt.mounts.hosted()),
        "sessions": sorted(rt.sessions),
    }


NOTHING_TAKEN = {
    "journal_fds": [],
    "lease_holder": False,
    "mount_holders": 0,
    "hosted": [],
    "sessions": [],
}


class _CancelOnEntering:
    """Cancels ``scope`` when a startup chart enters ``state``: a cancellation
    (the caller gave up, the runtime is closing) that arrives while the step
    before it ran in its worker thread lands at the next step."""

    def __init__(self, state: str, scope: anyio.CancelScope) -> None:
        self.state = state
        self.scope = scope

    def factory(self, chart: object) -> object | None:
        return self if type(chart).__name__ == "SessionStartupChart" else None

    def after_transition(self, target: Any) -> None:
        if target.id == self.state:
            self.scope.cancel()


@pytest.mark.parametrize("state", ["repairing_processes", "repairing_interactions"])
def test_a_cancellation_at_a_repair_step_gives_back_the_journal_lease_and_mount(
    tmp_path: Path, state: str
) -> None:
    config = _config(tmp_path)
    root, sid = _crashed_session(tmp_path, config, with_call=False)

    async def main() -> tuple[bool, dict[str, Any], list[str], list[str]]:
        async with mind.Runtime.open(state_root=root) as rt:
            with anyio.CancelScope() as scope:
                canceller = _CancelOnEntering(state, scope)
                chart_observers.install(canceller.factory)
                try:
                    await rt.open_session(sid, config=config)
                finally:
                    chart_observers.uninstall(canceller.factory)
            given_back = _given_back(root, sid, rt)
            session = await rt.open_session(sid, config=config)  # the next open succeeds
            ends = [r.status for r in session.journal.records if isinstance(r, jr.TurnCompleted)]
            waiting = [e.message_id for e in session.inbox.entries]
            return scope.cancelled_caught, given_back, ends, waiting

    cancelled, given_back, ends, waiting = anyio.run(main)
    assert cancelled
    assert given_back == NOTHING_TAKEN
    assert ends == [jr.TurnStatus.aborted]  # closed once, by the open that succeeded
    assert waiting == ["m1"]  # the accepted input replays


CHILD = r"""
import json, os, resource, signal, sys
from pathlib import Path
import anyio, mind
from mind.errors import MindError
from mind.generated import journal as jr
sys.path.insert(0, sys.argv[4])
from test_startup_step_failures import _given_back

state, sid, script = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
journal = state / "sessions" / sid / "journal.jsonl"
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG from write(), not death
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
config = mind.resolve_config(provider="scripted", script=script, env={})

async def main():
    async with mind.Runtime.open(state_root=state) as rt:
        # No byte may be appended to the journal (the largest file written here).
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(journal), hard))
        try:
            await rt.open_session(sid, config=config)
        except MindError as exc:
            error = exc
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        given_back = _given_back(state, sid, rt)
        session = await rt.open_session(sid, config=config)  # space is back
        return {
            "error": type(error).__name__, "message": str(error), "path": str(error.path),
            "errno": error.errno, "given_back": given_back,
            "results": [r.output for r in session.journal.records if isinstance(r, jr.ToolResult)],
            "ends": [r.status.value for r in session.journal.records
                     if isinstance(r, jr.TurnCompleted)],
            "waiting": [e.message_id for e in session.inbox.entries],
        }

print(json.dumps(anyio.run(main)))
"""


@pytest.mark.parametrize("with_call", [True, False], ids=["closing_orphan_calls", "closing_turns"])
def test_a_recovery_write_refused_at_open_gives_everything_back(
    tmp_path: Path, with_call: bool
) -> None:
    """The crash left an unanswered call (its synthetic result is the first
    write) or only an unterminated turn (its terminal record is): the write
    fails EFBIG, the open refuses with ``JournalWriteError`` naming the
    journal, and gives back what it took; once writes succeed, the same
    runtime opens it, closes the call and the turn once, and the input replays."""
    config = _config(tmp_path)
    # A 64 KiB prompt makes the journal the largest file the child writes.
    state, sid = _crashed_session(tmp_path, config, with_call=with_call, prompt="p" * 65536)
    journal = state / "sessions" / sid / "journal.jsonl"
    argv = [
        sys.executable,
        "-c",
        CHILD,
        str(state),
        sid,
        str(tmp_path / "script.yaml"),
        str(Path(__file__).parent),
    ]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert (result["error"], result["errno"]) == ("JournalWriteError", 27)  # EFBIG
    assert result["path"] == str(journal) and str(journal) in result["message"]
    assert result["given_back"] == NOTHING_TAKEN
    assert result["results"] == ([CRASHED_OUTPUT] if with_call else [])
    assert result["ends"] == ["aborted"]
    assert result["waiting"] == ["m1"]


def test_a_config_root_others_may_write_refuses_hosting_and_gives_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last step (hosting) builds the session's sandbox, which refuses a
    mind config root that other users may write (``PrivateStateError``
    naming it); the open gives back the journal, lease and mount claim, and
    succeeds once the mode is fixed."""
    config = _config(tmp_path)
    state, sid = _crashed_session(tmp_path, config, with_call=False)
    home = tmp_path / "mind-home"
    home.mkdir()
    home.chmod(0o777)
    monkeypatch.setenv("MIND_HOME", str(home))

    async def main() -> tuple[PrivateStateError, dict[str, Any], list[str], list[str]]:
        async with mind.Runtime.open(state_root=state) as rt:
            with pytest.raises(PrivateStateError) as refused:
                await rt.open_session(sid, config=config)
            given_back = _given_back(state, sid, rt)
            home.chmod(0o700)
            session = await rt.open_session(sid, config=config)
            ends = [r.status for r in session.journal.records if isinstance(r, jr.TurnCompleted)]
            return refused.value, given_back, ends, [e.message_id for e in session.inbox.entries]

    refused, given_back, ends, waiting = anyio.run(main)
    assert refused.path == home and str(home) in str(refused)
    assert given_back == NOTHING_TAKEN
    # The turn was closed by the failed open (its record is durable before hosting), once.
    assert ends == [jr.TurnStatus.aborted]
    assert waiting == ["m1"]


def test_a_turn_whose_records_precede_its_start_is_closed_aborted_acknowledging_nothing(
    tmp_path: Path,
) -> None:
    """A damaged or foreign journal: a model round of turn ``t1`` comes before
    ``t1``'s ``turn_started`` (the journal's checks are framing, schema and
    ``seq`` order, not a turn's order). Replaying it, the turn chart refuses
    ``stream_opened`` while the turn is still accepted, so recovery fails safe
    (``accepted --abort--> aborted``): the turn is closed ``aborted``,
    acknowledging nothing, and its input replays."""
    config = _config(tmp_path)
    state = tmp_path / "state"

    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    Inbox.open(directory / "inbox.json", acknowledged=()).add(
        InboxEntry(
            message_id="m1", text="m1", kind=InboxKind.prompt, accepted_at_ms=1, recovered=False
        )
    )
    append_records(
        directory,
        sid,
        [
            rec.model_round("t1", "an answer before its turn started"),
            rec.turn_started("t1"),
            rec.user_message("t1", "m1", "m1", jr.Kind.prompt),
        ],
    )

    async def reopen() -> tuple[list[tuple[jr.TurnStatus, list[str]]], list[str]]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session(sid, config=config)
            ends = [
                (r.status, r.acknowledged)
                for r in session.journal.records
                if isinstance(r, jr.TurnCompleted)
            ]
            return ends, [e.message_id for e in session.inbox.entries]

    ends, waiting = anyio.run(reopen)
    assert ends == [(jr.TurnStatus.aborted, [])]
    assert waiting == ["m1"]
