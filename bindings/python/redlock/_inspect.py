"""What a manager reports without taking anything: its nodes' standing
(:class:`NodeState`), who holds a resource (:class:`~redlock.Holders`), and its metrics."""

from __future__ import annotations

import ctypes
from typing import Any, List, NamedTuple, Optional

from . import _core, _ffi
from ._args import _resource
from ._core import _check, _err_buf, _raise
from ._errors import InvalidArgument, QuarantineReason, RedlockError
from ._handle import _Handle
from ._holders import HolderKind, Holders, HoldState, NodeHold

#: The first buffer size tried for :meth:`Redlock.metrics` (then the last text's size plus
#: headroom, so that a scrape is normally one C call).
_METRICS_FIRST_LEN = 16384

_byref = ctypes.byref

# QuarantineReason members by value.
_REASONS = {r.value: r for r in QuarantineReason}


class NodeState(NamedTuple):
    """What a :class:`Redlock` manager knows of one node now (:meth:`Redlock.node_states`)."""

    #: The node's position in the manager's node list, from 0.
    index: int
    #: True while the node is in restart quarantine: its grants do not count toward a quorum
    #: (it may have lost keys it held, or the manager has not decided yet; see ``reason``).
    #: False for a trusted node and for a node not heard from yet.
    quarantined: bool
    #: How much longer it stays in quarantine at most, in milliseconds (0 when not
    #: quarantined). A quarantine whose time is up ends at the next acquisition.
    remaining_ms: int
    #: Why it is quarantined (:class:`QuarantineReason`); ``QuarantineReason.NONE`` when not.
    reason: QuarantineReason = QuarantineReason.NONE


def _reason(value: int) -> QuarantineReason:
    # A newer library may report a reason this package does not know: kept as an int.
    return _REASONS.get(value, value)  # type: ignore[return-value]


# HoldState and HolderKind members by value.
_HOLD_STATES = {v.value: v for v in HoldState}
_HOLDER_KINDS = {v.value: v for v in HolderKind}


def _node_hold(p: Any, index: int) -> NodeHold:
    """Node ``index``'s answer in the snapshot ``p`` (or the quorum's, for
    ``HOLDERS_QUORUM``; its ``index`` is then -1), read in full."""
    c = _core._c
    info = _ffi.HolderInfo()
    err = _err_buf()
    _check(c.redlock_holders_info(p, index, _byref(info), err, _ffi.ERR_LEN), err)
    # A newer library may report a state or kind this package does not know: kept as an int.
    state = _HOLD_STATES.get(info.state, info.state)
    kind = _HOLDER_KINDS.get(info.kind, info.kind)
    # snprintf-like sizing calls: the snapshot is immutable, so the second call fits.
    label: Optional[str] = None
    n = c.redlock_holders_label(p, index, None, 0)
    if n:
        buf = ctypes.create_string_buffer(n + 1)
        c.redlock_holders_label(p, index, buf, n + 1)
        label = buf.raw[:n].decode("utf-8", "replace")
    ident = b""
    n = c.redlock_holders_id(p, index, None, 0)
    if n:
        arr = (ctypes.c_uint8 * n)()
        c.redlock_holders_id(p, index, arr, n)
        ident = bytes(arr)
    return NodeHold(
        -1 if index == _ffi.HOLDERS_QUORUM else index,
        state,  # type: ignore[arg-type]
        kind,  # type: ignore[arg-type]
        ident,
        label,
        None if info.ttl_ms < 0 else int(info.ttl_ms),
        None if info.held_for_ms < 0 else int(info.held_for_ms),
    )


def admit_new_nodes(mgr: Any, nodes: List[int]) -> None:
    """:meth:`Redlock.admit_new_nodes` of the manager ``mgr``."""
    for i in nodes:
        if isinstance(i, bool) or not isinstance(i, int) or i < 0:
            raise InvalidArgument(f"nodes: {i!r} is not a node index (0 for the first node)")
    arr = (ctypes.c_size_t * max(len(nodes), 1))(*nodes)
    err = _err_buf()
    h = mgr._handle
    m = h.acquire()
    try:
        _check(_core._c.redlock_manager_admit_new_nodes(m, arr, len(nodes), err, _ffi.ERR_LEN), err)
    finally:
        h.release()


def node_states(mgr: Any) -> List[NodeState]:
    """:meth:`Redlock.node_states` of the manager ``mgr``."""
    quarantined = ctypes.c_bool()
    remaining = ctypes.c_uint32()
    q_ref, r_ref = _byref(quarantined), _byref(remaining)
    err = _err_buf()
    states: List[NodeState] = []
    h = mgr._handle
    m = h.acquire()
    try:
        state = _core._c.redlock_manager_node_state
        why = _core._c.redlock_manager_node_quarantine_reason
        for i in range(mgr._node_count):
            # Two C calls: re-read when an acquisition on another thread changed the
            # node's standing between them (bounded; the last reading wins).
            for _ in range(4):
                before = why(m, i)
                st = state(m, i, q_ref, r_ref, err, _ffi.ERR_LEN)
                if st:
                    _raise(st, err)
                reason = why(m, i)
                q = bool(quarantined.value)
                if reason == before and q == (reason != 0):
                    break
            if not q:
                reason = 0
            states.append(NodeState(i, q, int(remaining.value), _reason(reason)))
    finally:
        h.release()
    return states


def holders(mgr: Any, resource: Any) -> Holders:
    """:meth:`Redlock.holders` of the manager ``mgr``."""
    res = resource if type(resource) is bytes else _resource(resource)
    c = _core._c
    # As for a lease: the library writes the snapshot's pointer straight into its owner,
    # so it is freed once whatever happens (an exception during the reads below included).
    snap = _Handle(_ffi.HoldersPtr(), c.redlock_holders_free, "holders snapshot")
    err = _err_buf()
    h = mgr._handle
    m = h.acquire()
    try:
        st = c.redlock_holders_get(m, res, len(res), _byref(snap._ptr), err, _ffi.ERR_LEN)
    finally:
        h.release()
    if st:
        snap._freed = True  # nothing was written: nothing to free
        _raise(st, err)
    try:
        p = snap._ptr
        count = int(c.redlock_holders_node_count(p))
        nodes = tuple(_node_hold(p, i) for i in range(count))
        quorum = _node_hold(p, _ffi.HOLDERS_QUORUM)
        holder = quorum.holder
        if holder is None and c.redlock_holders_is_locked(p):  # not expected
            raise RedlockError("redlock_holders_is_locked disagrees with the quorum's holder")
    finally:
        snap.close()
    return Holders(res, mgr._quorum, nodes, holder)


def metrics(mgr: Any) -> str:
    """:meth:`Redlock.metrics` of the manager ``mgr``."""
    h = mgr._handle
    m = h.acquire()
    try:
        metrics = _core._c.redlock_manager_metrics
        cap = mgr._metrics_len
        # snprintf-style: a return value >= cap means the text was cut short. The text can
        # grow between two calls (other threads count meanwhile), hence the headroom.
        for _ in range(8):
            buf = ctypes.create_string_buffer(cap)
            n = metrics(m, buf, cap)
            if n < cap:
                mgr._metrics_len = max(_METRICS_FIRST_LEN, n + n // 4 + 1)
                return buf.raw[:n].decode("utf-8", "replace")
            cap = n + n // 4 + 1
        raise RedlockError("redlock_manager_metrics kept growing")  # not expected
    finally:
        h.release()

