"""Answering questions: y / n / a / s (approvals), r / f / t (reconcile),
k (a command still running), ``v`` to view all, and the question's line.

y approves once, n refuses — after an optional one-line reason the model
reads (typed in the editor, Enter sends it; Enter alone: no reason; the
draft is put aside meanwhile and given back) —, a approves for this session
(a durable grant, scoped by mind.effects.grants, the card's ``a =`` line
says what it covers; refused when the card does not offer it), s stops the
turn (a durable abort: the question is never offered again). Enter while a
card waits sends nothing: the status line says so — but ``/exit`` / ``/quit``
leave (the question stays unanswered for the next resume), and the letters
of such a command being typed are typing, never an answer.
A reconcile card asks about a call a crash left without an outcome
(docs/design/effects.md §4): r runs it again, f marks it failed, t tells the
model the outcome is unknown; the keys are on the card's line. A running
card says the resumed turn waits for a command a crash left running (its
command, since when): k kills it and every process it started; any other
key is typing (the wait may be long).
Answers go to the session's interactions by the card's interaction id; a
key that is not among the card's choices answers nothing and says which do.

Which questions wait is the turn's (``Turn.pending_approvals``, read through
:meth:`~mind.shell.repl.hosting.Hosted.questions`); the REPL keeps only
what it showed and which call's whole text was viewed. This module owns how
a key answers the oldest one. A person never approves text
they could not see: while part of a call's text is hidden and was not shown
with ``v``, y / a are refused (n always works). A y / n / a typed less than
``TYPING_GAP_S`` after the previous character of a draft is typing, not an
answer; the rest of an answer word (``es`` of ``yes``, then Enter) typed
right after its first letter is swallowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, final

from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyPressEvent
from rich.cells import cell_len

from mind.generated import events as ev
from mind.shell.runtime import Decision
from mind.shell.terminal_text import plain

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

TYPING_GAP_S: Final = 0.5
"""An approval key typed within this many seconds of the previous character
of a draft is taken as typing, not as an answer (guards against answering a
question that appeared mid-word)."""

ANSWER_WORDS: Final[Mapping[str, Decision]] = {
    "yes": "approve_once",
    "no": "deny",
    "always": "approve_session",
    "stop": "abort",
    "rerun": "rerun",
    "failed": "mark_failed",
    "tell": "tell_model",
    "kill": "kill",
}
"""The answers to a question (approval: yes / no / always / stop; reconcile:
rerun / failed / tell; a running command: kill). The first letter answers at once; the rest of the
word (and an Enter) typed right after it belong to the answer and are
swallowed, so ``yes`` never leaves ``es`` in the draft."""

CHOICE_KEYS: Final[Mapping[str, tuple[str, str, str]]] = {
    "approve_once": ("y", "yes", "yes"),
    "deny": ("n", "no", "no"),
    "approve_session": ("a", "always (this session)", "always"),
    "abort": ("s", "stop the turn", "stop"),
    "rerun": ("r", "re-run it", "re-run"),
    "mark_failed": ("f", "mark it failed", "failed"),
    "tell_model": ("t", "tell the model", "tell"),
    "kill": ("k", "kill it and every process it started", "kill it"),
}
"""Each choice a card may offer: its key, long and short words on the card's
line. A choice added to a question needs its entry here and in
:data:`ANSWER_WORDS` (and, when its kind is new, in :func:`_answers`)."""

APPROVAL_KEYS: Final = ("approve_once", "deny", "approve_session", "abort")
"""The keys an approval card shows (those it offers), in this order."""


@final
class Approvals:
    """How keys answer the attached session's oldest approval question.

    Args:
        repl: the REPL it belongs to (the attached session, its turn, the clock).
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl
        self._answer_rest: str | None = None
        """The rest of the approval answer just given by its first letter."""
        self._answer_at = -math.inf
        self._refusing: ev.ApprovalRequestedEvent | None = None
        """The question whose refusal reason is being typed (after ``n``)."""
        self._draft = Document()
        """The draft put aside while a refusal reason is typed."""
        self._enter_pressed: str | None = None
        """The call id of the card Enter was pressed at (its footer says why
        nothing was sent)."""

    @property
    def pending(self) -> list[ev.ApprovalRequestedEvent]:
        """The attached session's questions waiting for y / n / a, oldest first."""
        return self._repl.hosting.current.questions()

    @property
    def only_waiting(self) -> bool:
        """True while the oldest question is a running card: the turn only
        waits for a command (maybe long), so Enter and Tab send and queue
        as when no card is shown; only ``k`` answers it."""
        pending = self.pending
        return bool(pending) and pending[0].kind == ev.Kind.running

    @property
    def refusing(self) -> bool:
        """True while the reason of a refusal (after ``n``) is being typed:
        keys are text, Enter ends it."""
        return self._refusing is not None

    def start_refusal(self) -> None:
        """``n``: put the draft aside and let the person type a one-line
        reason for the oldest question (the footer says so)."""
        pending = self.pending
        if not pending:
            return
        buffer = self._repl.prompt.default_buffer
        self._draft = buffer.document
        buffer.set_document(Document(), bypass_readonly=True)
        self._refusing = pending[0]
        self._repl.invalidate()

    def finish_refusal(self) -> None:
        """Enter after ``n``: refuse with the typed reason (none when empty;
        newlines become spaces) and give the draft back. A question that was
        resolved meanwhile (the turn stopped) is left as it is."""
        event = self._refusing
        if event is None:
            return
        buffer = self._repl.prompt.default_buffer
        reason = " ".join(buffer.text.split()) or None
        self._refusing = None
        buffer.set_document(self._draft, bypass_readonly=True)
        self._draft = Document()
        if all(e.call_id != event.call_id for e in self.pending):
            self._repl.view.note("That question was no longer waiting: nothing was refused.")
            self._repl.invalidate()
            return
        self.decide("deny", reason=reason)

    def on_enter(self) -> None:
        """Enter while a card waits: nothing is sent; the footer says what
        the card waits for (and that a draft is kept)."""
        pending = self.pending
        self._enter_pressed = pending[0].call_id if pending else None
        self._repl.invalidate()

    def decide(self, decision: Decision, *, reason: str | None = None) -> None:
        """Answer the oldest pending approval question (``reason``: on deny,
        what the model is told).

        A yes (or always) is refused, with the reason on screen, while part
        of the call's text was hidden and not viewed with ``v``: a person
        never approves text they could not see. No is always accepted.
        """
        repl = self._repl
        pending = self.pending
        turn = repl.session.current
        if not pending or turn is None:
            return
        event = pending[0]
        offered = _offered(event)
        if decision not in offered:
            keys = ", ".join(f"{CHOICE_KEYS[c][0]} {CHOICE_KEYS[c][2]}" for c in offered)
            why = (
                "This call cannot be approved for the whole session (what it covers cannot "
                "be judged safely): y approves it once, n refuses."
                if decision == "approve_session" and event.kind != ev.Kind.reconcile
                else f"This question is answered with {keys}."
            )
            repl.view.note(why, style="yellow")
            repl.invalidate()
            return
        if decision in ("approve_once", "approve_session", "rerun") and self.hidden(event):
            repl.view.note(
                f"Not approved: {event.hidden_chars} characters of this "
                f"{plain(event.name, keep_joiners=False)} call are hidden. "
                "Press v to view all, then y; n refuses.",
                style="yellow",
            )
            repl.invalidate()
            return
        self._enter_pressed = None
        if isinstance(event.interaction_id, str):
            # The pending list drops it.
            repl.session.answer(event.interaction_id, decision, reason=reason)
        else:
            turn.decide(event.call_id, decision, reason=reason)
        grant = event.grant if isinstance(event.grant, str) else None
        repl.view.show_decision(
            event.call_id,
            plain(event.name, keep_joiners=False),
            decision,
            grant=grant,
            reason=reason,
        )
        repl.invalidate()

    def hidden(self, event: ev.ApprovalRequestedEvent) -> bool:
        """Whether part of the approval text of ``event`` was never shown."""
        return bool(event.hidden_chars) and event.call_id not in self._repl.hosting.current.viewed

    def view_text(self) -> None:
        """Show the whole text of the oldest pending approval (``v``)."""
        pending = self.pending
        if not pending:
            return
        event = pending[0]
        self._repl.view.show_approval_text(event)
        self._repl.hosting.current.viewed.add(event.call_id)
        self._repl.invalidate()

    def on_view_key(self, event: KeyPressEvent) -> None:
        """``v`` while a question waits: show its whole text, unless it is typing."""
        self._answer_rest = None
        if self._repl.clock() - self._repl.last_typed_at < TYPING_GAP_S:
            event.current_buffer.insert_text(event.data)
            return
        self.view_text()

    def on_answer_key(self, event: KeyPressEvent) -> None:
        """A y / n / a while a question waits: the answer, unless it is typing."""
        if self.swallow(event.data):
            return
        clock = self._repl.clock
        draft = event.current_buffer.text
        typing_command = self._repl.commands.typing_card_command(draft + event.data)
        if typing_command or clock() - self._repl.last_typed_at < TYPING_GAP_S:
            # The person was typing a draft when the question appeared, or
            # types /exit at the card: this key belongs to the draft.
            event.current_buffer.insert_text(event.data)
            return
        word = next(w for w in ANSWER_WORDS if w[0] == event.data.lower())
        pending = self.pending
        if pending and not _answers(pending[0], ANSWER_WORDS[word]):
            # r / f / t answer only a reconcile card, k only a running one: at
            # another card they are typing (``fix`` must not lose its ``f``).
            event.current_buffer.insert_text(event.data)
            return
        if ANSWER_WORDS[word] == "deny":
            self.start_refusal()  # the reason (or Enter) decides
        else:
            self.decide(ANSWER_WORDS[word])
        self._answer_rest = word[1:]
        self._answer_at = clock()

    def swallowing(self) -> bool:
        """True while keys may still be the rest of the word just answered."""
        return self._answer_rest is not None and self._repl.clock() - self._answer_at < TYPING_GAP_S

    def swallow(self, key: str) -> bool:
        """Whether ``key`` continues the answer just given (``es`` of ``yes``,
        then Enter): it is dropped. Any other key ends the answer."""
        if not self.swallowing() or self._answer_rest is None:
            self._answer_rest = None
            return False
        if key == "\r" or (self._answer_rest and key.lower() == self._answer_rest[0]):
            self._answer_rest = None if key == "\r" else self._answer_rest[1:]
            self._answer_at = self._repl.clock()
            if key == "\r" and self.refusing:
                self.finish_refusal()  # ``no`` + Enter: refused without a reason
            return True
        self._answer_rest = None
        return False

    def footer(self, event: ev.ApprovalRequestedEvent, width: int) -> StyleAndTextTuples:
        """``Allow shell?  v view all…  y yes  n no  a always…`` (a reconcile
        card: ``Outcome of shell unknown:  r re-run it  f mark it failed  t
        tell the model``) in at most ``width`` columns: the longest wording
        that fits, the keys always kept (explanations are dropped before a
        key would be cut)."""
        name = plain(event.name, keep_joiners=False)
        if self._refusing is not None:
            return [
                ("class:approval", f"Refusing {name}: a reason for the model, then Enter "),
                ("class:status.dim", "(Enter alone: no reason; your draft comes back)"),
            ]
        hidden = self.hidden(event)
        if event.kind == ev.Kind.reconcile:
            question = f"Outcome of {name} unknown: "
            shown = _offered(event)
        elif event.kind == ev.Kind.running:
            question = f"Waiting for {name}, already running: "
            shown = _offered(event)
        else:
            question = f"Allow {name}? "
            offered = not isinstance(event.choices, list) or "approve_session" in event.choices
            shown = [c for c in APPROVAL_KEYS if offered or c != "approve_session"]
        always = ""  # the long wording of ``a``: what the grant covers
        if isinstance(event.grant, str) and "only this exact command" in event.grant:
            always = "always (this exact command, this session)"
        elif isinstance(event.grant, str) and "`" in event.grant:
            always = f"always ({plain(event.grant.split('`')[1], keep_joiners=False)})"
        draft = bool(self._repl.prompt.default_buffer.text)
        if self._enter_pressed == event.call_id:
            # Enter was pressed at this card: say why nothing was sent.
            waits: StyleAndTextTuples = [
                ("class:status.warn", "Enter sends nothing while this question waits: answer "),
                *[("class:approval.key", f" {CHOICE_KEYS[c][0]} ") for c in shown],
            ]
            if draft:
                waits.append(("class:status.dim", "  (your draft is kept)"))
            if sum(cell_len(text) for _, text, *_ in waits) <= width:
                return waits
        for long in (True, False):
            for keep_draft in (True, False) if long and draft else (False,):
                view: StyleAndTextTuples = []
                if hidden:
                    what = f"view all ({event.hidden_chars} characters hidden) first"
                    view = [("class:approval.key", " v "), ("", f" {what if long else 'view'}  ")]
                parts: StyleAndTextTuples = [("class:approval", question), *view]
                for at, choice in enumerate(shown):
                    key, long_words, short_words = CHOICE_KEYS[choice]
                    if choice == "approve_session" and always:
                        long_words = always
                    gap = "" if at == len(shown) - 1 else "  "
                    parts.append(("class:approval.key", f" {key} "))
                    parts.append(("", f" {long_words if long else short_words}{gap}"))
                if keep_draft:
                    parts.append(("class:status.dim", "  (your draft is kept)"))
                if sum(cell_len(text) for _, text, *_ in parts) <= width:
                    return parts
        return parts


def _answers(event: ev.ApprovalRequestedEvent, decision: str) -> bool:
    """Whether a key for ``decision`` answers ``event``'s card (else it is
    typing): an approval card takes the approval keys, a running card only
    ``kill`` (it may wait long: typing goes on), a reconcile card every key
    (one it does not offer says which do)."""
    if event.kind == ev.Kind.running:
        return decision == "kill"
    if event.kind == ev.Kind.reconcile:
        return True
    return decision in APPROVAL_KEYS


def _offered(event: ev.ApprovalRequestedEvent) -> list[str]:
    """The decisions a card offers, in its order (a card from before choices
    were named offers every approval decision)."""
    if isinstance(event.choices, list):
        return [c.value for c in event.choices]
    return list(APPROVAL_KEYS)
