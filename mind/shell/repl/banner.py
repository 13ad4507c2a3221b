"""What the REPL prints about a session when it shows it: the banner and the recap.

Pure functions of the session's journal and settings: the caller prints them.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from mind import __version__
from mind.generated import journal as jr
from mind.shell.call_summary import shorten
from mind.shell.config import ResolvedConfig
from mind.shell.runtime import Session
from mind.shell.terminal_text import plain


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
    """For a resumed session: how many turns, the last prompt and its own
    outcome (``[]`` when it has no turn); ``width`` is the terminal's, in columns.

    Rule: the outcome shown is the last prompt's turn's: its answer, or that
    it failed (with the failure's canonical message) or was interrupted; never
    an earlier turn's answer. From the records the session retains (every
    terminal record is one, and the newest prompt and answer): never the
    whole journal."""
    records = session.journal.records
    turns = recap_turns(session)
    if not turns:
        return []
    last = next((r for r in reversed(records) if isinstance(r, jr.UserMessage)), None)
    room = max(20, width - 12)
    out = [Text.assemble(("history   ", "dim"), f"{turns} turn{'s' if turns != 1 else ''}")]
    if last is None:
        return out
    out.append(Text.assemble(("last      ", "dim"), ("› ", "cyan"), _one_line(last.text, room)))
    outcome = _outcome(records, last.turn_id, room)
    if outcome.plain:
        out.append(Text.assemble(("          ", "dim"), outcome))
    return out


def _outcome(records: Sequence[jr.JournalRecord], turn_id: str, room: int) -> Text:
    """What turn ``turn_id`` came to, on one line of at most ``room`` columns:
    its answer (its newest text), else how it ended when that was not
    completion, else nothing (a turn that is still open or said nothing)."""
    answer = ""
    end: jr.TurnCompleted | None = None
    for r in reversed(records):
        if isinstance(r, jr.TurnCompleted) and r.turn_id == turn_id and end is None:
            end = r
        elif isinstance(r, jr.ModelRound) and r.turn_id == turn_id and r.text and not answer:
            answer = r.text
    if end is not None and end.status is not jr.TurnStatus.completed:
        why = f": {end.failure.message}" if isinstance(end.failure, jr.Failure) else ""
        style = "yellow" if end.status is jr.TurnStatus.interrupted else "red"
        return Text(_one_line(f"{end.status.value}{why}", room), style=style)
    return Text(_one_line(answer, room), style="dim")


def recap_turns(session: Session) -> int:
    """How many turns the session has had: those whose records it retains,
    and those a compaction let go of (``Journal.folded``)."""
    journal = session.journal
    seen = {r.turn_id for r in journal.records if isinstance(r, jr.TurnStarted | jr.TurnCompleted)}
    return len(seen) + journal.folded.closed_turns


def _one_line(text: str, width: int) -> str:
    """``text`` (journaled model or user text) sanitised, on one line, cut to ``width``."""
    return shorten(" ".join(plain(text).split()), width)
