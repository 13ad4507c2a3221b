"""`mind exec` and `mind config` as a new user meets them (issue #7, items 9-17)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind


def _script(path: Path, replies: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump(replies), encoding="utf-8")
    return path


def _sessions(tmp_path: Path) -> list[str]:
    """Session directories under the test's MIND_HOME (see ``mind_env``)."""
    root = tmp_path / "mind-home" / "sessions"
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


def test_script_runs_scripted_even_with_an_openai_key(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "scripted reply"}])
    # A dead loopback port: if the real provider ran, the turn would fail.
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    r = run_mind("exec", "--script", str(script), "hello", env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "scripted reply\n"
    assert "scripted (offline script" in r.stderr


def test_script_with_a_real_provider_is_a_usage_error(tmp_path: Path, run_mind: RunMind) -> None:
    script = _script(tmp_path / "s.yaml", [{"text": "x"}])
    env = {"OPENAI_API_KEY": "sk-test"}
    r = run_mind("exec", "--provider", "openai-chat", "--script", str(script), "hi", env=env)
    assert r.returncode == 2
    assert "--script is only for the scripted provider" in r.stderr
    assert _sessions(tmp_path) == []


def test_config_prints_sources_and_masks_the_key(tmp_path: Path, run_mind: RunMind) -> None:
    home = tmp_path / "mind-home"
    home.mkdir()
    (home / "config.toml").write_text('base_url = "http://file:1/v1"\nmodel = "m1"\n')
    secret = "sk-secret-value-123456"
    env = {"OPENAI_API_KEY": secret, "OPENAI_BASE_URL": "http://env:2/v1"}
    r = run_mind("config", "--model", "m2", env=env)
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line.split() for line in r.stdout.splitlines()}
    assert lines["base_url"][1:] == ["http://env:2/v1", "env", "OPENAI_BASE_URL"]
    assert lines["model"][1:] == ["m2", "flag", "--model"]
    assert lines["api_key"][1:4] == ["set", "(not", "shown)"]
    assert secret[:8] not in r.stdout + r.stderr


def test_help_documents_every_variable(run_mind: RunMind) -> None:
    r = run_mind("--help")
    assert r.returncode == 0
    for needle in ("MIND_PROVIDER", "MIND_MODEL", "MIND_MAX_RETRIES", "max_retries", "keyring"):
        assert needle in r.stdout


def _three_replies(tmp_path: Path) -> Path:
    return _script(tmp_path / "s.yaml", [{"text": "one"}, {"text": "two"}, {"text": "three"}])


def test_session_prefix_continues_the_one_matching_session(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = str(_three_replies(tmp_path))
    for sid in ("proj-alpha", "proj-beta"):
        r = run_mind("exec", "--script", script, "--new-session", sid, "hi")
        assert r.returncode == 0, r.stderr
    r = run_mind("exec", "--json", "--script", script, "--session", "proj-a", "again")
    assert r.returncode == 0, r.stderr
    assert r.events[0] == {"type": "session.started", "session_id": "proj-alpha"}
    assert r.of_type("message.completed")[-1]["text"] == "two"
    assert _sessions(tmp_path) == ["proj-alpha", "proj-beta"]


def test_session_prefix_ambiguous_or_unknown_exits_2_and_creates_nothing(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = str(_three_replies(tmp_path))
    for sid in ("proj-alpha", "proj-beta"):
        assert run_mind("exec", "--script", script, "--new-session", sid, "hi").returncode == 0
    r = run_mind("exec", "--script", script, "--session", "proj", "again")
    assert r.returncode == 2
    assert "ambiguous" in r.stderr and "proj-alpha" in r.stderr and "proj-beta" in r.stderr
    r = run_mind("exec", "--script", script, "--session", "nosuch", "again")
    assert r.returncode == 2
    assert "no such session" in r.stderr
    assert _sessions(tmp_path) == ["proj-alpha", "proj-beta"]


def test_new_session_refuses_an_existing_id(tmp_path: Path, run_mind: RunMind) -> None:
    script = str(_three_replies(tmp_path))
    assert run_mind("exec", "--script", script, "--new-session", "mine", "hi").returncode == 0
    r = run_mind("exec", "--script", script, "--new-session", "mine", "again")
    assert r.returncode == 2
    assert "already exists" in r.stderr and "--session" in r.stderr
