"""ToolRunner: dispatch a checked tool call to its implementation."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, final

import anyio.to_thread
import msgspec

from mind.conversation import replace_lone_surrogates
from mind.effects.boundary import Boundary, Refusal, SandboxMode
from mind.effects.policy import Access
from mind.effects.review import FileChange
from mind.effects.tools import (
    READ_FILE_DEFAULT_LIMIT,
    SHELL_DEFAULT_TIMEOUT_S,
    SHELL_MAX_TIMEOUT_S,
)
from mind.errors import SandboxRefused
from mind.shell.ids import new_id
from mind.shell.sandbox.command import Sandbox, release
from mind.shell.tools import _workspace
from mind.shell.tools._beneath import session_boundary

if TYPE_CHECKING:
    from mind.shell.tools._process import StartHook


@dataclass(frozen=True, slots=True)
class _Shell:
    """How one ``shell`` call runs (the arguments of :meth:`ToolRunner.run` it needs)."""

    sandboxed: bool
    mode: SandboxMode | None
    effect_id: str | None
    on_started: StartHook | None


class ToolOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """The result of running one tool call, as the model will see it.

    Attributes:
        status: ``"ok"``, or ``"error"`` when the tool failed (missing file,
            patch that does not apply, command that exited nonzero, timed
            out or could not start).
        output: text for the model; for errors, a message naming what failed.
        output_bytes: bytes (UTF-8) a ``shell`` command wrote when
            ``output`` keeps only their head and tail (the runner's
            ``max_output_bytes`` capture); None when ``output`` is whole.
    """

    status: Literal["ok", "error"]
    output: str
    output_bytes: int | None = None


@final
class ToolRunner:
    """Runs built-in tools in one session's working directory and environment.

    Decisions (docs/design/boundary.md §2):

    - ``shell``: a nonzero exit, a kill by signal, a timeout, or a failure to
      start is ``status="error"``; the output always ends with the exit
      status line (``exit code: N``) so the model sees it either way. Output
      is capped at ``max_output_bytes`` (stdout and stderr together, UTF-8),
      keeping the head and tail of each stream.
    - ``shell`` runs inside the session's sandbox (:mod:`mind.shell.sandbox`)
      unless ``sandboxed=False`` (the policy's decision) or the mode is
      ``danger-full-access``; no working backend is an error result naming
      ``--sandbox danger-full-access``, never an unsandboxed run.
    - ``read_file`` and ``list_dir`` output is capped at ``max_output_bytes``
      with a note saying how to continue.
    - File tools resolve every path beneath the working directory with the
      kernel and judge its real path by the session's
      :class:`~mind.effects.boundary.Boundary` (``docs/design/boundary.md``):
      a path it refuses is written only when the person approved the call
      (``consent``), and a denied root (``/proc``, mind's state) never.
    - Arguments are trusted to have passed
      :func:`mind.effects.tools.parse_arguments`.
    """

    def __init__(
        self,
        cwd: Path,
        *,
        env: Mapping[str, str] | None = None,
        max_output_bytes: int = 32_000,
        boundary: Boundary | None = None,
        sandbox: Sandbox | None = None,
        effects_dir: Path | None = None,
    ) -> None:
        """Create a runner.

        Args:
            cwd: the session's working directory; relative tool paths and
                commands resolve against it.
            env: the complete environment for commands, or None to inherit
                this process's environment at each call.
            max_output_bytes: most bytes (UTF-8) of tool output returned to
                the model, > 0; a short note about the cut comes on top.
            boundary: what the file tools may read and write; None takes the sandbox's, else builds
                :func:`~mind.shell.tools._beneath.session_boundary` of ``cwd``
                from this process's environment.
            sandbox: where ``shell`` commands run (``docs/design/boundary.md``
                "Sandbox"); None runs them unconfined (tests of the runner
                itself; the runtime always passes one).
            effects_dir: where each ``shell`` command's effect directory is
                made (``<session dir>/effects``: its supervisor's record,
                output and exit status outlive mind, docs/design/processes.md);
                None: a private temp directory per command, removed after.

        Raises:
            ValueError: ``max_output_bytes`` is not positive (misuse).
        """
        if max_output_bytes <= 0:
            raise ValueError("max_output_bytes must be > 0")
        self.cwd = Path(os.path.abspath(cwd))
        self.env: Mapping[str, str] | None = dict(env) if env is not None else None
        self.max_output_bytes = max_output_bytes
        self.sandbox = sandbox
        self.effects_dir = effects_dir
        if boundary is None:
            boundary = (
                sandbox.boundary if sandbox is not None else session_boundary(self.cwd, os.environ)
            )
        self.workspace = _workspace.Workspace(self.cwd, boundary)

    def effect_directory(self, effect_id: str) -> Path | None:
        """Where effect ``effect_id``'s ``shell`` command keeps its
        supervisor's files (``effects_dir/<effect_id>``); None without an
        ``effects_dir``."""
        return None if self.effects_dir is None else self.effects_dir / effect_id

    def boundary_reason(self, path: str, access: Access) -> Refusal | None:
        """Why a file tool reading, writing or unlinking (``access``) ``path``
        would cross the boundary, resolved now as the tool will resolve it;
        None when it stays inside. Blocking but short (a few ``openat2``
        calls); the ``crossing`` of :func:`mind.effects.policy.tool_decision`.
        """
        return _workspace.boundary_reason(self.workspace, path, access)

    async def run(
        self,
        name: str,
        args: dict[str, Any],
        approved: Sequence[FileChange] | None = None,
        *,
        consent: bool = False,
        sandboxed: bool = True,
        sandbox_mode: SandboxMode | None = None,
        effect_id: str | None = None,
        on_started: StartHook | None = None,
    ) -> ToolOutcome:
        """Run one tool call.

        Args:
            name: a built-in tool name (anything else is an error outcome).
            args: the call's arguments, already checked against its schema.
            approved: for ``write_file`` / ``apply_patch``, the changes the
                person approved (:meth:`preview` at approval time); if the
                files changed since, the call fails and writes nothing.
            consent: the person approved this call; file tools may then
                write where the boundary asks first (never a denied root).
            sandboxed: False runs a ``shell`` command outside the sandbox
                (the policy decided so: an approved escalation, or
                ``danger-full-access``).
            sandbox_mode: the mode a sandboxed ``shell`` command runs in
                (:attr:`mind.effects.policy.ShellDecision.mode`); None: the
                session's.
            effect_id: the call's effect id (:func:`mind.effects.identity.effect_id`):
                a ``shell`` command's effect directory is
                ``effects_dir/<effect_id>`` and the command sees it as
                ``MIND_EFFECT_ID``; that directory is left after a returned
                result (the caller discards it once the result is durable:
                :meth:`effect_directory`); None: a fresh directory name,
                removed after, no variable.
            on_started: for ``shell``, awaited with the supervisor's handle
                (pid + start identity) while the command runs
                (:func:`mind.shell.tools._process.run_command`); its error
                stops the command's tree and propagates.

        Returns:
            The outcome; every failure is ``status="error"`` with a message.

        Raises:
            anyio.get_cancelled_exc_class(): the caller's scope was
                cancelled; a running command's whole process tree is killed
                first. File tools finish their current (short) step before
                the cancellation is delivered, so a patch is never half
                written.
        """
        from mind.shell.tools._process import _HookFailed

        shell = _Shell(sandboxed, sandbox_mode, effect_id, on_started)
        try:
            ok, text, written = await self._dispatch(name, args, approved, consent, shell)
        except _HookFailed as exc:  # the caller's own failure, not the tool's
            assert exc.__cause__ is not None
            raise exc.__cause__ from None
        except Exception as exc:  # a bug in a tool must not end the turn
            return ToolOutcome(status="error", output=f"internal error in tool {name!r}: {exc!r}")
        # The one exit of tool text: whatever a tool missed (an OS error naming a
        # non-UTF-8 path) must still be journaled and printed.
        return ToolOutcome(
            status="ok" if ok else "error",
            output=replace_lone_surrogates(text),
            output_bytes=written,
        )

    async def preview(self, name: str, args: dict[str, Any]) -> tuple[list[FileChange], str | None]:
        """How a file tool call would change files, read from the files now
        (for its approval: :func:`mind.effects.review.approval_text`).

        Returns:
            ``(changes, problem)`` as :func:`_files.preview_changes`; other
            tools: ``([], None)``.
        """
        from mind.shell.tools import _files  # the first tool call pays, not the start

        if name not in ("write_file", "apply_patch"):
            return [], None
        call = functools.partial(_files.preview_changes, self.workspace, name, args)
        return await anyio.to_thread.run_sync(call)

    async def _shell(self, args: dict[str, Any], shell: _Shell) -> tuple[bool, str, int | None]:
        from mind.shell import supervision  # the first command pays
        from mind.shell.tools._process import run_command

        timeout_s = min(float(args.get("timeout_s", SHELL_DEFAULT_TIMEOUT_S)), SHELL_MAX_TIMEOUT_S)
        command = args["command"]
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        env = dict(self.env) if self.env is not None else dict(os.environ)
        if shell.effect_id is not None:
            env["MIND_EFFECT_ID"] = shell.effect_id
        directory = None
        keep = False
        if self.effects_dir is not None:
            directory = self.effects_dir / (shell.effect_id or new_id("ef"))
            # A named effect's directory outlives the result: its caller
            # discards it once the result is durable (effects.md §4). What an
            # earlier run of the same effect left is superseded by this run.
            keep = shell.effect_id is not None
            if keep:
                supervision.discard(directory)
        sandbox = self.sandbox
        if sandbox is not None and shell.mode is not None:
            sandbox = sandbox.in_mode(shell.mode)
        if sandbox is None or not shell.sandboxed or sandbox.boundary.mode == "danger-full-access":
            result = await run_command(
                argv,
                cwd=self.cwd,
                env=env,
                timeout_s=timeout_s,
                max_output_bytes=self.max_output_bytes,
                directory=directory,
                on_started=shell.on_started,
                keep=keep,
            )
            return result.ok, result.text, result.output_bytes
        refused = sandbox.refusal()
        if refused is not None:
            return False, refused, None
        try:
            confined = sandbox.confine(argv, cwd=self.cwd, env=env)
        except SandboxRefused as exc:
            return False, str(exc), None
        try:
            # The sandbox's argv runs under the supervisor like any other
            # (docs/design/processes.md §1): it owns bwrap's or the launcher's tree.
            result = await run_command(
                confined.argv,
                cwd=self.cwd,
                env=confined.env,
                timeout_s=timeout_s,
                max_output_bytes=self.max_output_bytes,
                pass_fds=confined.pass_fds,
                directory=directory,
                on_started=shell.on_started,
                keep=keep,
            )
        finally:
            release(confined)
        return result.ok, result.text, result.output_bytes

    async def _dispatch(
        self,
        name: str,
        args: dict[str, Any],
        approved: Sequence[FileChange] | None,
        consent: bool,
        shell: _Shell,
    ) -> tuple[bool, str, int | None]:
        """``(ok, text, output_bytes)`` of one call (:class:`ToolOutcome`'s)."""
        from mind.shell.tools import _files  # the first tool call pays, not the start

        limit = self.max_output_bytes
        if name == "shell":
            return await self._shell(args, shell)
        if name == "read_file":
            call = functools.partial(
                _files.read_file,
                self.workspace,
                args["path"],
                int(args.get("offset", 1)),
                int(args.get("limit", READ_FILE_DEFAULT_LIMIT)),
                limit,
            )
        elif name == "write_file":
            call = functools.partial(
                _files.write_file,
                self.workspace,
                args["path"],
                args["content"],
                approved,
                consent=consent,
            )
        elif name == "apply_patch":
            call = functools.partial(
                _files.apply_patch, self.workspace, args["patch"], approved, consent=consent
            )
        elif name == "list_dir":
            call = functools.partial(_files.list_dir, self.workspace, args.get("path", "."), limit)
        else:
            return False, f"unknown tool {name!r}", None
        ok, text = await anyio.to_thread.run_sync(call)
        return ok, text, None
