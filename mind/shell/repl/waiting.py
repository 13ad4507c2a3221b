"""The waiting messages listed under the input, and the selection in that list.

The list is read from :attr:`Session.waiting` at each redraw, so it is
exactly what the session holds; the REPL keeps only which message is
selected (its id). Down on an empty draft enters the list; ``e`` takes the
selected message back into the editor, ``d`` / Delete drops it, both by the
session's durable drop (:meth:`Session.drop`), which the mailbox chart
refuses for a message the running turn already took.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, final

from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import StyleAndTextTuples

from mind.errors import MindError
from mind.machines.mailbox import MailboxMessage
from mind.shell.call_summary import shorten

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

PENDING_LINES: Final = 5
"""Waiting messages listed under the input; more are counted on one line."""


@final
class WaitingList:
    """The list of waiting messages under the input and its selection.

    Args:
        repl: the REPL it belongs to (the attached session, the editor).
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl
        self._selected: str | None = None
        """The waiting message selected in the list under the input (its id), else None."""

    def clear(self) -> None:
        """Leave the list (no message selected); the caller redraws."""
        self._selected = None

    def _selectable(self) -> list[MailboxMessage]:
        """The waiting messages shown under the input (the ones a key can pick)."""
        return self._repl.session.waiting[:PENDING_LINES]

    @property
    def selected(self) -> MailboxMessage | None:
        """The selected waiting message, if it still waits (a turn may have taken it)."""
        for msg in self._selectable():
            if msg.message_id == self._selected:
                return msg
        return None

    def move(self, step: int) -> None:
        """Down (``+1``) / Up (``-1``) in the waiting list, which is shown under
        the input: Down from the draft enters it at the oldest message, Up past
        the oldest leaves it (back to the draft)."""
        shown = [m.message_id for m in self._selectable()]
        current = self.selected
        if current is None:
            self._selected = shown[0] if shown and step > 0 else None
        else:
            i = shown.index(current.message_id) + step
            self._selected = shown[min(i, len(shown) - 1)] if i >= 0 else None
        self._repl.invalidate()

    def drop_selected(self, *, edit: bool) -> None:
        """Drop the selected message for good; with ``edit`` put its text in the editor.

        A refusal (the running turn took it meanwhile) is printed and nothing changes.
        """
        repl = self._repl
        msg = self.selected
        if msg is None:
            self._selected = None
            return
        shown = [m.message_id for m in self._selectable()]
        index = shown.index(msg.message_id)
        try:
            dropped = repl.session.drop(msg.message_id)
        except MindError as exc:
            self._selected = None
            repl.view.note(f"Not dropped: {exc}", style="yellow")
            repl.invalidate()
            return
        if edit:
            self._selected = None
            buffer = repl.prompt.default_buffer
            buffer.set_document(Document(dropped.text, len(dropped.text)))
        else:
            rest = [m.message_id for m in self._selectable()]
            self._selected = rest[min(index, len(rest) - 1)] if rest else None
            repl.view.note(f"Dropped: {shorten(' '.join(dropped.text.split()), 60)}", "dim")
        repl.invalidate()

    def lines(self, waiting: list[MailboxMessage]) -> StyleAndTextTuples:
        """One line per waiting message: where it goes, then its text; the
        selected one marked ``›``; then the keys of the list."""
        repl = self._repl
        out: StyleAndTextTuples = []
        width = max(20, repl.console.width - 16)
        hinted = False
        selected = self.selected
        for msg in waiting[:PENDING_LINES]:
            hint = ""
            if msg.state == "queued":
                label, style = "steer    ", "class:pending.steer"
                if not hinted:  # said once: every steering line means the same
                    hint, hinted = "  reaches the model next", True
            elif repl.busy:
                label, style = "next turn", "class:pending.next"
            else:
                label, style = "waiting  ", "class:pending.next"
            text = shorten(" ".join(msg.text.split()), max(10, width - len(hint)))
            mark = "  ↳ "
            if selected is not None and msg.message_id == selected.message_id:
                mark, style = "  › ", "class:picker.focus"
            out += [
                ("class:pending", mark),
                (style, label + " "),
                ("class:picker.focus" if mark == "  › " else "", text),
                ("class:status.dim", hint),
                ("", "\n"),
            ]
        if len(waiting) > PENDING_LINES:
            out += [("class:pending", f"  … {len(waiting) - PENDING_LINES} more waiting\n")]
        if waiting and selected is not None:
            keys = "  ↑↓ choose · e edit (back into the editor) · d drop · Esc back\n"
            out += [("class:status.dim", keys)]
        elif waiting and not repl.prompt.default_buffer.text:
            out += [("class:status.dim", "  ↓ to edit or drop a waiting message\n")]
        return out
