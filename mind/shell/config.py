"""Resolve the settings a session runs with: provider, model, approval, retries.

Size: the settings table, its resolution and its help text are one fact in
three views; ``mind config``'s rendering (``describe`` /
``environment_help``) is the part to move out when the table grows again.

One rule for every setting, highest first: command-line flag, environment
variable, ``$MIND_HOME/config.toml``, default (:data:`SETTINGS` is the one
table; a new setting is one entry there plus its field on
:class:`ResolvedConfig`). ``--script`` without ``--provider`` means the
scripted provider. API keys come from the environment (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``) or a secure OS keyring (service ``mind``, user = the
provider kind), never from the journal, logs or ``mind config``.

``config.toml``::

    provider = "openai-chat"        # openai-chat | openai-responses | anthropic | scripted
    model = "gpt-4.1"
    base_url = "http://127.0.0.1:11434/v1"   # optional
    approval = "on-request"         # untrusted | on-request | never
    sandbox_mode = "workspace-write" # read-only | workspace-write | danger-full-access
    sandbox_network = "off"         # "on" lets sandboxed commands use the network
    add_dirs = ["/srv/data"]        # more writable roots for sandboxed commands
    max_retries = 4                 # retries of a transient model failure per turn
    max_rounds = 200                # model rounds per turn before it fails (env MIND_MAX_ROUNDS)
    max_retry_seconds = 300         # total retry time of a turn (env MIND_MAX_RETRY_SECONDS)
    stream_idle_timeout = 300       # seconds without a byte from the model before the
                                    # attempt fails as `network` (env MIND_STREAM_IDLE_TIMEOUT)
    max_output_mib = 8              # model output (text, reasoning, tool arguments) one turn
                                    # may stream; past it the turn fails `output_limit`
                                    # and its input waits (env MIND_MAX_OUTPUT_MIB)
    tool_output_max_bytes = 32768   # bytes of one tool result the model sees (head + tail)
    tool_output_request_max_bytes = 262144  # of all tool results in one request; the
                                    # oldest are cut first (docs/design/context.md §3)
    auto_compact_percent = 80       # compact when the next request would pass this % of the
                                    # model's window; 0 disables (env MIND_AUTO_COMPACT_PERCENT)
    model_context_window = 32768    # the model's context window in tokens (unset: the
                                    # built-in table, or what the server's own error says;
                                    # --model-context-window, env MIND_MODEL_CONTEXT_WINDOW)

    [shell_environment]             # tools get an allow-list only (mind.shell.tool_env)
    include = ["GOPATH", "CARGO_*"] # pass these through from mind's environment
    set = { RUST_LOG = "info" }     # give every tool these values

One module (over 500 lines) because it is the one table of settings: each
setting's sources, default and check sit beside the one precedence rule
(flag > env > config.toml > default); split, that rule would be repeated.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Literal, cast, get_args

import msgspec

from mind.context.tool_output import DEFAULT_LIMITS, MIN_PER_CALL_BYTES, OutputLimits
from mind.conversation import DEFAULT_MAX_OUTPUT_BYTES
from mind.effects.boundary import SANDBOX_MODES, SandboxMode
from mind.effects.policy import ApprovalPolicy
from mind.errors import ConfigError, NotConfiguredError
from mind.shell import private_files
from mind.shell.base_url import check_base_url
from mind.shell.provider_values import check_api_key
from mind.shell.providers import ProviderKind, ProviderSettings
from mind.shell.redact import redact_url, url_secrets
from mind.shell.tool_env import ShellEnvironment

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
API_KEY_VARS: dict[str, str] = {
    "openai-chat": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
"""The environment variable holding each provider's API key."""
KEYRING_SERVICE = "mind"
"""OS keyring service name; the keyring user is the provider kind."""

NOT_CONFIGURED = (
    "No model provider is configured. Set OPENAI_API_KEY (OpenAI) or ANTHROPIC_API_KEY "
    "(Anthropic), or choose one explicitly with --provider openai-chat|openai-responses|"
    "anthropic [--model NAME] [--base-url URL] (any OpenAI-compatible server such as Ollama "
    "or vLLM works with --provider openai-chat --base-url http://127.0.0.1:11434/v1), or put "
    'provider = "...", model = "..." in {config}. To run offline without any model, use '
    "--provider scripted --script FILE, where FILE is a YAML list of replies such as "
    '`- text: "Hello"` or `- tool_calls: [{name: shell, arguments: {command: ls}}]`.'
)


class Setting(msgspec.Struct, frozen=True, kw_only=True):
    """One configurable value and every place it may come from.

    Attributes:
        key: the ``config.toml`` key and the :class:`CliOverrides` field.
        help: one line for ``mind --help`` and ``mind config``.
        flag: the command-line flag ("" when there is none).
        env: environment variables, first non-empty one wins.
        env_by_provider: environment variables that depend on the provider
            kind (checked after ``env``), e.g. ``OPENAI_BASE_URL``.
        type: ``"str"``, ``"int"``, ``"seconds"`` (a finite number of
            seconds, > 0 unless ``zero_ok``) or ``"paths"`` (directories:
            a repeatable flag, ``os.pathsep``-separated env text, a TOML
            list of strings); env text is converted.
        choices: allowed values ("" = any).
        minimum, maximum: bounds of an ``int`` setting.
    """

    key: str
    help: str
    flag: str = ""
    env: tuple[str, ...] = ()
    env_by_provider: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    type: Literal["str", "int", "seconds", "paths"] = "str"
    choices: tuple[str, ...] = ()
    minimum: int = 0
    maximum: int = 0
    zero_ok: bool = False


_OPENAI_KINDS = ("openai-chat", "openai-responses")
MAX_CONTEXT_WINDOW: Final = 100_000_000
"""Largest ``model_context_window`` accepted, in tokens (no model comes near it)."""

SETTINGS: tuple[Setting, ...] = (
    Setting(
        key="provider",
        help="model provider: " + " | ".join(PROVIDER_KINDS) + " (default: --script means "
        "scripted, else from the API key in the environment)",
        flag="--provider",
        env=("MIND_PROVIDER",),
        choices=PROVIDER_KINDS,
    ),
    Setting(
        key="model",
        help="model name (default per provider: "
        + ", ".join(f"{k} {v}" for k, v in DEFAULT_MODELS.items() if k != "scripted")
        + ")",
        flag="--model",
        env=("MIND_MODEL",),
    ),
    Setting(
        key="base_url",
        help="server root (default: the provider's official endpoint)",
        flag="--base-url",
        env_by_provider={
            **dict.fromkeys(_OPENAI_KINDS, ("OPENAI_BASE_URL",)),
            "anthropic": ("ANTHROPIC_BASE_URL",),
        },
    ),
    Setting(
        key="approval",
        help="when to ask before running a tool: "
        + " | ".join(APPROVAL_POLICIES)
        + " (default on-request)",
        flag="--approval",
        env=("MIND_APPROVAL",),
        choices=APPROVAL_POLICIES,
    ),
    Setting(
        key="sandbox_mode",
        help="what shell commands may change: "
        + " | ".join(SANDBOX_MODES)
        + " (default workspace-write; danger-full-access runs them unsandboxed)",
        flag="--sandbox",
        env=("MIND_SANDBOX",),
        choices=SANDBOX_MODES,
    ),
    Setting(
        key="sandbox_network",
        help="whether sandboxed commands may use the network: off | on (default off)",
        flag="--sandbox-network",
        env=("MIND_SANDBOX_NETWORK",),
        choices=("off", "on"),
    ),
    Setting(
        key="add_dirs",
        help="more directories sandboxed commands may write (besides the workspace)",
        flag="--add-dir",
        env=("MIND_ADD_DIRS",),
        type="paths",
    ),
    Setting(
        key="script",
        help="reply script (YAML list) of the scripted provider",
        flag="--script",
    ),
    Setting(
        key="max_retries",
        help="retries of a transient model failure per turn (default 4)",
        env=("MIND_MAX_RETRIES",),
        type="int",
        minimum=0,
        maximum=100,
    ),
    Setting(
        key="max_rounds",
        help="model rounds one turn may take before it fails (default 200; a tool loop "
        "that never ends stops there)",
        env=("MIND_MAX_ROUNDS",),
        type="int",
        minimum=1,
        maximum=100_000,
    ),
    Setting(
        key="max_retry_seconds",
        help="total time (s) in which a turn's retries may start, from its first failure "
        "(default 300; 0: no retries)",
        env=("MIND_MAX_RETRY_SECONDS",),
        type="seconds",
        zero_ok=True,
    ),
    Setting(
        key="stream_idle_timeout",
        help="seconds without a byte from the model before the attempt fails as a "
        "retried network failure (default 300)",
        env=("MIND_STREAM_IDLE_TIMEOUT",),
        type="seconds",
    ),
    Setting(
        key="max_output_mib",
        help="MiB of model output (text, reasoning, tool arguments) one turn may stream; "
        "past it the stream is closed, the turn fails (output_limit) and its input stays "
        "waiting (default 8)",
        env=("MIND_MAX_OUTPUT_MIB",),
        type="int",
        minimum=1,
        maximum=1024,
    ),
    Setting(
        key="tool_output_max_bytes",
        help="bytes of one tool result the model sees; a longer one keeps its head and "
        "tail and says what was cut (default 32768; the journal keeps it whole)",
        env=("MIND_TOOL_OUTPUT_MAX_BYTES",),
        type="int",
        minimum=MIN_PER_CALL_BYTES,
        maximum=64 * 1024 * 1024,
    ),
    Setting(
        key="tool_output_request_max_bytes",
        help="bytes of all tool results one model request carries; past it the oldest "
        "results are cut first (default 262144; at least tool_output_max_bytes)",
        env=("MIND_TOOL_OUTPUT_REQUEST_MAX_BYTES",),
        type="int",
        minimum=MIN_PER_CALL_BYTES,
        maximum=1024 * 1024 * 1024,
    ),
    Setting(
        key="auto_compact_percent",
        help="compact the conversation before a model request that would pass this percent "
        "of the model's context window (default 80; 0: never automatically)",
        env=("MIND_AUTO_COMPACT_PERCENT",),
        type="int",
        minimum=0,
        maximum=100,
    ),
    Setting(
        key="model_context_window",
        help="the model's context window in tokens (default: unset, i.e. the built-in "
        "table of well-known models, else what the server's own context-length error "
        "states, else unknown)",
        flag="--model-context-window",
        env=("MIND_MODEL_CONTEXT_WINDOW",),
        type="int",
        minimum=1,
        maximum=MAX_CONTEXT_WINDOW,
    ),
)
"""Every setting, in the order ``mind config`` prints them."""

DEFAULTS: dict[str, str | int | float] = {
    "approval": "on-request",
    "sandbox_mode": "workspace-write",
    "sandbox_network": "off",
    "add_dirs": "none",  # as `mind config` shows an empty list
    "max_retries": 4,
    "max_rounds": 200,
    "max_retry_seconds": 300.0,
    "stream_idle_timeout": 300.0,
    "max_output_mib": 8,
    "tool_output_max_bytes": DEFAULT_LIMITS.per_call_bytes,
    "tool_output_request_max_bytes": DEFAULT_LIMITS.per_request_bytes,
    "auto_compact_percent": 80,
}
"""Defaults of the settings that have one whatever the provider (``model`` and
``base_url`` default per provider: :data:`DEFAULT_MODELS`, :data:`OFFICIAL_BASE_URLS`)."""

_BY_KEY = {s.key: s for s in SETTINGS}
TABLE_KEYS = frozenset({"shell_environment"})
"""Tables ``config.toml`` may hold (parsed by their owners, not :data:`SETTINGS`)."""
CONFIG_KEYS = frozenset(_BY_KEY) | TABLE_KEYS
"""Keys ``config.toml`` may hold; any other key is an error (a typo must not
silently fall back to defaults)."""


class ConfigFile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``config.toml`` decoded: one typed field per key it may hold (None = not
    set), so nothing downstream reads an untyped table. Field names are the
    keys of :data:`SETTINGS` plus the tables of :data:`TABLE_KEYS`; values are
    only type-checked here, their choices and bounds are checked by
    resolution (which names the source). Built by :func:`load_config_file`.
    """

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    approval: str | None = None
    sandbox_mode: str | None = None
    sandbox_network: str | None = None
    add_dirs: tuple[str, ...] | None = None
    script: str | None = None
    max_retries: int | None = None
    max_rounds: int | None = None
    max_retry_seconds: float | None = None
    """Seconds (a TOML integer or float)."""
    stream_idle_timeout: float | None = None
    """Seconds (a TOML integer or float)."""
    max_output_mib: int | None = None
    tool_output_max_bytes: int | None = None
    tool_output_request_max_bytes: int | None = None
    auto_compact_percent: int | None = None
    model_context_window: int | None = None
    """Tokens."""
    shell_environment: ShellEnvironment | None = None
    """``[shell_environment]``, parsed by its owner (:meth:`ShellEnvironment.from_table`)."""

    def value(self, key: str) -> str | int | float | tuple[str, ...] | None:
        """The value of setting ``key`` (a :data:`SETTINGS` key), None when not set."""
        found: str | int | float | tuple[str, ...] | None = getattr(self, key)
        return found


_TYPE_WORDS: Final[dict[str, str]] = {
    "str": "a string",
    "int": "an integer",
    "seconds": "a number of seconds",
    "paths": "a list of strings",
}
"""How a wrong-type error says what a setting's ``config.toml`` value must be."""


def _key_line(text: str, key: str) -> int:
    """1-based line of the first ``key =`` in ``text`` (0 when not found: tomllib
    gives lines for syntax errors only, so the key's line is looked up)."""
    match = re.search(rf"^[ \t]*{re.escape(key)}[ \t]*=", text, re.MULTILINE)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _where(path: Path, text: str, key: str) -> str:
    line = _key_line(text, key)
    return f"{path}:{line}" if line else str(path)


class CliOverrides(msgspec.Struct, frozen=True, kw_only=True):
    """Values given on the command line (None = not given)."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    script: str | None = None
    approval: str | None = None
    sandbox_mode: str | None = None
    sandbox_network: str | None = None
    add_dirs: tuple[str, ...] | None = None
    model_context_window: str | None = None
    """Tokens, as typed (checked by resolution)."""


class ResolvedConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The provider settings and approval policy a session runs with."""

    provider: ProviderSettings
    approval: ApprovalPolicy
    sandbox: SandboxMode = "workspace-write"
    """Where shell commands run (``sandbox_mode``, ``--sandbox``, env ``MIND_SANDBOX``)."""
    sandbox_network: bool = False
    """Whether sandboxed commands may use the network (``sandbox_network``,
    ``--sandbox-network``, env ``MIND_SANDBOX_NETWORK``; default off)."""
    add_dirs: tuple[str, ...] = ()
    """Absolute extra writable roots (``add_dirs``, ``--add-dir``, env ``MIND_ADD_DIRS``)."""
    max_retries: int = 4
    """Retries of a transient model-request failure per turn (``max_retries`` in
    config.toml, env ``MIND_MAX_RETRIES``)."""
    max_rounds: int = 200
    """Model rounds one turn may take (``max_rounds``, env ``MIND_MAX_ROUNDS``);
    past them the turn fails ``internal`` (the turn chart's ``within_round_limit``)."""
    max_retry_s: float = 300.0
    """Total retry time of a turn in seconds (``max_retry_seconds``, env
    ``MIND_MAX_RETRY_SECONDS``; see ``RetryPolicy.within_time``)."""
    stream_idle_timeout_s: float = 300.0
    """Seconds without a byte from the model (before the headers or between
    chunks) after which the attempt fails as a transient ``network`` failure
    (``stream_idle_timeout``, env ``MIND_STREAM_IDLE_TIMEOUT``; Codex's default)."""
    shell_environment: ShellEnvironment = ShellEnvironment()
    """What ``[shell_environment]`` adds to the tools' allow-listed environment."""
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    """Bytes of model output (text, reasoning, tool-call arguments) one turn may
    stream (``max_output_mib`` × 2**20, env ``MIND_MAX_OUTPUT_MIB``, default 8 MiB)."""
    tool_output: OutputLimits = DEFAULT_LIMITS
    """Bytes of tool output the model sees, per call and per request
    (``tool_output_max_bytes``, ``tool_output_request_max_bytes``;
    docs/design/context.md §3)."""
    auto_compact_percent: int = 80
    """Percent of the model's window the projected next request may reach before
    an automatic compaction (``auto_compact_percent``, env
    ``MIND_AUTO_COMPACT_PERCENT``; 0 disables; docs/design/context.md §5)."""
    model_context_window: int | None = None
    """The model's context window in tokens (``model_context_window``,
    ``--model-context-window``, env ``MIND_MODEL_CONTEXT_WINDOW``); None: unset,
    so the window is the one learned from the server or the built-in table's
    (:func:`mind.context.usage.context_window`), else unknown."""


class SettingValue(msgspec.Struct, frozen=True, kw_only=True):
    """One line of ``mind config``: an effective value and where it came from.

    Attributes:
        key: the setting (``api_key`` for the secret, shown masked).
        value: display text; never a secret (an API key shows as ``set``).
        source: ``flag --model``, ``env MIND_MODEL``, ``config PATH``,
            ``keyring mind/openai-chat``, ``default`` or an inference such
            as ``inferred from OPENAI_API_KEY``.
    """

    key: str
    value: str
    source: str


MAX_CONFIG_BYTES: Final = 1024 * 1024
"""Largest ``config.toml`` read, in bytes."""


def load_config_file(path: Path) -> ConfigFile:
    """Read and decode ``config.toml``; a missing file is ``ConfigFile()``.

    The config root and the file must be private and owned (never followed
    inside the root, never blocking: ``docs/design/state.md``).

    Raises:
        ConfigError: the file is not valid TOML (tomllib's line and column),
            has an unknown key or a key of the wrong type (``PATH:LINE:`` and
            the key), or is over :data:`MAX_CONFIG_BYTES` (message names the path).
        PrivateStateError: the config root or file is a symlink, FIFO,
            directory, another user's, or group/world-writable.
    """
    home = private_files.resolve_root(path.parent)
    try:
        private_files.private_dir(home, create=False)
        raw = private_files.read_file(home / path.name, MAX_CONFIG_BYTES)
    except FileNotFoundError:
        return ConfigFile()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc
    if raw is None:
        return ConfigFile()
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    # All unknown keys at once, and the known ones (msgspec names only the first).
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"{_where(path, text, unknown[0])}: unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(CONFIG_KEYS))}"
        )
    table = data.pop("shell_environment", None)
    try:
        config = msgspec.convert(data, ConfigFile)
    except msgspec.ValidationError as exc:
        key = _failed_key(str(exc))
        kind = _BY_KEY[key].type if key in _BY_KEY else "str"
        raise ConfigError(
            f"{_where(path, text, key)}: `{key}` must be {_TYPE_WORDS[kind]}"
        ) from exc
    if table is None:
        return config
    return msgspec.structs.replace(
        config, shell_environment=ShellEnvironment.from_table(table, path)
    )


def _failed_key(message: str) -> str:
    """The top-level key a msgspec ``ValidationError`` message points at
    (``... - at `$.max_retries` ``, or ``$.add_dirs[0]``)."""
    match = re.search(r"at `\$\.(\w+)", message)
    return match.group(1) if match else "?"


class _Sources:
    """Looks one setting up in flag > environment > config file order."""

    def __init__(
        self,
        cli: CliOverrides,
        env: Mapping[str, str],
        path: Path,
        file: ConfigFile | None = None,
    ) -> None:
        self.cli, self.env, self.path = cli, env, path
        self.file = load_config_file(path) if file is None else file

    def rank(self, source: str) -> int:
        """How high a source from :meth:`pick` ranks: flag 3, env 2, config file 1."""
        return {"flag": 3, "env": 2, "config": 1}.get(source.partition(" ")[0], 0)

    def pick(self, key: str, kind: str = "") -> tuple[str | int | float, str] | None:
        """``(value, source)`` from the highest source that sets ``key``, checked.

        Raises:
            ConfigError: the value is outside the setting's choices or bounds,
                or an environment value is not a number (names the source).
        """
        s = _BY_KEY[key]
        found: tuple[str | int | float | tuple[str, ...], str] | None = None
        flag_value = getattr(self.cli, key, None)
        if flag_value is not None:
            found = (flag_value, f"flag {s.flag}")
        else:
            for var in (*s.env, *s.env_by_provider.get(kind, ())):
                if self.env.get(var):
                    found = (self.env[var], f"env {var}")
                    break
            else:
                in_file = self.file.value(key)
                if in_file is not None:
                    found = (in_file, f"config {self.path}")
        if found is None:
            return None
        value, source = found
        if s.type == "paths" or isinstance(value, tuple):  # only paths come as a tuple
            items = value if isinstance(value, tuple) else str(value).split(os.pathsep)
            value = os.pathsep.join(str(Path(str(v)).expanduser().resolve()) for v in items if v)
        if s.type == "int":
            try:
                value = int(str(value))
            except ValueError:
                raise ConfigError(f"{key} must be an integer, got {value!r} ({source})") from None
            if not s.minimum <= value <= s.maximum:
                raise ConfigError(
                    f"{key} must be between {s.minimum} and {s.maximum}, got {value} ({source})"
                )
        if s.type == "seconds":
            seconds = math.nan
            if isinstance(value, str | int | float) and not isinstance(value, bool):
                with contextlib.suppress(ValueError):
                    seconds = float(value)
            if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not s.zero_ok):
                least = ">= 0" if s.zero_ok else "> 0"
                raise ConfigError(
                    f"{key} must be a number of seconds {least}, got {value!r} ({source})"
                )
            value = seconds
        if s.choices and value not in s.choices:
            noun = "approval policy" if key == "approval" else key
            raise ConfigError(
                f"unknown {noun} {value!r} ({source}); choose one of {', '.join(s.choices)}"
            )
        return value, source


def resolve(cli: CliOverrides, env: Mapping[str, str], config_path: Path) -> ResolvedConfig:
    """Combine flags, environment and config file into settings (flag > env > file > default).

    Raises:
        ConfigError: nothing configured (message :data:`NOT_CONFIGURED`), an
            unknown provider or approval policy, ``--script`` with a
            non-scripted ``--provider``, a scripted provider without a
            script, or an official endpoint without an API key.
    """
    return _resolve(cli, env, config_path, [])


def describe(
    cli: CliOverrides, env: Mapping[str, str], config_path: Path
) -> tuple[list[SettingValue], ConfigError | None]:
    """What ``mind config`` prints: each effective value with its source.

    Returns:
        One row per setting in :data:`SETTINGS` order, then ``api_key``
        (masked) and ``shell_environment`` (variable names only), and the
        error that stopped resolution, if any. After an error every setting
        is still shown: the values that resolved, then each other one from
        its highest source, its default, ``not set``, or ``invalid`` (the
        error says why). A resolved non-scripted provider has no ``script``
        row, a scripted one no ``base_url`` / ``api_key`` row.
    """
    rows: list[SettingValue] = []
    error: ConfigError | None = None
    try:
        _resolve(cli, env, config_path, rows)
    except ConfigError as exc:
        error = exc
        rows += _unresolved_rows(cli, env, config_path, {r.key: r for r in rows})
    order = {
        key: n for n, key in enumerate([*(s.key for s in SETTINGS), "api_key", "shell_environment"])
    }
    return sorted(rows, key=lambda r: order[r.key]), error


def _unresolved_rows(
    cli: CliOverrides, env: Mapping[str, str], config_path: Path, have: dict[str, SettingValue]
) -> list[SettingValue]:
    """Rows of ``mind config`` for the settings resolution did not reach."""
    try:
        src = _Sources(cli, env, config_path)
    except ConfigError:  # a broken config.toml: show what flags and environment say
        src = _Sources(cli, env, config_path, file=ConfigFile())
    kind = have["provider"].value if "provider" in have else ""
    rows: list[SettingValue] = []
    for s in SETTINGS:
        if s.key in have:
            continue
        value: object = "not set"
        source = "-"
        try:
            found = src.pick(s.key, kind)
        except ConfigError:
            found = ("invalid", "see below")
        if found is not None:
            value, source = found
            if s.key == "base_url":
                value = redact_url(str(value))
        elif s.key in DEFAULTS:
            value, source = DEFAULTS[s.key], "default"
        elif s.key == "model" and kind in DEFAULT_MODELS:
            value, source = DEFAULT_MODELS[kind], f"default for {kind}"
        elif s.key == "base_url" and kind in OFFICIAL_BASE_URLS:
            value, source = OFFICIAL_BASE_URLS[kind], "default (official endpoint)"
        if s.key == "provider" and value in PROVIDER_KINDS:
            kind = str(value)
        rows.append(SettingValue(key=s.key, value=str(value), source=source))
    if "api_key" not in have:
        if kind in API_KEY_VARS:
            key, source = _api_key(kind, env)
            rows.append(
                SettingValue(
                    key="api_key", value="set (not shown)" if key else "not set", source=source
                )
            )
        else:
            looked = ", ".join(dict.fromkeys(API_KEY_VARS.values()))
            rows.append(
                SettingValue(key="api_key", value="not set", source=f"looked in env {looked}")
            )
    if "shell_environment" not in have:
        table = src.file.shell_environment
        if table is not None:
            rows.append(_shell_env_row(table, f"config {config_path}"))
        else:
            rows.append(_shell_env_row(ShellEnvironment(), "default"))
    return rows


def _shell_env_row(extra: ShellEnvironment, source: str) -> SettingValue:
    """The ``mind config`` row of ``[shell_environment]`` (names, never values)."""
    return SettingValue(key="shell_environment", value=extra.describe(), source=source)


def _resolve(
    cli: CliOverrides, env: Mapping[str, str], config_path: Path, rows: list[SettingValue]
) -> ResolvedConfig:
    src = _Sources(cli, env, config_path)

    def note(key: str, value: object, source: str) -> None:
        rows.append(SettingValue(key=key, value=str(value), source=source))

    kind, source = _provider_kind(src)
    note("provider", kind, source)
    model, source = src.pick("model") or (DEFAULT_MODELS[kind], f"default for {kind}")
    note("model", model, source)
    picked = src.pick("base_url", kind)
    base_url = str(picked[0]) if picked else None
    if picked is not None:
        check_base_url(str(picked[0]), picked[1])
    if kind != "scripted":
        if picked:
            note("base_url", redact_url(str(picked[0])), picked[1])
        else:
            note("base_url", OFFICIAL_BASE_URLS[kind], "default (official endpoint)")
    approval, source = src.pick("approval") or (DEFAULTS["approval"], "default")
    note("approval", approval, source)
    sandbox, source = src.pick("sandbox_mode") or (DEFAULTS["sandbox_mode"], "default")
    note("sandbox_mode", sandbox, source)
    network, source = src.pick("sandbox_network") or (DEFAULTS["sandbox_network"], "default")
    note("sandbox_network", network, source)
    add_dirs, source = src.pick("add_dirs") or ("", "default")
    note("add_dirs", add_dirs or "none", source)
    script: str | None = None
    if kind == "scripted":
        found = src.pick("script")
        if found is None:
            raise ConfigError("--provider scripted needs --script FILE (a YAML list of replies)")
        script = str(Path(str(found[0])).expanduser().resolve())
        note("script", script, found[1])
    retries, source = src.pick("max_retries") or (DEFAULTS["max_retries"], "default")
    note("max_retries", retries, source)
    rounds, source = src.pick("max_rounds") or (DEFAULTS["max_rounds"], "default")
    note("max_rounds", rounds, source)
    api_key: str | None = None
    if kind != "scripted":
        api_key, source = _api_key(kind, env)
        if api_key is not None:
            check_api_key(api_key, source)
        note("api_key", "set (not shown)" if api_key else "not set", source)
        if api_key is None and base_url in (None, OFFICIAL_BASE_URLS[kind]):
            raise ConfigError(
                f"provider {kind} needs an API key: set {API_KEY_VARS[kind]} (or store one in "
                f"the OS keyring under service '{KEYRING_SERVICE}', user '{kind}'), or point "
                "--base-url at a local server"
            )
    retry_s, source = src.pick("max_retry_seconds") or (DEFAULTS["max_retry_seconds"], "default")
    note("max_retry_seconds", retry_s, source)
    idle_s, source = src.pick("stream_idle_timeout") or (
        DEFAULTS["stream_idle_timeout"],
        "default",
    )
    note("stream_idle_timeout", idle_s, source)
    out_mib, source = src.pick("max_output_mib") or (DEFAULTS["max_output_mib"], "default")
    note("max_output_mib", out_mib, source)
    tool_output = _tool_output_limits(src, note)
    compact_pct, source = src.pick("auto_compact_percent") or (
        DEFAULTS["auto_compact_percent"],
        "default",
    )
    note("auto_compact_percent", compact_pct, source)
    window_found = src.pick("model_context_window")
    window = int(window_found[0]) if window_found is not None else None
    note(
        "model_context_window",
        window if window is not None else "not set (built-in table or learned)",
        window_found[1] if window_found is not None else "default",
    )
    shell_env = src.file.shell_environment
    if shell_env is not None:
        rows.append(_shell_env_row(shell_env, f"config {src.path}"))
    else:
        shell_env = ShellEnvironment()
        rows.append(_shell_env_row(shell_env, "default"))
    settings = ProviderSettings(
        kind=cast(ProviderKind, kind),
        model=str(model),
        base_url=base_url,
        api_key=api_key,
        script_path=script,
        timeout_s=float(idle_s),
    )
    return ResolvedConfig(
        provider=settings,
        approval=cast(ApprovalPolicy, approval),
        sandbox=cast(SandboxMode, sandbox),
        sandbox_network=network == "on",
        add_dirs=tuple(d for d in str(add_dirs).split(os.pathsep) if d),
        max_retries=int(retries),
        max_rounds=int(rounds),
        shell_environment=shell_env,
        max_retry_s=float(retry_s),
        stream_idle_timeout_s=float(idle_s),
        max_output_bytes=int(out_mib) * 1024 * 1024,
        tool_output=tool_output,
        auto_compact_percent=int(compact_pct),
        model_context_window=window,
    )


def _tool_output_limits(src: _Sources, note: Callable[[str, object, str], None]) -> OutputLimits:
    """The tool-output budgets (docs/design/context.md §3).

    Raises:
        ConfigError: the per-request total is below the per-call budget
            (names both sources).
    """
    per_call, call_src = src.pick("tool_output_max_bytes") or (
        DEFAULTS["tool_output_max_bytes"],
        "default",
    )
    note("tool_output_max_bytes", per_call, call_src)
    total, total_src = src.pick("tool_output_request_max_bytes") or (
        DEFAULTS["tool_output_request_max_bytes"],
        "default",
    )
    note("tool_output_request_max_bytes", total, total_src)
    if int(total) < int(per_call):
        raise ConfigError(
            f"tool_output_request_max_bytes ({total}, {total_src}) must be at least "
            f"tool_output_max_bytes ({per_call}, {call_src})"
        )
    return OutputLimits(per_call_bytes=int(per_call), per_request_bytes=int(total))


def _provider_kind(src: _Sources) -> tuple[str, str]:
    """The provider kind and its source.

    Rule: a ``script`` (from any source) means the scripted
    provider. A non-scripted provider set at the same or a higher level
    (flag > env > config.toml) is a usage error naming where each came from;
    one set at a lower level is overridden by the script.

    Raises:
        ConfigError: a script with another provider as above, or an unknown
            kind.
        NotConfiguredError: nothing configured.
    """
    script = src.pick("script")
    picked = src.pick("provider")
    if script is not None:
        overruled = picked is not None and src.rank(picked[1]) < src.rank(script[1])
        if picked is not None and picked[0] != "scripted" and not overruled:
            name = "--script" if script[1].startswith("flag") else "script"
            raise ConfigError(
                f"{name} is only for the scripted provider, but provider {picked[0]} "
                f"({picked[1]}) is set as well as script ({script[1]}); drop the script, "
                "or use --provider scripted"
            )
        return "scripted", script[1]
    if picked is not None:
        return str(picked[0]), picked[1]
    for var, kind in (("OPENAI_API_KEY", "openai-chat"), ("ANTHROPIC_API_KEY", "anthropic")):
        if src.env.get(var):
            return kind, f"inferred from {var}"
    raise NotConfiguredError(NOT_CONFIGURED.replace("{config}", str(src.path)))


def environment_help() -> str:
    """The ``mind --help`` epilog: every setting with its flag, variable and key,
    then the other environment variables mind reads."""
    lines = ["settings (flag > environment > config.toml > default):"]
    for s in SETTINGS:
        where = [s.flag] if s.flag else []
        where += list(s.env)
        kinds_of: dict[str, list[str]] = {}
        for kind, names in s.env_by_provider.items():
            for name in names:
                kinds_of.setdefault(name, []).append(kind)
        where += [f"{name} ({', '.join(kinds)})" for name, kinds in kinds_of.items()]
        where.append(f"config.toml `{s.key}`")
        lines.append(f"  {s.key}: {', '.join(where)}")
        lines.append(f"      {s.help}")
    lines += [
        "secrets: OPENAI_API_KEY, ANTHROPIC_API_KEY, or the OS keyring "
        f"(service '{KEYRING_SERVICE}', user = provider kind); never printed",
        "tools: an allow-listed environment (PATH, HOME, USER, LANG, LC_ALL and the other "
        "locale categories, TERM, ...); "
        "config.toml [shell_environment] include = [NAME, PREFIX_*] / set = {NAME = value} "
        "adds to it",
        "paths: MIND_HOME (config.toml, history; default ~/.mind), "
        "MIND_STATE_HOME (sessions, index.db; default MIND_HOME)",
        "maintainers: MIND_CRASH_AT=BOUNDARY[:N] kills mind at a durable boundary "
        "(`mind debug boundaries` lists them); MIND_SANDBOX_BACKEND=bwrap|landlock|none "
        "forces a sandbox backend (tests, diagnosis)",
        "`mind config` prints the effective settings and where each came from.",
    ]
    return "\n".join(lines)


_SECURE_KEYRING_MODULES = (
    "keyring.backends.SecretService",
    "keyring.backends.libsecret",
    "keyring.backends.kwallet",
    "keyring.backends.macOS",
    "keyring.backends.Windows",
)


_PROXY_VARS = tuple(
    f"{name}{suffix}" for name in ("HTTP", "HTTPS", "ALL") for suffix in ("_PROXY", "_proxy")
)


def known_secrets(env: Mapping[str, str], *base_urls: str | None) -> tuple[str, ...]:
    """What :func:`~mind.shell.redact.redact` must mask before (or without) a
    resolved config: every API-key variable's value in ``env``, and the
    secrets of the base URLs in ``env``, of ``base_urls`` (e.g. the flag) and
    of the proxy URLs httpx reads from ``env``."""
    url_vars = ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", *_PROXY_VARS)
    urls = [*base_urls, *(env.get(v) for v in url_vars)]
    keys = [env.get(v) for v in dict.fromkeys(API_KEY_VARS.values())]
    return tuple(s for s in (*keys, *(x for u in urls for x in url_secrets(u))) if s)


def session_secrets(
    config: ResolvedConfig, env: Mapping[str, str] | None = None
) -> tuple[str | None, ...]:
    """What :func:`~mind.shell.redact.redact` masks in a session's messages
    and tool results: the API key, the base URL's secrets and every provider
    key in ``env`` (None: this process's environment)."""
    return (
        config.provider.api_key,
        *url_secrets(config.provider.base_url),
        *known_secrets(os.environ if env is None else env),
    )


def _api_key(kind: str, env: Mapping[str, str]) -> tuple[str | None, str]:
    """The provider's API key and its source (env var, keyring, or where it was looked for)."""
    var = API_KEY_VARS[kind]
    if env.get(var):
        return env[var], f"env {var}"
    key = _keyring_key(kind)
    if key:
        return key, f"keyring {KEYRING_SERVICE}/{kind}"
    return None, f"looked in env {var} and keyring {KEYRING_SERVICE}/{kind}"


def _keyring_key(kind: str) -> str | None:
    """Look the key up in a *secure* OS keyring only; anything else is None.

    Fails closed (docs/design/secrets.md): the headless fail backend and
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
        value = keyring.get_password(KEYRING_SERVICE, kind)
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
    sandbox: str | None = None,
    sandbox_network: str | None = None,
    add_dirs: tuple[str, ...] | list[str] | None = None,
    model_context_window: int | None = None,
    env: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Library form of :func:`resolve`: keyword overrides over env and config.toml.

    Args:
        sandbox: sandbox mode (``read-only``, ``workspace-write``,
            ``danger-full-access``), as ``--sandbox``.
        sandbox_network: ``"on"`` lets sandboxed commands use the network, as
            ``--sandbox-network`` (default ``"off"``).
        add_dirs: extra writable roots, as ``--add-dir``.
        model_context_window: the model's context window in tokens, as
            ``--model-context-window`` (None: unset).
        env: environment to read (default ``os.environ``); ``MIND_HOME`` in it
            locates ``config.toml``.

    Raises:
        ConfigError: as :func:`resolve`.
    """
    from mind.shell.store import mind_home

    environ = os.environ if env is None else env
    cli = CliOverrides(
        provider=provider,
        model=model,
        base_url=base_url,
        script=script,
        approval=approval,
        sandbox_mode=sandbox,
        sandbox_network=sandbox_network,
        add_dirs=tuple(add_dirs) if add_dirs is not None else None,
        model_context_window=None if model_context_window is None else str(model_context_window),
    )
    return resolve(cli, environ, mind_home(environ) / "config.toml")
