"""The README's settings table and ``config.toml`` example keep up with
:data:`mind.shell.config.SETTINGS` (the one table of settings): a setting
added there and not documented fails here."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mind.shell.config import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
_HEADER = "| setting | flag | environment | `config.toml` |"


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _table_rows() -> list[str]:
    """The rows of the README's settings table (header and rule left out)."""
    lines = _readme().splitlines()
    start = lines.index(_HEADER) + 2
    rows: list[str] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def _toml_example() -> dict[str, object]:
    """The README's ``config.toml`` example, parsed."""
    text = _readme()
    start = text.index("```toml\n") + len("```toml\n")
    return tomllib.loads(text[start : text.index("```", start)])


def test_every_setting_has_a_row_with_its_flag_and_environment() -> None:
    rows = _table_rows()
    for setting in SETTINGS:
        mine = [r for r in rows if f"`{setting.key}`" in r.rsplit("|", 2)[-2]]
        assert len(mine) == 1, f"{setting.key}: no row (or several) in the README table"
        row = mine[0]
        if setting.flag:
            assert f"`{setting.flag}" in row, f"{setting.key}: flag {setting.flag} not in {row}"
        for name in setting.env:
            assert name in row, f"{setting.key}: {name} not in {row}"
        for names in setting.env_by_provider.values():
            for name in names:
                assert name in row, f"{setting.key}: {name} not in {row}"


def test_the_config_example_holds_only_real_keys_and_the_compaction_ones() -> None:
    example = _toml_example()
    keys = {s.key for s in SETTINGS}
    assert set(example) - keys <= {"shell_environment"}, set(example) - keys
    assert {"auto_compact_percent", "model_context_window"} <= set(example)
