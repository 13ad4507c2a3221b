"""``make bench``: mind's hot paths as ratios against raw baselines.

Each benchmark times mind's code and a minimal raw baseline doing the same
job with the standard library, in the same process and run, and prints
``ratio = mind / baseline``. Timings use the best of several repeats
(``time.perf_counter``) to damp scheduler noise on a shared 2-core machine.

    journal.append      Journal.append (CRC, schema check, O_APPEND)  vs  os.write of the same bytes
    journal.open        Journal.open of N records (CRC + typed decode) vs  json.loads per line
    sse+chat.parse      SSEDecoder + ChatStreamParser over a long stream vs bytes.split + json.loads
    history.build       build_messages over a long journal          vs  one list comprehension
    sessions.list       Store.summaries of 1000 sessions (index.db) vs  64 KiB head+tail per journal
    repl.render.fence   REPL (pty) showing a 20k-token code fence   vs  the same stream written raw
    repl.render.md      REPL (pty) showing 20k tokens of markdown   vs  the same stream written raw
                        (``/list`` rows: vs the deltas written from a list; see repl_render)
    shell.true.supervised  shell tool running `true` supervised   vs  the direct spawn it replaced
    sandbox.true.*      shell tool running `true` in the sandbox      vs  the same tool unsandboxed
    cli.version         `mind --version`, spawn to exit (≤ 3×)     vs  `python -c pass`
    exec.first_request  `mind exec`, spawn to first request (≤ 1.5×) vs  a bare httpx.post script
                        (both against a loopback server; see cli_start)
    resume.200mb        `mind exec --session` of a 200 MB / ~50k-line session, spawn to first
                        request (≤ 2×, peak RSS ≤ 200 MB)  vs  the same for a 1 MB session
    resume.1gb          the same for a 1 GB session (≤ 2×)  vs  the 1 MB session
                        (generated once into $MIND_BENCH_CACHE; see resume)
    request.encode      msgspec encoding of a long request body  vs  json.dumps of it
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.cli_start import bench_cli_start
from benchmarks.mount_claims import bench_mount_claims
from benchmarks.repl_render import TOKENS, bench_repl_render
from benchmarks.resume import bench_resume
from benchmarks.sandbox_start import bench_sandbox_start
from benchmarks.shell_supervised import bench_shell_supervised
from mind.generated import journal as jr
from mind.history import build_messages
from mind.shell.journal import Journal
from mind.shell.providers.openai_chat import ChatStreamParser
from mind.shell.providers.sse import SSEDecoder
from mind.shell.store import Store

REPEATS = 5


def best_of(fn: Callable[[], Any], repeats: int = REPEATS) -> float:
    """Best wall time of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _records(n_turns: int) -> list[jr.JournalRecord]:
    z: dict[str, Any] = {"seq": 0, "recorded_at_ms": 0}
    out: list[jr.JournalRecord] = [
        jr.SessionStarted(**z, session_id="bench", cwd="/tmp", mind_version="0")
    ]
    for t in range(n_turns):
        tid = f"turn_{t}"
        out.append(
            jr.TurnStarted(**z, turn_id=tid, provider="p", model="m", approval=jr.Approval.never)
        )
        out.append(
            jr.UserMessage(
                **z,
                turn_id=tid,
                message_id=f"m{t}",
                text="please fix the bug " * 5,
                kind=jr.Kind.prompt,
            )
        )
        call = jr.RecordedToolCall(call_id=f"c{t}", name="shell", arguments='{"command": "ls -la"}')
        out.append(
            jr.ModelRound(
                **z,
                turn_id=tid,
                round=0,
                text="",
                reasoning="",
                tool_calls=[call],
                finish=jr.Finish.tool_calls,
                usage=jr.Usage(input_tokens=10, output_tokens=5),
                provider="p",
                provider_items=[],
            )
        )
        out.append(
            jr.ToolResult(
                **z,
                turn_id=tid,
                call_id=f"c{t}",
                name="shell",
                status=jr.ToolStatus.ok,
                output="total 0\n" + "-rw-r--r-- file\n" * 20,
                synthetic=False,
            )
        )
        out.append(
            jr.ModelRound(
                **z,
                turn_id=tid,
                round=1,
                text="Done. " * 30,
                reasoning="",
                tool_calls=[],
                finish=jr.Finish.stop,
                usage=jr.Usage(input_tokens=10, output_tokens=5),
                provider="p",
                provider_items=[],
            )
        )
        out.append(
            jr.TurnCompleted(
                **z,
                turn_id=tid,
                status=jr.TurnStatus.completed,
                usage=jr.Usage(input_tokens=20, output_tokens=10),
                acknowledged=[f"m{t}"],
            )
        )
    return out


def bench_journal(tmp: Path, records: list[jr.JournalRecord]) -> list[tuple[str, float, float]]:
    path = tmp / "j" / "journal.jsonl"
    raw_path = tmp / "raw.jsonl"

    def mind_append() -> None:
        if path.exists():
            path.unlink()
        path.parent.mkdir(exist_ok=True)
        with Journal.open(path, create=True) as j:
            for r in records:
                j.append(r)

    mind_append()
    lines = path.read_bytes().splitlines(keepends=True)

    def raw_append() -> None:
        fd = os.open(raw_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            for line in lines:
                os.write(fd, line)
        finally:
            os.close(fd)

    def mind_open() -> None:
        with Journal.open(path) as j:
            assert len(j.records) == len(records)

    def raw_open() -> None:
        with path.open("rb") as f:
            for line in f:
                json.loads(line)

    return [
        ("journal.append", best_of(mind_append), best_of(raw_append)),
        ("journal.open", best_of(mind_open), best_of(raw_open)),
    ]


def _chat_stream(n_chunks: int) -> bytes:
    parts = []
    for i in range(n_chunks):
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": f"word{i} "}, "finish_reason": None}],
        }
        parts.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    final = {
        "id": "x",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": n_chunks},
    }
    parts.append(b"data: " + json.dumps(final).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def bench_stream(body: bytes, read_size: int = 4096) -> tuple[str, float, float]:
    reads = [body[i : i + read_size] for i in range(0, len(body), read_size)]

    def mind_parse() -> None:
        dec = SSEDecoder()
        parser = ChatStreamParser()
        for piece in reads:
            for event in dec.feed(piece):
                parser.feed_event(event)
        for event in dec.finish():
            parser.feed_event(event)

    def raw_parse() -> None:
        for block in body.split(b"\n\n"):
            if block.startswith(b"data: {"):
                json.loads(block[6:])

    return ("sse+chat.parse", best_of(mind_parse), best_of(raw_parse))


def bench_history(records: list[jr.JournalRecord]) -> tuple[str, float, float]:
    def mind_build() -> None:
        build_messages(records)

    def raw_build() -> None:
        [r for r in records if not isinstance(r, jr.TurnStarted)]

    return ("history.build", best_of(mind_build), best_of(raw_build))


def _head_tail_summary(path: Path, peek: int = 64 * 1024) -> tuple[str, str, str]:
    """The pre-index listing of one session: JSON lines of its head and tail."""
    cwd = title = status = ""
    with path.open("rb") as f:
        head = f.read(peek)
        f.seek(max(0, os.fstat(f.fileno()).st_size - peek))
        tail = f.read(peek)
    for line in head.split(b"\n")[:-1]:
        rec = json.loads(line)
        if rec["type"] == "session_started":
            cwd = rec["cwd"]
        elif rec["type"] == "user_message":
            title = " ".join(rec["text"].split())[:80]
            break
    for line in reversed(tail.split(b"\n")[1:-1]):
        rec = json.loads(line)
        if rec["type"] in ("turn_completed", "turn_started"):
            status = rec.get("status", "running")
            break
    return cwd, title, status


def bench_listing(tmp: Path, n_sessions: int, turns: int) -> tuple[str, float, float]:
    """Listing ``n_sessions`` sessions via index.db vs reading each journal's head and tail.

    Every session holds the same journal of ``turns`` turns (about 1.9 KB per
    turn); the index is rebuilt first, so listing costs one stat per journal.
    """
    store = Store(tmp / "listing")
    try:
        with Journal.open(tmp / "one.jsonl", create=True) as j:
            for r in _records(turns):
                j.append(r)
        raw = (tmp / "one.jsonl").read_bytes()
        for i in range(n_sessions):
            store.journal_path(f"s{i:05d}").parent.mkdir(mode=0o700)
            store.journal_path(f"s{i:05d}").write_bytes(raw)
        assert store.rebuild_index() == n_sessions

        def mind_list() -> None:
            assert len(store.summaries()) == n_sessions

        def raw_list() -> None:
            for sid in store.session_ids():
                _head_tail_summary(store.journal_path(sid))

        return ("sessions.list", best_of(mind_list), best_of(raw_list))
    finally:
        store.close()


def main() -> int:
    """Run every benchmark and print a table of ratios."""
    records = _records(2000)  # 12,001 records
    rows: list[tuple[str, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        rows += bench_journal(Path(tmp), records)
        rows.append(bench_listing(Path(tmp), n_sessions=1000, turns=100))
    rows.append(bench_stream(_chat_stream(20_000)))
    rows.append(bench_history(records))
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(bench_mount_claims(Path(tmp)))
    rows += bench_repl_render()
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(bench_shell_supervised(Path(tmp)))
    with tempfile.TemporaryDirectory() as tmp:
        rows += bench_sandbox_start(Path(tmp))
    with tempfile.TemporaryDirectory() as tmp:
        rows += bench_cli_start(Path(tmp))
    resumed, notes = bench_resume()
    rows += resumed
    print(f"{'benchmark':<24} {'mind (ms)':>10} {'baseline (ms)':>14} {'ratio':>7}")
    for name, mine, base in rows:
        print(f"{name:<24} {mine * 1e3:>10.1f} {base * 1e3:>14.1f} {mine / base:>7.2f}x")
    print(
        f"(records: {len(records)}; stream chunks: 20000; REPL answers: {TOKENS} tokens; "
        f"best of {REPEATS})"
    )
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
