"""Approvals are interactions, through the library runtime (docs/design/interactions.md):
the request is journaled before its event, the resolution before the call
runs; "for this session" is a durable grant honoured after the session is
reopened; deny with a reason the model sees; abort stops the turn; nobody
to answer is ``declined``; answers by interaction id are typed results."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.interactions import Answered, NotTaken
from mind.shell.journal import read_records

D = jr.InteractionDecision


def _script(tmp_path: Path, replies: list[dict[str, Any]]) -> Any:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )


def _shell(command: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}


def _journal(tmp_path: Path, session_id: str) -> list[jr.JournalRecord]:
    path = tmp_path / "state" / "sessions" / session_id / "journal.jsonl"
    records, _report = read_records(path)
    return records


async def _turn(
    session: Any, prompt: str, on_ask: Callable[[Any, ev.ApprovalRequestedEvent], None]
) -> tuple[list[ev.Event], str]:
    turn = session.submit(prompt)
    events: list[ev.Event] = []
    async for event in turn:
        events.append(event)
        if isinstance(event, ev.ApprovalRequestedEvent):
            on_ask(turn, event)
    return events, turn.outcome.status


def test_request_journaled_before_shown_answer_before_run_resolved_event_after(
    tmp_path: Path,
) -> None:
    config = _script(tmp_path, [_shell("touch made"), {"text": "ok"}])
    checks: list[Any] = []

    async def main() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)

            def on_ask(_turn: Any, event: ev.ApprovalRequestedEvent) -> None:
                on_disk = [
                    r
                    for r in _journal(tmp_path, s.session_id)
                    if isinstance(r, jr.InteractionRequested)
                ]
                checks.append([r.interaction_id for r in on_disk] == [event.interaction_id])
                (pending,) = s.pending_interactions()
                checks.append(pending.interaction_id == event.interaction_id)
                checks.append(s.answer(event.interaction_id, "approve_once"))
                checks.append(not (tmp_path / "made").exists())  # not run before it is durable
                checks.append(s.answer(event.interaction_id, "deny"))
                checks.append(s.answer("ia_unknown", "deny"))

            events, status = await _turn(s, "go", on_ask)
            kinds = [type(e).__name__ for e in events]
            assert kinds.index("InteractionRequestedEvent") < kinds.index("ApprovalRequestedEvent")
            checks.append(
                kinds.index("ApprovalRequestedEvent") < kinds.index("InteractionResolvedEvent")
            )
            checks.append(kinds.index("InteractionResolvedEvent") < kinds.index("ToolResultEvent"))
            return status

    assert anyio.run(main) == "completed"
    journaled_first, listed, answered, ran_late, repeat, unknown, ordered, durable_first = checks
    assert journaled_first and listed
    assert isinstance(answered, Answered) and ran_late
    assert isinstance(repeat, NotTaken) and repeat.why == "resolved"
    assert isinstance(unknown, NotTaken) and unknown.why == "unknown"
    assert ordered and durable_first
    assert (tmp_path / "made").exists()


def test_approve_for_this_session_is_a_grant_honoured_after_reopening(tmp_path: Path) -> None:
    config = _script(
        tmp_path,
        [
            _shell("mkdir -p d1"),
            {"text": "one"},
            _shell("mkdir -p d1"),
            _shell("touch x"),
            {"text": "two"},
        ],
    )
    asked: list[str] = []

    def on_ask(turn: Any, event: ev.ApprovalRequestedEvent) -> None:
        asked.append(event.text)
        assert event.choices is not None
        turn.decide(event.call_id, "approve_session" if len(asked) == 1 else "approve_once")

    async def first() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            await _turn(s, "one", on_ask)
            return s.session_id

    session_id = anyio.run(first)

    async def second() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(session_id, config=config, interactive=True)
            (grant,) = s.interactions.grants()
            assert grant.scope.command == "mkdir -p d1"  # mkdir: the exact command only
            await _turn(s, "two", on_ask)

    anyio.run(second)
    assert asked == ["mkdir -p d1", "touch x"]  # mkdir -p d1 again: covered by the grant
    assert (tmp_path / "d1").is_dir() and (tmp_path / "x").exists()
    grants = [r for r in _journal(tmp_path, session_id) if isinstance(r, jr.PermissionGranted)]
    assert [(g.tool, g.command) for g in grants] == [("shell", "mkdir -p d1")]


def test_a_command_whose_scope_cannot_be_judged_offers_no_session_choice(tmp_path: Path) -> None:
    config = _script(tmp_path, [_shell("FOO=1 sh -c 'touch y'"), {"text": "ok"}])
    choices: list[list[str]] = []

    def on_ask(turn: Any, event: ev.ApprovalRequestedEvent) -> None:
        assert event.choices is not None
        choices.append([c.value for c in event.choices])
        turn.decide(event.call_id, "deny")

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            await _turn(s, "go", on_ask)

    anyio.run(main)
    assert choices == [["approve_once", "approve_session", "deny", "abort"]]  # exact command only


def test_a_deny_reason_reaches_the_model_and_abort_stops_the_turn(tmp_path: Path) -> None:
    config = _script(tmp_path, [_shell("touch a"), _shell("touch b"), {"text": "ok"}])
    results: list[str] = []

    def on_ask(turn: Any, event: ev.ApprovalRequestedEvent) -> None:
        if "touch a" in event.text:
            turn.decide(event.call_id, "deny", reason="use the build dir instead")
        else:
            turn.decide(event.call_id, "abort")

    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            events, status = await _turn(s, "go", on_ask)
            results.extend(e.output for e in events if isinstance(e, ev.ToolResultEvent))
            return status, s.session_id

    status, session_id = anyio.run(main)
    assert status == "interrupted"
    assert "use the build dir instead" in results[0]
    assert "before it was approved: it never ran" in results[1]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    decisions = [
        r.decision for r in _journal(tmp_path, session_id) if isinstance(r, jr.InteractionResolved)
    ]
    assert decisions == [D.deny, D.abort]


def test_nobody_to_answer_journals_declined_by_headless(tmp_path: Path) -> None:
    config = _script(tmp_path, [_shell("touch z"), {"text": "ok"}])

    async def main() -> tuple[list[ev.Event], str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            events, _status = await _turn(s, "go", lambda *_: None)
            return events, s.session_id

    events, session_id = anyio.run(main)
    assert not any(isinstance(e, ev.ApprovalRequestedEvent) for e in events)
    (resolved_event,) = [e for e in events if isinstance(e, ev.InteractionResolvedEvent)]
    assert (resolved_event.decision, resolved_event.by) == ("declined", "headless")
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert result.status == "denied" and "cannot ask" in result.output
    (resolved,) = [
        r for r in _journal(tmp_path, session_id) if isinstance(r, jr.InteractionResolved)
    ]
    assert (resolved.decision, resolved.by) == (D.declined, jr.InteractionBy.headless)
    assert not (tmp_path / "z").exists()


def test_a_request_over_128_kib_is_denied_unshown(tmp_path: Path) -> None:
    big = "x" * (130 * 1024)
    config = _script(
        tmp_path,
        [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": "big.txt", "content": big}}
                ]
            },
            {"text": "ok"},
        ],
    )

    async def main() -> list[ev.Event]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            events, _ = await _turn(s, "go", lambda *_: None)
            return events

    events = anyio.run(main)
    assert not any(isinstance(e, ev.ApprovalRequestedEvent) for e in events)
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert result.status == "denied" and "over the 131072-byte limit" in result.output
    assert not (tmp_path / "big.txt").exists()


def test_a_too_large_answer_reason_is_refused_and_the_card_still_waits(tmp_path: Path) -> None:
    config = _script(tmp_path, [_shell("touch q"), {"text": "ok"}])
    refused: list[str] = []

    def on_ask(turn: Any, event: ev.ApprovalRequestedEvent) -> None:
        try:
            turn.decide(event.call_id, "deny", reason="r" * 131073)
        except ValueError as exc:
            refused.append(str(exc))
        assert turn.pending_approvals == [event.call_id]
        turn.decide(event.call_id, "no")

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            await _turn(s, "go", on_ask)

    anyio.run(main)
    assert len(refused) == 1 and "over the 131072-byte limit" in refused[0]
    assert not (tmp_path / "q").exists()
