"""Who holds a resource: the snapshot :meth:`redlock.Redlock.holders` returns.

Plain data, read in full from a ``redlock_holders`` snapshot (``include/redlock.h``) before
the C object is freed: nothing here holds a C handle or does I/O.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Optional, Tuple

__all__ = ["HoldState", "HolderKind", "Holder", "NodeHold", "Holders"]


class HoldState(enum.IntEnum):
    """``enum redlock_hold_state``: what one node has under the resource's key (stable
    numbers)."""

    #: No key: the resource is free on this node.
    FREE = 0
    #: A key is there (see :class:`HolderKind` for whose).
    HELD = 1
    #: The node could not be asked (down, timed out, an error).
    FAILED = 2


class HolderKind(enum.IntEnum):
    """``enum redlock_holder_kind``: what kind of key holds the resource (stable numbers)."""

    #: Not held (the node's state is ``FREE`` or ``FAILED``).
    NONE = 0
    #: A plain lock of this library: its id is the lock's value (:attr:`redlock.Lease.value`),
    #: its label the label of the manager that took it.
    LOCK = 1
    #: A reentrant lock of this library (``owner=``): its id and label are the owner id.
    REENTRANT = 2
    #: Another key: another library's lock (redsync's, node-redlock's, under the same name
    #: with ``key_prefix=""``), a value in an older format, or a key that is not a lock. Its
    #: id is the value if it is a string (empty otherwise). It still excludes this library's
    #: locks on that node.
    OTHER = 3
    #: Shared (read) locks of this library (``shared=True``): one key holding every shared
    #: holder's hold. Its id is empty (``b""``) and it has no label; ``held_for_ms`` counts from
    #: when the first of the overlapping holders took it.
    SHARED = 4


class Holder(NamedTuple):
    """Who holds a resource: on one node (the fields of a :class:`NodeHold`), or on a quorum
    (:attr:`Holders.holder`)."""

    #: What kind of key it is (:class:`HolderKind`).
    kind: HolderKind
    #: The holder's identity, as stored: a plain lock's whole value (equal to
    #: ``lease.value.encode()`` of the :class:`~redlock.Lease` that holds it, the same on every
    #: node), a reentrant lock's owner id, another string key's value; ``b""`` for shared
    #: locks.
    id: bytes
    #: A person-readable name: the ``label`` of the manager that took a plain lock, the owner
    #: id of a reentrant one (decoded as UTF-8, invalid bytes replaced); ``None`` when there is
    #: none (a lock taken without a label, another kind of key).
    label: Optional[str]
    #: The key's remaining TTL in milliseconds; for the quorum's holder, how long it stays on a
    #: quorum unless renewed (the quorum-th longest TTL among the nodes that hold it). ``None``
    #: when the key has no expiry.
    ttl_ms: Optional[int]
    #: How long it has been held, in milliseconds: a reentrant lock's tenure on the node's own
    #: clock; a plain lock's since the holder's wall clock said its attempt started, read
    #: against the node's clock (so off by as much as those clocks disagree; never negative).
    #: For the quorum's holder, the longest among its nodes. ``None`` when unknown (another
    #: kind of key).
    held_for_ms: Optional[int]


class NodeHold(NamedTuple):
    """What one node answered (:attr:`Holders.nodes`). ``kind``, ``id``, ``label``,
    ``ttl_ms`` and ``held_for_ms`` are those of :class:`Holder` when ``state`` is ``HELD``;
    otherwise ``HolderKind.NONE``, ``b""`` and ``None``."""

    #: The node's position in the manager's node list, from 0.
    index: int
    #: ``FREE``, ``HELD`` or ``FAILED`` (:class:`HoldState`).
    state: HoldState
    #: What kind of key holds the resource on this node.
    kind: HolderKind
    #: The holder's identity on this node (see :attr:`Holder.id`).
    id: bytes
    #: The holder's label on this node (see :attr:`Holder.label`).
    label: Optional[str]
    #: The key's remaining TTL on this node, in milliseconds; ``None`` when not held or when
    #: the key has no expiry.
    ttl_ms: Optional[int]
    #: How long it has been held, in milliseconds (see :attr:`Holder.held_for_ms`); ``None``
    #: when unknown or not held.
    held_for_ms: Optional[int]

    @property
    def holder(self) -> Optional[Holder]:
        """This node's holder as a :class:`Holder`, or ``None`` unless ``HELD``."""
        if self.state != HoldState.HELD:
            return None
        return Holder(self.kind, self.id, self.label, self.ttl_ms, self.held_for_ms)


class Holders(NamedTuple):
    """A snapshot of who held a resource on each node, from :meth:`redlock.Redlock.holders`.

    For people and monitoring, never a reason to act: the holder can change as soon as it is
    read, and a holder found on a quorum can lose its lease just after (take the lock to act
    safely)."""

    #: The resource asked about, as bytes (a ``str`` resource is its UTF-8 encoding).
    resource: bytes
    #: How many nodes make a quorum (N // 2 + 1).
    quorum: int
    #: Each node's answer, in configuration order (one per node).
    nodes: Tuple[NodeHold, ...]
    #: The holder found on at least a quorum of nodes (the same kind and identity), or
    #: ``None``: then the resource was not locked when it was read.
    holder: Optional[Holder]

    @property
    def is_locked(self) -> bool:
        """Whether one holder was on a quorum of nodes: the resource was locked when read."""
        return self.holder is not None

    @property
    def held_on(self) -> int:
        """How many nodes held some key for the resource, whoever's it was."""
        return sum(1 for n in self.nodes if n.state == HoldState.HELD)

    @property
    def failed(self) -> int:
        """How many nodes could not be asked."""
        return sum(1 for n in self.nodes if n.state == HoldState.FAILED)
