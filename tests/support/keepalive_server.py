"""A loopback server that answers 200 SSE headers, then only keep-alives, for ever.

Each accepted connection gets :data:`~tests.support.silent_server.SSE_PREFIX`
and then ``keepalive`` (default an SSE comment ``: ping``) as one HTTP chunk
every ``every_s`` seconds until :meth:`KeepAliveServer.stop`: the hung server
of issue #7 whose bytes keep an any-byte read timeout from ever firing.

In-process::

    with KeepAliveServer() as server:
        ... --base-url {server.url}/v1 ...
"""

from __future__ import annotations

import socket
import threading
from typing import Self

from tests.support.silent_server import SSE_PREFIX

__all__ = ["KeepAliveServer"]


class KeepAliveServer:
    """Serves ``127.0.0.1:<free port>``; every connection gets keep-alives only."""

    def __init__(self, keepalive: bytes = b": ping\n\n", *, every_s: float = 0.02) -> None:
        self.keepalive = keepalive
        self.every_s = every_s
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        assert self._sock is not None, "server not started"
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def start(self) -> Self:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.settimeout(0.05)  # so the loop sees stop() within 50 ms
        self._sock = sock
        self._spawn(self._accept)
        return self

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        chunk = f"{len(self.keepalive):x}\r\n".encode() + self.keepalive + b"\r\n"
        with conn:
            try:
                conn.settimeout(0.5)
                conn.recv(65536)  # the request (small bodies of tests)
                conn.sendall(SSE_PREFIX)
                while not self._stop.wait(self.every_s):
                    conn.sendall(chunk)
            except OSError:
                return  # the client hung up

    def stop(self) -> None:
        self._stop.set()
        if self._threads:
            self._threads[0].join(timeout=2)  # the acceptor: no thread is added after it
        for thread in list(self._threads):
            thread.join(timeout=2)
        self._threads.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
