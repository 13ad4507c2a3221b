"""``mind exec --json`` says which instructions files its requests carry:
``instructions.loaded`` right after ``session.started`` (docs/design/context.md §4)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.e2e.conftest import RunMind


def test_exec_json_names_the_instructions_files_after_session_started(
    tmp_path: Path, run_mind: RunMind
) -> None:
    work = tmp_path / "work"
    (work / ".git").mkdir(parents=True)  # the repository root
    (work / "pkg").mkdir()
    (work / "AGENTS.md").write_text("root rule\n")
    (work / "pkg" / "CLAUDE.md").write_text("pkg rule\n")
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump([{"text": "ok"}]), encoding="utf-8")
    r = run_mind(
        "exec", "--json", "--provider", "scripted", "--script", str(script),
        "--cwd", str(work / "pkg"), "hello",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert [e["type"] for e in r.events[:3]] == [
        "session.started",
        "instructions.loaded",
        "turn.started",
    ]
    assert r.events[1]["sources"] == [
        {
            "path": str(work / "AGENTS.md"),
            "scope": "project",
            "size_bytes": 10,
            "included_bytes": 10,
            "cut": False,
        },
        {
            "path": str(work / "pkg" / "CLAUDE.md"),
            "scope": "project",
            "size_bytes": 9,
            "included_bytes": 9,
            "cut": False,
        },
    ]
