"""The library API (Runtime / Session / Turn) with the real scripted provider,
real journal and real tools — the same path ``mind exec`` and the REPL use."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
import yaml

import mind
from mind.errors import DropRefused, SessionBusyError, SessionError
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.history import build_messages
from mind.shell.journal import Journal
from mind.shell.tool_env import tool_environment
from tests.support import records as rec
from tests.support.sessions import created_session


def _config(
    tmp_path: Path, replies: list[dict[str, Any]], approval: str = "never"
) -> mind.ResolvedConfig:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(script), approval=approval, env={})


async def _collect(turn: mind.Turn, answer: str | None = None) -> list[ev.Event]:
    out: list[ev.Event] = []
    async for event in turn:
        out.append(event)
        if isinstance(event, ev.ApprovalRequestedEvent) and answer is not None:
            turn.decide(event.call_id, answer)  # type: ignore[arg-type]
    return out


def _records(path: Path) -> list[jr.JournalRecord]:
    with Journal.open(path) as j:
        return list(j.records)


@pytest.mark.parametrize(
    ("answer", "ran", "status"), [("yes", True, "ok"), ("no", False, "denied")]
)
def test_approval_decides_whether_the_tool_runs(
    tmp_path: Path, answer: str, ran: bool, status: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch made"}}]},
            {"text": "done"},
        ],
        approval="untrusted",
    )

    async def main() -> list[ev.Event]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=work, config=config, interactive=True)
            return await _collect(s.submit("go"), answer)

    events = anyio.run(main)
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ApprovalRequestedEvent") < kinds.index("ToolResultEvent")
    (result,) = [e for e in events if isinstance(e, ev.ToolResultEvent)]
    assert result.status == status
    assert (work / "made").exists() is ran
    assert isinstance(events[-1], ev.TurnCompletedEvent) and events[-1].status == "completed"


def test_always_covers_the_same_command_only(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "touch a"}}]},
            {
                "tool_calls": [
                    {"name": "shell", "arguments": {"command": "touch a"}},
                    {"name": "shell", "arguments": {"command": "touch b"}},
                ]
            },
            {"text": "done"},
        ],
        approval="untrusted",
    )
    asked: list[str] = []

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    asked.append(event.call_id)
                    turn.decide(event.call_id, "always" if len(asked) == 1 else "no")

    anyio.run(main)
    assert asked == ["call_1_1", "call_2_2"]  # the repeat of `touch a` was not asked again
    assert (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_interrupt_kills_the_running_tool_and_ends_interrupted(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 60"}}]},
            {"text": "never reached"},
        ],
    )

    async def main() -> tuple[list[ev.Event], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            turn = s.submit("go")
            events: list[ev.Event] = []
            async for event in turn:
                events.append(event)
                if isinstance(event, ev.ToolCallEvent):
                    turn.interrupt()
            return events, s.journal.path

    events, path = anyio.run(main)
    done = events[-1]
    assert isinstance(done, ev.TurnCompletedEvent) and done.status == "interrupted"
    records = _records(path)
    results = [r for r in records if isinstance(r, jr.ToolResult)]
    assert [(r.status, r.synthetic) for r in results] == [("interrupted", True)]
    terminal = [r for r in records if isinstance(r, jr.TurnCompleted)]
    # an interrupt is the person's decision: the prompt is consumed, not replayed
    prompts = [r.message_id for r in records if isinstance(r, jr.UserMessage)]
    assert len(terminal) == 1 and terminal[0].acknowledged == prompts


def test_a_second_submit_while_running_is_refused(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "sleep 60"}}]},
        ],
    )

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            turn = s.submit("first")
            with pytest.raises(SessionBusyError):
                s.submit("second")
            turn.interrupt()
            await turn.wait()

    anyio.run(main)


def test_open_closes_a_crashed_turn_without_rerunning_its_tool(tmp_path: Path) -> None:
    """A journal cut after a tool call (as a kill -9 leaves it) reopens clean."""
    config = _config(tmp_path, [{"text": "(the crashed round)"}, {"text": "after recovery"}])
    state = tmp_path / "state"
    path = state / "sessions" / "s1" / "journal.jsonl"
    path.parent.mkdir(parents=True)
    with Journal.open(path, create=True) as j:
        z: dict[str, Any] = {"seq": 0, "recorded_at_ms": 0}
        j.append(jr.SessionStarted(**z, session_id="s1", cwd=str(tmp_path), mind_version="0"))
        j.append(
            jr.TurnStarted(
                **z, turn_id="t1", provider="scripted", model="m", approval=jr.Approval.never
            )
        )
        j.append(
            jr.UserMessage(**z, turn_id="t1", message_id="m1", text="make it", kind=jr.Kind.prompt)
        )
        j.append(
            rec.model_round("t1", "", [rec.call("c1", arguments='{"command": "touch x"}')]),
            sync=True,
        )

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session("s1", config=config)
            outcome = await s.run("again")
            assert outcome.status == "completed"

    anyio.run(main)
    records = _records(path)
    assert not (tmp_path / "x").exists()  # never re-run
    (synthetic,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert synthetic.call_id == "c1" and synthetic.synthetic and synthetic.status == "interrupted"
    statuses = [(r.turn_id, r.status) for r in records if isinstance(r, jr.TurnCompleted)]
    assert statuses[0] == ("t1", "aborted") and statuses[1][1] == "completed"
    # the rebuilt history answers the orphan call before the next user message
    msgs = build_messages(records)
    kinds = [type(m).__name__ for m in msgs]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
        "AssistantMessage",
    ]


def test_missing_session_is_a_typed_refusal(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "x"}])

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            with pytest.raises(SessionError, match="no such session"):
                await rt.open_session("nope", config=config)

    anyio.run(main)


def test_tool_environment_drops_secrets() -> None:
    env = tool_environment(
        {
            "PATH": "/bin",
            "OPENAI_API_KEY": "sk-x",
            "GITHUB_TOKEN": "t",
            "db_password": "p",
            "HOME": "/root",
        }
    )
    assert env == {"PATH": "/bin", "HOME": "/root"}


def test_events_encode_as_the_json_lines_of_exec(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "hi"}])

    async def main() -> list[ev.Event]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            return await _collect(s.submit("hello"))

    events = anyio.run(main)
    lines = [msgspec.json.decode(msgspec.json.encode(e)) for e in events]
    assert lines[0]["type"] == "turn.started" and lines[-1]["type"] == "turn.completed"
    assert "".join(x["text"] for x in lines if x["type"] == "message.delta") == "hi"


# ---- durable input (docs/design/inbox.md §2) ------------------------------------------------


def _journal_kinds(path: Path) -> list[str]:
    out = []
    for r in _records(path):
        if isinstance(r, jr.UserMessage):
            out.append(f"user:{r.kind}:{r.text}")
        elif isinstance(r, jr.ModelRound):
            out.append("round")
        elif isinstance(r, jr.ToolResult):
            out.append("result")
        elif isinstance(r, jr.TurnCompleted):
            out.append(f"end:{r.status}")
    return out


def test_steering_reaches_the_model_after_the_tool_result(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "echo working"}}]},
            {"text": "steered answer"},
        ],
    )

    async def main() -> tuple[list[str], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            first = s.send("start", message_id="m1")
            receipts = [first.disposition]
            async for event in s.events():
                if isinstance(event, ev.ToolCallEvent):
                    receipts.append(s.steer("also do this", message_id="m2").disposition)
            return receipts, s.journal.path

    receipts, path = anyio.run(main)
    assert receipts == ["started", "steering"]
    assert _journal_kinds(path) == [
        "user:prompt:start",
        "round",
        "result",
        "user:steer:also do this",
        "round",
        "end:completed",
    ]
    (end,) = [r for r in _records(path) if isinstance(r, jr.TurnCompleted)]
    assert end.acknowledged == ["m1", "m2"]
    assert (
        not (path.parent / "inbox.json").exists()
        or b'"m1"' not in (path.parent / "inbox.json").read_bytes()
    )


def test_input_after_the_seal_runs_as_the_next_turn(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "first answer"}, {"text": "second answer"}])

    async def main() -> tuple[list[str], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            receipts = [s.send("one").disposition]
            async for event in s.events():
                if isinstance(event, ev.MessageCompletedEvent) and event.text == "first answer":
                    receipts.append(s.steer("two").disposition)  # sealed: next turn
            return receipts, s.journal.path

    receipts, path = anyio.run(main)
    # The seal and the terminal record follow the final round with no await
    # between them, so by the time a consumer sees the answer the turn has
    # ended: the steer starts the next turn itself. Either way it is never
    # part of the sealed turn.
    assert receipts[0] == "started" and receipts[1] in ("next_turn", "started")
    assert _journal_kinds(path) == [
        "user:prompt:one",
        "round",
        "end:completed",
        "user:steer:two",
        "round",
        "end:completed",
    ]


def test_queue_waits_for_the_next_turn_and_ids_are_idempotent(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [
            {"tool_calls": [{"name": "shell", "arguments": {"command": "echo x"}}]},
            {"text": "a"},
            {"text": "b"},
        ],
    )

    async def main() -> tuple[list[mind.InputReceipt], Path]:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            out = [s.send("one", message_id="p")]
            async for event in s.events():
                if isinstance(event, ev.ToolCallEvent):
                    out.append(s.queue("later", message_id="q"))
                    out.append(s.queue("later", message_id="q"))  # a retry with the same id
            out.append(s.send("one", message_id="p"))  # acknowledged already
            return out, s.journal.path

    receipts, path = anyio.run(main)
    assert [(r.disposition, r.duplicate) for r in receipts] == [
        ("started", False),
        ("next_turn", False),
        ("next_turn", True),
        ("started", True),
    ]
    kinds = _journal_kinds(path)
    assert kinds.count("user:queue:later") == 1 and kinds.count("end:completed") == 2


def test_empty_input_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "x"}])

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            with pytest.raises(mind.errors.InputRefused) as info:
                s.send("   ")
            assert info.value.reason == "empty"
            assert not s.busy and not s.inbox.entries

    anyio.run(main)


def test_unacknowledged_input_replays_once_after_reopen(tmp_path: Path) -> None:
    """An input durable in inbox.json but never consumed (a crash right after
    accepting it) runs, exactly once, when the session is opened again."""
    config = _config(tmp_path, [{"text": "replayed answer"}])
    state = tmp_path / "state"

    async def first() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            return s.session_id

    sid = anyio.run(first)
    from mind.generated.inbox import InboxEntry, InboxKind
    from mind.shell.inbox import Inbox

    inbox = Inbox.open(state / "sessions" / sid / "inbox.json", acknowledged=())
    inbox.add(
        InboxEntry(
            message_id="lost?",
            text="do not lose me",
            kind=InboxKind.prompt,
            accepted_at_ms=1,
            recovered=False,
        )
    )

    async def second() -> tuple[int, str | None]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            assert s.recovery is not None
            replayed = s.recovery.replayed_inputs
            turn = s.resume_pending()
            assert turn is not None
            async for _ in s.events():
                pass
            return replayed, turn.outcome.status

    replayed, status = anyio.run(second)
    assert (replayed, status) == (1, "completed")

    async def third() -> int:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            assert s.resume_pending() is None
            return s.recovery.replayed_inputs if s.recovery else -1

    assert anyio.run(third) == 0
    path = state / "sessions" / sid / "journal.jsonl"
    assert _journal_kinds(path).count("user:prompt:do not lose me") == 1


def test_a_live_holder_blocks_a_second_runtime(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"text": "x"}])
    state = tmp_path / "state"

    async def main() -> None:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=config)
            # this process holds it: a second runtime in the same process gets the same owner
            lease = (state / "sessions" / s.session_id / "lease").read_bytes()
            assert b'"pid"' in lease
        assert not (state / "sessions" / s.session_id / "lease").exists()  # released on close

    anyio.run(main)


# ---- waiting input: announced, and dropped for good (docs/design/mailbox.md §6) ---------------


def _unreachable_model() -> mind.ResolvedConfig:
    """A model server that refuses connections: every turn fails (network, transient)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return mind.resolve_config(
        provider="openai-chat",
        base_url=f"http://127.0.0.1:{port}/v1",
        model="m",
        env={"MIND_MAX_RETRIES": "0"},
    )


def test_input_left_by_a_failed_turn_is_announced_and_dropped_for_good(tmp_path: Path) -> None:
    state = tmp_path / "state"

    async def fail_then_drop() -> str:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.create_session(cwd=tmp_path, config=_unreachable_model())
            s.send("do X\nplease", message_id="msg-x")
            events = [e async for e in s.events()]
            (done,) = [e for e in events if isinstance(e, ev.TurnCompletedEvent)]
            assert done.status == "failed"
            (waiting,) = [e for e in events if isinstance(e, ev.InputWaitingEvent)]
            assert isinstance(events[-1], ev.InputWaitingEvent)  # after the turn's end
            assert [(m.message_id, m.kind, m.first_line) for m in waiting.messages] == [
                ("msg-x", "prompt", "do X")
            ]
            assert waiting.messages[0].accepted_at_ms > 0
            assert waiting.drop_command == f"mind inbox {s.session_id} --drop ID"
            with pytest.raises(DropRefused, match="no waiting message"):
                s.drop("nope")
            dropped = s.drop("msg-")  # a unique prefix
            assert (dropped.message_id, dropped.text) == ("msg-x", "do X\nplease")
            assert s.waiting == [] and s.inbox.entries == []
            with pytest.raises(DropRefused):
                s.drop("msg-x")
            assert s.send("do X\nplease", message_id="msg-x").duplicate  # never back
            return s.session_id

    sid = anyio.run(fail_then_drop)
    path = state / "sessions" / sid / "journal.jsonl"
    assert [r.message_id for r in _records(path) if isinstance(r, jr.InputDropped)] == ["msg-x"]
    assert msgspec.json.decode((state / "sessions" / sid / "inbox.json").read_bytes()) == {
        "version": 1,
        "entries": [],
    }
    config = _config(tmp_path, [{"text": "y done"}])

    async def reopen() -> list[object]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            assert s.recovery is not None and s.recovery.replayed_inputs == 0
            assert s.resume_pending() is None
            await s.run("do Y")
            return list(build_messages(s.journal.records))

    messages = anyio.run(reopen)
    assert [getattr(m, "text", None) for m in messages] == ["do Y", "y done"]


def test_a_drop_journaled_before_a_crash_cleaned_the_inbox_never_replays(
    tmp_path: Path,
) -> None:
    """kill -9 between the ``input_dropped`` record and the inbox rewrite
    leaves the entry in inbox.json: opening filters it like an acknowledgement."""
    from mind.generated.inbox import InboxEntry, InboxKind
    from mind.shell.inbox import Inbox

    config = _config(tmp_path, [{"text": "x"}])
    state = tmp_path / "state"

    sid = created_session(state, tmp_path, config)
    directory = state / "sessions" / sid
    Inbox.open(directory / "inbox.json", acknowledged=()).add(
        InboxEntry(
            message_id="gone",
            text="dropped",
            kind=InboxKind.queue,
            accepted_at_ms=1,
            recovered=False,
        )
    )
    with Journal.open(directory / "journal.jsonl") as j:
        j.append(jr.InputDropped(seq=0, recorded_at_ms=0, message_id="gone"), sync=True)

    async def reopen() -> tuple[int, list[str]]:
        async with mind.Runtime.open(state_root=state) as rt:
            s = await rt.open_session(sid, config=config)
            assert s.recovery is not None
            return s.recovery.replayed_inputs, [m.message_id for m in s.waiting]

    assert anyio.run(reopen) == (0, [])
    assert b"gone" not in (directory / "inbox.json").read_bytes()  # cleaned on open


def test_the_running_turns_input_cannot_be_dropped(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [{"tool_calls": [{"name": "shell", "arguments": {"command": "touch x"}}]}, {"text": "ok"}],
        approval="untrusted",
    )

    async def main() -> None:
        asked = False
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=True)
            turn = s.submit("go", message_id="claimed-1")
            s.queue("later", message_id="queued-1")
            s.queue("later too", message_id="queued-2")
            async for event in turn:
                if isinstance(event, ev.ApprovalRequestedEvent):
                    asked = True
                    with pytest.raises(DropRefused, match="running turn has already taken it"):
                        s.drop("claimed-1")
                    with pytest.raises(DropRefused, match="no waiting message"):
                        s.drop("")
                    with pytest.raises(DropRefused, match="matches several"):
                        s.drop("queued")
                    assert s.drop("queued-1").message_id == "queued-1"
                    assert s.drop("queued-2").text == "later too"
                    turn.decide(event.call_id, "yes")
            assert asked and turn.outcome.status == "completed"
            assert [m.message_id for m in s.waiting] == []

    anyio.run(main)
