"""``resume.*``: resuming a long session costs what its model context costs, not its age.

Sessions of about 1 MB, 200 MB (~50k lines) and 1 GB are generated once,
through mind's own journal code (``Journal.append`` of a hosting process:
turns with tool rounds, a compaction every :data:`COMPACT_EVERY` turns, so
checkpoints are written where they are due), into the cache directory
``$MIND_BENCH_CACHE`` (default ``~/.cache/mind-bench``); later runs reuse them.
``make bench`` only: the test command never runs this.

Each row times ``mind exec --session ID "say ok"`` from spawn until a
loopback server receives its first model request (best of :data:`RUNS`), and
reads the child's peak RSS (``wait4``); the baseline is the same for the 1 MB
session in the same run. Targets: 200 MB ≤ 2× and peak RSS ≤ 200 MB; 1 GB ≤ 2×.
``request.encode`` times msgspec's encoding of a long request body against
the standard library's ``json.dumps`` of the same body. A note gives how
long the background check of each session's covered prefix takes
(docs/design/checkpoints.md §5), which the first request does not wait for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec

from benchmarks.cli_start import _FirstRequestServer, _Handler
from mind.generated import journal as jr
from mind.history import build_messages
from mind.shell.journal import Journal
from tests.support import records as rec

RUNS = 7
COMPACT_EVERY = 50
SIZES = {"1mb": 1 << 20, "200mb": 200 << 20, "1gb": 1 << 30}


class _SizeHandler(_Handler):
    server: _Server

    def do_POST(self) -> None:
        self.server.sizes.append(int(self.headers.get("content-length") or 0))
        super().do_POST()


class _Server(_FirstRequestServer):
    """:class:`_FirstRequestServer` that also keeps each request body's size (bytes)."""

    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = _SizeHandler
        self.sizes: list[int] = []


def cache_dir() -> Path:
    """Where the generated sessions live (``$MIND_BENCH_CACHE``)."""
    return Path(os.environ.get("MIND_BENCH_CACHE", Path.home() / ".cache" / "mind-bench"))


def _generate(home: Path, sid: str, size: int, mind: str, env: dict[str, str]) -> None:
    """Create session ``sid`` with ``mind exec --new-session``, then grow its
    journal to ``size`` bytes through ``Journal.append``."""
    subprocess.run(
        [mind, "exec", "--new-session", sid, "--cwd", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    path = home / "sessions" / sid / "journal.jsonl"
    payload = "y" * 14_000  # ~38 KB a turn of 9 lines: ~4.2 KB a line
    t = 0
    while path.stat().st_size < size:
        # Reopened after each compaction, as a resumed session would be: the
        # records in memory stay what the newest compaction left.
        with Journal.open(path, session_id=sid, checkpoints=True) as journal:
            _grow(journal, t, payload)
        t += COMPACT_EVERY


def _grow(journal: Journal, first: int, payload: str) -> None:
    """:data:`COMPACT_EVERY` turns from turn number ``first``, then a compaction
    keeping the last user message."""
    asked = None
    for t in range(first, first + COMPACT_EVERY):
        tid = f"bt{t}"
        journal.append(rec.turn_started(tid))
        asked = journal.append(rec.user_message(tid, f"bm{t}", payload[:2000], jr.Kind.prompt))
        calls = [rec.call(f"c{k}", "shell", '{"command":"true"}') for k in range(2)]
        journal.append(rec.model_round(tid, payload[:3000], calls, 0))
        for c in calls:
            journal.append(
                jr.ToolStarted(
                    seq=0, recorded_at_ms=0, turn_id=tid, call_id=c.call_id, name="shell"
                )
            )
            journal.append(
                jr.ToolResult(
                    seq=0,
                    recorded_at_ms=0,
                    turn_id=tid,
                    call_id=c.call_id,
                    name="shell",
                    status=jr.ToolStatus.ok,
                    output=payload,
                    synthetic=False,
                )
            )
        journal.append(rec.model_round(tid, payload[:4000], None, 1))
        journal.append(
            jr.TurnCompleted(
                seq=0,
                recorded_at_ms=0,
                turn_id=tid,
                status=jr.TurnStatus.completed,
                usage=jr.Usage(input_tokens=1, output_tokens=1),
                acknowledged=[f"bm{t}"],
            )
        )
    assert asked is not None
    cid, through = f"cp{first}", journal.next_seq - 1
    journal.append(
        jr.CompactionStarted(
            seq=0,
            recorded_at_ms=0,
            compaction_id=cid,
            trigger=jr.CompactionTrigger.auto,
            through_seq=through,
        ),
        sync=True,
    )
    journal.append(
        jr.CompactionCompleted(
            seq=0,
            recorded_at_ms=0,
            compaction_id=cid,
            through_seq=through,
            summary="Summary of the earlier conversation. " * 50,
            kept=[asked.seq],
        ),
        sync=True,
    )


def _resume(server: _Server, argv: list[str], env: dict[str, str]) -> tuple[float, int, int]:
    """``(seconds to the first request, peak RSS bytes, request body bytes)``."""
    before = len(server.arrivals)
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 or len(server.arrivals) <= before:
        raise RuntimeError(f"{argv[:4]} exited {proc.returncode}: {err[-2000:]!r}")
    return server.arrivals[before] - start, usage.ru_maxrss * 1024, server.sizes[before]


def bench_resume() -> tuple[list[tuple[str, float, float]], list[str]]:
    """Rows ``(resume.200mb, s, 1 MB s)``, ``(resume.1gb, s, 1 MB s)`` and
    ``(request.encode, msgspec s, json s)``, and lines of notes (sizes,
    peak RSS, request bytes)."""
    python = sys.executable
    mind = str(Path(python).with_name("mind"))
    home = cache_dir() / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MIND_", "OPENAI_"))}
    env |= {"MIND_HOME": str(home), "OPENAI_API_KEY": "sk-bench"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as cli_start: an installed mind has its .pyc
    home.mkdir(parents=True, exist_ok=True)
    os.chmod(home, 0o700)
    for name, size in SIZES.items():
        if not (home / "sessions" / f"bench-{name}" / "journal.jsonl").exists():
            print(f"generating the {name} session in {home} (once)", file=sys.stderr)
            _generate(home, f"bench-{name}", size, mind, env)
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01})
    thread.daemon = True
    thread.start()
    runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in SIZES}
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/v1"

        def argv(name: str) -> list[str]:
            out = [mind, "exec", "--provider", "openai-chat", "--base-url", base]
            return [*out, "--model", "bench", "--session", f"bench-{name}", "say ok"]

        for name in SIZES:  # untimed: bytecode, page cache, a checkpoint of an older format
            _resume(server, argv(name), env)
        for _ in range(RUNS):  # interleaved: a noisy neighbour hits every size alike
            for name in SIZES:
                runs[name].append(_resume(server, argv(name), env))
        # The fallback: no checkpoint, the whole journal read (once: it writes a new one).
        checkpoint = home / "sessions" / "bench-200mb" / "checkpoint.json"
        checkpoint.unlink()
        full = _resume(server, argv("200mb"), env)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    results = {
        name: (min(r[0] for r in got), max(r[1] for r in got), got[-1][2])
        for name, got in runs.items()
    }
    small = results["1mb"][0]
    rows = [
        ("resume.200mb", results["200mb"][0], small),
        ("resume.1gb", results["1gb"][0], small),
        _bench_encode(),
    ]
    notes = []
    for name, (secs, rss, body) in results.items():
        journal = home / "sessions" / f"bench-{name}" / "journal.jsonl"
        with journal.open("rb") as f:
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
        notes.append(
            f"resume {name}: journal {journal.stat().st_size / 1e6:.0f} MB / {lines} lines, "
            f"first request {secs:.2f} s, body {body / 1e6:.2f} MB, peak RSS {rss / 1e6:.0f} MB"
        )
    from benchmarks.__main__ import best_of  # __main__ imports this module

    opened = []
    for name in SIZES:
        path = home / "sessions" / f"bench-{name}" / "journal.jsonl"

        def reopen(p: Path = path, n: str = name) -> None:
            Journal.open(p, session_id=f"bench-{n}").close()

        secs = best_of(reopen)
        opened.append(f"{name} {secs * 1e3:.1f} ms")
    notes.append(f"Journal.open through the checkpoint (in process): {', '.join(opened)}")
    verified = []
    for name in SIZES:  # the hosting open's background check of the covered prefix
        path = home / "sessions" / f"bench-{name}" / "journal.jsonl"
        start = time.perf_counter()
        with Journal.open(path, session_id=f"bench-{name}", checkpoints=True) as hosted:
            check = hosted.verification
            if check is None:  # a short prefix: verified by the open itself
                where = "in the open"
                if hosted.report.checkpoint != "used":
                    raise RuntimeError(f"{name}: the open did not use its checkpoint")
            elif check.wait(600.0) and check.state == "clean":
                where = "in the background"
            else:
                raise RuntimeError(f"{name}: the prefix check did not end clean")
        verified.append(f"{name} {time.perf_counter() - start:.2f} s ({where})")
    notes.append(f"prefix verified (in process): {', '.join(verified)}")
    notes.append(
        f"resume 200mb without its checkpoint (full read, once): first request {full[0]:.2f} s, "
        f"peak RSS {full[1] / 1e6:.0f} MB"
    )
    return rows, notes


def _bench_encode() -> tuple[str, float, float]:
    """msgspec vs stdlib json encoding one long request body (a 2000-turn
    history as chat messages)."""
    from benchmarks.__main__ import _records, best_of

    messages = msgspec.to_builtins(build_messages(_records(2000)))
    body = {"model": "bench", "stream": True, "messages": messages}
    mine = best_of(lambda: msgspec.json.encode(body))
    stdlib = best_of(lambda: json.dumps(body, ensure_ascii=False).encode())
    return ("request.encode", mine, stdlib)
