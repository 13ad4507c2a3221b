"""Escapes a security tester found in the shell sandbox, each shut with real
processes under both backends (``docs/design/boundary.md`` "Sandbox"):
nested ``.git`` at any depth and a bounded search that fails closed (B2),
mind's state unreadable under Landlock (B3), no host unix socket reachable
with the network off (B5), no process outliving its tool call (B6)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mind.effects.boundary import Boundary, SandboxMode
from mind.shell.sandbox import launch
from mind.shell.sandbox.backend import Backend, select_backend
from mind.shell.sandbox.command import Sandbox
from mind.shell.sandbox.plan import nested_protected, plan_writes
from mind.shell.tools import ToolOutcome, ToolRunner

pytestmark = pytest.mark.anyio

BACKENDS: list[Backend] = ["bwrap", "landlock"]
FSMONITOR = '[core]\n\tfsmonitor = "touch /tmp/DEPTH #"\n'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class World:
    """A git workspace, a home, mind's state root and an outside directory
    (real directories under ``tmp_path``)."""

    def __init__(self, root: Path) -> None:
        root = Path(os.path.realpath(root))
        self.home = root / "home"
        self.ws = root / "ws"
        self.outside = root / "outside"
        self.state = root / "state"
        for d in (self.home, self.ws, self.outside, self.state):
            d.mkdir(mode=0o700)
        subprocess.run(["git", "init", "-q", str(self.ws)], check=True)
        (self.state / "sessions").mkdir()

    def sandbox(
        self,
        backend: Backend,
        *,
        mode: SandboxMode = "workspace-write",
        network: bool = False,
        scan_max_dirs: int | None = None,
    ) -> Sandbox:
        chosen, why = select_backend({"MIND_SANDBOX_BACKEND": backend})
        assert chosen == backend, why
        boundary = Boundary(
            mode=mode,
            writable_roots=(str(self.ws),),
            home=str(self.home),
            state_roots=(str(self.state),),
            network=network,
        )
        if scan_max_dirs is None:
            return Sandbox(boundary=boundary, backend=chosen)
        return Sandbox(boundary=boundary, backend=chosen, scan_max_dirs=scan_max_dirs)

    def runner(self, sandbox: Sandbox) -> ToolRunner:
        env = {"PATH": os.environ["PATH"], "HOME": str(self.home)}
        return ToolRunner(self.ws, env=env, sandbox=sandbox)


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


async def _sh(runner: ToolRunner, command: str) -> ToolOutcome:
    return await runner.run("shell", {"command": command, "timeout_s": 20})


def _wait_until(condition: object, timeout_s: float = 10.0) -> bool:
    """Poll ``condition()`` until true or the deadline (no fixed sleep)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


# B2 — nested .git / .mind at any depth; a search out of budget fails closed.


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_deep_nested_git_config_is_read_only(world: World, backend: Backend) -> None:
    deep = world.ws / "x" / "y" / "z" / "w"
    (deep / ".git").mkdir(parents=True)
    config = deep / ".git" / "config"
    config.write_text("[core]\n")
    before = config.read_text()
    (deep / "file").write_text("")
    result = await _sh(
        world.runner(world.sandbox(backend)),
        f"printf {shlex.quote(FSMONITOR)} >> x/y/z/w/.git/config; echo made >> x/y/z/w/file",
    )
    assert config.read_text() == before, result.output
    assert (deep / "file").read_text() == "made\n"  # the rest of the tree stays writable


def _many_repositories(world: World, count: int = 2100) -> None:
    """``count`` repositories side by side: more than the old 2000-directory
    search opened."""
    for i in range(count):
        (world.ws / "many" / f"d{i}" / ".git").mkdir(parents=True)
        (world.ws / "many" / f"d{i}" / ".git" / "config").write_text("")


def test_the_bubblewrap_plan_overlays_every_one_of_many_repositories(world: World) -> None:
    # Planned, not run: 2100 read-only mounts take bubblewrap ~10 s (see boundary.md).
    _many_repositories(world)
    plan = plan_writes(world.sandbox("bwrap").boundary, overlay=True)
    overlaid = {p for p in plan.read_only if p.endswith("/.git")}
    assert len(overlaid) == 2101  # and the workspace's own


async def test_many_directories_do_not_hide_a_nested_git(world: World) -> None:
    _many_repositories(world)
    result = await _sh(
        world.runner(world.sandbox("landlock")),
        f"for c in many/d*/.git/config; do printf {shlex.quote(FSMONITOR)} >> $c; done 2>/dev/null"
        "; echo end",
    )
    assert result.output.startswith("end"), result.output
    written = [
        i for i in range(2100) if (world.ws / "many" / f"d{i}" / ".git" / "config").stat().st_size
    ]
    assert written == []


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_root_too_big_to_search_is_refused_naming_why(
    world: World, backend: Backend
) -> None:
    for i in range(60):
        (world.ws / "many" / f"d{i}").mkdir(parents=True)
    marker = world.ws / "ran"
    result = await _sh(world.runner(world.sandbox(backend, scan_max_dirs=50)), "touch ran")
    assert result.status == "error"
    assert "more than 50 directories" in result.output
    assert "nested .git" in result.output
    assert not marker.exists()
    # read-only needs no search: it still runs.
    ro = await _sh(world.runner(world.sandbox(backend, mode="read-only", scan_max_dirs=50)), "ls")
    assert ro.status == "ok", ro.output


def test_the_search_finds_every_depth_and_skips_no_name(tmp_path: Path) -> None:
    for sub in ("a/b/c/d/e/.git", "node_modules/p/.git", ".venv/x/.mind", "k/.git/inner/.git"):
        (tmp_path / sub).mkdir(parents=True)
    found = sorted(os.path.relpath(p, tmp_path) for p in nested_protected(str(tmp_path)))
    assert found == sorted(["a/b/c/d/e/.git", "k/.git", ".venv/x/.mind", "node_modules/p/.git"])


# B3 — mind's state is unreadable from a sandboxed command.


@pytest.mark.parametrize("backend", BACKENDS)
async def test_mind_state_is_unreadable(world: World, backend: Backend) -> None:
    journal = world.state / "sessions" / "journal.jsonl"
    journal.write_text("secret-journal-line\n")
    (world.state / "sessions" / "listed-entry-x").mkdir()
    (world.outside / "beside.txt").write_text("readable\n")
    runner = world.runner(world.sandbox(backend))
    result = await _sh(runner, f"cat {shlex.quote(str(journal))}; ls {world.state}/sessions")
    assert "secret-journal-line" not in result.output
    assert "listed-entry-x" not in result.output
    beside = await _sh(runner, f"cat {shlex.quote(str(world.outside / 'beside.txt'))}")
    assert beside.output.startswith("readable\n"), beside.output  # only the state root is hidden


# B5 — with the network off no unix socket outside the sandbox is reachable.

_PROBE = """
import socket, sys
for target in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(target.replace("@", "\\0", 1) if target.startswith("@") else target)
        print("REACHED", target)
    except OSError as exc:
        print("refused", target, exc.errno)
a, b = socket.socketpair()
a.sendall(b"pair-ok")
print(b.recv(16).decode())
"""


@pytest.fixture
def listeners(world: World) -> Iterator[list[str]]:
    """Host listeners: a pathname socket outside, one in the workspace, an
    abstract one (``@name``)."""
    paths = [str(world.outside / "host.sock"), str(world.ws / "ws.sock")]
    abstract = f"@mind-test-{os.getpid()}-{id(world)}"
    sockets = []
    for address in [*paths, "\0" + abstract[1:]]:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(address)
        s.listen(4)
        sockets.append(s)
    try:
        yield [*paths, abstract]
    finally:
        for s in sockets:
            s.close()


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
@pytest.mark.parametrize("backend", BACKENDS)
async def test_network_off_reaches_no_unix_socket_of_the_host(
    world: World, backend: Backend, mode: SandboxMode, listeners: list[str]
) -> None:
    runner = world.runner(world.sandbox(backend, mode=mode))
    argv = " ".join(shlex.quote(a) for a in [sys.executable, "-I", "-c", _PROBE, *listeners])
    result = await _sh(runner, argv)
    assert "REACHED" not in result.output, result.output
    assert result.output.count("refused") == len(listeners), result.output
    assert "pair-ok" in result.output  # socketpair: in-sandbox IPC keeps working


@pytest.mark.parametrize("backend", BACKENDS)
async def test_network_on_reaches_a_pathname_socket(
    world: World, backend: Backend, listeners: list[str]
) -> None:
    runner = world.runner(world.sandbox(backend, network=True))
    argv = " ".join(shlex.quote(a) for a in [sys.executable, "-I", "-c", _PROBE, listeners[0]])
    result = await _sh(runner, argv)
    assert f"REACHED {listeners[0]}" in result.output, result.output


# B6 — every process a call started ends with the call.


def _running(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdecimal():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmdline and state not in ("Z", "X"):
            return True
    return False


@pytest.mark.parametrize("backend", BACKENDS)
async def test_background_processes_die_with_the_call(world: World, backend: Backend) -> None:
    marker = f"mind-bg-{backend}-{os.getpid()}"
    out = world.ws / "out"
    out.mkdir()
    command = "cd out; " + (
        f"setsid sh -c 'touch S1; sleep 2; echo late > LATE1' {marker} >/dev/null 2>&1 & "
        f"( exec sh -c 'touch S2; sleep 2; echo late > LATE2' {marker} ) >/dev/null 2>&1 & "
        "while [ ! -e S1 ] || [ ! -e S2 ]; do :; done; echo started"
    )
    result = await _sh(world.runner(world.sandbox(backend)), command)
    assert result.output.startswith("started"), result.output
    # Past their sleep either way: gone at once when killed, after writing if not.
    assert _wait_until(lambda: not _running(marker)), "a background process is still running"
    assert not (out / "LATE1").exists()
    assert not (out / "LATE2").exists()


def test_the_launcher_dies_with_mind_and_takes_its_tree(world: World) -> None:
    """mind killed outright (SIGKILL): the launcher's death signal kills it
    and it kills what the command left behind."""
    marker = f"mind-orphan-{os.getpid()}"
    late = world.ws / "LATE"
    started = world.ws / "S"
    inner = f"setsid sh -c 'touch {started}; sleep 2; echo late > {late}' {marker} & wait"
    launcher = [
        sys.executable,
        "-I",
        "-S",
        launch.__file__,
        *launch.launcher_args([str(world.ws)], [], network=False),
        "--",
        "/bin/sh",
        "-c",
        inner,
    ]
    # A stand-in for mind: starts the launcher, then is SIGKILLed.
    parent = subprocess.Popen(
        [sys.executable, "-c", "import subprocess,sys; subprocess.run(sys.argv[1:])", *launcher],
        start_new_session=True,
    )
    try:
        assert _wait_until(started.exists), "the command did not start"
        parent.kill()
        parent.wait()
        assert _wait_until(lambda: not _running(marker))
        assert not late.exists()
    finally:
        parent.kill()
        parent.wait()


# Root's capabilities (found while fixing B5): as root, neither backend
# dropped them, so a command could load a kernel module, reboot the host or
# set its hostname.


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_sandboxed_command_holds_no_capability(world: World, backend: Backend) -> None:
    runner = world.runner(world.sandbox(backend))
    result = await runner.run("shell", {"command": ["grep", "^Cap", "/proc/self/status"]})
    assert result.status == "ok", result.output
    caps = dict(line.split(":\t") for line in result.output.splitlines() if ":\t" in line)
    assert {caps[k] for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")} == {"0000000000000000"}
    before = socket.gethostname()
    renamed = await _sh(runner, "hostname mind-sandbox-renamed")
    assert renamed.status == "error"
    assert socket.gethostname() == before


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_timeout_kills_a_setsid_process_too(world: World, backend: Backend) -> None:
    marker = f"mind-timeout-{backend}-{os.getpid()}"
    out = world.ws / "out"
    out.mkdir()
    command = (
        f"cd out; setsid sh -c 'touch S; sleep 2; echo late > LATE' {marker} >/dev/null 2>&1 & "
        "while [ ! -e S ]; do :; done; exec sleep 30"
    )
    result = await world.runner(world.sandbox(backend)).run(
        "shell", {"command": command, "timeout_s": 1}
    )
    assert "timed out" in result.output
    assert _wait_until(lambda: not _running(marker)), "the setsid process is still running"
    assert not (out / "LATE").exists()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_state_root_in_the_home_workspace_is_unreadable(
    tmp_path: Path, backend: Backend
) -> None:
    home = Path(os.path.realpath(tmp_path)) / "home"
    state = home / ".mind"
    (state / "sessions").mkdir(parents=True)
    (state / "sessions" / "index.db").write_text("secret-index-row\n")
    (home / "notes.txt").write_text("mine\n")
    chosen, why = select_backend({"MIND_SANDBOX_BACKEND": backend})
    assert chosen == backend, why
    boundary = Boundary(
        mode="workspace-write",
        writable_roots=(str(home),),
        home=str(home),
        state_roots=(str(state),),
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    runner = ToolRunner(home, env=env, sandbox=Sandbox(boundary=boundary, backend=chosen))
    result = await _sh(runner, "cat .mind/sessions/index.db; cat notes.txt; echo more >> notes.txt")
    assert "secret-index-row" not in result.output
    assert "mine\n" in result.output
    assert (home / "notes.txt").read_text() == "mine\nmore\n"


def test_the_launcher_finds_children_without_the_proc_children_file() -> None:
    # Its fallback for kernels without CONFIG_PROC_CHILDREN must see the same.
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert child.pid in launch._children()
        assert child.pid in launch._children_by_scan()
        assert os.getpid() not in launch._children_by_scan()
    finally:
        child.kill()
        child.wait()


def test_the_command_dies_with_a_killed_launcher(world: World) -> None:
    marker = f"mind-main-{os.getpid()}"
    started = world.ws / "S"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            launch.__file__,
            *launch.launcher_args([str(world.ws)], [], network=False),
            "--",
            "/bin/sh",
            "-c",
            f"touch {started}; exec {sys.executable} -c 'import time; time.sleep(30)' {marker}",
        ]
    )
    try:
        assert _wait_until(started.exists), "the command did not start"
        launcher.kill()  # SIGKILL: no clean-up of its own
        launcher.wait()
        assert _wait_until(lambda: not _running(marker)), "the command outlived its launcher"
    finally:
        launcher.kill()
        launcher.wait()
