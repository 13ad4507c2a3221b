"""The environment a tool process runs with: an allow-list, never mind's own.

Rule (``docs/design/secrets.md``): a tool gets only the variables named in
:data:`ALLOWED` (the locale categories :data:`LOCALE_CATEGORIES` among them)
copied from mind's environment, then the
variables the user passes through or sets in ``config.toml``::

    [shell_environment]
    include = ["GOPATH", "CARGO_*"]   # pass these through (NAME or PREFIX_*)
    set = { RUST_LOG = "info" }       # give every tool these values

Anything else — API keys, ``DATABASE_URL``, proxy URLs with passwords,
``SSH_AUTH_SOCK``, ``GH_PAT`` — never reaches a tool, so a model-run command
cannot print it into the journal or the next request. A deny-list by name
cannot know every secret's name; an allow-list fails closed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import msgspec

from mind.errors import ConfigError

LOCALE_CATEGORIES: tuple[str, ...] = (
    "LC_ALL",
    "LC_CTYPE",
    "LC_COLLATE",
    "LC_MESSAGES",
    "LC_MONETARY",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_ADDRESS",
    "LC_IDENTIFICATION",
    "LC_MEASUREMENT",
    "LC_NAME",
    "LC_PAPER",
    "LC_TELEPHONE",
)
"""The POSIX and glibc locale categories (locale(7)): how a tool formats
text, numbers and dates. Only these: any other ``LC_`` name is anyone's
variable (``LC_SECRET``) and needs ``include``."""

ALLOWED: tuple[str, ...] = (
    "PATH",  # to find programs
    "HOME",  # where git, ssh config and dotfiles are looked up
    "USER",  # who runs; some tools print or key caches on it
    "LOGNAME",  # POSIX spelling of USER (login(1))
    "SHELL",  # the user's shell, for tools that spawn one
    "TMPDIR",  # where temporary files go
    "LANG",  # locale: text encoding of the tool's output
    "LANGUAGE",  # message language (GNU gettext)
    "TZ",  # time zone of printed dates
    "TERM",  # terminal capabilities for colour and width
    "COLORTERM",  # truecolor support
    "NO_COLOR",  # the user asked for no colour (no-color.org)
    *LOCALE_CATEGORIES,  # how text, numbers and dates are formatted
)
"""Variables copied from mind's environment into every tool's, with why."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\*?")


class ShellEnvironment(msgspec.Struct, frozen=True, kw_only=True):
    """What ``config.toml``'s ``[shell_environment]`` table adds to the allow-list.

    Attributes:
        include: names (``GOPATH``) or prefixes ending in ``*`` (``CARGO_*``)
            passed through from mind's environment: the user's explicit choice.
        values: ``(name, value)`` pairs every tool gets, over everything else
            (the table's ``set`` key).
    """

    include: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_table(cls, table: object, path: Path) -> ShellEnvironment:
        """Parse the ``[shell_environment]`` table of ``path``.

        Rule: only the keys ``include`` (a list of variable names, each may end
        in ``*``; a bare ``*`` is refused: name what to pass) and ``set`` (a
        table of name = string). Anything else fails closed.

        Raises:
            ConfigError: naming ``path`` and the offending key.
        """
        where = f"{path}: `shell_environment"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}` must be a table ([shell_environment])")
        unknown = sorted(set(table) - {"include", "set"})
        if unknown:
            raise ConfigError(
                f"{where}` has unknown key(s) {', '.join(unknown)}; known: include, set"
            )
        include = table.get("include", [])
        if not isinstance(include, list) or not all(
            isinstance(p, str) and _PATTERN.fullmatch(p) for p in include
        ):
            raise ConfigError(
                f'{where}.include` must be a list of variable names or prefixes like "CARGO_*"'
            )
        pairs = table.get("set", {})
        if not isinstance(pairs, dict):
            raise ConfigError(f'{where}.set` must be a table of NAME = "value"')
        for name, value in pairs.items():
            if not _NAME.fullmatch(name) or not isinstance(value, str):
                raise ConfigError(f'{where}.set.{name}` must be NAME = "string value"')
        return cls(include=tuple(include), values=tuple(pairs.items()))

    def describe(self) -> str:
        """One line for ``mind config``: what is added (names only, never values)."""
        parts = ["allow-list"]
        if self.include:
            parts.append("include " + ", ".join(self.include))
        if self.values:
            parts.append("set " + ", ".join(name for name, _ in self.values))
        return " + ".join(parts)


def _passes(name: str, patterns: tuple[str, ...]) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def tool_environment(
    environ: Mapping[str, str],
    extra: ShellEnvironment | None = None,
    own: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment of a tool process.

    Args:
        environ: mind's own environment (read, never modified).
        extra: the user's ``[shell_environment]`` additions.
        own: variables mind itself sets for tools (win over everything).

    Returns:
        :data:`ALLOWED` from ``environ``, then ``extra.include``
        matches from ``environ``, then ``extra.values``, then ``own``.
    """
    extra = extra or ShellEnvironment()
    env = {k: v for k, v in environ.items() if k in ALLOWED or _passes(k, extra.include)}
    env.update(extra.values)
    env.update(own or {})
    return env
