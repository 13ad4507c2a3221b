"""``mind config`` as a fresh user meets it, and a ``script`` that cannot apply."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import RunMind

ORDER = [
    "config file",
    "provider",
    "model",
    "base_url",
    "approval",
    "sandbox_mode",
    "sandbox_network",
    "add_dirs",
    "script",
    "max_retries",
    "max_rounds",
    "max_retry_seconds",
    "stream_idle_timeout",
    "max_output_mib",
    "tool_output_max_bytes",
    "tool_output_request_max_bytes",
    "auto_compact_percent",
    "model_context_window",
    "api_key",
    "shell_environment",
]


def _columns(stdout: str) -> tuple[list[str], set[int]]:
    """The keys in printed order and the offsets at which the value column starts."""
    keys, starts = [], set()
    for line in stdout.splitlines():
        key = next(k for k in ORDER if line.startswith(k + " "))
        keys.append(key)
        starts.add(len(line) - len(line[len(key) :].lstrip()))
    return keys, starts


def test_unconfigured_config_prints_every_setting_then_the_reason(run_mind: RunMind) -> None:
    r = run_mind("config", env={"MIND_MAX_RETRIES": "7"})
    assert r.returncode == 2
    keys, starts = _columns(r.stdout)
    assert keys == ORDER, r.stdout
    assert len(starts) == 1, r.stdout  # one aligned value column
    rows = {line.split()[0]: line.split()[1:] for line in r.stdout.splitlines()}
    assert rows["provider"][:2] == ["not", "set"]
    assert rows["max_retries"] == ["7", "env", "MIND_MAX_RETRIES"]
    assert rows["approval"] == ["on-request", "default"]
    assert "No model provider is configured" in r.stderr


def test_configured_rows_are_in_table_order_and_aligned(tmp_path: Path, run_mind: RunMind) -> None:
    r = run_mind("config", env={"OPENAI_API_KEY": "sk-x"})
    assert r.returncode == 0, r.stderr
    keys, starts = _columns(r.stdout)
    assert keys == [k for k in ORDER if k != "script"], r.stdout
    assert len(starts) == 1, r.stdout


def test_a_config_file_script_with_another_provider_is_refused(
    tmp_path: Path, run_mind: RunMind
) -> None:
    home = tmp_path / "mind-home"
    home.mkdir()
    path = home / "config.toml"
    path.write_text('provider = "openai-chat"\nscript = "s.yaml"\n')
    r = run_mind("exec", "hi", env={"OPENAI_API_KEY": "sk-x"})
    assert r.returncode == 2, r.stderr
    assert f"script (config {path})" in r.stderr, r.stderr
    assert f"provider openai-chat (config {path})" in r.stderr, r.stderr
    assert not (home / "sessions").exists() or not any((home / "sessions").iterdir())
    r = run_mind("exec", "--provider", "anthropic", "hi", env={"ANTHROPIC_API_KEY": "k"})
    assert r.returncode == 2, r.stderr
    assert "provider anthropic (flag --provider)" in r.stderr, r.stderr


BAD_BASE_URLS = [
    "http://user:MARKERpw@[::1/v1",
    "http://user:MARKERpw@127.0.0.1:99999/v1",
    "http://user:MARKERpw@xn--a.example/v1",
]


@pytest.mark.parametrize("url", BAD_BASE_URLS, ids=["unparseable", "port", "idna"])
def test_exec_with_a_bad_base_url_is_a_one_line_config_error(
    run_mind: RunMind, tmp_path: Path, url: str
) -> None:
    """Not a traceback nor ``internal error``: exit 2, one line naming the
    setting and its source, the URL's secret masked."""
    r = run_mind(
        "exec",
        "--provider",
        "openai-chat",
        "--base-url",
        url,
        "--cwd",
        str(tmp_path),
        "hi",
        env={"MIND_HOME": str(tmp_path / "home"), "MIND_STATE_HOME": str(tmp_path / "state")},
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "base_url" in lines[0] and "--base-url" in lines[0], r.stderr
    assert "MARKER" not in r.stderr + r.stdout


def test_exec_with_a_multi_line_key_is_a_config_error_without_the_key(
    run_mind: RunMind, tmp_path: Path
) -> None:
    r = run_mind(
        "exec",
        "--provider",
        "openai-chat",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--cwd",
        str(tmp_path),
        "hi",
        env={
            "MIND_HOME": str(tmp_path / "home"),
            "MIND_STATE_HOME": str(tmp_path / "state"),
            "OPENAI_API_KEY": "sk-MARKERfirst\nMARKERrest",
        },
    )
    assert r.returncode == 2, r.stderr
    assert "env OPENAI_API_KEY" in r.stderr and "line break" in r.stderr, r.stderr
    assert "MARKER" not in r.stderr + r.stdout
