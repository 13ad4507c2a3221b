"""The interactive ``mind`` REPL (DESIGN §7), one module per job; see ``app``."""

from mind.shell.repl.app import (
    Command,
    PickerRow,
    Repl,
    command_word,
    picker_rows,
)
from mind.shell.repl.launch import history_file, run_repl

__all__ = [
    "Command",
    "PickerRow",
    "Repl",
    "command_word",
    "history_file",
    "picker_rows",
    "run_repl",
]
