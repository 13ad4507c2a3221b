"""The interactive ``mind`` REPL (README.md), one module per job.

One prompt_toolkit prompt stays on screen for the whole life of the REPL;
``patch_stdout(raw=True)`` makes everything printed while it is active appear
above it, so the half-typed line survives streamed output.

Input is never the REPL's own: every line goes to the session's durable
input API (:meth:`mind.shell.runtime.Session.send`), which writes it to
``inbox.json`` before accepting it. Only then does the editor let go of the
text; a refusal (:class:`~mind.errors.InputRefused`, e.g. 20 steering
messages waiting) prints the reason and leaves the text in the editor. The
waiting messages listed under the input are read from :attr:`Session.waiting`
at each redraw, so they are exactly what the session holds.

Keys:

- Enter on an idle session sends the line as a prompt (a new turn). While a
  turn runs, Enter *steers* it (:meth:`Session.steer`): the text reaches the
  model at its next step, after the pending tool results. If the turn was
  already finishing (its mailbox sealed) the text waits for the next turn and
  the screen says so.
- Tab while a turn runs queues the line for the next turn (:meth:`Session.queue`);
  on a ``/command`` draft it completes the command name, in every state.
- Esc interrupts the running turn and sends the waiting input at once as the
  next turn (``interrupt(send_pending=True)``; the runtime starts that turn).
- Ctrl+C clears a non-empty draft; otherwise it requests an interrupt of a
  running turn (``interrupt(send_pending=False)``: waiting input stays durable
  and waits) and asks to press it again; twice within 2 s exits.
- Ctrl+D on an empty draft exits. Enter on an empty line of an idle session
  with waiting input sends that input now.
- Down on an empty draft selects a waiting message (the list under the
  input; Down / Up move, Up past the first or Esc leaves): ``e`` takes it back into
  the editor (a durable drop, its text in the draft), ``d`` or Delete drops
  it (:meth:`Session.drop`; the mailbox chart refuses one the running turn
  already took). Typing leaves the list.
- Ctrl+J (or Alt+Enter, or ``\\`` before Enter) inserts a newline in every
  state (Esc is never eager, so Alt+Enter never interrupts); a
  bracketed paste never submits.
- An approval request shows what the call will do (the command, a diff of
  each file against its current content); when part of it is hidden, ``v``
  shows it all and y / a are refused until then.
- An approval request adds a y / n / a question under the input; the draft
  stays in the editor. A y / n / a typed less than ``TYPING_GAP_S`` after
  the previous character of a draft is taken as typing, not as an answer.

Layout: the input line ``› `` comes first; everything that changes while it
is shown (the session picker, the answer's preview, the status line, the
waiting messages, the parked sessions) is drawn under it (see
:meth:`layout.StatusArea.place`).

Rendering: one consumer task iterates :meth:`Session.events` while the
session is busy, so turns the runtime starts by itself (queued input, the
steering sent by Esc, recovered input) are rendered like typed ones. A turn's
inputs are echoed (``› text``) from the journal when the turn claims them: at
turn start, and for steering at the model-request boundary that delivers it.

Modules: ``app`` (the :class:`Repl` object, its run loop, sending input),
``keys`` (key bindings), ``layout`` (the input line, the status area under
it, styles), ``picker`` (the session picker), ``waiting`` (the waiting-message
list), ``approvals`` (answering approval questions), ``commands`` (slash
commands), ``hosting`` (attached and parked sessions, switching), ``feed``
(turn events to the screen), ``banner`` (the banner and a resumed session's
recap), ``launch`` (``run_repl``: the process around one Repl run).
"""

from mind.shell.repl.app import Repl
from mind.shell.repl.commands import Command, command_word
from mind.shell.repl.launch import history_file, run_repl
from mind.shell.repl.picker import PickerRow, picker_rows

__all__ = [
    "Command",
    "PickerRow",
    "Repl",
    "command_word",
    "history_file",
    "picker_rows",
    "run_repl",
]
