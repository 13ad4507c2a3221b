"""Checks of the two provider settings that go on the wire as they are: the
base URL and the API key.

Rule (``docs/design/secrets.md``): a value httpx would refuse per request —
a URL it cannot parse or connect to, a key a header cannot carry — is a
:class:`~mind.errors.ConfigError` when config resolves (exit 2, one line,
naming the setting and its source), never an ``internal`` error or a
``network`` failure retried with the key's rest in its detail. Messages
show the URL through :func:`~mind.shell.redact.redact_url` and never show
the key.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from mind.errors import ConfigError
from mind.shell.redact import redact_url

_HOST_LABELS = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")
"""An ASCII host name as it goes on the wire (after IDNA encoding)."""


def check_base_url(url: str, source: str) -> None:
    """Refuse a base URL mind could not send a request to.

    Rule: it parses; the scheme is ``http`` or ``https`` and there is a
    host; a port, if given, is 1–65535; the host is an IP literal or a name
    that IDNA-encodes to ASCII labels (``bücher.example`` yes, ``xn--a`` or
    ``exa mple`` no).

    Args:
        url: the ``base_url`` setting's value.
        source: where it came from (``--base-url``, ``env OPENAI_BASE_URL``,
            ``config /path/config.toml``), named in the error.

    Raises:
        ConfigError: ``base_url '<masked url>' (<source>): <reason>``.
    """

    def refuse(reason: str) -> ConfigError:
        return ConfigError(f"base_url {redact_url(url)!r} ({source}): {reason}")

    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed "[" of an IPv6 host
        raise refuse(f"cannot be parsed ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise refuse("is not an http(s) URL with a host")
    try:
        port = parts.port
    except ValueError:
        raise refuse("the port must be a number from 1 to 65535") from None
    if port is not None and not 1 <= port <= 65535:
        raise refuse("the port must be a number from 1 to 65535")
    import httpx  # here, not at import: config (and `mind --help`) must not load it

    try:
        parsed = httpx.URL(url)
        parsed.host  # noqa: B018 -- decodes xn-- labels as the Host header is built: may raise
        host = parsed.raw_host.decode("ascii")
    except (httpx.InvalidURL, UnicodeError, ValueError):  # idna errors are UnicodeErrors
        raise refuse("the host cannot be encoded for a request (IDNA)") from None
    try:
        ipaddress.ip_address(host)
    except ValueError:
        if not _HOST_LABELS.fullmatch(host):
            raise refuse("the host is not a valid host name") from None


def check_api_key(key: str, source: str) -> None:
    """Refuse an API key an HTTP header cannot carry.

    Rule: every character is visible ASCII (``!`` to ``~``): a newline,
    control character, space or non-ASCII letter is a mistake (a key file
    read with its line end, a pasted quote) that httpx would reject per
    request, quoting the key's rest.

    Args:
        key: the key (never part of the message).
        source: where it came from (``env OPENAI_API_KEY``, ``keyring …``).

    Raises:
        ConfigError: naming ``source`` and the position and kind of the
            first bad character.
    """
    for at, char in enumerate(key):
        if not "!" <= char <= "~":
            kind = (
                "a line break"
                if char in "\r\n"
                else "a space"
                if char.isspace()
                else "a control character"
                if ord(char) < 0x80
                else "a non-ASCII character"
            )
            raise ConfigError(
                f"the API key ({source}) has {kind} at position {at + 1}: an HTTP header "
                "cannot carry it; store the key alone, without line end or quotes"
            )
