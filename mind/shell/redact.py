"""Masking the secrets a URL can carry, for every place one is displayed.

A base URL may hold a password in its userinfo (``http://user:pass@host``)
or a key in its query (``?api_key=…``, ``?sig=…``). :func:`redact_url` is
the one rule applied wherever a URL reaches stdout, stderr, a journal or an
error message (issue #7 item 1).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

MASK = "***"
"""What a masked part shows."""

_PUBLIC_QUERY_KEYS = frozenset({"api-version", "api_version", "version"})
"""Query parameters shown as they are; every other value is masked (fail
closed: a parameter of unknown meaning may be a credential)."""


def redact_url(url: str) -> str:
    """``url`` with its secrets masked as ``***``.

    Rule: a userinfo password is masked (``user:***@``); a userinfo with no
    password is masked whole (``***@``: a bare token is often sent that way);
    every query value is masked except :data:`_PUBLIC_QUERY_KEYS`; the
    fragment is dropped. Text that does not parse as a URL is masked whole.

    Args:
        url: any text meant to be a URL.

    Returns:
        Display text; never raises.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a malformed port
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        where = netloc.rpartition("@")[2]
        user = MASK if parts.password is None else f"{parts.username}:{MASK}"
        netloc = f"{user}@{where}"
    query = "&".join(
        f"{quote(key, safe='-_.')}={quote(value, safe='') if key in _PUBLIC_QUERY_KEYS else MASK}"
        for key, value in parse_qsl(parts.query, keep_blank_values=True)
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
