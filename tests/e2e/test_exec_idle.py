"""`mind exec` against a model server that accepts and never answers
(docs/design/providers.md §3)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from mind.shell import cli, exec_cli
from tests.e2e.conftest import RunMind
from tests.support.silent_server import SilentServer


def test_exec_gives_up_on_a_silent_server_within_the_retry_time(
    tmp_path: Path, run_mind: RunMind
) -> None:
    """Idle timeout 0.3 s, retry time 1 s: the first attempt fails at ~0.3 s and
    is retried (0.5 s backoff); the second fails at ~1.1 s, past the retry time,
    so the turn fails although 3 of its 4 retries are left."""
    with SilentServer() as server:
        started = time.monotonic()
        r = run_mind(
            "exec",
            "--provider",
            "openai-chat",
            "--base-url",
            f"{server.url}/v1",
            "--model",
            "m",
            "--cwd",
            str(tmp_path),
            "say hi",
            env={"MIND_STREAM_IDLE_TIMEOUT": "0.3", "MIND_MAX_RETRY_SECONDS": "1"},
            timeout=30,
        )
        elapsed = time.monotonic() - started
        attempts = server.accepted
    assert r.returncode == 1, r.stderr
    assert attempts == 2, r.stderr
    assert r.stderr.count("retrying in") == 1, r.stderr
    assert "turn failed (network)" in r.stderr and "stream_idle_timeout" in r.stderr, r.stderr
    assert elapsed < 15


def test_exec_reports_waiting_for_the_model_while_the_server_is_silent(
    tmp_path: Path,
    mind_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The report comes every ``WAIT_REPORT_S`` (30 s; 0.1 s here) of silence."""
    for key in list(mind_env):
        monkeypatch.setenv(key, mind_env[key])
    monkeypatch.setenv("MIND_STREAM_IDLE_TIMEOUT", "1")
    monkeypatch.setenv("MIND_MAX_RETRIES", "0")
    monkeypatch.setattr(exec_cli, "WAIT_REPORT_S", 0.1)
    with SilentServer() as server:
        code = cli.main(
            [
                "exec",
                "--provider",
                "openai-chat",
                "--base-url",
                f"{server.url}/v1",
                "--model",
                "m",
                "--cwd",
                str(tmp_path),
                "say hi",
            ]
        )
    err = capfd.readouterr().err
    assert code == 1, err
    waited = [
        float(m.group(1))
        for m in re.finditer(r"^mind: waiting for the model… ([0-9.]+) s$", err, re.M)
    ]
    assert len(waited) >= 2, err  # ~9 in the 1 s of silence; a busy machine may skip some
    assert waited == sorted(set(waited)), waited  # each report once, in order
    # every report is a whole number of intervals, and the wait ended at the
    # idle timeout (1 s here; the slack is for a loaded machine, not 300 s)
    assert all(abs(w * 10 - round(w * 10)) < 1e-6 for w in waited), waited
    assert max(waited) < 5, waited
