"""A command a crash left running is waited for, never reconciled while it
runs (docs/design/effects.md §4): a real supervisor whose effect directory
was removed while it runs is still judged running by the journaled
``effect_running`` (pid + start identity). Where a person can answer, a
``running`` question offers ``kill``; killing stops the whole tree (``setsid``
children too) and the model is told it was killed at the person's request.
Headless only waits. A real hosted session, its journal and real processes."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from pathlib import Path

import anyio
import pytest

import mind
from mind.conversation import ToolCall
from mind.effects.identity import interaction_id
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell import procs, supervision
from mind.shell.effects import SessionEffects
from mind.shell.interactions import Answered
from mind.shell.journal import read_records
from mind.shell.session import Session
from mind.shell.tool_calls import ToolCalls
from mind.shell.turn_handle import Turn
from tests.support import records as rec
from tests.support.process_trees import in_command_line, wait_until

TURN = "turn_running"


@pytest.fixture
def marker() -> object:
    mark = f"300.{uuid.uuid4().int % 10**9:09d}"
    yield mark
    for pid in in_command_line(mark):  # never leave a test's tree behind
        os.kill(pid, signal.SIGKILL)


async def _orphan(
    session: Session, call: ToolCall, marker: str, *, remove: bool = True
) -> tuple[str, supervision.Handle]:
    """``call`` prepared and running under a real supervisor, as a crashed
    mind leaves it, then (``remove``) its effect directory removed: (effect
    id, the supervisor's handle — this test process stands in for the
    crashed mind)."""
    journal = session.journal
    journal.append(rec.turn_started(TURN))
    recorded = jr.RecordedToolCall(call_id=call.call_id, name=call.name, arguments=call.arguments)
    journal.append(rec.model_round(TURN, "", [recorded]))
    effects_dir = session.tools.effects_dir
    assert effects_dir is not None
    effects = SessionEffects(session.session_id, journal, effects_dir)
    inv = effects.propose(TURN, call)
    effects.prepare(inv)
    directory = effects_dir / inv.effect_id
    handle = await supervision.start(
        directory,
        ["bash", "-c", f"bash -c 'sleep {marker} & setsid sleep {marker} & sleep {marker}'"],
        cwd=session.cwd,
        env=None,
        timeout_s=600,
        max_output_bytes=4096,
    )
    effects.running(inv, handle.pid, handle.start_identity)
    await anyio.to_thread.run_sync(
        wait_until, lambda: len(in_command_line(marker)) >= 3, "the tree never grew"
    )
    if remove:
        shutil.rmtree(directory)  # gone (or unreadable): only the journal names it now
    return inv.effect_id, handle


async def _reaped(handle: supervision.Handle) -> None:
    """The stand-in mind reaps its supervisor child (ended by now)."""
    with contextlib.suppress(Exception):  # its directory is gone: no record to read
        await supervision.wait(handle)


def _config(tmp_path: Path) -> mind.Config:
    script = tmp_path / "s.yaml"
    script.write_text("- text: unused\n", encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})


def _call(marker: str) -> ToolCall:
    return ToolCall(call_id="c1", name="shell", arguments=f'{{"command": "sleep {marker}"}}')


def _records(tmp_path: Path, session_id: str) -> list[jr.JournalRecord]:
    path = tmp_path / "state" / "sessions" / session_id / "journal.jsonl"
    return read_records(path)[0]


def test_a_running_command_is_offered_kill_never_rerun_and_kill_stops_its_tree(
    tmp_path: Path, marker: str
) -> None:
    call = _call(marker)

    async def main() -> tuple[str, str, list[ev.Event], bool, Answered | object]:
        events: list[ev.Event] = []
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(
                cwd=tmp_path, config=_config(tmp_path), interactive=True
            )
            effect, handle = await _orphan(session, call, marker)
            pid, identity = handle.pid, handle.start_identity
            turn = Turn(session, TURN, [])
            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ToolCalls(session).run, turn, rec.tools_machine(), call)
                    async for event in turn:
                        events.append(event)
                        if isinstance(event, ev.ApprovalRequestedEvent):
                            alive = procs.same_process(pid, identity)
                            assert event.kind == ev.Kind.running, (
                                f"a {event.kind} card while it ran"
                            )
                            assert isinstance(event.interaction_id, str)
                            answered = session.answer(event.interaction_id, "kill")
                        if isinstance(event, ev.ToolResultEvent):
                            break
            await _reaped(handle)
            return session.session_id, effect, events, alive, answered

    sid, effect, events, alive, answered = anyio.run(main)
    cards = [e for e in events if isinstance(e, ev.ApprovalRequestedEvent)]
    # One card, while it ran: the kill question, never "outcome unknown".
    assert len(cards) == 1 and alive
    (card,) = cards
    assert card.kind == ev.Kind.running and card.choices == [ev.Choice.kill]
    assert card.interaction_id == interaction_id(effect, "still_running")
    assert "still running" in card.reason and "started at" in card.reason
    assert answered == Answered(card.interaction_id, jr.InteractionDecision.kill)
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")
    records = _records(tmp_path, sid)
    (resolved,) = [r for r in records if isinstance(r, jr.InteractionResolved)]
    assert (resolved.decision, resolved.by) == (
        jr.InteractionDecision.kill,
        jr.InteractionBy.person,
    )
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    # One truthful account: killed on the person's word, the whole tree; its
    # directory was gone, so no exit record and its output is unknown — never
    # also "marked failed by the user" (they said kill) or "mind stopped".
    assert result.output.startswith("[killed at the user's request")
    assert "every process it started" in result.output
    assert "effect directory was gone" in result.output
    assert "exit status and output are unknown" in result.output
    assert "marked failed" not in result.output and "mind stopped" not in result.output
    assert result.output.count("[") == 1
    assert result.effect_outcome == jr.EffectOutcome.failed
    (reconciled,) = [r for r in records if isinstance(r, jr.EffectReconciled)]
    assert reconciled.resolution.value == "killed"  # what the person answered
    # Never run again: one start, no re-run resolution.
    assert len([r for r in records if isinstance(r, jr.ToolStarted)]) == 1
    assert not any(
        isinstance(r, jr.EffectReconciled) and r.resolution == jr.EffectResolution.rerun
        for r in records
    )


def test_headless_waits_for_a_running_command_whose_directory_is_gone(
    tmp_path: Path, marker: str
) -> None:
    """Nobody can answer: no question, no kill of its own; the result comes
    only once its supervisor has ended (here: the library's kill_effect)."""
    call = _call(marker)

    async def main() -> tuple[str, bool, bool]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(
                cwd=tmp_path, config=_config(tmp_path), interactive=False
            )
            effect, handle = await _orphan(session, call, marker)
            pid, identity = handle.pid, handle.start_identity
            turn = Turn(session, TURN, [])
            with anyio.fail_after(15):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(ToolCalls(session).run, turn, rec.tools_machine(), call)
                    async for event in turn:
                        assert not isinstance(event, ev.ApprovalRequestedEvent)
                        if isinstance(event, ev.ToolCallEvent):
                            listed = [e.effect_id for e in session.running_effects()] == [effect]
                            killed = session.kill_effect(effect)
                        if isinstance(event, ev.ToolResultEvent):
                            assert not procs.same_process(pid, identity), "told while it ran"
                            break
            await _reaped(handle)
            return session.session_id, listed, killed

    sid, listed, killed = anyio.run(main)
    assert listed and killed
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")
    records = _records(tmp_path, sid)
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert result.effect_outcome == jr.EffectOutcome.unknown
    assert len([r for r in records if isinstance(r, jr.ToolStarted)]) == 1


def test_a_running_question_whose_command_ended_unasked_is_withdrawn_at_open(
    tmp_path: Path,
) -> None:
    """The card was shown, mind died, the command ended and its result was
    collected: at the next open the question is resolved ``cancelled`` by
    ``recovery`` — once (a second open writes nothing), so every question is
    resolved exactly once and none waits on an ended command."""
    call = _call("1")
    config = _config(tmp_path)

    async def crashed() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            journal = session.journal
            journal.append(rec.turn_started(TURN))
            recorded = jr.RecordedToolCall(
                call_id=call.call_id, name=call.name, arguments=call.arguments
            )
            journal.append(rec.model_round(TURN, "", [recorded]))
            effects = SessionEffects(session.session_id, journal)
            inv = effects.propose(TURN, call)
            effects.prepare(inv)
            iid = interaction_id(inv.effect_id, "still_running")
            journal.append(
                jr.InteractionRequested(
                    seq=0,
                    recorded_at_ms=0,
                    interaction_id=iid,
                    turn_id=TURN,
                    call_id=call.call_id,
                    effect_id=inv.effect_id,
                    kind=jr.InteractionKind.running,
                    purpose=jr.Purpose.still_running,
                    name="shell",
                    reason="still running",
                    text="sleep 1",
                    text_format=jr.TextFormat.command,
                    head_chars=7,
                    tail_chars=0,
                    hidden_chars=0,
                    hidden_lines=0,
                    cwd=str(tmp_path),
                    choices=[jr.InteractionDecision.kill],
                ),
                sync=True,
            )
            effects.commit(inv, "ok", "done", "supervisor")  # collected at an open
            return session.session_id, iid

    sid, iid = anyio.run(crashed)

    async def reopen() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.open_session(sid, config=config, interactive=True)
            if session.resumed_turn is not None:  # its round is answered: it goes on
                with anyio.fail_after(10):
                    await session.resumed_turn.wait()

    for _ in range(2):
        anyio.run(reopen)
    resolved = [r for r in _records(tmp_path, sid) if isinstance(r, jr.InteractionResolved)]
    assert [(r.interaction_id, r.decision, r.by) for r in resolved] == [
        (iid, jr.InteractionDecision.cancelled, jr.InteractionBy.recovery)
    ]


def test_right_after_open_the_running_question_is_pending_and_kill_is_taken(
    tmp_path: Path, marker: str
) -> None:
    """The library's view (docs/design/interactions.md §7): a command a crash
    left running in the resumed turn is known from the journal, so its
    ``running`` question is listed by ``pending_interactions()`` as soon as
    the session is open — kind ``running``, choices ``[kill]`` only — and
    answering ``kill`` before the turn is iterated is taken and applied."""
    call = _call(marker)
    config = _config(tmp_path)

    async def main() -> tuple[str, str, list[jr.InteractionRequested], object, list[ev.Event]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            effect, handle = await _orphan(session, call, marker, remove=False)
            sid = session.session_id
        # mind "crashed" (its runtime is gone); the command still runs.
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.open_session(sid, config=config, interactive=True)
            pending = session.pending_interactions()
            answered = session.answer(interaction_id(effect, "still_running"), "kill")
            assert session.resumed_turn is not None
            if not isinstance(answered, Answered):
                session.kill_effect(effect)  # not taken: end it so the turn ends
            with anyio.fail_after(15):
                events = [e async for e in session.resumed_turn]
        await _reaped(handle)
        return sid, effect, pending, answered, events

    sid, effect, pending, answered, events = anyio.run(main)
    iid = interaction_id(effect, "still_running")
    assert [(p.interaction_id, p.kind, p.choices) for p in pending] == [
        (iid, jr.InteractionKind.running, [jr.InteractionDecision.kill])
    ]
    assert answered == Answered(iid, jr.InteractionDecision.kill)
    wait_until(lambda: not in_command_line(marker), f"descendants left: {in_command_line(marker)}")
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert "killed at the user's request" in result.output
    requested = [r for r in _records(tmp_path, sid) if isinstance(r, jr.InteractionRequested)]
    assert [r.interaction_id for r in requested] == [iid]  # journaled once
