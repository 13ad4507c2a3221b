"""The in-child launcher: apply a Landlock ruleset (and, with the network off,
a seccomp filter refusing IPv4/IPv6 sockets) to itself, then ``execve``
the command (``python -I -S launch.py [--write DIR]... [--file PATH]...
--network on|off -- PROGRAM ARGS...``).

Standard library only and loaded by path (never ``preexec_fn``: mind's
runtime has threads, and forking a threaded process into Python code is
unsafe); it imports little (startup is paid by every sandboxed command).
When the ruleset cannot be applied the command does not run: the
launcher prints ``mind sandbox: ...`` to stderr and exits
:data:`REFUSED_EXIT` (fail closed).
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

REFUSED_EXIT = 126
"""Exit status when the sandbox could not be applied or the program not started."""


def _sibling(name: str) -> ModuleType:
    """``NAME.py`` beside this file, executed as a module (importlib's
    machinery would double the launcher's startup)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    module = ModuleType(f"_mind_{name}")
    module.__file__ = path
    with open(path, encoding="utf-8") as source:
        code = compile(source.read(), path, "exec")
    exec(code, module.__dict__)
    return module


def launcher_args(writable: list[str], files: list[str], *, network: bool) -> list[str]:
    """The launcher's options for a ruleset (everything before ``--``)."""
    out: list[str] = []
    for path in writable:
        out += ["--write", path]
    for path in files:
        out += ["--file", path]
    return [*out, "--network", "on" if network else "off"]


def main(args: list[str]) -> int:
    """Apply the ruleset the options describe and exec what follows ``--``.

    Returns:
        :data:`REFUSED_EXIT` on failure (on success it never returns).
    """
    writable: list[str] = []
    files: list[str] = []
    network: bool | None = None
    rest = list(args)
    while len(rest) >= 2 and rest[0] != "--":
        option, value = rest[0], rest[1]
        rest = rest[2:]
        if option == "--write":
            writable.append(value)
        elif option == "--file":
            files.append(value)
        elif option == "--network" and value in ("on", "off"):
            network = value == "on"
        else:
            rest = []
    if network is None or len(rest) < 2 or rest[0] != "--":
        print(
            "mind sandbox: usage: launch.py [--write DIR]... [--file PATH]... "
            "--network on|off -- PROGRAM [ARGS...]",
            file=sys.stderr,
        )
        return REFUSED_EXIT
    argv = rest[1:]
    try:
        _sibling("landlock").restrict_self(writable=writable, writable_files=files, network=network)
        if not network:  # after restrict_self, which set PR_SET_NO_NEW_PRIVS
            _sibling("seccomp").deny_inet_sockets()
    except OSError as exc:
        print(f"mind sandbox: refused to run the command: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"mind sandbox: cannot start {argv[0]!r}: {exc.strerror}", file=sys.stderr)
    return REFUSED_EXIT


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
