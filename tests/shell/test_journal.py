"""The session journal on real files (docs/design/journal.md; mind.shell.journal).

Lines are built independently here from the documented format (record JSON,
optional ``torn`` vouch, ``crc32`` over the preceding bytes) so the tests pin
the on-disk format, not just a round trip through the implementation.
"""

from __future__ import annotations

import stat
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import msgspec
import pytest

from mind.errors import JournalCorruptError, JournalError
from mind.generated import journal as jr
from mind.shell.journal import MAX_LINE_BYTES, Journal, JournalOpenReport, read_records
from tests.support import records as rec

CLEAN = JournalOpenReport(torn_tail_dropped=False, torn_tail_bytes=0, records=0)


def _user(text: str = "hello", message_id: str = "m") -> jr.UserMessage:
    return jr.UserMessage(
        seq=0,
        recorded_at_ms=0,
        turn_id="t1",
        message_id=message_id,
        text=text,
        kind="prompt",
    )


def _round(items: list[dict[str, object]] | None = None) -> jr.ModelRound:
    call = rec.call("call_1", arguments='{"cmd":"ls"}', provider_fields={"x": 1})
    usage = jr.Usage(input_tokens=3, output_tokens=4)
    return rec.model_round(
        "t1", "ok", [call], provider="openai-chat", usage=usage, items=items or []
    )


def _line(record: jr.JournalRecord, torn: tuple[int, int] | None = None) -> bytes:
    """One journal line built from the documented format."""
    body = msgspec.json.encode(record)[:-1]
    if torn is not None:
        body += b',"torn":{"bytes":%d,"crc32":"%08x"}' % torn
    return body + b',"crc32":"%08x"}\n' % zlib.crc32(body)


def _stamped(record: jr.JournalRecord, seq: int, at_ms: int = 7) -> jr.JournalRecord:
    return msgspec.structs.replace(record, seq=seq, recorded_at_ms=at_ms)


def _start() -> jr.SessionStarted:
    return jr.SessionStarted(seq=0, recorded_at_ms=0, session_id="s1", cwd="/w", mind_version="t")


def _write(path: Path, n: int) -> list[jr.JournalRecord]:
    """A session journal of ``n`` records: ``session_started``, then user messages."""
    with Journal.open(path, create=True, clock_ms=lambda: 7) as j:
        for i in range(n):
            j.append(_user(f"text {i}", f"m{i}") if i else _start())
        return list(j.records)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions" / "s1" / "journal.jsonl"


def test_create_append_reopen_roundtrip(path: Path) -> None:
    with Journal.open(path, create=True, clock_ms=lambda: 1234) as j:
        assert (j.records, j.report, j.next_seq) == ([], CLEAN, 0)
        first = j.append(_start(), sync=True)
        second = j.append(_round(), sync=True)
        j.sync()
        assert [first, second] == [_stamped(_start(), 0, 1234), _stamped(_round(), 1, 1234)]
        assert j.records == [first, second]
        assert j.next_seq == 2
    assert path.read_bytes() == _line(first) + _line(second)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for d in (path.parent, path.parent.parent, path.parent.parent.parent):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700
    with Journal.open(path) as again:
        assert again.records == [first, second]
        assert again.report == JournalOpenReport(
            torn_tail_dropped=False, torn_tail_bytes=0, records=2
        )
        assert again.next_seq == 2
    assert read_records(path) == ([first, second], again.report)


def test_lines_are_json_objects_ending_with_crc(path: Path) -> None:
    _write(path, 2)
    for raw in _lines(path)[:-1]:
        obj = msgspec.json.decode(raw)
        assert list(obj)[-1] == "crc32"
        assert raw.endswith(b',"crc32":"%08x"}' % zlib.crc32(raw[: -len(',"crc32":"00000000"}')]))


def test_missing_journal_is_an_error_unless_created(path: Path) -> None:
    with pytest.raises(JournalError) as err:
        Journal.open(path)
    assert type(err.value) is JournalError
    assert (err.value.path, err.value.line) == (path, 0)
    with pytest.raises(JournalError):
        read_records(path)
    assert not path.parent.exists()


def test_a_journal_without_its_session_started_record_is_refused(path: Path) -> None:
    """Empty, all damage, or another first record: never opened as a session
    (it would start empty with the caller's cwd); the file stays byte-identical."""
    path.parent.mkdir(parents=True)
    garbage = b"not json\n\x00\x00\x00\nstill not\n"
    cases = [
        (b"", 1, "empty journal"),
        (garbage, 1, "not a journal line"),
        (b'{"type":"session_started","se', 1, "torn write"),  # a crash while creating it
        (_line(_stamped(_user(), 0)), 1, "first record is 'user_message'"),
    ]
    for data, line, why in cases:
        path.write_bytes(data)
        for opener in (Journal.open, read_records):
            with pytest.raises(JournalCorruptError) as err:
                opener(path)
            assert (err.value.path, err.value.line) == (path, line)
            assert why in err.value.detail
            assert path.read_bytes() == data
    with Journal.open(path.with_name("new.jsonl"), create=True) as j:  # creating is fine
        assert (j.records, j.report) == ([], CLEAN)


def test_only_the_last_line_may_be_a_torn_tail(path: Path) -> None:
    """A damaged line followed by more damage is corruption, named by its line,
    unless our own append ended it with the separator ``~``."""
    records = _write(path, 2)
    good = path.read_bytes()
    path.write_bytes(good + b"garbage\n" + b'{"type":"user_mes')
    with pytest.raises(JournalCorruptError) as err:
        Journal.open(path)
    assert (err.value.line, "not the last line" in err.value.detail) == (3, True)
    path.write_bytes(good + b"garbage~\n" + b'{"type":"user_mes')
    assert read_records(path)[0] == records


def test_symlink_is_refused(path: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    _write(target, 1)
    path.parent.mkdir(parents=True)
    path.symlink_to(target)
    with pytest.raises(JournalError):
        Journal.open(path)


@pytest.mark.parametrize(
    ("cut", "case"),
    [
        (7, "mid-line"),
        (1, "only its newline missing"),
        (0, "garbage line with newline"),
    ],
)
def test_torn_last_line_is_dropped_reported_and_kept_on_disk(
    path: Path, cut: int, case: str
) -> None:
    records = _write(path, 3)
    data = path.read_bytes()
    last_len = len(_lines(path)[2]) + 1
    if case == "garbage line with newline":
        damaged = data[:-last_len] + b'{"type":"user_mes\x00\x00\x00\x00\n'
    else:
        damaged = data[:-cut]
    path.write_bytes(damaged)
    tail = len(damaged) - (len(data) - last_len)
    expected = JournalOpenReport(
        torn_tail_dropped=True, torn_tail_bytes=tail, records=2, torn_tail_line=3
    )
    with Journal.open(path, clock_ms=lambda: 9) as j:
        assert (j.records, j.report, j.next_seq) == (records[:2], expected, 2)
        assert path.read_bytes() == damaged  # opening never changes the file
        new = j.append(_user("after"))
    assert new == _stamped(_user("after"), 2, 9)
    sep = b"" if damaged.endswith(b"\n") else b"~\n"
    span = damaged[len(data) - last_len :] + sep
    assert path.read_bytes() == damaged + sep + _line(new, (len(span), zlib.crc32(span)))
    records_again, report = read_records(path)
    assert records_again == [*records[:2], new]
    assert report == JournalOpenReport(
        torn_tail_dropped=False, torn_tail_bytes=0, records=3, earlier_torn_spans=1
    )


def test_torn_tail_followed_by_interrupted_append_spans_two_lines(path: Path) -> None:
    records = _write(path, 2)
    good = path.read_bytes()
    torn_first = b'{"type":"user_message","se'
    second_attempt = b'~\n{"type":"tool_res'
    path.write_bytes(good + torn_first + second_attempt)
    with Journal.open(path, clock_ms=lambda: 9) as j:
        assert j.report == JournalOpenReport(
            torn_tail_dropped=True,
            torn_tail_bytes=len(torn_first + second_attempt),
            records=2,
            torn_tail_line=3,
        )
        new = j.append(_user("again"))
    assert read_records(path)[0] == [*records, new]


def test_corrupt_middle_line_fails_closed_with_line_number(path: Path) -> None:
    _write(path, 4)
    data = bytearray(path.read_bytes())
    lines = _lines(path)
    at = len(lines[0]) + 1 + 20  # inside line 2
    data[at] ^= 0x01
    path.write_bytes(bytes(data))
    for opener in (Journal.open, read_records):
        with pytest.raises(JournalCorruptError) as err:
            opener(path)
        assert (err.value.path, err.value.line) == (path, 2)
        assert "integrity" in err.value.detail
    assert path.read_bytes() == bytes(data)


def test_empty_line_in_the_middle_is_corruption(path: Path) -> None:
    _write(path, 2)
    lines = _lines(path)
    path.write_bytes(lines[0] + b"\n\n" + lines[1] + b"\n")
    with pytest.raises(JournalCorruptError) as err:
        Journal.open(path)
    assert err.value.line == 2


def test_seq_gap_or_repeat_is_corruption_even_on_the_last_line(path: Path) -> None:
    path.parent.mkdir(parents=True)
    for seqs, bad_line in (([0, 2], 2), ([0, 1, 1], 3), ([1], 1)):
        path.write_bytes(b"".join(_line(_stamped(_user(), s)) for s in seqs))
        with pytest.raises(JournalCorruptError) as err:
            Journal.open(path)
        assert err.value.line == bad_line
        assert "seq" in err.value.detail


def test_checked_line_failing_the_schema_is_corruption_not_a_torn_tail(path: Path) -> None:
    path.parent.mkdir(parents=True)
    body = b'{"type":"user_message","seq":1,"recorded_at_ms":0,"surprise":true'
    bad = body + b',"crc32":"%08x"}\n' % zlib.crc32(body)
    path.write_bytes(_line(_stamped(_user(), 0)) + bad)
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    assert err.value.line == 2
    assert "not a valid journal record" in err.value.detail


def test_vouch_must_match_the_damaged_bytes_exactly(path: Path) -> None:
    path.parent.mkdir(parents=True)
    first = _line(_stamped(_start(), 0))
    torn = b'{"type":"user_m\n'
    ok = _line(_stamped(_user(), 1), (len(torn), zlib.crc32(torn)))
    path.write_bytes(first + torn + ok)
    assert read_records(path)[1].earlier_torn_spans == 1
    # Same length, different bytes: the vouch no longer covers them.
    path.write_bytes(first + b'{"type":"user_X\n' + ok)
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    assert err.value.line == 2
    # A vouch with nothing before it.
    path.write_bytes(first + ok)
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    assert err.value.line == 2
    assert "vouches" in err.value.detail


def test_hostile_strings_round_trip_on_one_line(path: Path) -> None:
    text = 'a\u2028b\u2029c\x00d\ne\rf\x1b[31m "quoted" \\ \ufeff😀 é'
    with Journal.open(path, create=True, clock_ms=lambda: 1) as j:
        start = j.append(_start())
        stored = j.append(_user(text))
    assert isinstance(stored, jr.UserMessage)
    assert stored.text == text
    raw = path.read_bytes()
    assert raw.count(b"\n") == 2
    assert "\u2028".encode() in raw  # raw UTF-8; lines split on b"\n" only
    assert read_records(path)[0] == [start, stored]


def test_lone_surrogates_become_replacement_characters(path: Path) -> None:
    invalid_utf8 = b"ok \xff\xfe end".decode("utf-8", errors="surrogateescape")
    rec = _round(items=[{"k\udcff": ["v\ud800", {"n": "\udfff"}]}])
    rec = msgspec.structs.replace(rec, text=invalid_utf8)
    with Journal.open(path, create=True, clock_ms=lambda: 1) as j:
        start = j.append(_start())
        stored = j.append(rec)
        assert j.records == [start, stored]
    assert isinstance(stored, jr.ModelRound)
    assert stored.text == "ok \ufffd\ufffd end"
    assert stored.provider_items == [{"k\ufffd": ["v\ufffd", {"n": "\ufffd"}]}]
    assert read_records(path)[0] == [start, stored]


def test_unjournalable_records_write_nothing_and_keep_the_journal_usable(path: Path) -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    negative = msgspec.structs.replace(_round(), usage=jr.Usage(input_tokens=-1, output_tokens=0))
    too_long = _user("x" * (MAX_LINE_BYTES + 1))
    not_json = _round(items=[{"obj": object()}])
    with Journal.open(path, create=True, clock_ms=lambda: 1) as j:
        start = j.append(_start())
        header = path.read_bytes()
        for bad in (_round(items=[{"deep": deep}]), negative, too_long, not_json):
            with pytest.raises(JournalError) as err:
                j.append(bad)
            assert err.value.line == 0
            assert path.read_bytes() == header
            assert (j.records, j.next_seq) == ([start], 1)
        good = j.append(_user())
    assert read_records(path)[0] == [start, good]


def test_deeply_nested_checked_line_is_corruption(path: Path) -> None:
    path.parent.mkdir(parents=True)
    body = (
        b'{"type":"user_message","seq":0,"recorded_at_ms":0,"turn_id":'
        + b"[" * 100_000
        + b"]" * 100_000
    )
    path.write_bytes(body + b',"crc32":"%08x"}\n' % zlib.crc32(body) + _line(_stamped(_user(), 1)))
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    assert err.value.line == 1


def test_overlong_line_is_damage(path: Path) -> None:
    path.parent.mkdir(parents=True)
    first = _line(_stamped(_start(), 0))
    huge = b"x" * (MAX_LINE_BYTES + 10)
    path.write_bytes(first + huge + b"\n" + _line(_stamped(_user(), 1)))
    with pytest.raises(JournalCorruptError) as err:
        read_records(path)
    assert err.value.line == 2
    assert "longer" in err.value.detail
    path.write_bytes(first + huge + b"\n")
    assert read_records(path)[1] == JournalOpenReport(
        torn_tail_dropped=True, torn_tail_bytes=len(huge) + 1, records=1, torn_tail_line=2
    )


def test_closed_journal_refuses_appends(path: Path) -> None:
    j = Journal.open(path, create=True)
    j.close()
    j.close()
    assert j.closed
    with pytest.raises(JournalError, match="closed"):
        j.append(_user())
    with pytest.raises(JournalError, match="closed"):
        j.sync()


def test_failed_write_breaks_the_journal_and_reopen_drops_the_torn_tail(path: Path) -> None:
    """A real short write: RLIMIT_FSIZE makes the kernel stop mid-line."""
    records = _write(path, 1)
    limit = path.stat().st_size + 40
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        from pathlib import Path
        from mind.generated import journal as jr
        from mind.errors import JournalError
        from mind.shell.journal import Journal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        j = Journal.open(Path(sys.argv[1]))
        rec = jr.UserMessage(seq=0, recorded_at_ms=0, turn_id="t", message_id="m",
                             text="y" * 200, kind="prompt")
        for attempt in range(2):
            try:
                j.append(rec)
            except JournalError as exc:
                print(attempt, exc.line, exc.detail)
        print(len(j.records))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.splitlines()
    assert out[0].startswith("0 0 cannot append")
    assert out[1].startswith("1 0 a write failed")
    assert out[2] == "1"
    assert path.stat().st_size == limit
    with Journal.open(path, clock_ms=lambda: 9) as j:
        assert j.report == JournalOpenReport(
            torn_tail_dropped=True, torn_tail_bytes=40, records=1, torn_tail_line=2
        )
        new = j.append(_user("later"))
    assert read_records(path)[0] == [*records, new]
