"""The REPL's key bindings (the keys are listed in the package docstring).

Order matters: for the same key prompt_toolkit lets the binding added last
win, so the ``\\`` + Enter newline and the swallowing of an answer word's
rest are added after the other Enter bindings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from prompt_toolkit.filters import Condition
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from mind.errors import LeaveRepl
from mind.shell.repl.approvals import ANSWER_WORDS
from mind.shell.repl.commands import command_word
from mind.shell.repl.picker import PICKER_ROWS

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

EXIT_CONFIRM_WINDOW_S: Final = 2.0
"""A second Ctrl+C within this many seconds of the first exits."""

ESC_WAIT_S: Final = 0.025
"""How long a lone Esc waits for a following key, in seconds, twice over:
in the terminal parser (prompt_toolkit's ``ttimeoutlen``, whose 0.5 s default
turned Esc then ``/status`` typed 0.3 s later into Alt+/ ``status``) and in
the key bindings (``timeoutlen``). Esc cannot act at once: Alt+Enter arrives as
Esc then Enter, and must insert a newline, not interrupt. A terminal sends
Alt+key as one write, so both arrive in one read; a person's next key comes
well after 2 x ESC_WAIT_S and is taken as Esc and that key."""


def key_bindings(repl: Repl) -> KeyBindings:
    """The bindings of ``repl``'s prompt; their filters read its state at each key."""
    kb = KeyBindings()
    busy = Condition(lambda: repl.busy)
    approving = Condition(lambda: repl.approving)
    # A running card (the turn waits for a command a crash left running)
    # does not hold the editor: Enter and Tab send and queue as usual.
    waiting_only = Condition(lambda: repl.approvals.only_waiting)
    asking = approving & ~waiting_only
    empty = Condition(lambda: not repl.prompt.default_buffer.text)
    picking = Condition(lambda: repl.picker.shown)
    selecting = Condition(lambda: repl.waiting.selected is not None) & ~picking
    has_waiting = Condition(lambda: bool(repl.session.waiting))

    @kb.add("up", filter=selecting)
    def _select_up(event: KeyPressEvent) -> None:
        repl.waiting.move(-1)

    @kb.add("down", filter=~picking & ~approving & empty & has_waiting & ~selecting)
    @kb.add("down", filter=selecting)
    def _select_down(event: KeyPressEvent) -> None:
        repl.waiting.move(1)

    @kb.add("e", filter=selecting & ~approving)
    def _edit_selected(event: KeyPressEvent) -> None:
        repl.waiting.drop_selected(edit=True)

    @kb.add("d", filter=selecting & ~approving)
    @kb.add("delete", filter=selecting & ~approving)
    def _drop_selected(event: KeyPressEvent) -> None:
        repl.waiting.drop_selected(edit=False)

    @kb.add("escape", filter=selecting)
    def _leave_selection(event: KeyPressEvent) -> None:
        repl.waiting.clear()
        repl.invalidate()

    @kb.add("up", filter=picking)
    def _up(event: KeyPressEvent) -> None:
        repl.picker.move_focus(-1)

    @kb.add("down", filter=picking)
    def _down(event: KeyPressEvent) -> None:
        repl.picker.move_focus(1)

    @kb.add("pageup", filter=picking)
    def _page_up(event: KeyPressEvent) -> None:
        repl.picker.move_focus(-PICKER_ROWS)

    @kb.add("pagedown", filter=picking)
    def _page_down(event: KeyPressEvent) -> None:
        repl.picker.move_focus(PICKER_ROWS)

    # Enter on an empty line enters the focused session; a typed line runs as usual.
    @kb.add("enter", filter=picking & empty & ~approving)
    def _pick(event: KeyPressEvent) -> None:
        focused = repl.picker.focused()
        if focused is not None:
            repl.soon(repl.hosting.enter, focused)

    # Esc is never eager: Alt+Enter arrives as Esc then Enter, and must
    # reach the newline binding below (a lone Esc fires after ESC_WAIT_S).
    @kb.add("escape", filter=picking)
    def _close_picker(event: KeyPressEvent) -> None:
        repl.picker.close()

    @kb.add("c-l", filter=picking)
    def _relist(event: KeyPressEvent) -> None:
        repl.picker.refresh()
        event.app.renderer.clear()

    @kb.add("enter", filter=~asking & ~(picking & empty))
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        repl.picker.close()
        repl.waiting.clear()
        if buffer.complete_state is not None and buffer.complete_state.current_completion:
            # One Enter accepts the completion and runs the completed line.
            buffer.apply_completion(buffer.complete_state.current_completion)
        text = buffer.text
        if not text.strip():
            if not repl.busy and repl.session.waiting:
                repl.send_waiting()
            return
        if command_word(text) is not None:
            line = repl.take_line(buffer)
            repl.view.echo(line)
            if not repl.handle_line(line):
                repl.leaving = True
                event.app.exit(result="")
            return
        # Sent first, taken from the editor only once durable (a refusal keeps it).
        if repl.send(text, "steer" if repl.busy else "prompt"):
            repl.take_line(buffer)

    # A draft that is a command being typed completes (the default Tab),
    # never queues: "/sta" is not a message for the model.
    command_draft = Condition(lambda: command_word(repl.prompt.default_buffer.text) is not None)

    @kb.add("tab", filter=busy & ~asking & ~empty & ~picking & ~command_draft)
    def _tab(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if repl.send(buffer.text, "queue"):
            repl.take_line(buffer)

    @kb.add("c-j")
    @kb.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("c-c")
    def _ctrl_c(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.text:
            buffer.reset()
            repl.exit_armed_at = None
            return
        now = repl.clock()
        if repl.exit_armed_at is not None and now - repl.exit_armed_at <= EXIT_CONFIRM_WINDOW_S:
            repl.exit_armed_at = None  # the last frame left on screen stays clean
            repl.leaving = True
            event.app.exit(exception=LeaveRepl())
            return
        repl.exit_armed_at = now
        repl.interrupt(send_pending=False)

    @kb.add("c-d", filter=empty)
    def _ctrl_d(event: KeyPressEvent) -> None:
        repl.leaving = True
        event.app.exit(exception=EOFError())

    @kb.add("escape", filter=busy & ~picking & ~selecting)
    def _escape(event: KeyPressEvent) -> None:
        repl.interrupt(send_pending=True)

    for word in ANSWER_WORDS:
        for variant in (word[0], word[0].upper()):
            kb.add(variant, filter=approving)(repl.approvals.on_answer_key)
    for variant in ("v", "V"):
        kb.add(variant, filter=approving)(repl.approvals.on_view_key)

    @kb.add("enter", filter=asking)
    def _enter_while_asked(event: KeyPressEvent) -> None:
        """Enter neither answers nor submits while a question waits: the
        status line says so."""
        repl.approvals.on_enter()

    leaving_line = Condition(lambda: repl.commands.runs_at_card(repl.prompt.default_buffer.text))

    @kb.add("enter", filter=asking & leaving_line)
    def _leave_at_card(event: KeyPressEvent) -> None:
        """``/exit`` (``/quit``) at a card leaves, as everywhere: leaving is
        no answer (the question is asked again on resume)."""
        _enter(event)

    refusing = Condition(lambda: repl.approvals.refusing)

    @kb.add("enter", filter=refusing)
    def _enter_refusing(event: KeyPressEvent) -> None:
        """Enter after ``n``: refuse with the typed reason (or none)."""
        repl.approvals.finish_refusal()

    # \ then Enter is a newline in every state (an approval, the picker),
    # like Ctrl+J: added after the other Enter bindings, so it wins.
    continued = Condition(
        lambda: repl.prompt.default_buffer.document.text_before_cursor.endswith("\\")
    )

    @kb.add("enter", filter=continued)
    def _continue_line(event: KeyPressEvent) -> None:
        event.current_buffer.delete_before_cursor(1)
        event.current_buffer.insert_text("\n")

    swallowing = Condition(repl.approvals.swallowing)

    # Added last: for the same key the last binding wins, so the rest of
    # an answer word is taken here before any other binding sees it.
    @kb.add(Keys.Any, filter=swallowing)
    @kb.add("enter", filter=swallowing)
    def _rest_of_answer(event: KeyPressEvent) -> None:
        if not repl.approvals.swallow(event.data):
            event.current_buffer.insert_text(event.data)

    return kb
