"""``mind exec`` and compaction: a context overflow compacts and the request
is sent once more; ``--json`` prints ``context.compacted``, the human mode
says it on stderr (docs/design/context.md §5)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import MindResult, RunMind
from tests.support.fake_model import FakeModel, user_texts

SID = "0193aaaa-0000-7000-8000-00000000c0c0"


def _exec(run_mind: RunMind, base_url: str, cwd: Path, *args: str, new: bool = False) -> MindResult:
    return run_mind(
        "exec",
        "--provider",
        "openai-chat",
        "--base-url",
        base_url,
        "--model",
        "m",
        "--approval",
        "never",
        "--cwd",
        str(cwd),
        "--new-session" if new else "--session",
        SID,
        *args,
    )


def test_an_overflow_compacts_and_json_says_so(tmp_path: Path, run_mind: RunMind) -> None:
    with FakeModel() as model:
        first = _exec(run_mind, model.base_url, tmp_path, "TOOL first", new=True)
        assert first.returncode == 0, first.stderr
        model.overflow_next = 1
        second = _exec(run_mind, model.base_url, tmp_path, "--json", "second")
        model.overflow_next = 1  # the human mode says it on stderr
        third = _exec(run_mind, model.base_url, tmp_path, "third")
        last = model.requests[-1]
    assert second.returncode == 0, second.stderr
    (compacted,) = second.of_type("context.compacted")
    assert compacted["trigger"] == "overflow"
    assert compacted["after_tokens"] < compacted["before_tokens"]
    types = [e["type"] for e in second.events]
    assert types.index("context.compacted") < types.index("turn.completed")
    assert second.of_type("turn.completed")[0]["status"] == "completed"
    assert third.returncode == 0, third.stderr
    assert "mind: context compacted (the context was full)" in third.stderr
    assert user_texts(last["messages"])[-1] == "third"
