"""``mind resume`` without the flags the session ran with: the refusal says
what the session last used (its journal's ``turn_started``) and how to
resume it with that, instead of only "No model provider is configured"."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind


def test_resume_without_provider_names_what_the_session_last_used(
    tmp_path: Path, run_mind: RunMind
) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([{"text": "hello"}]), encoding="utf-8")
    made = run_mind(
        "exec", "--script", str(script), "--approval", "untrusted", "--cwd", str(tmp_path),
        "--new-session", "sess-hint", "hi",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    for args in (("resume", "--cwd", str(tmp_path)), ("resume", "sess-hint")):
        r = run_mind(*args)
        assert r.returncode == 2, r.stderr
        assert "No model provider is configured" in r.stderr
        assert "Session sess-hint last ran with provider scripted" in r.stderr
        assert "approval untrusted" in r.stderr
        assert "mind resume sess-hint --script FILE --approval untrusted" in r.stderr
