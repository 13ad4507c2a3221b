"""``/status`` lists the instructions files the requests carry, in a real
pseudo-terminal (docs/design/context.md §4): path and bytes, cut or skipped."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mind.context.instructions import PER_FILE_BYTES
from tests.e2e.test_repl import ENTER, Spawn, exit_cleanly, spawn, words

__all__ = ["spawn"]  # the fixture, used by name


def test_status_lists_the_instructions_files_loaded(spawn: Spawn, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir(mode=0o700)
    (tmp_path / "home" / "AGENTS.md").write_text("be brief\n")
    (tmp_path / "AGENTS.md").write_text("x" * (PER_FILE_BYTES + 5))
    child = spawn([{"text": "hi"}])
    child.send("/status" + ENTER)
    child.expect(words(f"instructions {tmp_path / 'home' / 'AGENTS.md'} (9 bytes)"))
    child.expect(words(f"{tmp_path / 'AGENTS.md'} ({PER_FILE_BYTES + 5} bytes, cut to"))
    child.expect(words(f"{PER_FILE_BYTES})"))
    exit_cleanly(child)


def test_status_says_why_a_file_was_skipped(spawn: Spawn, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")
    child = spawn([{"text": "hi"}])
    child.send("/status" + ENTER)
    child.expect(words(f"instructions {tmp_path / 'AGENTS.md'} (skipped: a FIFO, not a regular"))
    exit_cleanly(child)


def test_an_edit_between_prompts_is_read_at_the_next_turn_and_said(
    spawn: Spawn, tmp_path: Path
) -> None:
    child = spawn([{"text": "first answer"}, {"text": "second answer"}])
    child.send("one" + ENTER)
    child.expect(words("first answer"))
    child.expect(words("── completed"))
    (tmp_path / "AGENTS.md").write_text("new rule\n")
    child.send("two" + ENTER)
    child.expect(words(f"Instructions files changed; this turn reads: {tmp_path / 'AGENTS.md'}"))
    child.expect(words("second answer"))
    exit_cleanly(child)


def test_status_rows_keep_a_gap_after_every_label(spawn: Spawn, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("rule\n")
    child = spawn([{"text": "hi"}])
    child.send("/status" + ENTER)
    child.expect(words("session"))
    child.expect(r"instructions(?:\x1b\[[0-9;?]*[A-Za-z])*([^\x1b])")
    assert child.match.group(1) == " ", child.match  # the label never runs into its value
    child.expect(words(f"{tmp_path / 'AGENTS.md'} (5 bytes)"))
    exit_cleanly(child)


def test_a_change_note_names_skipped_files_as_skipped(spawn: Spawn, tmp_path: Path) -> None:
    child = spawn([{"text": "first answer"}, {"text": "second answer"}])
    child.send("one" + ENTER)
    child.expect(words("── completed"))
    (tmp_path / "home").mkdir(mode=0o700, exist_ok=True)
    (tmp_path / "home" / "AGENTS.md").write_text("new rule\n")
    os.mkfifo(tmp_path / "AGENTS.md")  # found, but never read
    child.send("two" + ENTER)
    child.expect(words("Instructions files changed; this turn reads:"))
    child.expect(words("(/status)."))
    note = " ".join(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", str(child.before)).split())
    read, _, skipped = note.partition("; skipped: ")
    assert read.strip() == str(tmp_path / "home" / "AGENTS.md"), note
    assert skipped.strip() == str(tmp_path / "AGENTS.md"), note
    exit_cleanly(child)
