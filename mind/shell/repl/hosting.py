"""The sessions one REPL process hosts: one attached (shown), the others parked.

Switching sessions (``/new``, ``/resume``, the ``/sessions`` picker) parks
the shown one: its turn keeps running in this process and its events keep
being consumed, muted (:mod:`mind.shell.repl.feed`); a one-line notice says
when a parked session's turn ends (docs/design/mounts.md §1). Entering a session another
live process holds is refused with the runtime's wording; a session whose
journal refused a write is opened afresh (docs/design/recovery.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, final

from rich.text import Text

from mind.errors import MindError, MountRefused, SessionError
from mind.generated import events as ev
from mind.shell.event_text import format_duration
from mind.shell.render import TurnView
from mind.shell.repl.banner import recap_lines
from mind.shell.runtime import Session

if TYPE_CHECKING:
    from mind.shell.repl.app import Repl

COALESCE_S: Final = 0.05
"""Complete markdown blocks arriving within this many seconds are rendered
together (see :class:`~mind.shell.render.TurnView`); the tick shows held ones."""

PRINT_LAG_S: Final = 0.3
"""How late printed output may reach the screen, in seconds: ``patch_stdout``
waits 0.2 s after each write to bundle the next ones (the streaming preview
stays hidden this long after a print, see :class:`~mind.shell.render.TurnView`)."""


@dataclass(eq=False)
class Hosted:
    """What the REPL keeps for one session this process hosts (attached or parked).

    A parked session's events are still consumed (its turn must neither stall
    nor lose events); its view is muted, so they update state without printing.
    """

    session: Session
    view: TurnView
    asked: dict[tuple[str, str], ev.ApprovalRequestedEvent] = field(default_factory=dict)
    """The approval questions shown, by ``(turn_id, call_id)``: what each one
    says (screen state). Whether one still waits is the turn's to say
    (:meth:`questions`)."""
    viewed: set[str] = field(default_factory=set)
    """Call ids whose open approval request's whole text was shown (``v``):
    only those, and requests whose text was never cut, can be approved. A new
    request with the id starts unviewed (an id may repeat in a round)."""
    recovered: set[str] = field(default_factory=set)
    """Ids of inputs recovered when the session was opened (echoed as such)."""
    tokens: ev.Usage | None = None
    """Tokens of the turns that ended since this process opened the session
    (summed; a count no turn reported stays absent), None before the first."""
    consuming: bool = False
    """Whether a consumer task is iterating the session's events."""
    starting: ev.TurnStartedEvent | ev.TurnResumedEvent | None = None
    """A turn start not yet shown: it waits for the turn's claim of its
    inputs, which are echoed first (:mod:`mind.shell.repl.feed`)."""

    def questions(self) -> list[ev.ApprovalRequestedEvent]:
        """The questions waiting for y / n / a, oldest first: the running
        turn's pending approvals (:attr:`Turn.pending_approvals`, their one
        owner) whose request was already shown here. Empty when no turn runs."""
        turn = self.session.current
        if turn is None or turn.done:
            return []
        asked = (self.asked.get((turn.turn_id, c)) for c in turn.pending_approvals)
        return [q for q in asked if q is not None]


@final
class Hosting:
    """The hosted sessions by id and which one is attached.

    Args:
        repl: the REPL it belongs to (runtime, config, console, clock).
        session: the session attached at start.
    """

    def __init__(self, repl: Repl, session: Session) -> None:
        self._repl = repl
        self.by_id: dict[str, Hosted] = {}
        """This process's sessions by id, in the order they were entered."""
        self.current = self.host(session)
        """The attached session's REPL state."""

    def parked(self) -> list[Hosted]:
        """The hosted sessions other than the attached one, in entry order."""
        return [h for h in self.by_id.values() if h is not self.current]

    def host(self, session: Session) -> Hosted:
        """Start keeping REPL state for a session the runtime now hosts."""
        hosted = self.by_id.get(session.session_id)
        if hosted is None:
            repl = self._repl
            hosted = Hosted(
                session=session,
                view=TurnView(
                    repl.console,
                    repl.clock,
                    reserved_rows=repl.status.rows,
                    coalesce_s=COALESCE_S,
                    print_lag_s=PRINT_LAG_S,
                ),
            )
            self.by_id[session.session_id] = hosted
        return hosted

    def say_recovered(self, *, after_storage: bool = False) -> None:
        """Say what opening the attached session repaired; mark its recovered input.

        ``after_storage``: it was reopened after a failed write of its state
        (not after mind stopped), and the wording says so."""
        repl = self._repl
        recovery = repl.session.recovery
        if recovery is None:
            return
        if recovery.aborted_turns or recovery.synthetic_results:
            calls = recovery.synthetic_results
            why = (
                "a write of the session's state failed during a turn"
                if after_storage
                else "mind stopped during a turn last time"
            )
            repl.view.note(
                f"{why}: {recovery.aborted_turns} turn(s) closed "
                f"as aborted, {calls} tool call(s) marked interrupted (not run again).",
                style="yellow",
            )
        if recovery.resumed_turns:
            # The session opened busy with it; the feed shows its events.
            repl.view.note(
                "mind stopped inside a tool round last time: that turn goes on "
                "(calls that never ran, or only read, run now; nothing is run twice).",
                style="yellow",
            )
        waiting = repl.session.waiting
        if recovery.replayed_inputs and waiting:
            self.current.recovered = {m.message_id for m in waiting}
            repl.view.note(
                f"{len(waiting)} message(s) accepted earlier were never answered; "
                "sending them now.",
                style="yellow",
            )

    async def enter(self, session_id: str) -> bool:
        """Show ``session_id``: switch to it if hosted here, else open it (the
        shown session is parked; its turn keeps running).

        Entry of a session another live process holds is refused with the
        runtime's wording (``occupied by pid N``, docs/design/mounts.md §6); the
        picker's pre-check only says it earlier, the runtime decides.

        Returns:
            True when ``session_id`` is now the attached session.
        """
        repl = self._repl
        hosted = self.by_id.get(session_id)
        if hosted is not None and not hosted.session.reusable:
            return await self.reopen(hosted)  # a write failed earlier: open it afresh
        if hosted is self.current:
            repl.picker.close()
            repl.view.note(f"Already in session {session_id}.")
            return True
        if hosted is None:
            holders = repl.runtime.mounts.holders(session_id)
            if holders:
                pids = ", ".join(str(h.pid) for h in holders)
                self._refuse(session_id, f"occupied by pid {pids}")
                return False
            old = repl.session
            old.park()
            try:
                session = await repl.runtime.open_session(
                    session_id, config=repl.config, interactive=True
                )
            except MountRefused as exc:
                old.attach()
                self._refuse(session_id, exc.reason)
                return False
            except SessionError as exc:
                old.attach()
                self._refuse(session_id, exc.detail)
                return False
            except MindError as exc:
                old.attach()
                self._refuse(session_id, str(exc))
                return False
            hosted = self.host(session)
            self.switch_to(hosted)
            self._show_entered("resumed")
            self.say_recovered()
            if self.current.recovered:
                repl.send_waiting()
        else:
            self.switch_to(hosted)
            self._show_entered("back from parked")
        return True

    async def reopen(self, hosted: Hosted, *, quiet: bool = False) -> bool:
        """Open afresh a hosted session whose journal refuses appends (a write
        failed: disk full, quota, I/O error) and show it: the runtime closes
        the broken handle and opens the session by its open rules (the failed
        turn closed, accepted input waiting, docs/design/recovery.md §2).

        Args:
            hosted: the session's REPL state (attached or parked).
            quiet: say nothing when it still cannot be opened (the caller
                reports the refusal), e.g. an Enter while the disk is still full.

        Returns:
            True when the session is now open again and attached.
        """
        repl = self._repl
        sid = hosted.session.session_id
        old = self.current
        if old is not hosted:
            old.session.park()
        try:
            session = await repl.runtime.open_session(sid, config=repl.config, interactive=True)
        except MountRefused as exc:
            why = exc.reason
        except SessionError as exc:
            why = exc.detail
        except MindError as exc:
            why = str(exc)
        else:
            hosted.session = session
            hosted.starting = None
            hosted.asked.clear()  # the broken handle's questions died with it
            self.switch_to(hosted)
            self._show_entered("reopened")
            self.say_recovered(after_storage=True)
            if self.current.recovered and not quiet:
                repl.send_waiting()
            return True
        if old is not hosted:
            old.session.attach()
        if not quiet:
            self._refuse(sid, why)
        return False

    def _refuse(self, session_id: str, why: str) -> None:
        """Say why a session cannot be entered (the picker stays open)."""
        repl = self._repl
        repl.view.note(f"Cannot enter session {session_id}: {why}", style="red")
        if repl.picker.shown:
            repl.picker.refresh()
        repl.invalidate()

    def switch_to(self, hosted: Hosted) -> None:
        """Park the attached session (its turn keeps running, muted) and attach ``hosted``."""
        repl = self._repl
        old = self.current
        repl.picker.close()
        if old is hosted:
            return
        old.view.muted = True
        old.session.park()
        repl.feed.ensure(old)  # keeps taking its events while parked
        hosted.session.attach()
        hosted.view.muted = False
        self.current = hosted
        repl.exit_armed_at = None
        repl.waiting.clear()
        repl.feed.ensure(hosted)
        repl.invalidate()

    def _show_entered(self, how: str) -> None:
        """Print the header of the session just entered: id, cwd, history, a running turn."""
        repl = self._repl
        s = repl.session
        view = repl.view
        missed, dropped = view.take_missed()
        lines = [
            Text.assemble(("session ", "bold"), s.session_id, (f" ({how})", "dim")),
            Text.assemble(("cwd       ", "dim"), str(s.cwd)),
            *([] if missed else recap_lines(s, repl.console.width)),
        ]
        if missed:
            earlier = f" (… {dropped} earlier lines not kept)" if dropped else ""
            lines.append(Text(f"while it was parked:{earlier}", style="dim"))
        view.print(*lines)
        view.write_ansi(missed)
        if s.busy:
            started = view.turn_started_at
            since = f" for {format_duration(repl.clock() - started)}" if started else ""
            view.note(f"a turn is running{since}; its output continues here", "cyan")
        if not missed or s.busy:
            view.print(Text(""))
        view.reset_spacing()
        for event in self.current.questions():  # asked while parked: ask again here
            view.show_approval(event, viewed=event.call_id in self.current.viewed)
