"""The one owner of base-URL parsing: whether a ``base_url`` setting can be
sent to (checked when config resolves), the request URL of an endpoint on it,
its userinfo (sent as Basic auth, never in the URL), its origin as errors show
it, and whether it reaches OpenAI's own API. Pure functions; no I/O.

Masking a URL for display (any URL in text, not only the base URL) is
:mod:`mind.shell.redact`'s job.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import unquote, urlsplit, urlunsplit

from mind.errors import ConfigError
from mind.shell.redact import redact_url

_HOST_LABELS = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\.?")
"""An ASCII host name as it goes on the wire (after IDNA encoding)."""


def check_base_url(url: str, source: str) -> None:
    """Refuse a base URL mind could not send a request to — when config
    resolves, as a :class:`~mind.errors.ConfigError` (exit 2, one line), never
    per request as an ``internal`` error or a retried ``network`` failure
    (``docs/design/secrets.md``). The message shows the URL masked
    (:func:`~mind.shell.redact.redact_url`).

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


def is_openai_host(base_url: str) -> bool:
    """True when ``base_url`` reaches OpenAI's own API, whose validation differs.

    OpenAI (``api.openai.com``), Azure OpenAI (``*.openai.azure.com``) and
    OpenRouter (``openrouter.ai``, which passes OpenAI's validation errors
    through, openclaw#875). Every other host is a compatible server with its
    own rules (docs/design/providers.md §8: never apply one API's rule to another's).
    """
    host = (urlsplit(base_url).hostname or "").lower()
    return host in ("api.openai.com", "openrouter.ai") or host.endswith(".openai.azure.com")


def endpoint_url(base_url: str, path: str, *, drop_suffix: str = "") -> str:
    """The request URL of ``path`` (e.g. ``/chat/completions``) on ``base_url``.

    The path is joined onto the base URL's *path*; its query string is kept
    (Azure's ``?api-version=…``) and its fragment dropped.
    ``drop_suffix`` is removed from the end of the base path first (Anthropic
    accepts a base URL with or without ``/v1``).

    Example: ``endpoint_url("http://h/v1/?api-version=2024", "/chat/completions")``
    is ``"http://h/v1/chat/completions?api-version=2024"``.
    """
    parts = urlsplit(base_url)
    base_path = parts.path.rstrip("/")
    if drop_suffix and base_path.endswith(drop_suffix):
        base_path = base_path[: -len(drop_suffix)]
    return urlunsplit((parts.scheme, parts.netloc, base_path + path, parts.query, ""))


def split_userinfo(base_url: str) -> tuple[str, tuple[str, str] | None]:
    """``base_url`` without its userinfo, and that userinfo as ``(user, password)``.

    The request URL never carries userinfo (httpx would turn it into Basic
    auth in place of the API key, docs/design/providers.md §3); the caller sends it as
    Basic auth only when no API key is configured. Percent-escapes in the
    userinfo are decoded; a missing password is ``""``.
    """
    parts = urlsplit(base_url)
    if "@" not in parts.netloc:
        return base_url, None
    where = parts.netloc.rpartition("@")[2]
    bare = urlunsplit((parts.scheme, where, parts.path, parts.query, parts.fragment))
    return bare, (unquote(parts.username or ""), unquote(parts.password or ""))


def origin(url: str) -> str:
    """``scheme://netloc`` of ``url`` (``"http://h:8080"``), as errors name the server."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def endpoint_path(url: str) -> str:
    """The path of a request URL (``"/"`` when it has none)."""
    return urlsplit(url).path or "/"
