"""The context usage a person sees in the REPL (docs/design/context.md §1), in
a real pseudo-terminal read through a terminal emulator: the status line under
the input (``12k / 128k tokens (9%)``, ``12k tokens`` with no known window,
nothing when nothing is known) and ``/status``'s ``context`` line."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_repl import Spawn, exit_cleanly, spawn, words
from tests.e2e.test_repl_redraw import spawn_repl, under_input, wait_for_screen
from tests.support.replay_server import ReplayServer, Reply

ENTER = "\r"
__all__ = ["spawn"]  # the fixture, used by name


def _answer(text: str, usage: dict[str, object] | None) -> Reply:
    """An OpenAI Chat stream answering ``text``, reporting ``usage`` (None: nothing)."""
    chunks: list[dict[str, object]] = [
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage is not None:
        chunks.append({"choices": [], "usage": usage})
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    return Reply(body=body)


USAGE = {
    "prompt_tokens": 12_000,
    "completion_tokens": 345,
    "prompt_tokens_details": {"cached_tokens": 8000},
}


def test_the_status_line_and_status_show_the_context_against_the_window(
    tmp_path: Path,
) -> None:
    with ReplayServer([_answer("First answer.", USAGE)]) as server:
        child, screen = spawn_repl(
            tmp_path, "--provider", "openai-chat", "--base-url", server.url + "/v1",
            "--model", "gpt-4o",
        )  # fmt: skip
        try:
            assert not any("tokens" in row for row in under_input(screen))  # nothing known yet
            child.send("hello" + ENTER)
            # 12,000 in + 345 out of gpt-4o's 128,000 (the built-in table).
            wait_for_screen(
                child, screen, lambda _: "12k / 128k tokens (9%)" in under_input(screen)
            )
            child.send("/status" + ENTER)
            wait_for_screen(
                child,
                screen,
                lambda lines: any(
                    "context" in row
                    and "12k / 128k tokens (9%) · last request 12.0k in (8.0k cached) · 345 out"
                    in row
                    for row in lines
                ),
            )
        finally:
            child.terminate(force=True)


def test_unknown_usage_shows_nothing_and_an_unknown_window_shows_the_size_alone(
    tmp_path: Path,
) -> None:
    replies = [_answer("Nothing reported.", None), _answer("Now reported.", USAGE)]
    with ReplayServer(replies) as server:
        child, screen = spawn_repl(
            tmp_path, "--provider", "openai-chat", "--base-url", server.url + "/v1",
            "--model", "local-llama",
        )  # fmt: skip
        try:
            child.send("hello" + ENTER)
            wait_for_screen(child, screen, lambda lines: any("completed" in r for r in lines))
            child.send("/status" + ENTER)
            wait_for_screen(
                child,
                screen,
                lambda lines: any(
                    "context unknown: the server reports no usage" in " ".join(r.split())
                    for r in lines
                ),
            )
            assert not any("tokens" in row for row in under_input(screen))  # never "0 tokens"
            child.send("again" + ENTER)
            wait_for_screen(
                child,
                screen,
                lambda _: any(row.strip() == "12k tokens" for row in under_input(screen)),
            )
        finally:
            child.terminate(force=True)


def test_status_before_anything_was_sent_says_so(spawn: Spawn) -> None:
    child = spawn([{"text": "unused"}])
    child.send("/status" + ENTER)
    child.expect(words("usage no turn since the session was opened"))
    child.expect(words("context nothing sent yet (window unknown)"))
    exit_cleanly(child)


def test_status_after_a_compaction_gives_the_estimate(spawn: Spawn) -> None:
    child = spawn([{"text": "The first answer, with enough words."}, {"text": "They said hi."}])
    child.send("hello there" + ENTER)
    child.expect(words("── completed"))
    child.send("/compact" + ENTER)
    child.expect(words("context compacted:"))
    child.send("/status" + ENTER)
    child.expect(r"context(?:\s|\x1b\[[0-9;?]*[A-Za-z])+~[\d.]+k? tokens")
    child.expect(words("(estimated since the compaction; no request since)"))
    exit_cleanly(child)


def test_status_after_a_resume_says_no_turn_ran_here_yet(spawn: Spawn) -> None:
    first = spawn([{"text": "First answer."}])
    first.send("hello" + ENTER)
    first.expect(words("── completed"))
    exit_cleanly(first)
    again = spawn([{"text": "unused"}], "resume")
    again.send("/status" + ENTER)
    again.expect(words("usage no turn since the session was opened"))
    again.expect(words("context"))
    again.expect(words("· last request"))
    exit_cleanly(again)
