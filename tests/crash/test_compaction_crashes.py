"""Compaction across crashes (docs/design/context.md §5): a real ``mind exec``
killed with SIGKILL (``MIND_CRASH_AT``) at each compaction boundary, then
restarted until nothing is left to recover.

The session: a first turn runs a shell tool (its effect committed), a
second one's call needs approval (exec answers it: declined); the third
turn's first request overflows the window (the fake model's
``overflow_next``), so the turn compacts (``overflow``) and is killed at
``compaction_started`` (durable, no request yet),
``compaction_request_sent`` (the summary streaming) or
``compaction_completed`` (durable, unused). After the restarts: the
harness's invariants (no input lost or answered twice, no tool run twice,
every request valid), the killed compaction either completed or stands
without an end (the old context), the last prompt is answered and reaches
the model verbatim, the committed tool never ran again and the answered
question was never asked again.
"""

from __future__ import annotations

from collections import Counter

import pytest

from mind.generated import journal as jr
from mind.shell.journal import read_records
from tests.crash.harness import Case, Input, check, recover, run
from tests.support.fake_model import EFFECTS_FILE, FakeModel, read_requests, user_texts

pytestmark = pytest.mark.slow

BOUNDARIES = ("compaction_started", "compaction_request_sent", "compaction_completed")
FIRST = "TOOL first prompt"
ASKED = "TOOL asked prompt"
SECOND = "second prompt"


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_killed_at_a_compaction_boundary_the_session_resumes_whole(
    case: Case, fake_model: FakeModel, boundary: str
) -> None:
    first = run(case.exec_argv(FIRST, new=True), case.env())
    assert first.returncode == 0, first.stderr[-800:]
    # A call that needs approval: exec journals the question and answers it
    # (declined); the answer must never be asked again.
    argv = case.exec_argv(ASKED)
    asked = run([*argv[:-1], "--approval", "untrusted", argv[-1]], case.env())
    assert asked.returncode == 0, asked.stderr[-800:]
    fake_model.overflow_next = 1
    proc = run(case.exec_argv(SECOND), case.env(boundary))
    assert proc.returncode == -9, proc.stderr[-800:]
    recovery = recover(case)
    inputs = [Input(FIRST, "durable"), Input(ASKED, "durable"), Input(SECOND, "durable")]
    report = check(case, inputs, recovery)
    assert report.violations == [], "\n".join(report.violations)

    records, _ = read_records(case.session_dir / "journal.jsonl")
    started = [r for r in records if isinstance(r, jr.CompactionStarted)]
    assert [r.trigger for r in started] == [jr.CompactionTrigger.overflow]
    ends = [r for r in records if isinstance(r, jr.CompactionCompleted | jr.CompactionFailed)]
    if boundary == "compaction_completed":
        assert [type(r) for r in ends] == [jr.CompactionCompleted]
    else:  # started without an end: the old context stands
        assert ends == []
    turns = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert turns[0].status == jr.TurnStatus.completed
    assert turns[-1].status == jr.TurnStatus.completed
    # The last request carried the second prompt verbatim as its newest user message.
    bodies = [b for b in read_requests(case.requests_path) if "tools" in b]
    assert user_texts(bodies[-1]["messages"])[-1] == SECOND
    # The first turn's committed effect ran once; the answered question was
    # asked once, answered once, and its call never ran.
    lines = Counter((case.cwd / EFFECTS_FILE).read_text().split())
    assert sorted(lines.values()) == [1]
    questions = [r for r in records if isinstance(r, jr.InteractionRequested)]
    answers = [r for r in records if isinstance(r, jr.InteractionResolved)]
    assert (len(questions), len(answers)) == (1, 1)


@pytest.mark.parametrize("boundary", ("compaction_started", "compaction_completed"))
def test_killed_compacting_after_a_tool_result_resumes_and_never_reruns_it(
    case: Case, fake_model: FakeModel, boundary: str
) -> None:
    """The turn's own tool ran and its result is committed; the request that
    carries the result overflows, so the turn compacts and is killed. The turn
    resumes at its round boundary (a compaction is not a step of the turn):
    its prompt is not replayed and its tool does not run again."""
    first = run(case.exec_argv(FIRST, new=True), case.env())
    assert first.returncode == 0, first.stderr[-800:]
    fake_model.overflow_skip, fake_model.overflow_next = 1, 1  # the turn's second request
    proc = run(case.exec_argv(ASKED), case.env(boundary))
    assert proc.returncode == -9, proc.stderr[-800:]
    recovery = recover(case)
    report = check(case, [Input(FIRST, "durable"), Input(ASKED, "durable")], recovery)
    assert report.violations == [], "\n".join(report.violations)
    records, _ = read_records(case.session_dir / "journal.jsonl")
    turns = [r for r in records if isinstance(r, jr.TurnCompleted)]
    assert [t.status for t in turns] == [jr.TurnStatus.completed] * 2  # resumed, not aborted
    prompts = [r.text for r in records if isinstance(r, jr.UserMessage)]
    assert prompts == [FIRST, ASKED]  # nothing replayed
    lines = Counter((case.cwd / EFFECTS_FILE).read_text().split())
    assert sorted(lines.values()) == [1, 1]  # each turn's tool ran once
