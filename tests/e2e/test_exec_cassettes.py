"""Every recorded cassette and constructed quirk through the real ``mind exec --json``.

A loopback :class:`ReplayServer` serves each case byte for byte (whole, and
split at random points); ``mind exec`` runs as a subprocess against it. Text,
tool calls, the tool results fed back in the next request, usage and failures
must come out right for every case. Tool-call cases are followed by the
recorded follow-up text stream of the same API, so the whole tool loop runs:
the second request the server receives must carry one result per call, in the
provider's required shape (checked by the provider sequencing validators).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import MindResult, RunMind
from tests.support import provider_rules
from tests.support.cases import API_KIND, CASES, Case, Expect
from tests.support.replay_server import ReplayServer, Reply, fixtures_dir, random_splits

FIXTURES = fixtures_dir()

FOLLOW_UP = {
    "openai-chat": "cassettes/openai-chat/stream_text_after_tool_result_gpt4o",
    "openai-responses": "cassettes/openai-responses/stream_text_after_function_output_gpt4o",
    "anthropic-messages": "cassettes/anthropic-messages/stream_text_after_tool_result_sonnet4",
}
VALIDATE = {
    "openai-chat": provider_rules.validate_openai_chat,
    "openai-responses": provider_rules.validate_openai_responses,
    "anthropic-messages": provider_rules.validate_anthropic,
}


def _base_url(server: ReplayServer, api: str) -> str:
    return server.url if api == "anthropic-messages" else server.url + "/v1"


def _exec(
    run_mind: RunMind, server: ReplayServer, api: str, tmp: Path, retries: int = 0
) -> MindResult:
    return run_mind(
        "exec",
        "--json",
        "--provider",
        API_KIND[api],
        "--base-url",
        _base_url(server, api),
        "--model",
        "test-model",
        "--approval",
        "never",
        "--cwd",
        str(tmp),
        "hello",
        env={"MIND_MAX_RETRIES": str(retries)},
    )


def _reply(case: Case, split: str) -> Reply:
    body = Path(f"{case.prefix}.response").read_bytes()
    splits = random_splits(len(body), 8, zlib.crc32(case.id.encode())) if split == "random" else []
    return Reply.from_case(case.prefix, splits=splits)


def _text(r: MindResult) -> str:
    return "".join(e["text"] for e in r.of_type("message.delta"))


def _usage(r: MindResult) -> tuple[int | None, int | None]:
    """The turn's counts; an unreported one is absent from the event (None)."""
    u = r.of_type("turn.completed")[-1]["usage"]
    return (u.get("input_tokens"), u.get("output_tokens"))


def _follow_up(api: str) -> Case:
    (case,) = [c for c in CASES if c.prefix == FIXTURES / FOLLOW_UP[api]]
    return case


def _results_sent(api: str, body: dict[str, Any]) -> dict[str, str]:
    """call id -> tool result text, as the provider request carries them."""
    out: dict[str, str] = {}
    if api == "openai-chat":
        for m in body["messages"]:
            if m["role"] == "tool":
                out[m["tool_call_id"]] = m["content"]
    elif api == "openai-responses":
        for item in body["input"]:
            if item.get("type") == "function_call_output":
                out[item["call_id"]] = item["output"]
    else:
        for m in body["messages"]:
            if m["role"] == "user" and isinstance(m["content"], list):
                for block in m["content"]:
                    if block.get("type") == "tool_result":
                        content = block["content"]
                        out[block["tool_use_id"]] = (
                            content
                            if isinstance(content, str)
                            else "".join(b.get("text", "") for b in content)
                        )
    return out


def _check_events_are_well_formed(r: MindResult) -> None:
    types = [e["type"] for e in r.events]
    if "input.waiting" in types:  # the input of a transiently failed turn waits
        # printed just before its turn.completed, which stays the last line
        assert types[-2:] == ["input.waiting", "turn.completed"], types
        assert r.events[-1]["status"] == "failed", r.events[-1]
        types.remove("input.waiting")
    assert types[:2] == ["session.started", "turn.started"], types
    assert types[-1] == "turn.completed" and types.count("turn.completed") == 1
    assert set(types) <= {
        "session.started",
        "turn.started",
        "message.delta",
        "message.completed",
        "tool.call",
        "tool.result",
        "turn.retrying",
        "turn.warning",
        "context.usage",
        "turn.completed",
    }


@pytest.mark.parametrize("split", ["whole", "random"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case_through_mind_exec(case: Case, split: str, tmp_path: Path, run_mind: RunMind) -> None:
    exp: Expect = case.expect
    replies = [_reply(case, split)]
    follow = _follow_up(case.api) if exp.tool_calls and exp.failure is None else None
    if follow is not None:
        replies.append(_reply(follow, split))
    with ReplayServer(replies) as server:
        r = _exec(run_mind, server, case.api, tmp_path)
    _check_events_are_well_formed(r)
    done = r.of_type("turn.completed")[-1]
    if exp.failure is not None:
        assert (done["status"], done["failure"]["kind"], r.returncode) == ("failed", exp.failure, 1)
        assert f"({exp.failure})" in r.stderr.strip().splitlines()[-1]
        assert _text(r) == exp.text
        assert len(server.requests) == 1  # MIND_MAX_RETRIES=0: no retry
        return
    assert (done["status"], r.returncode) == ("completed", 0), r.stderr
    _check_context_usage(r, follow.expect if follow is not None else exp, 2 if follow else 1)
    # An answer cut at the token limit or by a filter says so (docs/design/providers.md §9).
    warned = {"length": ["output_truncated"], "content_filter": ["content_filtered"]}
    assert [w["kind"] for w in r.of_type("turn.warning")] == warned.get(exp.finish, [])
    calls = r.of_type("tool.call")
    assert [(c["name"], c["arguments"]) for c in calls] == [list(x) for x in exp.tool_calls] or [
        (c["name"], c["arguments"]) for c in calls
    ] == [tuple(x) for x in exp.tool_calls]
    if follow is None:
        assert _text(r) == exp.text
        completed = r.of_type("message.completed")
        assert [m["text"] for m in completed] == ([exp.text] if exp.text else [])
        if exp.usage is not None:
            assert _usage(r) == exp.usage
        assert len(server.requests) == 1
        return
    # the tool loop: one result per call, fed back in the next request
    results = r.of_type("tool.result")
    assert [x["call_id"] for x in results] == [c["call_id"] for c in calls]
    assert len(server.requests) == 2
    second = server.requests[1].json()
    VALIDATE[case.api](second)
    sent = _results_sent(case.api, second)
    assert len(sent) == len(calls)
    assert sorted(sent.values()) == sorted(x["output"] for x in results)
    assert _text(r) == exp.text + follow.expect.text
    assert r.of_type("message.completed")[-1]["text"] == follow.expect.text
    if exp.usage is not None and follow.expect.usage is not None:
        assert _usage(r) == (
            (exp.usage[0] or 0) + (follow.expect.usage[0] or 0),
            (exp.usage[1] or 0) + (follow.expect.usage[1] or 0),
        )


def _check_context_usage(r: MindResult, last: Expect, rounds: int) -> None:
    """One ``context.usage`` per model round, giving the last round's counts as
    the server sent them (cache counts included, an unreported one absent);
    the window of ``test-model`` is unknown, so absent (never guessed)."""
    usage = r.of_type("context.usage")
    assert len(usage) == rounds
    got = usage[-1]
    if last.usage is not None:
        assert (got.get("input_tokens"), got.get("output_tokens")) == last.usage
    if last.cache is not None:
        assert (got.get("cache_read_tokens"), got.get("cache_write_tokens")) == last.cache
    assert "window" not in got


def _text_case(api: str) -> Case:
    return _follow_up(api)


def test_transient_server_error_is_retried_with_the_same_request(
    tmp_path: Path, run_mind: RunMind
) -> None:
    follow = _text_case("openai-chat")
    boom = Reply(
        status=503,
        body=b'{"error": {"message": "upstream overloaded", "type": "server_error"}}',
        content_type="application/json",
    )
    with ReplayServer([boom, Reply.from_case(follow.prefix)]) as server:
        r = _exec(run_mind, server, "openai-chat", tmp_path, retries=2)
    assert r.returncode == 0, r.stderr
    (retry,) = r.of_type("turn.retrying")
    assert retry["attempt"] == 1 and retry["failure"]["kind"] in {"server", "overloaded"}
    assert server.requests[0].json() == server.requests[1].json()
    assert _text(r) == follow.expect.text


def test_stream_cut_is_retried_then_completes(tmp_path: Path, run_mind: RunMind) -> None:
    follow = _text_case("anthropic-messages")
    size = len(Path(f"{follow.prefix}.response").read_bytes())
    cut = Reply.from_case(follow.prefix, truncate_at=size // 2)
    with ReplayServer([cut, Reply.from_case(follow.prefix)]) as server:
        r = _exec(run_mind, server, "anthropic-messages", tmp_path, retries=1)
    assert r.returncode == 0, r.stderr
    assert [x["failure"]["kind"] for x in r.of_type("turn.retrying")] == ["stream_cut"]
    assert r.of_type("message.completed")[-1]["text"] == follow.expect.text


def test_retry_after_is_honoured_and_interrupt_ends_the_wait(
    tmp_path: Path, mind_env: dict[str, str]
) -> None:
    prefix = FIXTURES / "quirks/openai-chat/rate_limited_429_retry_after"
    with ReplayServer([Reply.from_case(prefix)], repeat_last=True) as server:
        env = dict(mind_env, MIND_MAX_RETRIES="3")
        with subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mind.shell.cli",
                "exec",
                "--json",
                "--provider",
                "openai-chat",
                "--base-url",
                server.url + "/v1",
                "--model",
                "m",
                "--cwd",
                str(tmp_path),
                "hi",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            events = []
            for line in proc.stdout:
                events.append(json.loads(line))
                if events[-1]["type"] == "turn.retrying":
                    os.kill(proc.pid, signal.SIGINT)
            proc.wait(timeout=30)
    retry = [e for e in events if e["type"] == "turn.retrying"]
    assert [(e["delay_s"], e["failure"]["kind"]) for e in retry] == [(30.0, "rate_limited")]
    assert events[-1]["type"] == "turn.completed" and events[-1]["status"] == "interrupted"
    assert proc.returncode == 130
