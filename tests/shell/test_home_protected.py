"""With the workspace at ``$HOME``, dotfiles that run code or grant access
later stay read-only for tools (docs/design/boundary.md).

Real files in a temporary home, the real file tools and real sandboxed
shell commands (bubblewrap and Landlock).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from mind.effects.boundary import HOME_PROTECTED, Boundary
from mind.shell.sandbox.backend import Backend, select_backend
from mind.shell.sandbox.command import Sandbox
from mind.shell.tools import ToolRunner

pytestmark = pytest.mark.anyio

# At least one path per group of HOME_PROTECTED.
TARGETS = (
    ".gitconfig",
    ".config/git/config",
    ".ssh/authorized_keys",
    ".local/bin/git",
    "bin/ls",
    ".config/autostart/evil.desktop",
    ".config/systemd/user/evil.service",
    ".config/environment.d/evil.conf",
    ".config/fish/config.fish",
    ".npmrc",
    ".netrc",
    ".docker/config.json",
    ".aws/credentials",
    ".kube/config",
    ".gnupg/gpg.conf",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _home(tmp_path: Path) -> tuple[Path, Boundary]:
    home = Path(os.path.realpath(tmp_path)) / "home"
    state = home / ".mind-state"
    for sub in (".config/git", ".ssh", ".local/bin", ".aws", ".kube", "project", ".docker"):
        (home / sub).mkdir(parents=True)
    state.mkdir(mode=0o700)
    (home / ".gitconfig").write_text("[user]\n")
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 mine\n")
    boundary = Boundary(
        mode="workspace-write",
        writable_roots=(str(home),),
        home=str(home),
        state_roots=(str(state),),
    )
    return home, boundary


def _snapshot(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): p.read_text()
        for p in sorted(home.rglob("*"))
        if p.is_file() and "project" not in p.parts
    }


def test_every_target_is_in_the_protected_set() -> None:
    for target in TARGETS:
        assert any(target == name or target.startswith(name + "/") for name in HOME_PROTECTED), (
            target
        )


async def test_file_tools_do_not_write_protected_dotfiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, boundary = _home(tmp_path)
    monkeypatch.setenv("HOME", str(home))
    runner = ToolRunner(home, boundary=boundary)
    before = _snapshot(home)
    for target in TARGETS:
        outcome = await runner.run("write_file", {"path": target, "content": "evil\n"})
        assert outcome.status == "error", (target, outcome.output)
        assert "protected" in outcome.output, outcome.output
        reason = runner.boundary_reason(target, "write")
        assert reason is not None and reason.kind == "protected", target
    assert _snapshot(home) == before
    ok = await runner.run("write_file", {"path": "project/notes.txt", "content": "fine\n"})
    assert ok.status == "ok", ok.output


@pytest.mark.parametrize("backend", ["bwrap", "landlock"])
async def test_sandboxed_commands_do_not_write_protected_dotfiles(
    tmp_path: Path, backend: Backend
) -> None:
    home, boundary = _home(tmp_path)
    chosen, why = select_backend({"MIND_SANDBOX_BACKEND": backend})
    assert chosen == backend, why
    env = {"PATH": os.environ["PATH"], "HOME": str(home)}
    runner = ToolRunner(home, env=env, sandbox=Sandbox(boundary=boundary, backend=chosen))
    before = _snapshot(home)
    for target in TARGETS:
        parent = shlex.quote(os.path.dirname(target) or ".")
        command = f"mkdir -p {parent}; echo evil > {shlex.quote(target)}"
        outcome = await runner.run("shell", {"command": command, "timeout_s": 20})
        assert outcome.status == "error", (target, outcome.output)
    assert _snapshot(home) == before
    ok = await runner.run("shell", {"command": "echo fine > project/notes.txt", "timeout_s": 20})
    assert ok.status == "ok", ok.output
    assert (home / "project" / "notes.txt").read_text() == "fine\n"
