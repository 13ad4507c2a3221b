"""``mind exec`` on an answer cut at the output token limit: the text is
printed, the person is warned on stderr, ``--json`` carries a
``turn.warning`` line (docs/design/providers.md §9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import RunMind
from tests.support.replay_server import ReplayServer, Reply

CUT = b"".join(
    f"data: {json.dumps(c)}\n\n".encode()
    for c in (
        {"choices": [{"index": 0, "delta": {"content": "Partial ans"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    )
)


@pytest.mark.parametrize("json_mode", [True, False], ids=["json", "plain"])
def test_an_answer_cut_at_the_token_limit_is_printed_with_a_warning(
    run_mind: RunMind, tmp_path: Path, json_mode: bool
) -> None:
    with ReplayServer([Reply(body=CUT)]) as server:
        args = ["exec", *(["--json"] if json_mode else [])]
        args += ["--provider", "openai-chat", "--base-url", server.url + "/v1"]
        args += ["--model", "m", "--cwd", str(tmp_path), "hello"]
        result = run_mind(*args, env={"OPENAI_API_KEY": "sk-test"})
    assert result.returncode == 0, result.stderr
    if json_mode:
        warnings = result.of_type("turn.warning")
        assert [w["kind"] for w in warnings] == ["output_truncated"]
        types = [e["type"] for e in result.events]
        assert types.index("message.completed") < types.index("turn.warning")
        assert types.index("turn.warning") < types.index("turn.completed")
    else:
        assert result.stdout.strip() == "Partial ans"
        assert "mind: warning: the answer was cut off at the model's output token limit" in (
            result.stderr
        )
