"""``mind exec``'s way to its first model request.

The first request needs the config, the session's journal and the provider;
it does not need the sandbox (probed meanwhile, awaited before any command
runs or the session line is printed), the file tools and command runner, nor
the renderer that httpx's own command line would pull in; the TLS context is
built meanwhile. The checks run a real ``mind exec`` subprocess against a
loopback server:

- what the process holds in ``sys.modules`` at the moment it connects to the
  model (an audit hook on ``socket.connect`` takes the snapshot in the child);
- that the request goes out while the sandbox probe is still running (a
  ``bwrap`` on ``PATH`` that waits on a FIFO until the test has seen the
  request).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import certifi

from tests.support.child_env import without_prefixes
from tests.support.echo_server import EchoServer

NOT_BEFORE_FIRST_REQUEST = (
    "rich",
    "pygments",
    "click",
    "jsonschema",
    "prompt_toolkit",
    "mind.shell.render",
    "mind.shell.tools._files",
    "mind.shell.tools._process",
    "mind.shell.sandbox.launch",
    "mind.shell.sandbox.landlock",
    "mind.shell.sandbox.seccomp",
)
"""Modules (or top-level packages) ``mind exec`` loads only after its first request, if at all."""

_AT_CONNECT = textwrap.dedent(
    """
    import json, sys
    port = int(sys.argv[1])
    seen = []

    def hook(event, args):
        if event == "socket.connect" and not seen and getattr(args[1], "__getitem__", None):
            if tuple(args[1])[1:2] == (port,):
                seen.append(sorted(sys.modules))

    sys.addaudithook(hook)
    from mind.shell.cli import main
    code = main(sys.argv[2:])
    sys.stderr.write("\\nMODULES " + json.dumps(seen[0] if seen else None) + "\\n")
    raise SystemExit(code)
    """
)


def _exec_argv(server: EchoServer, cwd: Path) -> list[str]:
    argv = ["exec", "--provider", "openai-chat", "--model", "echo-text"]
    return [*argv, "--base-url", f"http://127.0.0.1:{server.port}/v1", "--cwd", str(cwd), "hi"]


def _env(tmp_path: Path) -> dict[str, str]:
    env = without_prefixes("MIND_", "OPENAI_")
    return env | {"MIND_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}


def test_exec_loads_no_sandbox_tools_or_renderer_before_its_first_request(
    tmp_path: Path,
) -> None:
    with EchoServer("openai-chat") as server:
        argv = [sys.executable, "-c", _AT_CONNECT, str(server.port), *_exec_argv(server, tmp_path)]
        proc = subprocess.run(argv, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")]
    assert line, proc.stderr
    names = json.loads(line[-1].removeprefix("MODULES "))
    assert names is not None, "the child never connected to the model server"
    loaded = set(names) | {n.split(".")[0] for n in names}
    assert {"httpx", "mind.shell.providers.openai_chat"} <= loaded
    early = sorted(loaded & set(NOT_BEFORE_FIRST_REQUEST))
    assert not early, f"loaded before the first request: {early}"
    assert "sandbox workspace-write" in proc.stderr  # the session line still names it


def test_exec_sends_its_first_request_while_the_sandbox_probe_runs(tmp_path: Path) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    fifo = tmp_path / "probe-go"
    os.mkfifo(fifo)
    started = tmp_path / "probe-started"
    # Stands in for bubblewrap: says it started, then waits until the test lets it
    # answer (exit 1: "does not work here", so the probe goes on to Landlock).
    (fake / "bwrap").write_text(f'#!/bin/sh\necho $$ > "{started}"\nread go < "{fifo}"\nexit 1\n')
    (fake / "bwrap").chmod(0o755)
    env = _env(tmp_path) | {"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    with EchoServer("openai-chat") as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mind.shell.cli", *_exec_argv(server, tmp_path)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            arrived = server.wait_for_requests(1, timeout_s=30)
            probe_pid = int(started.read_text()) if started.exists() else None
            # The probe is still waiting: its bwrap is alive and has not been let go.
            alive = probe_pid is not None and Path(f"/proc/{probe_pid}").exists()
            try:
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader: the probe is no longer waiting
                writer = -1
            if writer >= 0:
                os.write(writer, b"go\n")
                os.close(writer)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert arrived, err
    assert alive and writer >= 0, f"the request waited for the sandbox probe: {err}"
    assert proc.returncode == 0, err
    assert out.startswith("you sent path=/v1/chat/completions")
    assert "sandbox workspace-write" in err
    assert "bubblewrap" not in err  # the probe's answer (bwrap does not work) is the one shown


_BUILD_CLIENT = textwrap.dedent(
    """
    import ssl, sys
    from mind.shell.providers import ProviderSettings, make_provider
    provider = make_provider(ProviderSettings(kind="openai-chat", model="m", api_key="k"))
    print("constructed", flush=True)
    sys.stdin.readline()  # the test has fed the certificate file meanwhile
    ctx = provider._get_client()._transport._pool._ssl_context
    print("verify", ctx.verify_mode == ssl.CERT_REQUIRED, ctx.check_hostname, flush=True)
    """
)


def test_the_tls_context_is_built_while_the_session_starts(tmp_path: Path) -> None:
    """Building the default TLS context (loading the CA bundle, ~50 ms) starts
    when the HTTP provider is made, in a worker thread, not at the first
    request: the CA file here is a FIFO, so the test sees the build begin (a
    reader opens it) before anything asked the provider for its client."""
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    env = without_prefixes("MIND_", "OPENAI_") | {"SSL_CERT_FILE": str(fifo)}
    child = subprocess.Popen(
        [sys.executable, "-c", _BUILD_CLIENT],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    fed = threading.Event()

    def feed() -> None:
        # open blocks until the child opens the CA file to read it; a broken
        # pipe means the test gave up and let this thread go.
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as w:
            fed.set()
            w.write(Path(certifi.where()).read_bytes())

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "constructed"
        feeder.start()
        opened = fed.wait(timeout=20)
        if not opened:
            child.kill()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # let the feeder go
        out, err = child.communicate("\n", timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert opened, "nothing read the CA file until the client was asked for"
    assert child.returncode == 0, err
    assert out.split() == ["verify", "True", "True"]


_TLS_AT_EXEC_IMPORT = textwrap.dedent(
    """
    import json, sys
    seen = []

    def hook(event, args):
        if event == "import" and args[0] == "mind.shell.exec_cli" and not seen:
            http = sys.modules.get("mind.shell.providers._http")
            seen.append(getattr(http, "_tls", None) is not None)

    sys.addaudithook(hook)
    from mind.shell.cli import main
    code = main(sys.argv[1:])
    sys.stderr.write("\\nTLS " + json.dumps(seen[0] if seen else None) + "\\n")
    raise SystemExit(code)
    """
)


def test_exec_starts_the_tls_context_before_it_imports_the_runtime(tmp_path: Path) -> None:
    """The TLS context's build (~50 ms, mostly in OpenSSL without the GIL)
    overlaps the import of exec's runtime (~200 ms) rather than following it."""
    with EchoServer("openai-chat") as server:
        argv = [sys.executable, "-c", _TLS_AT_EXEC_IMPORT, *_exec_argv(server, tmp_path)]
        proc = subprocess.run(argv, env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("TLS ")]
    assert line, proc.stderr
    assert json.loads(line[-1].removeprefix("TLS ")) is True, "no TLS build before the runtime"
