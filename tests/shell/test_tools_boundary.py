"""The file tools resolve paths beneath the workspace with the kernel (docs/design/boundary.md §1).

Real files, symlinks, threads and ``/proc``; every test runs twice: with
``openat2(2)`` and with the component walker that replaces it on kernels
without it (``docs/design/boundary.md``, File tools).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mind.effects.boundary import Boundary, SandboxMode
from mind.effects.policy import approval_reason
from mind.shell.tools import ToolOutcome, ToolRunner

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["openat2", "walker"])
def resolver(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which resolution the file tools use; the walker is forced by its switch."""
    if request.param == "openat2":
        yield "openat2"
        return
    from mind.shell.tools import _beneath

    _beneath.use_openat2(False)
    try:
        yield "walker"
    finally:
        _beneath.use_openat2(True)


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resolver: str) -> tuple[Path, Path]:
    """``(workspace, outside)``: sibling directories; HOME and mind's state elsewhere."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "mind-home"))
    monkeypatch.setenv("MIND_STATE_HOME", str(tmp_path / "mind-state"))
    return ws, outside


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _files_in(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def _asks(runner: ToolRunner, policy: str, name: str, args: dict[str, object]) -> str | None:
    return approval_reason(
        policy,  # type: ignore[arg-type]
        name,
        args,
        cwd=str(runner.cwd),
        crossing=runner.boundary_reason,
    )


async def test_a_symlinked_dir_then_dotdot_does_not_write_outside(
    dirs: tuple[Path, Path],
) -> None:
    """``l -> /outside/sub``; ``l/../x`` is ``/outside/x`` for the kernel, though
    it looks like ``ws/x`` to a string check (the issue's first escape)."""
    ws, outside = dirs
    (outside / "sub").mkdir()
    (ws / "l").symlink_to(outside / "sub")
    runner = ToolRunner(ws)
    args = {"path": "l/../x", "content": "pwned"}
    outcome = await runner.run("write_file", args)
    assert outcome == ToolOutcome(
        status="error",
        output="l/../x: resolves outside the workspace: outside the workspace's writable roots",
    )
    assert _files_in(outside) == ["sub"] and _files_in(ws) == ["l"]
    assert _asks(runner, "on-request", "write_file", args) == (
        "writes l/../x: outside the workspace's writable roots"
    )
    approved = await runner.run("write_file", args, consent=True)
    assert approved.status == "ok"
    assert (outside / "x").read_text() == "pwned"  # approved: written where it resolves


async def test_dotdot_above_the_root_is_a_tool_error_not_a_crash(
    dirs: tuple[Path, Path],
) -> None:
    ws, outside = dirs
    runner = ToolRunner(ws)
    (ws / "loop").symlink_to("loop")
    cases = {
        "a/../../outside/x": "resolves outside the workspace",
        "loop/x": "too many symbolic links",
        ("n" * 300) + "/x": "too long",
    }
    for path, phrase in cases.items():
        outcome = await runner.run("write_file", {"path": path, "content": "x"})
        assert outcome.status == "error" and phrase in outcome.output, outcome
        assert "internal error" not in outcome.output
    read = await runner.run("read_file", {"path": "loop"})
    assert read.status == "error" and "symbolic links" in read.output
    assert _files_in(outside) == []


async def test_a_directory_swapped_for_a_symlink_never_lets_a_write_out(
    dirs: tuple[Path, Path],
) -> None:
    """A second thread swaps ``ws/d`` between a real directory and a symlink to
    an outside directory during 300 writes: none lands outside, none crashes."""
    ws, outside = dirs
    (ws / "d").mkdir()
    (ws / "link").symlink_to(outside)
    stop = threading.Event()
    swaps = 0
    libc = ctypes.CDLL(None, use_errno=True)
    names = [os.fsencode(ws / "d"), os.fsencode(ws / "link")]

    def swapper() -> None:
        nonlocal swaps
        while not stop.is_set():
            # renameat2(RENAME_EXCHANGE): both names exist at every instant.
            if libc.renameat2(_AT_FDCWD, names[0], _AT_FDCWD, names[1], _RENAME_EXCHANGE):
                raise OSError(ctypes.get_errno(), "renameat2")
            swaps += 1

    thread = threading.Thread(target=swapper)
    thread.start()
    runner = ToolRunner(ws)
    outcomes: list[ToolOutcome] = []
    try:
        for n in range(300):
            outcomes.append(await runner.run("write_file", {"path": f"d/f{n}", "content": "x"}))
    finally:
        stop.set()
        thread.join(timeout=10)
    assert swaps > 0
    assert _files_in(outside) == []
    assert not [o for o in outcomes if "internal error" in o.output]
    assert all(o.status == "ok" or "d/f" in o.output for o in outcomes)


@pytest.mark.parametrize("path", [".git/config", ".mind/config.toml", ".bashrc", "sub/.git/HEAD"])
async def test_protected_paths_in_a_workspace_at_home_are_asked_or_refused(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    ws, _ = dirs
    monkeypatch.setenv("HOME", str(ws))  # the workspace is the home directory
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    runner = ToolRunner(ws)
    args = {"path": path, "content": "[core]\n\tfsmonitor = evil\n"}
    refused = await runner.run("write_file", args)
    assert refused.status == "error" and "protected" in refused.output, refused
    assert not (ws / path).exists() or (ws / path).read_text() == "[core]\n"
    reason = _asks(runner, "on-request", "write_file", args)
    assert reason is not None and "protected" in reason
    untrusted = _asks(runner, "untrusted", "write_file", args)
    assert untrusted is not None
    assert _asks(runner, "never", "write_file", args) is None  # never asks: the tool refuses
    approved = await runner.run("write_file", args, consent=True)
    assert approved.status == "ok", approved


async def test_minds_own_journal_is_refused_even_when_approved(
    dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = dirs
    state = ws / "state"
    journal = state / "sessions" / "s1" / "journal.jsonl"
    journal.parent.mkdir(parents=True)
    journal.write_text('{"seq":1}\n')
    monkeypatch.setenv("MIND_STATE_HOME", str(state))
    runner = ToolRunner(ws)
    path = "state/sessions/s1/journal.jsonl"
    patch = f"*** Begin Patch\n*** Delete File: {path}\n*** End Patch"
    for consent in (False, True):
        wrote = await runner.run("write_file", {"path": path, "content": "x"}, consent=consent)
        assert wrote.status == "error" and "mind's own state" in wrote.output, wrote
        deleted = await runner.run("apply_patch", {"patch": patch}, consent=consent)
        assert deleted.status == "error" and "mind's own state" in deleted.output, deleted
    read = await runner.run("read_file", {"path": path})
    assert read.status == "error" and "mind's own state" in read.output
    assert journal.read_text() == '{"seq":1}\n'


@pytest.mark.parametrize("policy", ["on-request", "untrusted"])
async def test_proc_is_outside_every_workspace(dirs: tuple[Path, Path], policy: str) -> None:
    """``/proc/self/environ`` holds mind's API keys: no read, direct or via a link."""
    ws, _ = dirs
    (ws / "env").symlink_to("/proc/self/environ")
    (ws / "fdlink").symlink_to("/proc/self/fd")
    runner = ToolRunner(ws)
    calls: list[tuple[str, dict[str, object]]] = [
        ("read_file", {"path": "/proc/self/environ"}),
        ("read_file", {"path": "env"}),
        ("list_dir", {"path": "/proc"}),
        ("list_dir", {"path": "fdlink"}),
        ("read_file", {"path": "../../../../../../../proc/self/environ"}),
    ]
    for name, args in calls:
        outcome = await runner.run(name, args)
        assert outcome.status == "error", (name, args, outcome)
        assert "/proc is outside every workspace" in outcome.output, outcome
        assert "API" not in outcome.output and "PATH=" not in outcome.output
        reason = _asks(runner, policy, name, args)
        if policy == "untrusted":
            assert reason is not None and "/proc" in reason
    write = await runner.run("write_file", {"path": "env", "content": "x"}, consent=True)
    assert write.status == "error" and "/proc is outside every workspace" in write.output


async def test_reads_outside_the_workspace_ask_only_when_untrusted(
    dirs: tuple[Path, Path],
) -> None:
    ws, outside = dirs
    (outside / "notes.txt").write_text("hi\n")
    (ws / "out").symlink_to(outside)
    runner = ToolRunner(ws)
    for path in ("out/notes.txt", str(outside / "notes.txt"), "../outside/notes.txt"):
        args = {"path": path}
        assert _asks(runner, "on-request", "read_file", args) is None
        assert _asks(runner, "untrusted", "read_file", args) == (
            f"reads {path}: outside the workspace (untrusted mode asks before reading there)"
        )
        read = await runner.run("read_file", args)
        assert read == ToolOutcome(status="ok", output="     1\thi\n")
    (ws / "inside.txt").write_text("")
    assert _asks(runner, "untrusted", "read_file", {"path": "inside.txt"}) is None


async def test_apply_patch_adds_deletes_and_moves_through_a_symlinked_dir(
    dirs: tuple[Path, Path],
) -> None:
    ws, outside = dirs
    (ws / "real").mkdir()
    (ws / "real" / "old.txt").write_text("a\n")
    (ws / "real" / "gone.txt").write_text("b\n")
    (ws / "ld").symlink_to("real")
    (ws / "out").symlink_to(outside)
    runner = ToolRunner(ws)
    patch = (
        "*** Begin Patch\n*** Add File: ld/new.txt\n+n\n"
        "*** Delete File: ld/gone.txt\n"
        "*** Update File: ld/old.txt\n*** Move to: ld/moved.txt\n-a\n+A\n*** End Patch"
    )
    assert _asks(runner, "on-request", "apply_patch", {"patch": patch}) is None
    outcome = await runner.run("apply_patch", {"patch": patch})
    assert outcome.status == "ok", outcome
    assert _files_in(ws / "real") == ["moved.txt", "new.txt"]
    assert (ws / "real" / "moved.txt").read_text() == "A\n"
    assert (ws / "ld").is_symlink()
    escape = (
        "*** Begin Patch\n*** Add File: ld/ok.txt\n+x\n*** Add File: newdir/a.txt\n+x\n"
        "*** Add File: out/evil.txt\n+x\n*** End Patch"
    )
    reason = _asks(runner, "on-request", "apply_patch", {"patch": escape})
    assert reason == "writes out/evil.txt: outside the workspace's writable roots"
    refused = await runner.run("apply_patch", {"patch": escape})
    assert refused == ToolOutcome(
        status="error",
        output="patch not applied (no file was changed): out/evil.txt: "
        "outside the workspace's writable roots",
    )
    assert _files_in(outside) == [] and not (ws / "real" / "ok.txt").exists()
    assert not (ws / "newdir").exists()  # judged before any directory is made


async def test_a_deleted_workspace_is_not_recreated(dirs: tuple[Path, Path]) -> None:
    ws, _ = dirs
    runner = ToolRunner(ws)
    ws.rmdir()
    for name, args in [
        ("write_file", {"path": "a/b.txt", "content": "x"}),
        ("apply_patch", {"patch": "*** Begin Patch\n*** Add File: c.txt\n+x\n*** End Patch"}),
    ]:
        outcome = await runner.run(name, args)
        assert outcome.status == "error", outcome
        assert "the workspace directory no longer exists" in outcome.output
    assert not ws.exists()
    read = await runner.run("read_file", {"path": "x"})
    assert read.status == "error" and "no longer exists" in read.output


async def test_a_final_symlink_is_written_through_only_while_inside(
    dirs: tuple[Path, Path],
) -> None:
    ws, outside = dirs
    (ws / "real.txt").write_text("old")
    (ws / "in").symlink_to("real.txt")
    (ws / "abs").symlink_to(ws / "real.txt")
    (ws / "out").symlink_to(outside / "target.txt")
    runner = ToolRunner(ws)
    assert (await runner.run("write_file", {"path": "in", "content": "1"})).status == "ok"
    assert (await runner.run("write_file", {"path": "abs", "content": "2"})).status == "ok"
    assert (ws / "real.txt").read_text() == "2" and (ws / "in").is_symlink()
    refused = await runner.run("write_file", {"path": "out", "content": "3"})
    assert refused.status == "error" and "outside" in refused.output
    assert _files_in(outside) == []


async def test_a_nul_in_a_path_is_refused_not_truncated(dirs: tuple[Path, Path]) -> None:
    """The kernel reads a C string: ``x\\0/../../y`` must not become ``x``."""
    ws, _ = dirs
    (ws / "x").write_text("secret-ish\n")
    runner = ToolRunner(ws)
    for name, args in [
        ("read_file", {"path": "x\x00/../../etc/passwd"}),
        ("write_file", {"path": "x\x00y", "content": "z"}),
        ("list_dir", {"path": ".\x00"}),
    ]:
        outcome = await runner.run(name, args)
        assert outcome.status == "error" and "internal error" not in outcome.output, outcome
    assert _files_in(ws) == ["x"] and (ws / "x").read_text() == "secret-ish\n"


async def test_untrusted_asks_before_probing_a_missing_path_outside(
    dirs: tuple[Path, Path],
) -> None:
    ws, outside = dirs
    runner = ToolRunner(ws)
    missing = str(outside / "maybe.txt")
    assert _asks(runner, "untrusted", "read_file", {"path": missing}) is not None
    assert _asks(runner, "untrusted", "read_file", {"path": "../outside/nope"}) is not None
    assert _asks(runner, "untrusted", "read_file", {"path": "nope.txt"}) is None


@pytest.mark.parametrize(
    ("mode", "inside_ok", "outside_ok"),
    [
        ("read-only", False, False),
        ("workspace-write", True, False),
        ("danger-full-access", True, True),
    ],
)
async def test_the_sandbox_mode_decides_unapproved_writes(
    dirs: tuple[Path, Path], mode: SandboxMode, inside_ok: bool, outside_ok: bool
) -> None:
    """Under ``never`` nobody approves: the tool follows the boundary's mode alone,
    and ``/proc`` stays refused even in ``danger-full-access``."""
    ws, outside = dirs
    boundary = Boundary(
        mode=mode, writable_roots=(os.path.realpath(ws),), home=os.path.realpath(outside)
    )
    runner = ToolRunner(ws, boundary=boundary)
    inside = await runner.run("write_file", {"path": "a.txt", "content": "x"})
    out = await runner.run("write_file", {"path": str(outside / "b.txt"), "content": "x"})
    proc = await runner.run("write_file", {"path": "/proc/self/comm", "content": "x"}, consent=True)
    assert (inside.status == "ok", out.status == "ok") == (inside_ok, outside_ok), (inside, out)
    assert (ws / "a.txt").exists() == inside_ok and (outside / "b.txt").exists() == outside_ok
    assert proc.status == "error" and "/proc is outside every workspace" in proc.output


async def test_a_magic_link_to_a_pipe_is_refused_and_fds_stay_balanced(
    dirs: tuple[Path, Path],
) -> None:
    """``/proc/self/fd/N`` of a pipe: refused (its parent is under ``/proc``)."""
    ws, _ = dirs
    read_end, write_end = os.pipe()
    try:
        runner = ToolRunner(ws)
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(20):
            outcome = await runner.run("read_file", {"path": f"/proc/self/fd/{read_end}"})
            assert outcome.status == "error" and "internal error" not in outcome.output, outcome
            # Its parent is /proc/self/fd: refused as /proc before anything is opened.
            assert "/proc is outside every workspace" in outcome.output, outcome
        assert len(os.listdir("/proc/self/fd")) == before
        os.fstat(read_end)  # still ours: never closed by mistake
    finally:
        os.close(read_end)
        os.close(write_end)
