"""Built-in tool implementations: the I/O side of :mod:`mind.effects.tools`.

:class:`ToolRunner` runs one already-checked tool call in a session's
working directory and returns a :class:`ToolOutcome`; failures are outcomes,
never exceptions (docs/design/boundary.md §1). Only cancellation propagates, after a running
command's whole process tree has been killed (docs/design/processes.md §4).
"""

from mind.shell.tools._beneath import session_boundary
from mind.shell.tools._runner import ToolOutcome, ToolRunner

__all__ = ["ToolOutcome", "ToolRunner", "session_boundary"]
