"""`mind exec` runs shell commands in the sandbox (``docs/design/boundary.md``
"Sandbox"): real bubblewrap, the scripted provider, a real ``mind`` process."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind

MARKER = "e2e-sandbox-marker-91c2"


def _exec(
    run_mind: RunMind,
    tmp_path: Path,
    calls: list[dict[str, object]],
    *flags: str,
    env: dict[str, str] | None = None,
) -> tuple[list[dict[str, object]], Path]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    script = tmp_path / "s.yaml"
    replies: list[dict[str, object]] = [{"tool_calls": [c]} for c in calls]
    script.write_text(yaml.safe_dump([*replies, {"text": "done"}]), encoding="utf-8")
    r = run_mind("exec", "--json", "--script", str(script), "--cwd", str(ws), *flags, "go", env=env)
    assert r.returncode == 0, r.stderr
    return r.of_type("tool.result"), ws


def test_a_sandboxed_write_outside_is_denied_and_the_model_sees_it(
    tmp_path: Path, run_mind: RunMind
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    calls: list[dict[str, object]] = [
        {"name": "shell", "arguments": {"command": f"echo x > {outside}/escaped"}},
        {"name": "shell", "arguments": {"command": "echo '[core]' >> .git/config"}},
        {"name": "shell", "arguments": {"command": "echo ok > inside.txt && cat inside.txt"}},
        {"name": "shell", "arguments": {"command": f"grep -l {MARKER} /proc/*/environ; true"}},
    ]
    results, ws = _exec(run_mind, tmp_path, calls, env={"E2E_SECRET_TOKEN": MARKER})
    assert [r["status"] for r in results] == ["error", "error", "ok", "ok"], results
    assert "Read-only file system" in str(results[0]["output"])
    assert not (outside / "escaped").exists()
    assert "[core]\n" not in (ws / ".git" / "config").read_text().splitlines(keepends=True)[-1:]
    assert (ws / "inside.txt").read_text() == "ok\n"
    assert "environ" not in str(results[3]["output"])


def test_escalation_under_on_request_asks_and_headless_exec_declines(
    tmp_path: Path, run_mind: RunMind
) -> None:
    target = tmp_path / "outside-file"
    args = {"command": f"touch {target}", "sandbox": "escalated", "justification": "needs /tmp"}
    results, _ = _exec(run_mind, tmp_path, [{"name": "shell", "arguments": args}])
    (result,) = results
    assert result["status"] == "denied"
    assert "asks to leave the workspace-write sandbox: needs /tmp" in str(result["output"])
    assert "--sandbox-network on if it only needs the network" in str(result["output"])
    assert "--sandbox danger-full-access --approval never" in str(result["output"])
    assert not target.exists()


def test_escalation_under_never_is_refused(tmp_path: Path, run_mind: RunMind) -> None:
    target = tmp_path / "outside-file"
    args = {"command": f"touch {target}", "sandbox": "escalated", "justification": "x"}
    results, _ = _exec(
        run_mind, tmp_path, [{"name": "shell", "arguments": args}], "--approval", "never"
    )
    (result,) = results
    assert result["status"] == "denied"
    assert "`never`" in str(result["output"])
    assert not target.exists()


def test_no_backend_refuses_and_names_danger_full_access(tmp_path: Path, run_mind: RunMind) -> None:
    calls: list[dict[str, object]] = [{"name": "shell", "arguments": {"command": "touch made"}}]
    results, ws = _exec(run_mind, tmp_path, calls, env={"MIND_SANDBOX_BACKEND": "none"})
    (result,) = results
    assert result["status"] == "error"
    assert "--sandbox danger-full-access" in str(result["output"])
    assert not (ws / "made").exists()


def test_add_dir_is_writable_and_mind_config_shows_the_settings(
    tmp_path: Path, run_mind: RunMind
) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    calls: list[dict[str, object]] = [
        {"name": "shell", "arguments": {"command": f"echo y > {extra}/file"}}
    ]
    results, _ = _exec(run_mind, tmp_path, calls, "--add-dir", str(extra))
    assert results[0]["status"] == "ok", results
    assert (extra / "file").read_text() == "y\n"
    shown = run_mind(
        "config",
        "--provider",
        "scripted",
        "--script",
        str(tmp_path / "s.yaml"),
        "--sandbox",
        "read-only",
        "--add-dir",
        str(extra),
    )
    assert "sandbox_mode" in shown.stdout and "read-only" in shown.stdout, shown.stdout
    assert str(extra) in shown.stdout


def _running(marker: str) -> bool:
    """Whether a live process has ``marker`` in its command line."""
    for entry in Path("/proc").iterdir():
        try:
            alive = (entry / "stat").read_text().rpartition(")")[2].split()[0] not in "ZX"
            if alive and marker.encode() in (entry / "cmdline").read_bytes():
                return True
        except (OSError, IndexError):
            continue
    return False


def test_no_process_a_command_started_outlives_mind_exec(tmp_path: Path, run_mind: RunMind) -> None:
    # Landlock has no pid namespace: its launcher must kill what the command left.
    out = tmp_path / "ws" / "out"
    out.mkdir(parents=True)
    marker = f"e2e-bg-{os.getpid()}"
    command = (
        f"cd out; setsid sh -c 'touch S1; sleep 2; echo late > LATE1' {marker} >/dev/null 2>&1 & "
        f"( exec sh -c 'touch S2; sleep 2; echo late > LATE2' {marker} ) >/dev/null 2>&1 & "
        "while [ ! -e S1 ] || [ ! -e S2 ]; do :; done; echo started"
    )
    for backend in ("landlock", "bwrap"):
        results, _ = _exec(
            run_mind,
            tmp_path,
            [{"name": "shell", "arguments": {"command": command}}],
            env={"MIND_SANDBOX_BACKEND": backend},
        )
        assert str(results[0]["output"]).startswith("started"), results
        # Gone at once when killed; past their sleep (having written) if not.
        deadline = time.monotonic() + 10
        while _running(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _running(marker)
        assert list(out.glob("LATE*")) == [], backend


def test_network_is_off_unless_sandbox_network_is_on(tmp_path: Path, run_mind: RunMind) -> None:
    """A loopback listener on the host is unreachable from a sandboxed command
    by default; ``--sandbox-network on`` (``sandbox_network`` in config.toml)
    lets the same command reach it, still sandboxed."""
    import socket

    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        probe = (
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
            f"{port}), timeout=5); print('REACHED')\""
        )
        call: dict[str, object] = {"name": "shell", "arguments": {"command": probe}}
        (off,), _ = _exec(run_mind, tmp_path, [call])
        (on,), _ = _exec(run_mind, tmp_path, [call], "--sandbox-network", "on")
    assert off["status"] == "error" and "REACHED" not in str(off["output"]), off
    assert on["status"] == "ok" and "REACHED" in str(on["output"]), on
