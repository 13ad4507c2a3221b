"""A round's request is frozen: every retry sends the same bytes, and input
arriving during the backoff waits for the next round boundary.

A loopback Chat Completions server fails the first request with a retryable
``503`` (``Retry-After: 0``); the test steers as soon as the turn says it is
retrying.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import anyio
import msgspec

import mind
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.shell.journal import Journal
from tests.support.fake_model import FakeModel, user_texts


def test_a_retry_resends_the_frozen_request_and_steering_waits_for_the_next_round(
    tmp_path: Path,
) -> None:
    with FakeModel(fail_first=1) as model:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="fake",
            env={"MIND_HOME": str(tmp_path / "home")},
        )

        async def main() -> tuple[list[str], Path]:
            async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
                s = await rt.create_session(cwd=tmp_path, config=config)
                s.send("first question", message_id="m1")
                kinds: list[str] = []
                async for e in s.events():
                    kinds.append(type(e).__name__)
                    if isinstance(e, ev.TurnRetryingEvent):
                        assert s.steer("steered in the backoff", message_id="m2").disposition == (
                            "steering"
                        )
                return kinds, s.journal.path

        kinds, path = anyio.run(main)
    assert kinds.count("TurnRetryingEvent") == 1
    assert kinds.count("TurnCompletedEvent") == 1
    failed, retried, _steered = model.raw_requests
    assert retried == failed  # byte-identical: the frozen request, not a rebuilt one
    assert user_texts(model.requests[1]["messages"]) == ["first question"]
    assert user_texts(model.requests[2]["messages"]) == [
        "first question",
        "steered in the backoff",
    ]
    with Journal.open(path) as journal:
        records = list(journal.records)
    rounds = [r for r in records if isinstance(r, jr.ModelRound)]
    assert [r.attempts for r in rounds] == [2, 1]
    # The digest names the request the round answered; the steered round's differs.
    assert all(len(str(r.request_sha256)) == 64 for r in rounds)
    assert rounds[0].request_sha256 != rounds[1].request_sha256
    (end,) = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert (end.status, end.acknowledged) == (jr.TurnStatus.completed, ["m1", "m2"])


def test_the_request_digest_is_the_sha256_of_the_encoded_request() -> None:
    from mind.conversation import ModelRequest, UserMessage
    from mind.shell.turn_driver import request_digest

    request = ModelRequest(
        model="m", system="s", messages=[UserMessage(text="hi")], tools=[], max_output_bytes=10
    )
    assert request_digest(request) == hashlib.sha256(msgspec.json.encode(request)).hexdigest()
