"""The recorded provider traffic the tests replay lives in the repository
(``tests/fixtures/``), so a plain clone runs every replay test with none
skipped for missing data."""

from __future__ import annotations

from pathlib import Path

from tests.support.replay_server import fixtures_dir

ROOT = Path(__file__).resolve().parents[2]


def test_recorded_traffic_is_found_inside_the_repository() -> None:
    found = fixtures_dir()
    assert found == ROOT / "tests" / "fixtures"
    for group in ("cassettes", "quirks"):
        cases = list((found / group).glob("*/*.meta.json"))
        assert cases, f"no recorded cases under {found / group}"
