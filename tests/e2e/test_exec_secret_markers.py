"""Secret markers: for every provider and every failure path, real ``mind exec``
(plain and ``--json``) against a server that echoes the credentials it got
leaves 0 traces of the API key or of the base URL's secrets in stdout, stderr,
the journal, the inbox, ``index.db`` or any other file mind writes
(docs/design/secrets.md)."""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import MindResult, RunMind
from tests.support.echo_server import SCENARIOS, EchoServer

PROVIDERS = ("openai-chat", "openai-responses", "anthropic")
RUN = uuid.uuid4().hex[:12]
KEY = f"sk-MARKER{RUN}key"
"""The API key, in the provider's environment variable."""
PASSWORD = f"MARKER{RUN}pw"
"""The password in the base URL's userinfo."""
QUERY = f"MARKER{RUN}q"
"""A credential in the base URL's query."""
TOKEN = f"MARKER{RUN}tok"
"""A bare userinfo token (``http://TOKEN@host``), sent as Basic auth."""


def _forms(secret: str) -> set[str]:
    """The secret and the Basic-auth encodings it travels in."""
    out = {secret}
    for pair in (f"u:{secret}", f"{secret}:"):
        out.add(base64.b64encode(pair.encode()).decode().rstrip("="))
    return out


MARKERS = set().union(*(_forms(s) for s in (KEY, PASSWORD, QUERY, TOKEN)))


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, EchoServer]]:
    """One echo server per provider, shared by every case of this module."""
    started = {p: EchoServer(p).start() for p in PROVIDERS}
    yield started
    for server in started.values():
        server.stop()


def _leaks(tmp_path: Path, r: MindResult) -> list[str]:
    """Every place a marker shows up: stdout, stderr, any file under tmp_path
    (MIND_HOME, MIND_STATE_HOME: journal, inbox, index.db, logs)."""
    found = []
    blobs = {"stdout": r.stdout.encode(), "stderr": r.stderr.encode()}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            blobs[str(path)] = path.read_bytes()
    for where, blob in blobs.items():
        for marker in MARKERS:
            if marker.encode() in blob:
                found.append(f"{marker} in {where}")
    return found


def _exec(
    run_mind: RunMind,
    tmp_path: Path,
    provider: str,
    base_url: str,
    model: str,
    *,
    json_mode: bool,
    key: bool = True,
) -> MindResult:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {
        "MIND_STATE_HOME": str(tmp_path / "state"),
        "MIND_HOME": str(tmp_path / "mind-home"),
        "MIND_MAX_RETRIES": "0",
        "MIND_STREAM_IDLE_TIMEOUT": "0.5",
    }
    if key:
        env["ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"] = KEY
    args = ["exec", *(["--json"] if json_mode else []), "--provider", provider]
    args += ["--model", model, "--base-url", base_url, "--cwd", str(work), "say hi"]
    return run_mind(*args, env=env, timeout=30)


# Each (provider, scenario) runs once, plain or --json in turn, so that every
# scenario runs in both modes across the providers (one mind process per case
# keeps the module near a minute on a loaded machine).
CASES = [
    pytest.param(p, s, (i + j) % 2 == 1, id=f"{p}-{s}-{'json' if (i + j) % 2 else 'plain'}")
    for i, p in enumerate(PROVIDERS)
    for j, s in enumerate(SCENARIOS)
]


@pytest.mark.parametrize(("provider", "scenario", "json_mode"), CASES)
def test_no_marker_on_any_failure_path(
    provider: str,
    scenario: str,
    json_mode: bool,
    servers: dict[str, EchoServer],
    run_mind: RunMind,
    tmp_path: Path,
) -> None:
    server = servers[provider]
    base_url = f"http://u:{PASSWORD}@127.0.0.1:{server.port}/v1?token={QUERY}"
    before = len(server.requests)
    r = _exec(run_mind, tmp_path, provider, base_url, scenario, json_mode=json_mode)
    assert r.returncode not in (0, 2), (r.returncode, r.stderr)  # the turn failed, mind did not
    assert "mind: turn failed" in r.stderr or json_mode, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert _leaks(tmp_path, r) == []
    sent = server.requests[before:]
    assert sent, "the request never reached the server"
    assert not any(m in req["body"] for req in sent for m in MARKERS)


@pytest.mark.parametrize("json_mode", [False, True], ids=["plain", "json"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_marker_when_the_server_is_unreachable(
    provider: str, json_mode: bool, run_mind: RunMind, tmp_path: Path
) -> None:
    closed = EchoServer(provider).start()
    port = closed.port
    closed.stop()  # nothing listens there now: connection refused
    base_url = f"http://u:{PASSWORD}@127.0.0.1:{port}/v1?token={QUERY}"
    r = _exec(run_mind, tmp_path, provider, base_url, "http-500", json_mode=json_mode)
    assert r.returncode not in (0, 2), (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    assert _leaks(tmp_path, r) == []


@pytest.mark.parametrize("json_mode", [False, True], ids=["plain", "json"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_marker_from_a_userinfo_token_sent_as_basic_auth(
    provider: str,
    json_mode: bool,
    servers: dict[str, EchoServer],
    run_mind: RunMind,
    tmp_path: Path,
) -> None:
    server = servers[provider]
    base_url = f"http://{TOKEN}@127.0.0.1:{server.port}/v1"
    r = _exec(run_mind, tmp_path, provider, base_url, "http-401", json_mode=json_mode, key=False)
    assert r.returncode not in (0, 2), (r.returncode, r.stderr)
    sent = {k.lower(): v for k, v in server.requests[-1]["headers"].items()}
    assert sent.get("authorization", "").startswith("Basic ")
    assert _leaks(tmp_path, r) == []


ANSWERS = [
    pytest.param(p, "echo-text", p != "anthropic", id=f"{p}-echo-text") for p in PROVIDERS
] + [pytest.param("openai-chat", "echo-text-split", True, id="openai-chat-echo-text-split")]


@pytest.mark.parametrize(("provider", "scenario", "json_mode"), ANSWERS)
def test_no_marker_from_an_answer_that_echoes_the_credentials(
    provider: str,
    scenario: str,
    json_mode: bool,
    servers: dict[str, EchoServer],
    run_mind: RunMind,
    tmp_path: Path,
) -> None:
    """A server that puts the key into the model's text (streamed split
    across deltas, or whole) gets it masked in stdout, events and the journal."""
    server = servers[provider]
    base_url = f"http://u:{PASSWORD}@127.0.0.1:{server.port}/v1?token={QUERY}"
    r = _exec(run_mind, tmp_path, provider, base_url, scenario, json_mode=json_mode)
    assert r.returncode == 0, r.stderr
    assert "you sent path=" in r.stdout
    assert _leaks(tmp_path, r) == []


@pytest.mark.parametrize("json_mode", [False, True], ids=["plain", "json"])
def test_no_marker_from_a_tool_call_whose_id_and_name_echo_the_key(
    json_mode: bool, servers: dict[str, EchoServer], run_mind: RunMind, tmp_path: Path
) -> None:
    """Every string of a round is masked before it is journaled or emitted
    (ids and names too), and the masked id is the one the result answers."""
    server = servers["openai-chat"]
    base_url = f"http://127.0.0.1:{server.port}/v1"
    before = len(server.requests)
    r = _exec(run_mind, tmp_path, "openai-chat", base_url, "echo-tool-call", json_mode=json_mode)
    assert r.returncode == 0, r.stderr
    assert _leaks(tmp_path, r) == []
    replay = json.loads(server.requests[-1]["body"])["messages"]
    assert len(server.requests) - before == 2
    asked = [c["id"] for m in replay if m["role"] == "assistant" for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in replay if m["role"] == "tool"]
    assert asked == answered and len(asked) == 1, replay
    assert re.fullmatch(r"[A-Za-z0-9_-]+", asked[0]), asked  # valid on replay
    assert KEY not in server.requests[-1]["body"]


def test_no_marker_from_a_bare_basic_credential_echoed_back(
    servers: dict[str, EchoServer], run_mind: RunMind, tmp_path: Path
) -> None:
    """The userinfo travels as ``Basic base64(user:pass)``; a server quoting
    only the base64 part must not get it shown."""
    server = servers["openai-chat"]
    base_url = f"http://u:{PASSWORD}@127.0.0.1:{server.port}/v1"
    r = _exec(
        run_mind,
        tmp_path,
        "openai-chat",
        base_url,
        "echo-bare-credential",
        json_mode=False,
        key=False,
    )
    assert r.returncode not in (0, 2), (r.returncode, r.stderr)
    assert "bad key" in r.stderr, r.stderr
    assert _leaks(tmp_path, r) == []
