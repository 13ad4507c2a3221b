"""Model-based tests of the mailbox (docs/design/mailbox.md).

1. Per edge, deterministic: :func:`walk_every_edge` reaches and fires every
   transition of ``MailboxChart`` and of ``InboxMessageChart`` and checks the
   configuration each lands in.
2. Interleavings: a hypothesis ``RuleBasedStateMachine`` drives the real
   :class:`Mailbox` together with the real :class:`Inbox` on a temp dir, the
   way the runtime does (admit -> durable add -> enqueue; end_turn -> journal
   acknowledgement -> remove -> forget), with a crash-and-reopen rule at any
   point (the in-memory mailbox is dropped, ``Inbox.open`` re-reads the real
   file with the journal's acknowledgements, ``restore``). Every step is
   compared with a reference model written by hand (plain dicts and lists),
   including the exact bytes of ``inbox.json``. Invariants: no accepted
   message lost, none claimed by two turns at once or after its
   acknowledgement, acknowledged never replayed, arrival order preserved,
   limits enforced, the file within its cap.

Transition coverage of both charts is recorded over each whole run, written to
``.pytest_cache/d/transition-coverage/`` and printed; every edge must be taken.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mind.errors import DropNotAllowed, IllegalTransition, InputRefused
from mind.generated.inbox import InboxEntry, InboxKind
from mind.generated.inbox_message_chart import InboxMessageChart
from mind.generated.mailbox_chart import MailboxChart
from mind.machines.mailbox import Mailbox, MessageKind
from mind.shell.inbox import MAX_INBOX_BYTES, Inbox, encode_inbox
from tests.model.reporting import check_every_edge, write_report
from tests.support.transition_coverage import TransitionCoverage

CI = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=120,
    stateful_step_count=40,
)

# A small file cap so "inbox_full" is reached often; the real 8 MiB cap is
# checked in tests/shell/test_inbox.py.
FILE_CAP = 12 * 1024
BIG_TEXT = 7000  # characters: a second big entry crosses FILE_CAP
MIB = 1024 * 1024


# ------------------------------------------------------------------ per edge


@pytest.mark.parametrize(
    ("chart", "edges"), [(MailboxChart, 10), (InboxMessageChart, 11)], ids=["mailbox", "message"]
)
def test_every_edge_is_walked_and_lands_where_the_chart_says(
    request: pytest.FixtureRequest, chart: Any, edges: int
) -> None:
    check_every_edge(request, chart, edges)


# ------------------------------------------------------------------ reference model


@dataclass
class RefMessage:
    """What the reference believes about one message (written from docs/design/mailbox.md)."""

    message_id: str
    text: str
    kind: str
    size_bytes: int
    state: str
    disposition: str
    recovered: bool


USER = {"prompt", "steer", "queue"}
WAITING = {"queued", "next_turn", "returned"}


class MailboxAgainstReference(RuleBasedStateMachine):
    """The real Mailbox + Inbox on disk, step by step against a reference."""

    box_coverage: TransitionCoverage  # set per run by the test
    message_coverage: TransitionCoverage
    seen: set[str]  # kinds of steps taken over the whole run

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mind-mailbox-model-"))
        self.path = self.dir / "inbox.json"
        self.inbox = Inbox.open(self.path, acknowledged=(), max_bytes=FILE_CAP)
        self.mailbox = self._new_mailbox()
        # reference
        self.box = "no_owner"
        self.messages: dict[str, RefMessage] = {}  # arrival order
        self.settled: dict[str, str] = {}  # acknowledged and forgotten: id -> disposition
        self.journal_acked: set[str] = set()  # ids in turn_completed.acknowledged
        self.pending_cleanup: list[str] = []  # acknowledged, not yet removed from the inbox
        self.inbox_memory: list[InboxEntry] = []
        self.file_entries: list[InboxEntry] | None = None  # None: no file yet
        self.stale = False  # the file holds entries filtered out at open
        self.accepted: list[str] = []  # every id ever accepted, arrival order
        self.turn = 0
        self.claimed_by: dict[str, list[int]] = {}
        self.acked_by: dict[str, int] = {}
        self.clock_ms = 1_000
        self.fresh = 0
        self.case_edges: set[str] = set()
        self.sent_while_compacting: list[str] = []

    def _new_mailbox(self) -> Mailbox:
        mailbox = Mailbox()
        mailbox.observe(self.box_coverage)
        mailbox.observe(self.message_coverage)
        return mailbox

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self.seen |= self.case_edges

    # ------------------------------------------------------------ reference helpers

    def _pending(self) -> list[RefMessage]:
        return [m for m in self.messages.values() if m.state != "acknowledged"]

    def _expected_refusal(self, kind: str, size_bytes: int) -> str | None:
        pending = self._pending()
        if kind in USER:
            return "steering_full" if sum(m.kind in USER for m in pending) >= 20 else None
        background = [m for m in pending if m.kind == "background"]
        if len(background) >= 100:
            return "background_full"
        if sum(m.size_bytes for m in background) + size_bytes > 7 * MIB:
            return "background_bytes"
        return None

    def _write(self, entries: list[InboxEntry]) -> None:
        self.inbox_memory = entries
        self.file_entries = list(entries)
        self.stale = False

    def _claim(self, states: set[str]) -> list[str]:
        ids = [m.message_id for m in self.messages.values() if m.state in states]
        for message_id in ids:
            assert message_id not in self.acked_by, f"{message_id} claimed after its ack"
            self.messages[message_id].state = "claimed"
            self.claimed_by.setdefault(message_id, []).append(self.turn)
        return ids

    def _refused_with(self, call: str, *args: object) -> None:
        before = (self.mailbox.state, self.mailbox.messages())
        with pytest.raises(IllegalTransition) as refused:
            getattr(self.mailbox, call)(*args)
        assert refused.value.event == call
        assert (self.mailbox.state, self.mailbox.messages()) == before

    def _refused(self, call: str, **kwargs: bool) -> None:
        before = (self.mailbox.state, self.mailbox.messages())
        with pytest.raises(IllegalTransition) as refused:
            getattr(self.mailbox, call)(**kwargs)
        assert refused.value.event == call
        assert (self.mailbox.state, self.mailbox.messages()) == before

    # ------------------------------------------------------------ tour

    @initialize(tour=st.booleans())
    def rare_paths_first(self, tour: bool) -> None:
        """With ``tour``, start the case on the short-lived paths the random rules
        reach only by luck: a steering message dropped before the turn claims
        it, a drop refused for a claimed message, a message returned by an
        abort then dropped, a retried id, the inbox file cap, the 7 MiB
        background budget. The run's coverage (and ``wanted`` below) then does
        not depend on one derandomized sequence, whatever the rules' order."""
        if not tour:
            return
        self.fresh += 1
        self._accept(f"m{self.fresh}", "tour prompt", "prompt", None)
        self.open_turn()
        self.drop(0, None, 0)  # the claimed prompt: refused
        self.steer_running_turn()
        self.drop(0, "queued", 0)
        self.enqueue("steer", True, 0, 1, None)  # a caller's retry of a known id
        self.end_turn(acknowledge=False, cleanup_now=False)  # abort: the prompt returns
        self.drop(0, "returned", 0)
        self.flood(3, "background")
        for _ in range(2):  # the second crosses the small file cap
            self.fresh += 1
            self._accept(f"m{self.fresh}", "x" * BIG_TEXT + "\u00e9", "queue", None)
        # A manual compaction: no turn opens the box; input sent meanwhile
        # waits, and its end says a turn should take it.
        self.begin_compaction()
        self.open_turn()  # refused
        self.fresh += 1
        self._accept(f"m{self.fresh}", "sent while compacting", "prompt", None)
        self.end_compaction()

    # ------------------------------------------------------------ input

    def _accept(self, message_id: str, text: str, kind: MessageKind, size: int | None) -> None:
        size_bytes = size if size is not None else len(text.encode())
        if message_id in self.messages:
            expected: str | None = self.messages[message_id].disposition
            refusal = None
        elif message_id in self.settled:
            expected, refusal = self.settled[message_id], None
        else:
            expected = None
            refusal = self._expected_refusal(kind, size_bytes)
        known = expected is not None
        entry = InboxEntry(
            message_id=message_id,
            text=text,
            kind=InboxKind(kind),
            accepted_at_ms=self.clock_ms,
            recovered=False,
        )
        self.clock_ms += 1
        if refusal is None and not known:
            would_be = encode_inbox([*self.inbox_memory, entry])
            refusal = "inbox_full" if len(would_be) > FILE_CAP else None
        file_before = self.path.read_bytes() if self.path.exists() else None
        snapshot = self.mailbox.messages()
        try:
            disposition = self.mailbox.admit(message_id, text, kind=kind, size_bytes=size)
            added = self.inbox.add(entry)  # durable before accepted
        except InputRefused as error:
            assert error.reason == refusal and error.message_id == message_id
            assert (self.path.read_bytes() if self.path.exists() else None) == file_before
            assert self.mailbox.messages() == snapshot
            self.case_edges.add(f"refused:{refusal}")
            return
        assert refusal is None, f"expected refusal {refusal}"
        assert added is not known
        assert self.mailbox.enqueue(message_id, text, kind=kind, size_bytes=size) == disposition
        if known:
            assert disposition == expected
            self.case_edges.add("idempotent")
            return
        expected = "steering" if self.box == "open" and kind == "steer" else "next_turn"
        assert disposition == expected
        self.case_edges.add(f"accepted:{kind}:{disposition}")
        self.messages[message_id] = RefMessage(
            message_id,
            text,
            kind,
            size_bytes,
            "queued" if expected == "steering" else "next_turn",
            expected,
            recovered=False,
        )
        self._write([*self.inbox_memory, entry])
        self.accepted.append(message_id)
        if self.box == "compacting":
            self.sent_while_compacting.append(message_id)

    @rule(
        kind=st.sampled_from(["prompt", "steer", "steer", "queue", "background"]),
        known=st.booleans(),
        pick=st.integers(min_value=0, max_value=10_000),
        big=st.integers(min_value=0, max_value=5),
        declared=st.sampled_from([None, 3 * MIB]),
    )
    def enqueue(self, kind: MessageKind, known: bool, pick: int, big: int, declared: Any) -> None:
        """One input; with ``known`` an id accepted before (a caller's retry)."""
        if known and self.accepted:
            message_id = self.accepted[pick % len(self.accepted)]
        else:
            self.fresh += 1
            message_id = f"m{self.fresh}"
        text = ("x" * BIG_TEXT if big == 0 else f"text of {message_id}") + "\u00e9"
        self._accept(message_id, text, kind, declared if kind == "background" else None)

    @precondition(lambda self: self.box == "open")
    @rule()
    def steer_running_turn(self) -> None:
        """Steering typed while the turn runs (the common REPL case)."""
        self.fresh += 1
        self._accept(f"m{self.fresh}", f"steer {self.fresh}", "steer", None)

    @rule(
        count=st.sampled_from([2, 3, 3, 21]),
        kind=st.sampled_from(["steer", "queue", "background"]),
    )
    def flood(self, count: int, kind: MessageKind) -> None:
        """Several inputs at once; 21 user inputs reach the 20-message limit,
        3 background completions of 3 MiB each the ~7 MiB budget."""
        size = 3 * MIB if kind == "background" else None
        for _ in range(count):
            self.fresh += 1
            self._accept(f"m{self.fresh}", f"flood {self.fresh}", kind, size)

    # ------------------------------------------------------------ turn

    @rule()
    def open_turn(self) -> None:
        if self.box != "no_owner":
            self._refused("open_turn")
            return
        self.turn += 1
        self.box = "open"
        expected = self._claim(WAITING)
        got = self.mailbox.open_turn()
        assert [m.message_id for m in got] == expected
        assert all(m.state == "claimed" for m in got)
        self.case_edges.add(f"open_turn:{bool(expected)}")

    @rule(pick=st.integers(min_value=0, max_value=255))
    def resume_turn(self, pick: int) -> None:
        """A crashed turn resumed at startup claims only the ids it journaled
        (``pick`` chooses them among the waiting ones; an unknown id is ignored)."""
        if self.box != "no_owner":
            self._refused_with("resume_turn", ["nobody"])
            return
        waiting = [m.message_id for m in self.messages.values() if m.state in WAITING]
        mine = [i for n, i in enumerate(waiting) if pick >> (n % 8) & 1]
        self.turn += 1
        self.box = "open"
        for message_id in mine:
            self.messages[message_id].state = "claimed"
            self.claimed_by.setdefault(message_id, []).append(self.turn)
        got = self.mailbox.resume_turn([*reversed(mine), "unknown-id"])
        assert [m.message_id for m in got] == mine
        self.case_edges.add(f"resume_turn:{len(mine) < len(waiting)}")

    @rule()
    def drain(self) -> None:
        if self.box != "open":
            self._refused("drain")
            return
        expected = self._claim({"queued"})
        assert [m.message_id for m in self.mailbox.drain()] == expected

    @rule()
    def drain_or_seal(self) -> None:
        if self.box != "open":
            self._refused("drain_or_seal")
            return
        expected = self._claim({"queued"})
        if not expected:
            self.box = "sealed"
        assert [m.message_id for m in self.mailbox.drain_or_seal()] == expected
        self.case_edges.add(f"drain_or_seal:{self.box}")

    @rule()
    def begin_compaction(self) -> None:
        """A manual compaction between turns takes the box (docs/design/context.md §5)."""
        if self.box != "no_owner":
            self._refused("begin_compaction")
            return
        self.box = "compacting"
        self.sent_while_compacting = []
        self.mailbox.begin_compaction()

    @rule()
    def end_compaction(self) -> None:
        """The compaction ended: a turn starts when input sent during it still waits."""
        if self.box != "compacting":
            self._refused("end_compaction")
            return
        self.box = "no_owner"
        expected = any(
            i in self.messages and self.messages[i].state in WAITING
            for i in self.sent_while_compacting
        )
        self.sent_while_compacting = []
        assert self.mailbox.end_compaction() == expected
        self.case_edges.add(f"end_compaction:{expected}")

    @rule(acknowledge=st.booleans(), cleanup_now=st.booleans())
    def end_turn(self, acknowledge: bool, cleanup_now: bool) -> None:
        """The terminal record, then (now or later, or never if a crash comes first) cleanup."""
        if self.box in ("no_owner", "compacting"):
            self._refused("end_turn", acknowledge=acknowledge)
            return
        expected: list[str] = []
        for message in self.messages.values():
            if message.state == "claimed":
                message.state = "acknowledged" if acknowledge else "returned"
                if acknowledge:
                    expected.append(message.message_id)
            elif message.state == "queued":
                message.state = "next_turn"
        self.box = "no_owner"
        acknowledged = self.mailbox.end_turn(acknowledge=acknowledge)
        assert acknowledged == expected
        for message_id in acknowledged:
            assert message_id not in self.acked_by, f"{message_id} acknowledged twice"
            self.acked_by[message_id] = self.turn
        self.journal_acked |= set(acknowledged)  # turn_completed is durable here
        self.pending_cleanup.extend(acknowledged)
        self.case_edges.add(f"end_turn:{acknowledge}")
        if cleanup_now:
            self.cleanup()

    @precondition(lambda self: bool(self.pending_cleanup))
    @rule()
    def cleanup(self) -> None:
        """After the terminal record: remove acknowledged ids from the inbox, then forget."""
        ids = list(self.pending_cleanup)
        self.pending_cleanup.clear()
        self.inbox.remove(ids)
        self.mailbox.forget(ids)
        kept = [e for e in self.inbox_memory if e.message_id not in ids]
        if len(kept) != len(self.inbox_memory) or self.stale:
            self._write(kept)
        for message_id in ids:
            self.settled[message_id] = self.messages.pop(message_id).disposition

    @rule(
        pick=st.integers(min_value=0, max_value=10_000),
        want=st.sampled_from([None, "returned", "queued"]),
        roll=st.integers(min_value=0, max_value=1),
    )
    def drop(self, pick: int, want: str | None, roll: int) -> None:
        """The person takes a message back (docs/design/mailbox.md §6): only a waiting one;
        the ``input_dropped`` record (filtered like an acknowledgement on
        reopen) and the inbox rewrite come before the mailbox lets go.

        Taken on one roll in two, so that messages get the time to pile up."""
        if roll or not self.messages:
            return
        # Typed input only (background completions pile up for the byte
        # limit), biased towards short-lived states so every drop edge is taken.
        typed = [m for m in self.messages.values() if m.kind in USER]
        ids = [m.message_id for m in typed if m.state == want] or [m.message_id for m in typed]
        if not ids:
            return
        message_id = ids[pick % len(ids)]
        ref = self.messages[message_id]
        if ref.state not in WAITING:
            before = (self.mailbox.state, self.mailbox.messages())
            with pytest.raises(DropNotAllowed) as refused:
                self.mailbox.check_drop(message_id)
            assert refused.value.message_id == message_id
            with pytest.raises(DropNotAllowed):
                self.mailbox.drop(message_id)
            assert (self.mailbox.state, self.mailbox.messages()) == before
            self.case_edges.add(f"drop_refused:{ref.state}")
            return
        assert self.mailbox.check_drop(message_id).state == ref.state
        self.journal_acked.add(message_id)  # input_dropped is durable here
        self.inbox.remove([message_id])
        dropped = self.mailbox.drop(message_id)
        assert (dropped.message_id, dropped.state) == (message_id, "dropped")
        kept = [e for e in self.inbox_memory if e.message_id != message_id]
        if len(kept) != len(self.inbox_memory) or self.stale:
            self._write(kept)
        self.settled[message_id] = self.messages.pop(message_id).disposition
        self.case_edges.add(f"dropped:{ref.state}")

    @rule(roll=st.integers(min_value=0, max_value=3))
    def crash_and_reopen(self, roll: int) -> None:
        """kill -9 at any point: only inbox.json and the journal's acks survive.

        Taken on one roll in four, so that turns get the time to run between crashes.
        """
        if roll:
            return
        self.inbox = Inbox.open(self.path, acknowledged=set(self.journal_acked), max_bytes=FILE_CAP)
        self.mailbox = self._new_mailbox()
        self.mailbox.restore(
            [(e.message_id, e.text, e.kind.value) for e in self.inbox.entries],
            acknowledged=set(self.journal_acked),
        )
        # reference: an unterminated turn is aborted; survivors wait, recovered, in order
        self.box = "no_owner"
        self.pending_cleanup.clear()
        survivors = [
            msgspec.structs.replace(e, recovered=True)
            for e in self.file_entries or []
            if e.message_id not in self.journal_acked
        ]
        self.inbox_memory = survivors
        self.stale = len(survivors) != len(self.file_entries or [])
        self.messages = {
            e.message_id: RefMessage(
                e.message_id,
                e.text,
                e.kind.value,
                len(e.text.encode()),
                "next_turn",
                "next_turn",
                recovered=True,
            )
            for e in survivors
        }
        self.settled = dict.fromkeys(self.journal_acked, "next_turn")
        # nothing accepted is lost: every accepted, unacknowledged id is waiting
        lost = [i for i in self.accepted if i not in self.journal_acked and i not in self.messages]
        assert lost == []
        self.case_edges.add(f"reopen:{len(survivors) > 0}")

    # ------------------------------------------------------------ invariants

    @invariant()
    def matches_reference(self) -> None:
        box = self.mailbox
        assert (box.state, box.is_active, box.has_turn_owner, box.has_owner) == (
            self.box,
            self.box == "open",
            self.box in ("open", "sealed"),
            self.box != "no_owner",
        )
        assert [
            (m.message_id, m.text, m.kind, m.size_bytes, m.state, m.disposition, m.recovered)
            for m in box.messages()
        ] == [
            (m.message_id, m.text, m.kind, m.size_bytes, m.state, m.disposition, m.recovered)
            for m in self.messages.values()
        ]
        assert [m.message_id for m in box.waiting()] == [
            m.message_id for m in self.messages.values() if m.state in WAITING
        ]
        assert [m.message_id for m in box.claimed()] == [
            m.message_id for m in self.messages.values() if m.state == "claimed"
        ]

    @invariant()
    def inbox_matches_reference_on_disk(self) -> None:
        assert self.inbox.entries == self.inbox_memory
        if self.file_entries is None:
            assert not self.path.exists()
            return
        data = self.path.read_bytes()
        assert data == encode_inbox(self.file_entries)
        assert len(data) <= FILE_CAP <= MAX_INBOX_BYTES
        assert self.path.stat().st_mode & 0o777 == 0o600

    @invariant()
    def order_limits_and_acknowledgements(self) -> None:
        held = [m.message_id for m in self.mailbox.messages()]
        assert held == [i for i in self.accepted if i in set(held)]  # arrival order
        pending = [m for m in self.mailbox.messages() if m.state != "acknowledged"]
        background = [m for m in pending if m.kind == "background"]
        assert sum(m.kind in USER for m in pending) <= 20
        assert len(background) <= 100 and sum(m.size_bytes for m in background) <= 7 * MIB
        assert not any(m.message_id in self.acked_by for m in pending)  # never replayed
        for message_id, turns in self.claimed_by.items():
            assert turns == sorted(set(turns)), f"{message_id} claimed twice by one turn"


def test_mailbox_and_inbox_against_reference_model(request: pytest.FixtureRequest) -> None:
    box_coverage = TransitionCoverage(MailboxChart)
    message_coverage = TransitionCoverage(InboxMessageChart)

    class Run(MailboxAgainstReference):
        pass

    Run.box_coverage = box_coverage
    Run.message_coverage = message_coverage
    Run.seen = set()
    run_state_machine_as_test(Run, settings=CI)
    print(sorted(Run.seen))
    write_report(request, "MailboxChart-model", box_coverage)
    write_report(request, "InboxMessageChart-model", message_coverage)
    assert box_coverage.missed == (), box_coverage.report()
    assert message_coverage.missed == (), message_coverage.report()
    wanted = {
        "idempotent",
        "refused:steering_full",
        "refused:background_bytes",
        "refused:inbox_full",
        "reopen:True",
        "accepted:steer:steering",
        "accepted:steer:next_turn",
        "dropped:queued",
        "dropped:next_turn",
        "dropped:returned",
        "drop_refused:claimed",
        "resume_turn:True",
        "end_compaction:True",
    }
    assert wanted <= Run.seen, sorted(wanted - Run.seen)
