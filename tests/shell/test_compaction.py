"""Compaction against a small-window loopback model (docs/design/context.md §5).

The fake server (tests/support/fake_model.py) has a small window, reports
usage as its body size in tokens and answers a request over the window with
OpenAI's ``context_length_exceeded`` body. A long session compacts on its
own; every request stays under the window and carries the latest user
message and every call/result pair whole; a forced overflow compacts and
sends the request once more.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

import mind
from mind.context.compaction import SUMMARY_PREFIX
from mind.conversation import ModelRequest, ToolCall
from mind.errors import CompactionRefused, SessionBusyError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.history import build_messages
from mind.shell import supervision
from mind.shell.effects import SessionEffects
from mind.shell.repl.commands import compact_refusal_note
from tests.support import records as rec
from tests.support.fake_model import EFFECTS_FILE, FakeModel, tokens_of, user_texts
from tests.support.replay_server import ReplayServer, Reply

WINDOW = 8_192
"""The fake server's window, in tokens. The session plans against gpt-3.5-turbo's
16,385 (mind's built-in table) at 25%: half of this window. Without compaction
the five turns below would pass it (about 1.6k tokens each)."""
TURNS = 5

# Each tool call prints ~6 KB, so a few turns fill half the window.
COMMAND = "echo {call_id} >> {effects}; printf '%06000d' 0"


def _config(
    model: FakeModel,
    tmp_path: Path,
    percent: int = 50,
    *,
    name: str = "gpt-3.5-turbo",
    window: str | None = None,
) -> mind.ResolvedConfig:
    env = {"MIND_HOME": str(tmp_path / "home"), "MIND_AUTO_COMPACT_PERCENT": str(percent)}
    if window is not None:
        env["MIND_MODEL_CONTEXT_WINDOW"] = window
    return mind.resolve_config(
        provider="openai-chat",
        base_url=model.base_url,
        model=name,
        approval="never",
        env=env,
    )


def _pairs_whole(body: dict[str, Any]) -> bool:
    messages = body["messages"]
    for i, m in enumerate(messages):
        if m.get("role") == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            after = messages[i + 1 : i + 1 + len(ids)]
            if [a.get("tool_call_id") for a in after] != ids:
                return False
        if m.get("role") == "tool":
            prev = messages[i - 1]
            if prev.get("role") not in ("assistant", "tool"):
                return False
    return True


@pytest.mark.parametrize(
    ("name", "window"),
    [("gpt-3.5-turbo", None), ("local-model", "16385")],
    ids=["built-in table", "model_context_window"],
)
def test_a_long_session_compacts_itself_and_every_request_fits_the_window(
    tmp_path: Path, name: str, window: str | None
) -> None:
    """The window comes from the built-in table, or from the setting for a
    model the table does not know (the one window fact: context.md §1)."""
    with FakeModel(context_window=WINDOW, command=COMMAND) as model:
        config = _config(model, tmp_path, percent=25, name=name, window=window)

        async def main() -> tuple[list[ev.Event], list[str], list[jr.JournalRecord]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                events: list[ev.Event] = []
                finals: list[str] = []
                for i in range(TURNS):
                    turn = s.submit(f"TOOL step {i}")
                    async for e in turn:
                        events.append(e)
                    assert turn.outcome.event.status == ev.TurnStatus.completed, turn.outcome
                    finals.append(turn.outcome.final_text)
                return events, finals, s.history()

        events, finals, records = anyio.run(main)
        bodies = list(zip(model.requests, model.raw_requests, strict=True))
    compacted = [e for e in events if isinstance(e, ev.ContextCompactedEvent)]
    assert compacted, "the session never compacted"
    assert all(e.trigger == ev.CompactionTrigger.auto for e in compacted)
    assert all(
        isinstance(e.after_tokens, int) and e.after_tokens < e.before_tokens for e in compacted
    )  # type: ignore[operator]
    done = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert len(done) == len(compacted)
    # Its estimate of the context it left is close to what the server then counted.
    for record in done:
        after = next(
            r.usage.input_tokens
            for r in records
            if isinstance(r, jr.ModelRound) and r.seq > record.seq
        )
        assert isinstance(record.after_tokens, int)
        assert abs(record.after_tokens - after) <= after * 0.1, (record.after_tokens, after)
    # Every request fitted the window; turns' requests carry the turn's prompt
    # as their last user message and every call with its result.
    step = -1
    for body, raw in bodies:
        assert tokens_of(len(raw)) <= WINDOW
        if "tools" not in body:
            continue  # a summarisation request
        assert _pairs_whole(body)
        last = user_texts(body["messages"])[-1]
        assert last.startswith("TOOL step ")
        now = int(last.removeprefix("TOOL step "))
        assert now >= step
        step = now
    assert step == TURNS - 1
    # The answer after a compaction still saw the latest prompt verbatim.
    assert finals[-1].endswith(f"TOOL step {TURNS - 1}")
    # The journal keeps every original record.
    prompts = [r.text for r in records if isinstance(r, jr.UserMessage)]
    assert prompts == [f"TOOL step {i}" for i in range(TURNS)]
    # A compaction inside a turn cut before it: the running turn's own call
    # and result stayed verbatim, so the model never asked for its tool again.
    assert len((tmp_path / EFFECTS_FILE).read_text().split()) == TURNS


def test_a_context_overflow_compacts_and_sends_the_request_once_more(tmp_path: Path) -> None:
    with FakeModel(command=COMMAND) as model:
        config = _config(model, tmp_path, percent=0)  # no automatic compaction

        async def main() -> tuple[list[ev.Event], list[jr.JournalRecord], ev.TurnStatus]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                await s.run("TOOL first")
                model.overflow_next = 1
                events: list[ev.Event] = []
                turn = s.submit("second")
                async for e in turn:
                    events.append(e)
                # A second overflow in the same round fails the turn as before.
                model.overflow_next = 2
                third = await s.run("third")
                return events, s.history(), third.event.status

        events, records, third = anyio.run(main)
    started = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert [r.trigger for r in started] == [jr.CompactionTrigger.overflow] * 2
    assert [e.trigger for e in events if isinstance(e, ev.ContextCompactedEvent)] == [
        ev.CompactionTrigger.overflow
    ]
    ends = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert [e.status for e in ends] == [jr.TurnStatus.completed] * 2 + [jr.TurnStatus.failed]
    assert third == ev.TurnStatus.failed
    failed = ends[-1].failure
    assert failed is not None and failed.kind == jr.FailureKind.context_length


def test_an_overflow_nothing_can_compact_fails_at_once(tmp_path: Path) -> None:
    # The first turn's only message overflows: there is nothing to compact,
    # so the same request is never sent again (it could only overflow again).
    with FakeModel(command=COMMAND, overflow_next=1) as model:
        config = _config(model, tmp_path, percent=0)

        async def main() -> tuple[mind.TurnOutcome, list[jr.JournalRecord]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                return await s.run("too big"), s.history()

        outcome, records = anyio.run(main)
        requests = list(model.requests)
    assert outcome.event.status == ev.TurnStatus.failed
    assert outcome.event.failure is not None
    assert outcome.event.failure.kind == ev.FailureKind.context_length
    assert len(requests) == 1
    assert not any(isinstance(r, jr.CompactionStarted) for r in records)


def _scripted(tmp_path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})


def test_a_manual_compaction_between_turns_with_a_focus(tmp_path: Path) -> None:
    with FakeModel(command=COMMAND, overflow_summaries=2) as model:
        config = _config(model, tmp_path, percent=0)

        async def main() -> tuple[Any, list[ev.Event], list[jr.JournalRecord]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                nothing = await s.compact()  # nothing to summarise yet: refused, nothing written
                assert (nothing.completed, nothing.reason) == (False, "nothing to compact yet")
                for i in range(3):
                    await s.run(f"TOOL turn {i}")
                outcome = await s.compact("the file names")
                events = [e async for e in s.events()]
                await s.run("after")
                return outcome, events, s.history()

        outcome, events, records = anyio.run(main)
        summaries = [b for b in model.requests if "tools" not in b]
    assert outcome.completed
    assert [e.compaction_id for e in events if isinstance(e, ev.ContextCompactedEvent)] == [
        outcome.compaction_id
    ]
    (started,) = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert (started.trigger, started.focus) == (jr.CompactionTrigger.manual, "the file names")
    # The summarisation request overflowed twice: each retry dropped the
    # oldest item whole, never a result without its call.
    assert len(summaries) == 3
    sizes = [len(b["messages"]) for b in summaries]
    assert sizes[0] > sizes[1] > sizes[2]
    for body in summaries:
        assert _pairs_whole(body)
        assert body["messages"][1]["role"] != "tool"  # after the system message
        assert "Focus on: the file names" in user_texts(body["messages"])[-1]
    # The request after it: summary, the kept user messages, then the new prompt.
    last = model.requests[-1]
    texts = user_texts(last["messages"])
    assert texts[0].startswith(SUMMARY_PREFIX)
    assert texts[-1] == "after"
    assert all(m.get("role") != "tool" for m in last["messages"])


@pytest.mark.parametrize(
    ("summary", "reason"),
    [
        ("   ", "the summary was empty"),
        ("x" * 5000, "the summary was not smaller than what it replaces"),
    ],
)
def test_an_empty_or_larger_summary_is_refused_and_the_old_context_stands(
    tmp_path: Path, summary: str, reason: str
) -> None:
    # The scripted provider picks its reply by the assistant messages in the
    # request: the summarisation request (one answer so far) plays reply 2.
    config = _scripted(tmp_path, [{"text": "first answer"}, {"text": summary}])

    async def main() -> tuple[Any, list[jr.JournalRecord]]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            await s.run("first")
            return await s.compact(), s.history()

    outcome, records = anyio.run(main)
    assert (outcome.completed, outcome.reason) == (False, reason)
    assert [r.reason for r in records if isinstance(r, jr.CompactionFailed)] == [reason]
    assert not any(isinstance(r, jr.CompactionCompleted) for r in records)
    # The old context stands: the request builder sees no compaction.
    assert build_messages(records) == build_messages(
        [r for r in records if not isinstance(r, jr.CompactionStarted | jr.CompactionFailed)]
    )


def test_compact_is_refused_while_a_turn_runs(tmp_path: Path) -> None:
    config = _scripted(tmp_path, [{"text": "answer"}])

    async def main() -> str:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            turn = s.submit("hello")  # the session is busy from here to the terminal
            try:
                await s.compact()
            except CompactionRefused as exc:
                refused = exc.detail
            else:
                refused = ""
            async for _ in turn:
                pass
            return refused

    assert anyio.run(main) == "a turn is running; compact after it ends (or interrupt it)"


def test_the_repl_says_a_compact_refusal_as_a_sentence_without_the_session_id(
    tmp_path: Path,
) -> None:
    """t3: the REPL showed "Could not compact: session <id>: …"; the person is
    in that session, so the note is the reason alone, one sentence."""
    config = _scripted(tmp_path, [{"text": "answer"}])

    async def main() -> tuple[str, str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            turn = s.submit("hello")
            note = ""
            try:
                await s.compact()
            except CompactionRefused as exc:
                note = compact_refusal_note(exc)
            async for _ in turn:
                pass
            return note, s.session_id

    note, sid = anyio.run(main)
    assert note == "Could not compact: a turn is running; compact after it ends (or interrupt it)."
    assert sid not in note


def test_input_sent_during_a_manual_compaction_waits_for_it(tmp_path: Path) -> None:
    release = threading.Event()
    with FakeModel(command=COMMAND, hold_summary=release) as model:
        config = _config(model, tmp_path, percent=0)

        async def main() -> tuple[Any, str, bool, str, mind.TurnOutcome, list[jr.JournalRecord]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                for i in range(2):
                    await s.run(f"TOOL turn {i}")
                outcome: list[Any] = []
                async with anyio.create_task_group() as tg:

                    async def compacting() -> None:
                        outcome.append(await s.compact())

                    tg.start_soon(compacting)
                    # The summarisation request is held at the server: the
                    # compaction runs until it is released.
                    assert await anyio.to_thread.run_sync(model.summary_requested.wait, 20)
                    receipt = s.send("during")
                    busy = s.busy  # no turn beside the compaction
                    try:
                        s.submit("submitted")
                    except SessionBusyError as exc:
                        refused = exc.detail
                    else:
                        refused = ""
                    release.set()
                # The compaction ended; the turn that takes the input started then.
                turn = s.current
                assert turn is not None
                async for _ in turn:
                    pass
                return outcome[0], receipt.disposition, busy, refused, turn.outcome, s.history()

        compacted, disposition, busy, refused, after, records = anyio.run(main)
        last = model.requests[-1]
    assert compacted.completed
    assert (disposition, busy) == ("next_turn", False)
    assert refused == "a compaction is running; send the input and it waits for it"
    assert after.event.status == ev.TurnStatus.completed
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    started = [r for r in records if isinstance(r, jr.TurnStarted)]
    assert len(started) == 3 and started[-1].seq > done.seq
    texts = user_texts(last["messages"])
    assert texts[0].startswith(SUMMARY_PREFIX)
    assert texts[-1] == "during"
    assert "submitted" not in texts


def test_an_interrupt_during_a_compaction_leaves_the_old_context(tmp_path: Path) -> None:
    with FakeModel(command=COMMAND, summary_delay_s=5) as model:
        config = _config(model, tmp_path, percent=0)

        async def main() -> tuple[ev.TurnStatus, list[jr.JournalRecord], str]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                await s.run("TOOL first")
                model.overflow_next = 1
                turn = s.submit("second")
                # The summarisation request arrived (compaction_started is durable):
                # its slow reply holds the compaction there.
                seen = await anyio.to_thread.run_sync(model.summary_requested.wait, 20)
                assert seen
                turn.interrupt()
                async for _ in turn:
                    pass
                after = await s.run("third")
                return turn.outcome.event.status, s.history(), after.final_text

        status, records, final = anyio.run(main)
    assert status == ev.TurnStatus.interrupted
    assert [r.reason for r in records if isinstance(r, jr.CompactionFailed)] == ["interrupted"]
    assert not any(isinstance(r, jr.CompactionCompleted) for r in records)
    assert final.startswith("saw 3 user message(s): TOOL first | second | third")


def _sse_text(text: str) -> bytes:
    chunks: list[dict[str, object]] = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def _error(status: int) -> Reply:
    body = json.dumps({"error": {"message": "busy", "type": "server_error"}}).encode()
    return Reply(
        status=status, body=body, content_type="application/json", headers={"retry-after": "0"}
    )


async def _first_turn_then_compact(
    tmp_path: Path, server: ReplayServer, retries: int
) -> tuple[Any, list[jr.JournalRecord]]:
    config = mind.resolve_config(
        provider="openai-chat",
        model="gpt-4o",
        base_url=server.url,
        approval="never",
        env={"OPENAI_API_KEY": "sk-test", "MIND_MAX_RETRIES": str(retries)},
    )
    async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
        s = await rt.create_session(cwd=tmp_path, config=config)
        await s.run("a first question, long enough that a short summary replaces it")
        return await s.compact(), s.history()


def test_a_transient_failure_of_the_summary_request_is_retried(tmp_path: Path) -> None:
    answer = Reply(body=_sse_text("a first answer"))
    summary = _sse_text("asked a question")
    replies = [
        answer,
        Reply(body=summary, truncate_at=20),  # stream_cut (the first backoff: 0.5 s)
        _error(503),  # server / overloaded (retry-after: 0)
        _error(429),  # rate_limited
        Reply(body=summary),
    ]
    with ReplayServer(replies) as server:
        outcome, records = anyio.run(_first_turn_then_compact, tmp_path, server, 4)
        sent = len(server.requests)
    assert outcome.completed, outcome
    assert sent == 5
    (done,) = [r for r in records if isinstance(r, jr.CompactionCompleted)]
    assert done.summary.startswith("asked a question")


def test_a_summary_request_failing_past_the_retry_policy_fails_the_compaction(
    tmp_path: Path,
) -> None:
    replies = [Reply(body=_sse_text("a first answer")), _error(503), _error(503), _error(503)]
    with ReplayServer(replies) as server:
        outcome, records = anyio.run(_first_turn_then_compact, tmp_path, server, 1)
        sent = len(server.requests)
    assert not outcome.completed
    assert sent == 3  # the first attempt and the one retry the policy allows
    (failed,) = [r for r in records if isinstance(r, jr.CompactionFailed)]
    assert failed.reason.startswith("the summarisation request failed")
    assert not any(isinstance(r, jr.CompactionCompleted) for r in records)


def _runs(marker: str, timeout_s: float = 10.0) -> bool:
    """Whether the command ``sleep marker`` itself runs within ``timeout_s``
    (its supervisor, whose argv names it too, may not hold its directory
    yet). Polls the process table of other processes."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            with contextlib.suppress(OSError):  # ended meanwhile
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes() if entry.isdigit() else b""
                if cmdline == b"sleep\0" + marker.encode() + b"\0":  # not its supervisor
                    return True
        time.sleep(0.01)
    return False


def test_a_command_still_running_stays_known_to_the_model_after_a_compaction(
    tmp_path: Path,
) -> None:
    """A real supervisor's command runs across the compaction (a crashed
    mind left it, its call still without a result): the summary the next
    request carries names it with its effect id."""
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"  # sleep's argument: this test's process
    call = ToolCall(call_id="c_run", name="shell", arguments=f'{{"command": "sleep {marker}"}}')
    with FakeModel(command=COMMAND) as model:
        config = _config(model, tmp_path, percent=0)

        async def main() -> tuple[Any, str, str, list[dict[str, Any]]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                await s.run("TOOL first")
                effects_dir = s.tools.effects_dir
                assert effects_dir is not None
                s.journal.append(rec.turn_started("turn_crashed"))
                recorded = jr.RecordedToolCall(
                    call_id=call.call_id, name=call.name, arguments=call.arguments
                )
                s.journal.append(rec.model_round("turn_crashed", "", [recorded]))
                effects = SessionEffects(s.session_id, s.journal, effects_dir)
                inv = effects.propose("turn_crashed", call)
                effects.prepare(inv)
                handle = await supervision.start(
                    effects_dir / inv.effect_id,
                    ["sleep", marker],
                    cwd=s.cwd,
                    env=None,
                    timeout_s=600,
                    max_output_bytes=4096,
                )
                effects.running(inv, handle.pid, handle.start_identity)
                try:
                    # The command runs (an inspection before its supervisor
                    # holds the directory would mark it never started).
                    assert await anyio.to_thread.run_sync(_runs, marker)
                    outcome = await s.compact()
                    running = [e.effect_id for e in s.running_effects()]
                    # The next request, built from the journal as a turn builds it.
                    request = ModelRequest(
                        model=config.provider.model,
                        system="",
                        messages=build_messages(s.journal.records),
                        tools=[],
                        max_output_bytes=1024,
                    )
                    async for _ in s.provider.stream(request):
                        pass
                finally:
                    s.kill_effect(inv.effect_id)
                    with anyio.fail_after(10):
                        await supervision.wait(handle)
                return outcome, inv.effect_id, ",".join(running), model.requests[-1]["messages"]

        outcome, effect_id, running, sent = anyio.run(main)
    assert outcome.completed
    assert running == effect_id  # it ran across the compaction
    summary = user_texts(sent)[0]
    assert summary.startswith(SUMMARY_PREFIX)
    assert f"still running: shell `sleep {marker}` (effect {effect_id})" in summary


def _sse_tool_call(arguments: str) -> bytes:
    call = {"index": 0, "id": "call_x", "type": "function"}
    call["function"] = {"name": "shell", "arguments": arguments}
    chunks: list[dict[str, object]] = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (_sse_text("s" * 70_000), "past the summary's cap of 64 KiB"),
        (_sse_tool_call(json.dumps({"command": "x" * 100_000})), "past the summary's cap"),
        (_sse_tool_call(json.dumps({"command": "touch evil.log"})), "a tool call (shell)"),
    ],
    ids=["huge-summary", "huge-tool-call", "small-tool-call"],
)
def test_a_summarisation_failure_says_what_happened(tmp_path: Path, body: bytes, said: str) -> None:
    replies = [Reply(body=_sse_text("a first answer")), Reply(body=body)]
    with ReplayServer(replies) as server:
        outcome, records = anyio.run(_first_turn_then_compact, tmp_path, server, 0)
    (failed,) = [r for r in records if isinstance(r, jr.CompactionFailed)]
    assert not outcome.completed and outcome.reason == failed.reason
    assert said in failed.reason, failed.reason
    for wrong in ("max_output_mib", "stays waiting", "was empty"):
        assert wrong not in failed.reason
    assert not (tmp_path / "evil.log").exists()
