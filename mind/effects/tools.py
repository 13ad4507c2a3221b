"""Built-in tool contracts: what the model sees and how its arguments are checked.

Pure: names, descriptions and JSON Schemas (Draft 2020-12) of the built-in
tools, the effect class of each (read-only, idempotent, non-idempotent:
docs/design/effects.md §2), and :func:`parse_arguments`, which turns the
raw argument text of a tool call into a checked ``dict`` or raises
:class:`~mind.errors.ToolArgumentsError` (the runtime turns that into an
error tool result). The implementations live in :mod:`mind.shell.tools`
(docs/design/turn.md §7: tool contract → policy → approval → execute).

Relative paths in every tool resolve against the session's working
directory.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import msgspec

from mind.conversation import ToolSpec
from mind.errors import ToolArgumentsError
from mind.machines.effect import EffectClass

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

SHELL_DEFAULT_TIMEOUT_S = 60.0
"""``shell`` timeout when the call gives none, in seconds."""

SHELL_MAX_TIMEOUT_S = 600.0
"""Largest ``shell`` timeout, in seconds; larger requests are reduced to it."""

READ_FILE_DEFAULT_LIMIT = 2000
"""Lines ``read_file`` returns when the call gives no ``limit``."""


class ToolContract(msgspec.Struct, frozen=True, kw_only=True):
    """One built-in tool.

    Attributes:
        spec: name, description and JSON Schema of the arguments (what the
            model is offered).
        effect_class: what running it again does (docs/design/effects.md §2):
            ``read_only`` changes nothing, ``idempotent`` leaves the same
            state when repeated, ``non_idempotent`` may do it twice; decides
            whether a call prepared before a crash may re-run
            (:func:`mind.machines.effect.safe_to_rerun`).
    """

    spec: ToolSpec
    effect_class: EffectClass

    @property
    def read_only(self) -> bool:
        """True when the tool never changes files or runs commands; the
        approval policy runs read-only tools without asking."""
        return self.effect_class == "read_only"


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {
    "type": "string",
    "minLength": 1,
    "description": "File path, absolute or relative to the working directory.",
}

_SHELL = ToolSpec(
    name="shell",
    description=(
        "Run a command in the working directory and return its output and exit code. "
        "`command` is either a string run by /bin/sh -c (pipes, redirection and && work), "
        "or an array of strings run directly as argv without a shell. "
        "stdin is empty, so the command must not wait for input. "
        "It runs in a sandbox; a failure such as 'Read-only file system' or 'Permission denied' "
        "may be the sandbox: then ask with `sandbox: escalated` and a `justification`. "
        "stdout is returned first, then stderr after a '[stderr]' line, then 'exit code: N'; "
        "a nonzero exit is reported as an error result. Long output keeps its beginning and end. "
        f"The command is killed (with every process it started) after `timeout_s` seconds "
        f"(default {SHELL_DEFAULT_TIMEOUT_S:g}, at most {SHELL_MAX_TIMEOUT_S:g}); background "
        "processes still running when it exits are killed too, so nothing outlives it."
    ),
    parameters=_object(
        {
            "command": {
                "anyOf": [
                    {"type": "string", "minLength": 1},
                    {"type": "array", "items": {"type": "string"}, "minItems": 1},
                ],
                "description": "Shell command string, or argv array (program first).",
            },
            "sandbox": {
                "enum": ["sandboxed", "escalated"],
                "description": (
                    "Default `sandboxed`: the command runs in the sandbox (it can write only "
                    "inside the workspace, cannot change .git/, has no network). `escalated` "
                    "asks the user to run it OUTSIDE the sandbox; give `justification`."
                ),
            },
            "justification": {
                "type": "string",
                "description": "Why the command must run outside the sandbox (shown to the user).",
            },
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": (
                    f"Seconds before the command is killed; default {SHELL_DEFAULT_TIMEOUT_S:g}, "
                    f"values above {SHELL_MAX_TIMEOUT_S:g} are reduced to {SHELL_MAX_TIMEOUT_S:g}."
                ),
            },
        },
        ["command"],
    ),
)

_READ_FILE = ToolSpec(
    name="read_file",
    description=(
        "Read a text file. Returns its lines numbered from 1, like `cat -n` (number, tab, "
        f"line). Reads {READ_FILE_DEFAULT_LIMIT} lines from `offset` unless `limit` says "
        "otherwise; long output is cut and says which offset to continue from. "
        "Bytes that are not UTF-8 are shown as U+FFFD."
    ),
    parameters=_object(
        {
            "path": _PATH,
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "1-based line number to start at (default 1).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": f"Most lines to return (default {READ_FILE_DEFAULT_LIMIT}).",
            },
        },
        ["path"],
    ),
)

_WRITE_FILE = ToolSpec(
    name="write_file",
    description=(
        "Write a whole file: create it (and missing parent directories) or replace its entire "
        "content. The write is atomic. To change part of an existing file, use apply_patch."
    ),
    parameters=_object(
        {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["path", "content"],
    ),
)

_APPLY_PATCH = ToolSpec(
    name="apply_patch",
    description=(
        "Edit files with a patch. Nothing is written unless every hunk applies. Format:\n"
        "*** Begin Patch\n"
        "*** Add File: path/new.py\n"
        "+each line of the new file, prefixed with +\n"
        "*** Delete File: path/old.py\n"
        "*** Update File: path/app.py\n"
        "*** Move to: path/renamed.py   (optional)\n"
        "@@ def handler():   (optional line to find first; may be just @@)\n"
        " unchanged context line\n"
        "-line to remove\n"
        "+line to add\n"
        "*** End Patch\n"
        "In an update, every line starts with ' ' (context), '-' or '+'. Give about 3 lines of "
        "context around each change, copied exactly from the file; start a new @@ hunk for "
        "each separate region, in file order."
    ),
    parameters=_object(
        {
            "patch": {
                "type": "string",
                "minLength": 1,
                "description": "The whole patch from '*** Begin Patch' to '*** End Patch'.",
            }
        },
        ["patch"],
    ),
)

_LIST_DIR = ToolSpec(
    name="list_dir",
    description=(
        "List a directory (not recursive): one entry per line, sorted by name, directories "
        "with a trailing '/', symbolic links as 'name -> target'."
    ),
    parameters=_object(
        {
            "path": {
                "type": "string",
                "minLength": 1,
                "description": "Directory path, default '.' (the working directory).",
            }
        },
        [],
    ),
)

BUILTIN_TOOLS: Mapping[str, ToolContract] = MappingProxyType(
    {
        # A command may append, send, delete: running it twice is not running it once.
        "shell": ToolContract(spec=_SHELL, effect_class="non_idempotent"),
        "read_file": ToolContract(spec=_READ_FILE, effect_class="read_only"),
        # The whole content replaces the file atomically: the same call twice
        # leaves the same file.
        "write_file": ToolContract(spec=_WRITE_FILE, effect_class="idempotent"),
        # A second application of an Add/Delete/Move or of context that still
        # matches after the first is not proven to leave the same files.
        "apply_patch": ToolContract(spec=_APPLY_PATCH, effect_class="non_idempotent"),
        "list_dir": ToolContract(spec=_LIST_DIR, effect_class="read_only"),
    }
)
"""Every built-in tool by name, in the order they are offered to the model."""


def effect_class(name: str) -> EffectClass:
    """The effect class of tool ``name``; an unknown tool is ``non_idempotent``
    (fail closed: what is not known to be safe to repeat is never repeated)."""
    contract = BUILTIN_TOOLS.get(name)
    return contract.effect_class if contract is not None else "non_idempotent"


@functools.cache
def _validators() -> Mapping[str, Draft202012Validator]:
    """One checked validator per built-in tool, built at the first tool call:
    jsonschema costs ~50 ms to import, which ``import mind.effects.tools`` (and
    so ``mind --version`` or the pure core) must not pay.

    Raises:
        jsonschema.SchemaError: a built-in schema is not valid Draft 2020-12 (a bug).
    """
    from jsonschema import Draft202012Validator

    for contract in BUILTIN_TOOLS.values():
        Draft202012Validator.check_schema(contract.spec.parameters)
    return MappingProxyType(
        {name: Draft202012Validator(c.spec.parameters) for name, c in BUILTIN_TOOLS.items()}
    )


def tool_specs() -> list[ToolSpec]:
    """The specs of the built-in tools, in the stable order of :data:`BUILTIN_TOOLS`."""
    return [contract.spec for contract in BUILTIN_TOOLS.values()]


def parse_arguments(name: str, arguments: str) -> dict[str, Any]:
    """Decode and check the raw arguments of one tool call.

    Args:
        name: the tool name the model used.
        arguments: the raw JSON text of the arguments; ``""`` (or only
            whitespace) means ``{}`` (docs/design/providers.md §5: empty input is ``{}``).

    Returns:
        The arguments as a JSON object (``dict`` from key to JSON value).

    Raises:
        ToolArgumentsError: ``name`` is not a built-in tool, the text is not
            JSON, the JSON is not an object, or the object violates the tool's
            JSON Schema (Draft 2020-12); the detail names the failing path,
            e.g. ``at $.timeout_s: 0 is less than or equal to the minimum of 0``.
    """
    if name not in BUILTIN_TOOLS:
        known = ", ".join(BUILTIN_TOOLS)
        raise ToolArgumentsError(name, f"unknown tool; the tools are: {known}")
    text = arguments.strip() or "{}"
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise ToolArgumentsError(name, f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ToolArgumentsError(name, f"arguments must be a JSON object, got {_json_type(value)}")
    from jsonschema.exceptions import best_match  # loaded by _validators() already

    error = best_match(_validators()[name].iter_errors(value))
    if error is not None:
        raise ToolArgumentsError(name, f"at {_json_path(error)}: {_message(error)}")
    return value


def _message(error: ValidationError) -> str:
    if error.validator == "anyOf" and isinstance(error.validator_value, list):
        kinds = [s.get("type") for s in error.validator_value if isinstance(s, dict)]
        return f"{error.message} (expected one of the types: {', '.join(map(str, kinds))})"
    return error.message


def _json_path(error: ValidationError) -> str:
    parts = ["$"]
    for key in error.absolute_path:
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return "".join(parts)


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"
