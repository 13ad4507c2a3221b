"""The approval card as lines (docs/design/interactions.md §7): the call
waiting for a decision, why, what it will do (a command after ``$``, a diff
in colour, the hidden-part rule), what ``a`` covers or ``k`` does, the whole
text for ``v``, and the line echoing an answer. Pure: rich ``Text`` from
events; :class:`mind.shell.render.TurnView` prints them."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from mind.effects.review import visible
from mind.generated import events as ev
from mind.shell.terminal_text import plain

_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("+", "green"), ("-", "red"), ("@@", "cyan"))


def approval_lines(text: str, text_format: str, *, continued: bool = False) -> list[Text]:
    """An approval text as indented lines: a command after ``$``, a diff with
    ``+`` green, ``-`` red and ``@@`` cyan (rich maps the colours to what the
    terminal supports), arguments as they are. Long lines wrap, never crop.
    ``continued``: ``text`` starts mid-text (the tail of a cut one)."""
    out: list[Text] = []
    for i, line in enumerate(visible(text).split("\n")):
        if text_format == "command":
            prefix = "  $ " if i == 0 and not continued else "    "
            out.append(Text(prefix, style="dim") + Text(line, style="bold"))
            continue
        style = ""
        if text_format == "diff":
            style = next((st for mark, st in _DIFF_STYLES if line.startswith(mark)), "")
        out.append(Text("  ") + Text(line, style=style))
    if len(out) > 1 and not out[-1].plain.strip():
        out.pop()  # the text's final newline
    for row in out:
        row.overflow = "fold"
    return out


def card_lines(event: ev.ApprovalRequestedEvent, *, viewed: bool = False) -> list[RenderableType]:
    """The card of ``event``: the event's full text, or (when it is longer
    than a bounded display and was not ``viewed``) its head and tail around
    a line saying how much is hidden and that ``v`` shows it all. Control
    characters are shown escaped (:func:`mind.effects.review.visible`),
    never dropped. "Asked before mind stopped" only for a question
    ``offered_again`` (asked before, not answered)."""
    kind = event.kind if isinstance(event.kind, ev.Kind) else ev.Kind.approval
    # A reconcile card asks about a call a crash left without an outcome;
    # a running card about a command a crash left running (waited for).
    title = {
        ev.Kind.reconcile: "Outcome unknown: ",
        ev.Kind.running: "Already running: ",
    }.get(kind)
    lines: list[RenderableType] = [
        Text.assemble(
            ("? ", "bold yellow"),
            (title or "Approval needed: ", "bold"),
            plain(event.reason, keep_joiners=False),
        ),
    ]
    if isinstance(event.cwd, str):
        lines.append(Text(f"  in {plain(event.cwd, keep_joiners=False)}", style="dim"))
    if event.offered_again is True:
        lines.append(Text("  (asked before mind stopped; not answered yet)", style="dim"))
    text, fmt = event.text, event.text_format.value
    if event.hidden_chars and not viewed:
        lines += approval_lines(text[: event.head_chars], fmt)
        lines.append(
            Text(
                f"  … {event.hidden_chars} characters hidden ({event.hidden_lines} line "
                "breaks) — press v to view all before approving",
                style="bold yellow",
            )
        )
        lines += approval_lines(text[len(text) - event.tail_chars :], fmt, continued=True)
    else:
        lines += approval_lines(text, fmt)
    grant = event.grant
    if isinstance(grant, str):
        lines.append(
            Text(f"  a = always allow in this session: {plain(grant, keep_joiners=False)}")
        )
    elif event.kind == ev.Kind.running:
        lines.append(Text("  k = kill it and every process it started (the model is told)"))
    elif kind == ev.Kind.approval and isinstance(event.choices, list):
        # Only an approval could be allowed for the session; a reconcile
        # card's choices are its own (r/f/t).
        lines.append(Text("  a is not offered: this call is asked each time", style="dim"))
    return lines


def whole_text_lines(event: ev.ApprovalRequestedEvent) -> list[RenderableType]:
    """The whole text of an approval between a head and an end line (the REPL's ``v``)."""
    name = plain(event.name, keep_joiners=False)
    count = event.text.count("\n") + (0 if event.text.endswith("\n") else 1)
    lines = f"{count} line" if count == 1 else f"{count} lines"
    return [
        Text(f"  the whole {name} call ({len(event.text)} characters):", style="bold"),
        *approval_lines(event.text, event.text_format.value),
        Text(
            f"  end of the {name} call ({len(event.text)} characters, {lines} shown)"
            " · y approves · n refuses",
            style="bold",
        ),
    ]


def decision_line(
    name: str, decision: str, *, grant: str | None = None, reason: str | None = None
) -> Text:
    """The echo of an answer: ``decision`` (a decision value, or the words
    ``yes`` / ``always`` / ``no``) to the call of tool ``name``; ``grant`` is
    what an approve_session covers (mind.effects.grants.describe),
    ``reason`` what a refusal told the model.

    Raises:
        KeyError: ``decision`` is none of those.
    """
    covered = (
        f"{plain(grant, keep_joiners=False)} will not ask again this session"
        if grant is not None
        else f"matching {name} calls will not ask again this session"
    )
    text = {
        "approve_once": ("  ↳ approved once", "green"),
        "approve_session": (
            f"  ↳ approved; {covered} (/permissions lists and revokes)",
            "green",
        ),
        "deny": (
            f"  ↳ refused: {plain(reason, keep_joiners=False)}" if reason else "  ↳ refused",
            "yellow",
        ),
        "abort": ("  ↳ stopped the turn", "yellow"),
        "rerun": ("  ↳ running it again", "yellow"),
        "mark_failed": ("  ↳ marked failed; the model is told it did not run again", "yellow"),
        "tell_model": ("  ↳ the model is told the outcome is unknown", "yellow"),
        "kill": ("  ↳ killing it and every process it started", "yellow"),
    }[{"yes": "approve_once", "always": "approve_session", "no": "deny"}.get(decision, decision)]
    return Text(text[0], style=text[1])


__all__ = ["approval_lines", "card_lines", "decision_line", "whole_text_lines"]
