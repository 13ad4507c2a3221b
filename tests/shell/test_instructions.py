"""Instructions files (docs/design/context.md §4): found from the repository
root down to the working directory in a real temporary git repository, read
safely (symlinks out, FIFOs), capped with a notice, carried by the request in
order with their paths, read again at a turn start when changed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest

import mind
from mind.context.instructions import PER_FILE_BYTES
from mind.generated import events as ev
from mind.shell.instructions import Instructions, find_files, project_root
from mind.shell.repl.commands import _instructions_rows
from tests.support.fake_model import FakeModel


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository ``repo`` with ``sub/deeper`` inside, and an empty MIND_HOME."""
    root = tmp_path / "repo"
    (root / "sub" / "deeper").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (tmp_path / "home").mkdir(mode=0o700)
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return {"MIND_HOME": str(tmp_path / "home")}


def _sources(cwd: Path, env: dict[str, str]) -> list[ev.InstructionSource]:
    return Instructions(cwd, env, ()).sources


def test_files_from_the_root_down_to_the_cwd_user_first_nearer_later(
    tmp_path: Path, repo: Path
) -> None:
    (tmp_path / "home" / "AGENTS.md").write_text("user rule\n")
    (repo / "AGENTS.md").write_text("root rule\n")
    (repo / "CLAUDE.md").write_text("not read: the root has an AGENTS.md\n")
    (repo / "sub" / "CLAUDE.md").write_text("sub rule from CLAUDE.md\n")
    (repo / "sub" / "deeper" / "AGENTS.md").write_text("deeper rule\n")
    (tmp_path / "AGENTS.md").write_text("above the repository: never read\n")
    cwd = repo / "sub" / "deeper"
    assert project_root(cwd) == repo
    sources = _sources(cwd, _env(tmp_path))
    assert [(s.path, s.scope, s.cut, s.skipped or None) for s in sources] == [
        (str(tmp_path / "home" / "AGENTS.md"), "user", False, None),
        (str(repo / "AGENTS.md"), "project", False, None),
        (str(repo / "sub" / "CLAUDE.md"), "project", False, None),
        (str(cwd / "AGENTS.md"), "project", False, None),
    ]
    assert [s.size_bytes for s in sources] == [10, 10, 24, 12]
    prompt = Instructions(cwd, _env(tmp_path), ()).system_prompt
    order = [prompt.index(text) for text in ("user rule", "root rule", "sub rule", "deeper rule")]
    assert order == sorted(order)
    assert f"## {repo / 'sub' / 'CLAUDE.md'}\n\nsub rule" in prompt
    assert "not read" not in prompt and "never read" not in prompt
    assert "the later one wins" in prompt


def test_outside_a_repository_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir(mode=0o700)
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("parent, not a repository: not read")
    (work / "CLAUDE.md").write_text("here")
    assert project_root(work) is None
    assert [s.path for s in _sources(work, _env(tmp_path))] == [str(work / "CLAUDE.md")]


def test_a_symlink_out_of_the_repository_and_a_fifo_are_skipped_with_the_reason(
    tmp_path: Path, repo: Path
) -> None:
    secret = tmp_path / "outside.md"
    secret.write_text("outside the repository")
    (repo / "AGENTS.md").symlink_to(secret)
    os.mkfifo(repo / "sub" / "AGENTS.md")  # opening it for reading must not block
    (repo / "sub" / "deeper" / "target.md").write_text("inside rule")
    (repo / "sub" / "deeper" / "AGENTS.md").symlink_to("target.md")  # inside: followed
    sources = _sources(repo / "sub" / "deeper", _env(tmp_path))
    assert [(s.path, s.skipped or None) for s in sources] == [
        (str(repo / "AGENTS.md"), "a symbolic link out of the repository"),
        (str(repo / "sub" / "AGENTS.md"), "a FIFO, not a regular file"),
        (str(repo / "sub" / "deeper" / "AGENTS.md"), None),
    ]
    prompt = Instructions(repo / "sub" / "deeper", _env(tmp_path), ()).system_prompt
    assert "inside rule" in prompt and "outside the repository" not in prompt


def test_an_oversized_file_is_cut_with_a_notice_and_bad_bytes_replaced(
    tmp_path: Path, repo: Path
) -> None:
    big = "€" * (PER_FILE_BYTES // 3 + 100)  # 3 bytes each: over the cap, cut mid-character
    (repo / "AGENTS.md").write_bytes(b"bad \xff\xfe bytes\n" + big.encode())
    instructions = Instructions(repo, _env(tmp_path), ())
    (source,) = instructions.sources
    assert source.cut and source.size_bytes == len(big.encode()) + 13
    # Cut between characters: the 13 bytes of the first line, then whole euro signs.
    assert source.included_bytes <= PER_FILE_BYTES and (source.included_bytes - 13) % 3 == 0
    prompt = instructions.system_prompt
    prompt.encode("utf-8")  # valid text
    assert "bad \ufffd\ufffd bytes" in prompt
    assert f"[This file is cut: {source.included_bytes} of its {source.size_bytes} bytes" in prompt


def test_the_total_cap_cuts_the_farther_files_first(tmp_path: Path, repo: Path) -> None:
    for directory in (repo, repo / "sub", repo / "sub" / "deeper"):
        (directory / "AGENTS.md").write_text("x" * (PER_FILE_BYTES - 10))
    sources = _sources(repo / "sub" / "deeper", _env(tmp_path))
    assert [s.cut for s in sources] == [True, False, False]
    assert sum(s.included_bytes for s in sources) <= 64 * 1024


def test_secrets_in_a_file_never_reach_the_prompt(tmp_path: Path, repo: Path) -> None:
    (repo / "AGENTS.md").write_text("use key sk-live-0123456789abcdef0123 for the API")
    prompt = Instructions(repo, _env(tmp_path), ("sk-live-0123456789abcdef0123",)).system_prompt
    assert "sk-live-0123456789abcdef0123" not in prompt and "use key" in prompt


def test_no_files_leave_minds_own_prompt_alone(tmp_path: Path, repo: Path) -> None:
    instructions = Instructions(repo, _env(tmp_path), ())
    assert instructions.sources == [] and find_files(repo, _env(tmp_path)) == []
    assert instructions.system_prompt.startswith("You are mind")
    assert "Instructions files" not in instructions.system_prompt


def test_the_request_carries_them_and_a_change_applies_at_the_next_turn(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "AGENTS.md").write_text("be brief")
    (repo / "AGENTS.md").write_text("run make test before you finish")
    cwd = repo / "sub"

    async def main(model: FakeModel) -> tuple[list[ev.InstructionSource], list[ev.Event]]:
        config = mind.resolve_config(provider="openai-chat", base_url=model.base_url, model="m")
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=cwd, config=config, interactive=False)
            await s.run("hi")
            first = s.instructions_sources
            (cwd / "AGENTS.md").write_text("in sub: use pytest -x")
            events = [e async for e in s.submit("again")]
            return first, events

    with FakeModel() as model:
        first, events = anyio.run(main, model)
        systems = [body["messages"][0] for body in model.requests]
    home_path = str(tmp_path / "home" / "AGENTS.md")
    assert [s.path for s in first] == [home_path, str(repo / "AGENTS.md")]
    assert all(m["role"] == "system" for m in systems)
    one, two = systems[0]["content"], systems[-1]["content"]
    assert one.index(home_path) < one.index("be brief") < one.index(str(repo / "AGENTS.md"))
    assert "run make test" in one and "use pytest" not in one
    assert two.index("run make test") < two.index(str(cwd / "AGENTS.md")) < two.index("use pytest")
    (loaded,) = [e for e in events if isinstance(e, ev.InstructionsLoadedEvent)]
    assert [s.path for s in loaded.sources][-1] == str(cwd / "AGENTS.md")


def test_a_known_window_caps_them_at_a_quarter_of_it_and_says_so(
    tmp_path: Path, repo: Path
) -> None:
    (repo / "AGENTS.md").write_text("HEAD " + "d" * 100_000)
    instructions = Instructions(repo, _env(tmp_path), (), window=lambda: 8192)
    (source,) = instructions.sources
    # A quarter of 8,192 tokens at 4 bytes per token: 8,192 bytes.
    assert source.cut and source.size_bytes == 100_005 and source.included_bytes == 8192
    prompt = instructions.system_prompt
    assert "a quarter of the model's 8,192-token context window" in prompt
    assert utf8_len(prompt) < 8192 + 2048
    # Unknown window: the fixed caps.
    (unbounded,) = Instructions(repo, _env(tmp_path), (), window=lambda: None).sources
    assert unbounded.included_bytes == PER_FILE_BYTES


def utf8_len(text: str) -> int:
    return len(text.encode())


def test_the_request_to_an_8k_model_fits_and_status_says_why_it_was_cut(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/tmp/t12/repro_agents.sh: a 100 KB AGENTS.md and an 8k window."""
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (repo / "AGENTS.md").write_text("HEAD " + "d" * 100_000)

    async def main(model: FakeModel) -> tuple[str, list[tuple[str, str]]]:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="m",
            model_context_window=8192,
        )
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=repo, config=config, interactive=False)
            outcome = await s.run("hi")
            return outcome.status, _instructions_rows(s)

    with FakeModel(context_window=8192) as model:
        status, rows = anyio.run(main, model)
    assert status == "completed"
    assert rows == [
        (
            "instructions",
            f"{repo / 'AGENTS.md'} (100005 bytes, cut to 8192: a quarter of the "
            "8,192-token window)",
        )
    ]


def test_an_overflow_mostly_of_instructions_names_them(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window is unknown to mind and the server does not state it: the
    instructions fill the request and the failure says which files."""
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (repo / "AGENTS.md").write_text("d" * 20_000)

    async def main(model: FakeModel) -> str:
        config = mind.resolve_config(provider="openai-chat", base_url=model.base_url, model="m")
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=repo, config=config, interactive=True)
            outcome = await s.run("hi")
            failure = outcome.event.failure
            assert outcome.status == "failed" and failure is not None
            return failure.message

    with FakeModel(context_window=2048, stated_windows=(0,) * 4) as model:
        message = anyio.run(main, model)
    assert f"{repo / 'AGENTS.md'} (20,000 bytes)" in message
    assert "instructions files" in message and "/compact" not in message


def test_a_window_the_server_states_recuts_them_and_the_request_is_sent_again(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (repo / "AGENTS.md").write_text("d" * 20_000)

    async def main(model: FakeModel) -> tuple[str, int, list[ev.Event]]:
        config = mind.resolve_config(provider="openai-chat", base_url=model.base_url, model="m")
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=repo, config=config, interactive=True)
            turn = s.submit("hi")
            events = [e async for e in turn]
            return turn.outcome.status, s.instructions_sources[0].included_bytes, events

    with FakeModel(context_window=3072) as model:
        status, included, events = anyio.run(main, model)
    assert (status, included) == ("completed", 3072)
    # The re-cut is announced as any change of what the model sees.
    (loaded,) = [e for e in events if isinstance(e, ev.InstructionsLoadedEvent)]
    assert [s.included_bytes for s in loaded.sources] == [3072]
