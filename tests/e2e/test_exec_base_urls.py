"""Base URLs with a query string or userinfo (docs/design/secrets.md §2):
the request goes where the URL says, the API key still goes, and no secret in
the URL is ever printed."""

from __future__ import annotations

import base64
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.e2e.conftest import RunMind
from tests.support.fake_model import sse_chunks
from tests.support.loopback import LoopbackServer, OwnedServer

SECRETS = ("PASSW0RD", "QSECRET")


class _Recorder(LoopbackServer):
    """Answers every POST with one text reply; records path and headers."""

    thread_name = "recorder-server"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str]]] = []

    class handler(BaseHTTPRequestHandler):  # the LoopbackServer hook
        server: OwnedServer

        def log_message(self, format: str, *args: Any) -> None:
            """Silence the access log."""

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            owner = self.server.owner
            owner.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            if self.path.partition("?")[0] != "/v1/chat/completions":
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = b"".join(sse_chunks({"text": "hi there"}))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)


def _exec(run_mind: RunMind, base_url: str, env: dict[str, str] | None = None) -> Any:
    return run_mind(
        "exec", "--provider", "openai-chat", "--model", "m", "--base-url", base_url, "hi",
        env=env, timeout=30,
    )  # fmt: skip


def test_query_string_is_kept_after_the_endpoint_path(run_mind: RunMind) -> None:
    with _Recorder() as server:
        r = _exec(run_mind, f"http://127.0.0.1:{server.port}/v1?api-version=2024")
    assert r.returncode == 0, r.stderr
    assert [path for path, _ in server.seen] == ["/v1/chat/completions?api-version=2024"]


def test_userinfo_never_replaces_the_api_key(run_mind: RunMind) -> None:
    with _Recorder() as server:
        port = server.port
        url = f"http://user:PASSW0RD@127.0.0.1:{port}/v1?key=QSECRET"
        r = _exec(run_mind, url, env={"OPENAI_API_KEY": "sk-from-env"})
    assert r.returncode == 0, r.stderr
    ((path, headers),) = server.seen
    assert headers["authorization"] == "Bearer sk-from-env"
    assert path == "/v1/chat/completions?key=QSECRET"  # the server still gets its query
    for secret in SECRETS:
        assert secret not in r.stdout + r.stderr, r.stderr
    assert f"user:***@127.0.0.1:{port}/v1?key=***" in r.stderr


def test_userinfo_is_basic_auth_only_without_a_key(run_mind: RunMind) -> None:
    with _Recorder() as server:
        r = _exec(run_mind, f"http://user:PASSW0RD@127.0.0.1:{server.port}/v1")
    assert r.returncode == 0, r.stderr
    ((_, headers),) = server.seen
    assert headers["authorization"] == "Basic " + base64.b64encode(b"user:PASSW0RD").decode()
    assert "PASSW0RD" not in r.stderr


def test_error_paths_never_show_url_secrets(run_mind: RunMind) -> None:
    with _Recorder() as server:
        # /nope is not served: a not_found failure with the endpoint hint.
        url = f"http://user:PASSW0RD@127.0.0.1:{server.port}/nope?api_key=QSECRET"
        r = _exec(run_mind, url, env={"OPENAI_API_KEY": "sk-x"})
    assert r.returncode == 1, r.stderr
    assert "does not serve" in r.stderr
    for secret in SECRETS:
        assert secret not in r.stdout + r.stderr, r.stderr
    bad = run_mind("exec", "--provider", "openai-chat", "--base-url",
                   "ftp://u:PASSW0RD@h/?token=QSECRET", "hi")  # fmt: skip
    assert bad.returncode == 2
    assert "not an http(s) URL" in bad.stderr
    for secret in SECRETS:
        assert secret not in bad.stderr, bad.stderr


def test_config_masks_url_secrets(tmp_path: Path, run_mind: RunMind) -> None:
    home = tmp_path / "mind-home"
    home.mkdir()
    url = "http://cfguser:cfgpass@127.0.0.1:9/v1?api-version=2024&api_key=QSECRET"
    (home / "config.toml").write_text(f'provider = "openai-chat"\nbase_url = "{url}"\n')
    r = run_mind("config")
    assert r.returncode == 0, r.stderr
    assert "cfgpass" not in r.stdout and "QSECRET" not in r.stdout, r.stdout
    assert "http://cfguser:***@127.0.0.1:9/v1?api-version=2024&api_key=***" in r.stdout
