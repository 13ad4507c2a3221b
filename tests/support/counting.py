"""Counting what a scan of a journal's records reads, for tests that show a
hot path is incremental (reads bounded by the new records, not the journal)."""

from __future__ import annotations

from typing import Any

from mind.generated import journal as jr


class CountingRecords(list[jr.JournalRecord]):
    """A journal's record list (put in place of ``Journal.records``) that
    counts the records handed out by iteration, reversed iteration and
    indexing, a slice counting each record it holds: what a scan reads.

    Attributes:
        read: records handed out so far.
    """

    read = 0

    def __iter__(self) -> Any:
        for record in super().__iter__():
            self.read += 1
            yield record

    def __reversed__(self) -> Any:
        for record in super().__reversed__():
            self.read += 1
            yield record

    def __getitem__(self, at: Any) -> Any:
        got = super().__getitem__(at)
        self.read += len(got) if isinstance(at, slice) else 1
        return got
