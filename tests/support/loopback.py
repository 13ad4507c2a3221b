"""A loopback HTTP server run from a daemon thread: the shared base of the
test servers (:mod:`tests.support.replay_server`, :mod:`tests.support.fake_model`)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class OwnedServer(ThreadingHTTPServer):
    """The HTTP server; handlers reach their test server as ``self.server.owner``."""

    daemon_threads = True
    owner: Any


class LoopbackServer:
    """Serves ``handler`` on ``127.0.0.1:<free port>``; a context manager.

    Subclasses set :attr:`handler` and :attr:`thread_name` and call
    ``super().__init__()``.
    """

    handler: ClassVar[type[BaseHTTPRequestHandler]]
    thread_name: ClassVar[str] = "loopback-server"

    def __init__(self) -> None:
        self._server: OwnedServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after :meth:`start`)."""
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    def start(self) -> Self:
        """Bind and serve in a daemon thread."""
        self._server = OwnedServer(("127.0.0.1", 0), self.handler)
        self._server.owner = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},  # shutdown() returns within ~10 ms
            name=self.thread_name,
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
