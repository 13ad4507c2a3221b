"""Context usage as a fact through the real ``mind exec --json``
(docs/design/context.md §1): the ``context.usage`` event after each model
round, unknown values left unknown end to end, and a window learned from the
server's own context-length error kept across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.e2e.conftest import MindResult, RunMind
from tests.support.replay_server import ReplayServer, Reply, fixtures_dir

FIXTURES = fixtures_dir()
WITH_USAGE = FIXTURES / "cassettes/openai-chat/stream_text_with_usage_gpt4o"
NO_USAGE = FIXTURES / "quirks/openai-chat/llamacpp_no_done_sentinel"


def _exec(
    run_mind: RunMind, server: ReplayServer, tmp: Path, model: str, *extra: str
) -> MindResult:
    return run_mind(
        "exec",
        "--json",
        "--provider",
        "openai-chat",
        "--base-url",
        server.url + "/v1",
        "--model",
        model,
        "--approval",
        "never",
        "--cwd",
        str(tmp),
        *extra,
        env={"MIND_MAX_RETRIES": "0"},
    )


def _journal(tmp: Path, session_id: str) -> list[dict[str, Any]]:
    path = tmp / "mind-home" / "sessions" / session_id / "journal.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_context_usage_follows_each_round_before_the_turn_ends(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with ReplayServer([Reply.from_case(WITH_USAGE)]) as server:
        r = _exec(run_mind, server, tmp_path, "gpt-4o", "hello")
    assert r.returncode == 0, r.stderr
    types = [e["type"] for e in r.events if e["type"] != "message.delta"]
    assert types == [
        "session.started",
        "turn.started",
        "message.completed",
        "context.usage",
        "turn.completed",
    ]
    (usage,) = r.of_type("context.usage")
    assert usage == {
        "type": "context.usage",
        "turn_id": r.of_type("turn.started")[0]["turn_id"],
        "input_tokens": 20,
        "output_tokens": 2,
        "cache_read_tokens": 0,  # reported as 0: known, unlike an absent count
        "window": 128_000,  # gpt-4o's published window (the built-in table)
        "projected_tokens": 22,
    }


def test_a_server_that_reports_no_usage_stays_unknown_end_to_end(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with ReplayServer([Reply.from_case(NO_USAGE)]) as server:
        r = _exec(run_mind, server, tmp_path, "local-llama", "hello")
    assert r.returncode == 0, r.stderr
    (usage,) = r.of_type("context.usage")
    assert set(usage) == {"type", "turn_id"}  # no counts, no window, no projection
    assert r.of_type("turn.completed")[0]["usage"] == {}
    sid = r.of_type("session.started")[0]["session_id"]
    rounds = [x for x in _journal(tmp_path, sid) if x["type"] == "model_round"]
    assert [x["usage"] for x in rounds] == [{}]  # never written as 0


LLAMA_CPP_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9000,
        "n_ctx": 8192,
    }
}


def test_a_window_the_server_stated_survives_a_restart(tmp_path: Path, run_mind: RunMind) -> None:
    overflow = Reply(
        status=400, body=json.dumps(LLAMA_CPP_OVERFLOW).encode(), content_type="application/json"
    )
    with ReplayServer([overflow]) as server:
        first = _exec(run_mind, server, tmp_path, "local-llama", "hello")
    done = first.of_type("turn.completed")[0]
    assert (done["status"], done["failure"]["kind"]) == ("failed", "context_length")
    sid = first.of_type("session.started")[0]["session_id"]
    learned = [x for x in _journal(tmp_path, sid) if x["type"] == "context_window_learned"]
    assert [(x["model"], x["window"]) for x in learned] == [("local-llama", 8192)]
    # A new process: the window comes from the journal, not from memory.
    with ReplayServer([Reply.from_case(WITH_USAGE)]) as server:
        again = _exec(run_mind, server, tmp_path, "local-llama", "--session", sid, "go on")
    assert again.returncode == 0, again.stderr
    (usage,) = again.of_type("context.usage")
    assert (usage["window"], usage["projected_tokens"]) == (8192, 22)
    # A configured window still wins over the learned one.
    with ReplayServer([Reply.from_case(WITH_USAGE)]) as server:
        configured = _exec(
            run_mind,
            server,
            tmp_path,
            "local-llama",
            "--model-context-window",
            "4000",
            "--session",
            sid,
            "more",
        )
    assert configured.of_type("context.usage")[0]["window"] == 4000
