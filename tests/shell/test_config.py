"""Provider and approval resolution: flags > env > config.toml > defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from mind.errors import ConfigError
from mind.shell.config import SETTINGS, CliOverrides, describe, environment_help, resolve


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_nothing_configured_explains_every_way_out(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        resolve(CliOverrides(), {}, tmp_path / "config.toml")
    msg = str(info.value)
    for needle in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "--provider scripted --script FILE",
        str(tmp_path / "config.toml"),
    ):
        assert needle in msg
    assert "\n" not in msg


def test_api_key_in_env_picks_the_provider(tmp_path: Path) -> None:
    r = resolve(CliOverrides(), {"ANTHROPIC_API_KEY": "k"}, tmp_path / "none.toml")
    assert (r.provider.kind, r.provider.api_key, r.approval) == ("anthropic", "k", "on-request")
    r = resolve(CliOverrides(), {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "k"}, tmp_path / "x")
    assert r.provider.kind == "openai-chat"


def test_flags_beat_env_beat_file(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        'provider = "openai-chat"\nmodel = "from-file"\n'
        'base_url = "http://file/v1"\napproval = "untrusted"\nmax_retries = 2\n',
    )
    env = {"MIND_MODEL": "from-env", "OPENAI_API_KEY": "k"}
    r = resolve(CliOverrides(), env, path)
    assert (r.provider.model, r.provider.base_url, r.approval, r.max_retries) == (
        "from-env",
        "http://file/v1",
        "untrusted",
        2,
    )
    r = resolve(
        CliOverrides(model="from-flag", base_url="http://flag/v1", approval="never"), env, path
    )
    assert (r.provider.model, r.provider.base_url, r.approval) == (
        "from-flag",
        "http://flag/v1",
        "never",
    )


def test_local_server_needs_no_key_but_the_official_endpoint_does(tmp_path: Path) -> None:
    none = tmp_path / "none.toml"
    r = resolve(CliOverrides(provider="openai-chat", base_url="http://127.0.0.1:9/v1"), {}, none)
    assert r.provider.api_key is None
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        resolve(CliOverrides(provider="openai-chat"), {}, none)
    r = resolve(
        CliOverrides(provider="anthropic"), {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, none
    )
    assert r.provider.base_url == "http://127.0.0.1:9"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("provider = [", "invalid TOML"),
        ("model = 3", "`model` must be a string"),
        ('provider = "gemini"', "unknown provider"),
        ('approval = "sometimes"', "unknown approval"),
        ("max_retries = -1", "max_retries"),
    ],
)
def test_bad_config_file_is_a_clear_error(tmp_path: Path, text: str, needle: str) -> None:
    extra = '\nscript = "s.yaml"\n' + ("" if "provider" in text else 'provider = "scripted"\n')
    path = _toml(tmp_path, text + extra)
    with pytest.raises(ConfigError, match=needle):
        resolve(CliOverrides(), {"OPENAI_API_KEY": "k"}, path)


def test_stream_idle_timeout_and_retry_time_from_file_and_env(tmp_path: Path) -> None:
    """Issue 7 item 12: defaults 300 s each; config.toml, then the environment, override."""
    none = tmp_path / "none.toml"
    cli = CliOverrides(provider="openai-chat", base_url="http://127.0.0.1:9/v1")
    r = resolve(cli, {}, none)
    assert (r.stream_idle_timeout_s, r.provider.timeout_s, r.max_retry_s) == (300.0, 300.0, 300.0)
    path = _toml(tmp_path, "stream_idle_timeout = 45\nmax_retry_seconds = 90.5\n")
    r = resolve(cli, {}, path)
    assert (r.stream_idle_timeout_s, r.provider.timeout_s, r.max_retry_s) == (45.0, 45.0, 90.5)
    env = {"MIND_STREAM_IDLE_TIMEOUT": "0.5", "MIND_MAX_RETRY_SECONDS": "2"}
    r = resolve(cli, env, path)
    assert (r.stream_idle_timeout_s, r.provider.timeout_s, r.max_retry_s) == (0.5, 0.5, 2.0)


@pytest.mark.parametrize(
    ("env", "text", "needle"),
    [
        ({}, "stream_idle_timeout = 0", "stream_idle_timeout"),
        ({}, 'stream_idle_timeout = "soon"', "stream_idle_timeout"),
        ({"MIND_STREAM_IDLE_TIMEOUT": "-3"}, "", "MIND_STREAM_IDLE_TIMEOUT"),
        ({}, "max_retry_seconds = -1", "max_retry_seconds"),
        ({"MIND_MAX_RETRY_SECONDS": "inf"}, "", "MIND_MAX_RETRY_SECONDS"),
    ],
)
def test_bad_timeouts_are_refused_naming_where_they_came_from(
    tmp_path: Path, env: dict[str, str], text: str, needle: str
) -> None:
    path = _toml(tmp_path, text)
    cli = CliOverrides(provider="openai-chat", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=needle):
        resolve(cli, env, path)


def test_scripted_needs_a_script(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--script FILE"):
        resolve(CliOverrides(provider="scripted"), {}, tmp_path / "none.toml")


def test_unknown_keys_and_bad_urls_are_refused(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'provider = "openai-chat"\nmodle = "typo"\n')
    with pytest.raises(ConfigError, match=r"unknown key.*modle"):
        resolve(CliOverrides(), {"OPENAI_API_KEY": "k"}, path)
    with pytest.raises(ConfigError, match="not an http"):
        resolve(CliOverrides(provider="openai-chat", base_url="not a url"), {}, tmp_path / "x")


def test_script_alone_means_scripted_even_with_a_key_and_env_provider(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'provider = "openai-chat"\n')
    env = {"OPENAI_API_KEY": "sk-live", "MIND_PROVIDER": "anthropic"}
    r = resolve(CliOverrides(script=str(tmp_path / "s.yaml")), env, path)
    assert r.provider.kind == "scripted"
    assert r.provider.api_key is None
    assert r.provider.script_path == str((tmp_path / "s.yaml").resolve())


def test_script_with_another_provider_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--script is only for the scripted provider"):
        resolve(
            CliOverrides(provider="openai-chat", script="s.yaml"),
            {"OPENAI_API_KEY": "k"},
            tmp_path / "none.toml",
        )


def test_environment_beats_the_config_file_for_every_setting(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        'provider = "anthropic"\nmodel = "file-model"\nbase_url = "http://file/v1"\n'
        'approval = "untrusted"\nmax_retries = 2\n',
    )
    env = {
        "MIND_PROVIDER": "openai-chat",
        "MIND_MODEL": "env-model",
        "OPENAI_BASE_URL": "http://env/v1",
        "MIND_APPROVAL": "never",
        "MIND_MAX_RETRIES": "7",
    }
    r = resolve(CliOverrides(), env, path)
    assert (r.provider.kind, r.provider.model, r.provider.base_url, r.approval, r.max_retries) == (
        "openai-chat",
        "env-model",
        "http://env/v1",
        "never",
        7,
    )


def test_describe_names_each_source_and_never_the_key(tmp_path: Path) -> None:
    path = _toml(tmp_path, 'model = "file-model"\n')
    secret = "sk-test-0123456789abcdef"
    rows, error = describe(
        CliOverrides(approval="never"), {"OPENAI_API_KEY": secret, "MIND_MAX_RETRIES": "3"}, path
    )
    assert error is None
    got = {r.key: (r.value, r.source) for r in rows}
    assert got["provider"] == ("openai-chat", "inferred from OPENAI_API_KEY")
    assert got["model"] == ("file-model", f"config {path}")
    assert got["base_url"] == ("https://api.openai.com/v1", "default (official endpoint)")
    assert got["approval"] == ("never", "flag --approval")
    assert got["max_retries"] == ("3", "env MIND_MAX_RETRIES")
    assert got["api_key"] == ("set (not shown)", "env OPENAI_API_KEY")
    assert all(secret[:6] not in r.value + r.source for r in rows)


def test_describe_keeps_what_resolved_before_an_error(tmp_path: Path) -> None:
    rows, error = describe(CliOverrides(provider="openai-chat"), {}, tmp_path / "none.toml")
    assert error is not None and "OPENAI_API_KEY" in str(error)
    assert [r.key for r in rows][:2] == ["provider", "model"]
    assert rows[-2].key == "api_key" and rows[-2].value == "not set"
    assert rows[-1].key == "shell_environment" and rows[-1].value == "allow-list"


def test_every_setting_and_variable_is_in_the_help_text() -> None:
    text = environment_help()
    for s in SETTINGS:
        assert f"config.toml `{s.key}`" in text
        for var in s.env:
            assert var in text
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "MIND_HOME", "keyring"):
        assert var in text


def test_sandbox_mode_and_add_dirs_follow_flag_env_file(tmp_path: Path) -> None:
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    path = _toml(
        tmp_path, f'sandbox_mode = "read-only"\nadd_dirs = ["{a}"]\nprovider = "openai-chat"\n'
    )
    env = {"OPENAI_API_KEY": "sk-x"}
    r = resolve(CliOverrides(), env, path)
    assert (r.sandbox, r.add_dirs) == ("read-only", (str(a),))
    env |= {"MIND_SANDBOX": "danger-full-access", "MIND_ADD_DIRS": f"{b}:{c}"}
    r = resolve(CliOverrides(), env, path)
    assert (r.sandbox, r.add_dirs) == ("danger-full-access", (str(b), str(c)))
    r = resolve(CliOverrides(sandbox_mode="workspace-write", add_dirs=(str(c),)), env, path)
    assert (r.sandbox, r.add_dirs) == ("workspace-write", (str(c),))
    default = resolve(CliOverrides(), {"OPENAI_API_KEY": "sk-x"}, tmp_path / "none.toml")
    assert (default.sandbox, default.add_dirs) == ("workspace-write", ())


def test_sandbox_network_is_off_unless_turned_on(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-x"}
    assert resolve(CliOverrides(), env, tmp_path / "none.toml").sandbox_network is False
    path = _toml(tmp_path, 'sandbox_network = "on"\n')
    assert resolve(CliOverrides(), env, path).sandbox_network is True
    env |= {"MIND_SANDBOX_NETWORK": "off"}
    assert resolve(CliOverrides(), env, path).sandbox_network is False
    assert resolve(CliOverrides(sandbox_network="on"), env, path).sandbox_network is True
    with pytest.raises(ConfigError, match="sandbox_network"):
        resolve(CliOverrides(), {**env, "MIND_SANDBOX_NETWORK": "yes"}, path)


def test_bad_sandbox_settings_are_refused(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": "sk-x", "MIND_SANDBOX": "off"}
    with pytest.raises(ConfigError, match="unknown sandbox_mode 'off' \\(env MIND_SANDBOX\\)"):
        resolve(CliOverrides(), env, tmp_path / "none.toml")
    path = _toml(tmp_path, 'add_dirs = "/x"\n')
    with pytest.raises(ConfigError, match="`add_dirs` must be a list of strings"):
        resolve(CliOverrides(), {"OPENAI_API_KEY": "sk-x"}, path)


@pytest.mark.parametrize(
    "key", ["sk-abc123\nrest-of-key", "sk-abc\r\n", "sk-\x00abc", "sk-ключ1234", "sk-a b"]
)
def test_a_key_that_cannot_be_a_header_value_is_refused_naming_its_source(
    tmp_path: Path, key: str
) -> None:
    """httpx would refuse it per request (classed ``network``, retried, its
    rest shown in the error): it is a config error, the key never shown."""
    with pytest.raises(ConfigError) as info:
        resolve(CliOverrides(provider="openai-chat"), {"OPENAI_API_KEY": key}, tmp_path / "x")
    msg = str(info.value)
    assert "env OPENAI_API_KEY" in msg
    assert "\n" not in msg
    assert not any(part in msg for part in key.split() if len(part) >= 3), msg


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("http://user:pw@[::1/v1", "cannot be parsed"),
        ("http://127.0.0.1:99999/v1", "port"),
        ("http://127.0.0.1:0/v1", "port"),
        ("http://127.0.0.1:notaport/v1", "port"),
        ("http://xn--a.example/v1", "host"),
        ("http://exa mple.com/v1", "host"),
        ("ftp://h/v1", "not an http"),
        ("http:///v1", "not an http"),
    ],
)
def test_a_bad_base_url_is_a_config_error_naming_the_setting_and_source(
    tmp_path: Path, url: str, needle: str
) -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": url}
    with pytest.raises(ConfigError) as info:
        resolve(CliOverrides(provider="openai-chat"), env, tmp_path / "x")
    msg = str(info.value)
    assert needle in msg and "base_url" in msg and "env OPENAI_BASE_URL" in msg, msg
    assert "pw" not in msg and "\n" not in msg, msg


def test_a_good_idna_host_and_an_ipv6_base_url_resolve(tmp_path: Path) -> None:
    for url in ("http://bücher.example:8080/v1", "http://[::1]:11434/v1", "https://h/v1?k=v"):
        r = resolve(CliOverrides(provider="openai-chat", base_url=url), {}, tmp_path / "x")
        assert r.provider.base_url == url


def test_tool_output_budgets_follow_env_and_file_and_must_nest(tmp_path: Path) -> None:
    """docs/design/context.md §3: per call and per request, bytes; the total
    is at least the per-call budget."""
    cli = CliOverrides(provider="openai-chat", base_url="http://127.0.0.1:9/v1")
    r = resolve(cli, {}, tmp_path / "none.toml")
    assert (r.tool_output.per_call_bytes, r.tool_output.per_request_bytes) == (32768, 262144)
    path = _toml(tmp_path, "tool_output_max_bytes = 4096\ntool_output_request_max_bytes = 65536\n")
    r = resolve(cli, {}, path)
    assert (r.tool_output.per_call_bytes, r.tool_output.per_request_bytes) == (4096, 65536)
    r = resolve(cli, {"MIND_TOOL_OUTPUT_MAX_BYTES": "2048"}, path)
    assert r.tool_output.per_call_bytes == 2048
    with pytest.raises(ConfigError, match=r"tool_output_request_max_bytes \(65536, config"):
        resolve(cli, {"MIND_TOOL_OUTPUT_MAX_BYTES": "100000"}, path)
    with pytest.raises(ConfigError, match="tool_output_max_bytes must be between 1024"):
        resolve(cli, {"MIND_TOOL_OUTPUT_MAX_BYTES": "10"}, path)


def test_model_context_window_is_unset_unless_given_flag_over_env_over_file(
    tmp_path: Path,
) -> None:
    """Unset means unknown (the table or the server's error decide), never a guess."""
    cli = CliOverrides(provider="openai-chat", base_url="http://127.0.0.1:9/v1")
    assert resolve(cli, {}, tmp_path / "none.toml").model_context_window is None
    path = _toml(tmp_path, "model_context_window = 8192\n")
    assert resolve(cli, {}, path).model_context_window == 8192
    env = {"MIND_MODEL_CONTEXT_WINDOW": "16000"}
    assert resolve(cli, env, path).model_context_window == 16000
    flag = CliOverrides(
        provider="openai-chat", base_url="http://127.0.0.1:9/v1", model_context_window="4096"
    )
    assert resolve(flag, env, path).model_context_window == 4096
    rows, error = describe(flag, env, path)
    assert error is None
    assert [(r.value, r.source) for r in rows if r.key == "model_context_window"] == [
        ("4096", "flag --model-context-window")
    ]
    for bad in ("0", "lots"):
        with pytest.raises(ConfigError, match="MIND_MODEL_CONTEXT_WINDOW"):
            resolve(cli, {"MIND_MODEL_CONTEXT_WINDOW": bad}, path)
