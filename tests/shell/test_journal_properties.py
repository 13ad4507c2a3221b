"""Properties of the journal under damage, on real files (docs/design/journal.md).

- Cut anywhere: a journal cut at any byte opens as a clean prefix of what was
  written, the rest reported as a torn tail; the file is never changed; an
  append after it survives the next open with the torn bytes vouched for.
- Damage anywhere: one flipped byte either fails closed naming exactly the
  damaged line, or (last line only) is dropped as a torn tail.
- A journal cut inside its ``session_started`` line is refused (line 1).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mind.errors import JournalCorruptError
from mind.generated import journal as jr
from mind.shell.journal import Journal, JournalOpenReport, read_records
from tests.support import records as builders

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow],
)

_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(["\n", "\r", "\x00", "\u2028", "\u2029", '"', "\\", "}", "~"]),
    max_size=40,
)


def _user(text: str) -> jr.JournalRecord:
    return jr.UserMessage(
        seq=0, recorded_at_ms=0, turn_id="t", message_id="m", text=text, kind="prompt"
    )


def _result(text: str) -> jr.JournalRecord:
    return jr.ToolResult(
        seq=0,
        recorded_at_ms=0,
        turn_id="t",
        call_id="c",
        name="shell",
        status="ok",
        output=text,
        synthetic=False,
    )


def _round(text: str) -> jr.JournalRecord:
    return builders.model_round(
        "t",
        text,
        [builders.call("c")],
        provider="p",
        usage=jr.Usage(input_tokens=1, output_tokens=2),
        items=[{"type": "reasoning", "crc32": "00000000", "torn": {"bytes": 1}}],
    )


records_st = st.lists(
    st.one_of(_text.map(_user), _text.map(_result), _text.map(_round)), min_size=1, max_size=6
)


_START: jr.JournalRecord = jr.SessionStarted(
    seq=0, recorded_at_ms=0, session_id="s", cwd="/w", mind_version="t"
)


def _write(path: Path, records: list[jr.JournalRecord]) -> tuple[list[jr.JournalRecord], bytes]:
    """A session journal: its ``session_started`` record, then ``records``."""
    records = [_START, *records]
    with Journal.open(path, create=True, clock_ms=lambda: 42) as j:
        for r in records[:-1]:
            j.append(r)
        j.append(records[-1], sync=True)
        return list(j.records), path.read_bytes()


def _line_starts(data: bytes) -> list[int]:
    starts = [0]
    for i, b in enumerate(data):
        if b == 0x0A:
            starts.append(i + 1)
    return starts


@SETTINGS
@given(records=records_st, draw=st.data(), extra=_text)
def test_cut_at_any_byte_reopens_as_a_clean_prefix(
    records: list[jr.JournalRecord], draw: st.DataObject, extra: str
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s" / "journal.jsonl"
        written, data = _write(path, records)
        cut = draw.draw(st.integers(min_value=0, max_value=len(data)), label="cut")
        cut_data = data[:cut]
        path.write_bytes(cut_data)
        starts = _line_starts(data)
        complete = sum(1 for s in starts[1:] if s <= cut)
        boundary = starts[complete]
        if complete == 0:  # cut inside the session_started line: not a session
            with pytest.raises(JournalCorruptError) as err:
                Journal.open(path)
            assert (err.value.line, path.read_bytes()) == (1, cut_data)
            return
        with Journal.open(path, clock_ms=lambda: 43) as j:
            assert path.read_bytes() == cut_data
            assert j.records == written[:complete]
            assert j.report == JournalOpenReport(
                torn_tail_dropped=cut > boundary,
                torn_tail_bytes=cut - boundary,
                records=complete,
                torn_tail_line=complete + 1 if cut > boundary else 0,
            )
            added = j.append(_user(extra))
        again, report = read_records(path)
        assert again == [*written[:complete], added]
        assert report.earlier_torn_spans == (1 if cut > boundary else 0)
        assert not report.torn_tail_dropped


@SETTINGS
@given(
    records=records_st,
    draw=st.data(),
    xor=st.integers(min_value=1, max_value=255),
)
def test_one_flipped_byte_names_its_line_or_is_the_torn_tail(
    records: list[jr.JournalRecord], draw: st.DataObject, xor: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s" / "journal.jsonl"
        written, data = _write(path, records)
        at = draw.draw(st.integers(min_value=0, max_value=len(data) - 1), label="at")
        damaged = bytearray(data)
        damaged[at] ^= xor
        path.write_bytes(bytes(damaged))
        line = data.count(b"\n", 0, at) + 1  # 1-based line of the flipped byte
        total = data.count(b"\n")
        try:
            got, report = read_records(path)
        except JournalCorruptError as err:
            assert err.line == line
            assert err.path == path
        else:
            # Only damage to the last line may pass, as a dropped torn tail
            # (or to the newline joining the last two lines into one).
            assert line == total or (line == total - 1 and data[at] == 0x0A)
            assert got == written[: line - 1]
            assert report.torn_tail_dropped
            assert report.torn_tail_line == line
        assert path.read_bytes() == bytes(damaged)


def test_records_are_plain_schema_records_after_the_integrity_fields_are_removed(
    tmp_path: Path,
) -> None:
    """Each line minus ``torn``/``crc32`` decodes with the schema decoder."""
    path = tmp_path / "journal.jsonl"
    written, data = _write(path, [_round("x"), _user("y")])
    decoder = msgspec.json.Decoder(jr.JournalRecord)
    for raw, rec in zip(data.splitlines(), written, strict=True):
        obj = msgspec.json.decode(raw)
        del obj["crc32"]
        assert decoder.decode(msgspec.json.encode(obj)) == rec
