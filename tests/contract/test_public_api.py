"""The public surface of ``import mind``."""

from __future__ import annotations

import mind


def test_all_is_sorted_and_complete() -> None:
    names = list(mind.__all__)
    assert names == sorted(names)
    for name in names:
        assert hasattr(mind, name), name


def test_py_typed_is_shipped() -> None:
    from pathlib import Path

    assert (Path(mind.__file__).parent / "py.typed").is_file()
