"""``MIND_TRANSITION_LOG=DIR``: log every edge taken by charts mind's runtime creates.

Test instrumentation (the full test run counts, per chart, the edges the
runtime's own machines took — ``tests/conftest.py``). When the variable names
a directory, importing :mod:`mind.shell` installs a
:class:`TransitionLog` through :mod:`mind.machines.chart_observers`: every
chart created *by the runtime* — its creation passes through the hosting
layer that ``mind exec``, the REPL and embedders all go through
(:data:`RUNTIME_MODULES`) — gets a listener appending one line per taken
transition to ``DIR/<pid>-<nonce>.tsv``::

    <chart class>\\t<source state>\\t<event>\\t<target state>\\t<guard>\\n

(``event`` is empty for an eventless transition; ``guard`` as
:func:`~mind.machines.chart_observers.guard_label`). Charts a test creates
itself, directly or through a component it drives alone (a ``MountLedger``
of the mount model test), are not logged. Each line is one ``O_APPEND`` write, so a process
killed with SIGKILL (the crash tests) loses nothing it logged. Unset (always,
in normal use): nothing is installed and nothing is written.
"""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, final

from mind.machines import chart_observers

if TYPE_CHECKING:
    from statemachine import StateChart
    from statemachine.transition import Transition

__all__ = ["ENV", "RUNTIME_MODULES", "TransitionLog", "install_from_env"]

ENV: Final = "MIND_TRANSITION_LOG"
"""The environment variable naming the log directory."""

RUNTIME_MODULES: Final = (
    "mind.shell.runtime",
    "mind.shell.session",
    "mind.shell.turn_driver",
    "mind.shell.interactions",
    "mind.shell.turn_resume",
    "mind.shell.startup",
    "mind.shell.recovery",
    "mind.shell.effects",
    "mind.shell.effect_records",
    "mind.shell.open_reconciliation",
    "mind.shell.running_effects",
)
"""The runtime's hosting layer: ``Runtime`` (creating and opening sessions,
recovery), ``Session`` (input), the effect records (``effects``) and the
turn loop (a turn's task starts there). A chart whose creation has one of
these modules (or a submodule) on the stack was created by the runtime."""


def _created_by_runtime(frame: FrameType | None) -> bool:
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if any(module == m or module.startswith(f"{m}.") for m in RUNTIME_MODULES):
            return True
        frame = frame.f_back
    return False


class _ChartListener:
    """Writes the edges one chart takes (python-statemachine listener)."""

    def __init__(self, log: TransitionLog, chart: str) -> None:
        self._log = log
        self._chart = chart

    def after_transition(self, event: str, transition: Transition) -> None:
        if transition.initial:  # a compound state's default entry, not an edge
            return
        target = transition.target if transition.target is not None else transition.source
        name = str(event) if transition.events else ""
        guard = chart_observers.guard_label(transition)
        self._log.write(f"{self._chart}\t{transition.source.id}\t{name}\t{target.id}\t{guard}\n")


@final
class TransitionLog:
    """One process's transition log file in ``directory`` (created on first write).

    Args:
        directory: an existing directory; the file is ``<pid>-<nonce>.tsv``.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / f"{os.getpid()}-{secrets.token_hex(4)}.tsv"
        self._fd: int | None = None

    def listener_for(self, chart: StateChart[Any]) -> object | None:
        """The factory installed in :mod:`~mind.machines.chart_observers`:
        a listener for a chart the runtime created, ``None`` otherwise."""
        if not _created_by_runtime(sys._getframe(1)):
            return None
        return _ChartListener(self, type(chart).__name__)

    def write(self, line: str) -> None:
        """Append ``line`` (one ``write``; the file opens on first use).

        Raises:
            OSError: the directory is gone or not writable (a test-setup error).
        """
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(self._fd, line.encode("utf-8"))

    def install(self) -> None:
        """Log the charts created from now on."""
        chart_observers.install(self.listener_for)

    def uninstall(self) -> None:
        """Stop logging new charts and close the file."""
        chart_observers.uninstall(self.listener_for)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_installed: TransitionLog | None = None


def install_from_env(env: Mapping[str, str] = os.environ) -> TransitionLog | None:
    """Install this process's log if ``env`` names a directory (once per process).

    Returns:
        The installed log, or ``None`` when ``MIND_TRANSITION_LOG`` is unset or empty.
    """
    global _installed
    directory = env.get(ENV, "")
    if not directory:
        return None
    if _installed is None or _installed.directory != Path(directory):
        if _installed is not None:
            _installed.uninstall()
        _installed = TransitionLog(Path(directory))
        _installed.install()
    return _installed
