"""Which sandbox backend works on this machine, probed once per process.

``MIND_SANDBOX_BACKEND=bwrap|landlock|none`` forces one (for tests and
diagnosis; ``none`` pretends neither works). Otherwise bubblewrap when
``bwrap --ro-bind / / ... true`` succeeds, else Landlock when the kernel
reports an ABI, else ``none`` — and ``none`` means sandboxed commands are
refused, never run unsandboxed (``docs/design/boundary.md`` "Sandbox").

:class:`BackendProbe` runs that probe in a worker thread, so that a session
starts (and sends its first model request) while bubblewrap starts ``true``
(~40 ms); whoever needs the answer waits for it.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from typing import Literal

from mind.shell.sandbox.bwrap import BWRAP

Backend = Literal["bwrap", "landlock", "none"]
BACKENDS: tuple[Backend, ...] = ("bwrap", "landlock", "none")
BACKEND_ENV = "MIND_SANDBOX_BACKEND"

_PROBE_TIMEOUT_S = 10.0


@functools.cache
def bwrap_works() -> bool:
    """Whether bubblewrap can build this sandbox here (a user namespace or root,
    mount and pid namespaces): runs ``true`` in the same layout, once."""
    program = shutil.which(BWRAP)
    if program is None:
        return False
    argv = [program, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/"]
    argv += ["--dev", "/dev", "--proc", "/proc", "true"]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI, 0 when unavailable."""
    from mind.shell.sandbox import landlock  # ctypes: loaded by the probe, not at start

    return landlock.abi_version()


def select_backend(environ: Mapping[str, str]) -> tuple[Backend, str]:
    """``(backend, why)``: the forced or first working backend, and a reason
    when it is ``none`` (for the refusal message).

    A forced backend that does not work here is ``none`` (never another one:
    a test forcing Landlock must not silently get bubblewrap).
    """
    forced = environ.get(BACKEND_ENV, "")
    if forced and forced not in BACKENDS:
        return "none", f"{BACKEND_ENV}={forced!r} is not one of {', '.join(BACKENDS)}"
    if forced == "none":
        return "none", f"{BACKEND_ENV}=none"
    if forced in ("", "bwrap") and bwrap_works():
        return "bwrap", ""
    if forced in ("", "landlock") and landlock_abi() >= 1:
        return "landlock", ""
    if forced:
        return "none", f"{BACKEND_ENV}={forced} does not work on this machine"
    return "none", "bubblewrap (bwrap) does not work here and the kernel has no Landlock"


class BackendProbe:
    """:func:`select_backend` for ``environ``, run once in a daemon worker
    thread started by the constructor.

    :meth:`result` waits for the answer: nothing that depends on the backend
    (a command's confinement, the session line naming it) goes on without
    it. A probe that fails unexpectedly answers ``none`` with the error as
    the reason, so commands are refused (fail closed), never run unconfined.
    """

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._answer: Future[tuple[Backend, str]] = Future()
        worker = threading.Thread(
            target=self._run, args=(dict(environ),), name="mind-sandbox-probe", daemon=True
        )
        worker.start()

    def _run(self, environ: dict[str, str]) -> None:
        try:
            answer = select_backend(environ)
        except Exception as exc:  # fail closed: no backend, with the reason
            answer = ("none", f"the sandbox probe failed: {type(exc).__name__}: {exc}")
        self._answer.set_result(answer)

    def done(self) -> bool:
        """Whether the answer is known (then :meth:`result` does not wait)."""
        return self._answer.done()

    def result(self) -> tuple[Backend, str]:
        """``(backend, why)`` as :func:`select_backend` gives it; waits for the
        probe (bounded by its own ``bwrap`` timeout, 10 s)."""
        return self._answer.result()
