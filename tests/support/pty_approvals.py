"""The first steps of the REPL approval tests in a real pseudo-terminal:
start the REPL (the ``spawn`` fixture of ``tests/e2e/test_repl.py``), type
a prompt and wait until the approval card is on screen."""

from __future__ import annotations

import pexpect

from tests.e2e.test_repl import ENTER, Spawn, session_id_of, words


def at_the_card(
    spawn: Spawn, prompt: str, replies: list[dict[str, object]], *flags: str
) -> tuple[pexpect.spawn, str]:
    """Start the REPL with ``replies`` and ``flags``, send ``prompt`` (Enter)
    and wait for the card ("Allow shell?").

    Returns:
        ``(the REPL child, its session id)``; the card is shown, unanswered.
    """
    child = spawn(replies, *flags)
    sid = session_id_of(child)
    child.send(prompt + ENTER)
    child.expect(words("Allow shell?"))
    return child, sid
