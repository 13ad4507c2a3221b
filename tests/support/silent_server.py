"""A loopback server that accepts connections and then goes silent.

It reads whatever the client sends, optionally writes ``prefix`` (e.g. the
status line, headers and the first SSE chunk of a response), and then sends
nothing more until it is stopped: the "server that accepts and never answers"
(docs/design/providers.md §3). Every accepted connection is counted in :attr:`accepted`
(one per model-request attempt) and held open until :meth:`stop`.

In-process::

    with SilentServer() as server:
        ... --base-url {server.url}/v1 ...
        server.wait_for_connections(2, timeout_s=5)

As a subprocess: ``python -m tests.support.silent_server`` prints
``{"port": N, "url": "http://127.0.0.1:N"}`` and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from typing import Self

__all__ = ["SSE_PREFIX", "SilentServer"]

SSE_PREFIX = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
"""Headers of a streaming response whose body never comes."""


class SilentServer:
    """Accepts on ``127.0.0.1:<free port>``, sends ``prefix``, then nothing."""

    def __init__(self, prefix: bytes = b"") -> None:
        self.prefix = prefix
        self.accepted = 0
        self._sock: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._sock is not None, "server not started"
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.settimeout(0.05)  # so the loop sees stop() within 50 ms
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="silent-server", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(0.5)
            try:
                conn.recv(65536)  # the request (enough for the small bodies of tests)
                if self.prefix:
                    conn.sendall(self.prefix)
            except OSError:
                pass
            with self._lock:
                self._conns.append(conn)
                self.accepted += 1
                self._lock.notify_all()
            self._hold(conn)

    def _hold(self, conn: socket.socket) -> None:
        """What a held connection gets after ``prefix``: nothing (subclasses may
        keep it busy; :meth:`stop` closes it)."""

    def wait_for_connections(self, count: int, *, timeout_s: float) -> bool:
        """Wait until ``count`` connections were accepted (False at the deadline)."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self.accepted < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(left)
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    server = SilentServer().start()
    print(json.dumps({"port": server.port, "url": server.url}), flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()


if __name__ == "__main__":
    main()
