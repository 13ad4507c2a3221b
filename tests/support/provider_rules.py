"""Validators of each provider's request-sequencing rules, for tests.

Each function takes a request BODY as sent on the wire (a JSON-ready dict)
and raises :class:`AssertionError` naming the exact position and rule that is
broken; it returns ``None`` when the body is acceptable. They check what the
providers reject with HTTP 400 (history sequencing, empty content, malformed
tool calls), not every field of the APIs.

References: the recorded request bodies in ``cassettes/*/*.request.json``
(shapes), ``openai-responses/error_400_reasoning_item_without_following_item``
(a reasoning item needs its following item), docs/design/providers.md §8 (every tool call is
followed by exactly one result before any other message).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["validate_anthropic", "validate_openai_chat", "validate_openai_responses"]

_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")


def _fail(where: str, rule: str) -> None:
    raise AssertionError(f"{where}: {rule}")


def _check(cond: bool, where: str, rule: str) -> None:
    if not cond:
        _fail(where, rule)


def _is_json(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _has_text(value: Any) -> bool:
    return isinstance(value, str) and value.strip() != ""


def _top(body: Any, key: str) -> list[Any]:
    _check(isinstance(body, dict), "body", "must be a JSON object")
    _check(_nonempty_str(body.get("model")), "body.model", "must be a non-empty string")
    value = body.get(key)
    _check(isinstance(value, list) and len(value) > 0, f"body.{key}", "must be a non-empty list")
    assert isinstance(value, list)
    return value


# ---- OpenAI Chat Completions ------------------------------------------------


def _chat_content(where: str, content: Any, *, required: bool) -> None:
    if content is None:
        _check(not required, where, "content is required here (null/absent)")
        return
    if isinstance(content, str):
        return
    _check(isinstance(content, list) and len(content) > 0, where, "content: string or parts")
    for j, part in enumerate(content):
        _check(
            isinstance(part, dict) and _nonempty_str(part.get("type")),
            f"{where}.content[{j}]",
            "a content part needs a type",
        )


def validate_openai_chat(body: dict[str, Any], *, max_id_chars: int | None = None) -> None:
    """Check a Chat Completions body.

    ``max_id_chars`` is the target's id length limit (OpenAI's own API: 40).

    Rules: roles are system/developer/user/assistant/tool; an assistant
    message with ``tool_calls`` has a non-empty list of
    ``{id, type: "function", function: {name, arguments}}`` with unique ids and
    ``arguments`` a string of valid JSON, and may have null/absent content; an
    assistant message without tool calls has content; right after an
    assistant message with tool calls come exactly one ``role: "tool"``
    message per call id (any order) before any other message; a tool message
    anywhere else (no preceding call, duplicate, extra) is an orphan.

    Raises:
        AssertionError: the first rule broken, with its ``messages[i]`` path.
    """
    messages = _top(body, "messages")
    seen_ids: set[str] = set()
    i = 0
    while i < len(messages):
        where = f"messages[{i}]"
        m = messages[i]
        _check(isinstance(m, dict), where, "must be an object")
        role = m.get("role")
        if role == "tool":
            _fail(where, f"tool message {m.get('tool_call_id')!r} without a preceding call")
        if role in ("system", "developer", "user"):
            _chat_content(where, m.get("content"), required=True)
            i += 1
            continue
        _check(role == "assistant", where, f"unknown role {role!r}")
        calls = m.get("tool_calls")
        if calls is None:
            _chat_content(where, m.get("content"), required=True)
            i += 1
            continue
        _chat_content(where, m.get("content"), required=False)
        _check(isinstance(calls, list) and len(calls) > 0, where, "tool_calls must be non-empty")
        ids: list[str] = []
        for j, c in enumerate(calls):
            cw = f"{where}.tool_calls[{j}]"
            _check(isinstance(c, dict), cw, "must be an object")
            cid = c.get("id")
            _check(_nonempty_str(cid), cw, "id must be a non-empty string")
            _check(
                max_id_chars is None or len(cid) <= max_id_chars,
                cw,
                f"id longer than {max_id_chars} characters",
            )
            _check(cid not in seen_ids, cw, f"duplicate tool call id {cid!r}")
            seen_ids.add(cid)
            ids.append(cid)
            _check(c.get("type") == "function", cw, 'type must be "function"')
            fn = c.get("function")
            _check(isinstance(fn, dict), cw, "function must be an object")
            _check(_nonempty_str(fn.get("name")), cw, "function.name must be non-empty")
            _check(_is_json(fn.get("arguments")), cw, "function.arguments must be JSON text")
        pending = set(ids)
        for k in range(len(ids)):
            at = i + 1 + k
            rw = f"messages[{at}]"
            _check(at < len(messages), rw, f"missing tool results for {sorted(pending)}")
            r = messages[at]
            _check(
                isinstance(r, dict) and r.get("role") == "tool",
                rw,
                f"expected a tool message for {sorted(pending)}, got role "
                f"{r.get('role') if isinstance(r, dict) else r!r}",
            )
            tid = r.get("tool_call_id")
            _check(
                tid in pending, rw, f"tool_call_id {tid!r} answers no open call {sorted(pending)}"
            )
            pending.discard(tid)
            _chat_content(rw, r.get("content"), required=True)
        i += 1 + len(ids)


# ---- OpenAI Responses -------------------------------------------------------

_RESPONSES_ROLES = ("user", "assistant", "system", "developer")


def validate_openai_responses(body: dict[str, Any], *, max_id_chars: int | None = None) -> None:
    """Check a Responses API body (``input`` items).

    ``max_id_chars`` is the target's ``call_id`` length limit (OpenAI's: 64).

    Rules: items are messages (``role`` + ``content``, ``type`` absent or
    ``"message"``), ``function_call``, ``function_call_output`` or
    ``reasoning``. Every ``function_call`` (unique non-empty ``call_id``,
    name, JSON ``arguments``) gets exactly one ``function_call_output`` with
    its ``call_id`` later, before the next message item (a reasoning item
    may sit between the calls of one round, as the model emitted it); an
    output without an open call is an orphan. A ``reasoning`` item must be
    immediately followed by the item it produced: a ``function_call`` or an
    assistant message (which must carry its ``id`` unless ``store`` is
    false, since the server then links them by id — cassette
    ``error_400_reasoning_item_without_following_item``); with
    ``store: false`` it must carry ``encrypted_content``.

    Raises:
        AssertionError: the first rule broken, with its ``input[i]`` path.
    """
    items = _top(body, "input")
    stateless = body.get("store") is False
    seen: set[str] = set()
    pending: list[str] = []
    for i, item in enumerate(items):
        where = f"input[{i}]"
        _check(isinstance(item, dict), where, "must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            _check(not pending, where, f"message item before the outputs of calls {pending}")
            role = item.get("role")
            _check(role in _RESPONSES_ROLES, where, f"unknown role {role!r}")
            content = item.get("content")
            ok = _nonempty_str(content) or (isinstance(content, list) and len(content) > 0)
            _check(ok, where, "message content must be a non-empty string or list")
        elif kind == "function_call":
            cid = item.get("call_id")
            _check(_nonempty_str(cid), where, "call_id must be a non-empty string")
            _check(
                max_id_chars is None or len(cid) <= max_id_chars,
                where,
                f"call_id longer than {max_id_chars} characters",
            )
            _check(cid not in seen, where, f"duplicate function_call call_id {cid!r}")
            seen.add(cid)
            pending.append(cid)
            _check(_nonempty_str(item.get("name")), where, "name must be non-empty")
            _check(_is_json(item.get("arguments")), where, "arguments must be JSON text")
        elif kind == "function_call_output":
            cid = item.get("call_id")
            _check(cid in pending, where, f"output for {cid!r} has no open function_call")
            pending.remove(cid)
            _check(isinstance(item.get("output"), str | list), where, "output must be present")
        elif kind == "reasoning":
            _check(_nonempty_str(item.get("id")), where, "reasoning item needs its id")
            _check(isinstance(item.get("summary"), list), where, "reasoning needs a summary list")
            if stateless:
                _check(
                    _nonempty_str(item.get("encrypted_content")),
                    where,
                    "with store: false a reasoning item needs encrypted_content",
                )
            nxt = items[i + 1] if i + 1 < len(items) else None
            follows = isinstance(nxt, dict) and (
                nxt.get("type") == "function_call"
                or (
                    nxt.get("type", "message") == "message"
                    and nxt.get("role") == "assistant"
                    and (stateless or _nonempty_str(nxt.get("id")))
                )
            )
            _check(follows, where, "reasoning item without its required following item")
        else:
            _fail(where, f"unknown item type {kind!r}")
    _check(not pending, "input", f"function_call without output: {pending}")


# ---- Anthropic Messages -----------------------------------------------------

_USER_BLOCKS = ("text", "tool_result", "image", "document")
_ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")


def _anthropic_text_block(where: str, block: dict[str, Any]) -> None:
    _check(_has_text(block.get("text")), where, "text block must contain non-whitespace text")


def validate_anthropic(body: dict[str, Any]) -> None:
    """Check a Messages API body.

    Rules: ``max_tokens`` is a positive integer; messages alternate user /
    assistant starting with user; content is a non-whitespace string or a
    non-empty list of blocks; text blocks hold non-whitespace text; tool_use
    blocks (assistant only) have a unique id matching ``^[a-zA-Z0-9_-]+$``, a
    name and an object ``input``; every tool_use id of an assistant message is
    answered by exactly one tool_result block in the IMMEDIATELY next user
    message, and that message's tool_result blocks come before its other
    blocks; a tool_result answering nothing there is an orphan; a final
    assistant message may not hold unanswered tool_use blocks.

    Raises:
        AssertionError: the first rule broken, with its ``messages[i]`` path.
    """
    messages = _top(body, "messages")
    mt = body.get("max_tokens")
    _check(isinstance(mt, int) and not isinstance(mt, bool) and mt > 0, "body.max_tokens", ">0")
    system = body.get("system")
    if system is not None and not isinstance(system, str):
        _check(isinstance(system, list), "body.system", "string or list of text blocks")
        for j, block in enumerate(system):
            _check(isinstance(block, dict) and block.get("type") == "text", f"system[{j}]", "text")
            _anthropic_text_block(f"system[{j}]", block)
    seen_ids: set[str] = set()
    expected: list[str] = []  # tool_use ids the next user message must answer
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        _check(isinstance(m, dict), where, "must be an object")
        role = m.get("role")
        want = "user" if i % 2 == 0 else "assistant"
        _check(role == want, where, f"role {role!r} where {want!r} was expected (alternation)")
        content = m.get("content")
        if isinstance(content, str):
            _check(_has_text(content), where, "string content must contain non-whitespace text")
            _check(not expected, where, f"tool_use ids {expected} not answered")
            continue
        _check(isinstance(content, list) and len(content) > 0, where, "content must be non-empty")
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        answered: set[str] = set()
        others_started = False
        calls: list[str] = []
        for j, block in enumerate(content):
            bw = f"{where}.content[{j}]"
            _check(isinstance(block, dict), bw, "block must be an object")
            kind = block.get("type")
            _check(kind in allowed, bw, f"block type {kind!r} not allowed in a {role} message")
            if kind == "text":
                _anthropic_text_block(bw, block)
            if kind == "tool_result":
                tid = block.get("tool_use_id")
                _check(not others_started, bw, "tool_result blocks must come first")
                _check(tid in expected, bw, f"tool_result {tid!r} answers no tool_use just before")
                _check(tid not in answered, bw, f"second tool_result for {tid!r}")
                answered.add(tid)
                result = block.get("content")
                if isinstance(result, list):
                    for k, part in enumerate(result):
                        _check(isinstance(part, dict), f"{bw}.content[{k}]", "block")
                        if part.get("type") == "text":
                            _anthropic_text_block(f"{bw}.content[{k}]", part)
                else:
                    _check(result is None or isinstance(result, str), bw, "tool_result content")
                _check(isinstance(block.get("is_error", False), bool), bw, "is_error must be bool")
            else:
                others_started = True
            if kind == "tool_use":
                cid = block.get("id")
                _check(
                    isinstance(cid, str) and _ANTHROPIC_ID.fullmatch(cid) is not None,
                    bw,
                    f"tool_use id {cid!r} must match ^[a-zA-Z0-9_-]+$",
                )
                _check(cid not in seen_ids, bw, f"duplicate tool_use id {cid!r}")
                seen_ids.add(cid)
                calls.append(cid)
                _check(_nonempty_str(block.get("name")), bw, "tool_use name must be non-empty")
                _check(isinstance(block.get("input"), dict), bw, "tool_use input must be an object")
        if role == "user":
            missing = [c for c in expected if c not in answered]
            _check(not missing, where, f"tool_use ids {missing} not answered by this message")
            expected = []
        else:
            expected = calls
    _check(not expected, f"messages[{len(messages) - 1}]", f"tool_use {expected} never answered")
