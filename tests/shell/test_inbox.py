"""The steering sidecar inbox.json on real files (docs/design/inbox.md).

Atomic replace (a crash between the tmp write and the rename leaves the old
file), 0600, the 8 MiB cap on the serialised file, fail-closed opening of a
damaged / oversized / unknown-version / duplicate-id file (byte-identical
afterwards, path named), filtering by the journal's acknowledgements, and
idempotent adds.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import msgspec
import pytest

from mind.errors import InboxCorruptError, InputRefused, StorageError
from mind.generated.inbox import InboxEntry, InboxFile, InboxKind
from mind.shell.inbox import INBOX_VERSION, MAX_INBOX_BYTES, Inbox, encode_inbox


def entry(message_id: str, text: str = "hello", kind: str = "steer", at_ms: int = 1) -> InboxEntry:
    return InboxEntry(
        message_id=message_id,
        text=text,
        kind=InboxKind(kind),
        accepted_at_ms=at_ms,
        recovered=False,
    )


def recovered(e: InboxEntry) -> InboxEntry:
    return msgspec.structs.replace(e, recovered=True)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "inbox.json"


def test_missing_file_is_an_empty_inbox_and_opening_writes_nothing(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    assert (inbox.entries, len(inbox), inbox.max_bytes) == ([], 0, MAX_INBOX_BYTES)
    assert MAX_INBOX_BYTES == 8 * 1024 * 1024
    assert not path.exists()
    inbox.remove(["nothing"])
    assert not path.exists()


def test_add_is_durable_private_and_in_arrival_order(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    a, b = entry("a", "first"), entry("b", "second \u00e9", kind="background", at_ms=2)
    assert inbox.add(a) is True
    assert inbox.add(b) is True
    assert path.read_bytes() == encode_inbox([a, b])
    assert msgspec.json.decode(path.read_bytes(), type=InboxFile) == InboxFile(
        version=INBOX_VERSION, entries=[a, b]
    )
    assert path.stat().st_mode & 0o777 == 0o600
    assert inbox.entries == [a, b] and "a" in inbox and "c" not in inbox
    assert not inbox.tmp_path.exists()
    assert sorted(p.name for p in path.parent.iterdir()) == ["inbox.json"]


def test_same_id_twice_writes_nothing(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    inbox.add(entry("a", "first"))
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino)
    assert inbox.add(entry("a", "retry with other text")) is False
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_ino) == before
    assert inbox.entries == [entry("a", "first")]


def test_a_crash_between_tmp_write_and_rename_leaves_the_old_file(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    inbox.add(entry("a"))
    old = path.read_bytes()
    # The crash: a complete new version written to the tmp, never renamed.
    inbox.tmp_path.write_bytes(encode_inbox([entry("a"), entry("b")]))
    os.chmod(inbox.tmp_path, 0o644)
    assert path.read_bytes() == old
    reopened = Inbox.open(path, acknowledged=())
    assert reopened.entries == [recovered(entry("a"))]  # b was never accepted
    # Half-written tmp garbage is overwritten by the next write, with mode 0600.
    inbox.tmp_path.write_bytes(b'{"version": 1, "entr')
    assert reopened.add(entry("c")) is True
    assert not reopened.tmp_path.exists()
    assert Inbox.open(path, acknowledged=()).entries == [
        recovered(entry("a")),
        recovered(entry("c")),
    ]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_keeps_the_old_file_and_memory(path: Path, tmp_path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    inbox.add(entry("a"))
    old = path.read_bytes()
    inbox.tmp_path.mkdir()  # the tmp cannot be opened as a file
    with pytest.raises(StorageError) as failed:  # typed: path and errno (docs/design/inbox.md §2)
        inbox.add(entry("b"))
    assert (failed.value.path, failed.value.errno) == (path, errno.EISDIR)
    assert (path.read_bytes(), inbox.entries) == (old, [entry("a")])
    inbox.tmp_path.rmdir()
    assert inbox.add(entry("b")) is True


def test_open_filters_acknowledged_in_memory_and_marks_the_rest_recovered(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    for name in "abc":
        inbox.add(entry(name))
    on_disk = path.read_bytes()
    reopened = Inbox.open(path, acknowledged={"b", "unrelated"})
    assert reopened.entries == [recovered(entry("a")), recovered(entry("c"))]
    assert path.read_bytes() == on_disk  # filtered in memory only
    assert reopened.add(entry("b", "replayed by a confused caller")) is False  # acknowledged
    assert path.read_bytes() == on_disk
    reopened.remove(["nothing held"])  # no id held, but the file holds a stale entry: rewrite
    assert path.read_bytes() == encode_inbox([recovered(entry("a")), recovered(entry("c"))])
    reopened.remove(["a"])
    assert reopened.add(entry("a")) is False  # removed ids stay known
    assert Inbox.open(path, acknowledged=()).entries == [recovered(entry("c"))]


def test_remove_without_held_ids_writes_nothing(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    inbox.add(entry("a"))
    stamp = path.stat().st_ino
    inbox.remove(["x"])
    assert path.stat().st_ino == stamp
    inbox.remove(["a"])
    assert path.read_bytes() == encode_inbox([]) and path.stat().st_ino != stamp


def test_the_file_never_exceeds_8_mib(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=())
    overhead = len(encode_inbox([entry("a", "")]))
    big = entry("a", "x" * (MAX_INBOX_BYTES - overhead))  # exactly at the cap
    assert inbox.add(big) is True
    assert path.stat().st_size == MAX_INBOX_BYTES
    before = path.read_bytes()
    with pytest.raises(InputRefused) as refused:
        inbox.add(entry("b", ""))
    assert (refused.value.reason, refused.value.message_id) == ("inbox_full", "b")
    assert path.read_bytes() == before and inbox.entries == [big]
    assert not inbox.tmp_path.exists()
    inbox.remove(["a"])
    assert inbox.add(entry("b", "")) is True

    fresh = Inbox.open(path.with_name("other.json"), acknowledged=())
    with pytest.raises(InputRefused):
        fresh.add(entry("huge", "x" * MAX_INBOX_BYTES))
    assert not fresh.path.exists()


def test_multibyte_text_counts_in_bytes(path: Path) -> None:
    inbox = Inbox.open(path, acknowledged=(), max_bytes=200)
    assert inbox.add(entry("a", "é" * 40)) is True  # 80 bytes of UTF-8 inside the JSON
    with pytest.raises(InputRefused):
        inbox.add(entry("b", "é" * 40))
    assert path.stat().st_size <= 200


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"", "not a JSON object"),
        (b"{not json", "not a JSON object"),
        (b"[]", "not a JSON object"),
        (b'{"version": 1, "entries": [', "not a JSON object"),
        (b'{"entries": []}', "unsupported version None"),
        (b'{"version": 2, "entries": []}', "unsupported version 2"),
        (b'{"version": "1", "entries": []}', "unsupported version '1'"),
        (b'{"version": true, "entries": []}', "unsupported version True"),
        (b'{"version": 1}', "does not match the inbox schema"),
        (b'{"version": 1, "entries": [], "extra": 0}', "does not match the inbox schema"),
        (
            b'{"version": 1, "entries": [{"message_id": "a", "text": "t", "kind": "shout",'
            b' "accepted_at_ms": 1, "recovered": false}]}',
            "does not match the inbox schema",
        ),
        (
            b'{"version": 1, "entries": [{"message_id": "", "text": "t", "kind": "steer",'
            b' "accepted_at_ms": 1, "recovered": false}]}',
            "does not match the inbox schema",
        ),
        (encode_inbox([entry("a"), entry("b"), entry("a", "again")]), "duplicate message id 'a'"),
        (b"[" * 100_000, "not a JSON object"),
        (b'{"version": 1, "entries": ' + b"[" * 100_000, "not a JSON object"),
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_a_damaged_file_fails_closed_and_is_left_untouched(
    path: Path, data: bytes, detail: str
) -> None:
    _write(path, data)
    os.chmod(path, 0o640)
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_mode)
    with pytest.raises(InboxCorruptError) as corrupt:
        Inbox.open(path, acknowledged={"a"})
    assert corrupt.value.path == path
    assert str(path) in str(corrupt.value) and detail in corrupt.value.detail
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_mode) == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["inbox.json"]


def test_an_oversized_file_fails_closed_without_being_parsed(path: Path) -> None:
    with path.open("wb") as f:
        f.truncate(MAX_INBOX_BYTES + 1)  # sparse: cheap, and not JSON either
    with pytest.raises(InboxCorruptError, match="over the 8388608-byte cap") as corrupt:
        Inbox.open(path, acknowledged=())
    assert corrupt.value.path == path
    assert path.stat().st_size == MAX_INBOX_BYTES + 1
    # Exactly at the cap is allowed.
    overhead = len(encode_inbox([entry("a", "")]))
    path.write_bytes(encode_inbox([entry("a", "x" * (MAX_INBOX_BYTES - overhead))]))
    assert len(Inbox.open(path, acknowledged=()).entries) == 1


def test_not_a_regular_file_fails_closed(path: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_bytes(encode_inbox([entry("a")]))
    path.symlink_to(target)
    with pytest.raises(InboxCorruptError, match="symbolic link"):
        Inbox.open(path, acknowledged=())
    assert path.is_symlink() and target.read_bytes() == encode_inbox([entry("a")])
    path.unlink()
    path.mkdir()
    with pytest.raises(InboxCorruptError, match="not a regular file"):
        Inbox.open(path, acknowledged=())


def test_inbox_structs_are_frozen_and_strict() -> None:
    e = entry("a")
    with pytest.raises(AttributeError):
        e.text = "changed"  # type: ignore[misc]
    for struct in (InboxEntry, InboxFile):
        assert struct.__struct_config__.frozen and struct.__struct_config__.forbid_unknown_fields
    assert [k.value for k in InboxKind] == ["prompt", "steer", "queue", "background"]
