"""The recap a resumed session's banner shows (``mind resume``), in a real
pseudo-terminal: the last prompt with its own outcome, never an earlier
turn's answer."""

from __future__ import annotations

import re

from tests.e2e.test_repl import ENTER, Spawn, _banners, exit_cleanly, spawn, words

__all__ = ["spawn"]  # the fixture, used by name


def _unstyled(text: str) -> str:
    """``text`` without its styling escapes."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_the_recap_pairs_a_failed_last_prompt_with_its_failure(spawn: Spawn) -> None:
    # One reply only: the second prompt's turn finds the script exhausted and fails.
    first = spawn([{"text": "Answer to h1."}])
    first.send("h1" + ENTER)
    first.expect(words("── completed"))
    first.send("h2" + ENTER)
    first.expect(words("── failed"))
    exit_cleanly(first)

    again = spawn([{"text": "unused"}], "resume")
    # The fixture waited for the first "› ": the recap's, after "last".
    assert re.search(words("last"), _banners[id(again)] + str(again.before)), again.before
    again.expect(words("Enter sends"))
    banner = str(again.before)  # the recap after "last ›"
    assert _unstyled(banner).startswith("h2"), banner
    assert re.search(words("failed:"), banner), banner
    assert "Answer to h1." not in banner, banner  # h1's answer is not h2's
    exit_cleanly(again)


def test_the_recap_shows_the_last_prompt_with_its_answer(spawn: Spawn) -> None:
    first = spawn([{"text": "Answer to h1."}])
    first.send("h1" + ENTER)
    first.expect(words("── completed"))
    exit_cleanly(first)

    again = spawn([{"text": "unused"}], "resume")
    # The fixture waited for the first "› ": the recap's, after "last".
    assert re.search(words("last"), _banners[id(again)] + str(again.before)), again.before
    again.expect(words("Enter sends"))
    banner = str(again.before)  # the recap after "last ›"
    assert _unstyled(banner).startswith("h1"), banner
    assert re.search(words("Answer to h1."), banner), banner
    exit_cleanly(again)
