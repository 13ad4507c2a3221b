"""The process supervisor of one tool command (``docs/design/processes.md``).

``python -I -S supervisor.py --cwd DIR --timeout S --max-output N --grace S
[--fd N]... [--journaled 0|1] -- PROGRAM ARGS...``, started by mind with its working directory
being the command's effect directory (0700, made by
:func:`mind.shell.supervision.start`), in its own session, stdin and stdout
``/dev/null`` and stderr the directory's ``supervisor.log``: nothing ties it
to mind, so mind's ``kill -9`` neither kills nor SIGPIPEs it (§1).

What it does, in order (§2): take ``flock`` on the directory for its whole
life; refuse a directory a supervisor or an inspection already used; become a
child subreaper (``PR_SET_CHILD_SUBREAPER``: every orphaned descendant,
``setsid`` or double-forked, is reparented to it); write ``supervisor.json``
(its pid and start identity) before the command starts; run the command with
its stdout and stderr read here and kept bounded in the files ``stdout`` and
``stderr`` (§3); enforce the timeout itself; on SIGTERM/SIGINT/SIGHUP, or
at the timeout, stop the whole tree (SIGTERM to every descendant, then
SIGKILL after the grace, §4); when the command's leader exits, SIGKILL what
it left (§4); write ``exit.json`` atomically (tmp + rename, then fsync of it,
of both output files and of the directory, §5) and exit 0.

mind imports it as the top-level module ``supervisor`` (``python -I -S -c``,
this directory first on ``sys.path``: its cached bytecode runs, §9) and calls
:func:`main`, or starts it ahead of need as a spare (:func:`spare`, §9) that
reads one command's job from its stdin. Standard library only: it must start
fast and must not depend on mind's package (the import-linter contract "the supervisor imports
nothing from mind"). So the few file rules of ``mind/shell/private_files.py``
it needs (no-follow, owner and mode checks, 0600 files, atomic replace) are
repeated here in minimal form rather than imported.

One file (over 500 lines) because it runs alone beside mind: it imports
nothing from mind (a contract), and every extra module would add its import
to each command's start (docs/design/processes.md §9).
"""

from __future__ import annotations

import ctypes
import errno  # built in: no file to load
import fcntl
import math
import os
import select
import stat
import sys
import time

TYPE_CHECKING = False  # not `typing`'s: importing typing costs as much as enum
if TYPE_CHECKING:
    import signal
    from collections.abc import Callable
else:
    # The C module itself: ``signal`` wraps it in enums, and importing ``enum``
    # costs a third of the interpreter's own start, paid by every command.
    import _signal as signal

REFUSED_EXIT = 125
"""Exit status when the supervisor refused to run (bad arguments, a directory
not private, already used or locked); the reason is in ``supervisor.log``."""

FORMAT_VERSION = 1
"""``version`` of ``supervisor.json`` and ``exit.json``."""

DRAIN_AFTER_EXIT_S = 2.0
"""Seconds to keep reading the pipes after every descendant is gone: only a
process outside the tree that was handed the pipe could keep them open."""

SUPERVISOR_FILE = "supervisor.json"
EXIT_FILE = "exit.json"
NEVER_STARTED_FILE = "never_started"
"""Written by an inspection that found the directory unlocked and unused
(:func:`mind.shell.supervision.inspect`): a supervisor starting later refuses,
so "never started" stays true (§6)."""
STDOUT_FILE = "stdout"
STDERR_FILE = "stderr"

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
PROOF_ENV = "MIND_SUPERVISOR_PROOF"
"""Environment variable in which mind hands the supervisor its token (§10)."""
_PR_SET_CHILD_SUBREAPER = 36
_READ_CHUNK_BYTES = 65536
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY


class _Refused(Exception):
    """The supervisor cannot run; the message goes to ``supervisor.log``."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def start_identity(pid: int) -> str:
    """``"<boot id>:<start ticks>"`` of ``pid`` (``/proc/PID/stat`` field 22),
    the format of ``mind.shell.procs.start_identity``; "" when unreadable."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            boot_id = boot.read().strip()
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as proc_stat:
            fields = proc_stat.read().rpartition(")")[2].split()
    except OSError:
        return ""
    return f"{boot_id}:{fields[19]}" if len(fields) > 19 else ""


_LOCK_WAIT_S = 2.0
"""How long (seconds) a busy directory lock is tried again before the
supervisor refuses: far longer than a look holds it, far shorter than a
command another supervisor runs."""


class _Directory:
    """The effect directory, open as ``dir_fd``: every file is reached
    through it without following links (``private_files`` rules, §5)."""

    def __init__(self) -> None:
        # The working directory is the effect directory (mind started us there).
        self.fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        info = os.fstat(self.fd)
        # private_files.check_owned's rule: owned by this user, not group/world-writable.
        if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise _Refused("the effect directory is not private (owned by this user, 0700)")

    def lock(self) -> None:
        # A live session looking at the directory (supervision.inspect) holds
        # the lock for a moment; another supervisor holds it for its whole
        # command. So a busy lock is tried again for a bounded time before it
        # refuses: a look never keeps a command from starting (§6).
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise _Refused("the effect directory is locked by another process") from None
                time.sleep(0.002)

    def exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def create(self, name: str) -> int:
        """A new private file (0600, ``O_EXCL``: never an existing one)."""
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600, dir_fd=self.fd
        )
        os.fchmod(fd, 0o600)  # the umask only narrows a mode
        return fd

    def write_atomic(
        self, name: str, data: bytes, *, durable: tuple[int, ...] = (), sync: bool = True
    ) -> None:
        """``name`` appears whole (tmp + write + rename), then it, the files
        ``durable`` and the directory are fsynced (§5) — none of them when
        not ``sync``.

        Every fsync comes after the rename, with nothing between them, so a
        journaling file system commits the whole record in one transaction
        and the later fsyncs find nothing left to write (§9). Readers see
        ``name`` before it is durable: ``supervisor.json`` is durable before
        the command starts, ``exit.json`` before this process ends and drops
        its lock — and a reader trusts ``exit.json`` only once the lock is
        free (:func:`mind.shell.supervision.inspect`).
        """
        tmp = f".{name}.{os.getpid()}.tmp"
        fd = self.create(tmp)
        try:
            _write_all(fd, data)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            if sync:
                for other in durable:
                    os.fsync(other)
                os.fsync(fd)
        finally:
            os.close(fd)
        if sync:
            os.fsync(self.fd)


def _json(value: object) -> str:
    """``value`` (None, bool, int, finite float, str, dict of those) as JSON.
    Not the ``json`` module: it imports ``re``, a fifth of the start."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        out = ['"']
        for char in value:
            code = ord(char)
            if char in '"\\':
                out.append("\\" + char)
            elif 0x20 <= code < 0x7F:
                out.append(char)
            elif code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        return "".join(out) + '"'
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json(str(k))}:{_json(v)}" for k, v in value.items()) + "}"
    raise TypeError(type(value).__name__)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Sink:
    """One output stream kept bounded (§3): the first ``max_bytes`` go to the
    file as they come; the last ``max_bytes`` are held here and appended at the
    end; what lies between is only counted (``cut``)."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes
        self.total = 0
        self.head = 0
        self.tail = bytearray()

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.max_bytes - self.head
        if room > 0:
            _write_all(self.fd, data[:room])
            self.head += min(room, len(data))
            data = data[room:]
        if data:
            self.tail += data
            excess = len(self.tail) - self.max_bytes
            if excess > 0:
                del self.tail[:excess]

    def finish(self) -> dict[str, int]:
        """Append the tail and give ``exit.json``'s account of the stream (the
        file is fsynced with ``exit.json``)."""
        _write_all(self.fd, bytes(self.tail))
        return {
            "total_bytes": self.total,
            "head_bytes": self.head,
            "cut_bytes": self.total - self.head - len(self.tail),
        }


def _children(pid: int) -> list[int]:
    """``pid``'s children from ``/proc/PID/task/*/children``; [] once it is gone."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as listing:
                out += [int(word) for word in listing.read().split()]
        except OSError:
            continue  # the thread or process ended meanwhile
    return out


def _parents() -> dict[int, int]:
    """pid → ppid of every process (the fallback without ``CONFIG_PROC_CHILDREN``)."""
    table: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdecimal():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as proc_stat:
                fields = proc_stat.read().rpartition(")")[2].split()
        except OSError:
            continue
        if len(fields) >= 2:
            table[int(name)] = int(fields[1])
    return table


_HAS_CHILDREN_FILE = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")


def descendants() -> list[int]:
    """Every descendant of this process (children first), zombies included."""
    found: list[int] = []
    frontier = [os.getpid()]
    table = None if _HAS_CHILDREN_FILE else _parents()
    while frontier:
        if table is None:
            level = [child for pid in frontier for child in _children(pid)]
        else:
            level = [pid for pid, ppid in table.items() if ppid in frontier]
        found += level
        frontier = level
    return found


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            continue  # gone, or no longer ours (setuid): nothing to signal


class _Supervisor:
    """The command's run: its pipes, its leader, its end (§2-§4)."""

    def __init__(
        self, directory: _Directory, timeout_s: float, max_bytes: int, grace_s: float
    ) -> None:
        self.directory = directory
        self.deadline = time.monotonic() + timeout_s
        self.grace_s = grace_s
        self.max_bytes = max_bytes
        self.leader = 0
        self.status: int | None = None
        self.killed = False
        self.timed_out = False
        self.leftovers = 0
        self.poller = select.poll()
        self.sinks: dict[int, _Sink] = {}
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = wake_r
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self.poller.register(wake_r, select.POLLIN)

    def reap(self, block: bool = False) -> bool:
        """Reap every ended child (orphans come here as subreaper); True while
        children remain."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.leader:
                self.status = status
            block = False

    def pump(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for output or a signal; feed what came."""
        for fd, _ in self.poller.poll(max(0, math.ceil(timeout_s * 1000))):
            if fd == self.wake_r:
                try:
                    while os.read(self.wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
                continue
            try:
                data = os.read(fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                continue
            if data:
                self.sinks[fd].feed(data)
            else:
                self.poller.unregister(fd)
                del self.sinks[fd]
                os.close(fd)

    def open_pipes(self) -> bool:
        return bool(self.sinks)

    def run(self, sinks: tuple[_Sink, _Sink], reads: tuple[int, int]) -> None:
        for fd, sink in zip(reads, sinks, strict=True):
            os.set_blocking(fd, False)
            self.sinks[fd] = sink
            self.poller.register(fd, select.POLLIN)
        kill_at: float | None = None
        while self.status is None:
            now = time.monotonic()
            if kill_at is None and (_stop_asked[0] or now >= self.deadline):
                self.killed = _stop_asked[0]
                self.timed_out = not _stop_asked[0]
                _signal(descendants(), signal.SIGTERM)
                kill_at = now + self.grace_s
            if kill_at is not None and now >= kill_at:
                break
            until = kill_at if kill_at is not None else self.deadline
            self.pump(max(0.0, until - now))
            self.reap()
        self.kill_leftovers(counting=kill_at is None)
        drain_until = time.monotonic() + DRAIN_AFTER_EXIT_S
        while self.open_pipes() and time.monotonic() < drain_until:
            self.pump(drain_until - time.monotonic())

    def kill_leftovers(self, *, counting: bool) -> None:
        """SIGKILL every descendant, reap, repeat until none is left (a killed
        process's children are reparented here and taken in the next round)."""
        first = True
        while True:
            found = descendants()
            if first and counting:
                self.leftovers = sum(1 for pid in found if _is_leftover(pid))
            first = False
            _signal(found, signal.SIGKILL)
            if not self.reap(block=bool(found)) and not found:
                return


def _is_leftover(pid: int) -> bool:
    """Whether descendant ``pid`` is a process the command left running (§4.2):
    not a zombie, and not the init of a pid namespace below ours. Such an
    init is a wrapper's helper (bwrap's, which may still be exiting after
    bwrap, the leader, has exited): the command's own processes live below it
    and are counted; it is killed like every descendant, never counted."""
    if _is_zombie(pid):
        return False
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            nspids = next((line.split()[1:] for line in status if line.startswith("NSpid:")), [])
    except OSError:
        return False  # gone meanwhile: nothing was left running
    return not (len(nspids) > _ns_depth() and nspids[-1] == "1")


def _ns_depth() -> int:
    """How many pid namespaces this process is seen in (``NSpid`` fields);
    read only when counting, off the start path."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            return next((len(line.split()) - 1 for line in status if line.startswith("NSpid:")), 1)
    except OSError:
        return 1


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as proc_stat:
            fields = proc_stat.read().rpartition(")")[2].split()
    except OSError:
        return True
    return not fields or fields[0] in ("Z", "X")


def _take_proof(libc: ctypes.CDLL) -> str | None:
    """The token mind handed this supervisor in :data:`PROOF_ENV` (None if
    none), taken out of the environment the command inherits; this process
    is then made non-dumpable, so no process of the user without
    ``CAP_SYS_PTRACE`` — the command included — can read it through ptrace,
    ``/proc/PID/mem`` or ``/proc/PID/environ``. ``exit.json`` carries it
    back: mind believes an ``exit.json`` whose token hashes to what it kept
    (processes.md §10)."""
    proof = os.environ.pop(PROOF_ENV, None)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    return proof


def _parse(args: list[str]) -> tuple[str, float, int, float, list[int], bool, list[str]]:
    cwd: str | None = None
    journaled = False
    timeout_s: float | None = None
    max_bytes: int | None = None
    grace_s: float | None = None
    fds: list[int] = []
    rest = list(args)
    try:
        while len(rest) >= 2 and rest[0] != "--":
            option, value = rest[0], rest[1]
            rest = rest[2:]
            if option == "--cwd":
                cwd = value
            elif option == "--timeout":
                timeout_s = float(value)
            elif option == "--max-output":
                max_bytes = int(value)
            elif option == "--grace":
                grace_s = float(value)
            elif option == "--fd":
                fds.append(int(value))
            elif option == "--journaled" and value in ("0", "1"):
                journaled = value == "1"
            else:
                raise ValueError(option)
    except ValueError as exc:
        raise _Refused(f"bad option {exc}") from None
    if cwd is None or timeout_s is None or max_bytes is None or grace_s is None:
        raise _Refused("missing --cwd, --timeout, --max-output or --grace")
    if len(rest) < 2 or rest[0] != "--" or timeout_s <= 0 or max_bytes <= 0 or grace_s < 0:
        raise _Refused(
            "usage: supervisor.py --cwd DIR --timeout S --max-output N --grace S -- PROGRAM ARGS..."
        )
    return cwd, timeout_s, max_bytes, grace_s, fds, journaled, rest[1:]


SPARE_END = b"end"
"""Last field of a spare's job (:func:`spare`): a job cut short lacks it."""

_stop_asked = [False]
"""Set by SIGTERM/SIGINT/SIGHUP from the first instant (a list: set in a handler)."""


def _ask_stop(_signum: int, _frame: object) -> None:
    _stop_asked[0] = True


def _catch_signals() -> None:
    """First of all: a stop asked while starting is honoured, never a silent death."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _ask_stop)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)  # wakes select via the wakeup fd
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)


def spare() -> int:
    """Wait, started and imported, for one command, then run it as :func:`main` (§9).

    mind starts a spare ahead of need, with stdin a pipe, stdout and stderr
    ``/dev/null``, and an empty environment. The job is read from stdin to
    EOF: NUL-terminated fields — the effect directory, the number N of
    environment entries, N ``NAME=VALUE`` entries, :func:`main`'s arguments,
    then :data:`SPARE_END`. EOF without a whole job (mind ended or gave the
    spare up) ends it at once, having touched nothing. Otherwise it enters
    the directory, makes its ``supervisor.log`` stderr and ``/dev/null``
    stdin — no pipe to mind is left — takes the environment, and runs.
    """
    _catch_signals()
    job = bytearray()
    while chunk := os.read(0, 65536):
        job += chunk
    fields = bytes(job).split(b"\0")
    if len(fields) < 4 or fields[-2:] != [SPARE_END, b""] or not fields[1].isdigit():
        return REFUSED_EXIT  # no job: nothing was touched, nothing to record
    count = int(fields[1])
    env_fields, args = fields[2 : 2 + count], fields[2 + count : -2]
    try:
        os.chdir(fields[0])
        log = os.open("supervisor.log", os.O_WRONLY | os.O_APPEND | _OPEN_FLAGS)
        devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return REFUSED_EXIT  # mind's wait() reports an unrecorded end
    os.dup2(log, 2)
    os.dup2(devnull, 0)
    os.close(log)
    os.close(devnull)
    os.environ.clear()
    for entry in env_fields:
        name, _, value = entry.partition(b"=")
        os.environb[name] = value
    return main([os.fsdecode(arg) for arg in args])


def main(args: list[str]) -> int:
    """Run one command under supervision (module docstring): ends the
    process with status 0 once ``exit.json`` is durable (``os._exit``:
    no finalization), returns :data:`REFUSED_EXIT` when refused."""
    _catch_signals()
    try:
        cwd, timeout_s, max_bytes, grace_s, fds, journaled, argv = _parse(args)
        directory = _Directory()
        directory.lock()
        for used in (SUPERVISOR_FILE, EXIT_FILE, NEVER_STARTED_FILE, STDOUT_FILE):
            if directory.exists(used):
                raise _Refused(f"the effect directory was already used ({used} exists)")
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise _Refused(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")
    except (_Refused, OSError) as exc:
        print(f"mind supervisor: refused: {exc}", file=sys.stderr)
        return REFUSED_EXIT
    proof = _take_proof(libc)
    supervisor = _Supervisor(directory, timeout_s, max_bytes, grace_s)
    started_at_ms = _now_ms()
    record = {
        "version": FORMAT_VERSION,
        "pid": os.getpid(),
        "start_identity": start_identity(os.getpid()),
        "started_at_ms": started_at_ms,
        "timeout_s": timeout_s,
        "max_output_bytes": max_bytes,
    }
    sinks = (
        _Sink(directory.create(STDOUT_FILE), max_bytes),
        _Sink(directory.create(STDERR_FILE), max_bytes),
    )

    def announce() -> bool:
        """supervisor.json before the command may start — durable, unless
        mind journaled this supervisor before handing it the job
        (``--journaled 1``, §9.4); False when a stop was asked meanwhile
        (the command is then not started)."""
        directory.write_atomic(SUPERVISOR_FILE, _json(record).encode(), sync=not journaled)
        return not _stop_asked[0]

    outcome: dict[str, object] = {"start_error": None}
    outcome.update(_run(supervisor, sinks, cwd, fds, argv, announce))
    status = supervisor.status
    exit_code = signal_number = None
    if status is not None:
        if os.WIFSIGNALED(status):
            signal_number = os.WTERMSIG(status)
        else:
            exit_code = os.waitstatus_to_exitcode(status)
    outcome.update(
        {
            "version": FORMAT_VERSION,
            "exit_code": exit_code,
            "signal": signal_number,
            "timed_out": supervisor.timed_out,
            "timeout_s": timeout_s,
            "max_output_bytes": max_bytes,
            "killed": supervisor.killed,
            "leftovers_killed": supervisor.leftovers,
            "proof": proof,
            "started_at_ms": started_at_ms,
            "ended_at_ms": _now_ms(),
            "stdout": sinks[0].finish(),
            "stderr": sinks[1].finish(),
        }
    )
    streams = tuple(sink.fd for sink in sinks)
    directory.write_atomic(EXIT_FILE, _json(outcome).encode(), durable=streams)
    for fd in streams:
        os.close(fd)
    # The end is durable: end now. The interpreter's finalization (module
    # teardown, handlers restored) is ms every command would wait for, and
    # nothing is left to flush but the log.
    sys.stderr.flush()
    os._exit(0)


class _NotStarted(Exception):
    """A stop was asked before the command started: it was not started."""


def _run(
    supervisor: _Supervisor,
    sinks: tuple[_Sink, _Sink],
    cwd: str,
    fds: list[int],
    argv: list[str],
    announce: Callable[[], bool],
) -> dict[str, object]:
    """Start the command once ``announce`` allows it and supervise it to its
    end; a start failure is ``start_error`` (errno, message, whether the cwd
    was the cause), a stop asked before the start too (``killed``)."""
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    try:
        leader = _spawn(argv, cwd, fds, out_w, err_w, announce)
    except _NotStarted:
        for fd in (out_r, err_r):
            os.close(fd)
        supervisor.killed = True
        problem = {
            "errno": 0,
            "message": "stopped before the command started",
            "cwd": None,
            "program": argv[0],
        }
        return {"start_error": problem}
    except OSError as exc:
        for fd in (out_r, err_r):
            os.close(fd)
        problem = {
            "errno": exc.errno or 0,
            "message": exc.strerror or str(exc),
            "cwd": cwd if exc.filename == cwd else None,
            "program": argv[0],
        }
        return {"start_error": problem}
    finally:
        os.close(out_w)
        os.close(err_w)
        for fd in fds:
            try:
                os.close(fd)  # the command has it; a copy here would only leak
            except OSError:
                continue
    supervisor.leader = leader
    supervisor.run(sinks, (out_r, err_r))
    return {"pid": leader}


def _candidates(program: str) -> list[str]:
    """Where ``execvp`` would look for ``program``: itself when it names a
    path, else each ``PATH`` entry (``os.defpath`` when unset; an empty
    entry is the working directory). Computed before the fork: ``os.execvp``
    reads ``PATH`` through ``os.get_exec_path``, which imports ``warnings``
    in the child — ms every command would wait for."""
    if os.sep in program:
        return [program]
    path = os.environ.get("PATH", os.defpath)
    return [os.path.join(entry or os.curdir, program) for entry in path.split(os.pathsep)]


def _exec(programs: list[str], argv: list[str]) -> None:
    """``execvp``'s search over ``programs`` (:func:`_candidates`): the first
    that execs; a missing one (``ENOENT``, ``ENOTDIR``) is skipped, and when
    none execs the first other error is raised (else the last one)."""
    first: OSError | None = None
    last: OSError | None = None
    for program in programs:
        try:
            os.execv(program, argv)
        except OSError as exc:
            last = exc
            if exc.errno not in (errno.ENOENT, errno.ENOTDIR) and first is None:
                first = exc
    raise first or last or OSError(errno.ENOENT, "no program")


def _spawn(
    argv: list[str],
    cwd: str,
    fds: list[int],
    out_w: int,
    err_w: int,
    announce: Callable[[], bool],
) -> int:
    """fork + exec of the command (stdin ``/dev/null``, the pipes as stdout and
    stderr, ``fds`` inherited). Not ``subprocess``: importing it would double
    the supervisor's start, paid by every command; forking is safe here (one
    thread).

    The child is forked first and waits, set up, for a go byte; ``announce``
    (``supervisor.json`` made durable) runs meanwhile, so the fork overlaps
    the fsync and the command still starts only after it (§2.4, §9).

    Raises:
        _NotStarted: ``announce`` returned False; the child ended unexecuted.
        OSError: ``chdir`` (``filename`` = ``cwd``) or ``exec`` (``filename``
            = the program) failed in the child; the child is reaped.
    """
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    go_r, go_w = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    libc = ctypes.CDLL(None, use_errno=True)
    supervisor = os.getpid()
    programs = _candidates(argv[0])
    pid = os.fork()
    if pid == 0:  # the child: only async-signal-safe-minded steps, then exec
        stage = "exec"
        try:
            os.close(go_w)  # else its own copy would keep the pipe from EOF
            # A supervisor SIGKILLed takes the leader along (§2.5): a command
            # nothing supervises must not go on unseen.
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != supervisor:
                os._exit(127)  # it died before the signal was armed
            os.dup2(devnull, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in fds:
                os.set_inheritable(fd, True)
            # Ignored dispositions survive exec: the command gets the defaults.
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            if os.read(go_r, 1) != b"g":
                os._exit(127)  # no go (a stop, or the supervisor failed): never started
            stage = "chdir"
            os.chdir(cwd)
            stage = "exec"
            _exec(programs, argv)
        except OSError as exc:
            os.write(report_w, f"{stage}:{exc.errno or 0}".encode())
        finally:
            os._exit(127)
    os.close(report_w)
    os.close(go_r)
    os.close(devnull)
    try:
        go = announce()
        if go:
            os.write(go_w, b"g")
    except BaseException:
        os.close(go_w)
        os.close(report_r)
        os.waitpid(pid, 0)
        raise
    os.close(go_w)
    if not go:
        os.close(report_r)
        os.waitpid(pid, 0)
        raise _NotStarted()
    report = b""
    while chunk := os.read(report_r, 64):
        report += chunk
    os.close(report_r)
    if not report:
        return pid  # exec succeeded: the report pipe closed on exec
    os.waitpid(pid, 0)
    stage, _, number = report.decode().partition(":")
    code = int(number) if number.isdecimal() else 0
    raise OSError(code, os.strerror(code), cwd if stage == "chdir" else argv[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
