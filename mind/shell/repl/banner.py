"""What the REPL prints about a session when it shows it: the banner and the recap.

Pure functions of the session's journal and settings: the caller prints them.
"""

from __future__ import annotations

from rich.text import Text

from mind import __version__
from mind.generated import journal as jr
from mind.shell.config import ResolvedConfig
from mind.shell.render import plain, shorten
from mind.shell.runtime import Session


def banner_lines(session: Session, config: ResolvedConfig, width: int) -> list[Text]:
    """The start-up banner: version, session, provider, cwd, sandbox, approval,
    the recap of a resumed session, the keys, and a blank line.

    Args:
        session: the attached session.
        config: the resolved config (a scripted provider is marked as such).
        width: the terminal's width in columns.
    """
    resumed = recap_turns(session) > 0
    label = session.provider.label
    # A scripted provider is never mistaken for a real model.
    provider = (
        Text(label, style="bold magenta") if config.provider.kind == "scripted" else Text(label)
    )
    return [
        Text.assemble(("mind ", "bold"), (__version__, "dim")),
        Text.assemble(
            ("session   ", "dim"), session.session_id, (" (resumed)" if resumed else "", "dim")
        ),
        Text.assemble(("provider  ", "dim"), provider),
        Text.assemble(("cwd       ", "dim"), str(session.cwd)),
        Text.assemble(("sandbox   ", "dim"), session.sandbox.describe()),
        Text.assemble(("approval  ", "dim"), str(session.approval)),
        *recap_lines(session, width),
        Text(
            "Enter sends (steers a running turn) · Tab queues · Esc interrupts · /help",
            style="dim",
        ),
        Text(""),
    ]


def recap_lines(session: Session, width: int) -> list[Text]:
    """For a resumed session: how many turns, the last prompt and answer
    (``[]`` when it has no turn); ``width`` is the terminal's, in columns.
    From the records the session retains (every terminal record is one, and
    the newest prompt and answer): never the whole journal."""
    records = session.journal.records
    turns = recap_turns(session)
    if not turns:
        return []
    prompt = next((r.text for r in reversed(records) if isinstance(r, jr.UserMessage)), "")
    answer = next(
        (r.text for r in reversed(records) if isinstance(r, jr.ModelRound) and r.text), ""
    )
    room = max(20, width - 12)
    out = [Text.assemble(("history   ", "dim"), f"{turns} turn{'s' if turns != 1 else ''}")]
    if prompt:
        out.append(Text.assemble(("last      ", "dim"), ("› ", "cyan"), _one_line(prompt, room)))
    if answer:
        out.append(Text.assemble(("          ", "dim"), (_one_line(answer, room), "dim")))
    return out


def recap_turns(session: Session) -> int:
    """How many turns the session has had: those whose records it retains,
    and those a compaction let go of (``Journal.folded``)."""
    journal = session.journal
    seen = {r.turn_id for r in journal.records if isinstance(r, jr.TurnStarted | jr.TurnCompleted)}
    return len(seen) + journal.folded.closed_turns


def _one_line(text: str, width: int) -> str:
    """``text`` (journaled model or user text) sanitised, on one line, cut to ``width``."""
    return shorten(" ".join(plain(text).split()), width)
