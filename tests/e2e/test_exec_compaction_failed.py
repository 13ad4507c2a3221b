"""A compaction that fails inside a turn is said by the real ``mind exec``
(docs/design/context.md §5): one stderr line with the reason in human mode,
the ``context.compaction_failed`` event in ``--json``, and a turn failure
that names what to do next."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import MindResult, RunMind, exec_on_fake
from tests.support.fake_model import FakeModel


def _exec(run_mind: RunMind, model: FakeModel, tmp: Path, *extra: str) -> MindResult:
    return exec_on_fake(
        run_mind,
        model.base_url,
        tmp,
        *extra,
        env={"MIND_MAX_RETRIES": "0", "MIND_MODEL_CONTEXT_WINDOW": "8192"},
    )


def test_a_failed_overflow_compaction_is_one_stderr_line_and_the_failure_says_what_to_do(
    tmp_path: Path, run_mind: RunMind
) -> None:
    with FakeModel(context_window=8192, summary_text="") as model:
        first = _exec(run_mind, model, tmp_path, "--json", "TOOL look")
        assert first.returncode == 0, first.stderr
        (started,) = first.of_type("session.started")
        model.overflow_next = 1
        second = _exec(run_mind, model, tmp_path, "--session", started["session_id"], "and now")
        model.overflow_next = 1
        third = _exec(
            run_mind, model, tmp_path, "--json", "--session", started["session_id"], "again"
        )
    assert second.returncode != 0
    lines = [line for line in second.stderr.splitlines() if "compacting the context failed" in line]
    assert lines == [
        "mind: warning: compacting the context failed (the context was full): the summary "
        "was empty; the model still sees the whole conversation"
    ], second.stderr
    # No slash command as if exec had them: the REPL to resume it in, or a new session.
    said = " ".join(second.stderr.split())
    assert f"`mind resume {started['session_id']}`, then /compact" in said, said
    assert "/new" not in said
    (failed,) = third.of_type("context.compaction_failed")
    assert failed["reason"] == "the summary was empty" and failed["trigger"] == "overflow"
    assert third.of_type("context.compacting")[0]["compaction_id"] == failed["compaction_id"]
