"""A model round too large for the journal fails like one past the output cap
(docs/design/turn.md §5): the answer is not kept, so the input is not acknowledged."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import anyio

import mind
from mind.generated import journal as jr
from mind.shell.inbox import Inbox
from mind.shell.journal import MAX_LINE_BYTES, Journal
from tests.support.loopback import LoopbackServer

# 3 MiB of control characters: under the 8 MiB output cap, but the journal's
# JSON escapes each as \u0001, so the round's record would be ~18 MiB.
PIECE = "\x01" * 16384
PIECES = 3 * 64


class _Escaped(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        line = json.dumps({"choices": [{"index": 0, "delta": {"content": PIECE}}]})
        self.wfile.write(f"data: {line}\n\n".encode() * PIECES)
        end = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.wfile.write(f"data: {end}\n\ndata: [DONE]\n\n".encode())


class EscapedModel(LoopbackServer):
    handler = _Escaped
    thread_name = "escaped-model"


def test_a_round_over_the_record_limit_fails_output_limit_and_keeps_the_input(
    tmp_path: Path,
) -> None:
    assert len(json.dumps(PIECE * PIECES)) > MAX_LINE_BYTES
    with EscapedModel() as server:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=f"http://127.0.0.1:{server.port}/v1",
            model="m",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        async def main() -> tuple[mind.TurnOutcome, str]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                session = await rt.create_session(cwd=tmp_path, config=config)
                turn = session.submit("answer", message_id="msg-1")
                return await turn.wait(), session.session_id

        outcome, sid = anyio.run(main)
    assert outcome.status == "failed"
    assert outcome.event.failure is not None and outcome.event.failure.kind == "output_limit"
    # The message names the limit that was hit: the journal's record limit,
    # not max_output_mib (the answer was well under that).
    assert "16 MiB" in outcome.event.failure.message, outcome.event.failure.message
    assert "record" in outcome.event.failure.message
    assert "max_output_mib" not in outcome.event.failure.message
    directory = tmp_path / "state" / "sessions" / sid
    with Journal.open(directory / "journal.jsonl") as journal:
        records = list(journal.records)
    (done,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert done.acknowledged == []
    assert not [r for r in records if isinstance(r, jr.ModelRound)]
    inbox = Inbox.open(directory / "inbox.json", acknowledged=())
    assert [e.message_id for e in inbox.entries] == ["msg-1"]
