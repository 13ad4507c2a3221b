"""A loopback HTTP server that replays recorded provider responses byte for byte.

In-process use (a context manager; the server runs in a daemon thread)::

    with ReplayServer() as server:
        case = FIXTURES / "cassettes/openai-chat/stream_text_with_usage_gpt4o"
        server.enqueue(Reply.from_case(case, splits=[10, 500]))
        ... POST to server.url + "/chat/completions" ...
        server.requests[0].json()        # the body the client sent

As a subprocess (for end-to-end tests of ``mind exec``)::

    python -m tests.support.replay_server --case DIR/NAME [--case ...] \
        [--split 10,200 | --random-splits SEED] [--record FILE.jsonl] [--repeat-last]

prints one JSON line ``{"port": N, "url": "http://127.0.0.1:N"}`` on stdout,
then serves the cases in order, one per request, until SIGTERM/SIGINT (or
until stdin closes with ``--until-stdin-eof``). ``--record`` appends one JSON
line per request received (``{"method", "path", "headers", "body"}``; the body
parsed as JSON when it is).

A reply is sent with the recorded status, content type and headers (including
``content-encoding``); the body is sent unchanged, as HTTP/1.1 chunked
transfer encoding with one chunk per split piece and a flush after each, so
the client's reads end exactly at the split offsets (h11 never merges two
chunks into one read). ``truncate_at`` sends only that many body bytes and
then drops the connection without the terminating chunk (a stream cut).
When the queue is empty the server answers 599 with a JSON error.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.support.loopback import LoopbackServer, OwnedServer

HOLD_LIMIT_S = 10.0
"""Longest a held reply waits for its release (a test that forgot it still ends)."""

__all__ = [
    "HOLD_LIMIT_S",
    "RecordedRequest",
    "ReplayServer",
    "Reply",
    "fixtures_dir",
    "random_splits",
]


def fixtures_dir() -> Path:
    """The recorded provider traffic the replay tests serve:
    ``tests/fixtures/{cassettes,quirks}`` of this repository (never a copy
    outside it, so a plain clone tests exactly what it holds). Missing data is
    a broken checkout: the tests that read it fail, none is skipped."""
    return Path(__file__).resolve().parents[1] / "fixtures"


def random_splits(length: int, count: int, seed: int) -> list[int]:
    """``count`` distinct split offsets in ``(0, length)``, deterministic per seed."""
    if length < 2:
        return []
    rng = random.Random(seed)
    return sorted(rng.sample(range(1, length), min(count, length - 1)))


@dataclass
class Reply:
    """One response to serve.

    Attributes:
        status: HTTP status.
        body: exact body bytes (already encoded per ``headers``).
        content_type: Content-Type header value ("" to omit).
        headers: extra headers, e.g. ``{"content-encoding": "gzip"}``.
        splits: byte offsets where the body is cut into separate chunks.
        truncate_at: if set, send only this many body bytes then drop the
            connection (no terminating chunk).
        hold_at: if set (with ``release``), stop after this many body bytes
            until ``release`` is set (at most ``HOLD_LIMIT_S``): a stream
            that pauses mid-answer.
        release: the event that lets a held reply go on.
    """

    status: int = 200
    body: bytes = b""
    content_type: str = "text/event-stream"
    headers: dict[str, str] = field(default_factory=dict)
    splits: list[int] = field(default_factory=list)
    truncate_at: int | None = None
    hold_at: int | None = None
    release: threading.Event | None = None

    @classmethod
    def from_case(
        cls,
        prefix: Path,
        *,
        splits: list[int] | None = None,
        truncate_at: int | None = None,
    ) -> Reply:
        """Load ``<prefix>.response`` + ``<prefix>.meta.json`` (cassette or quirk).

        The meta's ``status``, ``content_type`` (an "assumed" note is
        stripped), ``headers`` and ``transport.split_at_bytes`` are honoured;
        ``splits`` adds offsets to the recorded ones.
        """
        meta = json.loads(Path(f"{prefix}.meta.json").read_text(encoding="utf-8"))
        body = Path(f"{prefix}.response").read_bytes()
        ctype = str(meta.get("content_type") or "")
        ctype = ctype.split(" (", 1)[0].strip()
        headers = {str(k).lower(): str(v) for k, v in (meta.get("headers") or {}).items()}
        enc = meta.get("content_encoding")
        if enc and "content-encoding" not in headers:
            headers["content-encoding"] = str(enc)
        transport = meta.get("transport") or {}
        recorded = [int(x) for x in transport.get("split_at_bytes") or []]
        all_splits = sorted({*recorded, *(splits or [])})
        return cls(
            status=int(meta.get("status", 200)),
            body=body,
            content_type=ctype,
            headers=headers,
            splits=all_splits,
            truncate_at=truncate_at,
        )

    def pieces(self) -> list[bytes]:
        """The body cut at ``splits`` (and ``truncate_at``); no empty pieces."""
        body = self.body if self.truncate_at is None else self.body[: self.truncate_at]
        splits = {*self.splits, *([self.hold_at] if self.hold_at is not None else [])}
        cuts = [0, *sorted({s for s in splits if 0 < s < len(body)}), len(body)]
        return [body[a:b] for a, b in itertools.pairwise(cuts) if b > a]


@dataclass
class RecordedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OwnedServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        req = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
        )
        reply = self.server.owner._next(req)
        self.send_response(reply.status)
        if reply.content_type:
            self.send_header("Content-Type", reply.content_type)
        for key, value in reply.headers.items():
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            sent = 0
            for piece in reply.pieces():
                if sent == reply.hold_at and reply.release is not None:
                    reply.release.wait(HOLD_LIMIT_S)
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.flush()
                sent += len(piece)
            if reply.truncate_at is not None:
                # Drop the connection without the last chunk: a cut stream.
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away (e.g. it stopped after the terminal event)


class ReplayServer(LoopbackServer):
    """Serve queued :class:`Reply` values on ``127.0.0.1:<free port>``.

    Args:
        replies: initial queue.
        repeat_last: serve the last reply again when the queue runs out
            (instead of answering 599).
        record_path: append every received request as a JSON line here.
    """

    handler = _Handler
    thread_name = "replay-server"

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        repeat_last: bool = False,
        record_path: Path | None = None,
    ) -> None:
        self._queue: list[Reply] = list(replies or [])
        self._lock = threading.Lock()
        self._last: Reply | None = None
        self.repeat_last = repeat_last
        self.record_path = record_path
        self.requests: list[RecordedRequest] = []
        super().__init__()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *replies: Reply) -> None:
        """Add replies to serve, in order."""
        with self._lock:
            self._queue.extend(replies)

    def _next(self, req: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(req)
            if self.record_path is not None:
                try:
                    parsed: Any = json.loads(req.body) if req.body else None
                except ValueError:
                    parsed = req.body.decode("utf-8", errors="replace")
                record = {
                    "method": req.method,
                    "path": req.path,
                    "headers": req.headers,
                    "body": parsed,
                }
                with self.record_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(record) + "\n")
            if self._queue:
                self._last = self._queue.pop(0)
                return self._last
            if self.repeat_last and self._last is not None:
                return self._last
        return Reply(
            status=599,
            content_type="application/json",
            body=b'{"error": {"message": "replay queue exhausted", "type": "replay"}}',
        )


def main(argv: list[str] | None = None) -> int:
    """Subprocess entry point (see module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--case", action="append", default=[], help="DIR/NAME (no suffix)")
    parser.add_argument("--split", default="", help="comma-separated byte offsets")
    parser.add_argument("--random-splits", type=int, default=None, metavar="SEED")
    parser.add_argument("--record", type=Path, default=None, help="JSONL file of requests")
    parser.add_argument("--repeat-last", action="store_true")
    parser.add_argument(
        "--until-stdin-eof", action="store_true", help="exit when stdin closes (default: on signal)"
    )
    args = parser.parse_args(argv)
    replies = []
    for case in args.case:
        reply = Reply.from_case(Path(case))
        if args.split:
            reply.splits = sorted({*reply.splits, *(int(x) for x in args.split.split(","))})
        if args.random_splits is not None:
            extra = random_splits(len(reply.body), 8, args.random_splits)
            reply.splits = sorted({*reply.splits, *extra})
        replies.append(reply)
    server = ReplayServer(replies, repeat_last=args.repeat_last, record_path=args.record)
    server.start()
    print(json.dumps({"port": server.port, "url": server.url}), flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.until_stdin_eof:
            sys.stdin.read()
        else:
            while not stop.wait(3600):
                pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
