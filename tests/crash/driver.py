"""A library process for the crash tests: the steering scenarios ``mind exec`` cannot drive.

Run as ``python -m tests.crash.driver --scenario S --state DIR --cwd DIR
--base-url URL [--session ID]`` (with ``MIND_HOME`` set, and optionally
``MIND_CRASH_AT``). It opens a :class:`~mind.Runtime` on ``--state``, creates
(or reopens) the session, sends the scenario's prompt and steers or queues at
a deterministic point of the event stream:

- ``steer_before``: steer when the ``tool.call`` event of the prompt's tool
  call arrives — the turn is running the tool, its mailbox is open, so the
  steering must be claimed at the next model-request boundary.
- ``steer_after``: steer when the ``message.completed`` event of the final
  text round arrives — by then the turn has sealed (drain-or-seal and the
  terminal record run synchronously after that round), so the steering goes
  to the following turn.
- ``approve`` (interaction crash test): approval ``untrusted`` in an
  interactive session: the prompt's shell call asks; every approval card is
  answered ``approve_once`` and every reconcile card ``tell_model`` as soon
  as it is shown, printing ``{"asked": id, "kind": k, "again": b}`` first and
  ``{"answered": id, "taken": b}`` after. With ``--restart`` the prompt is
  not sent again: the session resumes its crashed turn, or starts one with
  the input a closed turn gave back.
- ``multi`` (random-kill test): a prompt asking for two tool calls; at the
  first ``tool.call`` steering asking for two more and a queued follow-up
  asking for one (it starts the second turn as soon as the first ends); at
  the first ``message.completed`` (the second turn is running by then)
  steering for that second turn.

Every input has a caller-chosen id (``m-prompt``, ``m-steer``, ...),
so its identity is known even if the crash comes before anything is printed.
stdout carries one JSON line per step, flushed at once:
``{"intent": id, "kind": k, "text": t}`` right before the call,
``{"accepted": id, "disposition": d, "duplicate": b}`` once it returned (the
input is durable), and ``{"done": [statuses]}`` at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio

from mind import Answered, Runtime, Session, resolve_config
from mind import events as ev
from mind.errors import SessionError


@dataclass(frozen=True)
class Step:
    """One input a scenario sends: when, how and what."""

    when: str  # "start" | "first_tool_call" | "first_message_completed"
    kind: str  # "prompt" | "steer" | "queue"
    message_id: str
    text: str


SCENARIOS: dict[str, tuple[Step, ...]] = {
    "steer_before": (
        Step("start", "prompt", "m-prompt", "TOOL: steer-before prompt"),
        Step("first_tool_call", "steer", "m-steer", "steer-before: answer in one line"),
    ),
    "steer_after": (
        Step("start", "prompt", "m-prompt", "TOOL: steer-after prompt"),
        Step("first_message_completed", "steer", "m-steer", "steer-after: one more thing"),
    ),
    "approve": (Step("start", "prompt", "m-prompt", "TOOL: approve prompt"),),
    "multi": (
        Step("start", "prompt", "m-prompt", "TOOLS=2 multi prompt"),
        Step("first_tool_call", "steer", "m-steer", "multi steer TOOLS=2"),
        Step("first_tool_call", "queue", "m-queue", "multi queued TOOL"),
        Step("first_message_completed", "steer", "m-late", "multi late steer"),
    ),
}
"""Each scenario's inputs, in the order they are sent."""


def _say(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def _send(session: Session, step: Step) -> None:
    _say(intent=step.message_id, kind=step.kind, text=step.text)
    if step.kind == "steer":
        receipt = session.steer(step.text, message_id=step.message_id)
    elif step.kind == "queue":
        receipt = session.queue(step.text, message_id=step.message_id)
    else:
        receipt = session.send(step.text, message_id=step.message_id)
    _say(
        accepted=receipt.message_id,
        disposition=receipt.disposition,
        duplicate=receipt.duplicate,
    )


async def run(args: argparse.Namespace) -> int:
    steps = SCENARIOS[args.scenario]
    asking = args.scenario == "approve"
    config = resolve_config(
        provider="openai-chat",
        model="fake",
        base_url=args.base_url,
        approval="untrusted" if asking else "never",
    )
    statuses: list[str] = []
    async with Runtime.open(state_root=Path(args.state)) as rt:
        try:
            session = await rt.open_session(args.session, config=config, interactive=asking)
        except SessionError:
            session = await rt.create_session(
                cwd=Path(args.cwd), config=config, session_id=args.session, interactive=asking
            )
        pending = list(steps)
        for step in [s for s in pending if s.when == "start"]:
            pending.remove(step)
            if not args.restart:
                _send(session, step)
        if args.restart:
            session.resume_pending()  # input a closed turn gave back, as `mind exec` does
        async for event in session.events():
            if isinstance(event, ev.ApprovalRequestedEvent) and isinstance(
                event.interaction_id, str
            ):
                reconcile = event.kind == ev.Kind.reconcile
                _say(
                    asked=event.interaction_id,
                    kind="reconcile" if reconcile else "approval",
                    again=event.offered_again is True,
                )
                got = session.answer(
                    event.interaction_id, "tell_model" if reconcile else "approve_once"
                )
                _say(answered=event.interaction_id, taken=isinstance(got, Answered))
            when = None
            if isinstance(event, ev.ToolCallEvent):
                when = "first_tool_call"
            elif isinstance(event, ev.MessageCompletedEvent):
                when = "first_message_completed"
            elif isinstance(event, ev.TurnCompletedEvent):
                statuses.append(event.status.value)
            for step in [s for s in pending if s.when == when]:
                pending.remove(step)
                _send(session, step)
    _say(done=statuses)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="crash-test library driver")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    parser.add_argument("--state", required=True, help="state root (sessions/ lives here)")
    parser.add_argument("--cwd", required=True, help="working directory of a new session")
    parser.add_argument("--base-url", required=True, help="the fake model's /v1 URL")
    parser.add_argument("--session", default="crash-session", help="session id")
    parser.add_argument(
        "--restart", action="store_true", help="reopen only: send none of the scenario's inputs"
    )
    return anyio.run(run, parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
