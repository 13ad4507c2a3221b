"""A tool call and its result in a few words, as the REPL and ``mind exec``
print them: the one-line summary of a call's arguments, text cut to a width,
the first lines of an output. Pure and rich-free (``terminal_text.plain``
sanitises every piece), so any printer may use it."""

from __future__ import annotations

import json
from typing import Any

from mind.effects.patch import parse_patch, patch_paths
from mind.errors import PatchError
from mind.shell.terminal_text import plain

RESULT_PREVIEW_LINES = 2
"""How many lines of a tool's output are shown under its ``Called`` line."""

_ARGUMENT_KEYS = ("command", "path", "pattern", "query", "url")
"""Argument names whose value alone says what a call does (shown instead of JSON)."""


def describe_arguments(name: str, arguments: Any, limit: int = 200) -> str:
    """A one-line human summary of a tool call's arguments.

    Args:
        name: the tool name (``apply_patch`` is summarised by the files it touches).
        arguments: the parsed JSON arguments (or the raw text if invalid).
        limit: maximum length in characters; longer text ends with ``…``.
    """
    if name == "apply_patch" and isinstance(arguments, dict):
        try:  # the files it touches say what it does; the escaped patch does not
            paths = patch_paths(parse_patch(str(arguments.get("patch", ""))))
        except PatchError:
            paths = []
        if paths:
            return shorten(plain(", ".join(paths), keep_joiners=False), limit)
    if isinstance(arguments, dict):
        for key in _ARGUMENT_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value:
                text = value
                break
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                text = " ".join(value)
                break
        else:
            text = json.dumps(arguments, ensure_ascii=False) if arguments else ""
    else:
        text = str(arguments)
    return shorten(" ".join(plain(text, keep_joiners=False).split()), limit)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a trailing ``…`` when cut."""
    if limit <= 1:
        return text[:limit]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview_lines(output: str, max_lines: int = RESULT_PREVIEW_LINES) -> tuple[list[str], int]:
    """The first non-empty lines of a tool output and how many lines were left out."""
    lines = [line.rstrip() for line in plain(output).strip("\n").splitlines()]
    lines = [line for line in lines if line.strip()]
    return lines[:max_lines], max(0, len(lines) - max_lines)


__all__ = ["RESULT_PREVIEW_LINES", "describe_arguments", "preview_lines", "shorten"]
