"""Slash commands: what a line that is a command names, their table, their handlers.

``/help``, ``/new``, ``/sessions``, ``/resume``, ``/status``, ``/compact``,
``/exit`` (and ``/quit``). A unique prefix names its command (``/he`` is ``/help``); an
unknown command is refused, never sent to the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, final

from msgspec import UNSET, UnsetType
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from rich.text import Text

from mind.errors import MindError, SessionError
from mind.generated import events as ev
from mind.shell.event_text import describe_compaction, describe_context, format_tokens
from mind.shell.repl import permissions
from mind.shell.store import resolve_session_id
from mind.shell.terminal_text import plain

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl
    from mind.shell.session import Session


@dataclass(frozen=True)
class Command:
    """A slash command: its handler and one line of help."""

    name: str
    help: str
    run: Callable[[str], bool]
    """Called with the rest of the line; returns False to leave the REPL."""
    while_busy: bool = True
    """Whether the command may run while a turn is running."""
    at_card: bool = False
    """Whether Enter runs it while a card holds the editor (leaving: the
    question stays unanswered for the next resume, docs/design/interactions.md §3)."""


def command_word(text: str) -> tuple[str, str] | None:
    """The slash command a submitted line names, as ``(name, rest)``; None for a message.

    Rule: a line is a command when it starts with ``/`` (no leading space) and
    its first word is ``/`` + a name with no further ``/``. So
    ``/tmp/x what is this?`` is a message (a path), while ``/word`` is a
    command — known or not (an unknown one is refused, never sent). A line
    starting with ``//`` or with a space is always a message (``//`` stands for
    a leading ``/``).
    """
    if not text.startswith("/") or text.startswith("//"):
        return None
    word, *rest = text.split(maxsplit=1)
    if "/" in word[1:]:
        return None
    return word[1:], rest[0].strip() if rest else ""


@final
class CommandCompleter(Completer):
    """Completes ``/command`` names at the start of the line.

    Args:
        commands: called at each completion for the commands to offer.
    """

    def __init__(self, commands: Callable[[], Iterable[Command]]) -> None:
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        """Yield each command whose name starts with the ``/word`` typed so far."""
        text = document.text_before_cursor
        if not text.startswith("/") or " " in text or "\n" in text:
            return
        for command in self._commands():
            if command.name.startswith(text[1:]):
                yield Completion(
                    "/" + command.name, start_position=-len(text), display_meta=command.help
                )


@final
class SlashCommands:
    """The REPL's commands by name, and running one.

    Args:
        repl: the REPL the commands act on.
    """

    def __init__(self, repl: Repl) -> None:
        self._repl = repl
        self.table: dict[str, Command] = {}
        """The commands by name, in the order ``/help`` lists them."""
        for command in (
            Command("help", "show keys and commands", self._help),
            Command("new", "start a new session (the current one is parked)", self._new),
            Command("sessions", "pick a session: attached, parked, free, occupied", self._sessions),
            Command("resume", "enter a session by id (or prefix); no id: the picker", self._resume),
            Command("status", "show this session's settings and usage", self._status),
            Command(
                "compact",
                "summarise the conversation to free context (/compact FOCUS keeps FOCUS)",
                self._compact,
                while_busy=False,
            ),
            Command(
                "permissions",
                "list what is approved for this session; revoke N takes one back",
                lambda rest: permissions.run(self._repl, rest),
            ),
            Command("exit", "leave mind (the session can be resumed)", self._exit, at_card=True),
            Command("quit", "same as /exit", self._exit, at_card=True),
        ):
            self.table[command.name] = command

    def run(self, text: str, name: str, rest: str) -> bool:
        """Run the command ``name`` of the line ``text`` with the ``rest`` of it.

        An unknown command, or one not available while a turn runs, is
        refused with the reason on screen (an unknown one's line goes back
        into the editor). Returns False to leave the REPL.
        """
        repl = self._repl
        command = self.named(name)
        if command is None:
            repl.view.note(
                f"Unknown command /{name}. /help lists commands; to send text that starts "
                "with /, start it with // or a space.",
                style="yellow",
            )
            repl.prompt.default_buffer.set_document(Document(text, len(text)))
            return True
        if repl.busy and not command.while_busy:
            repl.view.note(
                f"/{name} is not available while a turn runs (Esc interrupts it).",
                style="yellow",
            )
            return True
        return command.run(rest)

    def named(self, name: str) -> Command | None:
        """The command ``name`` names: itself, or the one command it is a
        unique prefix of (``he`` is ``help``); None for none or several."""
        command = self.table.get(name)
        if command is None:
            matches = [c for c in self.table.values() if name and c.name.startswith(name)]
            command = matches[0] if len(matches) == 1 else None
        return command

    def runs_at_card(self, text: str) -> bool:
        """Whether the line ``text`` names a command Enter runs while a card
        holds the editor (:attr:`Command.at_card`: ``/exit``, ``/quit``)."""
        named = command_word(text)
        command = self.named(named[0]) if named is not None else None
        return command is not None and command.at_card

    def typing_card_command(self, text: str) -> bool:
        """Whether ``text`` (the draft with the key just typed) is the start
        of such a command's name (``/exi`` + ``t``): the key is typing, never
        an answer to the card (``t`` is "tell the model" at a reconcile card)."""
        word = text[1:]
        return (
            text.startswith("/")
            and bool(word)
            and any(c.at_card and c.name.startswith(word) for c in self.table.values())
        )

    def _help(self, _: str) -> bool:
        rows = [
            ("Enter", "send; while a turn runs: steer it (reaches the model at its next step)"),
            ("Tab", "while a turn runs: queue the message for the next turn"),
            ("Enter on an empty line", "send the waiting messages now (when idle)"),
            ("Ctrl+J, Alt+Enter, \\ Enter", "new line"),
            ("// or a leading space", "send text that starts with / (a path alone is sent)"),
            ("Esc", "interrupt the turn and send the waiting messages at once"),
            ("Down on an empty line", "select a waiting message: e edit, d / Del drop, Esc back"),
            ("Ctrl+C", "clear the draft, else interrupt (waiting messages are kept); twice exits"),
            ("Ctrl+D", "exit (on an empty line)"),
            (
                "y / n / a / s",
                "answer an approval: yes once, no, always (this session), stop the turn",
            ),
            ("v", "at an approval: view the whole text (needed before y when part is hidden)"),
        ]
        out = [Text("Keys", style="bold")]
        out += [Text.assemble(("  " + k.ljust(28), "cyan"), v) for k, v in rows]
        out.append(Text("Commands", style="bold"))
        out += [
            Text.assemble(("  /" + c.name.ljust(27), "cyan"), c.help) for c in self.table.values()
        ]
        self._repl.view.flush_text()
        self._repl.view.print(*out)
        return True

    def _new(self, _: str) -> bool:
        self._repl.soon(self._new_session)  # opening never blocks the prompt
        return True

    async def _new_session(self) -> None:
        repl = self._repl
        old = repl.hosting.current
        old.session.park()
        try:
            session = await repl.runtime.create_session(
                cwd=old.session.cwd, config=repl.config, interactive=True
            )
        except MindError as exc:
            old.session.attach()
            repl.view.note(f"Could not start a new session: {exc}", style="red")
            return
        repl.created.add(session.session_id)
        repl.hosting.switch_to(repl.hosting.host(session))
        running = " (its turn keeps running)" if old.session.busy else ""
        lines = [
            Text.assemble(("new session ", "bold"), session.session_id),
            Text(
                f"parked {old.session.session_id}{running} · /resume goes back",
                style="dim",
            ),
        ]
        if old.session.waiting and not old.session.busy:
            lines.append(
                Text(
                    f"{len(old.session.waiting)} message(s) still wait in the previous session; "
                    "they are sent when you go back to it.",
                    style="yellow",
                )
            )
        repl.view.print(*lines)

    def _sessions(self, _: str) -> bool:
        self._repl.picker.open()
        return True

    def _resume(self, arg: str) -> bool:
        repl = self._repl
        if not arg:
            repl.picker.open()
            return True
        candidates = [s.session_id for s in repl.runtime.list_sessions()] + list(repl.hosting.by_id)
        try:
            sid = resolve_session_id(arg.split()[0], candidates)
        except SessionError as exc:
            repl.view.note(f"Cannot resume {exc.session_id}: {exc.detail}", style="yellow")
            return True
        repl.soon(repl.hosting.enter, sid)
        return True

    def _status(self, _: str) -> bool:
        repl = self._repl
        s = repl.session
        state = "running a turn" if repl.busy else "idle"
        waiting = len(s.waiting)
        if repl.approving:
            state = "waiting for approval"
        allowed = str(len(s.interactions.grants())) + " (see /permissions)"
        pairs = [
            ("session", s.session_id),
            ("provider", s.provider.label),
            ("model", repl.config.provider.model),
            ("cwd", str(s.cwd)),
            ("sandbox", s.sandbox.describe()),
            ("approval", f"{s.approval} (always allowed: {allowed})"),
            ("state", state + (f", {waiting} waiting" if waiting else "")),
            ("usage", _usage_row(repl.hosting.current.tokens)),
            ("context", describe_context(s.context_usage)),
            *([("window", s.window_mismatch)] if s.window_mismatch else []),
            *_instructions_rows(s),
            *(
                [("resume", f"read whole: {s.checkpoint_fallback}")]
                if s.checkpoint_fallback
                else []
            ),
            *([("journal", f"damaged: {s.checkpoint_damage}")] if s.checkpoint_damage else []),
        ]
        # Values line up one column past the longest label ("instructions").
        width = max(len(k) for k, _ in pairs) + 1
        repl.view.print(*(Text.assemble((k.ljust(width), "dim"), v) for k, v in pairs))
        return True

    def _compact(self, focus: str) -> bool:
        # Between turns only (refused while one runs: Command.while_busy);
        # the summarisation request never blocks the prompt.
        self._repl.soon(self._run_compact, focus)
        return True

    async def _run_compact(self, focus: str) -> None:
        repl = self._repl
        repl.view.note("Compacting the conversation…", style="dim")
        try:
            outcome = await repl.session.compact(focus or None)
        except MindError as exc:
            repl.view.note(compact_refusal_note(exc), style="yellow")
            return
        finally:
            # Input sent while it ran waited for it; its turn starts now.
            repl.feed.ensure()
        if not outcome.completed:
            reason = (outcome.reason or "").rstrip(".")  # a clause; one period ends the note
            repl.view.note(f"Not compacted: {reason}.", style="yellow")
            return
        event = ev.ContextCompactedEvent(
            compaction_id=outcome.compaction_id,
            trigger=ev.CompactionTrigger.manual,
            before_tokens=outcome.before_tokens if outcome.before_tokens is not None else UNSET,
            after_tokens=outcome.after_tokens if outcome.after_tokens is not None else UNSET,
        )
        repl.view.print(Text(f"⟳ {describe_compaction(event)}.", style="dim"))

    def _exit(self, _: str) -> bool:
        return False


def compact_refusal_note(exc: MindError) -> str:
    """The note a ``/compact`` that could not start shows: ``"Could not
    compact: <reason>."``, one sentence.

    Rule: the person is in the session the refusal names, so a
    :class:`~mind.errors.SessionError`'s reason (``detail``) is said without
    its ``session <id>:`` prefix; other errors say their text. Pure; never
    raises.
    """
    reason = exc.detail if isinstance(exc, SessionError) else str(exc)
    return f"Could not compact: {reason.rstrip('.')}."


def _usage_row(tokens: ev.Usage | None) -> str:
    """``/status``'s ``usage``: tokens of the turns run since this process
    opened the session (a resumed session's earlier turns are not counted
    here, so none is said, not ``?``)."""
    if tokens is None:
        return "no turn since the session was opened"
    if isinstance(tokens.input_tokens, UnsetType) and isinstance(tokens.output_tokens, UnsetType):
        return "unknown: the server reports no usage"
    return format_tokens(tokens) + " (turns since the session was opened)"


def _instructions_rows(session: Session) -> list[tuple[str, str]]:
    """``/status``'s lines for the instructions files the requests carry
    (docs/design/context.md §4): path, bytes, cut or skipped."""
    rows: list[str] = []
    for source in session.instructions_sources:
        if source.skipped:
            note = f"skipped: {source.skipped}"
        elif source.cut:
            note = f"{source.size_bytes} bytes, cut to {source.included_bytes}"
            window = session.instructions.caps.window
            if window is not None:  # the window's cap, not the fixed one, cut it
                note += f": a quarter of the {window:,}-token window"
        else:
            note = f"{source.size_bytes} bytes"
        rows.append(f"{plain(source.path)} ({note})")
    if not rows:
        return [("instructions", "none (no AGENTS.md or CLAUDE.md found)")]
    return [("instructions" if n == 0 else "", row) for n, row in enumerate(rows)]
