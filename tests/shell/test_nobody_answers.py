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


async def _until_shown(s: mind.Session) -> None:
    """Wait (bounded by the caller) until the session shows a question."""
    while not s.pending_interactions():  # noqa: ASYNC110 - the card is shown to nobody: no event
        await anyio.sleep(0.01)


def _assert_declined_not_run(tmp_path: Path, session_id: str, status: str) -> None:
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


def test_a_card_shown_before_the_caller_waits_is_declined_once_it_waits(tmp_path: Path) -> None:
    """Order (a): submit, other work while the card is shown to nobody, then
    ``wait()``: the only party left cannot answer, so the shown question is
    declined (the chart's ``answerers_changed [not can_answer]``)."""

    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            turn = s.submit("go")
            with anyio.fail_after(DEADLINE_S):
                await _until_shown(s)  # the other work: the card is shown meanwhile
                outcome = await turn.wait()  # it used to wait here forever
            return s.session_id, outcome.status

    session_id, status = anyio.run(main)
    _assert_declined_not_run(tmp_path, session_id, status)


def test_a_reader_that_leaves_at_the_card_then_waits_has_nobody_to_answer(
    tmp_path: Path,
) -> None:
    """Order (b): read the events, ``break`` at the card, then ``wait()``:
    the iteration is closed, so nobody reads; the question is declined."""

    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            turn = s.submit("go")
            with anyio.fail_after(DEADLINE_S):
                async for event in turn:
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        break
                outcome = await turn.wait()  # it used to wait here forever
            return s.session_id, outcome.status

    session_id, status = anyio.run(main)
    _assert_declined_not_run(tmp_path, session_id, status)


def test_a_session_events_reader_that_leaves_then_waits_has_nobody_to_answer(
    tmp_path: Path,
) -> None:
    """The same with :meth:`Session.events` as the reader that leaves."""

    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            turn = s.submit("go")
            with anyio.fail_after(DEADLINE_S):
                async for event in s.events():
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        break
                outcome = await turn.wait()
            return s.session_id, outcome.status

    session_id, status = anyio.run(main)
    _assert_declined_not_run(tmp_path, session_id, status)


def test_a_reader_in_another_task_answers_while_the_caller_waits(tmp_path: Path) -> None:
    """A ``wait()`` begun while another task reads the turn (a handler) does
    not decline the shown card: the reader answers it (the chart's
    ``answerers_changed [can_answer]`` keeps it shown)."""

    async def main() -> tuple[str, int]:
        cards: list[ev.ApprovalRequestedEvent] = []
        seen, go = anyio.Event(), anyio.Event()
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=_config(tmp_path), interactive=True)
            turn = s.submit("go")

            async def handler() -> None:
                async for event in turn:
                    if isinstance(event, ev.ApprovalRequestedEvent):
                        cards.append(event)
                        seen.set()
                        await go.wait()  # answered only after the caller waits
                        s.answer(event.interaction_id, "deny")

            with anyio.fail_after(DEADLINE_S):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(handler)
                    await seen.wait()
                    go.set()  # wait() below begins before the handler resumes
                    await turn.wait()
            return s.session_id, len(cards)

    session_id, shown = anyio.run(main)
    assert shown == 1
    (resolved,) = _resolutions(tmp_path, session_id)
    assert (resolved.decision, resolved.by) == (
        jr.InteractionDecision.deny,
        jr.InteractionBy.person,
    )
