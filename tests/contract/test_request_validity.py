"""Every request mind builds from any journal is valid for every provider
(docs/design/providers.md §8).

Journals are generated as realistic turns (prompts, model rounds with 0..3
tool calls, results missing / duplicated / out of order / unknown, steering
messages in between, terminal records, crashes cutting the journal at any
record or byte); messages come from :func:`mind.history.build_messages`, bodies
from each adapter's pure ``build_body``, and the provider rules in
``tests/support/provider_rules.py`` check them. The validators themselves are
pinned against the recorded request bodies in the cassettes of ``tests/fixtures``.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.context.tool_output import DEFAULT_LIMITS
from mind.conversation import ModelRequest, ToolSpec, UserMessage
from mind.errors import JournalCorruptError
from mind.generated import journal as jr
from mind.history import OPENAI_CHAT_CALL_IDS, OPENAI_RESPONSES_CALL_IDS, build_messages
from mind.shell.journal import Journal
from mind.shell.providers import anthropic, openai_chat, openai_responses
from tests.support import records as rec
from tests.support.provider_rules import (
    validate_anthropic,
    validate_openai_chat,
    validate_openai_responses,
)
from tests.support.replay_server import fixtures_dir

CASSETTES = Path(os.environ.get("MIND_CASSETTES", fixtures_dir() / "cassettes"))
"""The recorded traffic kept in the repository (``tests/fixtures``)."""

Validator = Callable[[dict[str, Any]], None]
PROVIDERS: dict[str, tuple[Callable[[ModelRequest], dict[str, Any]], Validator]] = {
    "openai-chat": (openai_chat.build_body, validate_openai_chat),
    "openai-responses": (openai_responses.build_body, validate_openai_responses),
    "anthropic": (anthropic.build_body, validate_anthropic),
    # OpenAI's own hosts add their id length limits (docs/design/providers.md §8).
    "openai-chat@api.openai.com": (
        functools.partial(openai_chat.build_body, call_ids=OPENAI_CHAT_CALL_IDS),
        functools.partial(validate_openai_chat, max_id_chars=40),
    ),
    "openai-responses@api.openai.com": (
        functools.partial(openai_responses.build_body, call_ids=OPENAI_RESPONSES_CALL_IDS),
        functools.partial(validate_openai_responses, max_id_chars=64),
    ),
}
CASSETTE_DIRS: dict[str, Validator] = {
    "openai-chat": validate_openai_chat,
    "openai-responses": validate_openai_responses,
    "anthropic-messages": validate_anthropic,
}
KNOWN_BAD = {
    # case -> the rule the provider enforced with its HTTP 400
    "openai-responses/error_400_reasoning_item_without_following_item": (
        "input[1]: reasoning item without its required following item"
    ),
    "openai-chat/error_400_missing_required_parameter": (
        "messages[1].content[0]: a content part needs a type"
    ),
}
TOOLS = [
    ToolSpec(
        name="shell",
        description="Run a command.",
        parameters={"type": "object", "properties": {"cmd": {"type": "string"}}},
    )
]
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ---- the validators against recorded traffic ---------------------------------


def _cassette_cases() -> list[tuple[str, Path]]:
    return [(d, p) for d in CASSETTE_DIRS for p in sorted((CASSETTES / d).glob("*.request.json"))]


@pytest.mark.parametrize(("provider_dir", "path"), _cassette_cases(), ids=lambda v: str(v))
def test_validators_agree_with_recorded_requests(provider_dir: str, path: Path) -> None:
    body = json.loads(path.read_text(encoding="utf-8"))
    case = f"{provider_dir}/{path.name.removesuffix('.request.json')}"
    validate = CASSETTE_DIRS[provider_dir]
    if case in KNOWN_BAD:
        with pytest.raises(AssertionError) as err:
            validate(body)
        assert str(err.value) == KNOWN_BAD[case]
    else:
        validate(body)


def _chat(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "messages": list(messages)}


def _call(cid: str, args: str = "{}") -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "f", "arguments": args}}


def _tool(cid: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": cid, "content": "r"}


USER = {"role": "user", "content": "hi"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_chat(USER, _tool("a")), "messages[1]: tool message 'a' without a preceding call"),
        (
            _chat(USER, {"role": "assistant", "tool_calls": [_call("a"), _call("b")]}, _tool("a")),
            "messages[3]: missing tool results for ['b']",
        ),
        (
            _chat(USER, {"role": "assistant", "tool_calls": [_call("a")]}, USER),
            "messages[2]: expected a tool message for ['a'], got role 'user'",
        ),
        (
            _chat(USER, {"role": "assistant", "tool_calls": [_call("a")]}, _tool("a"), _tool("a")),
            "messages[3]: tool message 'a' without a preceding call",
        ),
        (
            _chat(USER, {"role": "assistant", "tool_calls": [_call("a", "{")]}, _tool("a")),
            "messages[1].tool_calls[0]: function.arguments must be JSON text",
        ),
        (
            _chat(
                USER,
                {"role": "assistant", "tool_calls": [_call("a")]},
                _tool("a"),
                {"role": "assistant", "tool_calls": [_call("a")]},
                _tool("a"),
            ),
            "messages[3].tool_calls[0]: duplicate tool call id 'a'",
        ),
        (_chat(USER, {"role": "assistant", "content": None}), "messages[1]: content is required"),
    ],
)
def test_chat_rules(body: dict[str, Any], message: str) -> None:
    with pytest.raises(AssertionError) as err:
        validate_openai_chat(body)
    assert str(err.value).startswith(message)


def test_chat_accepts_results_in_any_order_and_null_content() -> None:
    validate_openai_chat(
        _chat(
            {"role": "system", "content": "s"},
            USER,
            {"role": "assistant", "content": None, "tool_calls": [_call("a"), _call("b")]},
            _tool("b"),
            _tool("a"),
            USER,
        )
    )


def _fc(cid: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": cid, "name": "f", "arguments": "{}"}


def _out(cid: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": cid, "output": "r"}


RS = {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": []}


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([USER, _out("a")], "input[1]: output for 'a' has no open function_call"),
        ([USER, _fc("a")], "input: function_call without output: ['a']"),
        ([USER, _fc("a"), USER, _out("a")], "input[2]: message item before the outputs"),
        ([USER, _fc("a"), _out("a"), _out("a")], "input[3]: output for 'a' has no open"),
        ([USER, RS], "input[1]: reasoning item without its required following item"),
        ([USER, RS, USER], "input[1]: reasoning item without its required following item"),
        (
            [USER, {k: v for k, v in RS.items() if k != "encrypted_content"}, _fc("a"), _out("a")],
            "input[1]: with store: false a reasoning item needs encrypted_content",
        ),
        ([USER, _fc("a"), _out("a"), _fc("a"), _out("a")], "input[3]: duplicate function_call"),
    ],
)
def test_responses_rules(items: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(AssertionError) as err:
        validate_openai_responses({"model": "m", "store": False, "input": items})
    assert str(err.value).startswith(message)


def test_responses_accepts_reasoning_before_its_item() -> None:
    body = {
        "model": "m",
        "store": False,
        "input": [USER, RS, _fc("a"), _fc("b"), _out("b"), _out("a"), USER],
    }
    validate_openai_responses(body)
    body["input"] = [USER, RS, {"role": "assistant", "content": "x"}, USER]
    validate_openai_responses(body)


def _anth(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 10, "messages": list(messages)}


def _u(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def _a(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def _text(t: str = "hi") -> dict[str, Any]:
    return {"type": "text", "text": t}


def _use(cid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": cid, "name": "f", "input": {}}


def _res(cid: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": cid, "content": [_text("r")]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_anth(_a(_text())), "messages[0]: role 'assistant' where 'user' was expected"),
        (_anth(_u(_text()), _u(_text())), "messages[1]: role 'user' where 'assistant'"),
        (_anth(_u(_text(" \n"))), "messages[0].content[0]: text block must contain"),
        (_anth({"role": "user", "content": []}), "messages[0]: content must be non-empty"),
        (_anth(_u(_text()), _a(_use("a"))), "messages[1]: tool_use ['a'] never answered"),
        (
            _anth(_u(_text()), _a(_use("a"), _use("b")), _u(_res("a"), _text())),
            "messages[2]: tool_use ids ['b'] not answered by this message",
        ),
        (
            _anth(_u(_text()), _a(_use("a")), _u(_text(), _res("a"))),
            "messages[2].content[1]: tool_result blocks must come first",
        ),
        (
            _anth(_u(_text()), _a(_use("a")), _u(_res("a")), _a(_text()), _u(_res("a"))),
            "messages[4].content[0]: tool_result 'a' answers no tool_use just before",
        ),
        (
            _anth(_u(_text()), _a(_use("a.1")), _u(_res("a.1"))),
            "messages[1].content[0]: tool_use id 'a.1' must match",
        ),
        (
            _anth(_u(_text()), _a(_use("a")), _u(_res("a"), _res("a"))),
            "messages[2].content[1]: second tool_result for 'a'",
        ),
    ],
)
def test_anthropic_rules(body: dict[str, Any], message: str) -> None:
    with pytest.raises(AssertionError) as err:
        validate_anthropic(body)
    assert str(err.value).startswith(message)


# ---- generated journals ------------------------------------------------------

USAGE = jr.Usage(input_tokens=1, output_tokens=1)
_prompt_text = st.sampled_from(["list the files", "fix the bug ✓", "  spaced  ", "a\nb"])
_steer_text = st.sampled_from(["also run tests", "stop", "more\u2028detail", " ", ""])
_round_text = st.sampled_from(["", "", " ", "Let me check.", "Done: 😀"])
_args = st.sampled_from(['{"cmd": "ls"}', "{}", "", '{"cmd": ', "[1, 2]", "null", " "])
_names = st.sampled_from(["shell", "read_file"])


def _id_strategy(turn: int, rnd: int, k: int) -> st.SearchStrategy[str]:
    """Realistic call ids of several servers, with rare collisions and odd ones."""
    return st.sampled_from(
        [
            f"call_{turn}{rnd}{k}Xy",  # OpenAI
            f"toolu_01{turn}{rnd}{k}",  # Anthropic
            f"functions.shell:{k}",  # Kimi-style, unsafe chars, reused across rounds
            f"functions_shell_{k}",  # collides with the above after sanitising
            "call_0",  # a server that reuses ids every round
            "",  # a server that sent no id
            f"chatcmpl-tool-{turn}{rnd}{k}" + "f" * 29,  # vLLM: 46 characters
            f"fc_{turn}{rnd}{k}" + "9" * 61 + ".x",  # over every limit, unsafe too
        ]
    )


def _provider_items(draw: st.DrawFn, n_visible: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if n_visible and draw(st.booleans()):
        items.append(
            {
                "provider": "openai-responses",
                "position": draw(st.integers(0, n_visible - 1)),
                "item": {
                    "type": "reasoning",
                    "id": f"rs_{draw(st.integers(0, 999))}",
                    "encrypted_content": "gAAAAB",
                    "summary": [],
                },
            }
        )
    if draw(st.booleans()):
        items.append(
            {
                "provider": "anthropic",
                "item": {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
            }
        )
    return items


@st.composite
def journals(draw: st.DrawFn) -> list[jr.JournalRecord]:
    """A realistic journal, possibly cut short by a crash at any record."""
    records: list[Any] = [
        jr.SessionStarted(seq=0, recorded_at_ms=0, session_id="s", cwd="/w", mind_version="0")
    ]
    for t in range(draw(st.integers(1, 3))):
        tid = f"t{t}"
        records.append(
            jr.TurnStarted(
                seq=0, recorded_at_ms=0, turn_id=tid, provider="p", model="m", approval="never"
            )
        )
        records.append(
            jr.UserMessage(
                seq=0,
                recorded_at_ms=0,
                turn_id=tid,
                message_id=f"{tid}-p",
                text=draw(_prompt_text),
                kind="prompt",
            )
        )
        for r in range(draw(st.integers(0, 3))):
            calls = []
            for k in range(draw(st.integers(0, 3))):
                fields: dict[str, Any] = draw(
                    st.sampled_from(
                        [{}, {"openai-chat": {"extra_content": {"google": {"sig": "x"}}}}]
                    )
                )
                call = jr.RecordedToolCall(
                    call_id=draw(_id_strategy(t, r, k)),
                    name=draw(_names),
                    arguments=draw(_args),
                    provider_fields=fields,
                )
                calls.append(call)
            text = draw(_round_text)
            n_visible = len(calls) + (1 if text.strip() else 0)
            records.append(
                rec.model_round(
                    tid,
                    text,
                    calls,
                    r,
                    provider="p",
                    usage=USAGE,
                    items=_provider_items(draw, n_visible),
                )
            )
            after: list[Any] = []
            for call in calls:
                fate = draw(st.sampled_from(["ok", "ok", "error", "missing", "twice"]))
                if fate == "missing":
                    continue
                for _ in range(2 if fate == "twice" else 1):
                    after.append(
                        jr.ToolResult(
                            seq=0,
                            recorded_at_ms=0,
                            turn_id=tid,
                            call_id=call.call_id,
                            name=call.name,
                            status="ok" if fate != "error" else "error",
                            output=draw(st.sampled_from(["", "out", "line\nline", "\x00\u2029"])),
                            synthetic=False,
                        )
                    )
            for s in range(draw(st.integers(0, 2))):
                after.append(
                    jr.UserMessage(
                        seq=0,
                        recorded_at_ms=0,
                        turn_id=tid,
                        message_id=f"{tid}-{r}-s{s}",
                        text=draw(_steer_text),
                        kind="steer",
                    )
                )
            if draw(st.booleans()):
                after.append(
                    jr.ToolResult(
                        seq=0,
                        recorded_at_ms=0,
                        turn_id=tid,
                        call_id="call_unknown",
                        name="shell",
                        status="ok",
                        output="stray",
                        synthetic=True,
                    )
                )
            records.extend(draw(st.permutations(after)))
        if draw(st.booleans()):
            records.append(
                jr.TurnCompleted(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id=tid,
                    status=draw(st.sampled_from(["completed", "interrupted", "aborted"])),
                    usage=USAGE,
                    acknowledged=[],
                )
            )
    cut = draw(st.integers(0, len(records)))
    return records[: max(cut, 3)]


def _request(records: list[jr.JournalRecord], next_prompt: str | None) -> ModelRequest:
    messages = build_messages(records)
    if next_prompt is not None:
        messages.append(UserMessage(text=next_prompt))
    return ModelRequest(model="m", system="You are mind.", messages=messages, tools=TOOLS)


def _check_all(request: ModelRequest) -> None:
    for name, (build, validate) in PROVIDERS.items():
        body = build(request)
        json.dumps(body)  # JSON-ready
        try:
            validate(body)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}\nbody: {json.dumps(body)[:4000]}") from None


@settings(SETTINGS, max_examples=300)
@given(records=journals(), next_prompt=st.sampled_from([None, "next question"]))
def test_requests_from_any_journal_are_valid_for_every_provider(
    records: list[jr.JournalRecord], next_prompt: str | None
) -> None:
    _check_all(_request(records, next_prompt))


@settings(SETTINGS, max_examples=60)
@given(records=journals(), draw=st.data())
def test_requests_after_a_crash_cut_the_journal_file_at_any_byte(
    records: list[jr.JournalRecord], draw: st.DataObject
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s" / "journal.jsonl"
        with Journal.open(path, create=True, clock_ms=lambda: 1) as j:
            for r in records:
                j.append(r)
        data = path.read_bytes()
        cut = draw.draw(st.integers(0, len(data)), label="cut")
        path.write_bytes(data[:cut])
        if cut <= data.index(b"\n"):  # no session_started record: refused, not a session
            with pytest.raises(JournalCorruptError):
                Journal.open(path)
            return
        with Journal.open(path) as j:
            reopened = list(j.records)
    assert len(reopened) <= len(records)
    _check_all(_request(reopened, "after the crash"))


def test_a_5_mb_tool_result_gives_a_request_under_the_bound() -> None:
    """One huge result cannot blow the context (docs/design/context.md §3):
    the request carries at most the per-call budget of it, for every provider."""
    huge = "".join(f"{n:07} some output of a command\n" for n in range(160_000))  # ~5 MB
    assert len(huge) > 5_000_000
    records: list[jr.JournalRecord] = [
        rec.turn_started("t"),
        rec.user_message("t", "m", "build it", jr.Kind.prompt),
        rec.model_round("t", calls=[rec.call("c1"), rec.call("c2")]),
        *(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id="t",
                call_id=cid,
                name="shell",
                status=jr.ToolStatus.ok,
                output=huge,
                synthetic=False,
            )
            for cid in ("c1", "c2")
        ),
    ]
    request = _request(records, "and now?")
    _check_all(request)
    for name, (build, _) in PROVIDERS.items():
        size = len(json.dumps(build(request)).encode())
        # Two results at the per-call budget, plus the envelope and JSON escapes.
        assert size < 2 * DEFAULT_LIMITS.per_call_bytes + 8192, (name, size)
