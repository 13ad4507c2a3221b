"""mind — a terminal coding agent and Python library whose sessions cannot be lost.

The public API (everything else is internal)::

    Runtime            open a state root; create/open sessions; list them
    Session            send/steer/queue(text) -> InputReceipt; submit(text) -> Turn;
                       events() over every turn; resume_pending() after a crash;
                       waiting / drop(id) for input no turn has taken yet
                       pending_interactions() / answer(interaction_id, decision,
                       reason=None) -> Answered | NotTaken (a no-op with a message)
                       running_effects() -> [RunningEffect] (commands a crash left
                       running) / kill_effect(effect_id) (the whole tree)
    Turn               async-iterate typed events; decide(call_id, ...); interrupt()
    TurnOutcome        the terminal event, the final answer text, and ``error``: the
                       StorageError (path, errno) when mind's state could not be written
    resolve_config     provider + approval settings from keywords, env and config.toml
    events             the typed event structs (``mind.events.MessageDeltaEvent`` ...)
    review             the approval-text rules: ``cut_for_display``, ``visible``
                       (an approval whose ``hidden_chars`` > 0 must not be
                       approved before the whole ``text`` was shown)
    errors             the error tree (``mind.errors.MindError`` ...)

``import mind`` loads only ``__version__``: each name above is imported on
first use (PEP 562), so importing the pure core (``mind.machines.turn``)
or running ``mind --version`` never pays for httpx, apsw or the REPL.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from mind._version import __version__

if TYPE_CHECKING:
    from mind import errors
    from mind.effects import review
    from mind.generated import events
    from mind.shell.config import ResolvedConfig, resolve_config
    from mind.shell.running_effects import RunningEffect
    from mind.shell.runtime import (
        Answered,
        Decision,
        Disposition,
        InputKind,
        InputReceipt,
        NotTaken,
        Runtime,
        Session,
        Turn,
        TurnOutcome,
    )

_LAZY: dict[str, tuple[str, str | None]] = {
    "Answered": ("mind.shell.runtime", "Answered"),
    "Decision": ("mind.shell.runtime", "Decision"),
    "Disposition": ("mind.shell.runtime", "Disposition"),
    "InputKind": ("mind.shell.runtime", "InputKind"),
    "InputReceipt": ("mind.shell.runtime", "InputReceipt"),
    "NotTaken": ("mind.shell.runtime", "NotTaken"),
    "ResolvedConfig": ("mind.shell.config", "ResolvedConfig"),
    "Runtime": ("mind.shell.runtime", "Runtime"),
    "RunningEffect": ("mind.shell.running_effects", "RunningEffect"),
    "Session": ("mind.shell.runtime", "Session"),
    "Turn": ("mind.shell.runtime", "Turn"),
    "TurnOutcome": ("mind.shell.runtime", "TurnOutcome"),
    "errors": ("mind.errors", None),
    "events": ("mind.generated.events", None),
    "resolve_config": ("mind.shell.config", "resolve_config"),
    "review": ("mind.effects.review", None),
}
"""Public name → (module, attribute in it; None: the module itself). When a
class moves, only its row changes."""


def __getattr__(name: str) -> Any:
    """Import the public ``name`` on first use and keep it in the package.

    Raises:
        AttributeError: ``name`` is not part of the public API.
    """
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'mind' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    """The module's names plus the public names not imported yet."""
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Answered",
    "Decision",
    "Disposition",
    "InputKind",
    "InputReceipt",
    "NotTaken",
    "ResolvedConfig",
    "RunningEffect",
    "Runtime",
    "Session",
    "Turn",
    "TurnOutcome",
    "__version__",
    "errors",
    "events",
    "resolve_config",
    "review",
]
