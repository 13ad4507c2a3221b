"""The one URL-masking rule and the endpoint join (docs/design/secrets.md §2)."""

from __future__ import annotations

import base64

import msgspec
import pytest

from mind.conversation import StreamDone, ToolCall, Usage
from mind.shell.base_url import endpoint_url, split_userinfo
from mind.shell.providers import ProviderSettings, make_provider
from mind.shell.providers._http import HttpProvider
from mind.shell.redact import (
    WORD_MASK,
    StreamMask,
    redact,
    redact_round,
    redact_url,
    url_secrets,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h:1/v1", "http://h:1/v1"),
        ("http://u:pw@h/v1", "http://u:***@h/v1"),
        ("https://sk-token@h/v1", "https://***@h/v1"),
        ("http://h/v1?api-version=2024&sig=abc&x=", "http://h/v1?api-version=2024&sig=***&x=***"),
        ("http://h:notaport/", "http://h:notaport/"),  # unparseable, nothing to hide
        ("http://u@h:notaport/", "***"),
    ],
)
def test_redact_url_masks_userinfo_and_query_values(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_endpoint_path_goes_before_the_query() -> None:
    assert endpoint_url("http://h/v1/?api-version=1#f", "/responses") == (
        "http://h/v1/responses?api-version=1"
    )
    assert endpoint_url("http://h/v1", "/v1/messages", drop_suffix="/v1") == "http://h/v1/messages"
    assert split_userinfo("http://u%40x:p%3A@h/v1?k=1") == ("http://h/v1?k=1", ("u@x", "p:"))
    assert split_userinfo("http://h/v1") == ("http://h/v1", None)


@pytest.mark.parametrize(
    ("kind", "url"),
    [
        ("openai-chat", "http://h/v1/chat/completions?api-version=2024"),
        ("openai-responses", "http://h/v1/responses?api-version=2024"),
        ("anthropic", "http://h/v1/messages?api-version=2024"),
    ],
)
def test_every_adapter_keeps_the_query_and_drops_userinfo(kind: str, url: str) -> None:
    settings = ProviderSettings(
        kind=kind,  # type: ignore[arg-type]
        model="m",
        base_url="http://u:PW@h/v1/?api-version=2024",
        api_key="k",
    )
    provider = make_provider(settings)
    assert isinstance(provider, HttpProvider)
    assert provider._url() == url
    assert "PW" not in provider.label + repr(provider)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("authorization=Bearer abc.def-ghi end", "authorization=*** end"),
        ('{"Authorization": "Token abcdef"}', '{"Authorization": "***"}'),
        ("sent Basic dTpwdw== as auth", "sent Basic *** as auth"),
        ("token limit exceeded: 300000 tokens", "token limit exceeded: 300000 tokens"),
        ('{"x-api-key": "k-123456"}', '{"x-api-key": "***"}'),
        ("x-api-key=abc123, next", "x-api-key=***, next"),
        ("key sk-proj-AbC_123456789 rejected", "key sk-*** rejected"),
        ("go to http://u:pw@h:9/x?sig=1.", "go to http://u:***@h:9/x?sig=***."),
        ("plain http://h/v1/chat/completions text", "plain http://h/v1/chat/completions text"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_redact_masks_credential_shapes_without_knowing_them(text: str, shown: str) -> None:
    assert redact(text) == shown


def test_redact_masks_known_secrets_anywhere_and_a_cut_tail() -> None:
    secrets = ("MYKEYVALUE", None, "ab")  # None and too-short values are skipped
    assert redact("echo:MYKEYVALUE/MYKEYVALUE ab", secrets) == "echo:***/*** ab"
    assert redact("detail cut at MYKEYV", secrets) == "detail cut at ***"


def test_url_secrets_are_the_userinfo_secret_and_query_values() -> None:
    basic = base64.b64encode(b"u:p@ss=").decode()  # padded: two forms
    assert url_secrets("http://u:p%40ss=@h/v1?token=abcd&api-version=1") == (
        "p%40ss=",
        "abcd",
        "p@ss=",
        "p%2540ss%3D",
        f"Basic {basic}",
        basic,
        basic.rstrip("="),
    )
    token = base64.b64encode(b"TOKEN:").decode()
    assert url_secrets("https://TOKEN@h/v1") == ("TOKEN", f"Basic {token}", token.rstrip("="))
    assert url_secrets("http://h/v1") == ()
    assert url_secrets(None) == ()


def test_stream_mask_masks_a_secret_split_across_pieces() -> None:
    mask = StreamMask(["SECRETKEY", None])
    shown = [mask.feed(p) for p in ("the key is SEC", "RET", "KEY, yes", " S")]
    assert shown == ["the key is ", "", "***, yes", " "]
    assert mask.flush() == "S"  # too short to be a cut secret: shown as it was
    cut = StreamMask(["SECRETKEY"])
    assert (cut.feed("ends with SECRE"), cut.flush()) == ("ends with ", "***")
    assert StreamMask([]).feed("S") == "S"


def test_a_round_is_masked_in_every_string_it_holds() -> None:
    """ids, names, provider fields, item keys and values: nothing of a round
    keeps a known secret; executed arguments get a plain word, not a glob."""
    key = "sk-ROUNDSECRET1"
    done = StreamDone(
        text=f"t {key}",
        reasoning=f"r {key}",
        tool_calls=[
            ToolCall(
                call_id=f"id{key}",
                name=f"tool_{key}",
                arguments=f'{{"command": "echo {key}"}}',
                provider_fields={"item_id": key, key: [key]},
            )
        ],
        finish="tool_calls",
        usage=Usage(),
        provider_items=[{"provider": "x", "item": {"id": key, "nested": [{"k": key}]}}],
    )
    masked = redact_round(done, [key])
    assert key not in msgspec.json.encode(masked).decode()
    call = masked.tool_calls[0]
    # Sent back on replay: ids and names stay [A-Za-z0-9_-] (providers check).
    assert (call.call_id, call.name) == (f"id{WORD_MASK}", f"tool_{WORD_MASK}")
    assert call.arguments == f'{{"command": "echo {WORD_MASK}"}}'
    assert masked.text == "t ***"
    assert redact_round(done, ["other-secret"]) == done


@pytest.mark.parametrize("url", ["http://user:PW-secret1@h/v1", "http://TOKENsecret1@h/v1"])
def test_the_basic_auth_form_of_a_url_userinfo_is_a_known_secret(url: str) -> None:
    """The userinfo travels as ``Basic base64(user:pass)``: a server that
    echoes the bare token must not get it shown (padded or not)."""
    _, userinfo = split_userinfo(url)
    assert userinfo is not None
    token = base64.b64encode(":".join(userinfo).encode()).decode()
    for echoed in (f"bad key {token}", f"bad key {token.rstrip('=')}.", f"Basic {token}"):
        shown = redact(echoed, url_secrets(url), shapes=False)
        assert token.rstrip("=") not in shown, shown


def test_each_line_of_a_multi_line_secret_is_masked_on_its_own() -> None:
    """httpx quotes a bad header as bytes (``\\n`` escaped): the whole secret
    never appears, its lines do."""
    key = "sk-FIRSTLINE\r\nSECONDLINE\nx"
    shown = f"Illegal header value b'Bearer {key!r}'"
    assert redact(shown, [key], shapes=False) == "Illegal header value b'Bearer '***\\r\\n***\\nx''"
    mask = StreamMask([key])
    assert mask.feed("a SECONDLINE b") == "a *** b"


def test_calls_whose_ids_mask_alike_keep_distinct_ids() -> None:
    """Each result answers its own call: two ids that differ only in the
    secret they carry must not become one."""
    keys = ["sk-FIRSTSECRET", "sk-OTHERSECRET"]
    calls = [ToolCall(call_id=f"call_{k}", name="shell", arguments="{}") for k in keys]
    done = StreamDone(text="", reasoning="", tool_calls=calls, finish="tool_calls", usage=Usage())
    ids = [c.call_id for c in redact_round(done, keys).tool_calls]
    assert len(set(ids)) == 2 and not any(k in i for k in keys for i in ids), ids


def test_an_unparseable_url_without_userinfo_or_query_is_shown_as_given() -> None:
    """Nothing there can hold a credential the parsed form would mask, so the
    person sees which value is wrong; with ``@`` or ``?`` it stays masked whole."""
    assert redact_url("http://127.0.0.1:99999/v1") == "http://127.0.0.1:99999/v1"
    assert redact_url("http://[::1") == "http://[::1"
    assert redact_url("http://u:pw@[::1") == "***"
    assert redact_url("http://h:99999/v1?key=sk-1") == "***"
