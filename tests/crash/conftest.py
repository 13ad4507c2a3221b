"""Fixtures of the crash tests: a fake model and a fresh case directory per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crash.harness import Case, new_case
from tests.support.fake_model import FakeModel


@pytest.fixture
def fake_model(tmp_path: Path) -> Iterator[FakeModel]:
    """A stateless fake model recording every request to ``tmp_path/requests.jsonl``."""
    with FakeModel(record_path=tmp_path / "requests.jsonl") as model:
        yield model


@pytest.fixture
def case(tmp_path: Path, fake_model: FakeModel) -> Case:
    """State root, session cwd and mind home under ``tmp_path``, wired to ``fake_model``."""
    return new_case(tmp_path, fake_model.base_url)
