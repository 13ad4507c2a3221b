"""The incremental SSE decoder, fed byte chunks directly (docs/design/providers.md §2)."""

from __future__ import annotations

import time

import pytest

from mind.errors import ProviderError
from mind.shell.providers.sse import SSEDecoder, SSEEvent


def decode(chunks: list[bytes]) -> list[SSEEvent]:
    dec = SSEDecoder()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(dec.feed(c))
    out.extend(dec.finish())
    return out


def every_split(body: bytes) -> list[list[bytes]]:
    """The body whole, byte by byte, and cut once at every offset."""
    variants = [[body], [body[i : i + 1] for i in range(len(body))]]
    variants += [[body[:i], body[i:]] for i in range(1, len(body))]
    return variants


def datas(events: list[SSEEvent]) -> list[str]:
    return [e.data for e in events]


@pytest.mark.parametrize(
    "body",
    [b"data: a\n\ndata: b\n\n", b"data: a\r\n\r\ndata: b\r\n\r\n", b"data: a\r\rdata: b\r\r"],
    ids=["lf", "crlf", "lone-cr"],
)
def test_line_endings_in_any_split(body: bytes) -> None:
    for chunks in every_split(body):
        assert datas(decode(chunks)) == ["a", "b"], chunks


def test_crlf_split_across_reads_is_one_line_end() -> None:
    # "\r" ends one read, "\n" starts the next: one line end, not an empty line
    # that would dispatch early; the event still has both data lines.
    events = decode([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert datas(events) == ["a\nb"]


def test_utf8_decoded_incrementally_across_reads() -> None:
    body = "data: olá 😊 ×\n\n".encode()
    for chunks in every_split(body):
        assert datas(decode(chunks)) == ["olá 😊 ×"]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert datas(decode([b"data: \xff\xfe ok\n\n"])) == ["\ufffd\ufffd ok"]


def test_comments_and_comment_only_blocks_are_not_dispatched() -> None:
    body = b": OPENROUTER PROCESSING\n\n:\n\n: ping\n\ndata: x\n\n:\n\n"
    for chunks in every_split(body):
        assert datas(decode(chunks)) == ["x"]


def test_block_without_data_is_not_dispatched_even_after_an_id() -> None:
    # httpx-sse 0.4 dispatches an empty event here once an id was seen.
    events = decode([b"id: 7\ndata: x\n\n: keepalive\n\nevent: ping\n\n"])
    assert [(e.data, e.id) for e in events] == [("x", "7")]


def test_data_space_is_optional_and_only_one_is_stripped() -> None:
    events = decode([b"data:x\n\ndata:  two\n\ndata\n\ndata:\n\n"])
    assert datas(events) == ["x", " two", "", ""]


def test_multi_line_data_and_event_names() -> None:
    events = decode([b'event: message_start\ndata: {"a":\ndata: 1}\n\n'])
    assert [(e.event, e.data) for e in events] == [("message_start", '{"a":\n1}')]


def test_pending_event_is_flushed_at_eof() -> None:
    body = (
        b'event: message_delta\ndata: {"a":1}\n\nevent: message_stop\ndata: {"type":"message_stop"}'
    )
    for chunks in every_split(body):
        events = decode(chunks)
        assert [(e.event, e.at_eof) for e in events] == [
            ("message_delta", False),
            ("message_stop", True),
        ]
    # With a final newline but no blank line it is flushed too.
    assert [e.at_eof for e in decode([b"data: x\n"])] == [True]


def test_non_standard_error_field_is_kept() -> None:
    events = decode([b'error: {"message":"boom"}\n\ndata: [DONE]\n\n'])
    assert [(e.error, e.data) for e in events] == [('{"message":"boom"}', ""), ("", "[DONE]")]


def test_bom_is_ignored_at_start_only() -> None:
    assert datas(decode([b"\xef\xbb", b"\xbfdata: x\n\n"])) == ["x"]


def test_unknown_fields_and_retry_are_ignored() -> None:
    assert datas(decode([b"retry: 10\nfoo: bar\ndata: x\n\n"])) == ["x"]


def test_multi_mebibyte_line_in_small_reads_is_linear() -> None:
    payload = b"x" * (3 * 1024 * 1024)
    body = b"data: " + payload + b"\n\n"
    dec = SSEDecoder()
    started = time.perf_counter()
    out: list[SSEEvent] = []
    for i in range(0, len(body), 997):
        out.extend(dec.feed(body[i : i + 997]))
    out.extend(dec.finish())
    elapsed = time.perf_counter() - started
    assert [len(e.data) for e in out] == [len(payload)]
    assert elapsed < 5.0  # quadratic buffering would take minutes


@pytest.mark.parametrize("framing", ["one endless line", "many data lines"])
def test_an_event_past_max_event_chars_is_refused_while_it_grows(framing: str) -> None:
    """Memory stays bounded whatever the framing (docs/design/providers.md §1): the decoder
    raises ``output_limit`` as soon as the pending event passes its cap, long
    before the 4 MiB the server would send."""
    dec = SSEDecoder(max_event_chars=100_000)
    piece = b"x" * 4096 if framing == "one endless line" else b"data: " + b"x" * 4090 + b"\n"
    fed = 0
    with pytest.raises(ProviderError) as caught:
        dec.feed(b"data: ")
        while fed < 4 * 1024 * 1024:
            dec.feed(piece)
            fed += len(piece)
    assert caught.value.kind == "output_limit"
    assert "max_output_mib" in caught.value.detail
    assert fed <= 100_000


def test_events_under_max_event_chars_pass_and_the_count_restarts_per_event() -> None:
    dec = SSEDecoder(max_event_chars=10_000)
    events = []
    for _ in range(50):  # 50 events of 8000 characters: 400 000 in all
        events.extend(dec.feed(b"data: " + b"y" * 8000 + b"\n\n"))
    assert len(events) == 50 and all(len(e.data) == 8000 for e in events)
