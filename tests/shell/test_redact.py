"""The one URL-masking rule and the endpoint join (issue #7 items 1-2)."""

from __future__ import annotations

import pytest

from mind.shell.providers import ProviderSettings, make_provider
from mind.shell.providers._common import endpoint_url, split_userinfo
from mind.shell.providers._http import HttpProvider
from mind.shell.redact import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://h:1/v1", "http://h:1/v1"),
        ("http://u:pw@h/v1", "http://u:***@h/v1"),
        ("https://sk-token@h/v1", "https://***@h/v1"),
        ("http://h/v1?api-version=2024&sig=abc&x=", "http://h/v1?api-version=2024&sig=***&x=***"),
        ("http://h:notaport/", "***"),
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
