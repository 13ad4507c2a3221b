"""Facts a client reads from :class:`~mind.shell.session.Session` instead of
its journal (one owner per fact): whether anything was ever
sent, whether its storage refused a write, which inputs a claim took."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from tests.support.counting import CountingRecords

GATE = "while [ ! -e go ]; do sleep 0.02; done"


def _config(tmp_path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})


def test_a_new_session_is_untouched_until_input_reaches_it(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "hi"}])

    async def main() -> tuple[bool, bool, str | None, bool]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            before = s.untouched
            await s.submit("hello").wait()
            return before, s.untouched, s.storage_broken, s.reusable

    before, after, broken, reusable = anyio.run(main)
    assert (before, after, broken) == (True, False, None)
    assert reusable  # its journal works: re-entering returns this handle


def test_claimed_inputs_name_the_text_and_kind_of_each_claim(tmp_path: Path) -> None:
    """A steering message claimed at the tool-result boundary is found by the
    ids its ``input.claimed`` event carries, like the turn's own prompt."""
    config = _config(
        tmp_path,
        [{"tool_calls": [{"name": "shell", "arguments": {"command": GATE}}]}, {"text": "ok"}],
    )

    async def main() -> list[tuple[ev.ClaimPoint, list[tuple[str, jr.Kind]]]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path / "work", config=config)
            turn = s.submit("first")
            seen = []
            async for e in turn:
                if isinstance(e, ev.ToolCallEvent):
                    s.steer("also this")
                    (tmp_path / "work" / "go").touch()
                if isinstance(e, ev.InputClaimedEvent):
                    found = s.claimed_inputs(e.message_ids)
                    seen.append((e.at, [(m.text, m.kind) for m in found]))
            return seen

    (tmp_path / "work").mkdir()
    assert anyio.run(main) == [
        (ev.ClaimPoint.start, [("first", jr.Kind.prompt)]),
        (ev.ClaimPoint.boundary, [("also this", jr.Kind.steer)]),
    ]


def test_claimed_inputs_read_each_journal_record_once_over_many_claims(tmp_path: Path) -> None:
    """The claims a REPL looks up are found without rescanning the journal:
    ids that were never journaled (the worst case) cost nothing after the
    first look-up, and inputs journaled later are still found."""
    config = _config(tmp_path, [{"text": "one"}, {"text": "two"}])

    async def main() -> tuple[int, int, list[str], list[str]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            first = s.submit("first")
            await first.wait()
            records = CountingRecords(s.journal.records)
            s.journal.records = records
            for _ in range(50):
                assert s.claimed_inputs(["no-such-id"]) == []
            after_misses = records.read
            second = s.submit("second")
            await second.wait()
            found = s.claimed_inputs([m.message_id for m in second.inputs + first.inputs])
            return (
                after_misses,
                len(records),
                [m.text for m in found],
                [m.text for m in s.claimed_inputs([first.inputs[0].message_id])],
            )

    after_misses, total, found, again = anyio.run(main)
    assert after_misses <= total  # at most one pass, not one per look-up
    assert found == ["second", "first"]
    assert again == ["first"]


def test_opening_a_session_computes_its_settled_inputs_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Startup filters the inbox by the journal's settled ids and hands them
    to the session; the session does not scan the journal for them again."""
    from mind.shell import recovery, startup
    from mind.shell import session as session_module

    config = _config(tmp_path, [{"text": "one"}])
    calls: list[int] = []
    real = recovery.settled_inputs

    def counted(records: Any) -> set[str]:
        calls.append(1)
        return real(records)

    async def create() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            await s.submit("first").wait()
            return s.session_id

    sid = anyio.run(create)
    for module in (recovery, startup, session_module):
        if hasattr(module, "settled_inputs"):
            monkeypatch.setattr(module, "settled_inputs", counted)

    async def reopen() -> list[str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.open_session(sid, config=config)
            return [m.message_id for m in s.waiting]

    assert anyio.run(reopen) == []
    assert len(calls) == 1


def test_a_refused_checkpoint_is_a_fact_of_the_session_once(tmp_path: Path) -> None:
    """docs/design/checkpoints.md §4: the open that could not use the
    checkpoint says why; it wrote a new one, so the next open says nothing."""
    from mind.shell.checkpoint import CHECKPOINT_NAME

    config = _config(tmp_path, [{"text": "hi"}])
    state = tmp_path / "state"

    async def first() -> tuple[str, str | None]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            await s.submit("hello").wait()
            assert s.journal.write_checkpoint()
            return s.session_id, s.checkpoint_fallback

    async def reopen(sid: str) -> str | None:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            return s.checkpoint_fallback

    sid, fresh = anyio.run(first)
    checkpoint = next(state.rglob(CHECKPOINT_NAME))
    checkpoint.write_bytes(checkpoint.read_bytes()[:-10])  # truncated
    damaged = anyio.run(reopen, sid)
    again = anyio.run(reopen, sid)
    assert fresh is None
    assert damaged is not None and "truncated" in damaged
    assert again is None
