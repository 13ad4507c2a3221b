"""The in-child launcher: apply a Landlock ruleset to itself, then ``execve``
the command (``python -I -S launch.py SPEC -- PROGRAM ARGS...``).

Standard library only and loaded by path (never ``preexec_fn``: mind's
runtime has threads, and forking a threaded process into Python code is
unsafe). ``SPEC`` is JSON ``{"writable": [...], "files": [...], "network":
bool}``. When the ruleset cannot be applied the command does not run: the
launcher prints ``mind sandbox: ...`` to stderr and exits
:data:`REFUSED_EXIT` (fail closed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from types import ModuleType

REFUSED_EXIT = 126
"""Exit status when the sandbox could not be applied or the program not started."""


def _landlock() -> ModuleType:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "landlock.py")
    spec = importlib.util.spec_from_file_location("_mind_landlock", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(args: list[str]) -> int:
    """Apply the ruleset in ``args[0]`` and exec ``args[2:]`` (``args[1]`` is ``--``).

    Returns:
        :data:`REFUSED_EXIT` on failure (on success it never returns).
    """
    if len(args) < 3 or args[1] != "--":
        print("mind sandbox: usage: launch.py SPEC -- PROGRAM [ARGS...]", file=sys.stderr)
        return REFUSED_EXIT
    try:
        spec = json.loads(args[0])
        _landlock().restrict_self(
            writable=spec["writable"], writable_files=spec["files"], network=spec["network"]
        )
    except (OSError, ValueError, KeyError, ImportError) as exc:
        print(f"mind sandbox: refused to run the command: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    try:
        os.execvp(args[2], args[2:])
    except OSError as exc:
        print(f"mind sandbox: cannot start {args[2]!r}: {exc.strerror}", file=sys.stderr)
    return REFUSED_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
