"""Resolve which model provider a session talks to.

Precedence, highest first: command-line flags, environment
(``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``,
``MIND_PROVIDER``, ``MIND_MODEL``), ``$MIND_HOME/config.toml``, then
defaults. API keys come from the environment or the OS keyring (service
``mind``, user = provider kind), never from the journal or logs.

``config.toml``::

    provider = "openai-chat"        # openai-chat | openai-responses | anthropic | scripted
    model = "gpt-4.1"
    base_url = "http://127.0.0.1:11434/v1"   # optional
    approval = "on-request"         # untrusted | on-request | never
    max_retries = 4                 # retries of a transient model failure per turn
    max_retry_seconds = 300         # total retry time of a turn (env MIND_MAX_RETRY_SECONDS)
    stream_idle_timeout = 300       # seconds without a byte from the model before the
                                    # attempt fails as `network` (env MIND_STREAM_IDLE_TIMEOUT)
"""

from __future__ import annotations

import contextlib
import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args
from urllib.parse import urlsplit

import msgspec

from mind.effects.policy import ApprovalPolicy
from mind.errors import ConfigError
from mind.shell.providers import ProviderSettings

ProviderKind = Literal["openai-chat", "openai-responses", "anthropic", "scripted"]
PROVIDER_KINDS: tuple[str, ...] = get_args(ProviderKind)
APPROVAL_POLICIES: tuple[str, ...] = ("untrusted", "on-request", "never")

DEFAULT_MODELS: dict[str, str] = {
    "openai-chat": "gpt-4.1",
    "openai-responses": "gpt-5",
    "anthropic": "claude-sonnet-4-5",
    "scripted": "scripted",
}
OFFICIAL_BASE_URLS: dict[str, str] = {
    "openai-chat": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}

NOT_CONFIGURED = (
    "No model provider is configured. Set OPENAI_API_KEY (OpenAI) or ANTHROPIC_API_KEY "
    "(Anthropic), or choose one explicitly with --provider openai-chat|openai-responses|"
    "anthropic [--model NAME] [--base-url URL] (any OpenAI-compatible server such as Ollama "
    "or vLLM works with --provider openai-chat --base-url http://127.0.0.1:11434/v1), or put "
    'provider = "...", model = "..." in {config}. To run offline without any model, use '
    "--provider scripted --script FILE, where FILE is a YAML list of replies such as "
    '`- text: "Hello"` or `- tool_calls: [{name: shell, arguments: {command: ls}}]`.'
)


CONFIG_KEYS = frozenset(
    {
        "provider",
        "model",
        "base_url",
        "approval",
        "script",
        "max_retries",
        "max_retry_seconds",
        "stream_idle_timeout",
    }
)
"""Keys ``config.toml`` may hold; any other key is an error (a typo must not
silently fall back to defaults)."""


class CliOverrides(msgspec.Struct, frozen=True, kw_only=True):
    """Values given on the command line (None = not given)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    script: str | None = None
    approval: str | None = None


class ResolvedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The provider settings and approval policy a session runs with."""

    provider: ProviderSettings
    approval: ApprovalPolicy
    max_retries: int = 4
    """Retries of a transient model-request failure per turn (``max_retries`` in
    config.toml, env ``MIND_MAX_RETRIES``)."""
    max_retry_s: float = 300.0
    """Total retry time of a turn in seconds (``max_retry_seconds``, env
    ``MIND_MAX_RETRY_SECONDS``; see ``RetryPolicy.within_time``)."""
    stream_idle_timeout_s: float = 300.0
    """Seconds without a byte from the model (before the headers or between
    chunks) after which the attempt fails as a transient ``network`` failure
    (``stream_idle_timeout``, env ``MIND_STREAM_IDLE_TIMEOUT``; Codex's default)."""


def load_config_file(path: Path) -> dict[str, Any]:
    """Read ``config.toml``; a missing file is ``{}``.

    Raises:
        ConfigError: the file is not valid TOML or has a key of the wrong type
            (message names the path).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(CONFIG_KEYS))}"
        )
    for key in ("provider", "model", "base_url", "approval", "script"):
        if key in data and not isinstance(data[key], str):
            raise ConfigError(f"{path}: `{key}` must be a string")
    return data


def resolve(cli: CliOverrides, env: Mapping[str, str], config_path: Path) -> ResolvedConfig:
    """Combine flags, environment and config file into settings.

    Raises:
        ConfigError: nothing configured (message :data:`NOT_CONFIGURED`), an
            unknown provider or approval policy, a scripted provider without a
            script, or an official endpoint without an API key.
    """
    file = load_config_file(config_path)
    kind = cli.provider or env.get("MIND_PROVIDER") or file.get("provider")
    if kind is None:
        if env.get("OPENAI_API_KEY"):
            kind = "openai-chat"
        elif env.get("ANTHROPIC_API_KEY"):
            kind = "anthropic"
        elif cli.script:
            kind = "scripted"
        else:
            raise ConfigError(NOT_CONFIGURED.replace("{config}", str(config_path)))
    if kind not in PROVIDER_KINDS:
        raise ConfigError(f"unknown provider {kind!r}; choose one of {', '.join(PROVIDER_KINDS)}")
    approval = cli.approval or file.get("approval") or "on-request"
    if approval not in APPROVAL_POLICIES:
        raise ConfigError(
            f"unknown approval policy {approval!r}; choose one of {', '.join(APPROVAL_POLICIES)}"
        )
    model = cli.model or env.get("MIND_MODEL") or file.get("model") or DEFAULT_MODELS[kind]
    base_url = cli.base_url or file.get("base_url")
    if base_url is None and kind.startswith("openai"):
        base_url = env.get("OPENAI_BASE_URL") or None
    if base_url is None and kind == "anthropic":
        base_url = env.get("ANTHROPIC_BASE_URL") or None
    if base_url is not None:
        parsed = urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(f"base URL {base_url!r} is not an http(s) URL")
    script = cli.script or file.get("script")
    if kind == "scripted":
        if not script:
            raise ConfigError("--provider scripted needs --script FILE (a YAML list of replies)")
        script = str(Path(script).expanduser().resolve())
    api_key = _api_key(kind, env)
    if kind != "scripted" and api_key is None and base_url in (None, OFFICIAL_BASE_URLS[kind]):
        var = "ANTHROPIC_API_KEY" if kind == "anthropic" else "OPENAI_API_KEY"
        raise ConfigError(
            f"provider {kind} needs an API key: set {var} (or store one in the OS keyring "
            f"under service 'mind', user '{kind}'), or point --base-url at a local server"
        )
    idle_s = _seconds("stream_idle_timeout", "MIND_STREAM_IDLE_TIMEOUT", env, file, config_path)
    settings = ProviderSettings(
        kind=cast(ProviderKind, kind),
        model=model,
        base_url=base_url,
        api_key=api_key,
        script_path=script if kind == "scripted" else None,
        timeout_s=idle_s,
    )
    return ResolvedConfig(
        provider=settings,
        approval=cast(ApprovalPolicy, approval),
        max_retries=_max_retries(env, file, config_path),
        max_retry_s=_seconds(
            "max_retry_seconds", "MIND_MAX_RETRY_SECONDS", env, file, config_path, zero_ok=True
        ),
        stream_idle_timeout_s=idle_s,
    )


def _max_retries(env: Mapping[str, str], file: Mapping[str, Any], path: Path) -> int:
    raw: object = env.get("MIND_MAX_RETRIES", file.get("max_retries", 4))
    try:
        value = int(str(raw))
    except ValueError:
        raise ConfigError(f"max_retries must be an integer >= 0, got {raw!r}") from None
    if not 0 <= value <= 100:
        raise ConfigError(f"max_retries must be between 0 and 100, got {value} ({path})")
    return value


def _seconds(
    key: str,
    var: str,
    env: Mapping[str, str],
    file: Mapping[str, Any],
    path: Path,
    *,
    default: float = 300.0,
    zero_ok: bool = False,
) -> float:
    """A duration in seconds from env ``var``, else ``key`` of config.toml, else ``default``.

    Raises:
        ConfigError: not a finite number, negative, or 0 unless ``zero_ok``
            (names the variable or the file it came from).
    """
    where = f"env {var}" if env.get(var) else f"`{key}` in {path}"
    raw: object = env.get(var) or file.get(key, default)
    value = math.nan
    if isinstance(raw, str | int | float) and not isinstance(raw, bool):
        with contextlib.suppress(ValueError):
            value = float(raw)
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        least = ">= 0" if zero_ok else "> 0"
        raise ConfigError(f"{where} must be a number of seconds {least}, got {raw!r}")
    return value


_SECURE_KEYRING_MODULES = (
    "keyring.backends.SecretService",
    "keyring.backends.libsecret",
    "keyring.backends.kwallet",
    "keyring.backends.macOS",
    "keyring.backends.Windows",
)


def _api_key(kind: str, env: Mapping[str, str]) -> str | None:
    if kind == "scripted":
        return None
    var = "ANTHROPIC_API_KEY" if kind == "anthropic" else "OPENAI_API_KEY"
    if env.get(var):
        return env[var]
    return _keyring_key(kind)


def _keyring_key(kind: str) -> str | None:
    """Look the key up in a *secure* OS keyring only; anything else is None.

    Fails closed (LIBRARY-NOTES, keyring): the headless fail backend and
    plaintext backends such as keyrings.alt are never used.
    """
    try:
        import keyring
        from keyring.backends import chainer

        backend = keyring.get_keyring()
        leaves = backend.backends if isinstance(backend, chainer.ChainerBackend) else [backend]
        if not leaves or not all(
            type(b).__module__.startswith(_SECURE_KEYRING_MODULES) for b in leaves
        ):
            return None
        value = keyring.get_password("mind", kind)
    except Exception:  # any keyring failure means "no key there"
        return None
    return value or None


def resolve_config(
    *,
    provider: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    script: str | None = None,
    approval: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Library form of :func:`resolve`: keyword overrides over env and config.toml.

    Args:
        env: environment to read (default ``os.environ``); ``MIND_HOME`` in it
            locates ``config.toml``.

    Raises:
        ConfigError: as :func:`resolve`.
    """
    import os

    from mind.shell.store import mind_home

    environ = os.environ if env is None else env
    cli = CliOverrides(
        provider=provider, model=model, base_url=base_url, script=script, approval=approval
    )
    return resolve(cli, environ, mind_home(environ) / "config.toml")
