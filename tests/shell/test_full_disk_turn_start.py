"""A disk that fills up before a turn's start is durable: the turn fails
``storage`` from its very start (no model request), acknowledges nothing, and
its input replays once space is freed (a real 2 MiB tmpfs; root only, like
``tests/shell/test_full_disk.py`` whose fixture it uses)."""

from __future__ import annotations

from pathlib import Path

import anyio
import yaml

import mind
from mind.generated import journal as jr
from tests.shell.test_full_disk import _check_journal, fill
from tests.shell.test_full_disk import small_disk as small_disk  # the fixture

PROMPT = "p" * (256 * 1024)  # more than the pages `fill` leaves free: its journal record cannot fit


def _config(path: Path, text: str, **env: str) -> mind.ResolvedConfig:
    path.write_text(yaml.safe_dump([{"text": text}]), encoding="utf-8")
    return mind.resolve_config(provider="scripted", script=str(path), env=env)


def test_a_turn_whose_start_cannot_be_written_fails_storage_and_its_input_replays(
    tmp_path: Path, small_disk: Path
) -> None:
    state = small_disk / "state"
    # The first turn's answer passes the 1 MiB cap: the turn fails and its input waits.
    capped = _config(tmp_path / "a.yaml", "y" * (1024 * 1024 + 1), MIND_MAX_OUTPUT_MIB="1")
    answering = _config(tmp_path / "b.yaml", "done")

    async def main() -> tuple[str, str, str | None, str]:
        async with mind.Runtime.open(state_root=state) as rt:
            session = rt.create_session(cwd=tmp_path, config=capped)
            first = await session.run(PROMPT)
            fill(small_disk)
            turn = session.resume_pending()
            assert turn is not None
            failed = await turn.wait()
            (small_disk / "ballast").unlink()
            # The broken session is reopened afresh in this process (issue #8 item 6).
            again = rt.open_session(session.session_id, config=answering)
            resumed = again.resume_pending()
            assert resumed is not None
            done = await resumed.wait()
            kind = failed.event.failure.kind if failed.event.failure else None
            return first.status, failed.status, kind and str(kind), done.status

    first, failed, kind, done = anyio.run(main)
    assert (first, failed, kind, done) == ("failed", "failed", "storage", "completed")
    (path,) = (state / "sessions").glob("*/journal.jsonl")
    records = _check_journal(path)
    # Only the last turn reached the model's answer; the failed start sent no request.
    assert [r.text for r in records if isinstance(r, jr.ModelRound)] == ["done"]
    acknowledged = [r.acknowledged for r in records if isinstance(r, jr.TurnCompleted)]
    prompts = {r.message_id for r in records if isinstance(r, jr.UserMessage)}
    assert len(prompts) == 1 and acknowledged[-1] == list(prompts)
    assert sum(len(a) for a in acknowledged) == 1  # consumed exactly once
