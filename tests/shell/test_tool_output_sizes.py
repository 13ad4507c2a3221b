"""A tool output larger than the runner's capture (docs/design/context.md §3):
the journal keeps the runner's head and tail and the size the tool wrote
(``output_bytes``), and the model's view, however cut, states that size."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import mind
from mind.generated import journal as jr
from tests.support.fake_model import FakeModel

BIG = 2_000_040
"""Bytes the command prints: one line (/tmp/t12/s5.py's ``big.sh``)."""

COMMAND = f"head -c {BIG - 1} /dev/zero | tr '\\0' x; echo"


def test_the_journal_and_the_model_know_the_size_the_tool_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(mode=0o700)

    async def main(model: FakeModel) -> list[jr.JournalRecord]:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="m",
            model_context_window=8192,
            approval="never",
        )
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            outcome = await s.run("TOOL big")
            assert outcome.status == "completed"
            return list(s.journal.records)

    with FakeModel(command=COMMAND) as model:
        records = anyio.run(main, model)
        tool_messages = [
            m for body in model.requests for m in body["messages"] if m.get("role") == "tool"
        ]
    (result,) = [r for r in records if isinstance(r, jr.ToolResult)]
    assert result.output_bytes == BIG
    assert len(result.output.encode()) < 40_000  # the runner's capture, not 2 MB
    (seen,) = {m["content"] for m in tool_messages}
    assert len(seen.encode()) <= 8192
    assert f"which had {BIG} bytes in all" in seen
    assert "the tool runner kept" in seen
