"""`mind exec` keeps the scripted model's file tools inside the workspace
(docs/design/boundary.md §1).

The attack of the issue: a symlink to an outside directory followed by ``..``
looks like a path inside the workspace to a string check.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.e2e.conftest import RunMind


@pytest.mark.parametrize("approval", ["on-request", "untrusted", "never"])
def test_exec_symlink_then_dotdot_writes_nothing_outside(
    tmp_path: Path, run_mind: RunMind, approval: str
) -> None:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    ws.mkdir()
    (ws / "l").symlink_to(outside / "sub")
    script = tmp_path / "s.yaml"
    calls = [
        {"name": "write_file", "arguments": {"path": "l/../pwned", "content": "x"}},
        {"name": "read_file", "arguments": {"path": "/proc/self/environ"}},
        {"name": "write_file", "arguments": {"path": "inside.txt", "content": "ok\n"}},
    ]
    replies: list[dict[str, object]] = [{"tool_calls": [c]} for c in calls]
    script.write_text(yaml.safe_dump([*replies, {"text": "done"}]), encoding="utf-8")
    r = run_mind(
        "exec",
        "--json",
        "--provider",
        "scripted",
        "--script",
        str(script),
        "--approval",
        approval,
        "--cwd",
        str(ws),
        "escape",
        env={"MIND_TEST_SECRET": "sk-do-not-leak"},
    )
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in outside.rglob("*")) == ["sub"]
    write, environ, inside = r.of_type("tool.result")
    if approval == "never":  # nobody asked, so the tool itself refuses
        assert write["status"] == "error"
        assert "resolves outside the workspace" in write["output"]
    else:  # exec cannot ask: refused without running
        assert write["status"] == "denied"
        assert "l/../pwned" in write["output"]
    assert environ["status"] in ("error", "denied")
    assert "sk-do-not-leak" not in environ["output"]
    if environ["status"] == "error":
        assert "/proc is outside every workspace" in environ["output"]
    expected_inside = "denied" if approval == "untrusted" else "ok"
    assert inside["status"] == expected_inside, inside
    assert "sk-do-not-leak" not in r.stdout
