"""``config.toml`` decodes into one typed struct: every key
has a declared type, an unknown key or a wrong type is refused naming the
file, the key and its line, and the struct and the settings table agree."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from mind.errors import ConfigError
from mind.shell.config import CONFIG_KEYS, ConfigFile, load_config_file
from mind.shell.tool_env import ShellEnvironment


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_struct_declares_exactly_the_keys_config_toml_may_hold() -> None:
    assert set(ConfigFile.__struct_fields__) == CONFIG_KEYS
    assert ConfigFile.__struct_config__.forbid_unknown_fields


def test_a_config_file_decodes_into_typed_fields(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        'model = "m"\nmax_retries = 2\nstream_idle_timeout = 45\nadd_dirs = ["/srv"]\n'
        '[shell_environment]\ninclude = ["GOPATH"]\nset = { RUST_LOG = "info" }\n',
    )
    config = load_config_file(path)
    assert isinstance(config, ConfigFile)
    assert (config.model, config.max_retries, config.provider) == ("m", 2, None)
    assert config.stream_idle_timeout == 45.0 and isinstance(config.stream_idle_timeout, float)
    assert config.add_dirs == ("/srv",)
    assert config.shell_environment == ShellEnvironment(
        include=("GOPATH",), values=(("RUST_LOG", "info"),)
    )
    with pytest.raises(AttributeError):
        config.model = "other"  # type: ignore[misc]
    assert load_config_file(tmp_path / "missing.toml") == ConfigFile()
    assert msgspec.structs.asdict(ConfigFile()) == dict.fromkeys(CONFIG_KEYS)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('model = "m"\nmodle = "typo"\n', r"config\.toml:2: unknown key\(s\) modle; known: "),
        ('model = "m"\n\nmax_retries = true\n', r"toml:3: `max_retries` must be an integer"),
        ("stream_idle_timeout = 'soon'\n", r"toml:1: `stream_idle_timeout` must be a number"),
        ('add_dirs = "/srv"\n', r"config\.toml:1: `add_dirs` must be a list of strings"),
        ('model = "m"\nprovider = = 1\n', r"config\.toml: invalid TOML: .*at line 2"),
    ],
)
def test_a_bad_key_is_refused_naming_file_key_and_line(
    tmp_path: Path, text: str, needle: str
) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_config_file(_toml(tmp_path, text))
