"""``/permissions``: the session's "approve for this session" grants, listed
and revocable (docs/design/interactions.md §5).

``/permissions`` lists them, numbered, oldest first; ``/permissions revoke N``
(or a grant id) takes one back: a ``permission_revoked`` record (fsync), and
the next matching call asks again. Grants live in the session's journal, so
the list is the same after ``mind resume``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from mind.effects.grants import describe
from mind.shell.terminal_text import plain

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl


def run(repl: Repl, arg: str) -> bool:
    """Handle ``/permissions [revoke N|ID]``; always stays in the REPL."""
    interactions = repl.session.interactions
    grants = interactions.grants()
    words = arg.split()
    if words[:1] == ["revoke"] and len(words) == 2:
        key = words[1]
        chosen = next((g for i, g in enumerate(grants, 1) if key in (str(i), g.grant_id)), None)
        if chosen is None or not interactions.revoke(chosen.grant_id):
            repl.view.note(f"No permission {key}; /permissions lists them.", style="yellow")
        else:
            repl.view.note(
                f"Revoked: {plain(describe(chosen.scope), keep_joiners=False)}. "
                "Matching calls ask again."
            )
        return True
    if words:
        repl.view.note("Usage: /permissions, or /permissions revoke N", style="yellow")
        return True
    if not grants:
        repl.view.note("No permissions granted for this session (a at an approval grants one).")
        return True
    rows = [Text("Approved for this session", style="bold")]
    for index, grant in enumerate(grants, 1):
        rows.append(
            Text.assemble(
                (f"  {index}. ", "cyan"), plain(describe(grant.scope), keep_joiners=False)
            )
        )
    rows.append(Text("  /permissions revoke N takes one back", style="dim"))
    repl.view.flush_text()
    repl.view.print(*rows)
    return True
