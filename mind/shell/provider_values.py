"""The check of the API key, a provider setting that goes on the wire as it is
(the base URL's check is :func:`mind.shell.base_url.check_base_url`).

Rule (``docs/design/secrets.md``): a value httpx would refuse per request —
a key a header cannot carry — is a :class:`~mind.errors.ConfigError` when
config resolves (exit 2, one line, naming the setting and its source), never
an ``internal`` error or a ``network`` failure retried with the key's rest
in its detail. Messages never show the key.
"""

from __future__ import annotations

from mind.errors import ConfigError


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
