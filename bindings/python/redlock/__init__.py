"""Redlock: a distributed lock over N independent Redis masters (quorum N/2+1).

A thin :mod:`ctypes` binding of the Rust library's C ABI (``include/redlock.h``): every lock,
unlock and extend runs in the library; nothing of the algorithm is re-implemented here.

Example::

    import redlock

    with redlock.Redlock(["redis://127.0.0.1:7001", "redis://127.0.0.1:7002",
                          "redis://127.0.0.1:7003"], retry_count=3, retry_delay_ms=200) as mgr:
        with mgr.lock("orders:42", ttl_ms=10_000) as lk:   # retries; unlocks when the block ends
            lk.validity_ms                                  # remaining validity, 0 once expired
            lk.extend(10_000)
        lk = mgr.try_lock(b"orders:43", ttl_ms=5_000)       # one attempt
        lk.unlock()
        lk.close()
        with mgr.lock("account:7", ttl_ms=5_000, fenced=True) as lk:
            lk.fencing_token                                # int, larger than every earlier one
        with mgr.acquire("job:9", 5_000, wait_ms=2_000, auto_renew=True) as lk:
            lk.renewing                                     # True: renewed from the grant on
        with redlock.Cancel() as cancel:                    # cancel.fire() from any thread
            lk = mgr.lock("job:10", 5_000, wait_ms=30_000, cancel=cancel)  # or: Cancelled
            lk.unlock()                                     # (a wait is woken by the release)
        mgr.node_states()           # [NodeState(index, quarantined, remaining_ms, reason)]
        mgr.metrics()               # Prometheus text
        h = mgr.holders("job:9")    # who holds it: h.is_locked, h.holder (label, held_for_ms,
                                    # ttl_ms, id), h.nodes (per node: state, kind, id, label)
        with mgr.lock("report:1", 5_000, shared=True) as lk:    # a read lock: many at once
            lk.is_shared                                        # True
        with mgr.acquire_many(["acct:1", "acct:2"], 5_000, wait_ms=2_000) as lk:
            lk.resources                                        # [b"acct:1", b"acct:2"]: all
                                                                # held, or none
        exports = mgr.semaphore("exports", 4)                   # at most 4 holders at once
        with exports.lock(60_000, wait_ms=30_000) as lk:        # one permit; waits for a
            lk.permit                                           # release: (slot, 4)
        with mgr.lock("printer", 5_000, wait_ms=30_000, fair=True) as lk:  # first come,
            lk.ticket                   # first served: its place in the queue (None: no wait)
        with mgr.election("scheduler").campaign(b"10.0.0.7:80", 10_000) as leadership:
            leadership.term             # leading (renewed) until the block ends: resigns

    # A label names this process in every lock it takes (``holders`` shows it); the empty key
    # prefix shares redsync's and node-redlock's keys (the resource name itself) in a migration.
    redlock.Redlock(["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"],
                    label="web-1:4242", key_prefix="")

    async def job(mgr):             # asyncio: the blocking calls run off the event loop
        async with mgr.alock("job:11", 5_000, wait_ms=30_000) as lk:   # cancelling the
            ...                     # task while it waits leaves no key behind

A wait (``wait_ms``) is woken by the holder's release (``notify=False``: polling instead). On
the main thread, a Ctrl-C during a waiting acquisition raises ``KeyboardInterrupt`` at once,
and leaves no key behind.

Restart quarantine is on by default: a node that may have lost the keys it held (it
restarted, or its keyspace was flushed, as its marker key ``redlock-marker`` tells) does not
count toward a quorum for the manager's ``max_ttl_ms`` (default 60 s), and
:attr:`NodeState.reason` says why (:class:`QuarantineReason`). A brand-new cluster counts at
once: the first lock on freshly started nodes succeeds. ``restart_quarantine=False`` is only
for nodes that persist every write (``appendfsync always``).

The shared library is found through ``REDLOCK_LIB``, a copy inside this package, the
repository's ``target/release`` then ``target/debug``, then the system's library search; it is
loaded on first use (:func:`library_path` says which file was loaded).
"""

from __future__ import annotations

from typing import Any

from ._args import Resource
from ._cancel import Cancel
from ._core import version
from ._inspect import NodeState
from ._lease import Lease
from ._manager import Redlock
from ._semaphore import Semaphore
from ._election import AsyncCampaign, Campaign, Election, Leader, Leadership
from ._errors import (
    STATUS_EXCEPTIONS,
    AuthFailed,
    Cancelled,
    HandleClosed,
    Internal,
    InvalidArgument,
    InvalidHandle,
    NodeOutcome,
    NotAcquired,
    NotHeld,
    NullArgument,
    Panic,
    QuarantineReason,
    RedlockError,
    Status,
    Unavailable,
)
from ._ffi import (
    DEFAULT_DROP_OUT_MS,
    MAX_DROP_OUT_MS,
    MAX_KEY_PREFIX_LEN,
    MAX_LABEL_LEN,
    MAX_LEADER_VALUE,
    MAX_PERMITS,
    MAX_RESOURCE_LEN,
    MAX_RESOURCES,
    MIN_DROP_OUT_MS,
    LibraryNotFoundError,
    library_path,
)
from ._holders import Holder, HolderKind, Holders, HoldState, NodeHold

# Public classes present themselves as ``redlock.X`` (tracebacks, reprs, pickling).
for _cls in (
    Redlock,
    Lease,
    Semaphore,
    Election,
    Leadership,
    Leader,
    Campaign,
    AsyncCampaign,
    Cancel,
    NodeState,
    Holders,
    Holder,
    NodeHold,
    HoldState,
    HolderKind,
    Status,
    NodeOutcome,
    QuarantineReason,
    RedlockError,
    NotAcquired,
    NotHeld,
    Unavailable,
    AuthFailed,
    Cancelled,
    InvalidArgument,
    NullArgument,
    HandleClosed,
    InvalidHandle,
    Internal,
    Panic,
    LibraryNotFoundError,
):
    _cls.__module__ = __name__
del _cls

#: The largest TTL (and wait) in milliseconds, ``REDLOCK_MAX_TTL_MS`` (``2**32 - 1``).
MAX_TTL_MS = 2**32 - 1

__all__ = [
    "Redlock",
    "Lease",
    "Semaphore",
    "Election",
    "Leadership",
    "Leader",
    "Campaign",
    "AsyncCampaign",
    "Cancel",
    "NodeState",
    "Holders",
    "Holder",
    "NodeHold",
    "HoldState",
    "HolderKind",
    "Resource",
    "AsyncLock",
    "Status",
    "NodeOutcome",
    "QuarantineReason",
    "RedlockError",
    "NotAcquired",
    "NotHeld",
    "Unavailable",
    "AuthFailed",
    "Cancelled",
    "InvalidArgument",
    "NullArgument",
    "HandleClosed",
    "InvalidHandle",
    "Internal",
    "Panic",
    "STATUS_EXCEPTIONS",
    "LibraryNotFoundError",
    "MAX_RESOURCE_LEN",
    "MAX_RESOURCES",
    "MAX_PERMITS",
    "MAX_LEADER_VALUE",
    "MAX_TTL_MS",
    "MAX_LABEL_LEN",
    "MAX_KEY_PREFIX_LEN",
    "DEFAULT_DROP_OUT_MS",
    "MIN_DROP_OUT_MS",
    "MAX_DROP_OUT_MS",
    "library_path",
    "version",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # ``__version__`` is the loaded library's ``redlock_version()``; it is read on first
    # access so that importing the package never fails for want of the library.
    if name == "__version__":
        value = version()
        globals()["__version__"] = value
        return value
    if name == "AsyncLock":
        # What ``Redlock.alock`` returns; its module imports asyncio, so only on demand.
        from ._aio import AsyncLock

        AsyncLock.__module__ = __name__
        globals()["AsyncLock"] = AsyncLock
        return AsyncLock
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> "list[str]":
    return sorted(set(globals()) | {"__version__", "AsyncLock"})
