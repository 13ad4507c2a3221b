"""The interactions service over real journals (docs/design/interactions.md):
journaled (fsync) before shown, first decision wins, explicit no-ops, the
128 KiB bounds, declined where nobody can answer, and idempotence over the
journal after a restart (§6: an unanswered request is offered again with
its id and never journaled twice; a resolved one is applied, never asked)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from mind.effects.grants import GrantScope
from mind.errors import InteractionTooLarge, JournalError
from mind.generated import journal as jr
from mind.shell.interactions import Answered, Interactions, NotTaken, Resolution
from mind.shell.journal import Journal, read_records

D = jr.InteractionDecision


def _journal(path: Path) -> Journal:
    journal = Journal.open(path, create=not path.exists())
    if not journal.records:
        journal.append(
            jr.SessionStarted(seq=0, recorded_at_ms=0, session_id="s", cwd="/w", mind_version="t"),
            sync=True,
        )
    return journal


def _request(iid: str = "ia_1", *, text: str = "touch x", call_id: str = "c1") -> Any:
    return jr.InteractionRequested(
        seq=0,
        recorded_at_ms=0,
        interaction_id=iid,
        turn_id="t1",
        call_id=call_id,
        effect_id="ef_1",
        kind=jr.InteractionKind.approval,
        purpose=jr.Purpose.run,
        name="shell",
        reason="untrusted mode asks",
        text=text,
        text_format=jr.TextFormat.command,
        head_chars=len(text),
        tail_chars=0,
        hidden_chars=0,
        hidden_lines=0,
        cwd="/w",
        choices=[D.approve_once, D.deny],
    )


def _on_disk(path: Path, kind: type[Any]) -> list[Any]:
    records, _report = read_records(path)
    return [r for r in records if isinstance(r, kind)]


async def _ask(
    service: Interactions,
    request: Any,
    on_show: Callable[[Any, bool], None],
    *,
    can_answer: bool = True,
    stopped: bool = False,
) -> Resolution:
    return await service.ask(
        request,
        can_answer=can_answer,
        show=on_show,
        resolved=lambda _r: None,
        explicit_stop=lambda: stopped,
    )


def test_a_request_is_durable_before_it_is_shown_and_an_answer_before_it_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    journal = _journal(path)
    service = Interactions(journal)
    seen: list[tuple[int, bool]] = []
    results: list[Any] = []

    def on_show(request: Any, again: bool) -> None:
        # Shown: the request is already on disk (read back by a fresh reader).
        seen.append((len(_on_disk(path, jr.InteractionRequested)), again))
        results.append(service.answer(request.interaction_id, D.deny, reason="not now"))
        assert len(_on_disk(path, jr.InteractionResolved)) == 1  # durable at once
        results.append(service.answer(request.interaction_id, D.approve_once))

    resolution = anyio.run(_ask, service, _request(), on_show)
    assert seen == [(1, False)]
    assert results[0] == Answered("ia_1", D.deny)
    assert isinstance(results[1], NotTaken) and results[1].why == "resolved"
    assert results[1].decision == D.deny and "first decision stands" in results[1].message
    assert (resolution.decision, resolution.reason, resolution.by) == (D.deny, "not now", "person")
    (resolved,) = _on_disk(path, jr.InteractionResolved)
    assert (resolved.decision, resolved.reason) == (D.deny, "not now")
    # After it was applied: still a no-op naming the first decision.
    late = service.answer("ia_1", D.approve_once)
    assert isinstance(late, NotTaken) and late.why == "resolved" and late.decision == D.deny
    assert service.pending() == []


def test_the_same_answer_again_is_success_and_a_different_one_a_no_op(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    service = Interactions(_journal(path))
    results: list[Any] = []

    def on_show(request: Any, _again: bool) -> None:
        iid = request.interaction_id
        results.append(service.answer(iid, D.approve_once))
        results.append(service.answer(iid, D.approve_once))  # a retry, e.g. after a timeout
        results.append(service.answer(iid, D.deny))

    anyio.run(_ask, service, _request(), on_show)
    assert results[:2] == [Answered("ia_1", D.approve_once)] * 2
    assert isinstance(results[2], NotTaken) and results[2].why == "resolved"
    assert "first decision stands" in results[2].message
    assert service.answer("ia_1", D.approve_once) == Answered("ia_1", D.approve_once)  # applied
    late = service.answer("ia_1", D.deny)
    assert isinstance(late, NotTaken) and late.decision == D.approve_once
    assert len(_on_disk(path, jr.InteractionResolved)) == 1  # nothing written twice
    # After a restart, over the journal alone: the same.
    again = Interactions(_journal(path))
    assert again.answer("ia_1", D.approve_once) == Answered("ia_1", D.approve_once)
    assert isinstance(again.answer("ia_1", D.deny), NotTaken)


def test_unknown_and_stale_ids_are_explicit_no_ops(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = _journal(path)
    journal.append(_request("ia_old"), sync=True)  # asked by a process that crashed
    # ... after its call was prepared (a re-run question): not asked before it runs again.
    journal.append(
        jr.ToolStarted(
            seq=0, recorded_at_ms=0, turn_id="t1", call_id="c1", name="shell", effect_id="ef_1"
        ),
        sync=True,
    )
    service = Interactions(journal)
    assert service.pending() == []
    unknown = service.answer("ia_nope", D.approve_once)
    stale = service.answer("ia_old", D.approve_once)
    assert isinstance(unknown, NotTaken) and unknown.why == "unknown"
    assert "ia_nope" in unknown.message
    assert isinstance(stale, NotTaken) and stale.why == "stale"
    assert "offered again" in stale.message
    assert _on_disk(path, jr.InteractionResolved) == []  # nothing written


def test_a_recovered_question_waits_from_the_open_and_its_answer_is_applied_when_asked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    journal = _journal(path)
    journal.append(_request(), sync=True)  # a crash while it was shown; its call never started
    service = Interactions(journal)
    assert [r.interaction_id for r in service.pending()] == ["ia_1"]
    assert service.answer("ia_1", D.deny, reason="no") == Answered("ia_1", D.deny)
    assert service.pending() == []
    assert isinstance(service.answer("ia_1", D.approve_once), NotTaken)  # the first stands
    shown: list[object] = []
    resolution = anyio.run(_ask, service, _request(), lambda *a: shown.append(a))
    assert shown == [] and (resolution.decision, resolution.reason) == (D.deny, "no")
    assert len(_on_disk(path, jr.InteractionResolved)) == 1


def test_an_unanswered_request_is_offered_again_with_its_id_never_journaled_twice(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    first = _journal(path)
    first.append(_request(), sync=True)  # requested (and shown), then kill -9
    first.close()
    service = Interactions(_journal(path))
    assert [r.interaction_id for r in service.log.recoverable()] == ["ia_1"]
    shown: list[tuple[str, bool]] = []

    def on_show(request: Any, again: bool) -> None:
        shown.append((request.interaction_id, again))
        assert service.answer(request.interaction_id, D.approve_once) == Answered(
            "ia_1", D.approve_once
        )

    resolution = anyio.run(_ask, service, _request(), on_show)
    assert shown == [("ia_1", True)]
    assert resolution.decision == D.approve_once and resolution.offered_again
    assert len(_on_disk(path, jr.InteractionRequested)) == 1
    assert service.log.recoverable() == []


@pytest.mark.parametrize("decision", [D.approve_once, D.deny, D.abort, D.cancelled])
def test_a_resolved_request_is_applied_after_a_restart_never_asked_again(
    tmp_path: Path, decision: jr.InteractionDecision
) -> None:
    path = tmp_path / "journal.jsonl"
    first = _journal(path)
    first.append(_request(), sync=True)
    first.append(
        jr.InteractionResolved(
            seq=0, recorded_at_ms=0, interaction_id="ia_1", decision=decision, by="person"
        ),
        sync=True,
    )
    first.close()
    service = Interactions(_journal(path))

    def on_show(_request: Any, _again: bool) -> None:
        raise AssertionError("a resolved interaction is never shown again")

    resolution = anyio.run(_ask, service, _request(), on_show)
    assert resolution.decision == decision and resolution.offered_again
    assert len(_on_disk(path, jr.InteractionRequested)) == 1
    assert len(_on_disk(path, jr.InteractionResolved)) == 1


def test_nobody_to_answer_is_declined_durably_never_accepted(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    service = Interactions(_journal(path))

    def on_show(_request: Any, _again: bool) -> None:
        raise AssertionError("nobody can answer: nothing is shown")

    resolution = anyio.run(lambda: _ask(service, _request(), on_show, can_answer=False))
    assert (resolution.decision, resolution.by) == (D.declined, "headless")
    (resolved,) = _on_disk(path, jr.InteractionResolved)
    assert (resolved.decision, resolved.by) == (D.declined, jr.InteractionBy.headless)


def test_a_request_over_128_kib_is_refused_before_anything_is_journaled_or_shown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    service = Interactions(_journal(path))

    def on_show(_request: Any, _again: bool) -> None:
        raise AssertionError("too large: never shown")

    with pytest.raises(InteractionTooLarge) as refused:
        anyio.run(_ask, service, _request(text="x" * (128 * 1024)), on_show)
    assert refused.value.interaction_id == "ia_1" and refused.value.call_id == "c1"
    assert refused.value.size_bytes > refused.value.limit_bytes == 128 * 1024
    assert _on_disk(path, jr.InteractionRequested) == []


def test_an_answer_reason_over_128_kib_is_refused_and_the_question_still_waits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.jsonl"
    service = Interactions(_journal(path))
    results: list[Any] = []

    def on_show(request: Any, _again: bool) -> None:
        results.append(service.answer(request.interaction_id, D.deny, reason="r" * 131073))
        results.append(list(service.pending()))
        results.append(service.answer(request.interaction_id, D.deny, reason="short"))

    resolution = anyio.run(_ask, service, _request(), on_show)
    assert isinstance(results[0], NotTaken) and results[0].why == "too_large"
    assert [r.interaction_id for r in results[1]] == ["ia_1"]
    assert results[2] == Answered("ia_1", D.deny)
    assert resolution.reason == "short"


def test_a_person_stopping_the_turn_cancels_durably_a_process_stop_does_not(
    tmp_path: Path,
) -> None:
    for stopped, expected in ((True, [D.cancelled]), (False, [])):
        path = tmp_path / f"journal-{stopped}.jsonl"
        service = Interactions(_journal(path))

        async def main() -> None:
            with anyio.CancelScope() as scope:

                def on_show(_request: Any, _again: bool) -> None:
                    scope.cancel()

                await _ask(service, _request(), on_show, stopped=stopped)  # noqa: B023

        anyio.run(main)
        assert [r.decision for r in _on_disk(path, jr.InteractionResolved)] == expected
        # A cancel is never re-offered; a process stop stays recoverable.
        assert len(Interactions(_journal(path)).log.recoverable()) == (0 if stopped else 1)


def test_grants_are_durable_idempotent_and_revocable_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    service = Interactions(_journal(path))
    scope = GrantScope("shell", "program", sandbox="outside", prefix=("git", "status"))
    grant = service.grant("ia_1", scope)
    assert service.grant("ia_1", scope) == grant  # one record per answer
    assert len(_on_disk(path, jr.PermissionGranted)) == 1
    reopened = Interactions(_journal(path))
    assert [g.scope for g in reopened.grants()] == [scope]
    assert reopened.revoke(grant.grant_id) and not reopened.revoke(grant.grant_id)
    assert Interactions(_journal(path)).grants() == []


def test_the_same_id_cannot_be_asked_twice_at_once(tmp_path: Path) -> None:
    service = Interactions(_journal(tmp_path / "journal.jsonl"))
    errors: list[str] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            def on_show(request: Any, _again: bool) -> None:
                async def second() -> None:
                    try:
                        await _ask(service, _request(), lambda *_: None)
                    except ValueError as exc:
                        errors.append(str(exc))
                    service.answer(request.interaction_id, D.deny)

                tg.start_soon(second)

            await _ask(service, _request(), on_show)

    anyio.run(main)
    assert errors == ["interaction ia_1 is already being asked"]


def test_an_answer_that_cannot_be_made_durable_fails_the_ask_instead_of_hanging(
    tmp_path: Path,
) -> None:
    """The resolution's fsync failed: the answer did not take effect, and the
    waiting call gets the storage error (its turn fails closed), never a hang
    and never a run on an answer that is not on disk."""
    journal = _journal(tmp_path / "journal.jsonl")
    service = Interactions(journal)
    raised: list[BaseException] = []

    def on_show(request: Any, _again: bool) -> None:
        journal.close()  # every later append fails
        with pytest.raises(JournalError):
            service.answer(request.interaction_id, D.approve_once)

    async def main() -> None:
        with anyio.fail_after(5):
            try:
                await _ask(service, _request(), on_show)
            except JournalError as exc:
                raised.append(exc)

    anyio.run(main)
    assert len(raised) == 1


def test_a_question_whose_turn_was_closed_is_not_recoverable(tmp_path: Path) -> None:
    """Startup closed the crashed turn (today's closing, not a resume): its
    unanswered question can never be re-offered, so it is not recoverable
    and an answer to it says its turn ended."""
    path = tmp_path / "journal.jsonl"
    journal = _journal(path)
    journal.append(_request("ia_closed"), sync=True)
    journal.append(_request("ia_open", call_id="c2"), sync=True)
    journal.append(
        jr.TurnCompleted(
            seq=0,
            recorded_at_ms=0,
            turn_id="t1",
            status=jr.TurnStatus.aborted,
            usage=jr.Usage(input_tokens=0, output_tokens=0),
            acknowledged=[],
        ),
        sync=True,
    )
    open_turn = msgspec.structs.replace(_request("ia_other", call_id="c3"), turn_id="t2")
    journal.append(open_turn, sync=True)
    service = Interactions(journal)
    assert [r.interaction_id for r in service.log.recoverable()] == ["ia_other"]
    late = service.answer("ia_closed", D.approve_once)
    assert isinstance(late, NotTaken) and late.why == "stale" and "turn ended" in late.message
