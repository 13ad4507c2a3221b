"""Generated sessions for checkpoint and retention tests and the resume bench:
turns with tool rounds, questions and grants, dropped inputs, compactions that
keep some user messages, and an unterminated last turn — records in journal
order with ``seq`` = position (what ``Journal.append`` gives them too)."""

from __future__ import annotations

import random
from collections.abc import Callable

import msgspec

from mind.generated import journal as jr
from tests.support import records as rec


def generated_session(
    rng: random.Random,
    session_id: str,
    *,
    turns: int,
    payload_bytes: int = 16,
    turn_prefix: str = "t",
    endings: bool = False,
) -> list[jr.JournalRecord]:
    """``turns`` turns of a session, drawn from ``rng``; text fields carry
    about ``payload_bytes`` bytes each. Compactions follow the journal's
    invariant (docs/design/checkpoints.md §1): ``through_seq`` only grows, at a
    point with no unanswered call, and ``kept`` names user messages the
    model still saw. Turn ids are ``turn_prefix`` and the turn's number.
    With ``endings``, a turn ends in any of the ways a real one does (see
    :func:`_ending`), not only with a round of text."""
    out: list[jr.JournalRecord] = []
    visible: list[int] = []  # user_message seqs the model still sees
    through = -1

    def add(record: jr.JournalRecord) -> None:
        out.append(msgspec.structs.replace(record, seq=len(out)))

    def text() -> str:
        return "x" * rng.randint(1, max(1, payload_bytes))

    add(
        jr.SessionStarted(
            seq=0, recorded_at_ms=0, session_id=session_id, cwd="/tmp", mind_version="0"
        )
    )
    for t in range(turns):
        tid = f"{turn_prefix}{t}"
        add(rec.turn_started(tid))
        visible.append(len(out))
        add(rec.user_message(tid, f"m{t}", text(), jr.Kind.prompt))
        for r in range(rng.randint(0, 2)):
            calls = [rec.call(f"c{r}_{k}", "shell", '{"command":"true"}') for k in range(2)]
            add(rec.model_round(tid, text(), calls, r))
            for k, c in enumerate(calls):
                if rng.random() < 0.3:
                    iid = f"ia_{tid}_{r}_{k}"
                    add(_asked(iid, tid, c.call_id))
                    add(_answered(iid))
                    if rng.random() < 0.3:
                        add(_granted(f"g_{iid}", iid))
                add(_started(tid, c.call_id))
                add(_result(tid, c.call_id, text()))
            if rng.random() < 0.3:  # a compaction inside the turn, at a round boundary
                through = _compact(add, out, rng, visible, through)
        last = t == turns - 1
        status, failure = _ending(add, rng, tid, text) if endings else _completed(add, tid, text)
        if last and rng.random() < 0.5:
            break  # the last turn crashed: no terminal record
        if rng.random() < 0.2:
            add(jr.InputDropped(seq=0, recorded_at_ms=0, message_id=f"d{t}"))
        add(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=tid,
                status=status,
                usage=jr.Usage(input_tokens=1, output_tokens=1),
                acknowledged=[f"m{t}"],
                failure=msgspec.UNSET if failure is None else failure,
            )
        )
        if rng.random() < 0.3:
            through = _compact(add, out, rng, visible, through)
    return out


_Ending = tuple[jr.TurnStatus, jr.Failure | None]


def _completed(
    add: Callable[[jr.JournalRecord], None], tid: str, text: Callable[[], str]
) -> _Ending:
    add(rec.model_round(tid, text(), None, 9))
    return jr.TurnStatus.completed, None


def _ending(
    add: Callable[[jr.JournalRecord], None],
    rng: random.Random,
    tid: str,
    text: Callable[[], str],
) -> _Ending:
    """The last records of a turn, ended in one of the ways a real turn
    ends; returns its status and failure. A turn that ends on a tool round
    (Esc during a command, the round limit, ``context_length`` after a
    result) has a ``model_round`` with calls as its newest round."""
    way = rng.choice(
        ["completed", "interrupted", "unanswered", "round_limit", "context_length", "failed"]
    )
    if way == "completed":
        return _completed(add, tid, text)
    if way == "failed":  # the request failed before any round of its own
        return jr.TurnStatus.failed, jr.Failure(kind=jr.FailureKind.server, message="failed")
    calls = [rec.call(f"e_{k}", "shell", '{"command":"true"}') for k in range(2)]
    add(rec.model_round(tid, text(), calls, 8))
    if way in ("interrupted", "unanswered"):
        # Esc while the first call runs: it is answered ``interrupted``; the
        # second never started and gets a synthetic result, or (a journal
        # from before results were synthesised) none at all.
        add(_started(tid, "e_0"))
        add(msgspec.structs.replace(_result(tid, "e_0", text()), status=jr.ToolStatus.interrupted))
        if way == "interrupted":
            add(
                msgspec.structs.replace(
                    _result(tid, "e_1", "interrupted"),
                    status=jr.ToolStatus.interrupted,
                    synthetic=True,
                )
            )
        return jr.TurnStatus.interrupted, None
    for c in calls:
        add(_started(tid, c.call_id))
        add(_result(tid, c.call_id, text()))
    if way == "round_limit":
        return jr.TurnStatus.failed, jr.Failure(kind=jr.FailureKind.round_limit, message="rounds")
    return jr.TurnStatus.failed, jr.Failure(kind=jr.FailureKind.context_length, message="long")


def _compact(
    add: object, out: list[jr.JournalRecord], rng: random.Random, visible: list[int], through: int
) -> int:
    assert callable(add)
    cid = f"cp{len(out)}"
    new_through = len(out) - 1
    sample = set(rng.sample(visible, k=min(len(visible), rng.randint(0, 2))))
    # The newest message the model saw is always kept (kept_user_messages).
    kept = sorted(sample | set(visible[-1:]))
    add(
        jr.CompactionStarted(
            seq=0,
            recorded_at_ms=0,
            compaction_id=cid,
            trigger=jr.CompactionTrigger.manual,
            through_seq=new_through,
        )
    )
    add(
        jr.CompactionCompleted(
            seq=0,
            recorded_at_ms=0,
            compaction_id=cid,
            through_seq=new_through,
            summary="summary of earlier conversation",
            kept=kept,
        )
    )
    visible[:] = kept
    return max(through, new_through)


def _asked(iid: str, turn_id: str, call_id: str) -> jr.InteractionRequested:
    return jr.InteractionRequested(
        seq=0,
        recorded_at_ms=0,
        interaction_id=iid,
        turn_id=turn_id,
        call_id=call_id,
        effect_id=f"ef_{iid}",
        kind=jr.InteractionKind.approval,
        purpose=jr.Purpose.run,
        name="shell",
        reason="asked",
        text="true",
        text_format=jr.TextFormat.command,
        head_chars=4,
        tail_chars=0,
        hidden_chars=0,
        hidden_lines=0,
        cwd="/tmp",
        choices=[jr.InteractionDecision.approve_once, jr.InteractionDecision.deny],
    )


def _answered(iid: str) -> jr.InteractionResolved:
    return jr.InteractionResolved(
        seq=0,
        recorded_at_ms=0,
        interaction_id=iid,
        decision=jr.InteractionDecision.approve_once,
        by=jr.InteractionBy.person,
    )


def _granted(grant_id: str, iid: str) -> jr.PermissionGranted:
    return jr.PermissionGranted(
        seq=0,
        recorded_at_ms=0,
        grant_id=grant_id,
        interaction_id=iid,
        tool="shell",
        scope=jr.Scope.program,
        prefix=["true"],
    )


def _started(turn_id: str, call_id: str) -> jr.ToolStarted:
    return jr.ToolStarted(seq=0, recorded_at_ms=0, turn_id=turn_id, call_id=call_id, name="shell")


def _result(turn_id: str, call_id: str, output: str) -> jr.ToolResult:
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id=turn_id,
        call_id=call_id,
        name="shell",
        status=jr.ToolStatus.ok,
        output=output,
        synthetic=False,
    )
