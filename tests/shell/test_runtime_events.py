"""One event channel per consumer, with a bound: deltas may
coalesce, lifecycle events are never dropped, and events nobody asked for do
not pile up across turns."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import yaml

import mind
from mind.generated import events as ev
from mind.shell.turn_handle import DELTA_SLACK, EventChannel, EventFanOut
from tests.support.fake_model import FakeModel
from tests.support.loopback import LoopbackServer, OwnedServer


def _config(tmp_path: Path, replies: list[dict[str, Any]]) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval="never", env={})


def test_iterating_only_the_turns_leaves_no_backlog_in_the_session_after_20_turns(
    tmp_path: Path,
) -> None:
    """The README's pattern (``async for event in turn``) never reads
    ``session.events()``: what the session keeps for a consumer that never
    came is at most the last turn's events, not every turn's."""
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]}
            if i % 2 == 0
            else {"text": f"answer {i} in a few pieces of text"}
            for i in range(40)
        ],
    )

    async def main() -> tuple[list[ev.Event], str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            last = ""
            for i in range(20):
                turn = s.submit(f"question {i}")
                async for _ in turn:
                    pass
                assert turn.outcome.status == "completed"
                last = turn.turn_id
            return [e async for e in s.events()], last

    leftover, last = anyio.run(main)
    assert 0 < len(leftover) <= 12
    assert {getattr(e, "turn_id", last) for e in leftover} == {last}


def test_a_slow_session_consumer_loses_no_lifecycle_event(tmp_path: Path) -> None:
    """A consumer that reads one event, then waits for the whole turn and the
    queued turn after it, still gets every lifecycle event of both, in order."""
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "true"}}]},
            {"text": "first answer, in some pieces"},
            {"text": "second answer, in some pieces"},
        ],
    )

    async def main() -> list[str]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            first = s.submit("one")
            s.queue("two")
            seen: list[str] = []
            async for e in s.events():
                if not seen:
                    await first.wait()
                    assert s.current is not None and s.current is not first
                    await s.current.wait()
                seen.append(type(e).__name__)
            return seen

    seen = anyio.run(main)
    lifecycle = [t for t in seen if "Delta" not in t]
    assert lifecycle == [
        "InputAcceptedEvent",
        "InputAcceptedEvent",
        "TurnStartedEvent",
        "InputClaimedEvent",
        "ContextUsageEvent",  # after each model round, before its calls run
        "ToolCallEvent",
        "ToolResultEvent",
        "MessageCompletedEvent",
        "ContextUsageEvent",
        "TurnCompletedEvent",
        "TurnStartedEvent",
        "InputClaimedEvent",
        "MessageCompletedEvent",
        "ContextUsageEvent",
        "TurnCompletedEvent",
    ]


def test_deltas_coalesce_past_the_slack_and_keep_their_text_and_order() -> None:
    channel = EventChannel()
    sent: list[ev.Event] = []
    for i in range(1000):
        sent.append(ev.MessageDeltaEvent(turn_id="t", text=f"{i},"))
        if i % 250 == 249:
            sent.append(ev.ToolCallEvent(turn_id="t", call_id=f"c{i}", name="shell", arguments={}))
        if i % 100 == 0:
            sent.append(ev.ReasoningDeltaEvent(turn_id="t", text=f"r{i}"))
    for event in sent:
        channel.put(event)
    channel.close()
    assert len(channel) <= DELTA_SLACK + 4 * 2 + 10 * 2  # lifecycle events break runs

    async def drain() -> list[ev.Event]:
        return [e async for e in _iterate(channel)]

    got = anyio.run(drain)

    def text(events: list[ev.Event], kind: type) -> str:
        return "".join(e.text for e in events if isinstance(e, kind))

    assert text(got, ev.MessageDeltaEvent) == text(sent, ev.MessageDeltaEvent)
    assert text(got, ev.ReasoningDeltaEvent) == text(sent, ev.ReasoningDeltaEvent)
    calls = [e for e in got if isinstance(e, ev.ToolCallEvent)]
    assert [c.call_id for c in calls] == ["c249", "c499", "c749", "c999"]
    # Order holds: the text before each call is exactly what was sent before it.
    for call in calls:
        before_got = got[: got.index(call)]
        before_sent = sent[: sent.index(call)]
        assert text(before_got, ev.MessageDeltaEvent) == text(before_sent, ev.MessageDeltaEvent)


def test_alternating_kinds_coalesce_per_run_and_no_delta_crosses_a_lifecycle_event() -> None:
    """Reasoning and text alternating one character at a time, with a tool
    call every 5 000 deltas and a consumer that takes a few events now and
    then: the queue never exceeds the slack plus two per queued lifecycle
    event, and in every run between two lifecycle events each kind's text is
    exactly what was sent in that run."""
    channel = EventChannel()
    sent: list[ev.Event] = []
    taken: list[ev.Event] = []

    async def take(count: int) -> None:
        for _ in range(count):
            event = await channel.get()
            assert event is not None
            taken.append(event)

    for i in range(50_000):
        kind = ev.ReasoningDeltaEvent if i % 2 else ev.MessageDeltaEvent
        sent.append(kind(turn_id="t", text=chr(ord("a") + i % 26)))
        channel.put(sent[-1])
        if i % 5_000 == 4_999:
            sent.append(ev.ToolCallEvent(turn_id="t", call_id=f"c{i}", name="shell", arguments={}))
            channel.put(sent[-1])
        lifecycle = sum(1 for e in channel._items if isinstance(e, ev.ToolCallEvent))
        assert len(channel) <= DELTA_SLACK + 2 * (lifecycle + 1)
        if i % 7_000 == 6_999:
            anyio.run(take, 3)
    channel.close()

    async def drain() -> None:
        taken.extend([e async for e in _iterate(channel)])

    anyio.run(drain)

    def runs(events: list[ev.Event]) -> list[tuple[str, str]]:
        out, message, reasoning = [], "", ""
        for e in [*events, None]:
            if isinstance(e, ev.MessageDeltaEvent):
                message += e.text
            elif isinstance(e, ev.ReasoningDeltaEvent):
                reasoning += e.text
            else:
                out.append((message, reasoning))
                message = reasoning = ""
        return out

    assert len(taken) < len(sent) // 100  # it did coalesce
    assert runs(taken) == runs(sent)
    assert [e for e in taken if isinstance(e, ev.ToolCallEvent)] == [
        e for e in sent if isinstance(e, ev.ToolCallEvent)
    ]


def test_every_claim_of_a_turn_is_announced(tmp_path: Path) -> None:
    """``input.claimed`` at the turn's start, at the boundary after a tool
    result, and when draining after the final answer (steering sent while
    the answer streams, before the seal) — so a client (the REPL) knows
    what a turn took without reading the journal. A loopback model paces
    its stream so the steering lands between the first delta and the seal."""
    with FakeModel(chunk_delay_s=0.005) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        async def main() -> list[tuple[str, list[str]]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.send("TOOL start", message_id="m1")
                claims: list[tuple[str, list[str]]] = []
                steered = False
                async for e in s.events():
                    if isinstance(e, ev.ToolCallEvent):
                        s.steer("during the tool", message_id="m2")
                    elif isinstance(e, ev.MessageDeltaEvent) and not steered:
                        steered = True
                        s.steer("before the seal", message_id="m3")
                    elif isinstance(e, ev.InputClaimedEvent):
                        claims.append((str(e.at), list(e.message_ids)))
                return claims

        claims = anyio.run(main)
    assert claims == [("start", ["m1"]), ("boundary", ["m2"]), ("drain", ["m3"])]


async def _iterate(channel: EventChannel) -> Any:
    while (event := await channel.get()) is not None:
        yield event


def test_busy_and_known_ids_are_the_mailboxs_facts(tmp_path: Path) -> None:
    """One owner per fact: ``busy`` is the mailbox's ``has_turn_owner`` at
    every event, and a resent id is answered from the mailbox — also after
    the session is reopened, when only the journal remembers it."""
    config = _config(tmp_path, [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    state = tmp_path / "state"

    async def first() -> tuple[str, list[tuple[str, bool]]]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            receipts = [s.send("a", message_id="a")]
            async for _ in s.events():
                assert s.busy == s.mailbox.has_turn_owner
            receipts.append(s.queue("later", message_id="q"))  # idle: starts a turn
            receipts.append(s.send("a", message_id="a"))
            async for _ in s.events():
                assert s.busy == s.mailbox.has_turn_owner
            assert not s.busy
            return s.session_id, [(r.disposition, r.duplicate) for r in receipts]

    sid, receipts = anyio.run(first)
    assert receipts == [("started", False), ("started", False), ("started", True)]

    async def second() -> tuple[list[tuple[str, bool]], bool]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            again = [s.send("a", message_id="a"), s.send("later", message_id="q")]
            return [(r.disposition, r.duplicate) for r in again], s.busy

    assert anyio.run(second) == ([("started", True), ("started", True)], False)


class _AlternatingHandler(BaseHTTPRequestHandler):
    """Streams one chat reply whose deltas alternate one character of
    ``reasoning_content`` and one of ``content`` (as reasoning models do)."""

    protocol_version = "HTTP/1.1"
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = self.server.owner.body
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        self.wfile.write(body)


class _AlternatingModel(LoopbackServer):
    handler = _AlternatingHandler
    thread_name = "alternating-model"

    def __init__(self, text: str, reasoning: str) -> None:
        super().__init__()
        frames = []
        for r, t in zip(reasoning, text, strict=True):
            for delta in ({"reasoning_content": r}, {"content": t}):
                chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                frames.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        frames.append(b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n")
        self.body = b"".join(frames)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


def test_alternating_deltas_stay_bounded_for_a_consumer_that_reads_only_at_the_end(
    tmp_path: Path,
) -> None:
    """50 000 one-character deltas alternating reasoning and text, read only
    after the turn ended: the session's channel and the turn's own (which
    nobody iterates) each hold a bounded number of items, and what the
    consumer gets is every lifecycle event once, in order, with the text and
    the reasoning exactly as sent."""
    n = 25_000
    text = "".join(chr(ord("a") + i % 26) for i in range(n))
    reasoning = "".join(chr(ord("A") + i % 26) for i in range(n))
    with _AlternatingModel(text, reasoning) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        async def main() -> tuple[int, int, list[ev.Event], list[ev.Event]]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                turn = s.submit("think aloud")
                outcome = await turn.wait()
                assert outcome.status == "completed", outcome.event
                queued = (len(s._events), len(turn._events))
                from_session = [e async for e in s.events()]
                return *queued, from_session, [e async for e in turn]

        session_queued, turn_queued, got, late = anyio.run(main)
    assert session_queued <= DELTA_SLACK + 2 * 5, session_queued
    # Nobody iterated the turn while it ran: its deltas coalesced from the first.
    assert turn_queued <= 2 * 5, turn_queued
    turn_text = "".join(e.text for e in late if isinstance(e, ev.MessageDeltaEvent))
    assert turn_text == text
    assert [type(e) for e in late if not isinstance(e, _DELTA_TYPES)] == [
        ev.TurnStartedEvent,
        ev.InputClaimedEvent,
        ev.MessageCompletedEvent,
        ev.ContextUsageEvent,
        ev.TurnCompletedEvent,
    ]
    assert "".join(e.text for e in got if isinstance(e, ev.MessageDeltaEvent)) == text
    assert "".join(e.text for e in got if isinstance(e, ev.ReasoningDeltaEvent)) == reasoning
    lifecycle = [type(e).__name__ for e in got if not isinstance(e, _DELTA_TYPES)]
    assert lifecycle == [
        "InputAcceptedEvent",
        "TurnStartedEvent",
        "InputClaimedEvent",
        "MessageCompletedEvent",
        "ContextUsageEvent",
        "TurnCompletedEvent",
    ]
    # No delta moved across a lifecycle event: all of them sit between the
    # claim and the completed message.
    kinds = [isinstance(e, _DELTA_TYPES) for e in got]
    first, last = kinds.index(True), len(kinds) - 1 - kinds[::-1].index(True)
    assert all(kinds[first : last + 1])
    assert type(got[first - 1]).__name__ == "InputClaimedEvent"
    assert type(got[last + 1]).__name__ == "MessageCompletedEvent"


_DELTA_TYPES = (ev.MessageDeltaEvent, ev.ReasoningDeltaEvent)


def test_one_fan_out_gives_each_subscribed_channel_every_event_once() -> None:
    """A session publishes each event once; every subscribed consumer's own
    bounded channel gets it (a turn's channel coalescing from the first
    delta, the session's past its slack), and a channel given back gets no
    more."""
    fanout = EventFanOut()
    session = fanout.subscribe(EventChannel())
    turn = fanout.subscribe(EventChannel(slack=0))
    sent: list[ev.Event] = [ev.TurnStartedEvent(turn_id="t")]
    sent += [ev.MessageDeltaEvent(turn_id="t", text=f"{i},") for i in range(10)]
    sent.append(ev.MessageCompletedEvent(turn_id="t", text="done"))
    for event in sent:
        fanout.publish(event)
    fanout.unsubscribe(turn)
    fanout.publish(ev.TurnStartedEvent(turn_id="u"))
    session.close()
    turn.close()

    async def drain(channel: EventChannel) -> list[ev.Event]:
        return [e async for e in _iterate(channel)]

    assert anyio.run(drain, session) == [*sent, ev.TurnStartedEvent(turn_id="u")]
    text = "".join(f"{i}," for i in range(10))
    assert anyio.run(drain, turn) == [
        sent[0],
        ev.MessageDeltaEvent(turn_id="t", text=text),
        sent[-1],
    ]
