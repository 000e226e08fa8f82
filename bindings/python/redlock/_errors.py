"""Statuses, node outcomes and the exception hierarchy, with the one status → class table."""

from __future__ import annotations

import enum
from typing import Dict, Optional, Type

__all__ = [
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
    "error_for_status",
]


class Status(enum.IntEnum):
    """``enum redlock_status``: the result of every fallible C function (stable numbers)."""

    OK = 0
    NOT_ACQUIRED = 1
    NOT_HELD = 2
    UNAVAILABLE = 3
    AUTH = 4
    CANCELLED = 5
    INVALID_ARGUMENT = 10
    NULL_ARGUMENT = 11
    INVALID_HANDLE = 12
    INTERNAL = 20
    PANIC = 99


class NodeOutcome(enum.IntEnum):
    """``enum redlock_node_outcome``: what happened on one node during an acquisition."""

    #: The node granted the lock.
    SUCCESS = 0
    #: The node answered that the key is held by another owner.
    REJECTED = 1
    #: Sent, but the quorum was reached before this node answered.
    PENDING = 2
    #: No answer within the per-node timeout.
    TIMEOUT = 3
    #: Connection refused, reset or closed.
    UNREACHABLE = 4
    #: Not contacted: waiting out a reconnect backoff after a recent failure.
    BACKOFF = 5
    #: The node answered with an error (``-ERR``, ``-WRONGPASS``, …).
    SERVER_ERROR = 6
    #: The node's answer was not valid RESP or not the expected reply.
    PROTOCOL = 7
    #: Not counted: the node may have lost keys it held (it restarted, or its keyspace was
    #: flushed) less than the manager's maximum TTL ago, or the manager has not decided yet
    #: (restart quarantine; :meth:`redlock.Redlock.node_states` says why).
    QUARANTINED = 8
    #: Not counted: the node is the same server (the same ``run_id``) as a lower-indexed node
    #: of the list, reached through another address.
    DUPLICATE = 9
    #: The TLS session with a ``rediss://`` node failed: its certificate is not trusted
    #: (another CA, expired, another name), it refused ours or wanted one this client lacks
    #: (mutual TLS), or it does not speak TLS.
    TLS = 10
    #: A failover group's (``redis+sentinel://``) master could not be found or confirmed: no
    #: sentinel answered, none knows the service, they disagree, or the server they name is
    #: not a master. The error's message says which.
    SENTINEL = 11
    #: A failover group granted, but fewer of its replicas acknowledged the grant in time than
    #: ``replica_acks`` asks for: it does not count (and was released).
    UNACKNOWLEDGED = 12


class QuarantineReason(enum.IntEnum):
    """``enum redlock_quarantine_reason``: why a node is in restart quarantine
    (:attr:`redlock.NodeState.reason`; stable numbers)."""

    #: Not in quarantine (or not heard from yet).
    NONE = 0
    #: No marker (``redlock-marker``) while other nodes have one, or its marker vanished: it
    #: restarted empty or its keyspace was flushed. Counted from when the loss was first seen.
    NO_MARKER = 1
    #: Its marker holds another ``run_id``: it restarted from disk (AOF or RDB), or it is a
    #: replica promoted after a failover (the marker replicated from the old master), possibly
    #: without the latest writes. Counted from when this manager first saw it so.
    STALE_MARKER = 2
    #: This manager saw its ``run_id`` change on a reconnect (a restart, or a failover behind
    #: the same address). Counted from when it saw the change.
    RESTART_SEEN = 3
    #: No node has a marker yet (a cluster meeting this library for the first time) and this
    #: node has been up for less than the maximum TTL, while others have been up longer.
    #: Counted from its start.
    YOUNG = 4
    #: No node has a marker yet and not every node has answered: a brand-new cluster is
    #: trusted once all of them have (or, at the latest, a maximum TTL after it was first seen).
    UNDECIDED = 5
    #: The server was promoted (a replica made master, a new replication history its marker
    #: does not know), possibly without its old master's last writes. Counted from when this
    #: manager first saw it so.
    PROMOTED = 6


class RedlockError(Exception):
    """Base class of every error the library reports.

    Attributes:
        status: the C ``redlock_status`` number (an ``int``; see :class:`Status`), or
            ``None`` for an error raised by this binding without a status.
        message: the library's message; for lock, unlock and extend it names every node's
            outcome (passwords never appear).
    """

    #: The status this class stands for (``None`` for the base class).
    default_status: Optional[int] = None

    def __init__(self, message: str = "", status: Optional[int] = None) -> None:
        if status is None:
            status = self.default_status
        super().__init__(message, status)
        self.message: str = message
        self.status: Optional[int] = status

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"


class NotAcquired(RedlockError):
    """The lock is held elsewhere (too few grants for a quorum, or none left in time).
    Retrying later may succeed. Status ``NOT_ACQUIRED`` (1)."""

    default_status = Status.NOT_ACQUIRED.value


class NotHeld(RedlockError):
    """Unlock or extend could not confirm ownership on a quorum: the lock expired, was already
    unlocked, or was taken over. Assume it is no longer held. Status ``NOT_HELD`` (2)."""

    default_status = Status.NOT_HELD.value


class Unavailable(RedlockError):
    """Too many nodes failed (timeouts, refused connections, errors) or were in restart
    quarantine for a quorum to be possible; the message names each node's outcome (a
    quarantined node's says ``in restart quarantine for another … s`` and why, e.g. ``(no
    marker: it restarted empty or its data was flushed, or it is new: …)``). Status ``UNAVAILABLE`` (3)."""

    default_status = Status.UNAVAILABLE.value


class AuthFailed(Unavailable):
    """A quorum was out of reach because nodes refused this client's credentials (a wrong
    password or user, a password missing, an ACL user without the needed permissions:
    ``WRONGPASS``, ``NOAUTH``, ``NOPERM``): had they answered, a quorum would have been
    possible. The message names each node's outcome (``authentication failed: …``; never the
    password). Fix the node URLs or the ACLs. Also an :class:`Unavailable`, so code that
    handles that handles this too. Status ``AUTH`` (4)."""

    default_status = Status.AUTH.value


class Cancelled(RedlockError):
    """The acquisition was cancelled through the :class:`~redlock.Cancel` handle passed as
    ``cancel=``: it was fired (from another thread, say) while the acquisition ran, or had
    fired before, in which case no node was contacted. No key was left behind. (A
    ``KeyboardInterrupt`` that ends a wait is re-raised as itself, not as this; it fires the
    handle, though, so later acquisitions with that handle raise this.) Status ``CANCELLED``
    (5)."""

    default_status = Status.CANCELLED.value


class InvalidArgument(RedlockError, ValueError):
    """Bad input (a malformed URL, a TTL out of range, an empty resource, …); nothing was
    sent. Also a :class:`ValueError`. Status ``INVALID_ARGUMENT`` (10)."""

    default_status = Status.INVALID_ARGUMENT.value


class NullArgument(RedlockError):
    """The C library was given a NULL pointer. Status ``NULL_ARGUMENT`` (11)."""

    default_status = Status.NULL_ARGUMENT.value


class HandleClosed(NullArgument):
    """The :class:`~redlock.Redlock` manager or :class:`~redlock.Lease` was closed (its C
    handle is freed), so it cannot be used any more. Raised by the binding before any C call;
    its status is ``NULL_ARGUMENT`` (11), what C answers for the NULL pointer the closed object
    holds (never :class:`InvalidHandle`: the freed pointer is not passed on)."""


class InvalidHandle(RedlockError):
    """The C library was given a handle that is not a live handle of its type: freed already,
    or never one. This binding never passes such a handle (it raises :class:`HandleClosed`
    before any C call on a closed object), so seeing this means a bug; the library's check is
    best effort, not a guarantee. Status ``INVALID_HANDLE`` (12)."""

    default_status = Status.INVALID_HANDLE.value


class Internal(RedlockError):
    """An operating-system facility failed (random source, ``poll(2)``). Status
    ``INTERNAL`` (20)."""

    default_status = Status.INTERNAL.value


class Panic(RedlockError):
    """A bug: the library panicked. The panic was caught; the process is intact. Status
    ``PANIC`` (99)."""

    default_status = Status.PANIC.value


#: The one table mapping a C status to its exception class.
STATUS_EXCEPTIONS: Dict[int, Type[RedlockError]] = {
    Status.NOT_ACQUIRED: NotAcquired,
    Status.NOT_HELD: NotHeld,
    Status.UNAVAILABLE: Unavailable,
    Status.AUTH: AuthFailed,
    Status.CANCELLED: Cancelled,
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.NULL_ARGUMENT: NullArgument,
    Status.INVALID_HANDLE: InvalidHandle,
    Status.INTERNAL: Internal,
    Status.PANIC: Panic,
}


def error_for_status(status: int, message: str) -> RedlockError:
    """The exception for a non-OK ``status`` (:class:`RedlockError` for an unknown number)."""
    cls = STATUS_EXCEPTIONS.get(status, RedlockError)
    if not message:
        message = f"redlock status {status}"
    return cls(message, status)
