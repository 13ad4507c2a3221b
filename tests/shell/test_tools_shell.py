"""The ``shell`` tool with real processes (docs/design/boundary.md §2; mind.shell.tools).

Commands may sleep inside the subject; the tests never sleep to assert
timing. Where a test must wait for the system (a pid file to appear, a
killed process to be reaped), it polls a condition under a generous deadline.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from mind.shell.tools import ToolOutcome, ToolRunner, _process
from mind.shell.tools._text import StreamText, omitted_note

pytestmark = pytest.mark.anyio

DEADLINE_S = 10.0
"""Generous bound for waiting on the system (never a timing assertion)."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (zombies await init's reaping)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


async def _wait_dead(pids: list[int]) -> list[int]:
    """Poll until every pid is gone; return the ones still alive at the deadline."""
    with anyio.move_on_after(DEADLINE_S):
        while any(_alive(pid) for pid in pids):  # noqa: ASYNC110 - no event for a reaped pid
            await anyio.sleep(0.01)
    return [pid for pid in pids if _alive(pid)]


async def _read_pids(path: Path, count: int) -> list[int]:
    with anyio.fail_after(DEADLINE_S):
        while True:
            if path.exists():
                lines = path.read_text().split()
                if len(lines) >= count:
                    return [int(p) for p in lines[:count]]
            await anyio.sleep(0.01)


def _pids_in(output: str, count: int) -> list[int]:
    return [int(line) for line in output.splitlines()[:count]]


async def _shell(runner: ToolRunner, command: str | list[str], **extra: object) -> ToolOutcome:
    return await runner.run("shell", {"command": command, **extra})


# ---- result shape ------------------------------------------------------------


async def test_string_form_runs_through_sh_with_stdout_stderr_and_exit_code(
    tmp_path: Path,
) -> None:
    runner = ToolRunner(tmp_path)
    outcome = await _shell(runner, "echo $((1 + 2)); echo oops >&2; exit 3")
    assert outcome == ToolOutcome(status="error", output="3\n[stderr]\noops\nexit code: 3")


async def test_argv_form_runs_without_a_shell(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path)
    outcome = await _shell(runner, ["printf", "%s|", "a b", "$HOME", ";", "*"])
    assert outcome == ToolOutcome(status="ok", output="a b|$HOME|;|*|\nexit code: 0")


async def test_zero_exit_without_output_is_ok_with_only_the_exit_code(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), "true")
    assert outcome == ToolOutcome(status="ok", output="exit code: 0")


async def test_command_runs_in_the_session_cwd_with_the_given_env(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path, env={"PATH": os.environ["PATH"], "MIND_TEST_VAR": "v1"})
    outcome = await _shell(runner, "pwd; echo $MIND_TEST_VAR; echo ${HOME:-unset}")
    assert outcome == ToolOutcome(status="ok", output=f"{tmp_path}\nv1\nunset\nexit code: 0")


async def test_stdin_is_empty_so_readers_do_not_block(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), ["cat"], timeout_s=30)
    assert outcome == ToolOutcome(status="ok", output="exit code: 0")


async def test_missing_program_is_an_error_outcome(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), ["mind-no-such-program-xyz", "a"])
    assert outcome == ToolOutcome(
        status="error", output="cannot start: command not found: mind-no-such-program-xyz"
    )


async def test_missing_cwd_is_an_error_outcome(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path / "gone"), "true")
    assert outcome == ToolOutcome(
        status="error", output=f"cannot start: working directory {tmp_path / 'gone'} does not exist"
    )


async def test_death_by_signal_is_reported(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), "echo before; kill -9 $$")
    assert outcome == ToolOutcome(status="error", output="before\nkilled by signal 9 (SIGKILL)")


# ---- timeouts and cancellation kill the whole group ---------------------------


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path)
    outcome = await _shell(runner, "echo $$; sleep 100 & echo $!; sleep 100", timeout_s=0.5)
    pids = _pids_in(outcome.output, 2)
    assert outcome.status == "error"
    assert outcome.output.endswith(
        "timed out after 0.5 s; the command and every process it started were killed"
    )
    assert await _wait_dead(pids) == []


async def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_process, "KILL_GRACE_S", 0.3)
    runner = ToolRunner(tmp_path)
    # Ignored signals stay ignored across fork/exec: both processes shrug off SIGTERM.
    command = "trap '' TERM; echo $$; sleep 100 & echo $!; sleep 100"
    outcome = await _shell(runner, command, timeout_s=0.5)
    pids = _pids_in(outcome.output, 2)
    assert outcome.status == "error"
    assert "timed out after 0.5 s" in outcome.output
    assert await _wait_dead(pids) == []


async def test_cancellation_kills_the_group_and_reraises(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path)
    pid_file = tmp_path / "pids"
    seen: list[str] = []

    async def call() -> None:
        try:
            await _shell(runner, f"echo $$ > {pid_file}; sleep 100 & echo $! >> {pid_file}; wait")
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        seen.append("returned")

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as group:
            group.start_soon(call)
            pids = await _read_pids(pid_file, 2)
            assert all(_alive(pid) for pid in pids)
            scope.cancel()
    assert scope.cancelled_caught
    assert seen == ["cancelled"]
    assert await _wait_dead(pids) == []


async def test_background_process_left_running_is_killed_when_the_command_exits(
    tmp_path: Path,
) -> None:
    """docs/design/processes.md §4: nothing a command started outlives it,
    and the model is told what was killed."""
    outcome = await _shell(ToolRunner(tmp_path), "sleep 30 & echo $!", timeout_s=20)
    (pid,) = _pids_in(outcome.output, 1)
    assert outcome == ToolOutcome(
        status="ok",
        output=(
            f"{pid}\n[1 background process still running when the command exited was "
            "killed]\nexit code: 0"
        ),
    )
    assert await _wait_dead([pid]) == []


# ---- output cap ------------------------------------------------------------------


async def test_output_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path, max_output_bytes=1000)
    outcome = await _shell(runner, "seq 1 100000")
    full = "".join(f"{n}\n" for n in range(1, 100_001))
    head, tail = full[:500], full[-500:]
    note = omitted_note(len(full) - 1000)
    separator = "" if head.endswith("\n") else "\n"
    assert outcome == ToolOutcome(
        status="ok",
        output=f"{head}{separator}{note}\n{tail}exit code: 0",
        output_bytes=len(full),  # what the command wrote: the cut is a fact
    )


async def test_output_cap_is_shared_between_stdout_and_stderr(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path, max_output_bytes=400)
    outcome = await _shell(runner, "seq 1 5000; seq 1 5000 >&2; echo short-end")
    out, _, err = outcome.output.partition("[stderr]\n")
    assert out.startswith("1\n2\n3\n")
    assert out.endswith("4999\n5000\nshort-end\n")
    assert err.startswith("1\n2\n3\n")
    assert err.endswith("4999\n5000\nexit code: 0")
    notes = [line for line in outcome.output.splitlines() if line.startswith("[... ")]
    assert len(notes) == 2
    kept = outcome.output.encode()
    assert len(kept) < 400 + 200  # budget plus two notes and the markers


async def test_small_stream_keeps_everything_when_the_other_is_cut(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path, max_output_bytes=300)
    outcome = await _shell(runner, "echo only-error >&2; seq 1 10000")
    assert outcome.output.endswith("[stderr]\nonly-error\nexit code: 0")


async def test_cap_never_splits_a_character(tmp_path: Path) -> None:
    runner = ToolRunner(tmp_path, max_output_bytes=101)
    outcome = await _shell(runner, ["python3", "-c", "print('é' * 1000, end='')"])
    assert "\ufffd" not in outcome.output
    head, note, tail = outcome.output.split("\n")[:3]
    assert set(head) == {"é"} and set(tail) == {"é"}
    assert len(head.encode()) + len(tail.encode()) <= 101
    assert note == omitted_note(2000 - len(head.encode()) - len(tail.encode()))


# ---- decoding --------------------------------------------------------------------


async def test_character_split_across_reads_is_decoded_whole(tmp_path: Path) -> None:
    outcome = await _shell(
        ToolRunner(tmp_path), r"printf '\342\202'; sleep 0.2; printf '\254\n' >&1"
    )
    assert outcome == ToolOutcome(status="ok", output="€\nexit code: 0")


async def test_invalid_utf8_bytes_become_replacement_characters(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), r"printf 'a\377b\n'; printf 'x\342\202'")
    assert outcome == ToolOutcome(status="ok", output="a\ufffdb\nx\ufffd\nexit code: 0")


async def test_nul_bytes_become_replacement_characters(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), r"printf 'a\000b\n'")
    assert outcome == ToolOutcome(status="ok", output="a\ufffdb\nexit code: 0")


async def test_unicode_line_separator_is_kept_verbatim(tmp_path: Path) -> None:
    outcome = await _shell(ToolRunner(tmp_path), r"printf 'a\342\200\250b\n'")
    assert outcome == ToolOutcome(status="ok", output="a\u2028b\nexit code: 0")


def test_stream_text_decodes_incrementally_byte_by_byte() -> None:
    text = "héllo € 𝄞 \u2028 end"
    capture = StreamText(1000)
    for byte in text.encode():
        capture.feed(bytes([byte]))
    capture.finish()
    assert capture.render(1000) == text
    assert capture.total_bytes == len(text.encode())
