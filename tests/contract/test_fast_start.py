"""Fast start: what a cheap entry point must not load.

Each check runs a fresh interpreter (a real subprocess) and reads what it
imported from ``sys.modules``: ``import mind`` and the pure core load no I/O
library, and ``mind --version`` / ``--help`` / ``exec --help`` / an argument
error load none of the heavy ones; the provider package imports the adapter
it builds and no other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import mind
from tests.support.echo_server import EchoServer

HEAVY = ("httpx", "apsw", "anyio", "yaml", "jsonschema", "prompt_toolkit", "rich", "keyring")
"""Top-level packages a cheap entry point must not import (each costs 10-100 ms)."""

CLI_HEAVY = ("httpx", "apsw", "jsonschema", "yaml", "prompt_toolkit", "rich")
"""What ``mind --version``, ``--help`` and argument errors must not import."""


def _loaded_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter holds after running ``code`` (which may
    end in ``SystemExit``, as argparse's ``--version`` does): every dotted name
    and every top-level package."""
    wrapper = textwrap.dedent(
        """
        import json, sys
        try:
            exec(compile(sys.argv[1], "<check>", "exec"), {"__name__": "__check__"})
        except SystemExit:
            pass
        finally:
            sys.stdout.flush()
            sys.__stderr__.write(
                "\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"
            )
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, code],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")]
    assert line, proc.stderr
    names = set(json.loads(line[-1].removeprefix("MODULES ")))
    return names | {n.split(".")[0] for n in names}


@pytest.mark.parametrize(
    "module",
    [
        "mind",
        "mind.machines.turn",
        "mind.machines.mailbox",
        "mind.machines.mount",
        "mind.effects.policy",
        "mind.effects.tools",
        "mind.generated.events",
        "mind.history",
    ],
)
def test_importing_the_core_loads_no_io_library(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert module.split(".")[0] in loaded
    assert not loaded & set(HEAVY), f"import {module} loaded {sorted(loaded & set(HEAVY))}"


def test_public_names_resolve_on_first_use() -> None:
    from mind.shell import config, runtime

    assert mind.Runtime is runtime.Runtime
    assert mind.Session is runtime.Session
    assert mind.resolve_config is config.resolve_config
    assert mind.events.MessageDeltaEvent.__module__ == "mind.generated.events"
    assert mind.review.visible.__module__ == "mind.effects.review"
    assert set(mind.__all__) <= set(dir(mind))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = mind.no_such_name


@pytest.mark.parametrize(
    "argv",
    [
        ["--version"],
        ["--help"],
        ["exec", "--help"],
        ["--no-such-flag"],
        ["exec", "--approval", "sometimes", "hi"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_cli_without_work_loads_no_heavy_library(argv: list[str]) -> None:
    code = f"from mind.shell.cli import main; raise SystemExit(main({argv!r}))"
    loaded = _loaded_after(code)
    assert "argparse" in loaded
    assert not loaded & set(CLI_HEAVY), f"mind {' '.join(argv)} loaded {loaded & set(CLI_HEAVY)}"


def test_cli_version_loads_neither_the_error_tree_nor_traceback() -> None:
    """``mind --version`` imports what printing the version needs: the error
    tree (dataclasses, pathlib, inspect: ~10 ms) and traceback (~4 ms) only
    when a run ends in an error."""
    loaded = _loaded_after("from mind.shell.cli import main; raise SystemExit(main(['--version']))")
    assert "mind.shell.cli" in loaded
    assert not loaded & {"mind.errors", "traceback", "dataclasses"}, sorted(
        loaded & {"mind.errors", "traceback", "dataclasses"}
    )


def test_exec_with_a_text_answer_loads_no_renderer(tmp_path: Path) -> None:
    """``mind exec`` needs httpx and the runtime, not the REPL's renderer or
    prompt_toolkit: its plain output imports the renderer only to describe a
    tool call, after the first request. (httpx's own command line,
    ``httpx._main``, which imports rich, click and pygments, is kept out:
    ``mind.shell.cli._skip_httpx_cli``.)"""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_"))}
    env |= {"MIND_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "sk-test"}
    with EchoServer("openai-chat") as server:
        argv = ["exec", "--provider", "openai-chat", "--model", "echo-text"]
        argv += ["--base-url", f"http://127.0.0.1:{server.port}/v1", "--cwd", str(tmp_path)]
        code = f"from mind.shell.cli import main; raise SystemExit(main({[*argv, 'hi']!r}))"
        loaded = _loaded_after(code, env)
    assert len(server.requests) == 1
    assert {"httpx", "anyio"} <= loaded
    unwanted = {"mind.shell.render", "mind.shell.repl", "prompt_toolkit", "rich", "pygments"}
    assert not loaded & unwanted, sorted(loaded & unwanted)


def test_cli_version_still_prints_the_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mind.shell.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"mind {mind.__version__}"


@pytest.mark.parametrize(
    ("kind", "module", "others"),
    [
        ("openai-chat", "openai_chat", ("anthropic", "openai_responses", "scripted")),
        ("anthropic", "anthropic", ("openai_chat", "openai_responses", "scripted")),
    ],
)
def test_make_provider_imports_only_the_adapter_it_builds(
    kind: str, module: str, others: tuple[str, ...]
) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from mind.shell.providers import ProviderSettings, make_provider
        make_provider(ProviderSettings(kind={kind!r}, model="m", api_key="k"))
        names = [n.rsplit(".", 1)[-1] for n in sys.modules if n.startswith("mind.shell.providers.")]
        print(" ".join(names))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    names = set(proc.stdout.split())
    assert module in names
    assert not names & set(others), f"{kind} also imported {sorted(names & set(others))}"


def test_psutil_is_imported_only_when_a_process_is_read(tmp_path: Path) -> None:
    """Importing the lease, the ledger and the store and constructing the
    ledger (what ``Runtime.open`` does on the event loop) read no process:
    psutil (~15 ms) is first imported by the claim, in its worker thread."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from mind.shell.lease import SessionLease
        from mind.shell.mounts import MountLedger
        from mind.shell.store import Store
        root = Path({str(tmp_path / "state")!r})
        store = Store(root)
        ledger = MountLedger(store.root)
        print("psutil" in sys.modules)
        ledger.claim("0190a0a0-0000-7000-8000-000000000001").release()
        ledger.close()
        store.close()
        print("psutil" in sys.modules)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.split() == ["False", "True"]
