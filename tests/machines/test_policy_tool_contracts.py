"""Built-in tool contracts and argument checking (pure; mind.effects.tools)."""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from mind.conversation import ToolSpec
from mind.effects.tools import BUILTIN_TOOLS, ToolContract, parse_arguments, tool_specs
from mind.errors import ToolArgumentsError


def test_builtin_tools_in_a_stable_order_with_read_only_flags() -> None:
    assert {name: c.read_only for name, c in BUILTIN_TOOLS.items()} == {
        "shell": False,
        "read_file": True,
        "write_file": False,
        "apply_patch": False,
        "list_dir": True,
    }
    assert [spec.name for spec in tool_specs()] == list(BUILTIN_TOOLS)
    assert all(isinstance(c, ToolContract) and c.spec.name == n for n, c in BUILTIN_TOOLS.items())


def test_every_builtin_tool_declares_its_effect_class() -> None:
    # docs/design/effects.md §2: what running it again does.
    assert {name: c.effect_class for name, c in BUILTIN_TOOLS.items()} == {
        "shell": "non_idempotent",
        "read_file": "read_only",
        "write_file": "idempotent",
        "apply_patch": "non_idempotent",
        "list_dir": "read_only",
    }
    # The approval policy's read-only flag and the effect class never disagree.
    assert all(c.read_only == (c.effect_class == "read_only") for c in BUILTIN_TOOLS.values())


def test_tool_specs_are_valid_draft_2020_12_object_schemas() -> None:
    for spec in tool_specs():
        assert isinstance(spec, ToolSpec)
        Draft202012Validator.check_schema(spec.parameters)
        assert spec.parameters["type"] == "object"
        assert spec.parameters["additionalProperties"] is False
        assert spec.description and len(spec.description) < 1200


def test_builtin_tools_cannot_be_changed() -> None:
    with pytest.raises(TypeError):
        BUILTIN_TOOLS["evil"] = BUILTIN_TOOLS["shell"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("shell", '{"command": "ls -la"}', {"command": "ls -la"}),
        (
            "shell",
            '{"command": ["ls", "-la"], "timeout_s": 2.5}',
            {"command": ["ls", "-la"], "timeout_s": 2.5},
        ),
        ("list_dir", "", {}),
        ("list_dir", "  \n", {}),
        (
            "read_file",
            '{"path": "a", "offset": 3, "limit": 10}',
            {"path": "a", "offset": 3, "limit": 10},
        ),
        ("write_file", '{"path": "a", "content": ""}', {"path": "a", "content": ""}),
        ("apply_patch", '{"patch": "*** Begin Patch"}', {"patch": "*** Begin Patch"}),
    ],
)
def test_parse_arguments_accepts(name: str, arguments: str, expected: dict[str, object]) -> None:
    assert parse_arguments(name, arguments) == expected


@pytest.mark.parametrize(
    ("name", "arguments", "detail"),
    [
        (
            "search",
            "{}",
            "unknown tool; the tools are: shell, read_file, write_file, apply_patch, list_dir",
        ),
        ("shell", '{"command": "ls"', "arguments are not valid JSON: Input data was truncated"),
        (
            "shell",
            "NaN",
            "arguments are not valid JSON: JSON is malformed: invalid character (byte 0)",
        ),
        ("shell", '["ls"]', "arguments must be a JSON object, got an array"),
        ("shell", '"ls"', "arguments must be a JSON object, got a string"),
        ("shell", "null", "arguments must be a JSON object, got null"),
        ("shell", "", "at $: 'command' is a required property"),
        ("shell", '{"command": []}', "at $.command: [] should be non-empty"),
        ("shell", '{"command": ["ls", 1]}', "at $.command[1]: 1 is not of type 'string'"),
        (
            "shell",
            '{"command": 7}',
            "at $.command: 7 is not valid under any of the given schemas "
            "(expected one of the types: string, array)",
        ),
        (
            "shell",
            '{"command": "ls", "timeout_s": 0}',
            "at $.timeout_s: 0 is less than or equal to the minimum of 0",
        ),
        (
            "shell",
            '{"command": "ls", "cwd": "/"}',
            "at $: Additional properties are not allowed ('cwd' was unexpected)",
        ),
        ("read_file", '{"path": "a", "offset": 0}', "at $.offset: 0 is less than the minimum of 1"),
        ("read_file", '{"path": "a", "limit": 1.5}', "at $.limit: 1.5 is not of type 'integer'"),
        ("write_file", '{"path": "a"}', "at $: 'content' is a required property"),
        ("list_dir", '{"path": ""}', "at $.path: '' should be non-empty"),
    ],
)
def test_parse_arguments_rejects(name: str, arguments: str, detail: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        parse_arguments(name, arguments)
    assert (caught.value.tool, caught.value.detail) == (name, detail)
    assert str(caught.value) == f"invalid arguments for tool {name!r}: {detail}"
