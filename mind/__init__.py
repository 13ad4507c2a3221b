"""mind — a terminal coding agent and Python library whose sessions cannot be lost.

The public API (everything else is internal)::

    Runtime            open a state root; create/open sessions; list them
    Session            send/steer/queue(text) -> InputReceipt; submit(text) -> Turn;
                       events() over every turn; resume_pending() after a crash;
                       waiting / drop(id) for input no turn has taken yet
    Turn               async-iterate typed events; decide(call_id, ...); interrupt()
    TurnOutcome        the terminal event, the final answer text, and ``error``: the
                       StorageError (path, errno) when mind's state could not be written
    resolve_config     provider + approval settings from keywords, env and config.toml
    events             the typed event structs (``mind.events.MessageDeltaEvent`` ...)
    review             the approval-text rules: ``cut_for_display``, ``visible``
                       (an approval whose ``hidden_chars`` > 0 must not be
                       approved before the whole ``text`` was shown)
    errors             the error tree (``mind.errors.MindError`` ...)
"""

from mind import errors
from mind._version import __version__
from mind.effects import review
from mind.generated import events
from mind.shell.config import ResolvedConfig, resolve_config
from mind.shell.runtime import (
    Decision,
    Disposition,
    InputKind,
    InputReceipt,
    Runtime,
    Session,
    Turn,
    TurnOutcome,
)

__all__ = [
    "Decision",
    "Disposition",
    "InputKind",
    "InputReceipt",
    "ResolvedConfig",
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
