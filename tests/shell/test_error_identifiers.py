"""Errors carry the identifiers a person needs, and never invented ones
: a refusal about no single session has no session id
(not ``"*"``), and an owner whose pid cannot be seen has no pid (not 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mind.errors import MountRefused, SessionOccupiedError
from mind.shell.mounts import LEDGER_NAME, MountLedger


def test_a_refused_republish_names_no_session(tmp_path: Path) -> None:
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    ledger = MountLedger(root, sleep_s=lambda _s: None)
    ledger.claim("s1").settle(attached=True)
    (root / LEDGER_NAME).write_bytes(b"{not json")  # damaged under the running process
    with pytest.raises(MountRefused) as refused:
        ledger.republish()  # publishes this process's whole set, not one session
    assert refused.value.kind == "unavailable"
    assert refused.value.session_id is None
    assert str(refused.value).startswith("cannot check who holds it: ")


def test_an_occupied_session_with_an_unseen_holder_names_no_pid() -> None:
    occupied = SessionOccupiedError("s1", None)
    assert occupied.pid is None
    assert str(occupied) == (
        "session s1: occupied by another process (its pid is not visible from here)"
    )
    assert str(SessionOccupiedError("s1", 42)) == "session s1: occupied by pid 42"
