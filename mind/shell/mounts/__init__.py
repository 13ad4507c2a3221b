"""The session mount ledger: which live process hosts which sessions (docs/design/state.md;
docs/design/mounts.md).

Modules:

- :mod:`~mind.shell.mounts.ledger_file` — reading (strict / lenient) and
  atomically replacing ``session-mounts.json`` (rules 2, 6–8);
- :mod:`~mind.shell.mounts.lock` — ``session-mounts.lock``: creating it with
  an owner token, checking it is still ours, releasing it, reclaiming it
  from a dead holder (rules 3, 4);
- :mod:`~mind.shell.mounts.claims` — :class:`MountLedger`, which drives
  :mod:`mind.machines.mount` through a claim, publish and release (rules 1,
  5, 9); :mod:`~mind.shell.mounts.handle` — :class:`MountHandle`, one claim;
- :mod:`~mind.shell.mounts.republish` — :class:`RepublishTimer`.

Two files in the state root (``MIND_STATE_HOME``):

- ``session-mounts.json`` — ``{"version": 1, "owners": [{"pid", "startedAt",
  "sessionIds", "startIdentity"}]}`` (schema ``specs/schemas/session_mounts.schema.json``):
  every process publishes its mount set (hosted sessions ∪ claims in flight).
- ``session-mounts.lock`` — the cross-process lock, created exclusively
  (``O_CREAT | O_EXCL``) holding the token ``<pid>-<nonce>@<start identity>``
  (:func:`~mind.machines.mount.parse_token`).

This ledger is the same-machine *visibility* layer and the admission check
for mounting; the per-session lease (:mod:`mind.shell.lease`) stays the write
authority on the journal (docs/design/mounts.md §1).

Rules (docs/design/mounts.md), each kept by one function below:

1. Check and claim are one step (§3.4, §6.1): :meth:`MountLedger.claim` takes
   the lock, re-reads the file strictly, re-checks the conflict and writes its
   record, all before releasing the lock. A lock-free strict read first may
   refuse ``occupied`` early (a consistent snapshot naming a live holder); it
   never grants.
2. Atomic replace (§3.2): ``session-mounts.json.<pid>.<ms>.<seq>.tmp`` (0600)
   + fsync + rename; readers never see half a file.
3. A writer that lost its lock does not write (§3.2, §6.5): right before the
   tmp file is written and again right before the rename, the lock file must
   still be the very file this process created (same inode) holding its token;
   otherwise the commit is abandoned and the attempt counts as contended.
   Release deletes the lock only under the same check.
4. Only dead holders are reclaimed (§3.2, §6.5): a lock whose token names a
   live process (signal 0, EPERM alive, and the same start identity) is never
   taken, however old; an unreadable token is taken only after
   :data:`STALE_LOCK_S`. Tokens and records carry the writer's start identity
   (docs/design/state.md, beyond docs/design/mounts.md's accepted cost), so a pid reused by an
   unrelated process — or this mind's own pid after a container restart — no
   longer blocks anyone; old-format tokens and records (no identity) keep the
   pid-only rule. Reclaimers are serialised by an
   ``flock`` on the state directory itself (released by the kernel when its
   holder dies, so it never goes stale, and it adds no file): each re-reads
   the lock under it before moving it away, so two reclaimers can never both
   remove a lock, nor remove a live lock created after a dead one was taken.
5. Liveness has one witness, the process — pid plus start identity (§3.3,
   docs/design/state.md): no heartbeats. A record of a dead or reused pid is ignored when
   read and dropped at the next write.
6. No write on the read path (§3.3, §6.6): :meth:`MountLedger.holders` and
   :meth:`MountLedger.snapshot` read leniently (damaged -> empty) and never
   write; filtering happens in memory.
7. Strict read to grant (§3.4, §6.6): only a missing file means "empty"; a
   file that cannot be read, is not JSON, has another version or another
   shape makes the claim refuse ``unavailable`` with the detail, and the file
   is left byte-identical (a damaged record may be someone's only claim).
8. Permissions (§3.2): the state directory is created 0700, files 0600; a
   read-only directory is a loud ``unavailable`` refusal — never a fallback
   location (docs/design/state.md).
9. Published set = hosted sessions ∪ claims in flight (§3.4), republished by
   :meth:`MountLedger.republish` every :data:`PUBLISH_INTERVAL_S` (the caller
   schedules it, or uses :class:`RepublishTimer`, a daemon thread that never
   keeps the process alive — §4, §6.7); :meth:`MountLedger.close` (normal exit,
   including Ctrl+C) removes this process's record (§3.3).

Threads: one :class:`MountLedger` per process and state root; its methods
(and its handles') are serialised by an internal lock, so a republish timer
thread and the asyncio thread may call it concurrently. Calls block: at most
~1 s in :meth:`MountLedger.claim` under contention (bounded backoff), a few
file operations otherwise — call from a worker thread in async code.
"""

from __future__ import annotations

from mind.errors import MountHolder
from mind.shell.mounts.claims import PUBLISH_INTERVAL_S, MountHandle, MountLedger, OwnerRecord
from mind.shell.mounts.ledger_file import (
    LEDGER_NAME,
    MAX_LEDGER_BYTES,
    read_ledger_lenient,
    read_ledger_strict,
)
from mind.shell.mounts.lock import LOCK_NAME, STALE_LOCK_S, LedgerLock
from mind.shell.mounts.republish import RepublishTimer

__all__ = [
    "LEDGER_NAME",
    "LOCK_NAME",
    "MAX_LEDGER_BYTES",
    "PUBLISH_INTERVAL_S",
    "STALE_LOCK_S",
    "LedgerLock",
    "MountHandle",
    "MountHolder",
    "MountLedger",
    "OwnerRecord",
    "RepublishTimer",
    "read_ledger_lenient",
    "read_ledger_strict",
]
