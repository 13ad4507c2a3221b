"""Tool commands under the supervisor, with real process trees
(docs/design/processes.md; mind.sidecars.supervisor, mind.shell.supervision).

Every test marks its command's processes with a unique environment variable
and finds them through ``/proc/*/environ``: "zero descendants left" is
"no live process carries the marker", checked under a bounded deadline
(never a sleep for timing).
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from mind.errors import PrivateStateError, SupervisorRecordError
from mind.shell import supervision
from mind.shell.tools import ToolOutcome, ToolRunner
from tests.support.process_trees import (
    DEADLINE_S,
    anyio_backend,
    marked,
    marker,
    marker_env,
    until,
)

pytestmark = pytest.mark.anyio
__all__ = ["anyio_backend", "marker"]  # the fixtures, from tests.support.process_trees


TREE = "sleep 300 & setsid sleep 300 & sleep 300"
"""The issue's tree: a background child, a setsid escapee, a foreground child."""


# ---- the tree: interrupt, timeout ------------------------------------------


async def test_interrupt_leaves_no_descendant_of_a_setsid_tree(tmp_path: Path, marker: str) -> None:
    runner = ToolRunner(tmp_path, env=marker_env(marker))
    seen: list[str] = []

    async def call() -> None:
        try:
            await runner.run("shell", {"command": ["bash", "-c", TREE]})
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            assert await until(lambda: len(marked(marker, "sleep")) == 3)
            scope.cancel()
    assert seen == ["cancelled"]
    assert await until(lambda: marked(marker) == [])


async def test_timeout_leaves_no_descendant_of_a_setsid_tree(tmp_path: Path, marker: str) -> None:
    runner = ToolRunner(tmp_path, env=marker_env(marker))
    started = tmp_path / "started"
    command = f"{TREE} & touch {started}; wait"
    outcome = await runner.run("shell", {"command": ["bash", "-c", command], "timeout_s": 1})
    assert started.exists()
    assert outcome == ToolOutcome(
        status="error",
        output="timed out after 1 s; the command and every process it started were killed",
    )
    assert await until(lambda: marked(marker) == [])


async def test_a_double_forked_daemon_is_killed_when_the_command_exits(
    tmp_path: Path, marker: str
) -> None:
    started = tmp_path / "started"
    daemon = f"setsid bash -c 'sleep 300 & touch {started}; exec sleep 301' </dev/null"
    command = f"( {daemon} & ); while [ ! -e {started} ]; do :; done; echo parent-done"
    runner = ToolRunner(tmp_path, env=marker_env(marker))
    outcome = await runner.run("shell", {"command": ["bash", "-c", command]})
    assert outcome.status == "ok", outcome.output
    assert outcome.output.startswith("parent-done\n[2 background processes")
    assert await until(lambda: marked(marker) == [])


# ---- kill_tree, inspect ---------------------------------------------------------------


async def _start(
    directory: Path, command: str, marker: str, *, timeout_s: float = 60
) -> supervision.Handle:
    return await supervision.start(
        directory,
        ["bash", "-c", command],
        cwd=directory.parent,
        env=marker_env(marker),
        timeout_s=timeout_s,
        max_output_bytes=4096,
    )


async def test_kill_tree_of_a_running_command_leaves_no_descendant(
    tmp_path: Path, marker: str
) -> None:
    directory = tmp_path / "effects" / "ef_1"
    handle = await _start(directory, f"echo hello; {TREE}", marker)
    assert await until(lambda: len(marked(marker, "sleep")) == 3)
    state = supervision.inspect(directory)
    assert state == supervision.Running(handle.pid)
    assert supervision.kill_tree(directory)
    result = await supervision.wait(handle)
    assert result == supervision.ProcessResult(
        "hello\nstopped: the command and every process it started were killed",
        False,
        result.ran_ms,
    )
    assert result.ran_ms is not None and result.ran_ms >= 0  # its exit.json's own times
    assert await until(lambda: marked(marker) == [])
    assert supervision.inspect(directory) == supervision.Finished(result)
    assert not supervision.kill_tree(directory)  # nothing runs any more


async def test_the_record_names_the_supervisor_before_the_command_runs(
    tmp_path: Path, marker: str
) -> None:
    directory = tmp_path / "ef_2"
    seen = tmp_path / "seen"
    handle = await _start(directory, f"cat {directory}/supervisor.json > {seen}", marker)
    result = await supervision.wait(handle)
    assert result.ok, result.text
    record = json.loads(seen.read_text())
    assert (record["pid"], record["start_identity"]) == (handle.pid, handle.start_identity)
    assert handle.start_identity
    modes = {p.name: p.stat().st_mode & 0o777 for p in directory.iterdir()}
    assert directory.stat().st_mode & 0o777 == 0o700
    assert set(modes.values()) == {0o600}, modes
    assert {"supervisor.json", "exit.json", "stdout", "stderr"} <= set(modes)


def test_kill_9_of_the_starter_neither_kills_the_command_nor_loses_its_result(
    tmp_path: Path, marker: str
) -> None:
    """A stand-in for mind starts a supervised command and is SIGKILLed; the
    command goes on, ends, and exit.json has its real status and output."""
    directory = tmp_path / "effects" / "ef_3"
    go, began = tmp_path / "go", tmp_path / "began"
    command = (
        f"echo first; touch {began}; while [ ! -e {go} ]; do sleep 0.01; done; "
        "echo second >&2; exit 7"
    )
    starter = (
        "import anyio, sys\n"
        "from pathlib import Path\n"
        "from mind.shell import supervision\n"
        "async def main():\n"
        f"    h = await supervision.start(Path({str(directory)!r}), ['bash', '-c', sys.argv[1]],"
        f" cwd=Path({str(tmp_path)!r}), env={marker_env(marker)!r}, timeout_s=60,"
        " max_output_bytes=4096)\n"
        "    await supervision.wait(h)\n"
        "anyio.run(main)\n"
    )
    mind = subprocess.Popen([sys.executable, "-c", starter, command])
    try:
        assert anyio.run(until, began.exists), "the command did not start"
        mind.kill()
        mind.wait()
        assert isinstance(supervision.inspect(directory), supervision.Running)
        go.touch()
        # A restarted mind is not the supervisor's parent: it waits on the lock.
        handle = supervision.handle_of(directory)
        assert handle is not None

        async def collect() -> supervision.ProcessResult:
            with anyio.fail_after(DEADLINE_S):
                return await supervision.wait(handle)

        result = anyio.run(collect)
    finally:
        mind.kill()
        mind.wait()
    expected = supervision.ProcessResult(
        "first\n[stderr]\nsecond\nexit code: 7", False, result.ran_ms
    )
    assert result == expected
    assert result.ran_ms is not None and result.ran_ms >= 0
    assert supervision.inspect(directory) == supervision.Finished(expected)
    assert anyio.run(until, lambda: marked(marker) == [])


def test_an_untouched_directory_never_started_and_never_will(tmp_path: Path) -> None:
    assert supervision.inspect(tmp_path / "absent") == supervision.NeverStarted()
    directory = tmp_path / "ef_4"
    directory.mkdir(mode=0o700)
    assert supervision.inspect(directory) == supervision.NeverStarted()

    async def late_start() -> supervision.ProcessResult:
        handle = await _start(directory, "echo ran", "late")
        return await supervision.wait(handle)

    result = anyio.run(late_start)
    assert not result.ok
    assert "already used (never_started exists)" in result.text
    assert not (directory / "stdout").exists()


async def test_a_supervisor_killed_outright_is_lost_and_takes_the_leader(
    tmp_path: Path, marker: str
) -> None:
    directory = tmp_path / "ef_5"
    handle = await _start(directory, "sleep 300", marker)
    assert await until(lambda: len(marked(marker, "sleep")) == 1)
    os.kill(handle.pid, signal.SIGKILL)
    result = await supervision.wait(handle)
    assert "outcome is unknown" in result.text
    assert supervision.inspect(directory) == supervision.Lost(handle.pid)
    # The leader's death signal (§2.5) takes it along: it goes on unseen never.
    assert await until(lambda: marked(marker) == [])


async def test_a_cancelled_named_command_keeps_its_directory_with_the_killed_record(
    tmp_path: Path, marker: str
) -> None:
    """processes.md §7: the directory goes only once the call's result is
    durable — after an interrupt too, so a crash before that result is
    journaled finds ``killed``, not a command that seems never started."""
    effects = tmp_path / "effects"
    runner = ToolRunner(tmp_path, env=marker_env(marker), effects_dir=effects)
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            functools.partial(runner.run, "shell", {"command": "sleep 300"}, effect_id="ef_x")
        )
        assert await until(lambda: len(marked(marker, "sleep")) == 1)
        tg.cancel_scope.cancel()
    state = supervision.inspect(effects / "ef_x")
    assert isinstance(state, supervision.Finished) and "were killed" in state.result.text


async def test_collect_after_a_restart_waits_for_the_end_and_a_cancel_stops_the_tree(
    tmp_path: Path, marker: str
) -> None:
    """docs/design/effects.md §4: a restarted mind has only the directory —
    ``collect`` waits on its lock and reads the exit record; cancelled (an
    interrupt of the turn waiting), it stops the whole tree first."""
    done = tmp_path / "ef_c1"
    handle = await _start(done, "echo hi; exit 4", marker)
    await supervision.wait(handle)
    collected = await supervision.collect(done)
    assert collected is not None and (collected.text, collected.ok) == ("hi\nexit code: 4", False)
    assert await supervision.collect(tmp_path / "ef_none") is None
    running = tmp_path / "ef_c2"
    started = await _start(running, "sleep 300 & setsid sleep 300 & sleep 300", marker)
    assert await until(lambda: len(marked(marker, "sleep")) == 3)
    async with anyio.create_task_group() as tg:
        tg.start_soon(supervision.collect, running)
        tg.cancel_scope.cancel()
    assert await until(lambda: marked(marker) == [])
    state = supervision.inspect(running)
    assert isinstance(state, supervision.Finished) and "were killed" in state.result.text
    assert (await supervision.wait(started)).text == state.result.text  # reaped


async def test_a_damaged_exit_record_is_refused_with_its_path(tmp_path: Path, marker: str) -> None:
    directory = tmp_path / "ef_6"
    assert (await supervision.wait(await _start(directory, "true", marker))).ok
    exit_file = directory / "exit.json"
    exit_file.write_text('{"version": 1, "exit_code": "zero"')
    with pytest.raises(SupervisorRecordError) as caught:
        supervision.inspect(directory)
    assert caught.value.path == exit_file
    assert str(exit_file) in str(caught.value)


# ---- the shell tool's effect directory ------------------------------------------------


async def test_a_command_runs_in_its_effect_directory_kept_until_its_result_is_durable(
    tmp_path: Path, marker: str
) -> None:
    """docs/design/processes.md §1, §7: ``effects_dir/<effect id>`` holds the
    supervisor's files while the command runs; the command sees the id as
    ``MIND_EFFECT_ID``; the directory outlives the returned result (a crash
    before the result is journaled must not lose the evidence) until the
    caller discards it; a second run of the same effect replaces it."""
    effects = tmp_path / "effects"
    runner = ToolRunner(tmp_path, env=marker_env(marker), effects_dir=effects)
    command = f"echo $MIND_EFFECT_ID; ls {effects}; ls {effects}/ef_abc"
    outcome = await runner.run("shell", {"command": command}, effect_id="ef_abc")
    assert outcome == ToolOutcome(
        status="ok",
        output="ef_abc\nef_abc\nstderr\nstdout\nsupervisor.json\nsupervisor.log\nexit code: 0",
    )
    directory = runner.effect_directory("ef_abc")
    assert directory is not None and (directory / "exit.json").exists()
    again = await runner.run("shell", {"command": "echo again"}, effect_id="ef_abc")
    assert again == ToolOutcome(status="ok", output="again\nexit code: 0")
    supervision.discard(directory)
    assert list(effects.iterdir()) == []
    # An unnamed command's directory goes with its result (nobody could collect it).
    assert (await runner.run("shell", {"command": "true"})).status == "ok"
    assert list(effects.iterdir()) == []


async def test_output_files_stay_bounded_keeping_head_and_tail(tmp_path: Path, marker: str) -> None:
    """§3: however much a command prints, each file holds at most twice
    ``max_output_bytes`` (head + tail), and exit.json counts what was cut."""
    directory = tmp_path / "ef_7"
    handle = await supervision.start(
        directory,
        ["seq", "1", "200000"],
        cwd=tmp_path,
        env=marker_env(marker),
        timeout_s=60,
        max_output_bytes=1000,
    )
    result = await supervision.wait(handle)
    full = "".join(f"{n}\n" for n in range(1, 200_001)).encode()
    assert (directory / "stdout").read_bytes() == full[:1000] + full[-1000:]
    account = json.loads((directory / "exit.json").read_text())["stdout"]
    assert account == {"total_bytes": len(full), "head_bytes": 1000, "cut_bytes": len(full) - 2000}
    assert result.text.startswith(full[:500].decode())
    assert result.text.endswith(full[-500:].decode() + "exit code: 0")


async def test_a_stop_reaches_descendants_that_ignore_sigterm(tmp_path: Path, marker: str) -> None:
    """§4: SIGTERM to every descendant, then SIGKILL after the grace."""
    directory = tmp_path / "ef_8"
    handle = await supervision.start(
        directory,
        ["bash", "-c", f"trap '' TERM; {TREE}; wait"],
        cwd=tmp_path,
        env=marker_env(marker),
        timeout_s=60,
        max_output_bytes=1000,
        kill_grace_s=0.2,
    )
    assert await until(lambda: len(marked(marker, "sleep")) == 3)
    assert supervision.kill_tree(directory)
    result = await supervision.wait(handle)
    assert result.text == "stopped: the command and every process it started were killed"
    assert await until(lambda: marked(marker) == [])
    assert sorted(p.name for p in directory.iterdir() if p.name.startswith(".")) == []


def test_a_directory_others_may_write_is_refused(tmp_path: Path) -> None:
    """§2.2, fail closed: nothing runs in a directory another user could
    plant files in — refused by the client, and by the supervisor itself."""
    directory = tmp_path / "ef_9"
    directory.mkdir()
    directory.chmod(0o777)

    async def run() -> supervision.ProcessResult:
        handle = await supervision.start(
            directory, ["touch", "ran"], cwd=tmp_path, env=None, timeout_s=5, max_output_bytes=100
        )
        return await supervision.wait(handle)

    with pytest.raises(PrivateStateError):
        anyio.run(run)
    program = [sys.executable, "-I", "-S", supervision.SUPERVISOR]
    options = ["--cwd", str(tmp_path), "--timeout", "5", "--max-output", "100", "--grace", "1"]
    refused = subprocess.run(
        [*program, *options, "--", "touch", "ran"],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == supervision.REFUSED_EXIT
    assert "not private" in refused.stderr
    assert not (tmp_path / "ran").exists()
    assert sorted(p.name for p in directory.iterdir()) == []


async def test_the_caller_learns_the_supervisor_before_the_command_ends(
    tmp_path: Path, marker: str
) -> None:
    """The effect record's evidence (pid + start identity) is handed over
    while the command runs, so it can be made durable before the outcome."""
    seen: list[supervision.Handle] = []

    async def started(handle: supervision.Handle) -> None:
        seen.append(handle)

    runner = ToolRunner(tmp_path, env=marker_env(marker), effects_dir=tmp_path / "effects")
    outcome = await runner.run("shell", {"command": "echo $PPID"}, on_started=started)
    (handle,) = seen
    assert outcome.output == f"{handle.pid}\nexit code: 0"
    assert handle.start_identity


async def test_a_failing_start_hook_stops_the_tree_and_propagates(
    tmp_path: Path, marker: str
) -> None:
    """Started cold (a job too large for a spare's pipe), the hook runs once
    the tree does; its failure stops the tree. (Handed to a spare, the hook
    runs before the command exists: test_spare_supervisors.)"""
    from mind.shell.spare_supervisors import JOB_MAX_BYTES

    async def started(handle: supervision.Handle) -> None:
        assert await until(lambda: len(marked(marker, "sleep")) == 3)
        raise OSError(28, "No space left on device")

    runner = ToolRunner(tmp_path, env={**marker_env(marker), "BIG": "v" * JOB_MAX_BYTES})
    with pytest.raises(OSError, match="No space left"):
        await runner.run("shell", {"command": ["bash", "-c", TREE]}, on_started=started)
    assert await until(lambda: marked(marker) == [])


async def test_another_platform_is_refused_with_a_typed_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mind.errors import SupervisorUnsupported
    from mind.shell.tools._process import run_command

    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(SupervisorUnsupported) as caught:
        await supervision.start(
            tmp_path / "ef", ["true"], cwd=tmp_path, env=None, timeout_s=5, max_output_bytes=100
        )
    assert caught.value.platform == "darwin"
    assert "darwin" in str(caught.value) and "Linux" in str(caught.value)
    assert not (tmp_path / "ef").exists()  # refused before anything was made
    # The shell tool's result says so (no silent fallback to an unsupervised run).
    result = await run_command("true", cwd=tmp_path, env=None, timeout_s=5, max_output_bytes=100)
    assert not result.ok
    assert "darwin" in result.text


async def test_a_look_at_a_live_directory_never_stops_its_command(
    tmp_path: Path, marker: str
) -> None:
    """§6: ``inspect(finalize=False)`` (a live session asking what runs) may
    come between ``start`` and the supervisor's lock; it must never write the
    ``never_started`` marker the supervisor refuses on — only the reconcile
    at open, with no live owner, makes "never started" final."""
    for n in range(5):
        directory = tmp_path / f"ef_look_{n}"
        handle = await supervision.start(
            directory,
            ["echo", "ran"],
            cwd=tmp_path,
            env=marker_env(marker),
            timeout_s=60,
            max_output_bytes=1000,
        )
        supervision.inspect(directory, finalize=False)
        result = await supervision.wait(handle)
        assert result.text.startswith("ran"), result.text
        assert not (directory / supervision.NEVER_STARTED_FILE).exists()


def test_a_supervisor_waits_out_a_look_that_holds_its_directory_lock(tmp_path: Path) -> None:
    """§6: a live look (``inspect``) holds the directory's lock for a moment;
    the supervisor locking the directory then must wait it out, not refuse
    (which left the command never run: "locked by another process")."""
    from mind.shell import private_files

    directory = tmp_path / "ef_busy"
    directory.mkdir(mode=0o700)
    look = private_files.lock_dir(directory)  # the look, holding the lock now
    assert look is not None
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from mind.sidecars import supervisor as s; d = s._Directory(); "
            "print('trying', flush=True); d.lock(); print('locked', flush=True)",
        ],
        cwd=directory,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "trying"
        os.close(look)  # the look ends while the supervisor is locking
        out, err = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    assert out.strip() == "locked", err
