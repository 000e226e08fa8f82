"""The public classes, :class:`Redlock` and :class:`Lease`, over the C handles."""

from __future__ import annotations

import ctypes
import math
import threading
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    List,
    NamedTuple,
    Optional,
    Tuple,
    Type,
)

from . import _ffi
from ._errors import (
    HandleClosed,
    InvalidArgument,
    QuarantineReason,
    RedlockError,
    error_for_status,
)
from ._args import (
    Resource,
    _fair,
    _many,
    _Many,
    _OptsKey,
    _owner,
    _permits,
    _renewal,
    _resource,
    _resource_list,
    _Sem,
    _semaphore_name,
    _Target,
    _ttl,
    _u32,
)
from ._cancel import Cancel, _cancel_hold
from ._config import (
    _DEFAULT_CONNECT_TIMEOUT_MS,
    _DEFAULT_RETRY_COUNT,
    _DEFAULT_RETRY_DELAY_MS,
    PathArg,
    _key_prefix,
    _label,
    _tls_options,
    _url,
)
from ._handle import _Handle, _Process
from ._holders import HolderKind, Holders, HoldState, NodeHold
from ._threads import _WAIT_SLICE_S, _Call, _hand_over

if TYPE_CHECKING:  # redlock._aio imports asyncio, on first use only
    from ._aio import AsyncLock

__all__ = ["Redlock", "Lease", "Semaphore", "Cancel", "NodeState", "Resource", "version"]


#: The first buffer size tried for :meth:`Redlock.metrics` (then the last text's size plus
#: headroom, so that a scrape is normally one C call).
_METRICS_FIRST_LEN = 16384


# ``redlock_lock_opts`` flags (include/redlock.h). The binding itself acquires through
# ``redlock_acquire`` and its options objects; these mirror the header (tests/test_ffi.py).
LOCK_FENCED = 1
LOCK_ONCE = 2
LOCK_WAIT = 4

#: How many ``redlock_acquire_opts`` objects a manager keeps, one per distinct combination of
#: ``(wait_ms, fenced, auto-renewal bounds, notify, shared, fair)`` it was asked for.
#: ``try_lock``, and ``lock`` without ``wait_ms``, need four at most; a program that passes
#: ever new ``wait_ms`` values fills the rest, after which each new combination gets an
#: options object made and freed around its one call.
_OPTS_CACHE_MAX = 64

_UINT32_MAX = _ffi.UINT32_MAX
_byref = ctypes.byref

# The loaded library, set by the first Redlock or Cancel (every Lease comes from a Redlock):
# the hot paths read a module global instead of calling ``_ffi.lib()``.
_c: Any = None


# One reusable error buffer per thread: C writes a NUL-terminated message into it on every
# failure (and only then is it read, right after the call, on the same thread).
_tls = threading.local()


def load() -> Any:
    """Loads the library (once) and keeps it as ``_c``; returns it."""
    global _c
    c = _c = _ffi.lib()
    return c


def _err_buf() -> "ctypes.Array[ctypes.c_char]":
    try:
        return _tls.err
    except AttributeError:
        buf = _tls.err = _ffi.err_buffer()
        return buf


def version() -> str:
    """The version of the loaded C library (``redlock_version()``), e.g. ``"0.1.0"``."""
    raw = _ffi.lib().redlock_version()
    return raw.decode("ascii") if raw else ""


def _check(status: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    """Raises the exception for a non-OK status, with the message from ``err``."""
    if status:
        _raise(status, err)


def _check_status(status: int) -> None:
    """Raises the exception for a non-OK status of a function without an error buffer."""
    if status:
        raw = _ffi.lib().redlock_status_str(status)
        message = raw.decode("utf-8", "replace") if raw else f"redlock status {status}"
        raise error_for_status(status, message)


def _raise(status: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    """Raises the exception for the non-OK ``status``, with the message from ``err``."""
    message = _ffi.err_text(err)
    if not message:
        raw = _ffi.lib().redlock_status_str(status)
        message = raw.decode("utf-8", "replace") if raw else f"redlock status {status}"
    raise error_for_status(status, message)


def _acquire_args(
    m: Any,
    res: bytes,
    ttl_ms: int,
    opts: Any,
    lease_h: "_Handle",
    err: Any,
    target: Optional[_Target],
) -> Tuple[Any, Tuple[Any, ...]]:
    """The C function and arguments of one acquisition: ``redlock_acquire`` of ``res``,
    ``redlock_acquire_many`` of a :class:`_Many`'s resources, or ``redlock_semaphore_acquire``
    of a :class:`_Sem`'s permit. The error buffer is the last but one."""
    if target is None:
        return _c.redlock_acquire, (
            m, res, len(res), ttl_ms, opts, _byref(lease_h._ptr), err, _ffi.ERR_LEN
        )  # fmt: skip
    if type(target) is _Sem:
        return _c.redlock_semaphore_acquire, (
            m, target.name, len(target.name), target.permits, ttl_ms, opts,
            _byref(lease_h._ptr), err, _ffi.ERR_LEN,
        )  # fmt: skip
    return _c.redlock_acquire_many, (
        m, target.ptrs, target.lens, len(target.resources), ttl_ms, opts, _byref(lease_h._ptr),
        err, _ffi.ERR_LEN,
    )  # fmt: skip


def _many_key(
    resources: object,
    ttl_ms: object,
    wait_ms: object,
    auto_renew: object,
    max_hold_ms: object,
    max_extensions: object,
    cancel: object,
) -> Tuple[_Many, int, _OptsKey]:
    """The checks of :meth:`Redlock.acquire_many` (raised before anything is sent):
    ``(resources and their C arrays, ttl_ms, options key)``. The key is that of an exclusive,
    unfenced, unfair acquisition without an owner (all the library allows for a set); ``notify`` is
    ``True``, as a set's waits poll whatever it says."""
    names = _resource_list(resources)
    ttl = _ttl("ttl_ms", ttl_ms)
    wait = None if wait_ms is None else _u32("wait_ms", wait_ms)
    renew = _renewal(auto_renew, max_hold_ms, max_extensions)
    if cancel is not None and not isinstance(cancel, Cancel):
        raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
    return _many(names), ttl, (wait, False, renew, True, None, False, None)


def _permit_key(
    ttl_ms: object,
    wait_ms: object,
    fenced: object,
    auto_renew: object,
    max_hold_ms: object,
    max_extensions: object,
    notify: object,
    cancel: object,
) -> Tuple[int, _OptsKey]:
    """The checks of :meth:`Semaphore.acquire` (raised before anything is sent): ``(ttl_ms,
    options key)``. The key is that of an acquisition without an owner, exclusive and unfair (a
    permit is neither reentrant, shared nor fair), so a semaphore shares the manager's cached
    options objects with its locks."""
    ttl = _ttl("ttl_ms", ttl_ms)
    wait = None if wait_ms is None else _u32("wait_ms", wait_ms)
    if fenced is not True and fenced is not False:
        raise TypeError(f"fenced must be a bool, not {type(fenced).__name__}")
    renew = _renewal(auto_renew, max_hold_ms, max_extensions)
    if notify is not True and notify is not False:
        raise TypeError(f"notify must be a bool, not {type(notify).__name__}")
    if cancel is not None and not isinstance(cancel, Cancel):
        raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
    # ``notify`` only applies to a ``wait_ms`` wait: one key for the others.
    return ttl, (wait, fenced, renew, notify or not wait, None, False, None)



# Imported after the helpers above, which it imports from this module (until the manager
# leaves it too).
from ._lease import Lease  # noqa: E402


# ---- acquisition options: immutable redlock_acquire_opts objects owned by a manager ----


def _new_opts(key: _OptsKey, cancel: Any = None) -> Any:
    """A new ``redlock_acquire_opts`` set to ``key`` (and cancellable through the C handle
    ``cancel``, if given); the caller owns (and frees) it."""
    wait_ms, fenced, renew, notify, owner, shared, fair = key
    c = _c
    opts = c.redlock_acquire_opts_new()
    if not opts:
        raise MemoryError("redlock_acquire_opts_new returned NULL")
    try:
        # The defaults are the manager's retry policy, no fencing token, no renewal, waits
        # woken by releases, an exclusive lock, not fair, no cancel handle.
        if wait_ms is not None:
            _check_status(c.redlock_acquire_opts_set_wait_ms(opts, wait_ms))
        if fenced:
            _check_status(c.redlock_acquire_opts_set_fenced(opts, True))
        if renew is not None:
            _check_status(c.redlock_acquire_opts_set_auto_renew(opts, renew[0], renew[1]))
        if not notify:
            _check_status(c.redlock_acquire_opts_set_notify(opts, False))
        if owner is not None:
            _check_status(c.redlock_acquire_opts_set_owner(opts, owner, len(owner)))
        if shared:
            _check_status(c.redlock_acquire_opts_set_shared(opts, True))
        if fair is not None:
            _check_status(c.redlock_acquire_opts_set_fair(opts, True))
            if fair:
                _check_status(c.redlock_acquire_opts_set_drop_out_ms(opts, fair))
        if cancel is not None:
            _check_status(c.redlock_acquire_opts_set_cancel(opts, cancel))
    except BaseException:
        c.redlock_acquire_opts_free(opts)
        raise
    return opts


def _manager_free(opts: Dict[_OptsKey, Any]) -> Callable[[Any], None]:
    """The free function of a manager's handle: frees the manager, then the options objects
    it cached. It runs once no call is in progress on the manager (see :class:`_Handle`), and
    every use of a cached options object is inside such a call, so none is freed under a
    ``redlock_acquire`` that reads it. Takes no lock (it may run as a finalizer)."""
    free_manager = _c.redlock_manager_free
    free_opts = _c.redlock_acquire_opts_free

    def free(ptr: Any) -> None:
        try:
            free_manager(ptr)
        finally:
            while opts:
                free_opts(opts.popitem()[1])

    return free


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
    c = _c
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


class Redlock:
    """A lock manager over N independent Redis masters (quorum N/2+1).

    Args:
        nodes: the Redis masters, each ``redis://[user:password@]host[:port][/db]`` or
            ``host:port``; at least one, each server once.
        retry_count: attempts after the first in :meth:`lock` (library default 3).
        retry_delay_ms: upper bound of the random pause before a retry (default 200).
        drift_factor: validity is shortened by ``TTL × factor + 2 ms``; in ``[0, 1)``
            (default 0.01).
        connect_timeout_ms: added to a step's deadline when a node must be connected first;
            ``> 0`` (default 250).
        node_timeout_ms: per-node wait in each step, the same for every node and step (an
            extension still stops at the validity's end); ``None`` or 0: a bound per kind of
            step: an acquisition waits a tenth of the lock's TTL (10 ms to 1 s), an extension
            until the validity ends, a release the stale limit (1 s), each plus 50 µs per key
            or semaphore slot beyond the first.
        max_ttl_ms: the largest TTL a lock (or :meth:`Lease.extend`) may ask for, 3..2**32-1
            (default 60000); a larger one raises :class:`InvalidArgument`. It is also how
            long a node that may have lost keys stays in restart quarantine, so keep it near
            the TTLs you use and hold locks longer with :meth:`Lease.auto_renew`. Every
            process sharing the nodes must use the same maximum TTL (or a smaller one than the
            processes that write the nodes' markers).
        restart_quarantine: ``True`` (the default): a node that may have lost the keys it
            held (it restarted, or its keyspace was flushed; told by its marker key
            ``redlock-marker``, which holds its ``run_id`` and is written only while it is
            trusted) does not count toward a quorum until ``max_ttl_ms`` has passed
            (:attr:`NodeOutcome.QUARANTINED`; :meth:`node_states` says why); unlocks and
            renewals still go to it. A brand-new cluster (no node has a marker, every node
            younger than ``max_ttl_ms``, every node answered) counts at once, so the first
            lock on freshly started nodes succeeds. Pass ``False`` only for nodes that persist
            every write (``appendfsync always``); no marker is then read or written, and the
            library logs a warning once for each node that does not persist every write.
        label: a name for this holder, e.g. ``f"{socket.gethostname()}:{os.getpid()}"``,
            stored beside the token in the value of every plain lock the manager takes, so
            that :meth:`holders` (and ``redlock inspect``) can say who holds a resource. A
            ``str`` of at most 256 bytes of UTF-8 (:data:`redlock.MAX_LABEL_LEN`) with no
            control characters; ``None`` or ``""``: no label (the default). A reentrant lock is
            labelled by its owner id instead. Anyone who can read the keys can read it: no
            secrets.
        key_prefix: the prefix of every lock key (the key of a resource is the prefix followed
            by the resource's bytes): ``str`` (UTF-8 encoded) or ``bytes``, 0 to 256 bytes
            (:data:`redlock.MAX_KEY_PREFIX_LEN`); ``None`` keeps the default, ``"redlock:"``.
            The empty prefix names each key after the resource itself, as redsync and
            node-redlock do, so that services on either side of a migration exclude each
            other; a resource whose key would then fall in the library's own namespaces
            (``redlock-fence:…``, ``redlock-marker``) is refused with
            :class:`InvalidArgument`. Managers that share locks must use the same prefix.
        tls_ca_file: for ``rediss://`` nodes (TLS; plain ``redis://`` nodes ignore every
            ``tls_`` option, so a cluster may mix both): a PEM file of the CA certificates to
            trust (a path: ``str``, ``bytes`` or ``os.PathLike``). ``None`` (the default): the
            system's trust store.
        tls_client_cert, tls_client_key: a client certificate (PEM: the certificate, then
            any intermediates) and its private key (PEM), presented to nodes that ask for one
            (mutual TLS, ``tls-auth-clients yes``). Both or neither; default neither.
        tls_server_name: the name every TLS node's certificate must carry (and the SNI),
            instead of the host of its URL: for nodes addressed by IP whose certificates name
            a host. Default: each node's host.
        tls_insecure_skip_verify: **insecure, for tests only.** ``True`` accepts any
            certificate from any node (no check of who signed it, when it expires or what it
            names): anyone on the path can then read and change every command. A warning is
            written to stderr when the manager is made. Default ``False``.

        Every TLS file is read here: a missing or unreadable one, or one that is not the PEM
        it should be, raises :class:`InvalidArgument` naming its path (never its content). A
        node whose certificate is refused, or that refuses ours, is reported per node as
        :attr:`NodeOutcome.TLS`, its reason in the error message.

    ``None`` leaves an option at the library's default. Validation happens here: no nodes,
    a malformed URL, a node listed twice, a host that does not resolve or an option out of
    range raise :class:`InvalidArgument`; a value of the wrong type raises ``TypeError``. No
    connection is made until the first lock.

    The manager is thread-safe: any number of threads may lock through it at once, and each
    blocking call releases the GIL; on the main thread, a Ctrl-C interrupts an acquisition
    that waits at once (see :meth:`acquire`). Close it with :meth:`close` or a ``with``
    block; closing never unlocks anything, and leases it made stay usable. If a thread is
    inside a call on the manager when it is closed, the C handle is freed when that call
    returns. At garbage collection an unclosed manager is freed (never unlocked).
    """

    __slots__ = (
        "_handle",
        "_node_count",
        "_quorum",
        "_metrics_len",
        "_opts",
        "_opts_lock",
        "_retry_pauses",
        "__weakref__",
    )

    def __init__(
        self,
        nodes: Iterable[str],
        *,
        retry_count: Optional[int] = None,
        retry_delay_ms: Optional[int] = None,
        drift_factor: Optional[float] = None,
        connect_timeout_ms: Optional[int] = None,
        node_timeout_ms: Optional[int] = None,
        max_ttl_ms: Optional[int] = None,
        restart_quarantine: bool = True,
        label: Optional[str] = None,
        key_prefix: Optional[Resource] = None,
        tls_ca_file: Optional[PathArg] = None,
        tls_client_cert: Optional[PathArg] = None,
        tls_client_key: Optional[PathArg] = None,
        tls_server_name: Optional[str] = None,
        tls_insecure_skip_verify: bool = False,
    ) -> None:
        if isinstance(nodes, (str, bytes)):
            raise TypeError("nodes must be a list of URLs, not a single string")
        try:
            node_list = list(nodes)
        except TypeError:
            raise TypeError(
                f"nodes must be a list of str URLs, not {type(nodes).__name__}"
            ) from None
        urls = [_url(u) for u in node_list]
        retry: Optional[Tuple[int, int]] = None
        if retry_count is not None or retry_delay_ms is not None:
            retry = (
                _u32("retry_count", _DEFAULT_RETRY_COUNT if retry_count is None else retry_count),
                _u32(
                    "retry_delay_ms",
                    _DEFAULT_RETRY_DELAY_MS if retry_delay_ms is None else retry_delay_ms,
                ),
            )
        drift: Optional[float] = None
        if drift_factor is not None:
            if isinstance(drift_factor, bool) or not isinstance(drift_factor, (int, float)):
                raise TypeError(f"drift_factor must be a float, not {type(drift_factor).__name__}")
            drift = float(drift_factor)
            if not math.isfinite(drift):
                # C rejects it too; said here so the message names the Python argument.
                raise InvalidArgument(f"drift_factor must be finite, got {drift_factor!r}")
        timeouts: Optional[Tuple[int, int]] = None
        if connect_timeout_ms is not None or node_timeout_ms is not None:
            timeouts = (
                _u32(
                    "connect_timeout_ms",
                    _DEFAULT_CONNECT_TIMEOUT_MS
                    if connect_timeout_ms is None
                    else connect_timeout_ms,
                ),
                _u32("node_timeout_ms", 0 if node_timeout_ms is None else node_timeout_ms),
            )
        max_ttl = None if max_ttl_ms is None else _u32("max_ttl_ms", max_ttl_ms)
        if type(restart_quarantine) is not bool:
            raise TypeError(
                f"restart_quarantine must be a bool, not {type(restart_quarantine).__name__}"
            )
        label_b = _label(label)
        prefix = _key_prefix(key_prefix)
        tls_ca, tls_pair, tls_name, tls_skip = _tls_options(
            tls_ca_file, tls_client_cert, tls_client_key, tls_server_name, tls_insecure_skip_verify
        )

        global _c
        c = _c = _ffi.lib()
        cfg = c.redlock_config_new()
        if not cfg:
            raise MemoryError("redlock_config_new returned NULL")
        try:
            err = _ffi.err_buffer()
            for url in urls:
                _check(c.redlock_config_add_node(cfg, url, err, _ffi.ERR_LEN), err)
            if retry is not None:
                _check(c.redlock_config_set_retry(cfg, retry[0], retry[1], err, _ffi.ERR_LEN), err)
            if drift is not None:
                _check(c.redlock_config_set_drift_factor(cfg, drift, err, _ffi.ERR_LEN), err)
            if timeouts is not None:
                _check(
                    c.redlock_config_set_timeouts(cfg, timeouts[0], timeouts[1], err, _ffi.ERR_LEN),
                    err,
                )
            if max_ttl is not None:
                _check(c.redlock_config_set_max_ttl(cfg, max_ttl, err, _ffi.ERR_LEN), err)
            _check(
                c.redlock_config_set_restart_quarantine(
                    cfg, restart_quarantine, err, _ffi.ERR_LEN
                ),
                err,
            )
            # Both are options of this manager's own config: nothing cached in this binding
            # (the acquisition options are per manager) carries them to another manager.
            if label_b:
                _check(c.redlock_config_set_label(cfg, label_b, err, _ffi.ERR_LEN), err)
            if prefix is not None:
                _check(
                    c.redlock_config_set_key_prefix(cfg, prefix, len(prefix), err, _ffi.ERR_LEN),
                    err,
                )
            if tls_ca is not None:
                _check(c.redlock_config_set_tls_ca_file(cfg, tls_ca, err, _ffi.ERR_LEN), err)
            if tls_pair is not None:
                _check(
                    c.redlock_config_set_tls_client_cert(
                        cfg, tls_pair[0], tls_pair[1], err, _ffi.ERR_LEN
                    ),
                    err,
                )
            if tls_name is not None:
                _check(c.redlock_config_set_tls_server_name(cfg, tls_name, err, _ffi.ERR_LEN), err)
            if tls_skip:
                _check(
                    c.redlock_config_set_tls_insecure_skip_verify(cfg, True, err, _ffi.ERR_LEN),
                    err,
                )
            out = _ffi.ManagerPtr()
            _check(c.redlock_manager_new(cfg, ctypes.byref(out), err, _ffi.ERR_LEN), err)
        finally:
            c.redlock_config_free(cfg)
        # The options objects of acquire/lock/try_lock, by key, made on first use and freed
        # with the manager (``_manager_free``); ``_opts_lock`` only orders their creation.
        opts: Dict[_OptsKey, Any] = {}
        self._opts = opts
        self._opts_lock = threading.Lock()
        self._handle = _Handle(out, _manager_free(opts), "manager")
        self._node_count = int(c.redlock_manager_node_count(out))
        self._quorum = int(c.redlock_manager_quorum(out))
        self._metrics_len = _METRICS_FIRST_LEN
        # Whether the retry policy (``wait_ms=None``) may pause between attempts.
        self._retry_pauses = retry is None or retry[0] > 0

    @property
    def node_count(self) -> int:
        """The number of nodes, N."""
        return self._node_count

    @property
    def quorum(self) -> int:
        """The number of nodes that must agree, N // 2 + 1."""
        return self._quorum

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the ``with`` block ended)."""
        return self._handle.closed

    def acquire(
        self,
        resource: Resource,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        owner: Optional[Resource] = None,
        shared: bool = False,
        fair: bool = False,
        drop_out_ms: Optional[int] = None,
    ) -> Lease:
        """Acquires ``resource`` for ``ttl_ms`` milliseconds, with options (``redlock_acquire``).
        :meth:`lock` and :meth:`try_lock` are this with fixed options.

        It blocks, never forever, with the GIL released: at most about ``wait_ms``, or, with
        the retry policy, ``(retry_count + 1) × (node timeout + retry_delay_ms)``.

        **Ctrl-C.** On the main thread, an acquisition that may wait (``wait_ms`` > 0, or the
        retry policy with ``retry_count`` > 0) runs on a helper thread while the main thread
        waits for it in short slices, so that a ``KeyboardInterrupt`` (or any exception a
        signal handler raises) is delivered at once: the acquisition is then cancelled (the
        handle given as ``cancel`` is fired, or one of the call's own), a lock granted all the
        same is unlocked and freed, so no key is left behind, and the exception is re-raised
        (within one round trip of the signal; a second Ctrl-C meanwhile is dropped). Other
        threads, and ``wait_ms=0``, call the library directly (Python delivers signals to
        the main thread only).

        Args:
            resource: 1 to 1024 bytes; a ``str`` is UTF-8 encoded. Any bytes are fine.
            ttl_ms: the lock's time to live in milliseconds, at most the manager's
                ``max_ttl_ms`` (default 60000); it must exceed its own drift allowance
                ``ttl_ms × drift_factor + 2``, so 1 and 2 are refused.
            wait_ms: how long to keep trying while the resource is held elsewhere. ``None``
                (the default): the manager's retry policy (``retry_count`` more attempts, each
                after a random pause of up to ``retry_delay_ms``); ``0``: one attempt, no
                retry; ``> 0``: attempt again whenever the holder releases the resource (or
                its TTL runs out) until ``wait_ms`` milliseconds have passed, whatever the
                retry count (no attempt starts after that). See ``notify``.
            notify: with ``wait_ms`` > 0, ``True`` (the default) sleeps until the holder's
                release is announced (one subscriber connection per node and manager, shared
                by every waiter, opened on the first wait), so the lock changes hands within
                a round trip of the release; ``False`` polls instead, after random pauses of
                up to ``retry_delay_ms``. No effect otherwise.
            cancel: a :class:`Cancel` handle: firing it (from any thread) ends the
                acquisition with :class:`Cancelled`, at once while it waits, leaving no key
                behind; a handle that has already fired raises :class:`Cancelled` without
                contacting any node. A Ctrl-C that interrupts the acquisition fires it.
            owner: makes the lock **reentrant** for this owner id (1 to 512 bytes; a ``str``
                is UTF-8 encoded), for example a job id or ``host:pid:thread``. While the
                owner holds the lock, its next acquisition succeeds at once, with a lease of
                its own; the resource stays held until every lease of the owner has been
                released (or has expired), and another owner, or a plain lock, is refused
                meanwhile. The owner is the identity: another thread or process presenting
                it is the same owner (a restarted worker reclaims its job's lock at once;
                never share an owner id between workers). With ``fenced``, every lease of one
                tenure carries the same token. ``None`` (the default): not reentrant.
            shared: ``True`` takes a **shared** (read) lock, as ``flock(LOCK_SH)``: any number
                of shared holders hold ``resource`` together, while an exclusive lock of it
                (plain, fenced or reentrant, and :meth:`acquire_many` of a set naming it)
                excludes them all and is excluded by them. A waiting exclusive locker is not
                starved: once refused by shared holders it queues an intent, and new shared
                acquisitions wait behind it while the holders already in finish. Extension,
                auto-renewal, fencing and waiting work as for an exclusive lock;
                :attr:`Lease.is_shared` is true. A shared lock has no owner: ``shared=True``
                with ``owner`` is an :class:`InvalidArgument`. ``False`` (the default):
                exclusive.
            fair: ``True`` makes the lock **fair** (first come, first served;
                ``redlock_acquire_opts_set_fair``): waiters are granted it in the order they
                asked for it, across every process and node, and a release wakes the next
                waiter alone. A refused fair acquisition takes a ticket and queues it on every
                node (the hash ``redlock-fair:`` + the lock key; one more round trip);
                :attr:`Lease.ticket` gives it. With ``wait_ms=0`` it takes the lock only when
                it is free and nobody is queued, and queues nothing. A waiter that gives up
                (``wait_ms`` over, ``cancel``, Ctrl-C) leaves the queue at once. Fair and
                plain locks of a resource exclude each other, but a plain acquisition does
                not queue: it may take the lock ahead of fair waiters. A fair lock has no
                ``owner`` and is not ``shared`` (either is an :class:`InvalidArgument`).
                ``False`` (the default): not fair.
            drop_out_ms: with ``fair=True``, the waiter's drop-out time: the longest a waiter
                that stops refreshing its place (it died, or is paused) holds up the waiters
                behind it; it refreshes at least every fifth of it. :data:`MIN_DROP_OUT_MS`
                (20) to :data:`MAX_DROP_OUT_MS` (3600000); ``None`` or ``0`` (the default):
                ``ttl_ms`` or :data:`DEFAULT_DROP_OUT_MS` (5000), whichever is shorter.
                Non-zero without ``fair=True`` is an :class:`InvalidArgument`.
            fenced: also grant a fencing token (:attr:`Lease.fencing_token`), strictly greater
                than that of every earlier fenced grant of ``resource``. It costs a second
                round trip to the nodes per acquisition.
            auto_renew: turn on auto-renewal as soon as the lock is granted, exactly as
                :meth:`Lease.auto_renew` with ``max_hold_ms`` and ``max_extensions`` would
                right after the grant: the lease is returned with :attr:`Lease.renewing`
                true, and :attr:`Lease.lost`, :attr:`Lease.lost_reason`,
                :meth:`Lease.wait_lost`, :meth:`Lease.stop_renewal` and :meth:`Lease.unlock`
                behave as after that call. If renewal cannot be started, the lock is released
                and the error raised. For an ``on_lost`` callback, call
                :meth:`Lease.auto_renew` on the lease (it replaces these settings; the hold
                time still counts from the acquisition).
            max_hold_ms: with ``auto_renew``, stop renewing (the lease is then lost) this long
                after the acquisition; ``0`` or ``None``: the library's default, one hour.
            max_extensions: with ``auto_renew``, at most this many automatic extensions;
                ``0`` or ``None``: no limit besides the hold time. Either bound given
                (non-zero) without ``auto_renew=True`` is an :class:`InvalidArgument`.

        Returns:
            A :class:`Lease`; use it in a ``with`` block to unlock when the block ends. If
            that unlock fails (e.g. :class:`NotHeld`: the lock expired while the block ran),
            the ``with`` statement raises it, unless the block is already propagating an
            exception, which then wins (the unlock failure is added to it as a note). If an
            exception (e.g. ``KeyboardInterrupt``) arrives after the library granted the lock
            but before the lease is returned, the lease is unlocked and freed when the call
            ran on a helper thread (see Ctrl-C above), and otherwise freed, as a dropped lease
            is (not unlocked: it expires after its TTL, and its renewal stops).

        Raises:
            NotAcquired: held elsewhere (on every attempt).
            Cancelled: ``cancel`` was fired (no key was left behind).
            Unavailable: too many nodes failed, or were in restart quarantine, for a quorum.
            AuthFailed: an :class:`Unavailable` where nodes that refused the credentials
                stood between the others and a quorum.
            InvalidArgument: empty or oversized resource, TTL (above ``max_ttl_ms``
                included), ``wait_ms``, a renewal bound or ``drop_out_ms`` out of range, a
                bound without ``auto_renew``, ``drop_out_ms`` without ``fair=True``,
                ``shared=True`` with an ``owner``, or ``fair=True`` with an ``owner`` or
                ``shared=True``. Nothing is sent.
            TypeError: an argument of the wrong type (``wait_ms``, ``max_hold_ms``,
                ``max_extensions`` and ``drop_out_ms`` are ``int``; ``fenced``,
                ``auto_renew``, ``notify``, ``shared`` and ``fair`` are ``bool``; ``cancel``
                is a :class:`Cancel` or ``None``). Nothing is sent.
            Internal: the renewal thread could not be started (the lock was released).
            HandleClosed: the manager was closed.
        """
        if wait_ms is not None and (type(wait_ms) is not int or not 0 <= wait_ms <= _UINT32_MAX):
            wait_ms = _u32("wait_ms", wait_ms)
        hold = 0 if max_hold_ms is None else max_hold_ms
        extensions = 0 if max_extensions is None else max_extensions
        if (
            type(hold) is not int
            or type(extensions) is not int
            or not 0 <= hold <= _UINT32_MAX
            or not 0 <= extensions <= _UINT32_MAX
        ):
            hold = _u32("max_hold_ms", hold)
            extensions = _u32("max_extensions", extensions)
        if auto_renew is True:
            renew: Optional[Tuple[int, int]] = (hold, extensions)
        elif auto_renew is False:
            if hold or extensions:
                raise InvalidArgument(
                    "max_hold_ms and max_extensions apply only with auto_renew=True"
                )
            renew = None
        else:
            raise TypeError(f"auto_renew must be a bool, not {type(auto_renew).__name__}")
        if notify is not True and notify is not False:
            raise TypeError(f"notify must be a bool, not {type(notify).__name__}")
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
        return self._acquire(
            resource, ttl_ms, wait_ms, fenced, renew, notify, cancel, owner, shared, fair,
            drop_out_ms,
        )  # fmt: skip

    def lock(
        self,
        resource: Resource,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        owner: Optional[Resource] = None,
        shared: bool = False,
        fair: bool = False,
        drop_out_ms: Optional[int] = None,
    ) -> Lease:
        """Acquires ``resource`` for ``ttl_ms`` milliseconds, retrying: :meth:`acquire` without
        auto-renewal.

        With ``wait_ms=None`` it retries as configured (``retry_count`` more attempts, each
        after a random pause of up to ``retry_delay_ms``); with ``wait_ms`` it attempts again
        whenever the holder releases the resource (``notify=False``: after such pauses) until
        ``wait_ms`` milliseconds have passed, whatever the retry count (no attempt starts after
        that; ``0`` makes one attempt). It blocks, never forever, with the GIL released; on
        the main thread a Ctrl-C interrupts a wait at once, leaving no key behind (see
        :meth:`acquire`).

        Args:
            resource: 1 to 1024 bytes; a ``str`` is UTF-8 encoded. Any bytes are fine.
            ttl_ms: the lock's time to live in milliseconds, at most the manager's
                ``max_ttl_ms`` (default 60000); it must exceed its own drift allowance
                ``ttl_ms × drift_factor + 2``, so 1 and 2 are refused.
            wait_ms: ``None`` for the configured retries, or the time to keep retrying.
            fenced: also grant a fencing token (:attr:`Lease.fencing_token`), strictly greater
                than that of every earlier fenced grant of ``resource``. It costs a second
                round trip to the nodes per acquisition.
            notify: with ``wait_ms`` > 0, wake on the holder's release (``True``, the default)
                or poll (``False``), as for :meth:`acquire`.
            cancel: a :class:`Cancel` handle that ends the acquisition with
                :class:`Cancelled` when fired, as for :meth:`acquire`.
            owner: an owner id that makes the lock reentrant, as for :meth:`acquire`.
            shared: ``True`` for a shared (read) lock, as for :meth:`acquire`.
            fair: ``True`` for a fair (first-come, first-served) lock, as for :meth:`acquire`.
            drop_out_ms: with ``fair=True``, the waiter's drop-out time, as for
                :meth:`acquire`.

        Returns:
            A :class:`Lease`; use it in a ``with`` block to unlock when the block ends. If
            that unlock fails (e.g. :class:`NotHeld`: the lock expired while the block ran),
            the ``with`` statement raises it, unless the block is already propagating an
            exception, which then wins (the unlock failure is added to it as a note).

        Raises:
            NotAcquired: held elsewhere (on every attempt).
            Cancelled: ``cancel`` was fired (no key was left behind).
            Unavailable: too many nodes failed, or were in restart quarantine, for a quorum.
            AuthFailed: an :class:`Unavailable` where nodes that refused the credentials
                stood between the others and a quorum.
            InvalidArgument: empty or oversized resource, TTL (above ``max_ttl_ms``
                included), ``wait_ms`` or ``drop_out_ms`` out of range, ``drop_out_ms``
                without ``fair=True``, ``shared=True`` with an ``owner``, or ``fair=True``
                with an ``owner`` or ``shared=True``.
            TypeError: an argument of the wrong type.
            HandleClosed: the manager was closed.
        """
        if wait_ms is not None and (type(wait_ms) is not int or not 0 <= wait_ms <= _UINT32_MAX):
            wait_ms = _u32("wait_ms", wait_ms)
        if notify is not True and notify is not False:
            raise TypeError(f"notify must be a bool, not {type(notify).__name__}")
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
        return self._acquire(
            resource, ttl_ms, wait_ms, fenced, None, notify, cancel, owner, shared, fair,
            drop_out_ms,
        )  # fmt: skip

    def try_lock(
        self,
        resource: Resource,
        ttl_ms: int,
        *,
        fenced: bool = False,
        cancel: Optional[Cancel] = None,
        owner: Optional[Resource] = None,
        shared: bool = False,
        fair: bool = False,
    ) -> Lease:
        """One attempt to acquire ``resource`` for ``ttl_ms`` milliseconds, with no retry:
        :meth:`acquire` with ``wait_ms=0``. Same arguments (``fenced``, ``cancel``, ``owner``,
        ``shared`` and ``fair`` included), result and exceptions as :meth:`lock`. A fair try
        takes the lock only when it is free and nobody is queued, and queues nothing (so it
        has no ``drop_out_ms``)."""
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
        return self._acquire(
            resource, ttl_ms, 0, fenced, None, True, cancel, owner, shared, fair
        )

    def alock(
        self,
        resource: Resource,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        owner: Optional[Resource] = None,
        shared: bool = False,
        fair: bool = False,
        drop_out_ms: Optional[int] = None,
    ) -> "AsyncLock":
        """The lock as an asynchronous context manager, for asyncio programs::

            async with mgr.alock("orders:42", 10_000, wait_ms=5_000) as lease:
                ...   # held; unlocked (and the lease closed) when the block ends

        Entering it acquires ``resource`` as :meth:`acquire` does, with the same arguments
        (those of :meth:`lock`, plus ``auto_renew``, ``max_hold_ms`` and ``max_extensions``;
        ``shared=True`` for a shared lock, ``fair=True`` for a fair one),
        and gives the :class:`Lease`; leaving it unlocks and closes the lease as a ``with``
        block does (an unlock failure is raised, or added as a note to the exception leaving
        the block). Both run on a helper thread of this binding, never on the event loop,
        which goes on running other tasks while this one waits for the lock.

        **Cancellation.** Cancelling the task while it waits for the lock (``task.cancel()``,
        ``asyncio.wait_for`` or ``asyncio.timeout`` running out) fires the acquisition's
        cancel handle (``cancel`` if given, which stays fired, else one of its own): the
        library returns at once while it waits (within one round trip while it talks to the
        nodes), a lock granted all the same in that race is unlocked, and only then is
        ``CancelledError`` re-raised: a cancelled task never leaves a key behind, nor gets a
        lease. A cancellation during the unlock at the end of the block is re-raised once the
        unlock has returned.

        The arguments are checked here, when ``alock`` is called, with the exceptions of
        :meth:`acquire` (nothing is sent); entering raises what :meth:`acquire` raises
        (:class:`NotAcquired`, :class:`Cancelled` when ``cancel`` was fired by someone else,
        :class:`Unavailable`, …). The object is entered once; call ``alock`` again for
        another acquisition. Needs a running event loop when entered.
        """
        from . import _aio

        return _aio.alock(
            self, resource, ttl_ms, wait_ms, fenced, auto_renew, max_hold_ms, max_extensions,
            notify, cancel, owner, shared, fair, drop_out_ms,
        )  # fmt: skip

    async def aacquire(
        self,
        resource: Resource,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        owner: Optional[Resource] = None,
        shared: bool = False,
        fair: bool = False,
        drop_out_ms: Optional[int] = None,
    ) -> Lease:
        """:meth:`acquire` for asyncio code: the acquisition runs on a helper thread, never on
        the event loop, and a cancellation of the awaiting task ends it as for :meth:`alock`
        (no key left behind, ``CancelledError`` re-raised). Same arguments, result and
        exceptions as :meth:`acquire`. Release the lease with :meth:`Lease.aunlock` (then
        :meth:`Lease.close`), or prefer :meth:`alock`, which does both."""
        from . import _aio

        return await _aio.aacquire(
            self, resource, ttl_ms, wait_ms, fenced, auto_renew, max_hold_ms, max_extensions,
            notify, cancel, owner, shared, fair, drop_out_ms,
        )  # fmt: skip

    def acquire_many(
        self,
        resources: Iterable[Resource],
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """Acquires **every** resource of ``resources`` for ``ttl_ms`` milliseconds, or none
        (``redlock_acquire_many``): one :class:`Lease` for the whole set, whose
        :meth:`~Lease.unlock`, :meth:`~Lease.extend`, validity and auto-renewal act on every
        resource, and whose :attr:`~Lease.resources` lists them.

        Each node sets every resource's key or none, in one script, so callers that name
        overlapping sets in any order never deadlock; the set is held when a quorum of nodes
        granted all of it, and a failed attempt takes its grants back everywhere (no key of
        the set is left). A plain or shared lock of any one of the resources excludes the
        set, and the other way round. One round trip per step, whatever the count.

        Use it in a ``with`` block, as a lease of :meth:`acquire`::

            with mgr.acquire_many(["account:1", "account:2"], 5_000, wait_ms=2_000) as lk:
                ...   # both held; both unlocked when the block ends

        Args:
            resources: a list (or any iterable but a single ``str``/``bytes``) of 1 to
                :data:`redlock.MAX_RESOURCES` (1000) resources, each as for :meth:`acquire`
                (``str``, UTF-8 encoded, or ``bytes``; 1 to 1024 bytes), no two alike.
            ttl_ms: as for :meth:`acquire`.
            wait_ms: how long to keep trying while some resource is held elsewhere: ``None``
                (the default) the manager's retry policy, ``0`` one attempt, ``> 0`` attempts
                after random pauses of up to ``retry_delay_ms`` until ``wait_ms`` ms have
                passed (a set's waits poll: a release announces one resource only).
            auto_renew, max_hold_ms, max_extensions: auto-renewal of the whole set from the
                grant on, as for :meth:`acquire`.
            cancel: a :class:`Cancel` handle, as for :meth:`acquire`.

        There is no ``fenced``, ``owner``, ``shared`` or ``fair``: the library takes a set
        exclusively, without a fencing token or a queue; acquire such resources one at a
        time. A Ctrl-C on the main thread interrupts a wait as for :meth:`acquire`, leaving
        no key behind.

        Returns:
            A :class:`Lease` over the set (:attr:`~Lease.resource` is the first resource).

        Raises:
            NotAcquired: some resource was held elsewhere (on every attempt); no key of the
                set is left behind.
            Cancelled, Unavailable, AuthFailed, Internal, HandleClosed: as for
                :meth:`acquire`.
            InvalidArgument: no resources, more than :data:`redlock.MAX_RESOURCES`, a
                resource named twice, an empty or oversized resource, or a TTL, ``wait_ms`` or
                renewal bound out of range. Nothing is sent.
            TypeError: ``resources`` is a single ``str``/``bytes`` or not iterable, an item is
                not ``str`` or ``bytes``, or another argument has the wrong type. Nothing is
                sent.
        """
        many, ttl, key = _many_key(
            resources, ttl_ms, wait_ms, auto_renew, max_hold_ms, max_extensions, cancel
        )
        return self._acquire_many(many, ttl, key, cancel)

    def alock_many(
        self,
        resources: Iterable[Resource],
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        cancel: Optional[Cancel] = None,
    ) -> "AsyncLock":
        """:meth:`alock` for a set of resources: ``async with mgr.alock_many([...], ttl_ms)
        as lease:`` acquires every resource or none as :meth:`acquire_many` does (same
        arguments, checked here: nothing is sent on an error), off the event loop, and
        unlocks and closes the lease when the block ends. A cancellation of the waiting task
        leaves no key behind, as for :meth:`alock`."""
        from . import _aio

        return _aio.alock_many(
            self, resources, ttl_ms, wait_ms, auto_renew, max_hold_ms, max_extensions, cancel
        )

    async def aacquire_many(
        self,
        resources: Iterable[Resource],
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """:meth:`acquire_many` for asyncio code, off the event loop and cancellable as
        :meth:`aacquire`. Same arguments, result and exceptions as :meth:`acquire_many`."""
        from . import _aio

        return await _aio.aacquire_many(
            self, resources, ttl_ms, wait_ms, auto_renew, max_hold_ms, max_extensions, cancel
        )

    def semaphore(self, name: Resource, permits: int) -> "Semaphore":
        """The counting semaphore ``name`` with ``permits`` permits: a :class:`Semaphore`
        handle, whose :meth:`~Semaphore.acquire` (and :meth:`~Semaphore.lock`,
        :meth:`~Semaphore.try_acquire`, :meth:`~Semaphore.alock`, :meth:`~Semaphore.aacquire`)
        takes one permit. At most ``permits`` valid permits of one semaphore exist at any
        instant, under the same assumptions as the lock. Nothing is sent here: the handle is
        only the checked name and count, and may be kept and used from any thread.

        Example::

            exports = mgr.semaphore("exports", 4)
            with exports.lock(60_000, wait_ms=30_000) as permit:
                ...   # at most 4 of these run at once, in every process
                permit.permit   # (slot, 4): which of the 4 slots it holds

        Every caller of one semaphore must name the same ``permits``: the count is recorded
        on the nodes with the holds, and an acquisition naming another one while permits of
        the recorded count are held raises :class:`InvalidArgument`, whose message names the
        recorded count (a new count applies once no permit is held). A semaphore and a lock
        of the same name are independent (a semaphore's key is ``redlock-sem:`` followed by
        the lock key of its name).

        Args:
            name: as a resource of :meth:`acquire`: 1 to 1024 bytes; a ``str`` is UTF-8
                encoded.
            permits: 1 to :data:`redlock.MAX_PERMITS` (1000).

        Returns:
            A :class:`Semaphore` of this manager (its acquisitions raise
            :class:`HandleClosed` once the manager is closed).

        Raises:
            InvalidArgument: an empty or oversized name, or ``permits`` out of range. With
                ``key_prefix=""``, a name whose key would fall in the library's own
                namespaces is refused by the first acquisition instead.
            TypeError: ``name`` is not ``str`` or ``bytes``, or ``permits`` not an ``int``.
            HandleClosed: the manager was closed.
        """
        sem = _Sem(_semaphore_name(name), _permits(permits))
        if self._handle.closed:
            raise HandleClosed("the manager is closed")
        return Semaphore(self, sem)

    def _acquire_permit(
        self, sem: _Sem, ttl_ms: int, key: _OptsKey, cancel: Optional[Cancel]
    ) -> Lease:
        # As ``_acquire`` (its comments apply), with ``redlock_semaphore_acquire``.
        waits = (
            key[0] != 0
            and (key[0] is not None or self._retry_pauses)
            and threading.get_ident() == _Process.main_ident
        )
        if waits or cancel is not None:
            return self._acquire_cancellable(sem.name, ttl_ms, key, cancel, waits, sem)
        lease_h = self._call(
            key,
            lambda m, opts, out, err: _c.redlock_semaphore_acquire(
                m, sem.name, len(sem.name), sem.permits, ttl_ms, opts, out, err, _ffi.ERR_LEN
            ),
        )
        return self._lease(lease_h, sem.name, key, sem)

    def _acquire_many(
        self, many: _Many, ttl_ms: int, key: _OptsKey, cancel: Optional[Cancel]
    ) -> Lease:
        # As ``_acquire`` (its comments apply), with ``redlock_acquire_many``.
        res = many.resources[0]
        waits = (
            key[0] != 0
            and (key[0] is not None or self._retry_pauses)
            and threading.get_ident() == _Process.main_ident
        )
        if waits or cancel is not None:
            return self._acquire_cancellable(res, ttl_ms, key, cancel, waits, many)
        lease_h = self._call(
            key,
            lambda m, opts, out, err: _c.redlock_acquire_many(
                m, many.ptrs, many.lens, len(many.resources), ttl_ms, opts, out, err,
                _ffi.ERR_LEN,
            ),
        )  # fmt: skip
        return self._lease(lease_h, res, key, many)

    def _acquire(
        self,
        resource: Any,
        ttl_ms: Any,
        wait_ms: Optional[int],
        fenced: Any,
        renew: Optional[Tuple[int, int]],
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        owner: Any = None,
        shared: Any = False,
        fair: Any = False,
        drop_out_ms: Any = None,
    ) -> Lease:
        # The hot path (``wait_ms``, ``renew``, ``notify`` and ``cancel`` are checked by the
        # callers): cheap exact-type checks first, the full ones only to report an error; one
        # C call, with an options object made once per manager and key.
        if type(resource) is bytes:
            res = resource
        else:
            res = _resource(resource)
        if type(ttl_ms) is not int or not 0 < ttl_ms <= _UINT32_MAX:
            ttl_ms = _ttl("ttl_ms", ttl_ms)
        if fenced is not True and fenced is not False:
            raise TypeError(f"fenced must be a bool, not {type(fenced).__name__}")
        if shared is not False:
            if shared is not True:
                raise TypeError(f"shared must be a bool, not {type(shared).__name__}")
            if owner is not None:
                raise InvalidArgument(
                    "a shared lock has no owner: pass shared=True or owner=, not both"
                )
        if owner is not None:
            owner = _owner(owner)
        fair_key = None
        if fair is not False or drop_out_ms is not None:
            fair_key = _fair(fair, drop_out_ms, owner, shared)
        # ``notify`` only applies to a ``wait_ms`` wait: one key for the others.
        key = (wait_ms, fenced, renew, notify or not wait_ms, owner, shared, fair_key)
        # A call that may wait, on the main thread (the only one where Python delivers a
        # Ctrl-C), runs on a helper thread so that the main thread stays interruptible.
        waits = (
            wait_ms != 0
            and (wait_ms is not None or self._retry_pauses)
            and threading.get_ident() == _Process.main_ident
        )
        if waits or cancel is not None:
            return self._acquire_cancellable(res, ttl_ms, key, cancel, waits, None)
        lease_h = self._call(
            key,
            lambda m, opts, out, err: _c.redlock_acquire(
                m, res, len(res), ttl_ms, opts, out, err, _ffi.ERR_LEN
            ),
        )
        return Lease(
            lease_h, res, fenced, self._node_count, renew is not None, shared, None, False,
            fair_key is not None,
        )  # fmt: skip

    def _call(self, key: _OptsKey, acquire: Any) -> _Handle:
        """One acquisition call ``acquire(manager, opts, out, err)`` with the options of
        ``key`` (made once per manager and key): the granted lease's handle, or the error
        raised."""
        c = _c
        # The lease's owner exists before the call and the library writes the new lease's
        # pointer straight into it: from that moment the pointer is freed exactly once,
        # whatever happens before the Lease is returned (an exception raised as the call
        # returns, e.g. a Ctrl-C that arrived during it, drops this handle, whose finalizer
        # frees it).
        lease_h = _Handle(_ffi.LeasePtr(), c.redlock_lease_free, "lease")
        err = _err_buf()
        temp = None
        h = self._handle
        m = h.acquire()
        try:
            opts = self._opts.get(key)
            if opts is None:
                opts, temp = self._opts_miss(key)
            st = acquire(m, opts, _byref(lease_h._ptr), err)
        finally:
            h.release()
            if temp is not None:
                c.redlock_acquire_opts_free(temp)
        if st:
            lease_h._freed = True  # nothing was written: nothing to free
            _raise(st, err)
        return lease_h

    def _lease(
        self, lease_h: _Handle, res: bytes, key: _OptsKey, target: Optional[_Target]
    ) -> Lease:
        """The :class:`Lease` of a granted acquisition made with the options ``key``."""
        return Lease(
            lease_h, res, key[1], self._node_count, key[2] is not None, key[5],
            target.resources if type(target) is _Many else None, type(target) is _Sem,
            key[6] is not None,
        )  # fmt: skip

    def _acquire_cancellable(
        self,
        res: bytes,
        ttl_ms: int,
        key: _OptsKey,
        cancel: Optional[Cancel],
        waits: bool,
        target: Optional[_Target],
    ) -> Lease:
        """An acquisition with a cancel handle: the caller's, or one of its own when the call
        ``waits`` on the main thread. Its options object is made for this call (a handle
        belongs to one call, while the cached objects are shared) and freed after it. With a
        ``target``, of all its resources (``redlock_acquire_many``; ``res`` is the first) or
        of a semaphore's permit (``redlock_semaphore_acquire``; ``res`` is its name)."""
        c = _c
        ch, cp = _cancel_hold(cancel)
        try:
            if waits:
                call = self._new_call(res, ttl_ms, key, ch, cp, target)
                return self._acquire_on_helper(res, key, call, target)
            lease_h = _Handle(_ffi.LeasePtr(), c.redlock_lease_free, "lease")
            h = self._handle
            m = h.acquire()
            try:
                opts = _new_opts(key, cp)
            except BaseException:
                h.release()
                raise
            err = _err_buf()
            try:
                fn, args = _acquire_args(m, res, ttl_ms, opts, lease_h, err, target)
                st = fn(*args)
            finally:
                h.release()
                c.redlock_acquire_opts_free(opts)
        finally:
            ch.release()
        if st:
            lease_h._freed = True  # nothing was written: nothing to free
            _raise(st, err)
        return self._lease(lease_h, res, key, target)

    def _new_call(
        self,
        res: bytes,
        ttl_ms: int,
        key: _OptsKey,
        ch: _Handle,
        cp: Any,
        target: Optional[_Target] = None,
    ) -> _Call:
        """A :class:`_Call` of ``redlock_acquire`` (with a ``target``: ``redlock_acquire_many``
        or ``redlock_semaphore_acquire``) for a helper thread, carrying the cancel handle
        ``ch`` (acquired by the caller as ``cp``, see :func:`_cancel_hold`), with an options
        object of its own; the call owns a hold on the manager and the options until it is
        released (:meth:`_Call.release`).
        Shared by the Ctrl-C path (:meth:`_acquire_on_helper`) and the asyncio one
        (``redlock._aio``)."""
        lease_h = _Handle(_ffi.LeasePtr(), _c.redlock_lease_free, "lease")
        h = self._handle
        m = h.acquire()
        try:
            opts = _new_opts(key, cp)
        except BaseException:
            h.release()
            raise
        try:
            err = _ffi.err_buffer()  # the helper's: this thread's may be used meanwhile
            fn, args = _acquire_args(m, res, ttl_ms, opts, lease_h, err, target)
            return _Call(h, opts, ch, lease_h, args, fn)  # owns h's hold and opts now
        except BaseException:
            h.release()
            _c.redlock_acquire_opts_free(opts)
            raise

    def _acquire_on_helper(
        self, res: bytes, key: _OptsKey, call: _Call, target: Optional[_Target] = None
    ) -> Lease:
        """Runs ``call`` on a helper thread and waits for it in short slices, so that a Ctrl-C
        (any exception a signal handler raises) is seen at once: it then cancels the call,
        makes sure no key is left (a lease granted all the same is unlocked and freed), and
        is re-raised."""
        try:
            _hand_over(call)
            done = call.done
            while not done.wait(_WAIT_SLICE_S):
                pass
            st = call.status
            if st == 0:
                return self._lease(call.lease_h, res, key, target)
        except BaseException:
            call.abandon()
            raise
        if type(st) is not int:
            raise st  # the call itself raised (not expected)
        call.lease_h._freed = True  # nothing was written: nothing to free
        _raise(st, call.err)
        raise AssertionError("unreachable")  # pragma: no cover

    def _opts_miss(self, key: _OptsKey) -> Tuple[Any, Any]:
        """The options object for ``key``, not found in the cache: ``(opts, None)`` once made
        and cached, or, when the cache is full, ``(opts, opts)``: made for one call, which
        frees it. Called with the manager's handle acquired, so the cache is not freed
        meanwhile (and everything it caches is freed with the manager)."""
        with self._opts_lock:
            opts = self._opts.get(key)
            if opts is not None:
                return opts, None
            opts = _new_opts(key)
            if len(self._opts) < _OPTS_CACHE_MAX and key[4] is None:
                self._opts[key] = opts
                return opts, None
        return opts, opts

    def node_states(self) -> List[NodeState]:
        """What the manager knows of each node now, in configuration order: one
        :class:`NodeState` ``(index, quarantined, remaining_ms, reason)`` per node. A node is
        ``quarantined`` while it may have lost keys it held (``reason`` says why: see
        :class:`QuarantineReason`) or while the manager has not decided yet
        (``UNDECIDED``); a node not heard from yet is not. Each node's fields are read
        together (a concurrent acquisition may change another node's meanwhile). No I/O.

        Raises:
            HandleClosed: the manager was closed.
        """
        quarantined = ctypes.c_bool()
        remaining = ctypes.c_uint32()
        q_ref, r_ref = _byref(quarantined), _byref(remaining)
        err = _err_buf()
        states: List[NodeState] = []
        h = self._handle
        m = h.acquire()
        try:
            state = _c.redlock_manager_node_state
            why = _c.redlock_manager_node_quarantine_reason
            for i in range(self._node_count):
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

    def holders(self, resource: Resource) -> Holders:
        """Who holds ``resource``, on each node and on a quorum (``redlock_holders_get``): one
        read-only script sent to every node at once, waiting for each at most its node
        timeout (so, on the main thread, a Ctrl-C is seen when it returns). A node that fails
        is reported as ``HoldState.FAILED``, not raised. Takes and releases nothing.

        A snapshot for people and monitoring, never a reason to act: the holder can change as
        soon as it is read (take the lock to act safely).

        Example::

            h = mgr.holders("orders:42")
            if h.is_locked:
                print(h.holder.label, h.holder.held_for_ms, h.holder.ttl_ms)
            for n in h.nodes:
                print(n.index, n.state.name, n.kind.name, n.label)

        Args:
            resource: as for :meth:`acquire` (1 to 1024 bytes; a ``str`` is UTF-8 encoded).

        Returns:
            A :class:`Holders` snapshot.

        Raises:
            InvalidArgument: a resource an acquisition would refuse (empty, too long, or, with
                ``key_prefix=""``, one whose key falls in the library's own namespaces).
                Nothing is sent.
            TypeError: ``resource`` is not ``str`` or ``bytes``.
            HandleClosed: the manager was closed.
        """
        res = resource if type(resource) is bytes else _resource(resource)
        c = _c
        # As for a lease: the library writes the snapshot's pointer straight into its owner,
        # so it is freed once whatever happens (an exception during the reads below included).
        snap = _Handle(_ffi.HoldersPtr(), c.redlock_holders_free, "holders snapshot")
        err = _err_buf()
        h = self._handle
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
        return Holders(res, self._quorum, nodes, holder)

    def metrics(self) -> str:
        """This manager's metrics in the Prometheus text exposition format: ``# HELP`` /
        ``# TYPE`` lines and samples, every name starting ``redlock_``. Counters
        of acquisitions by result (``redlock_acquire_total{result="granted"}``, ``…
        "not_acquired"``, ``"unavailable"``, …), attempts and retries, unlock and extend
        outcomes (``redlock_unlock_total{result="ok"}``, ``"not_held"``, …), renewals, keys
        restored and leases lost; histograms of wait and hold times; quarantined nodes; and per
        node (labelled by address, never with a password) requests, errors by kind and latency.
        Counts start at 0 when the manager is created. Serve it as ``text/plain;
        version=0.0.4``. No I/O.

        Raises:
            HandleClosed: the manager was closed.
        """
        h = self._handle
        m = h.acquire()
        try:
            metrics = _c.redlock_manager_metrics
            cap = self._metrics_len
            # snprintf-style: a return value >= cap means the text was cut short. The text can
            # grow between two calls (other threads count meanwhile), hence the headroom.
            for _ in range(8):
                buf = ctypes.create_string_buffer(cap)
                n = metrics(m, buf, cap)
                if n < cap:
                    self._metrics_len = max(_METRICS_FIRST_LEN, n + n // 4 + 1)
                    return buf.raw[:n].decode("utf-8", "replace")
                cap = n + n // 4 + 1
            raise RedlockError("redlock_manager_metrics kept growing")  # not expected
        finally:
            h.release()

    def close(self) -> None:
        """Frees the manager (and its cached acquisition options) and closes its idle
        connections. Never unlocks anything; leases it made stay usable. Idempotent. Later
        :meth:`acquire` / :meth:`lock` / :meth:`try_lock` calls raise :class:`HandleClosed`.
        If another thread is inside a call on the manager, the memory is freed when that call
        returns."""
        self._handle.close()

    def __reduce__(self) -> Any:
        raise TypeError(
            "a redlock.Redlock cannot be pickled or sent to another process: create one in "
            "each process"
        )

    def __enter__(self) -> "Redlock":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle.closed else "open"
        return f"<redlock.Redlock nodes={self._node_count} quorum={self._quorum} {state}>"


class Semaphore:
    """A counting semaphore over the quorum (``redlock_semaphore_acquire``), made by
    :meth:`Redlock.semaphore`: at most :attr:`permits` valid leases of it at any instant,
    each one a *permit*. A holder that dies gives its permit back when its TTL runs out.

    A permit is one of :attr:`permits` slots, held by a quorum of nodes exactly as a lock is
    (one round trip when the nodes agree on which slots are free, two when they picked
    different ones). Its :class:`Lease` unlocks, extends, auto-renews, reports its validity
    and works in a ``with`` block as a lock's does; :attr:`Lease.permit` is ``(slot,
    permits)``. With ``fenced=True`` it carries a fencing token strictly greater than every
    earlier holder's of the same slot. A release wakes a waiter of the semaphore (one per
    release in each process that waits), as a lock's release wakes its waiters.

    Acquire a permit with :meth:`acquire` (every option), :meth:`lock` (retrying, without
    auto-renewal), :meth:`try_acquire` (one attempt), or, in asyncio code, :meth:`alock`
    (``async with``) and :meth:`aacquire`::

        sem = mgr.semaphore("exports", 4)
        with sem.lock(60_000, wait_ms=30_000) as permit:
            ...   # at most 4 of these at once

    The options are those of :meth:`Redlock.acquire` but ``owner``, ``shared``, ``fair`` and
    ``drop_out_ms``: a permit is neither reentrant, shared nor fair (passing any of them is a
    ``TypeError``).

    The handle holds only the name, the count and its manager, and sends nothing itself; it
    may be shared by any number of threads. Its acquisitions raise :class:`HandleClosed` once
    the manager is closed; permits already granted stay usable. Not constructed directly:
    :meth:`Redlock.semaphore` makes one.
    """

    __slots__ = ("_mgr", "_sem")

    def __init__(self, mgr: Redlock, sem: _Sem) -> None:
        # Not constructed directly: Redlock.semaphore checks the name and the count.
        self._mgr = mgr
        self._sem = sem

    @property
    def name(self) -> bytes:
        """The semaphore's name as bytes (a ``str`` name is its UTF-8 encoding)."""
        return self._sem.name

    @property
    def permits(self) -> int:
        """How many permits it has: at most this many valid permits exist at once."""
        return self._sem.permits

    @property
    def manager(self) -> Redlock:
        """The :class:`Redlock` manager it acquires through."""
        return self._mgr

    def acquire(
        self,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """Takes one permit for ``ttl_ms`` milliseconds, with options
        (``redlock_semaphore_acquire``): :meth:`Redlock.acquire` for a permit, with the same
        options but ``owner``, ``shared``, ``fair`` and ``drop_out_ms``. :meth:`lock` and
        :meth:`try_acquire` are this with fixed options.

        It blocks, never forever, with the GIL released; on the main thread a Ctrl-C
        interrupts a wait at once, leaving no permit taken (see :meth:`Redlock.acquire`).

        Args:
            ttl_ms: the permit's time to live in milliseconds, as a lock's TTL of
                :meth:`Redlock.acquire` (at most the manager's ``max_ttl_ms``).
            wait_ms: how long to keep trying while every permit is held: ``None`` (the
                default) the manager's retry policy, ``0`` one attempt, ``> 0`` attempt again
                whenever a holder releases its permit (or its TTL runs out) until ``wait_ms``
                milliseconds have passed.
            notify: with ``wait_ms`` > 0, wake on a release (``True``, the default) or poll
                (``False``), as for :meth:`Redlock.acquire`.
            cancel: a :class:`Cancel` handle that ends the acquisition with
                :class:`Cancelled` when fired, as for :meth:`Redlock.acquire`.
            fenced: also grant a fencing token (:attr:`Lease.fencing_token`), strictly greater
                than that of every earlier fenced holder of the same slot (the counter is the
                one a fenced lock of the same name uses).
            auto_renew, max_hold_ms, max_extensions: auto-renewal of the permit from the grant
                on, as for :meth:`Redlock.acquire`.

        Returns:
            A :class:`Lease`, the permit (:attr:`Lease.permit` is ``(slot, permits)``); use
            it in a ``with`` block to release it when the block ends.

        Raises:
            NotAcquired: every permit was held (on every attempt).
            InvalidArgument: the nodes record another permit count for this semaphore
                (the message names it; a new count applies once no permit is held); or a
                TTL, ``wait_ms`` or renewal bound out of range, or a bound without
                ``auto_renew`` (nothing is sent).
            Cancelled, Unavailable, AuthFailed, Internal, HandleClosed: as for
                :meth:`Redlock.acquire`.
            TypeError: an argument of the wrong type (``owner``, ``shared``, ``fair`` and
                ``drop_out_ms`` are not accepted). Nothing is sent.
        """
        ttl, key = _permit_key(
            ttl_ms, wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel
        )
        return self._mgr._acquire_permit(self._sem, ttl, key, cancel)

    def lock(
        self,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """Takes one permit for ``ttl_ms`` milliseconds, retrying: :meth:`acquire` without
        auto-renewal, as :meth:`Redlock.lock` is for a lock. With ``wait_ms=None`` it
        retries as configured; with ``wait_ms`` it attempts again whenever a holder releases
        a permit until ``wait_ms`` milliseconds have passed (``0``: one attempt). Use it in a
        ``with`` block::

            with mgr.semaphore("exports", 4).lock(60_000, wait_ms=30_000) as permit:
                ...   # released when the block ends

        Same arguments (``wait_ms``, ``fenced``, ``notify``, ``cancel``), result and
        exceptions as :meth:`acquire`."""
        ttl, key = _permit_key(ttl_ms, wait_ms, fenced, False, 0, 0, notify, cancel)
        return self._mgr._acquire_permit(self._sem, ttl, key, cancel)

    def try_acquire(
        self, ttl_ms: int, *, fenced: bool = False, cancel: Optional[Cancel] = None
    ) -> Lease:
        """One attempt to take a permit for ``ttl_ms`` milliseconds, with no retry:
        :meth:`acquire` with ``wait_ms=0``. Raises :class:`NotAcquired` at once when every
        permit is held. Same arguments (``fenced``, ``cancel``), result and exceptions as
        :meth:`acquire`."""
        ttl, key = _permit_key(ttl_ms, 0, fenced, False, 0, 0, True, cancel)
        return self._mgr._acquire_permit(self._sem, ttl, key, cancel)

    def alock(
        self,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
    ) -> "AsyncLock":
        """A permit as an asynchronous context manager, for asyncio programs::

            async with sem.alock(60_000, wait_ms=30_000) as permit:
                ...   # held; released (and the lease closed) when the block ends

        Entering it takes a permit as :meth:`acquire` does, with the same arguments (checked
        here, when ``alock`` is called: nothing is sent on an error), off the event loop;
        leaving it releases and closes the lease, as :meth:`Redlock.alock` does for a lock.
        Cancelling the task while it waits leaves no permit taken, as for
        :meth:`Redlock.alock`. Entered once; call ``alock`` again for another permit."""
        from . import _aio

        return _aio.alock_permit(
            self._mgr, self._sem, ttl_ms, wait_ms, fenced, auto_renew, max_hold_ms,
            max_extensions, notify, cancel,
        )  # fmt: skip

    async def aacquire(
        self,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
    ) -> Lease:
        """:meth:`acquire` for asyncio code, off the event loop and cancellable as
        :meth:`Redlock.aacquire`. Same arguments, result and exceptions as :meth:`acquire`.
        Release the permit with :meth:`Lease.aunlock` (then :meth:`Lease.close`), or prefer
        :meth:`alock`, which does both."""
        from . import _aio

        return await _aio.aacquire_permit(
            self._mgr, self._sem, ttl_ms, wait_ms, fenced, auto_renew, max_hold_ms,
            max_extensions, notify, cancel,
        )  # fmt: skip

    def __reduce__(self) -> Any:
        raise TypeError(
            "a redlock.Semaphore cannot be pickled or sent to another process: call "
            "mgr.semaphore(name, permits) in each process"
        )

    def __repr__(self) -> str:
        return f"<redlock.Semaphore name={self._sem.name!r} permits={self._sem.permits}>"
