"""A library session opened ``interactive=True`` whose caller reads none of
its events has nobody to answer (docs/design/interactions.md §2): a question
is ``declined`` (durable, by ``headless``), as ``mind exec`` does — never a
wait forever at a card nobody sees — and the call is not run. A caller that
reads the turn's events is asked as before.

Real parts: a runtime on a temporary state root, the scripted provider, a
real shell command (it would leave ``ran`` behind), the session's journal."""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import read_records

DEADLINE_S = 20


def _config(tmp_path: Path) -> mind.ResolvedConfig:
    call = {"name": "shell", "arguments": {"command": "echo ran > ran"}}
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"tool_calls": [call]}, {"text": "ok"}]), "utf-8")
    return mind.resolve_config(
        provider="scripted", script=str(script), approval="untrusted", env={}
    )


def _resolutions(tmp_path: Path, session_id: str) -> list[jr.InteractionResolved]:
    path = tmp_path / "state" / "sessions" / session_id / "journal.jsonl"
    records, _report = read_records(path)
    return [r for r in records if isinstance(r, jr.InteractionResolved)]


def test_a_turn_awaited_unread_has_nobody_to_answer_its_question_is_declined(
    tmp_path: Path,
) -> None:
    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            turn = s.submit("go")
            with anyio.fail_after(DEADLINE_S):  # it used to wait here forever
                outcome = await turn.wait()
            return s.session_id, outcome.status

    session_id, status = anyio.run(main)
    assert status == "completed"
    records, _report = read_records(tmp_path / "state" / "sessions" / session_id / "journal.jsonl")
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert "Refused without running" in result.output and "nobody answers it" in result.output
    (resolved,) = _resolutions(tmp_path, session_id)
    assert (resolved.decision, resolved.by) == (
        jr.InteractionDecision.declined,
        jr.InteractionBy.headless,
    )
    assert not (tmp_path / "ran").exists()


def test_a_caller_reading_the_turn_is_asked(tmp_path: Path) -> None:
    async def main() -> tuple[str, list[ev.ApprovalRequestedEvent]]:
        cards: list[ev.ApprovalRequestedEvent] = []
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            with anyio.fail_after(DEADLINE_S):
                async for event in s.submit("go"):
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        cards.append(event)
                        s.answer(event.interaction_id, "deny")
            return s.session_id, cards

    session_id, cards = anyio.run(main)
    assert len(cards) == 1
    (resolved,) = _resolutions(tmp_path, session_id)
    assert (resolved.decision, resolved.by) == (
        jr.InteractionDecision.deny,
        jr.InteractionBy.person,
    )
