"""read_file, write_file, list_dir and apply_patch on real files (docs/design/boundary.md §1)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from mind.shell.tools import ToolOutcome, ToolRunner, _files

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under ``root``, by relative path."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = None if path.is_dir() else path.read_bytes()
    return out


# ---- read_file -------------------------------------------------------------------


async def test_read_file_numbers_lines_like_cat_n(project: Path) -> None:
    (project / "a.txt").write_text("one\ntwo\n\nfour")
    outcome = await ToolRunner(project).run("read_file", {"path": "a.txt"})
    assert outcome == ToolOutcome(
        status="ok", output="     1\tone\n     2\ttwo\n     3\t\n     4\tfour\n"
    )


async def test_read_file_offset_and_limit_say_where_to_continue(project: Path) -> None:
    (project / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    outcome = await ToolRunner(project).run("read_file", {"path": "a.txt", "offset": 3, "limit": 2})
    assert outcome == ToolOutcome(
        status="ok",
        output="     3\tline 3\n     4\tline 4\n[more lines follow; continue with offset=5]\n",
    )


async def test_read_file_byte_cap_stops_on_a_whole_line(project: Path) -> None:
    (project / "a.txt").write_text("".join(f"{n:04d}\n" for n in range(1, 101)))
    outcome = await ToolRunner(project, max_output_bytes=40).run("read_file", {"path": "a.txt"})
    # Each numbered line is 6 + 1 + 4 + 1 = 12 bytes: three fit in 40.
    assert outcome == ToolOutcome(
        status="ok",
        output=(
            "     1\t0001\n     2\t0002\n     3\t0003\n"
            "[more lines follow; continue with offset=4]\n"
        ),
    )


async def test_read_file_splits_only_on_newline(project: Path) -> None:
    (project / "a.txt").write_text("x\u2028y\x0cz\r\nnext\n", newline="")
    outcome = await ToolRunner(project).run("read_file", {"path": "a.txt"})
    assert outcome == ToolOutcome(status="ok", output="     1\tx\u2028y\x0cz\r\n     2\tnext\n")


async def test_read_file_binary_content_is_replaced_and_noted(project: Path) -> None:
    (project / "b.bin").write_bytes(b"ok\nbad\xff\x00byte\n")
    outcome = await ToolRunner(project).run("read_file", {"path": "b.bin"})
    assert outcome == ToolOutcome(
        status="ok",
        output=(
            "     1\tok\n     2\tbad\ufffd\ufffdbyte\n"
            "[the file is not valid UTF-8 text; undecodable bytes are shown as U+FFFD]\n"
        ),
    )


async def test_read_file_cuts_very_long_lines(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_files, "MAX_LINE_CHARS", 5)
    # 5 characters fit; the reader keeps at most 4 * 5 bytes of a line in memory.
    (project / "a.txt").write_text("abcdefghij\n" + "é" * 30 + "\nabcde\n" + "x" * 20 + "\nend")
    outcome = await ToolRunner(project).run("read_file", {"path": "a.txt"})
    assert outcome == ToolOutcome(
        status="ok",
        output=(
            "     1\tabcde [... line cut at 5 characters]\n"
            "     2\tééééé [... line cut at 5 characters]\n"
            "     3\tabcde\n"
            "     4\txxxxx [... line cut at 5 characters]\n"
            "     5\tend\n"
        ),
    )


async def test_read_file_refuses_a_fifo(project: Path) -> None:
    os.mkfifo(project / "pipe")
    outcome = await ToolRunner(project).run("read_file", {"path": "pipe"})
    assert outcome == ToolOutcome(
        status="error", output="pipe: not a regular file (a device, FIFO or socket); not read"
    )


@pytest.mark.parametrize(
    ("setup", "args", "expected"),
    [
        (
            None,
            {"path": "missing.txt"},
            ToolOutcome(status="error", output="missing.txt: no such file"),
        ),
        (
            "dir",
            {"path": "d"},
            ToolOutcome(status="error", output="d: is a directory (use list_dir)"),
        ),
        ("empty", {"path": "e.txt"}, ToolOutcome(status="ok", output="e.txt: empty file")),
        (
            "short",
            {"path": "s.txt", "offset": 9},
            ToolOutcome(status="ok", output="s.txt: no lines at offset 9; the file has 2 lines"),
        ),
    ],
)
async def test_read_file_edge_cases(
    project: Path, setup: str | None, args: dict[str, object], expected: ToolOutcome
) -> None:
    (project / "d").mkdir()
    (project / "e.txt").write_text("")
    (project / "s.txt").write_text("a\nb\n")
    assert await ToolRunner(project).run("read_file", dict(args)) == expected


# ---- write_file ------------------------------------------------------------------


async def test_write_file_creates_parents_and_reports_bytes(project: Path) -> None:
    outcome = await ToolRunner(project).run(
        "write_file", {"path": "new/deep/f.txt", "content": "héllo\n"}
    )
    assert outcome == ToolOutcome(status="ok", output="created new/deep/f.txt (7 bytes; +1 −0)")
    assert _tree(project) == {
        "new": None,
        "new/deep": None,
        "new/deep/f.txt": "héllo\n".encode(),
    }


async def test_write_file_replaces_atomically_and_keeps_the_mode(project: Path) -> None:
    target = project / "f.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    outcome = await ToolRunner(project).run("write_file", {"path": "f.sh", "content": "new\n"})
    assert outcome == ToolOutcome(status="ok", output="overwrote f.sh (4 bytes; +1 −1)")
    assert _tree(project) == {"f.sh": b"new\n"}  # no temporary file left behind
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


async def test_write_file_writes_through_a_symlink(project: Path) -> None:
    (project / "real.txt").write_text("old")
    (project / "link.txt").symlink_to("real.txt")
    await ToolRunner(project).run("write_file", {"path": "link.txt", "content": "new"})
    assert (project / "link.txt").is_symlink()
    assert (project / "real.txt").read_text() == "new"


async def test_write_file_absolute_path_outside_needs_the_persons_consent(
    project: Path, tmp_path: Path
) -> None:
    target = tmp_path / "outside.txt"
    args = {"path": str(target), "content": "x"}
    refused = await ToolRunner(project).run("write_file", args)
    assert refused == ToolOutcome(
        status="error",
        output=f"{target}: resolves outside the workspace: outside the workspace's writable roots",
    )
    assert not target.exists()
    outcome = await ToolRunner(project).run("write_file", args, consent=True)
    assert outcome.status == "ok"
    assert target.read_text() == "x"


async def test_write_file_onto_a_directory_is_an_error(project: Path) -> None:
    (project / "d").mkdir()
    outcome = await ToolRunner(project).run("write_file", {"path": "d", "content": "x"})
    assert outcome == ToolOutcome(status="error", output="d: is a directory")
    assert _tree(project) == {"d": None}


# ---- list_dir --------------------------------------------------------------------


async def test_list_dir_sorted_with_kinds(project: Path) -> None:
    (project / "b.txt").write_text("")
    (project / "a").mkdir()
    (project / ".hidden").write_text("")
    (project / "c").symlink_to("b.txt")
    outcome = await ToolRunner(project).run("list_dir", {})
    assert outcome == ToolOutcome(status="ok", output=".hidden\na/\nb.txt\nc -> b.txt\n")


async def test_list_dir_caps_entries(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_files, "MAX_DIR_ENTRIES", 2)
    for name in "dcba":
        (project / name).write_text("")
    outcome = await ToolRunner(project).run("list_dir", {"path": "."})
    assert outcome == ToolOutcome(status="ok", output="a\nb\n[... 2 more entries not shown]\n")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("nope", ToolOutcome(status="error", output="nope: no such directory")),
        ("f.txt", ToolOutcome(status="error", output="f.txt: not a directory (use read_file)")),
        ("empty", ToolOutcome(status="ok", output="empty: empty directory")),
    ],
)
async def test_list_dir_edge_cases(project: Path, path: str, expected: ToolOutcome) -> None:
    (project / "f.txt").write_text("")
    (project / "empty").mkdir()
    assert await ToolRunner(project).run("list_dir", {"path": path}) == expected


# ---- apply_patch -----------------------------------------------------------------


async def test_apply_patch_add_update_delete_move(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "app.py").write_text("import os\n\n\ndef main():\n    return 1\n")
    (project / "old.txt").write_text("bye\n")
    (project / "name.txt").write_text("alpha\nbeta\n")
    patch = "\n".join(
        [
            "*** Begin Patch",
            "*** Add File: docs/new.md",
            "+# Title",
            "+",
            "+text",
            "*** Update File: src/app.py",
            "@@ def main():",
            "-    return 1",
            "+    return 2",
            "*** Delete File: old.txt",
            "*** Update File: name.txt",
            "*** Move to: renamed/name.txt",
            "@@",
            " alpha",
            "-beta",
            "+gamma",
            "*** End Patch",
        ]
    )
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome == ToolOutcome(
        status="ok",
        output=(
            "applied patch:\nA docs/new.md  +3 −0\nM src/app.py  +1 −1\nD old.txt  +0 −1\n"
            "R name.txt -> renamed/name.txt  +1 −1\n"
        ),
    )
    assert _tree(project) == {
        "docs": None,
        "docs/new.md": b"# Title\n\ntext\n",
        "renamed": None,
        "renamed/name.txt": b"alpha\ngamma\n",
        "src": None,
        "src/app.py": b"import os\n\n\ndef main():\n    return 2\n",
    }


async def test_apply_patch_failing_hunk_leaves_every_file_untouched(project: Path) -> None:
    (project / "a.txt").write_text("one\ntwo\n")
    (project / "b.txt").write_text("three\nfour\n")
    before = _tree(project)
    patch = (
        "*** Begin Patch\n"
        "*** Update File: a.txt\n"
        "-one\n+ONE\n"
        "*** Delete File: a.txt\n"
        "*** Add File: c.txt\n+c\n"
        "*** Update File: b.txt\n"
        "@@\n three\n-four\n+FOUR\n"
        "@@\n-five\n+FIVE\n"
        "*** End Patch\n"
    )
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome == ToolOutcome(
        status="error",
        output=(
            "patch not applied (no file was changed): b.txt: hunk 2 (patch line 13) did not "
            "match the file; expected these lines:\n  five"
        ),
    )
    assert _tree(project) == before


async def test_apply_patch_tolerates_trailing_whitespace_and_keeps_crlf(project: Path) -> None:
    (project / "w.txt").write_bytes(b"keep  \r\nold\t\r\nend\r\n")
    patch = "*** Begin Patch\n*** Update File: w.txt\n keep\n-old\n+new\n end\n*** End Patch"
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome.status == "ok"
    assert (project / "w.txt").read_bytes() == b"keep  \r\nnew\r\nend\r\n"


async def test_apply_patch_end_of_file_hunk_matches_the_last_occurrence(project: Path) -> None:
    (project / "f.txt").write_text("x\nend\nx\nend\n")
    patch = (
        "*** Begin Patch\n*** Update File: f.txt\n x\n-end\n+END\n*** End of File\n*** End Patch"
    )
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome.status == "ok"
    assert (project / "f.txt").read_text() == "x\nend\nx\nEND\n"


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            "*** Begin Patch\n*** Add File: exists.txt\n+x\n*** End Patch",
            "exists.txt: already exists (use Update File to change it)",
        ),
        (
            "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch",
            "nope.txt: cannot delete, no such file",
        ),
        (
            "*** Begin Patch\n*** Update File: nope.txt\n-a\n+b\n*** End Patch",
            "nope.txt: cannot update, no such file",
        ),
        (
            "*** Begin Patch\n*** Update File: exists.txt\n*** Move to: other.txt\n*** End Patch",
            "other.txt: cannot move there, the file exists",
        ),
    ],
)
async def test_apply_patch_refuses_inconsistent_operations(
    project: Path, patch: str, message: str
) -> None:
    (project / "exists.txt").write_text("a\n")
    (project / "other.txt").write_text("o\n")
    before = _tree(project)
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome == ToolOutcome(
        status="error", output=f"patch not applied (no file was changed): {message}"
    )
    assert _tree(project) == before


async def test_apply_patch_malformed_envelope(project: Path) -> None:
    outcome = await ToolRunner(project).run("apply_patch", {"patch": "--- a/x\n+++ b/x\n"})
    assert outcome == ToolOutcome(
        status="error", output="patch not applied: the patch must start with '*** Begin Patch'"
    )


async def test_apply_patch_rolls_back_when_a_write_fails(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "a.txt").write_text("a\n")
    (project / "b.txt").write_text("b\n")
    real_write = _files._atomic_write
    writes: list[Path] = []

    def failing_second_write(target: Path, data: bytes) -> None:
        writes.append(target)
        if len(writes) == 2:
            raise OSError(28, "No space left on device")
        real_write(target, data)

    monkeypatch.setattr(_files, "_atomic_write", failing_second_write)
    before = _tree(project)
    patch = (
        "*** Begin Patch\n*** Update File: a.txt\n-a\n+A\n"
        "*** Update File: b.txt\n-b\n+B\n*** End Patch"
    )
    outcome = await ToolRunner(project).run("apply_patch", {"patch": patch})
    assert outcome == ToolOutcome(
        status="error",
        output="patch not applied (changes were rolled back): [Errno 28] No space left on device",
    )
    assert _tree(project) == before


async def test_unknown_tool_is_an_error_outcome(project: Path) -> None:
    outcome = await ToolRunner(project).run("search", {})
    assert outcome == ToolOutcome(status="error", output="unknown tool 'search'")


async def test_list_dir_shows_a_non_utf8_name_replaced(project: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(project), b"bad\xffname"), os.O_CREAT | os.O_WRONLY))
    outcome = await ToolRunner(project).run("list_dir", {})
    assert outcome == ToolOutcome(status="ok", output="bad\ufffdname\n")
