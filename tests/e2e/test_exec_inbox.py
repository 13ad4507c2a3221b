"""Input left waiting by a failed turn: ``mind exec`` says so, ``mind inbox``
lists and drops it, and a dropped message never reaches a model again — not
after a ``kill -9`` either (docs/design/mailbox.md §6)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import RunMind
from tests.support.fake_model import FakeModel, user_texts

SID = "0193aaaa-0000-7000-8000-00000000beef"


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _exec(run_mind: RunMind, base_url: str, *args: str, new: bool = False) -> object:
    """``mind exec`` on session SID (``new``: create it) against ``base_url``."""
    return run_mind(
        "exec",
        "--provider",
        "openai-chat",
        "--base-url",
        base_url,
        "--model",
        "m",
        "--new-session" if new else "--session",
        SID,
        *args,
        env={"MIND_MAX_RETRIES": "0"},
    )


def test_failed_exec_names_the_waiting_input_and_mind_inbox_drops_it(
    tmp_path: Path, run_mind: RunMind
) -> None:
    down = _closed_port()
    r = _exec(run_mind, down, "--cwd", str(tmp_path), "do X", new=True)
    assert r.returncode == 1, r.stderr  # type: ignore[attr-defined]
    err = r.stderr  # type: ignore[attr-defined]
    assert f"1 message waits in session {SID}" in err, err
    (x_id,) = re.findall(r"mind inbox \S+ --drop (msg_[0-9a-f]+)", err)
    assert re.search(rf"{x_id}\s+prompt\s+just now\s+do X", err), err

    r = _exec(run_mind, down, "do Y")  # "do X" goes first, and the screen says so
    assert re.search(rf"sent first.*\n\s+{x_id}\s+prompt\s+just now\s+do X", r.stderr)  # type: ignore[attr-defined]
    assert "2 messages wait" in r.stderr  # type: ignore[attr-defined]

    r = _exec(run_mind, down, "--json", "do W")
    assert r.returncode == 1
    (waiting,) = r.of_type("input.waiting")  # type: ignore[attr-defined]
    assert [m["first_line"] for m in waiting["messages"]] == ["do X", "do Y", "do W"]
    assert waiting["drop_command"] == f"mind inbox {SID} --drop ID"
    y_id, w_id = (m["message_id"] for m in waiting["messages"][1:])

    listed = run_mind("inbox", SID[:12])
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == [x_id, y_id, w_id]
    assert "do X" in listed.stdout.splitlines()[0]

    ambiguous = run_mind("inbox", SID, "--drop", "msg_")
    assert ambiguous.returncode == 1 and "matches several" in ambiguous.stderr
    dropped = run_mind("inbox", SID, "--drop", x_id[:10] if x_id[:10] != y_id[:10] else x_id)
    assert dropped.returncode == 0, dropped.stderr
    assert dropped.stdout.strip() == f"dropped {x_id} (prompt): do X"
    assert run_mind("inbox", SID, "--drop", w_id).returncode == 0
    assert run_mind("inbox", SID).stdout.split()[0] == y_id

    with FakeModel() as model:
        r = _exec(run_mind, model.base_url, "do Z")
        assert r.returncode == 0, r.stderr  # type: ignore[attr-defined]
        sent = [user_texts(body["messages"]) for body in model.requests]
    assert sent == [["do Y", "do Z"]]  # "do X" and "do W" never again
    assert "waits in session" not in r.stderr  # type: ignore[attr-defined]
    assert run_mind("inbox", SID).stdout == ""


_HOLDER = """
import sys, anyio, mind
from pathlib import Path

async def main():
    config = mind.resolve_config(provider="openai-chat", base_url=sys.argv[1], model="m")
    async with mind.Runtime.open() as rt:
        s = await rt.open_session(sys.argv[2], config=config)
        if len(sys.argv) > 3:
            s.drop(sys.argv[3])
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)

anyio.run(main)
"""


def _holder(mind_env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, *args],
        env=mind_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_drop_needs_the_session_and_a_dropped_message_survives_kill_9(
    tmp_path: Path, run_mind: RunMind, mind_env: dict[str, str]
) -> None:
    down = _closed_port()
    r = _exec(run_mind, down, "--cwd", str(tmp_path), "do X", new=True)
    (x_id,) = re.findall(r"--drop (msg_[0-9a-f]+)", r.stderr)  # type: ignore[attr-defined]

    holder = _holder(mind_env, down, SID)
    try:
        refused = run_mind("inbox", SID, "--drop", x_id)
        assert refused.returncode == 3, refused.stderr
        assert f"pid {holder.pid}" in refused.stderr, refused.stderr
        assert run_mind("inbox", SID).stdout.split()[0] == x_id  # listing only reads
    finally:
        holder.communicate("\n", timeout=30)

    # The holder drops it, then dies by SIGKILL: no cleanup at all.
    killed = _holder(mind_env, down, SID, x_id)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL

    with FakeModel() as model:
        r = _exec(run_mind, model.base_url)  # no prompt: recover and replay what waits
        assert r.returncode == 0, r.stderr  # type: ignore[attr-defined]
        sent = list(model.requests)
    assert sent == []  # nothing to replay: the dropped "do X" is gone
    assert "0 input(s) to replay" in r.stderr  # type: ignore[attr-defined]
