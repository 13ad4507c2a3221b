"""The tool-output budget reaches the request: ``mind exec`` against a
loopback model, a command printing far more than ``tool_output_max_bytes``
(docs/design/context.md §3); the journal keeps the whole output."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import RunMind
from tests.support.fake_model import FakeModel


def test_a_long_command_output_reaches_the_model_cut_to_the_budget(
    tmp_path: Path, run_mind: RunMind
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FakeModel(command="seq 1 5000; echo {call_id} >> {effects}") as model:
        r = run_mind(
            "exec",
            "--provider",
            "openai-chat",
            "--base-url",
            model.base_url,
            "--model",
            "m",
            "--approval",
            "never",
            "--sandbox",
            "danger-full-access",
            "--cwd",
            str(work),
            "TOOL",
            env={"MIND_TOOL_OUTPUT_MAX_BYTES": "2048", "MIND_STATE_HOME": str(tmp_path / "st")},
        )
        assert r.returncode == 0, r.stderr
        bodies = list(model.requests)
    (tool,) = [m for m in bodies[-1]["messages"] if m["role"] == "tool"]
    content = tool["content"] if isinstance(tool["content"], str) else tool["content"][0]["text"]
    assert len(content.encode()) <= 2048
    assert content.startswith("1\n2\n3\n")
    assert "cut from the middle of this output" in content
    journal = next((tmp_path / "st" / "sessions").glob("*/journal.jsonl")).read_text("utf-8")
    assert "\\n2500\\n" in journal  # the middle the model did not see
