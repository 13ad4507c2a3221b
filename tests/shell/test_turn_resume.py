"""A crashed turn stopped inside a tool round is resumed at open
(docs/design/recovery.md §8): real journal, inbox, lease and mount ledger in a
temporary state root, the scripted provider, real tools.

Each test writes the crashed session's records by hand (what a process killed
at that point leaves), then opens it in a fresh runtime."""

from __future__ import annotations

from pathlib import Path

import anyio

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import Journal
from mind.shell.recovery import CRASHED_OUTPUT
from tests.support import records as rec
from tests.support.sessions import crashed_turn_session, scripted_config

DEADLINE_S = 20


# The round the crash stopped in is the script's first reply; the turn goes on
# with the second (the scripted provider counts assistant messages).
CALLS = [
    jr.RecordedToolCall(call_id="c1", name="read_file", arguments='{"path": "notes.txt"}'),
    jr.RecordedToolCall(call_id="c2", name="list_dir", arguments='{"path": "."}'),
]
SCRIPT = [
    {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
    {"text": "the notes say hello"},
]


def _crashed_session(
    tmp_path: Path, config: mind.ResolvedConfig, after_round: list[jr.JournalRecord]
) -> tuple[Path, str]:
    """A session whose turn t1 (input m1) journaled a tool round with
    :data:`CALLS`, then ``after_round``; input m2 was accepted later (waits)."""
    return crashed_turn_session(tmp_path, config, CALLS, after_round)


async def _resume(
    state: Path, sid: str, config: mind.ResolvedConfig
) -> tuple[mind.Session, list[ev.Event], list[jr.JournalRecord]]:
    """Open the session, iterate the resumed turn to its end; its events and the journal."""
    async with mind.Runtime.open(state_root=state) as rt:
        session = await rt.open_session(sid, config=config)
        assert session.busy and session.resumed_turn is not None
        events: list[ev.Event] = []
        with anyio.fail_after(DEADLINE_S):
            async for event in session.resumed_turn:
                events.append(event)
        return session, events, list(session.journal.records)


def _results(records: list[jr.JournalRecord]) -> list[tuple[str, str, bool]]:
    return [
        (r.call_id, r.status.value, r.synthetic) for r in records if isinstance(r, jr.ToolResult)
    ]


def test_a_turn_stopped_before_its_calls_ran_resumes_and_answers(tmp_path: Path) -> None:
    config = scripted_config(tmp_path, SCRIPT)
    state, sid = _crashed_session(tmp_path, config, [])
    session, events, records = anyio.run(_resume, state, sid, config)

    assert session.recovery is not None
    assert (session.recovery.resumed_turns, session.recovery.aborted_turns) == (1, 0)
    assert session.recovery.synthetic_results == 0
    assert session.recovery.replayed_inputs == 1  # m2: the next turn's, not the resumed one's
    assert events[0] == ev.TurnResumedEvent(turn_id="t1", call_ids=["c1", "c2"])
    assert events[1] == ev.InputClaimedEvent(
        turn_id="t1", message_ids=["m1"], at=ev.ClaimPoint.start
    )
    # Each call ran once, for real, in call order; then the next round answered.
    assert _results(records) == [("c1", "ok", False), ("c2", "ok", False)]
    (read,) = [r for r in records if isinstance(r, jr.ToolResult) and r.call_id == "c1"]
    assert "hello" in read.output
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted) and r.turn_id == "t1"]
    assert (done.status, done.acknowledged) == (jr.TurnStatus.completed, ["m1"])
    rounds = [r for r in records if isinstance(r, jr.ModelRound) and r.turn_id == "t1"]
    assert [(r.round, r.text) for r in rounds] == [(0, ""), (1, "the notes say hello")]
    assert isinstance(events[-1], ev.TurnCompletedEvent)
    assert events[-1].status == ev.TurnStatus.completed
    # One turn_started for t1: the resumed turn is the same turn, not a new one.
    assert sum(isinstance(r, jr.TurnStarted) and r.turn_id == "t1" for r in records) == 1


def test_an_answered_call_is_skipped_and_a_started_read_only_call_runs_again(
    tmp_path: Path,
) -> None:
    config = scripted_config(tmp_path, SCRIPT)
    answered = rec.tool_result("t1", "c1", "read_file", "hello (before the crash)")
    state, sid = _crashed_session(
        tmp_path, config, [answered, rec.tool_started("t1", "c2", "list_dir")]
    )
    _session, events, records = anyio.run(_resume, state, sid, config)

    assert events[0] == ev.TurnResumedEvent(turn_id="t1", call_ids=["c2"])
    assert [e.call_id for e in events if isinstance(e, ev.ToolCallEvent)] == ["c2"]
    assert _results(records) == [("c1", "ok", False), ("c2", "ok", False)]


def test_a_started_call_that_changes_things_is_never_rerun_the_rest_goes_on(
    tmp_path: Path,
) -> None:
    config = scripted_config(tmp_path, SCRIPT)
    state, sid = _crashed_session(tmp_path, config, [])
    # Rewrite the round: a shell call that started (it may have run), then a read.
    directory = state / "sessions" / sid
    shell = jr.RecordedToolCall(
        call_id="s1", name="shell", arguments='{"command": "echo ran >> effects.log"}'
    )
    journal_path = directory / "journal.jsonl"
    journal_path.unlink()
    with Journal.open(journal_path, create=True, session_id=sid) as journal:
        for record in (
            jr.SessionStarted(
                seq=0, recorded_at_ms=0, session_id=sid, cwd=str(tmp_path), mind_version="t"
            ),
            rec.turn_started("t1"),
            rec.user_message("t1", "m1", "m1", jr.Kind.prompt),
            rec.model_round("t1", "", [shell, CALLS[0]]),
            rec.tool_started("t1", "s1", "shell"),
        ):
            journal.append(record, sync=True)
    session, events, records = anyio.run(_resume, state, sid, config)

    assert session.recovery is not None and session.recovery.synthetic_results == 1
    assert events[0] == ev.TurnResumedEvent(turn_id="t1", call_ids=["c1"])
    assert _results(records) == [("s1", "interrupted", True), ("c1", "ok", False)]
    (unknown,) = [r for r in records if isinstance(r, jr.ToolResult) and r.call_id == "s1"]
    assert unknown.output == CRASHED_OUTPUT
    assert not (tmp_path / "effects.log").exists()  # the shell command was not run again
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done.status == jr.TurnStatus.completed


def test_the_session_opens_busy_with_the_resumed_turn_owning_the_mailbox(tmp_path: Path) -> None:
    """mailbox.yaml's ``no_owner --resume_turn--> open``, taken by the real
    session at open: the turn claims its own input (m1), the later one (m2)
    waits and runs as the next turn once the resumed one completed."""
    config = scripted_config(tmp_path, [*SCRIPT, {"text": "m2 answered"}])
    state, sid = _crashed_session(tmp_path, config, [])

    async def main() -> tuple[str, list[str], list[str], list[jr.JournalRecord]]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session(sid, config=config)
            box = session.mailbox.state
            claimed = [m.message_id for m in session.mailbox.claimed()]
            waiting = [m.message_id for m in session.waiting]
            with anyio.fail_after(DEADLINE_S):
                async for _ in session.events():
                    pass
            return box, claimed, waiting, list(session.journal.records)

    box, claimed, waiting, records = anyio.run(main)
    assert (box, claimed, waiting) == ("open", ["m1"], ["m2"])
    ends = [(r.turn_id == "t1", r.acknowledged) for r in records if isinstance(r, jr.TurnCompleted)]
    assert ends == [(True, ["m1"]), (False, ["m2"])]


def test_a_round_limit_lowered_since_the_crash_fails_the_turn_after_its_calls(
    tmp_path: Path,
) -> None:
    """Two rounds ran under the old limit; the session now allows one: the
    round's call still runs once (every call answered), then the turn fails
    on the limit at its next boundary, as a live turn would."""
    config = scripted_config(tmp_path, SCRIPT, env={"MIND_MAX_ROUNDS": "1"})
    first = rec.tool_result("t1", "c1", "read_file", "hello")
    second = rec.tool_result("t1", "c2", "list_dir", "notes.txt")
    again = rec.model_round("t1", "", [CALLS[0]], index=1)
    state, sid = _crashed_session(tmp_path, config, [first, second, again])
    _session, events, records = anyio.run(_resume, state, sid, config)

    assert events[0] == ev.TurnResumedEvent(turn_id="t1", call_ids=["c1"])
    assert _results(records) == [
        ("c1", "ok", False),
        ("c2", "ok", False),
        ("c1", "ok", False),
    ]
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done.status == jr.TurnStatus.failed
    assert isinstance(done.failure, jr.Failure) and done.failure.kind == jr.FailureKind.round_limit


def test_steering_sent_to_the_resumed_turn_reaches_its_next_round(tmp_path: Path) -> None:
    """The resumed turn owns an open mailbox: steering sent as the session
    opens is claimed at the boundary after the re-driven results and
    acknowledged with the turn's own input."""
    config = scripted_config(tmp_path, SCRIPT)
    state, sid = _crashed_session(tmp_path, config, [])

    async def main() -> tuple[str, list[jr.JournalRecord]]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = await rt.open_session(sid, config=config)
            # No await since the open: the resumed turn has not run yet.
            receipt = session.steer("also say bye", message_id="s1")
            assert session.resumed_turn is not None
            with anyio.fail_after(DEADLINE_S):
                await session.resumed_turn.wait()
            return receipt.disposition, list(session.journal.records)

    disposition, records = anyio.run(main)
    assert disposition == "steering"
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted) and r.turn_id == "t1"]
    assert (done.status, done.acknowledged) == (jr.TurnStatus.completed, ["m1", "s1"])
    inputs = [r.message_id for r in records if isinstance(r, jr.UserMessage)]
    last_result = max(i for i, r in enumerate(records) if isinstance(r, jr.ToolResult))
    steer_at = next(
        i for i, r in enumerate(records) if isinstance(r, jr.UserMessage) and r.message_id == "s1"
    )
    assert inputs == ["m1", "s1"] and steer_at > last_result  # never between a call and its result
