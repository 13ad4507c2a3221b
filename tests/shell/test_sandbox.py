"""The shell tool's sandbox with real processes, real bubblewrap and real
Landlock (``docs/design/boundary.md`` "Sandbox"; mind.shell.sandbox).

Each containment test runs under both backends (forced through
``MIND_SANDBOX_BACKEND`` semantics: :func:`select_backend`). mind runs as
root here, so nothing below relies on file modes: only the sandbox stops the
writes.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mind.effects.boundary import Boundary, SandboxMode
from mind.shell.sandbox.backend import Backend, select_backend
from mind.shell.sandbox.command import Sandbox
from mind.shell.tools import ToolOutcome, ToolRunner

pytestmark = pytest.mark.anyio

BACKENDS: list[Backend] = ["bwrap", "landlock"]
MARKER = "mind-sandbox-marker-7f3a"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class World:
    """A workspace with a git repository, a home, mind's state root and an
    outside directory, all real directories under ``tmp_path``."""

    def __init__(self, root: Path) -> None:
        root = Path(os.path.realpath(root))
        self.home = root / "home"
        self.ws = root / "ws"
        self.outside = root / "outside"
        self.state = root / "state"
        for d in (self.home, self.ws, self.outside, self.state):
            d.mkdir(mode=0o700)
        subprocess.run(["git", "init", "-q", str(self.ws)], check=True)
        (self.ws / "src.txt").write_text("hello\n")
        (self.ws / ".mind").mkdir()
        (self.state / "sessions").mkdir()

    def sandbox(
        self,
        backend: Backend,
        *,
        mode: SandboxMode = "workspace-write",
        roots: tuple[Path, ...] | None = None,
    ) -> Sandbox:
        chosen, why = select_backend({"MIND_SANDBOX_BACKEND": backend})
        assert chosen == backend, why
        boundary = Boundary(
            mode=mode,
            writable_roots=tuple(str(r) for r in (roots or (self.ws,))),
            home=str(self.home),
            state_roots=(str(self.state),),
        )
        return Sandbox(boundary=boundary, backend=chosen)

    def runner(self, sandbox: Sandbox, cwd: Path | None = None) -> ToolRunner:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home)}
        return ToolRunner(cwd or self.ws, env=env, sandbox=sandbox)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


async def _sh(runner: ToolRunner, command: str) -> ToolOutcome:
    return await runner.run("shell", {"command": command, "timeout_s": 20})


@pytest.mark.parametrize("backend", BACKENDS)
async def test_writes_inside_the_workspace_and_private_tmp_work(
    world: World, backend: Backend
) -> None:
    (world.ws / "sub").mkdir()
    runner = world.runner(world.sandbox(backend))
    result = await _sh(
        runner,
        "echo made > sub/new.txt && echo more >> src.txt && mkdir -p sub/a/b && "
        'echo t > "$TMPDIR/t" && cat "$TMPDIR/t"',
    )
    assert result.status == "ok", result.output
    assert (world.ws / "sub" / "new.txt").read_text() == "made\n"
    assert (world.ws / "src.txt").read_text() == "hello\nmore\n"
    assert result.output.startswith("t\n")
    # A new top-level entry of a root holding .git: bubblewrap overlays .git
    # read-only and allows it; Landlock cannot (see mind.shell.sandbox.plan).
    top = await _sh(runner, "echo x > top.txt")
    assert (top.status == "ok") == (backend == "bwrap"), top.output


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cannot_write_outside_the_workspace(world: World, backend: Backend) -> None:
    runner = world.runner(world.sandbox(backend))
    target = world.outside / "escaped"
    result = await _sh(runner, f"echo x > {shlex.quote(str(target))}")
    assert result.status == "error"
    assert "Read-only file system" in result.output or "Permission denied" in result.output
    assert not target.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cannot_write_git_config_nor_dot_mind(world: World, backend: Backend) -> None:
    runner = world.runner(world.sandbox(backend))
    before = (world.ws / ".git" / "config").read_text()
    result = await _sh(runner, "echo '[core] fsmonitor = evil' >> .git/config")
    assert result.status == "error"
    assert (world.ws / ".git" / "config").read_text() == before
    result = await _sh(runner, "echo x > .mind/planted")
    assert result.status == "error"
    assert not (world.ws / ".mind" / "planted").exists()
    # Hooks too: a new file anywhere beneath .git/.
    result = await _sh(runner, "echo x > .git/hooks/post-commit")
    assert result.status == "error"
    assert not (world.ws / ".git" / "hooks" / "post-commit").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_home_as_workspace_keeps_startup_files_and_state(
    world: World, backend: Backend
) -> None:
    # The workspace is $HOME; mind's state root lives inside it.
    state = world.home / ".mind"
    state.mkdir(mode=0o700)
    (world.home / ".bashrc").write_text("# mine\n")
    (world.home / "project").mkdir()
    boundary = Boundary(
        mode="workspace-write",
        writable_roots=(str(world.home),),
        home=str(world.home),
        state_roots=(str(state),),
    )
    sandbox = Sandbox(boundary=boundary, backend=backend)
    runner = world.runner(sandbox, cwd=world.home)
    for command in (
        "echo evil >> .bashrc",
        "echo evil > .profile",
        "echo evil > .mind/config.toml",
    ):
        result = await _sh(runner, command)
        assert result.status == "error", (command, result.output)
    assert (world.home / ".bashrc").read_text() == "# mine\n"
    assert not (world.home / ".profile").exists()
    assert not (state / "config.toml").exists()
    ok = await _sh(runner, "echo fine > project/file")
    assert ok.status == "ok", ok.output


@pytest.mark.parametrize("backend", BACKENDS)
async def test_read_only_mode_writes_nothing_but_tmp(world: World, backend: Backend) -> None:
    runner = world.runner(world.sandbox(backend, mode="read-only"))
    result = await _sh(runner, "echo x > new.txt")
    assert result.status == "error"
    assert not (world.ws / "new.txt").exists()
    result = await _sh(runner, 'cat src.txt && echo t > "$TMPDIR/t"')
    assert result.status == "ok", result.output


@pytest.fixture
def victim() -> Iterator[int]:
    """A process outside the sandbox whose environment holds a secret marker,
    standing in for mind (``/proc/PID/environ`` shows the environment a
    process started with, so it must be in the exec'd environment)."""
    env = {**os.environ, "VICTIM_API_KEY": MARKER}
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, env=env
    )
    try:
        yield process.pid
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=10)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_cannot_read_another_process_environment(
    world: World, backend: Backend, victim: int
) -> None:
    assert MARKER in Path(f"/proc/{victim}/environ").read_text(errors="replace")
    runner = world.runner(world.sandbox(backend))
    result = await _sh(
        runner,
        f"cat /proc/{victim}/environ; cat /proc/{os.getpid()}/environ; "
        f"grep -l {MARKER} /proc/*/environ; echo done",
    )
    assert MARKER not in result.output
    assert "done" in result.output


@pytest.mark.parametrize("backend", BACKENDS)
async def test_network_off_cannot_reach_a_host_listener(world: World, backend: Backend) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        probe = (
            f"{shlex.quote(sys.executable)} -c "
            f"\"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)\""
        )
        # Control: unsandboxed, the probe connects.
        plain = await world.runner(world.sandbox(backend)).run(
            "shell", {"command": probe}, sandboxed=False
        )
        assert plain.status == "ok", plain.output
        listener.accept()[0].close()
        result = await _sh(world.runner(world.sandbox(backend)), probe)
        assert result.status == "error"
        assert any(
            what in result.output
            for what in (
                "unreachable",
                "Permission denied",
                "Operation not permitted",
                "Connection refused",
            )
        ), result.output
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()


def _hostile_repo(world: World) -> Path:
    """``.git/config`` runs a program (fsmonitor, external diff) that writes a
    marker outside the workspace."""
    marker = world.outside / "pwned"
    hook = world.ws / "hook.sh"
    hook.write_text(f"#!/bin/sh\necho pwned >> {shlex.quote(str(marker))}\n")
    hook.chmod(0o755)
    subprocess.run(["git", "-C", str(world.ws), "add", "src.txt"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(world.ws),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ],
        check=True,
    )
    (world.ws / "src.txt").write_text("changed\n")
    with (world.ws / ".git" / "config").open("a") as config:
        config.write(f"[core]\n\tfsmonitor = {hook}\n[diff]\n\texternal = {hook}\n")
    return marker


@pytest.mark.parametrize("backend", BACKENDS)
async def test_git_config_programs_are_contained(world: World, backend: Backend) -> None:
    marker = _hostile_repo(world)
    runner = world.runner(world.sandbox(backend))
    for command in ("git status", "git diff"):
        await _sh(runner, command)
    assert not marker.exists()
    # Control: the same known-safe command outside the sandbox runs the program.
    await runner.run("shell", {"command": "git diff"}, sandboxed=False)
    assert marker.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_shell_profile_then_login_shell_is_contained(world: World, backend: Backend) -> None:
    marker = world.outside / "pwned"
    runner = world.runner(world.sandbox(backend, roots=(world.home,)), cwd=world.home)
    planted = await _sh(runner, f"echo 'echo pwned > {marker}' >> .profile")
    assert planted.status == "error"
    assert not (world.home / ".profile").exists()
    # Had a profile been planted anyway, what it runs stays in the sandbox.
    (world.home / ".profile").write_text(f"echo pwned > {marker}\n")
    login = await _sh(runner, "bash -lc ls")
    assert "Read-only file system" in login.output or "Permission denied" in login.output
    assert not marker.exists()


async def test_no_backend_refuses_naming_danger_full_access(world: World) -> None:
    chosen, why = select_backend({"MIND_SANDBOX_BACKEND": "none"})
    assert chosen == "none"
    sandbox = Sandbox(
        boundary=Boundary(mode="workspace-write", writable_roots=(str(world.ws),), home="/x"),
        backend=chosen,
        why_none=why,
    )
    result = await _sh(world.runner(sandbox), f"echo x > {world.ws / 'ran'}")
    assert result.status == "error"
    assert "--sandbox danger-full-access" in result.output
    assert not (world.ws / "ran").exists()


async def test_danger_full_access_runs_unconfined(world: World) -> None:
    runner = world.runner(world.sandbox("bwrap", mode="danger-full-access"))
    target = world.outside / "written"
    result = await _sh(runner, f"echo x > {target}")
    assert result.status == "ok", result.output
    assert target.exists()


def test_the_launcher_refuses_bad_options_without_running_anything(tmp_path: Path) -> None:
    from mind.shell.sandbox import launch

    target = tmp_path / "ran"
    assert launch.main(["--network", "maybe", "--", "touch", str(target)]) == launch.REFUSED_EXIT
    assert launch.main(["--write", str(tmp_path), "--", "touch", str(target)]) == (
        launch.REFUSED_EXIT
    )
    assert not target.exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_network_off_sends_no_udp_to_the_host(world: World, backend: Backend) -> None:
    """UDP (DNS and the like) too: bubblewrap's empty network namespace, and
    under Landlock (which covers TCP only) the launcher's seccomp filter."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as host:
        host.bind(("127.0.0.1", 0))
        host.setblocking(False)
        port = host.getsockname()[1]
        send = (
            f'{shlex.quote(sys.executable)} -c "import socket; '
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            f"s.sendto(b'leak', ('127.0.0.1', {port}))\""
        )
        runner = world.runner(world.sandbox(backend))
        plain = await runner.run("shell", {"command": send}, sandboxed=False)
        assert plain.status == "ok", plain.output
        assert host.recv(16) == b"leak"  # loopback delivery is complete when sendto returns
        result = await _sh(runner, send)
        with pytest.raises(BlockingIOError):
            host.recv(16)
        if backend == "landlock":
            assert "Operation not permitted" in result.output


def _pids_running(needle: str) -> list[int]:
    """Live (non-zombie) processes whose argv contains ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if needle.encode() in argv and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_timeout_kills_every_sandboxed_process(world: World, backend: Backend) -> None:
    import anyio

    needle = f"31.{os.getpid()}"
    runner = world.runner(world.sandbox(backend))
    result = await runner.run(
        "shell", {"command": f"sleep {needle} & sleep {needle}; wait", "timeout_s": 1}
    )
    assert "timed out" in result.output
    with anyio.move_on_after(10):
        while _pids_running(needle):  # noqa: ASYNC110 - no event tells a pid is gone
            await anyio.sleep(0.02)
    assert _pids_running(needle) == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_workspace_inside_the_state_root_stays_usable(
    world: World, backend: Backend
) -> None:
    ws = world.state / "project"
    ws.mkdir()
    (world.state / "journal.jsonl").write_text("{}\n")
    runner = world.runner(world.sandbox(backend, roots=(ws,)), cwd=ws)
    result = await _sh(runner, "echo x > made && cat made")
    assert result.status == "ok", result.output
    denied = await _sh(runner, f"echo x >> {world.state / 'journal.jsonl'}")
    assert denied.status == "error"
    assert (world.state / "journal.jsonl").read_text() == "{}\n"
