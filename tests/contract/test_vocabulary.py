"""One definition per word of mind's vocabulary.

``FailureKind`` and ``Disposition`` are defined once, in the schemas
(``specs/schemas/*.schema.json``), and generated once
(``mind.generated.vocabulary``): the journal's, the events' and the error
tree's views are that one definition. ``ProviderKind`` is the providers'.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pytest

import mind
from mind import errors
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.generated import vocabulary
from mind.machines import mailbox
from mind.shell import config, providers
from mind.shell.providers.failures import classify_failure

ROOT = Path(__file__).resolve().parents[2]
KINDS = {k.value for k in vocabulary.FailureKind}


def test_failure_kind_is_one_generated_enum() -> None:
    assert ev.FailureKind is jr.FailureKind is vocabulary.FailureKind
    assert set(get_args(errors.FailureKind)) == KINDS
    assert set(errors.FAILURE_KINDS) == KINDS


def test_every_failure_kind_has_one_canonical_message() -> None:
    assert set(errors.CANONICAL_MESSAGES) == KINDS
    assert all(m.strip() for m in errors.CANONICAL_MESSAGES.values())
    assert errors.TRANSIENT_KINDS <= KINDS


def _kinds_named_in_source() -> set[str]:
    """Every failure kind the code names: ``ProviderError("kind", ...)`` and
    ``FailureKind.kind`` / ``FailureKind("kind")`` anywhere under ``mind/``."""
    named: set[str] = set()
    for path in (ROOT / "mind").rglob("*.py"):
        if "generated" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "FailureKind"
            ):
                named.add(node.attr)
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                first = node.args[0]
                if name in ("ProviderError", "FailureKind") and isinstance(first, ast.Constant):
                    named.add(str(first.value))
    return named


def test_every_kind_the_code_produces_is_a_member() -> None:
    named = _kinds_named_in_source()
    assert {"server", "stream_cut", "internal", "storage", "output_limit"} <= named
    assert named - KINDS == set()
    classified = {
        classify_failure(status=status, code=code, message=message)
        for status in (None, 200, 400, 401, 403, 404, 405, 408, 413, 429, 500, 503, 529)
        for code in (None, "model_not_found", "rate_limit_error", "context_length_exceeded")
        for message in ("", "prompt is too long", "Unexpected endpoint or method")
    }
    assert classified - KINDS == set()


def test_disposition_is_one_definition() -> None:
    assert ev.Disposition is vocabulary.Disposition
    members = {d.value for d in vocabulary.Disposition}
    assert set(get_args(vocabulary.DispositionName)) == members
    assert set(get_args(mind.Disposition)) == members
    # the mailbox places an input in two of them (a turn start is the runtime's)
    assert set(get_args(mailbox.Placement)) < members


def test_provider_kind_is_the_providers_definition() -> None:
    assert config.ProviderKind is providers.ProviderKind
    assert get_args(providers.ProviderKind) == config.PROVIDER_KINDS


def test_codegen_refuses_a_shared_enum_whose_members_drift(tmp_path: Path) -> None:
    from codegen.schemas import SchemaError, emit_schema

    schemas = tmp_path / "specs" / "schemas"
    schemas.mkdir(parents=True)
    for name in ("journal", "events"):
        text = (ROOT / "specs" / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8")
        if name == "events":  # one schema grows a kind the owner does not have
            text = text.replace(
                '"storage"\n      ],', '"storage",\n        "cosmic_ray"\n      ],', 1
            )
            assert "cosmic_ray" in text
        (schemas / f"{name}.schema.json").write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    with pytest.raises(SchemaError, match=r"events\.schema\.json: enum FailureKind lists"):
        emit_schema(schemas / "events.schema.json", root=tmp_path, header="")
