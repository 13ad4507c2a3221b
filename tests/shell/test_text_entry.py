"""Text that enters mind from a model, a script or a person always encodes as UTF-8: lone surrogates
are replaced where the text enters, and a person's input that cannot fit is refused with the reason
that applies."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest
import yaml

import mind
from mind.conversation import REPLACEMENT_CHARACTER, replace_lone_surrogates
from mind.errors import InputRefused
from mind.generated.inbox import InboxEntry, InboxKind
from mind.shell.inbox import Inbox, check_fits_alone, encode_inbox
from mind.shell.providers.server_json import load_json
from mind.shell.providers.tool_arguments import finalize_arguments

ESCAPED = '"a \\ud800 b"'  # what a server sends: JSON text escaping a lone surrogate


def test_provider_json_decode_replaces_lone_surrogates() -> None:
    value = load_json('{"delta": {"content": ' + ESCAPED + "}}")
    assert value == {"delta": {"content": f"a {REPLACEMENT_CHARACTER} b"}}
    msgspec.json.encode(value)  # encodable: the journal and printers can take it
    assert load_json('"\\ud83d\\ude00"') == "\U0001f600"  # a real pair stays a character


def test_tool_argument_escapes_of_lone_surrogates_are_replaced() -> None:
    raw = finalize_arguments(['{"command": "echo ', '\\udc80"}'])
    assert json.loads(raw) == {"command": f"echo {REPLACEMENT_CHARACTER}"}
    plain = '{"command": "echo \\u00e9"}'
    assert finalize_arguments([plain]) == plain  # nothing to replace: the text is kept verbatim


def test_replace_lone_surrogates_keeps_valid_text() -> None:
    assert replace_lone_surrogates("caf\u00e9 \U0001f600") == "caf\u00e9 \U0001f600"
    assert replace_lone_surrogates("x\udcffy") == f"x{REPLACEMENT_CHARACTER}y"


def test_library_send_refuses_lone_surrogates_and_writes_nothing(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([{"text": "hi"}]), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={})

    async def main() -> None:
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            session = await rt.create_session(cwd=tmp_path, config=config)
            with pytest.raises(InputRefused) as info:
                session.send("bad \udcff bytes")
            assert info.value.reason == "not_text"
            assert not (
                tmp_path / "state" / "sessions" / session.session_id / "inbox.json"
            ).exists()

    anyio.run(main)


def _entry(message_id: str, text: str) -> InboxEntry:
    return InboxEntry(
        message_id=message_id, text=text, kind=InboxKind.prompt, accepted_at_ms=1, recovered=False
    )


def test_an_input_too_large_for_any_inbox_says_so(tmp_path: Path) -> None:
    cap = 1000
    inbox = Inbox.open(tmp_path / "inbox.json", acknowledged=(), max_bytes=cap)
    with pytest.raises(InputRefused) as info:
        inbox.add(_entry("a", "x" * cap))
    assert info.value.reason == "inbox_full"
    assert "too large" in info.value.message and "wait" not in info.value.message
    with pytest.raises(InputRefused, match="too large"):
        check_fits_alone("x" * cap, max_bytes=cap)
    check_fits_alone("x" * 10, max_bytes=cap)


def test_an_input_that_fits_alone_waits_for_the_ones_before_it(tmp_path: Path) -> None:
    overhead = len(encode_inbox([_entry("a", "")]))
    cap = 2 * overhead + 100
    inbox = Inbox.open(tmp_path / "inbox.json", acknowledged=(), max_bytes=cap)
    inbox.add(_entry("a", "x" * 80))
    with pytest.raises(InputRefused) as info:
        inbox.add(_entry("b", "y" * 80))
    assert "wait until the 1 input(s) before it" in info.value.message
