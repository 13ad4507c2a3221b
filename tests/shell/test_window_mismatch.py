"""A configured window larger than the one the server states
(docs/design/context.md §1): the configured one is kept, and said once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import mind
from mind.context.usage import window_mismatch
from mind.generated import events as ev
from tests.support.fake_model import FakeModel


def test_the_mismatch_names_both_windows_and_the_setting() -> None:
    said = window_mismatch(32768, 8192)
    assert said is not None
    assert "model_context_window is 32,768 tokens" in said and "8,192" in said
    assert "model_context_window = 8192" in said
    # Nothing to say: none learned, the same, or a configured window the smaller one.
    assert [window_mismatch(32768, None), window_mismatch(8192, 8192)] == [None, None]
    assert [window_mismatch(4096, 8192), window_mismatch(None, 8192)] == [None, None]


def test_a_session_warns_once_and_keeps_the_configured_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(mode=0o700)
    too_big = "word " * 8000  # ~10k tokens: over the server's 8,192, under 32,768

    async def main(model: FakeModel) -> tuple[list[ev.TurnWarningEvent], str | None, int | None]:
        config = mind.resolve_config(
            provider="openai-chat",
            base_url=model.base_url,
            model="m",
            model_context_window=32768,
        )
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            events = [e async for e in s.submit(too_big)]
            events += [e async for e in s.submit(too_big)]
            return (
                [e for e in events if isinstance(e, ev.TurnWarningEvent)],
                s.window_mismatch,
                s.context_usage.window,
            )

    with FakeModel(context_window=8192) as model:
        warnings, mismatch, window = anyio.run(main, model)
    assert [w.kind for w in warnings] == [ev.WarningKind.window_mismatch]
    assert warnings[0].message == mismatch == window_mismatch(32768, 8192)
    assert window == 32768  # the documented order: configured first


def test_the_overflow_advice_names_the_window_the_server_stated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MIND_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(mode=0o700)

    async def main(model: FakeModel) -> str:
        config = mind.resolve_config(
            provider="openai-chat", base_url=model.base_url, model="m", model_context_window=32768
        )
        async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
            s = await rt.create_session(cwd=tmp_path, config=config, interactive=False)
            outcome = await s.run("word " * 8000)
            assert outcome.event.failure is not None
            return outcome.event.failure.message

    with FakeModel(context_window=8192) as model:
        message = anyio.run(main, model)
    assert "too big for the model's context window of 8,192 tokens" in message, message
