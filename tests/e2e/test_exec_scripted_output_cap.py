"""The runtime caps every provider's output, the scripted one included
(docs/design/turn.md §5, found by a tester): answer text, reasoning and tool-call
arguments count against ``max_output_mib`` cumulatively over the turn's
rounds, and the turn fails ``output_limit`` without acknowledging its input.

A real ``mind exec`` process with ``MIND_MAX_OUTPUT_MIB=1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import RunMind

MIB = 1024 * 1024
BIG = "x" * (MIB + MIB // 2)  # over the 1 MiB cap in one round
THIRD = "y" * (MIB * 4 // 10)  # three of these go past it together


def _exec(tmp_path: Path, run_mind: RunMind, replies: list[dict[str, Any]]) -> Any:
    script = tmp_path / "s.yaml"
    script.write_text(yaml.safe_dump(replies), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    argv = ["exec", "--provider", "scripted", "--script", str(script)]
    argv += ["--approval", "never", "--cwd", str(work), "hello"]
    return run_mind(*argv, env={"MIND_MAX_OUTPUT_MIB": "1"})


def _records(mind_env: dict[str, str]) -> list[dict[str, Any]]:
    (path,) = (Path(mind_env["MIND_HOME"]) / "sessions").glob("*/journal.jsonl")
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _inbox(mind_env: dict[str, str]) -> list[str]:
    (path,) = (Path(mind_env["MIND_HOME"]) / "sessions").glob("*/inbox.json")
    return [e["text"] for e in json.loads(path.read_text("utf-8"))["entries"]]


def _write(path: str, content: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "write_file", "arguments": {"path": path, "content": content}}]}


@pytest.mark.parametrize(
    "reply",
    [{"text": BIG}, {"text": "ok", "reasoning": BIG}, _write("big.txt", BIG)],
    ids=["text", "reasoning", "write_file_content"],
)
def test_one_scripted_round_past_the_cap_fails_output_limit(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str], reply: dict[str, Any]
) -> None:
    r = _exec(tmp_path, run_mind, [reply, {"text": "done"}])
    assert r.returncode == 1, r.stderr
    assert "mind: turn failed (output_limit)" in r.stderr, r.stderr
    assert "max_output_mib" in r.stderr, r.stderr
    records = _records(mind_env)
    (done,) = [x for x in records if x["type"] == "turn_completed"]
    assert done["status"] == "failed" and done["failure"]["kind"] == "output_limit"
    assert done["acknowledged"] == []
    assert not [x for x in records if x["type"] == "model_round"]  # nothing past the cap kept
    assert not (tmp_path / "work" / "big.txt").exists()  # its tool call never ran
    assert _inbox(mind_env) == ["hello"]


def test_rounds_count_together_against_the_cap(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    replies = [_write(f"f{i}.txt", THIRD) for i in range(1, 4)] + [{"text": "done"}]
    r = _exec(tmp_path, run_mind, replies)
    assert r.returncode == 1, r.stderr
    assert "mind: turn failed (output_limit)" in r.stderr, r.stderr
    records = _records(mind_env)
    assert len([x for x in records if x["type"] == "model_round"]) == 2
    (done,) = [x for x in records if x["type"] == "turn_completed"]
    assert done["failure"]["kind"] == "output_limit" and done["acknowledged"] == []
    assert (tmp_path / "work" / "f2.txt").exists()
    assert not (tmp_path / "work" / "f3.txt").exists()  # the round past the cap did not run
    assert _inbox(mind_env) == ["hello"]
