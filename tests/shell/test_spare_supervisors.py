"""The spare supervisor (docs/design/processes.md §9; mind.shell.spare_supervisors):
a command is handed to a supervisor already started, which then runs exactly
as one started for it; an idle spare holds nothing of mind's and ends,
having touched nothing, when mind goes."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mind.shell import private_files, spare_supervisors, supervision

pytestmark = pytest.mark.anyio

DEADLINE_S = 10.0
"""Generous bound for waiting on the system (never a timing assertion)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _idle_spare() -> int:
    slot = spare_supervisors._SLOT
    with slot.lock:
        slot.settle()  # started in a worker thread
    assert slot.idle is not None
    return slot.idle.pid


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def _run(directory: Path, command: str, env: dict[str, str]) -> supervision.Handle:
    return await supervision.start(
        directory,
        ["/bin/sh", "-c", command],
        cwd=directory.parent,
        env=env,
        timeout_s=10,
        max_output_bytes=10_000,
    )


async def test_the_next_command_goes_to_the_spare_started_before_it(tmp_path: Path) -> None:
    first = await _run(tmp_path / "ef_1", "true", {"PATH": os.environ["PATH"]})
    assert (await supervision.wait(first)).ok
    spare = _idle_spare()
    assert Path(f"/proc/{spare}/environ").read_bytes() == b""  # nothing of mind's
    env = {"PATH": os.environ["PATH"], "ONLY_THIS": "x y"}
    handle = await _run(tmp_path / "ef_2", 'echo "$ONLY_THIS $HOME $(pwd)"', env)
    assert handle.pid == spare
    result = await supervision.wait(handle)
    named = supervision.handle_of(tmp_path / "ef_2")  # what the spare wrote, itself
    assert named is not None and named.start_identity == handle.start_identity != ""
    # the job's environment only (no HOME), the given working directory
    assert result.text == f"x y  {tmp_path}\nexit code: 0", result.text
    assert _idle_spare() != spare  # the next one is already started


async def test_a_stop_reaches_a_command_run_by_a_spare(tmp_path: Path) -> None:
    warm = await _run(tmp_path / "ef_1", "true", {"PATH": os.environ["PATH"]})
    await supervision.wait(warm)
    handle = await _run(tmp_path / "ef_2", "sleep 300", {"PATH": os.environ["PATH"]})
    with anyio.move_on_after(0.2):
        await supervision.wait(handle)  # cancelled: the tree is stopped first
    state = supervision.inspect(tmp_path / "ef_2")
    assert isinstance(state, supervision.Finished), state
    assert "stopped" in state.result.text


async def test_a_job_too_large_for_the_pipe_starts_cold(tmp_path: Path) -> None:
    warm = await _run(tmp_path / "ef_1", "true", {"PATH": os.environ["PATH"]})
    await supervision.wait(warm)
    spare = _idle_spare()
    big = "v" * spare_supervisors.JOB_MAX_BYTES
    handle = await _run(
        tmp_path / "ef_2", 'echo "${#BIG}"', {"PATH": os.environ["PATH"], "BIG": big}
    )
    assert handle.pid != spare and _idle_spare() == spare
    assert (await supervision.wait(handle)).text == f"{len(big)}\nexit code: 0"


def test_a_spare_given_no_whole_job_ends_touching_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "ef_cut"
    private_files.private_dir(directory)
    (directory / "supervisor.log").touch(mode=0o600)
    whole = spare_supervisors._job(directory, {}, ["--cwd", str(tmp_path), "--", "true"])
    spare = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", spare_supervisors._LAUNCH],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={},
        start_new_session=True,
    )
    _out, err = spare.communicate(whole[:-4], timeout=DEADLINE_S)  # the end field cut
    assert spare.returncode == supervision.REFUSED_EXIT, err
    assert sorted(p.name for p in directory.iterdir()) == ["supervisor.log"]
    assert (directory / "supervisor.log").read_bytes() == b""


def test_an_idle_spare_ends_when_mind_is_killed(tmp_path: Path) -> None:
    """kill -9 of mind closes the spare's pipe: it ends (no job, nothing
    touched) instead of waiting for ever."""
    script = (
        "import anyio, os, sys\n"
        "from pathlib import Path\n"
        "from mind.shell import spare_supervisors, supervision\n"
        "async def main():\n"
        f"    h = await supervision.start(Path({str(tmp_path / 'ef_1')!r}), ['true'],"
        " cwd=Path('/'), env={}, timeout_s=5, max_output_bytes=100)\n"
        "    await supervision.wait(h)\n"
        "    spare_supervisors._SLOT.settle()\n"
        "    print(spare_supervisors._SLOT.idle.pid, flush=True)\n"
        "    await anyio.sleep(300)\n"
        "anyio.run(main)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    with starter:
        assert starter.stdout is not None
        spare = int(starter.stdout.readline())
        assert _alive(spare)
        os.kill(starter.pid, signal.SIGKILL)
    # The kernel wakes a pidfd when its process ends (child or not): no polling.
    pidfd = os.pidfd_open(spare)
    try:
        assert select.select([pidfd], [], [], DEADLINE_S)[0] == [pidfd]
    finally:
        os.close(pidfd)
    assert not _alive(spare)


async def test_the_spare_is_journaled_before_it_is_handed_the_job(tmp_path: Path) -> None:
    """processes.md §9.4: ``on_started`` (where ``effect_running`` is
    fsynced) gets the spare's pid + start identity before the spare has the
    job; if it fails, the command never runs."""
    warm = await _run(tmp_path / "ef_1", "true", {"PATH": os.environ["PATH"]})
    await supervision.wait(warm)
    spare = _idle_spare()
    seen: list[tuple[int, str, bool]] = []

    async def journaled(handle: supervision.Handle) -> None:
        ran = (tmp_path / "ran").exists() or (tmp_path / "ef_2" / "supervisor.json").exists()
        seen.append((handle.pid, handle.start_identity, ran))

    handle = await supervision.start(
        tmp_path / "ef_2",
        ["/bin/sh", "-c", "touch ../ran"],
        cwd=tmp_path / "ef_2",
        env={"PATH": os.environ["PATH"]},
        timeout_s=10,
        max_output_bytes=100,
        on_started=journaled,
    )
    assert (await supervision.wait(handle)).ok
    assert seen == [(spare, handle.start_identity, False)]
    assert (tmp_path / "ran").exists()

    spare = _idle_spare()

    async def failing(handle: supervision.Handle) -> None:
        raise RuntimeError("journal full")

    with pytest.raises(RuntimeError, match="journal full"):
        await supervision.start(
            tmp_path / "ef_3",
            ["/bin/sh", "-c", "touch ../ran3"],
            cwd=tmp_path / "ef_3",
            env={"PATH": os.environ["PATH"]},
            timeout_s=10,
            max_output_bytes=100,
            on_started=failing,
        )
    assert not _alive(spare)  # given up (EOF ends it) and reaped before the raise
    assert not (tmp_path / "ran3").exists()
    assert sorted(os.listdir(tmp_path / "ef_3")) == ["supervisor.log"]
