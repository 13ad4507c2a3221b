"""Every error class mind defines is in the one tree of ``mind/errors.py``
: callers catch by the tree's shape, so a refusal outside
it (a bare ``RuntimeError`` or ``OSError`` subclass) escapes ``except
MindError`` and reaches the person as a traceback. Private control-flow
exceptions that never leave their module (a leading underscore) are exempt,
and so are the sandbox launcher's own modules: they run as a separate,
standard-library-only program (``python -I -S launch.py``, which cannot import
``mind``) and their errors end there as ``mind sandbox: ...`` on stderr and
exit 126, never as an exception in mind's process.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import mind
from mind.errors import MindError

LAUNCHER_MODULES = frozenset(
    {"mind.shell.sandbox.launch", "mind.shell.sandbox.landlock", "mind.shell.sandbox.seccomp"}
)
"""Loaded by path into the launcher program (see the module docstring)."""


def _mind_modules() -> list[str]:
    names = ["mind"]
    for info in pkgutil.walk_packages(mind.__path__, "mind."):
        names.append(info.name)
    return sorted(names)


def test_every_public_error_class_is_a_mind_error_defined_in_mind_errors() -> None:
    outside: list[str] = []
    for name in _mind_modules():
        if name in LAUNCHER_MODULES:
            continue
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)):
                continue
            if value.__module__ != name or attr.startswith("_"):
                continue  # imported from elsewhere, or private to its module
            if name != "mind.errors" or not issubclass(value, MindError):
                outside.append(f"{name}.{attr}")
    assert outside == []
