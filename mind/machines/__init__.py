"""Pure wrappers binding generated statecharts to their data (docs/ARCHITECTURE.md).

A machine decides; the shell acts. Modules here take events and expose the
resulting state; they never read files, clocks, the environment or sockets.

- :mod:`mind.machines.turn` — :class:`~mind.machines.turn.TurnMachine`, one turn.

Transition-coverage tooling is test code: ``tests/support/transition_coverage.py``.
"""
