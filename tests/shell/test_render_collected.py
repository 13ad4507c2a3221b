"""How the REPL's view words results that ran across a restart
(docs/design/recovery.md §8): a collected result's time is its command's own
run (``ran_s``) or, when none is recorded, that it ran across a restart —
never the time since the resume; an unknown outcome is not "Interrupted"."""

from __future__ import annotations

import io

from rich.console import Console

from mind.generated import events as ev
from mind.shell.render import TurnView


def _shown(*events: ev.Event, later_s: float = 5.0) -> str:
    now = [100.0]
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100, color_system=None), clock=lambda: now[0])
    view.show(ev.ToolCallEvent(turn_id="t", call_id="c", name="shell", arguments={"command": "x"}))
    now[0] += later_s  # the time since the call line: no measure of a collected command
    for event in events:
        view.show(event)
    return out.getvalue()


def test_a_collected_result_without_its_run_time_says_it_ran_across_a_restart() -> None:
    shown = _shown(
        ev.ToolResultEvent(
            turn_id="t", call_id="c", status=ev.ToolStatus.ok, output="done", collected=True
        )
    )
    assert "(ran across a restart)" in shown
    assert "5.0s" not in shown


def test_a_collected_result_shows_its_own_run_time() -> None:
    shown = _shown(
        ev.ToolResultEvent(
            turn_id="t",
            call_id="c",
            status=ev.ToolStatus.ok,
            output="done",
            collected=True,
            ran_s=8.25,
        )
    )
    assert "(8.2s, collected after restart)" in shown
    assert "5.0s" not in shown


def test_an_unknown_outcome_is_not_shown_as_interrupted() -> None:
    shown = _shown(
        ev.ToolResultEvent(
            turn_id="t",
            call_id="c",
            status=ev.ToolStatus.interrupted,
            output="outcome unknown",
            outcome_unknown=True,
        )
    )
    assert "? Outcome unknown shell" in shown
    assert "Interrupted" not in shown
