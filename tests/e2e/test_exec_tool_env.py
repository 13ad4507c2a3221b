"""Tools run with an allow-listed environment (docs/design/secrets.md): a real
``mind exec`` whose tool prints its own environment sees none of mind's secrets."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind

SECRETS = {
    "GH_PAT": "ghp_MARKERghpat",
    "MYSQL_PWD": "MARKERmysql",
    "DATABASE_URL": "postgres://u:MARKERdbpw@h/db",
    "HTTPS_PROXY": "http://u:MARKERproxy@proxy:3128",
    "NPM_CONFIG__AUTH": "MARKERnpm",
    "SSH_AUTH_SOCK": "/tmp/ssh-MARKERsock/agent.1",
    "OPENAI_API_KEY": "sk-MARKERopenai",
    "ANTHROPIC_API_KEY": "sk-ant-MARKERanthropic",
    "AWS_SECRET_ACCESS_KEY": "MARKERaws",
    "LC_SECRET": "MARKERlc",  # LC_ but no locale category (locale(7))
}

# Both views of the tool's environment: what `env` prints and what the kernel
# shows in /proc/self/environ (a read-only tool's way to the same data).
PRINT_ENV = "env; echo ---; tr '\\0' '\\n' < /proc/self/environ"


def _exec_env(
    tmp_path: Path, run_mind: RunMind, env: dict[str, str], config: str = ""
) -> tuple[int, str, str]:
    """Run one scripted turn whose shell tool prints its environment; return
    (exit code, the tool's output, stderr)."""
    script = tmp_path / "s.yaml"
    script.write_text(
        yaml.safe_dump(
            [
                {"tool_calls": [{"name": "shell", "arguments": {"command": PRINT_ENV}}]},
                {"text": "done"},
            ]
        ),
        encoding="utf-8",
    )
    home = tmp_path / "mind-home"
    home.mkdir(exist_ok=True)
    if config:
        (home / "config.toml").write_text(config, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--approval",
        "never",
        "--cwd",
        str(work),
        "print the environment",
        env={"MIND_STATE_HOME": str(tmp_path / "state"), **env},
    )
    outputs = [e["output"] for e in r.of_type("tool.result")]
    return r.returncode, "\n".join(outputs), r.stderr


def test_a_tool_sees_no_secret_of_minds_environment(tmp_path: Path, run_mind: RunMind) -> None:
    code, output, stderr = _exec_env(
        tmp_path, run_mind, {**SECRETS, "LANG": "C.UTF-8", "LC_TIME": "C", "LC_PAPER": "C"}
    )
    assert code == 0, stderr
    env_part, _, proc_part = output.partition("---")
    for part in (env_part, proc_part):
        names = {line.partition("=")[0] for line in part.splitlines() if "=" in line}
        assert {"PATH", "HOME", "LANG", "LC_TIME", "LC_PAPER"} <= names, part
        assert not names & set(SECRETS), part
    assert "MARKER" not in output
    journal = "".join(p.read_text() for p in (tmp_path / "state").rglob("journal.jsonl"))
    assert "PATH=" in journal and "MARKER" not in journal


def test_shell_environment_table_passes_and_sets_variables(
    tmp_path: Path, run_mind: RunMind
) -> None:
    config = (
        "[shell_environment]\n"
        'include = ["GOPATH", "CARGO_*", "LC_MINE"]\n'
        'set = { RUST_LOG = "info", HOME = "/tmp/tool-home" }\n'
    )
    env = {"GOPATH": "/go", "CARGO_HOME": "/cargo", "CARGOX": "no", "GOPATHS": "no", "LC_MINE": "m"}
    code, output, stderr = _exec_env(tmp_path, run_mind, {**env, **SECRETS}, config)
    assert code == 0, stderr
    lines = set(output.partition("---")[0].splitlines())
    assert {"GOPATH=/go", "CARGO_HOME=/cargo", "RUST_LOG=info", "HOME=/tmp/tool-home"} <= lines
    assert "LC_MINE=m" in lines  # an LC_ name that is no locale category, included
    assert not {"CARGOX=no", "GOPATHS=no"} & lines
    assert "MARKER" not in output


def test_a_malformed_shell_environment_table_is_a_config_error(
    tmp_path: Path, run_mind: RunMind
) -> None:
    for table, key in (
        ('shell_environment = "all"\n', "`shell_environment`"),
        ('[shell_environment]\ninclude = ["*"]\n', "`shell_environment.include`"),
        ("[shell_environment]\nset = { A = 1 }\n", "`shell_environment.set.A`"),
        ('[shell_environment]\npass = ["X"]\n', "unknown key(s) pass"),
    ):
        code, output, stderr = _exec_env(tmp_path, run_mind, {}, table)
        assert code == 2, (table, stderr)
        assert str(tmp_path / "mind-home" / "config.toml") in stderr, stderr
        assert key in stderr, (table, stderr)
        assert output == ""


def test_mind_config_shows_the_shell_environment_names_only(
    tmp_path: Path, run_mind: RunMind
) -> None:
    home = tmp_path / "mind-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[shell_environment]\ninclude = ["GOPATH"]\nset = { TOKEN_X = "MARKERvalue" }\n',
        encoding="utf-8",
    )
    r = run_mind("config", "--provider", "scripted", "--script", str(tmp_path / "s.yaml"))
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("shell_environment")]
    assert "include GOPATH" in row and "set TOKEN_X" in row
    assert "MARKER" not in r.stdout + r.stderr


def test_minds_own_environ_read_through_proc_never_reaches_the_journal(
    tmp_path: Path, run_mind: RunMind
) -> None:
    """Defence in depth behind the sandbox: even a tool that reads mind's own
    /proc/<pid>/environ (or greps every process's) cannot carry mind's keys
    into a tool result, the journal or the next request."""
    script = tmp_path / "s.yaml"
    command = (
        # The command's parent is its supervisor; mind is the supervisor's parent.
        "mind=$(cut -d' ' -f4 /proc/$PPID/stat); "
        "tr '\\0' '\\n' < /proc/$mind/environ | grep API_KEY; "
        "grep -a -h -o 'sk-MA[R]KER[A-Za-z0-9]*' /proc/[0-9]*/environ | sort -u"
    )
    script.write_text(
        yaml.safe_dump(
            [{"tool_calls": [{"name": "shell", "arguments": {"command": command}}]}, {"text": "ok"}]
        ),
        encoding="utf-8",
    )
    (tmp_path / "work").mkdir()
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--sandbox",
        "danger-full-access",  # the sandbox hides /proc/<mind pid>: test the mask behind it
        "--approval",
        "never",
        "--cwd",
        str(tmp_path / "work"),
        "read the environ",
        env={"MIND_STATE_HOME": str(tmp_path / "state"), **SECRETS},
    )
    assert r.returncode == 0, r.stderr
    (result,) = r.of_type("tool.result")
    assert "OPENAI_API_KEY=***" in result["output"], result
    assert "MARKER" not in r.stdout + r.stderr
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert b"MARKER" not in path.read_bytes(), path
