"""Opening one session from two tasks of one runtime at once
(docs/design/processes.md §8): the opens are serialised per session id, so
the second finds the first's handle instead of racing its startup."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import yaml

import mind

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_two_concurrent_opens_of_one_session_share_one_handle(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump([{"text": "hi"}]), encoding="utf-8")
    config = mind.resolve_config(provider="scripted", script=str(script), env={})
    async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
        session = await rt.create_session(cwd=tmp_path, config=config)
        sid = session.session_id
        await session.submit("go").wait()
    opened: list[mind.Session] = []

    async def open_it(rt: mind.Runtime) -> None:
        opened.append(await rt.open_session(sid, config=config))

    async with mind.Runtime.open(state_root=tmp_path / "state") as rt:
        async with anyio.create_task_group() as group:
            group.start_soon(open_it, rt)
            group.start_soon(open_it, rt)
        assert len(opened) == 2
        assert opened[0] is opened[1]
        assert rt.sessions == {sid: opened[0]}
