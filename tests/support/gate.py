"""A gate for the scripted provider's ``pause`` step (``mind/shell/providers/scripted.py``).

A reply with ``pause: <path>`` connects to the Unix socket at ``path`` after
its last delta and waits; the test's :meth:`Gate.wait_reached` returns once
it connected (the provider is paused exactly there), and :meth:`Gate.release`
lets it finish the reply. Races such as "input arrives between the last delta
and the round's end" become deterministic, with no sleeps. Works for a
provider in this process (wait in a worker thread:
``await anyio.to_thread.run_sync(gate.wait_reached)``) and in a ``mind``
subprocess alike.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
from pathlib import Path
from types import TracebackType


class Gate:
    """A listening Unix socket in a short temporary directory (``sun_path``
    holds ~107 bytes, too few for pytest's ``tmp_path``); a context manager."""

    def __init__(self) -> None:
        self._dir = Path(tempfile.mkdtemp(prefix="mind-gate-"))
        self.path = self._dir / "gate"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        self._server.listen(8)
        self._held: list[socket.socket] = []

    def wait_reached(self, timeout_s: float = 20.0) -> bool:
        """Wait at most ``timeout_s`` s until a paused reply connects (``False``: it did not)."""
        self._server.settimeout(timeout_s)
        try:
            conn, _ = self._server.accept()
        except TimeoutError:
            return False
        self._held.append(conn)
        return True

    def release(self) -> None:
        """Let every reply paused here go on."""
        for conn in self._held:
            with contextlib.suppress(OSError):  # the paused stream was cancelled meanwhile
                conn.sendall(b"go\n")
            conn.close()
        self._held.clear()

    def close(self) -> None:
        """Release what is held, stop listening, remove the directory."""
        self.release()
        self._server.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> Gate:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
