"""What every supervised command pays at its start and end
(docs/design/processes.md §9): the supervisor starts from its cached bytecode
without costly imports, and its records reach the disk in the order the
guarantees need (``supervisor.json`` durable before the command starts,
``exit.json`` and both output files durable before the supervisor exits and
drops its lock, ``exit.json`` trusted only then) — checked on the real
supervisor's system calls (strace)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mind.shell import private_files, spare_supervisors, supervision

DEADLINE_S = 10.0
"""Generous bound for one supervised ``true`` (never a timing assertion)."""


def _argv(tmp_path: Path, *, journaled: bool = False) -> list[str]:
    return supervision.supervisor_argv(
        ["true"],
        cwd=tmp_path,
        timeout_s=5.0,
        max_output_bytes=100,
        kill_grace_s=1.0,
        journaled=journaled,
    )


def _effect_dir(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    private_files.private_dir(directory)
    return directory


def test_the_supervisor_starts_from_cached_bytecode_without_enum(tmp_path: Path) -> None:
    python, *rest = _argv(tmp_path)
    runs = []
    for name in ("ef_first", "ef_second"):  # the first may write the cache
        directory = _effect_dir(tmp_path, name)
        runs.append(
            subprocess.run(
                [python, "-v", *rest],
                cwd=directory,
                capture_output=True,
                text=True,
                timeout=DEADLINE_S,
                check=False,
            )
        )
        assert runs[-1].returncode == 0, runs[-1].stderr
        assert (directory / "exit.json").exists()
    verbose = runs[-1].stderr
    # Compiling supervisor.py at every start costs more than the rest of its imports.
    assert re.search(r"code object from '.*supervisor\.cpython-\d+\.pyc'", verbose), verbose
    # `signal` imports `enum`, a third of the interpreter's own start: `_signal` does not.
    imported = set(re.findall(r"^import '([\w.]+)'", verbose, re.MULTILINE))
    assert "supervisor" in imported
    assert not imported & {"enum", "signal", "json", "re", "subprocess"}, imported


def test_the_forked_child_imports_nothing_before_its_exec(tmp_path: Path) -> None:
    """Between fork and exec the child runs Python: an import there (``os.execvp``
    imports ``warnings`` to read ``PATH``) is ms every command waits for. Under
    ``python -v`` the child's import messages would land in the command's
    stderr (it is dup'ed there before the exec)."""
    python, *rest = _argv(tmp_path)
    rest[rest.index("--") + 1 :] = ["sh", "-c", "exit 0"]  # found through PATH
    directory = _effect_dir(tmp_path, "ef_child")
    run = subprocess.run(
        [python, "-v", *rest],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads((directory / "exit.json").read_text())["exit_code"] == 0
    assert (directory / "stderr").read_text() == ""


_CALL = re.compile(r"^(?P<pid>\d+) +(?P<call>\w+)\((?P<args>.*)")


def _calls(trace: str) -> list[tuple[int, str, str]]:
    out = []
    for line in trace.splitlines():
        found = _CALL.match(line)
        if found and "resumed>" not in line:
            out.append((int(found["pid"]), found["call"], found["args"]))
    return out


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("journaled", [False, True])
def test_records_reach_the_disk_in_the_order_the_guarantees_need(
    tmp_path: Path, journaled: bool
) -> None:
    """Started cold (mind journals it after the start): ``supervisor.json``
    durable before the command runs. Handed over once journaled (a spare,
    §9.4): it is not fsynced at all — the journal names the supervisor."""
    directory = _effect_dir(tmp_path, "ef_traced")
    trace_file = tmp_path / "trace"
    run = subprocess.run(
        [
            "strace",
            "-f",
            "-y",
            "-qq",
            "-o",
            str(trace_file),
            "-e",
            "trace=execve,fsync,fdatasync,rename,renameat,renameat2,exit_group,rt_sigaction",
            *_argv(tmp_path, journaled=journaled),
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=DEADLINE_S,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    calls = _calls(trace_file.read_text())
    supervisor = calls[0][0]
    where = str(directory.resolve())

    def index(pid_is_supervisor: bool, call: str, needle: str, after: int = -1) -> int:
        for i, (pid, name, args) in enumerate(calls):
            mine = pid == supervisor
            if i > after and mine == pid_is_supervisor and name.startswith(call) and needle in args:
                return i
        raise AssertionError(f"no {call}({needle}) after call {after}: {calls}")

    command = index(False, "execve", '"true"')
    named = index(True, "rename", f'<{where}>, "supervisor.json"')
    if journaled:
        assert named < command
        assert not [c for c in calls[:command] if c[1].startswith("fsync")], calls[:command]
    else:
        # supervisor.json: whole when named, its data and its name durable before the command.
        assert named < index(True, "fsync", f"<{where}/supervisor.json>", after=named) < command
        assert named < index(True, "fsync", f"<{where}>", after=named) < command
    # exit.json: named once whole; it, both output files and its name are durable
    # before the supervisor ends (and drops the lock: mind learns of the end then).
    exit_named = index(True, "rename", f'<{where}>, "exit.json"', after=command)
    ended = index(True, "exit_group", "0", after=exit_named)
    for path in ("stdout", "stderr", "exit.json", ""):
        name = f"<{where}/{path}>" if path else f"<{where}>"
        assert exit_named < index(True, "fsync", name, after=exit_named) < ended, path
    # Then it ends at once: no interpreter finalization (which restores every
    # signal handler) between the durable record and the end mind waits for.
    last_fsync = index(True, "fsync", f"<{where}>", after=exit_named)
    between = [c for c in calls[last_fsync + 1 : ended] if c[0] == supervisor]
    assert not [c for c in between if c[1].startswith("rt_sigaction")], between


def test_an_exit_record_counts_only_once_its_supervisor_is_gone(tmp_path: Path) -> None:
    """``exit.json`` is named before its last fsyncs (one journal commit for
    the end, §9): while the lock is held it may not be durable yet, so the
    directory reads Running, never Finished, until the supervisor ends."""
    directory = _effect_dir(tmp_path, "ef_ending")
    run = subprocess.run(
        _argv(tmp_path), cwd=directory, capture_output=True, timeout=DEADLINE_S, check=False
    )
    assert run.returncode == 0, run.stderr
    assert (directory / "exit.json").exists()
    record = json.loads((directory / "supervisor.json").read_text())
    held = private_files.lock_dir(directory)  # as a supervisor between rename and fsync
    assert held is not None
    try:
        assert supervision.inspect(directory) == supervision.Running(record["pid"])
    finally:
        os.close(held)
    state = supervision.inspect(directory)
    assert isinstance(state, supervision.Finished) and state.result.ok, state


def test_a_stop_asked_before_the_start_is_recorded_and_nothing_runs(tmp_path: Path) -> None:
    """§2: a stop that comes while the supervisor starts is honoured — the
    command is never executed (its forked child gets no go) and exit.json
    says so (``killed``)."""
    directory = _effect_dir(tmp_path, "ef_stopped")
    (directory / "supervisor.log").touch(mode=0o600)
    ran = tmp_path / "ran"
    args = supervision.supervisor_argv(
        ["touch", str(ran)], cwd=tmp_path, timeout_s=5.0, max_output_bytes=100
    )[5:]
    spare = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", spare_supervisors._LAUNCH],
        stdin=subprocess.PIPE,
        env={},
        start_new_session=True,
    )
    # Ready once blocked reading its job (syscall 0, read, on fd 0): its
    # handlers are in place by then.
    deadline = time.monotonic() + DEADLINE_S
    while not _blocked_reading_stdin(spare.pid) and time.monotonic() < deadline:
        time.sleep(0.005)  # no event tells when another process reached a syscall
    assert _blocked_reading_stdin(spare.pid)
    os.kill(spare.pid, signal.SIGTERM)
    env = {"PATH": os.environ["PATH"]}
    spare.communicate(spare_supervisors._job(directory, env, args), timeout=DEADLINE_S)
    assert spare.returncode == 0
    assert not ran.exists()
    state = supervision.inspect(directory)
    assert state == supervision.Finished(
        supervision.ProcessResult("cannot start 'touch': stopped before the command started", False)
    ), state
    assert json.loads((directory / "exit.json").read_text())["killed"] is True
    assert (directory / "supervisor.json").exists()


def _blocked_reading_stdin(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().startswith("0 0x0 ")
    except OSError:
        return False
