"""A loopback server that answers 200 SSE headers, then only keep-alives, for ever.

Each accepted connection gets :data:`~tests.support.silent_server.SSE_PREFIX`
and then ``keepalive`` (default an SSE comment ``: ping``) as one HTTP chunk
every ``every_s`` seconds until :meth:`KeepAliveServer.stop`: the hung server
whose bytes keep an any-byte read timeout from ever firing
(docs/design/providers.md §3). It is a
:class:`~tests.support.silent_server.SilentServer` whose held connections
are kept busy.

In-process::

    with KeepAliveServer() as server:
        ... --base-url {server.url}/v1 ...
"""

from __future__ import annotations

import socket
import threading

from tests.support.silent_server import SSE_PREFIX, SilentServer

__all__ = ["KeepAliveServer"]


class KeepAliveServer(SilentServer):
    """Serves ``127.0.0.1:<free port>``; every connection gets keep-alives only."""

    def __init__(self, keepalive: bytes = b": ping\n\n", *, every_s: float = 0.02) -> None:
        super().__init__(prefix=SSE_PREFIX)
        self.keepalive = keepalive
        self.every_s = every_s
        self._senders: list[threading.Thread] = []

    def _hold(self, conn: socket.socket) -> None:
        thread = threading.Thread(target=self._send_keepalives, args=(conn,), daemon=True)
        thread.start()
        self._senders.append(thread)

    def _send_keepalives(self, conn: socket.socket) -> None:
        chunk = f"{len(self.keepalive):x}\r\n".encode() + self.keepalive + b"\r\n"
        try:
            while not self._stop.wait(self.every_s):
                conn.sendall(chunk)
        except OSError:
            return  # the client hung up, or stop() closed the connection

    def stop(self) -> None:
        super().stop()  # no connection is accepted after this
        for thread in self._senders:
            thread.join(timeout=2)
        self._senders.clear()
