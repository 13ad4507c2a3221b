"""One tool call of a turn: validate the arguments, apply the approval
policy, ask the person, run it (sandboxed or not), journal its result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, final

import msgspec

from mind.conversation import (
    ToolCall,
    replace_lone_surrogates,
    without_lone_surrogates,
)
from mind.effects.boundary import Refusal, SandboxMode
from mind.effects.policy import (
    Access,
    crossing_reason,
    rerun_reason,
    tool_decision,
)
from mind.effects.review import FileChange, approval_text, cut_for_display
from mind.effects.tools import parse_arguments
from mind.errors import (
    ToolArgumentsError,
)
from mind.generated import events as ev
from mind.generated import journal as jr
from mind.machines.turn import RefuseCall, TurnMachine
from mind.shell import faults
from mind.shell.approvals import Decision
from mind.shell.redact import redact
from mind.shell.tools import ToolOutcome
from mind.shell.turn_handle import Turn

if TYPE_CHECKING:
    from mind.shell.session import Session


@final
class ToolCalls:
    """Runs the tool calls of one session's turns (one instance per turn driver)."""

    def __init__(self, session: Session) -> None:
        self.session = session

    async def run(self, turn: Turn, machine: TurnMachine, call: ToolCall) -> None:
        turn._emit(
            ev.ToolCallEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                arguments=_display_arguments(call.arguments),
            )
        )
        faults.boundary("after_tool_call")
        status, output = await self._execute(turn, machine, call)
        # Behind the sandbox: mind's own keys never enter a result (journal, model).
        outcome = (status, redact(output, self.session.secrets, shapes=False))
        self.session.journal.append(
            jr.ToolResult(
                seq=0,
                recorded_at_ms=0,
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                status=jr.ToolStatus(outcome[0]),
                output=outcome[1],
                synthetic=False,
            )
        )
        faults.boundary("after_tool_result")
        turn._emit(
            ev.ToolResultEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                status=ev.ToolStatus(outcome[0]),
                output=outcome[1],
            )
        )

    async def _execute(self, turn: Turn, machine: TurnMachine, call: ToolCall) -> tuple[str, str]:
        """Validate, ask if required, run. Returns ``(status, output)``."""
        try:
            args = parse_arguments(call.name, call.arguments)
        except ToolArgumentsError as exc:
            return "error", str(exc)
        decision = tool_decision(
            self.session.approval,
            call.name,
            args,
            cwd=str(self.session.cwd),
            crossing=self._crossing,
            sandbox=self.session.config.sandbox,
            sandbox_available=self.session.sandbox.backend != "none",
        )
        if decision.action == "refuse":
            return "denied", decision.reason or "refused"
        reason = decision.reason if decision.action == "ask" else None
        sandboxed = call.name == "shell" and decision.sandboxed
        run_mode: SandboxMode | None = decision.mode if call.name == "shell" else None
        approved: list[FileChange] | None = None
        key = _always_key(call.name, args, sandboxed)
        if crossed := crossing_reason(
            call.name, args, cwd=str(self.session.cwd), crossing=self._crossing
        ):
            key += "|" + crossed  # "always" inside never covers a later boundary crossing
        if reason is not None and key not in self.session.always_allowed:
            asked = machine.approval_needed(
                call_id=call.call_id, can_ask=self.session.interactive, reason=reason
            )
            if any(isinstance(e, RefuseCall) for e in asked):
                # Nobody can be asked. The policy names only flags that
                # really allow it.
                return "denied", (
                    f"Refused without running: this call needs approval ({reason}) and this "
                    "session cannot ask (non-interactive, approval policy "
                    f"{self.session.approval}). "
                    "Do not retry it; tell the user what you wanted to run. "
                    f"{decision.remedy or ''}"
                ).rstrip()
            # What the person approves, read from the files now: a diff for
            # file tools, never only a path (docs/design/turn.md §7).
            changes, problem = await self.session.tools.preview(call.name, args)
            if changes and problem is None:
                approved = changes  # what is written must be what was shown
            decision_text = await self._ask(
                turn, machine, call, args, reason, changes, problem, sandboxed
            )
            if decision_text != "yes" and decision_text != "always":
                return "denied", "The user refused this tool call; it was not run."
            if decision_text == "always":
                self.session.always_allowed.add(key)
        # Durable before the tool starts: a call without this record provably
        # never ran (its synthetic result after an interrupt or crash says so).
        self.session.journal.append(
            jr.ToolStarted(
                seq=0, recorded_at_ms=0, turn_id=turn.turn_id, call_id=call.call_id, name=call.name
            ),
            sync=True,
        )
        faults.boundary("after_tool_started")
        # Past this point a call with a reason was approved (now or "always"):
        # the file tools may then cross the boundary (never into a denied root).
        result: ToolOutcome = await self.session.tools.run(
            call.name,
            args,
            approved,
            consent=reason is not None,
            sandboxed=sandboxed,
            sandbox_mode=run_mode,
        )
        if call.name == "shell" and sandboxed:
            offer = rerun_reason(
                self.session.approval, self.session.config.sandbox, result.status, result.output
            )
            if offer is not None:
                # "always" here covers this exact command outside the sandbox.
                outside_key = _always_key(call.name, args, sandboxed=False)
                answer: Decision = "always"
                if outside_key not in self.session.always_allowed:
                    asked = machine.approval_needed(
                        call_id=call.call_id, can_ask=self.session.interactive, reason=offer
                    )
                    answer = "no"  # nobody can be asked: the sandboxed result stands
                    if not any(isinstance(e, RefuseCall) for e in asked):
                        answer = await self._ask(turn, machine, call, args, offer, [], None, False)
                if answer == "always":
                    self.session.always_allowed.add(outside_key)
                if answer == "yes" or answer == "always":
                    result = await self.session.tools.run(call.name, args, sandboxed=False)
        return result.status, result.output

    def _crossing(self, path: str, access: Access) -> Refusal | None:
        """The policy's view of where a file tool path lands (kernel-resolved)."""
        return self.session.tools.boundary_reason(path, access)

    async def _ask(
        self,
        turn: Turn,
        machine: TurnMachine,
        call: ToolCall,
        args: dict[str, Any],
        reason: str,
        changes: list[FileChange],
        problem: str | None,
        sandboxed: bool,
    ) -> Decision:
        """Publish one approval request and wait for the person's answer
        (the machine named :class:`AskApproval`: it is ``awaiting_approval``).

        The card says where a shell command will run (inside the session's
        sandbox or OUTSIDE it); the event carries it as ``sandbox``.
        """
        text, text_format = approval_text(call.name, args, changes, problem)
        cut = cut_for_display(text)
        where: ev.Sandbox | msgspec.UnsetType = msgspec.UNSET
        if call.name == "shell":
            mode = self.session.config.sandbox
            if sandboxed and mode != "danger-full-access":
                where = ev.Sandbox(mode)
                reason = f"{reason} (runs in the {mode} sandbox)"
            else:
                where = ev.Sandbox.outside
                reason = f"{reason} (runs OUTSIDE the sandbox)"
        # A call may be asked twice (run, then re-run outside after a sandbox
        # denial): each request waits for its own answer.
        turn.approvals.open(call.call_id)
        turn._emit(
            ev.ApprovalRequestedEvent(
                turn_id=turn.turn_id,
                call_id=call.call_id,
                name=call.name,
                arguments=_display_arguments(call.arguments),
                reason=reason,
                text=text,
                text_format=ev.TextFormat(text_format),
                head_chars=cut.head_chars,
                tail_chars=cut.tail_chars,
                hidden_chars=cut.hidden_chars,
                hidden_lines=cut.hidden_lines,
                sandbox=where,
            )
        )
        decision = await turn.approvals.wait(call.call_id)
        machine.approval_answered()
        return decision


def _always_key(name: str, args: Mapping[str, Any], sandboxed: bool = False) -> str:
    """What an "always" answer covers: the exact command for ``shell``
    (approving ``rm x`` must not approve ``rm -rf /``) and where it runs
    (approving it in the sandbox must not approve it outside), the tool
    otherwise."""
    if name == "shell":
        where = "sandboxed" if sandboxed else "outside"
        return f"shell:{where}:" + json.dumps(args.get("command"), sort_keys=True)
    return name


def _display_arguments(raw: str) -> Any:
    """Arguments for events: the parsed JSON value when valid, else the raw text
    (lone surrogates replaced: an event must always encode as UTF-8)."""
    try:
        return without_lone_surrogates(json.loads(raw or "{}"))
    except ValueError:
        return replace_lone_surrogates(raw)
