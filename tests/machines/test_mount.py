"""The mount machine and the ledger rules, pure (docs/design/mounts.md; mount.yaml).

Whole-structure comparisons: :func:`path` records the leaf state after each
call, so a wrong step anywhere shows in the diff.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mind.errors import IllegalTransition, MountHolder, MountRefused
from mind.generated.session_mounts import MountOwner
from mind.machines.mount import (
    BACKOFF_MS,
    HOSTED_STATES,
    MAX_BACKOFF_MS,
    MIN_BACKOFF_MS,
    REFUSAL_STATES,
    MountMachine,
    OwnRecord,
    backoff_ms,
    holders_of,
    lock_verdict,
    parse_token,
    with_own_record,
)


def path(machine: MountMachine, *calls: Callable[[], None]) -> list[str]:
    out = [machine.state]
    for call in calls:
        call()
        out.append(machine.state)
    return out


# ------------------------------------------------------------------ the machine


def test_granted_claim_settles_attached_then_parks_and_releases() -> None:
    m = MountMachine()
    assert path(
        m, m.claim, m.grant, lambda: m.settle(attached=True), m.park, m.attach, m.park, m.release
    ) == [
        "free",
        "reserving",
        "reserved",
        "attached",
        "parked",
        "attached",
        "parked",
        "released",
    ]


def test_settle_parked_and_reenter_keeps_every_hosted_state() -> None:
    m = MountMachine()
    assert path(
        m, m.claim, m.grant, m.reenter, lambda: m.settle(attached=False), m.reenter, m.attach
    ) == ["free", "reserving", "reserved", "reserved", "parked", "parked", "attached"]
    m.reenter()
    assert m.state == "attached"


def test_abandon_gives_the_claim_back() -> None:
    m = MountMachine()
    assert path(m, m.claim, m.grant, m.abandon) == ["free", "reserving", "reserved", "abandoned"]
    assert not m.hosted


def test_contention_backs_off_through_the_whole_budget_then_busy() -> None:
    m = MountMachine()
    m.claim()
    waits = []
    for _ in BACKOFF_MS:
        m.contend()
        assert m.state == "backing_off"
        waits.append(m.next_backoff_ms(0.5))
        m.retry()
        assert m.state == "reserving"
    m.contend()
    assert (m.state, m.retries_used, waits) == ("busy", len(BACKOFF_MS), list(BACKOFF_MS))


def test_contention_then_grant_after_one_retry() -> None:
    m = MountMachine()
    assert path(m, m.claim, m.contend, m.retry, m.grant) == [
        "free",
        "reserving",
        "backing_off",
        "reserving",
        "reserved",
    ]
    assert (m.retries_used, m.unpublished) == (1, False)


@pytest.mark.parametrize(
    ("new_session", "expected"), [(False, "unavailable"), (True, "reserved")], ids=["old", "new"]
)
def test_unavailable_refuses_an_existing_session_but_not_a_new_one(
    new_session: bool, expected: str
) -> None:
    m = MountMachine(new_session=new_session)
    m.claim()
    m.fail()
    assert (m.state, m.unpublished, m.hosted) == (expected, new_session, new_session)


@pytest.mark.parametrize(
    ("new_session", "expected"), [(False, "busy"), (True, "reserved")], ids=["old", "new"]
)
def test_busy_refuses_an_existing_session_but_not_a_new_one(
    new_session: bool, expected: str
) -> None:
    m = MountMachine(new_session=new_session)
    m.claim()
    for _ in BACKOFF_MS:
        m.contend()
        m.retry()
    m.contend()
    assert (m.state, m.unpublished) == (expected, new_session)


@pytest.mark.parametrize("new_session", [False, True], ids=["old", "new"])
def test_occupied_is_refused_even_for_a_new_id(new_session: bool) -> None:
    m = MountMachine(new_session=new_session)
    assert path(m, m.claim, m.conflict) == ["free", "reserving", "occupied"]


@pytest.mark.parametrize("final", sorted(REFUSAL_STATES | {"abandoned", "released"}))
def test_final_states_refuse_every_event(final: str) -> None:
    m = MountMachine()
    m.claim()
    if final == "occupied":
        m.conflict()
    elif final == "unavailable":
        m.fail()
    elif final == "busy":
        for _ in BACKOFF_MS:
            m.contend()
            m.retry()
        m.contend()
    else:
        m.grant()
        if final == "released":
            m.settle(attached=True)
            m.release()
        else:
            m.abandon()
    assert m.state == final
    for event in ("claim", "grant", "conflict", "contend", "fail", "retry", "reenter"):
        with pytest.raises(IllegalTransition) as refused:
            getattr(m, event)()
        assert (refused.value.event, refused.value.state, m.state) == (event, final, final)


def test_misuse_is_refused_and_leaves_the_machine_unchanged() -> None:
    m = MountMachine()
    with pytest.raises(IllegalTransition, match="'settle' is not allowed in state 'free'"):
        m.settle(attached=True)
    with pytest.raises(IllegalTransition):
        m.reenter()
    m.claim()
    with pytest.raises(IllegalTransition):
        m.retry()
    with pytest.raises(IllegalTransition):
        m.next_backoff_ms(0.0)
    with pytest.raises(IllegalTransition):
        m.release()  # a reserved claim is abandoned, not released
    assert (m.state, m.retries_used) == ("reserving", 0)


def test_hosted_states_are_the_published_set() -> None:
    assert {"reserved", "attached", "parked"} == HOSTED_STATES
    assert {"occupied", "busy", "unavailable"} == REFUSAL_STATES


# ------------------------------------------------------------------ backoff


def test_backoff_is_always_within_25_to_400_ms() -> None:
    for index in range(len(BACKOFF_MS)):
        for jitter in (0.0, 0.25, 0.5, 0.999, 1.0):
            assert MIN_BACKOFF_MS <= backoff_ms(index, jitter) <= MAX_BACKOFF_MS
    assert [backoff_ms(i, 0.0) for i in range(5)] == [25, 25, 50, 100, 200]
    assert [backoff_ms(i, 1.0) for i in range(5)] == [38, 75, 150, 300, 400]
    with pytest.raises(ValueError):
        backoff_ms(len(BACKOFF_MS), 0.5)
    with pytest.raises(ValueError):
        backoff_ms(0, 1.5)


# ------------------------------------------------------------------ lock tokens


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"123-abc0", (123, "abc0", "")),  # an older mind's token: no start identity
        (b"1-f", (1, "f", "")),
        (b"123-abc0@0e1f-2a:987", (123, "abc0", "0e1f-2a:987")),
        (b"123-abc0@", None),
        (b"123-abc0@a b", None),
        (b"123-abc0@" + b"x" * 129, None),
        (b"", None),
        (b"123", None),
        (b"123-", None),
        (b"-abc", None),
        (b"0-abc", None),
        (b"12a-abc", None),
        (b"123-ABC", None),
        (b"123-ab-c", None),
        (b"123-ab c", None),
        (b"\xff\xfe", None),
        (b"99999999999-abc", None),
    ],
)
def test_parse_token(raw: bytes, expected: tuple[int, str, str] | None) -> None:
    assert parse_token(raw) == expected


@pytest.mark.parametrize(
    ("raw", "age_s", "alive", "expected"),
    [
        (b"10-abc", 0.0, True, "held"),
        (b"10-abc", 10**9, True, "held"),  # alive: never reclaimed, however old (§6.5)
        (b"10-abc", 0.0, False, "dead"),
        (b"garbage", 0.0, True, "held"),  # unreadable, inside the create-to-write window
        (b"", 9.9, False, "held"),
        (b"", 10.1, False, "stale"),
        (b"", -50.0, False, "held"),  # clock skew: treated as fresh
    ],
)
def test_lock_verdict(raw: bytes, age_s: float, alive: bool, expected: str) -> None:
    seen: list[int] = []

    def is_alive(pid: int, identity: str) -> bool:
        seen.append(pid)
        return alive

    assert lock_verdict(raw, age_s=age_s, stale_after_s=10.0, alive=is_alive) == expected
    assert seen == ([10] if raw.startswith(b"10-") else [])


def test_lock_verdict_passes_the_token_identity_and_knows_its_own_old_tokens() -> None:
    seen: list[tuple[int, str]] = []

    def same(pid: int, identity: str) -> bool:
        seen.append((pid, identity))
        return identity != "boot:1"  # the process with this pid now has another identity

    verdict = lock_verdict(b"10-abc@boot:1", age_s=0.0, stale_after_s=10.0, alive=same, me=10)
    assert (verdict, seen) == ("dead", [(10, "boot:1")])
    assert lock_verdict(b"10-abc@boot:2", age_s=0.0, stale_after_s=10.0, alive=same) == "held"
    # An old-format token naming this very pid was not written by this process.
    assert lock_verdict(b"10-abc", age_s=0.0, stale_after_s=10.0, alive=same, me=10) == "dead"
    assert lock_verdict(b"10-abc", age_s=0.0, stale_after_s=10.0, alive=same, me=11) == "held"


# ------------------------------------------------------------------ owners


def owner(pid: int, *sessions: str, started: int = 0) -> MountOwner:
    return MountOwner(pid=pid, startedAt=started, sessionIds=list(sessions))


def test_holders_of_names_live_other_processes_only() -> None:
    owners = [
        owner(1, "a", "b", started=11),
        owner(2, "b"),  # dead
        owner(3, "c"),
        owner(4, "b", started=44),
        owner(1, "b", started=99),  # duplicate pid: first record wins
        owner(7, "b"),  # this process
    ]
    live = lambda pid, _identity: pid in {1, 3, 4, 7}  # noqa: E731
    assert holders_of(owners, "b", me=7, alive=live) == (
        MountHolder(pid=1, started_at_ms=11),
        MountHolder(pid=4, started_at_ms=44),
    )
    assert holders_of(owners, "c", me=3, alive=live) == ()
    assert holders_of(owners, "zzz", me=7, alive=live) == ()


def test_with_own_record_drops_dead_keeps_order_and_replaces_mine_in_place() -> None:
    owners = [owner(1, "a"), owner(5, "old"), owner(2, "b"), owner(3, "c")]
    live = lambda pid, _identity: pid in {1, 3, 5}  # noqa: E731
    assert with_own_record(
        owners, me=5, started_at_ms=9, session_ids=["z", "y", "z"], alive=live
    ) == OwnRecord(
        owners=[owner(1, "a"), owner(5, "y", "z", started=9), owner(3, "c")],
        published=frozenset({"y", "z"}),
        withheld={},
    )


def test_with_own_record_appends_a_new_record_and_removes_an_empty_one() -> None:
    owners = [owner(1, "a")]
    live = lambda pid, _identity: pid in {1, 5}  # noqa: E731
    assert with_own_record(owners, me=5, started_at_ms=9, session_ids=["s"], alive=live).owners == [
        owner(1, "a"),
        owner(5, "s", started=9),
    ]
    assert with_own_record(
        [owner(5, "s"), owner(1, "a"), owner(5, "t")],
        me=5,
        started_at_ms=9,
        session_ids=[],
        alive=live,
    ) == OwnRecord(owners=[owner(1, "a")], published=frozenset(), withheld={})


def test_with_own_record_never_lists_a_session_a_live_other_lists() -> None:
    """No two live processes ever list one session (docs/design/mounts.md §7.2):
    the session is withheld from this record, with who lists it; a dead
    lister withholds nothing."""
    owners = [owner(1, "a", started=11), owner(2, "b"), owner(4, "a", "c", started=44)]
    live = lambda pid, _identity: pid in {1, 4, 5}  # noqa: E731
    assert with_own_record(
        owners, me=5, started_at_ms=9, session_ids=["a", "b", "d"], alive=live
    ) == OwnRecord(
        owners=[
            owner(1, "a", started=11),
            owner(4, "a", "c", started=44),
            owner(5, "b", "d", started=9),
        ],
        published=frozenset({"b", "d"}),
        withheld={"a": (MountHolder(1, started_at_ms=11), MountHolder(4, started_at_ms=44))},
    )
    # Everything withheld: the record is removed, as with no sessions at all.
    assert with_own_record(
        [owner(1, "a"), owner(5, "a")], me=5, started_at_ms=9, session_ids=["a"], alive=live
    ) == OwnRecord(
        owners=[owner(1, "a")],
        published=frozenset(),
        withheld={"a": (MountHolder(pid=1, started_at_ms=0),)},
    )


# ------------------------------------------------------------------ refusals


def test_refusal_messages_share_the_occupied_wording() -> None:
    occupied = MountRefused("s1", "occupied", holders=(MountHolder(42, 0), MountHolder(43, 0)))
    busy = MountRefused("s1", "busy")
    unavailable = MountRefused("s1", "unavailable", detail="x is damaged")
    assert [
        (str(e), e.kind, e.pid, e.detail, e.session_id) for e in (occupied, busy, unavailable)
    ] == [
        ("session s1: occupied by pid 42, 43", "occupied", 42, "occupied by pid 42, 43", "s1"),
        (
            "session s1: the session mount ledger is busy (another mind is updating it); try again",
            "busy",
            None,
            "the session mount ledger is busy (another mind is updating it); try again",
            "s1",
        ),
        (
            "session s1: cannot check who holds it: x is damaged",
            "unavailable",
            None,
            "x is damaged",
            "s1",
        ),
    ]
