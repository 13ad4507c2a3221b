"""Every error mind raises, in one tree.

Size: one module on purpose — the tree is one fact, and callers catch by its
shape. It splits into a package by area (state, providers, tools) when a
branch grows past a screen of classes.

::

    MindError                         base of everything mind raises on purpose
    ├── ConfigError                   bad/missing configuration (not retried)
    ├── StateDirError                 state root unusable (startup stops; no fallback)
    ├── JournalError                  journal damage; carries path and 1-based line
    │   ├── JournalCorruptError       a non-final line fails its integrity check or schema
    │   ├── JournalRecordTooLarge     a record over the 16 MiB line limit (nothing written)
    │   └── JournalWriteError         an append or fsync failed (also a StorageError)
    ├── StorageError                  a write of mind's state failed (ENOSPC, EIO…); path, errno
    ├── ProviderError                 a model request failed; ``kind`` is a FailureKind
    ├── ToolArgumentsError            tool arguments fail their JSON Schema (a tool result)
    ├── PatchError                    an apply_patch envelope is malformed or a hunk does not match
    ├── PathRefused                   a file tool path crosses the workspace boundary; path, reason
    ├── SandboxRefused                a sandboxed command cannot be confined safely; path, reason
    ├── ScriptError                   a scripted-provider script is malformed; path and detail
    ├── InteractionTooLarge           a question or answer over 128 KiB (nothing shown); ids, size
    ├── InputRefused                  input empty or over a mailbox/inbox limit; reason code
    │   └── SessionDamagedError       the open session's journal was found damaged; id, path, line
    ├── InboxCorruptError             inbox.json damaged or over 8 MiB; path (fail closed)
    ├── SupervisorRecordError         a supervised command's file is damaged; path (fail closed)
    ├── SupervisorUnsupported         the process supervisor needs Linux; platform
    ├── SupervisorIdentityUnknown     a supervisor's start identity cannot be read; pid
    ├── IllegalTransition             a chart refused an event (also RuntimeError: misuse);
    │                                 chart, state, configuration, event
    ├── DropNotAllowed                the mailbox cannot give a message back; message_id, state
    └── SessionError                  session misuse or refusal; session_id (None: no one session)
        ├── SessionLookupError        a typed id or prefix names no session, or several
        ├── DropRefused               a waiting input cannot be dropped; message_id
        ├── SessionBusyError          a turn is already running (RuntimeError misuse)
        ├── SessionOccupiedError      another live process holds the session (its pid, if visible)
        └── MountRefused              mount claim refused: occupied | busy | unavailable

Who raises what is said on each class. Provider failures are a closed enum
(:data:`FailureKind`) with one canonical message each; raw provider text is
kept only in ``detail`` for logs, never in journal records or public events.
"""

from __future__ import annotations

import errno as errno_codes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeAlias, get_args

from mind.generated.vocabulary import FailureKindName

FailureKind: TypeAlias = FailureKindName
"""The finite set of turn failures, as plain strings: one definition, the
``FailureKind`` enum of ``specs/schemas/journal.schema.json`` (generated once
as :class:`mind.generated.vocabulary.FailureKind`; this is its ``Literal``
view). Providers raise the model-request kinds; the runtime adds
``round_limit`` (a turn used its ``max_rounds`` model rounds), ``internal``
(a bug) and ``storage`` (a journal or inbox write failed).

``output_limit``: the model streamed more text, reasoning and tool-call
arguments in one turn than ``max_output_mib`` allows (docs/design/turn.md §5); the
stream is closed at the cap and the turn's inputs are not acknowledged."""

FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKindName)

TRANSIENT_KINDS: frozenset[FailureKind] = frozenset(
    {"rate_limited", "overloaded", "server", "network", "stream_cut"}
)
"""Failure kinds that are retried with bounded backoff."""


CANONICAL_MESSAGES: dict[FailureKind, str] = {
    "auth": "The provider rejected the credentials (check the API key).",
    "not_found": "The provider does not know this model or endpoint.",
    "invalid_request": "The provider rejected the request as invalid.",
    "rate_limited": "The provider is rate limiting requests.",
    "overloaded": "The provider is overloaded.",
    "server": "The provider had a server error.",
    "network": "The provider could not be reached.",
    "stream_cut": "The provider's stream ended before the answer was complete.",
    "context_length": "The conversation is longer than the model's context window.",
    "protocol": "The server does not speak the configured API.",
    "output_limit": (
        "The model's output went past the max_output_mib limit; the stream was closed "
        "and the input was not answered (it stays waiting)."
    ),
    "round_limit": (
        "The turn reached its limit of model rounds (max_rounds); raise it with "
        "MIND_MAX_ROUNDS or max_rounds in config.toml, or ask the model to go on."
    ),
    "internal": "mind hit an internal error (a bug); the turn ended without an answer.",
    "storage": (
        "mind's state could not be written (disk full, quota or I/O error); "
        "the input was not answered (it stays waiting)."
    ),
}
"""One canonical, provider-independent message per failure kind (every member has one)."""


class MindError(Exception):
    """Base class of every error mind raises on purpose."""


class ConfigError(MindError):
    """Configuration is missing or invalid. Raised at startup; never retried."""


class NotConfiguredError(ConfigError):
    """No model provider is configured at all; the message says every way to
    configure one (``mind --unconfigured-ok``, used by ``make run``, exits 0
    on this one error only)."""


class StateDirError(MindError):
    """The state root cannot be created or written.

    Raised at startup; mind never falls back to another location (docs/design/state.md §1).
    """

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"state directory {path} is not usable: {detail}")
        self.path = path
        self.detail = detail


class PrivateStateError(StateDirError):
    """A file or directory in mind's config or state root is not private and
    owned (``docs/design/state.md``): a symlink, FIFO, directory or device in
    place of a state file, another owner, or writable by other users. It is
    refused (never read or written) and left untouched.

    Attributes:
        path: the refused file or directory.
        detail: what is wrong with it.
        fix: what a person runs to repair it (``chmod 700 PATH``, ``chown``).
    """

    def __init__(self, path: Path, detail: str, fix: str) -> None:
        MindError.__init__(self, f"{path} {detail}; refused (fix: {fix})")
        self.path = path
        self.detail = f"{detail} (fix: {fix})"
        self.fix = fix


class JournalError(MindError):
    """A journal cannot be read or written as required.

    Attributes:
        path: the journal file.
        line: 1-based line number concerned (0 when not line-specific).
    """

    def __init__(self, path: Path, line: int, detail: str) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {detail}")
        self.path = path
        self.line = line
        self.detail = detail


class JournalCorruptError(JournalError):
    """A line other than a torn last line fails its integrity check or schema.

    Raised when a session is opened; the file is left untouched (fail closed).
    """


class JournalReplacedError(JournalCorruptError):
    """The journal file was replaced or removed under a running mind (its
    path no longer names the open file), or the file at the path belongs to
    another session. Reported as damage; nothing is appended to the unlinked
    file (``docs/design/state.md``)."""


class CheckpointRefused(MindError):
    """A session's checkpoint cannot be used (docs/design/checkpoints.md §4):
    missing parts, another session's, or the journal no longer holds the
    bytes it covers. Never shown as a failure: the journal is then read
    whole (correct, slower) and the reason reported once.

    Attributes:
        path: the checkpoint file.
        reason: why it was refused.
    """

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class JournalRecordTooLarge(JournalError):
    """A record would be longer than the journal's line limit (16 MiB once
    encoded); nothing was written and the journal stays usable. The runtime
    fails a model round whose record is too large as ``output_limit``, so its
    input is not acknowledged (docs/design/turn.md §5).

    Attributes:
        size_bytes: the encoded line's length in bytes.
        limit_bytes: the journal's line limit in bytes.
    """

    def __init__(self, path: Path, size_bytes: int, limit_bytes: int) -> None:
        super().__init__(path, 0, f"record is {size_bytes} bytes; the limit is {limit_bytes}")
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes

    def failure_message(self) -> str:
        """The turn's ``output_limit`` message for this cause: it names the
        journal's record limit (MiB), not ``max_output_mib``, since the answer
        may be well under that cap and only grow past this one once escaped."""
        mib = self.limit_bytes / (1024 * 1024)
        return (
            f"The model's answer is too large to keep: its journal record would be "
            f"{self.size_bytes} bytes, past the journal's {mib:g} MiB record limit; "
            "the input was not answered (it stays waiting)."
        )


class StorageError(MindError):
    """A durable write of mind's own state failed: disk full (``ENOSPC``), quota
    (``EDQUOT``), an I/O error (``EIO``), a read-only file system…

    Raised by the journal (as :class:`JournalWriteError`) and by
    ``mind.shell.inbox.Inbox`` writes. A turn that meets it ends ``failed``
    with failure kind ``storage`` and this error on ``TurnOutcome.error``; its
    inputs are not acknowledged (they stay in ``inbox.json``). Nothing is
    lost: once space is freed, reopening the session recovers it (the
    journal's one torn-tail rule covers a half-written last line). Not retried
    automatically. ``mind exec`` exits 4 with one line.

    Attributes:
        path: the file that could not be written.
        errno: the OS error number (``errno.ENOSPC`` …), or None if unknown.
        detail: what was being done, with the OS's words.
    """

    def __init__(self, path: Path, errno: int | None, detail: str) -> None:
        MindError.__init__(self, f"{path}: {detail}")
        self.path = path
        self.errno = errno
        self.detail = detail

    @property
    def errno_name(self) -> str:
        """The symbolic errno, e.g. ``"ENOSPC"`` (``""`` when unknown)."""
        return errno_codes.errorcode.get(self.errno or 0, "")


def os_error_detail(action: str, exc: OSError) -> str:
    """``"<action>: No space left on device (ENOSPC)"``: the words a StorageError carries."""
    name = errno_codes.errorcode.get(exc.errno or 0, "")
    words = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    return f"{action}: {words}" + (f" ({name})" if name else "")


STORAGE_ERRNOS: frozenset[int] = frozenset(
    {errno_codes.ENOSPC, errno_codes.EDQUOT, errno_codes.EIO, errno_codes.EROFS}
)
"""OS error numbers that mean the storage itself refused a write (full disk,
quota, I/O error, read-only file system): reported as :class:`StorageError`
(``mind exec`` exit 4) wherever mind writes its own state, opening included."""


def as_storage_error(exc: BaseException, path: Path, action: str) -> StorageError | None:
    """The :class:`StorageError` for a failed write of ``path``, when ``exc``
    (or an error in its ``__cause__`` chain) is an ``OSError`` whose errno is
    in :data:`STORAGE_ERRNOS`; ``None`` for any other error (the caller keeps
    its own, e.g. a permission problem is a :class:`StateDirError`).

    Args:
        exc: the error met while writing.
        path: the file or directory that could not be written (the OS
            error's own file name wins when it has one).
        action: what was being done, e.g. ``"write lease"`` (in the detail).
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, StorageError):
            return seen
        if isinstance(seen, OSError) and seen.errno in STORAGE_ERRNOS:
            where = Path(seen.filename) if isinstance(seen.filename, str) else path
            return StorageError(where, seen.errno, os_error_detail(action, seen))
        seen = seen.__cause__
    return None


class JournalWriteError(JournalError, StorageError):
    """A journal append or fsync failed (or an earlier one did: the journal then
    refuses appends until reopened). Both a :class:`JournalError` (``line`` 0)
    and a :class:`StorageError` (``errno``)."""

    def __init__(self, path: Path, errno: int | None, detail: str) -> None:
        MindError.__init__(self, f"{path}: {detail}")
        self.path = path
        self.line = 0
        self.errno = errno
        self.detail = detail


class ProviderError(MindError):
    """A model request failed.

    Raised by provider adapters; the runtime retries it when ``kind`` is in
    :data:`TRANSIENT_KINDS` (bounded backoff, honouring ``retry_after_s``).

    Attributes:
        kind: the failure kind (closed enum).
        message: the canonical message of ``kind``.
        detail: raw provider text for logs only (never journaled).
        status: HTTP status if any.
        retry_after_s: server-requested delay in seconds, if any.
        context_window: on a ``context_length`` failure, the model's window in
            tokens as the server's own error stated it (None: it did not say;
            never guessed). A number only, so it may be journaled.
        request_tokens: on a ``context_length`` failure, the size of the
            refused request in tokens as the server's error stated it (None:
            it did not say).
    """

    def __init__(
        self,
        kind: FailureKind,
        *,
        detail: str = "",
        status: int | None = None,
        retry_after_s: float | None = None,
        context_window: int | None = None,
        request_tokens: int | None = None,
    ) -> None:
        self.kind: FailureKind = kind
        self.message = CANONICAL_MESSAGES[kind]
        self.detail = detail
        self.status = status
        self.retry_after_s = retry_after_s
        self.context_window = context_window
        self.request_tokens = request_tokens
        super().__init__(f"{kind}: {self.message}" + (f" ({detail})" if detail else ""))

    @property
    def transient(self) -> bool:
        """True when the failure is retried (see :data:`TRANSIENT_KINDS`)."""
        return self.kind in TRANSIENT_KINDS


class ToolArgumentsError(MindError):
    """Tool arguments are not valid JSON or fail the tool's JSON Schema.

    Raised by tool contracts; the runtime turns it into an error tool result
    the model sees (never a crash).
    """

    def __init__(self, tool: str, detail: str) -> None:
        super().__init__(f"invalid arguments for tool {tool!r}: {detail}")
        self.tool = tool
        self.detail = detail


class PatchError(MindError):
    """An ``apply_patch`` envelope is malformed or one of its hunks does not match.

    Raised by :mod:`mind.effects.patch` (parse and pure apply); the tool runner
    turns it into an error tool result the model sees. Never retried; nothing
    was written when it is raised.
    """


class InteractionTooLarge(MindError):
    """A question to the person (its ``interaction_requested`` record) or an
    answer's reason is over the 128 KiB limit (docs/design/interactions.md §4).

    Raised by :mod:`mind.shell.interactions` before anything is journaled or
    shown; the tool call is then denied with this message (the model sees
    it). Not retried.

    Attributes:
        interaction_id: the interaction's id (``ia_…``).
        call_id: the tool call it asks about.
        size_bytes: the encoded size.
        limit_bytes: the limit.
    """

    def __init__(
        self, interaction_id: str, call_id: str, size_bytes: int, limit_bytes: int
    ) -> None:
        super().__init__(
            f"The approval request for tool call {call_id!r} ({interaction_id}) is "
            f"{size_bytes} bytes, over the {limit_bytes}-byte limit: it was not shown and "
            "the call did not run. Make the call smaller (a shorter command, a smaller patch)."
        )
        self.interaction_id = interaction_id
        self.call_id = call_id
        self.size_bytes = size_bytes
        self.limit_bytes = limit_bytes


class PathRefused(MindError):
    """A file tool may not reach ``path``: it resolves outside the workspace
    without approval, to a protected path, or to a denied root (``/proc``,
    mind's state); see ``docs/design/boundary.md``. Raised inside the file
    tools and turned into a failed tool result, never a turn failure.

    Attributes:
        path: the path as the model gave it.
        reason: one line saying why (:class:`mind.effects.boundary.Boundary`'s text).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class SandboxRefused(MindError):
    """A sandboxed ``shell`` command cannot be confined safely, so it does not
    run (fail closed; ``docs/design/boundary.md`` "Sandbox"): e.g. a writable
    root holds more directories than the search for nested ``.git`` /
    ``.mind`` may open. Raised by :meth:`mind.shell.sandbox.command.Sandbox.confine`
    and turned into a failed tool result, never a turn failure.

    Attributes:
        path: the writable root (real path) the reason is about.
        reason: one line for the model and the person.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"Refused without running: {path}: {reason}")
        self.path = path
        self.reason = reason


class ScriptError(MindError):
    """A scripted-provider script file is malformed or exhausted."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path
        self.detail = detail


InputRefusalReason = Literal[
    "empty",
    "not_text",
    "steering_full",
    "background_full",
    "background_bytes",
    "inbox_full",
    "storage",
    "damaged",
]
"""Why an input was refused (docs/design/mailbox.md §7, docs/design/inbox.md §3).

- ``empty``: the input has no text (refused by the runtime);
- ``not_text``: the input holds lone surrogates (undecodable bytes), which cannot
  be stored as UTF-8 (refused by the runtime; the CLI replaces them first);
- ``steering_full``: 20 user inputs (prompt/steer/queue) are not yet acknowledged;
- ``background_full``: 100 background completions are not yet acknowledged;
- ``background_bytes``: unacknowledged background completions would exceed ~7 MiB;
- ``inbox_full``: ``inbox.json`` would exceed its 8 MiB hard cap once serialised;
- ``storage``: the input could not be made durable (a :class:`StorageError`,
  chained as ``__cause__``: disk full, quota, I/O error), or the session's
  journal failed earlier and the session must be reopened;
- ``damaged``: the session's journal was found damaged while it was open
  (:class:`SessionDamagedError`, docs/design/checkpoints.md §5).
"""

INPUT_REFUSAL_REASONS: tuple[InputRefusalReason, ...] = get_args(InputRefusalReason)


class InputRefused(MindError):
    """An input was refused: it is empty, or a mailbox or inbox limit is reached.

    Raised by ``mind.machines.mailbox.Mailbox.admit``/``enqueue`` (message
    limits), ``mind.shell.inbox.Inbox.add`` (the 8 MiB file cap) and the
    runtime (empty input) before anything is changed or written: the caller
    still holds the text (the REPL keeps it in the editor) and may retry later
    with the same message id once earlier input is acknowledged. Not retried
    automatically; not misuse.

    Attributes:
        reason: the closed reason code.
        message: one human sentence saying what to do.
        message_id: the refused input's id.
    """

    def __init__(self, reason: InputRefusalReason, message: str, *, message_id: str) -> None:
        super().__init__(f"input {message_id!r} refused ({reason}): {message}")
        self.reason: InputRefusalReason = reason
        self.message = message
        self.message_id = message_id


DAMAGED_JOURNAL_NEXT_STEP = (
    "restore the journal from a backup, or start a new session "
    "(mind, or mind exec without --session)"
)
"""What a person can do about a damaged journal (mind never repairs one)."""

DAMAGED_JOURNAL_REFUSED = (
    "mind changed nothing in it and does not open the session while that line is damaged: "
    + DAMAGED_JOURNAL_NEXT_STEP
)
"""Said after a :class:`JournalCorruptError` that refused opening a session."""


class SessionDamagedError(InputRefused):
    """Input refused because the session's journal was found damaged after
    it was opened (the background check of the prefix its checkpoint
    covered, docs/design/checkpoints.md §5): nothing new starts in the
    session; the turn that was running finished; the damaged line is left
    as it is, and the next open refuses the session at that line.

    Attributes:
        session_id: the session.
        path: its ``journal.jsonl``.
        line: the first damaged line, 1-based (0: the bytes changed, yet
            every line passes its own check).
        detail: why that line is damaged.
    """

    def __init__(
        self, session_id: str, path: Path, line: int, detail: str, *, message_id: str
    ) -> None:
        where = f"{path}:{line}" if line else str(path)
        super().__init__(
            "damaged",
            f"session {session_id}'s journal is damaged at {where} ({detail}); mind left it "
            f"as it is and starts nothing more in this session: {DAMAGED_JOURNAL_NEXT_STEP}",
            message_id=message_id,
        )
        self.session_id = session_id
        self.path = path
        self.line = line
        self.detail = detail


class IllegalTransition(MindError, RuntimeError):
    """An event was sent that a statechart does not allow in its current state.

    The one refusal of every chart (``specs/statecharts/*.yaml``): raised by the
    machines of :mod:`mind.machines` (turn, mailbox, inbox_message, mount) when
    the shell sends an event the chart has no transition for. It is caller
    misuse (also a ``RuntimeError``), never retried; the machine is left exactly
    as it was, and the engine's ``TransitionNotAllowed`` is chained as
    ``__cause__`` when there is one.

    Attributes:
        chart: the chart's name, e.g. ``"turn"`` (its YAML file's stem).
        event: the refused event, e.g. ``"seal"``.
        state: the active leaf state it was refused in.
        configuration: ids of every active state (compound states included);
            ``{state}`` for a flat chart.
        detail: the reason when it is more than "not allowed" ("" otherwise).
    """

    def __init__(
        self,
        chart: str,
        event: str,
        state: str,
        *,
        configuration: frozenset[str] = frozenset(),
        detail: str = "",
    ) -> None:
        reason = detail or f"event {event!r} is not allowed in state {state!r}"
        super().__init__(f"{chart}: {reason}")
        self.chart = chart
        self.event = event
        self.state = state
        self.configuration = configuration or frozenset({state})
        self.detail = detail


class DropNotAllowed(MindError):
    """The mailbox cannot give this message back: no waiting message has the
    id, or ``inbox_message.yaml`` has no ``drop`` from its state (the running
    turn has claimed it, or a turn consumed it). A refusal of the person's
    request, not misuse; nothing changed.

    Raised by ``mind.machines.mailbox.Mailbox.check_drop``/``drop``; the
    session turns it into :class:`DropRefused` (with the session id).

    Attributes:
        message_id: the message id asked for.
        state: its state in ``inbox_message.yaml``, or None when no waiting
            message has that id.
        reason: one sentence saying why (the exception text).
    """

    def __init__(self, message_id: str, state: str | None, reason: str) -> None:
        super().__init__(reason)
        self.message_id = message_id
        self.state = state
        self.reason = reason


class InboxCorruptError(MindError):
    """``inbox.json`` cannot be trusted, so the session does not open.

    Causes: bad JSON, wrong schema or version, duplicate message ids, not a
    regular file, or larger than 8 MiB. Raised by ``mind.shell.inbox.Inbox.open``
    when a session is opened; the file is left byte-identical for inspection
    (fail closed, docs/design/inbox.md §3). Never retried: a person must look at the file.

    Attributes:
        path: the inbox file.
        detail: what is wrong with it.
    """

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path}: damaged inbox, left untouched: {detail}")
        self.path = path
        self.detail = detail


class SupervisorRecordError(MindError):
    """A file of a supervised command's effect directory cannot be trusted:
    ``supervisor.json`` or ``exit.json`` is not the JSON object its version
    describes, or an output file is missing, shorter or longer than
    ``exit.json`` says (``docs/design/processes.md`` §6). Raised by
    ``mind.shell.supervision.inspect`` / ``wait``; the file is left untouched
    for inspection and no outcome is guessed from it (fail closed).

    Attributes:
        path: the damaged file.
        detail: what is wrong with it.
    """

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"{path}: damaged supervisor record, left untouched: {detail}")
        self.path = path
        self.detail = detail


class SupervisorUnsupported(MindError):
    """The process supervisor cannot run on this platform: it needs Linux
    (``prctl``: ``PR_SET_CHILD_SUBREAPER``, ``PR_SET_PDEATHSIG``,
    ``PR_SET_DUMPABLE``; ``docs/design/processes.md`` §1). Raised by
    ``mind.shell.supervision.start`` before anything is made; no command
    runs unsupervised instead (fail closed).

    Attributes:
        platform: ``sys.platform`` of this Python (``darwin``, ``win32``, …).
    """

    def __init__(self, platform: str) -> None:
        super().__init__(
            f"tool commands run under mind's process supervisor, which needs Linux "
            f"(prctl PR_SET_CHILD_SUBREAPER); this platform is {platform!r}"
        )
        self.platform = platform


class SupervisorIdentityUnknown(MindError):
    """The start identity of a command's supervisor cannot be read, so no
    ``effect_running`` record may name it: a bare pid could name any later
    process, and a record without the identity is never trusted as
    "running" after a crash (``docs/design/effects.md`` §4). Raised by
    ``mind.shell.effects.SessionEffects.running`` (nothing is journaled) and
    by ``mind.shell.supervision.start`` for a cold start that will be
    journaled (its tree is stopped first; a spare whose identity is unknown
    is given up and the command started cold instead). The shell tool's
    result then says the command could not be started (fail closed).

    Attributes:
        pid: the supervisor's pid.
    """

    def __init__(self, pid: int) -> None:
        super().__init__(
            f"the start identity of the command's supervisor (pid {pid}) cannot be read, "
            "so it cannot be recorded as running"
        )
        self.pid = pid


class SessionError(MindError):
    """A session-level refusal or misuse; carries the session id.

    Attributes:
        session_id: the session concerned, or None when the refusal is about
            no single session (never an invented id such as ``"*"``).
        detail: what went wrong (the text after ``session ID:``).
    """

    def __init__(self, session_id: str | None, detail: str) -> None:
        super().__init__(f"session {session_id}: {detail}" if session_id else detail)
        self.session_id = session_id
        self.detail = detail


class SessionLookupError(SessionError):
    """A session id or prefix that names no session, or more than one.

    ``mind exec --session`` exits 2 with it; the REPL says it and stays.

    Attributes:
        candidates: the ids that start with the prefix, sorted (empty: none).
    """

    def __init__(self, prefix: str, detail: str, candidates: tuple[str, ...] = ()) -> None:
        super().__init__(prefix, detail)
        self.candidates = candidates


class DropRefused(SessionError):
    """A waiting input could not be dropped; nothing was changed or written.

    Raised by ``Session.drop`` (docs/design/mailbox.md §6): no waiting message has that
    id or id prefix, the prefix matches several, or the running turn has
    already claimed the message (the mailbox chart has no ``drop`` there).

    Attributes:
        session_id: the session.
        message_id: the id or prefix as given.
    """

    def __init__(self, session_id: str, message_id: str, detail: str) -> None:
        super().__init__(session_id, detail)
        self.message_id = message_id


class SessionBusyError(SessionError, RuntimeError):
    """A turn was submitted while another turn of the session is running (misuse)."""


class CompactionRefused(SessionError):
    """A manual compaction (``/compact``, ``Session.compact``) could not start;
    nothing was written (docs/design/context.md §5).

    Attributes:
        session_id: the session.
        detail: why: a turn is running (compaction runs between turns), or
            another compaction is running.
    """


class SessionOccupiedError(SessionError):
    """Another live process owns the session (lease held by a live pid whose
    start identity matches). Raised when a session is opened; never retried
    automatically. ``mind exec`` exits 3 with the holder's pid.

    Attributes:
        pid: the holder's process id, or None when the holder is proven live
            (its lock on the session directory is held) but its pid cannot be
            seen from here (another PID namespace, e.g. a container).
    """

    def __init__(self, session_id: str, pid: int | None) -> None:
        holder = (
            f"pid {pid}"
            if pid is not None
            else "another process (its pid is not visible from here)"
        )
        super().__init__(session_id, f"occupied by {holder}")
        self.pid = pid


MountRefusalKind = Literal["occupied", "busy", "unavailable"]
"""Why a mount claim was refused (docs/design/mounts.md §6).

- ``occupied``: named live holders (another process's record lists the session);
- ``busy``: a live peer held ``session-mounts.lock`` through the whole bounded
  backoff (25-400 ms waits), so nothing was checked — try again shortly;
- ``unavailable``: the ledger could not be read or written (damaged, unknown
  version, wrong shape, permissions, read-only directory), so nothing was
  checked — never read as "nobody holds it".
"""

MOUNT_REFUSAL_KINDS: tuple[MountRefusalKind, ...] = get_args(MountRefusalKind)


@dataclass(frozen=True, slots=True)
class MountHolder:
    """A live process whose published mount set lists a session (docs/design/mounts.md §4).

    Attributes:
        pid: the holder's process id (the liveness witness, docs/design/mounts.md §4).
        started_at_ms: when it started, Unix epoch milliseconds (display only).
    """

    pid: int
    started_at_ms: int


class MountRefused(SessionError):
    """A claim to mount a session in this process was refused; nothing was written.

    Raised by ``mind.shell.mounts.MountLedger.claim`` for a session this process
    does not host yet (docs/design/mounts.md §5). The three kinds stay distinct because
    callers must act differently; none of them may be treated as "free"
    (fail closed: a loud refusal, never a fallback):

    - ``occupied``: :attr:`holders` names the live holders; the message is
      ``occupied by pid N`` — the same wording as :class:`SessionOccupiedError`,
      so the UI and the runtime say the same thing (docs/design/mounts.md §6);
    - ``busy``: the lock stayed contended through the backoff; retrying later
      (not automatically) is fine;
    - ``unavailable``: :attr:`detail` says what is wrong (for a damaged file:
      delete it when no other mind is running); the file is left byte-identical.

    For a brand-new session id, ``busy`` and ``unavailable`` are not raised:
    the claim succeeds unpublished and the refusal is kept as a warning on the
    handle. Not misuse; never retried automatically beyond the busy backoff.

    Attributes:
        session_id: the session claimed, or None for a refused rewrite of this
            process's whole published set (``republish``, ``close``).
        kind: ``occupied | busy | unavailable``.
        holders: the live holders (non-empty only for ``occupied``), by pid.
        reason: one human sentence (also the exception text after the session id).
        detail: for ``unavailable`` what could not be read or written; else ``reason``.
        storage: for ``unavailable`` because the storage refused a write
            (:data:`STORAGE_ERRNOS`) that :class:`StorageError` — the claim
            then raises it instead (exit 4); else ``None``.
    """

    def __init__(
        self,
        session_id: str | None,
        kind: MountRefusalKind,
        *,
        holders: tuple[MountHolder, ...] = (),
        detail: str = "",
        storage: StorageError | None = None,
    ) -> None:
        if kind == "occupied":
            pids = ", ".join(str(h.pid) for h in holders)
            reason = f"occupied by pid {pids}" if pids else "occupied by another process"
        elif kind == "busy":
            held = f": {detail}" if detail else " (another mind is updating it)"
            reason = f"the session mount ledger is busy{held}; try again"
        else:
            reason = f"cannot check who holds it: {detail}"
        super().__init__(session_id, reason)
        self.kind: MountRefusalKind = kind
        self.holders = holders
        self.reason = reason
        self.detail = detail or reason
        self.storage = storage

    @property
    def pid(self) -> int | None:
        """The first holder's pid for ``occupied`` (what ``mind exec`` prints), else None."""
        return self.holders[0].pid if self.holders else None


class LeaveRepl(MindError):
    """Not a failure: raised through ``prompt_async`` to leave the REPL (Ctrl+C
    twice, SIGHUP, SIGTERM); the REPL catches it and closes its sessions."""
