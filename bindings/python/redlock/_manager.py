"""The lock manager: :class:`Redlock`, over the library's ``redlock_manager``. Its methods
check their arguments (:mod:`._args`: the acquisition keywords become one
:class:`~._args.Options`) and hand them on: acquisitions to :mod:`._acquire`, asyncio forms
to :mod:`._aio`, reports to :mod:`._inspect`, the configuration to :mod:`._config`."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Type

from . import _acquire, _config, _core, _inspect
from ._acquire import _manager_free
from ._args import (
    Resource,
    _OptsKey,
    _permits,
    _Sem,
    _semaphore_name,
    _Target,
    many,
    options,
    target,
    with_acquire_args,
)
from ._cancel import Cancel
from ._config import PathArg
from ._errors import HandleClosed
from ._handle import _Handle
from ._holders import Holders
from ._inspect import _METRICS_FIRST_LEN, NodeState
from ._lease import Lease
from ._election import Election, _election_name
from ._semaphore import Semaphore

if TYPE_CHECKING:  # redlock._aio imports asyncio, on first use only
    from ._aio import AsyncLock

__all__ = ["Redlock"]


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

    Failover groups: a node may be a Sentinel-managed group,
    ``redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/SERVICE[/db]`` (its
    credentials and database are its master's; see docs/operations.md, "Failover groups"), and any
    node URL may end ``?durable=true`` (no restart quarantine for that node).

        sentinel_username, sentinel_password: the credentials every group's sentinels are
            asked with (``AUTH``), when they have ``requirepass``; the user ``None`` (the
            default) is the default user. A user name without a password is a ``TypeError``.
        replica_acks, replica_ack_timeout_ms: a group's grant counts only once this many of
            its master's replicas acknowledged it within the timeout (``WAIT``, written behind
            the grant); one given alone takes 1 replica or 100 ms. Otherwise the node's
            outcome is :attr:`NodeOutcome.UNACKNOWLEDGED` and its grant is released. It does
            not make replication synchronous; restart quarantine still applies. Default: off.

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
        sentinel_username: Optional[str] = None,
        sentinel_password: Optional[str] = None,
        replica_acks: Optional[int] = None,
        replica_ack_timeout_ms: Optional[int] = None,
    ) -> None:
        conf = _config.check(
            nodes, retry_count, retry_delay_ms, drift_factor, connect_timeout_ms,
            node_timeout_ms, max_ttl_ms, restart_quarantine, label, key_prefix,
            (tls_ca_file, tls_client_cert, tls_client_key, tls_server_name,
             tls_insecure_skip_verify),
        )  # fmt: skip
        auth, acks = _config.groups(
            sentinel_username, sentinel_password, replica_acks, replica_ack_timeout_ms
        )
        conf = conf._replace(sentinel_auth=auth, replica_acks=acks)
        out = _config.new_manager(conf)
        c = _core._c
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
        self._retry_pauses = conf.retry is None or conf.retry[0] > 0

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

    @with_acquire_args
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
        on_lost: Optional[Callable[[Lease], None]] = None,
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

        <ARGS>

        Returns:
            A :class:`Lease`; use it in a ``with`` block to unlock when the block ends. If
            that unlock fails (e.g. :class:`NotHeld`: the lock expired while the block ran),
            the ``with`` statement raises it, unless the block is already propagating an
            exception, which then wins (the unlock failure is added to it as a note). If an
            exception (e.g. ``KeyboardInterrupt``) arrives after the library granted the lock
            but before the lease is returned (as the call returns, as its cancel handle is
            let go, as the :class:`Lease` is built), the lease is unlocked and freed before
            the exception is raised, whichever way the call ran: the caller either gets the
            lease or no key is left.

        Raises:
            NotAcquired: held elsewhere (on every attempt).
            Cancelled: ``cancel`` was fired (no key was left behind).
            Unavailable: too many nodes failed, or were in restart quarantine, for a quorum.
            AuthFailed: an :class:`Unavailable` where nodes that refused the credentials
                stood between the others and a quorum.
            InvalidArgument: empty or oversized resource, TTL (above ``max_ttl_ms``
                included), ``wait_ms``, a renewal bound or ``drop_out_ms`` out of range, a
                bound or ``on_lost`` without ``auto_renew``, ``drop_out_ms`` without
                ``fair=True``,
                ``shared=True`` with an ``owner``, or ``fair=True`` with an ``owner`` or
                ``shared=True``. Nothing is sent.
            TypeError: an argument of the wrong type (``wait_ms``, ``max_hold_ms``,
                ``max_extensions`` and ``drop_out_ms`` are ``int``; ``fenced``,
                ``auto_renew``, ``notify``, ``shared`` and ``fair`` are ``bool``; ``cancel``
                is a :class:`Cancel` or ``None``; ``on_lost`` is callable or ``None``).
                Nothing is sent.
            Internal: the renewal thread could not be started (the lock was released).
            HandleClosed: the manager was closed.
        """
        opts = options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, owner,
            shared, fair, drop_out_ms, on_lost,
        )  # fmt: skip
        res, ttl = target(resource, ttl_ms)
        return _acquire.acquire(self, res, ttl, opts)

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
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """Acquires ``resource`` for ``ttl_ms`` milliseconds, retrying: :meth:`acquire`, with
        the same options.

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
            auto_renew, max_hold_ms, max_extensions, on_lost: auto-renewal from the grant on
                (``mgr.lock(r, ttl_ms, auto_renew=True, max_hold_ms=..., on_lost=f)``), its
                bounds, and the callback called once if the lease is lost (then
                :attr:`Lease.lost` is true), as for :meth:`acquire`.

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
                included), ``wait_ms``, a renewal bound or ``drop_out_ms`` out of range, a
                bound or ``on_lost`` without ``auto_renew``, ``drop_out_ms`` without
                ``fair=True``, ``shared=True`` with an ``owner``, or ``fair=True`` with an
                ``owner`` or ``shared=True``.
            TypeError: an argument of the wrong type.
            Internal: the renewal thread could not be started (the lock was released).
            HandleClosed: the manager was closed.
        """
        opts = options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, owner,
            shared, fair, drop_out_ms, on_lost,
        )  # fmt: skip
        res, ttl = target(resource, ttl_ms)
        return _acquire.acquire(self, res, ttl, opts)

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
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """One attempt to acquire ``resource`` for ``ttl_ms`` milliseconds, with no retry:
        :meth:`acquire` with ``wait_ms=0``. Same arguments (``fenced``, ``cancel``, ``owner``,
        ``shared``, ``fair``, ``auto_renew``, ``max_hold_ms``, ``max_extensions`` and
        ``on_lost`` included), result and exceptions as :meth:`lock`. A fair try takes the
        lock only when it is free and nobody is queued, and queues nothing (so it has no
        ``drop_out_ms``)."""
        opts = options(
            0, fenced, auto_renew, max_hold_ms, max_extensions, True, cancel, owner, shared,
            fair, None, on_lost,
        )  # fmt: skip
        res, ttl = target(resource, ttl_ms)
        return _acquire.acquire(self, res, ttl, opts)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> "AsyncLock":
        """The lock as an asynchronous context manager, for asyncio programs::

            async with mgr.alock("orders:42", 10_000, wait_ms=5_000) as lease:
                ...   # held; unlocked (and the lease closed) when the block ends

        Entering it acquires ``resource`` as :meth:`acquire` does, with the same arguments
        (those of :meth:`lock`, ``auto_renew``, ``max_hold_ms``, ``max_extensions`` and
        ``on_lost`` included; ``shared=True`` for a shared lock, ``fair=True`` for a fair one),
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

        res, ttl = target(resource, ttl_ms)
        opts = options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, owner,
            shared, fair, drop_out_ms, on_lost,
        )  # fmt: skip
        _acquire.check(self, res, ttl, opts.key, None)  # the library's rules, nothing sent
        return _aio.alock(self, res, ttl, opts)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """:meth:`acquire` for asyncio code: the acquisition runs on a helper thread, never on
        the event loop, and a cancellation of the awaiting task ends it as for :meth:`alock`
        (no key left behind, ``CancelledError`` re-raised). Same arguments, result and
        exceptions as :meth:`acquire`. Release the lease with :meth:`Lease.aunlock` (then
        :meth:`Lease.close`), or prefer :meth:`alock`, which does both."""
        from . import _aio

        res, ttl = target(resource, ttl_ms)
        opts = options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, owner,
            shared, fair, drop_out_ms, on_lost,
        )  # fmt: skip
        return await _aio.aacquire(self, res, ttl, opts)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
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
            auto_renew, max_hold_ms, max_extensions, on_lost: auto-renewal of the whole set
                from the grant on, and the callback called once if it is lost, as for
                :meth:`acquire`.
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
        sets, ttl = many(resources, ttl_ms)
        opts = options(
            wait_ms, False, auto_renew, max_hold_ms, max_extensions, True, cancel, None, False,
            False, None, on_lost,
        )  # fmt: skip
        return _acquire.acquire(self, sets.first, ttl, opts, sets)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> "AsyncLock":
        """:meth:`alock` for a set of resources: ``async with mgr.alock_many([...], ttl_ms)
        as lease:`` acquires every resource or none as :meth:`acquire_many` does (same
        arguments, checked here: nothing is sent on an error), off the event loop, and
        unlocks and closes the lease when the block ends. A cancellation of the waiting task
        leaves no key behind, as for :meth:`alock`."""
        from . import _aio

        sets, ttl = many(resources, ttl_ms)
        opts = options(
            wait_ms, False, auto_renew, max_hold_ms, max_extensions, True, cancel, None, False,
            False, None, on_lost,
        )  # fmt: skip
        _acquire.check(self, sets.first, ttl, opts.key, sets)  # the library's, nothing sent
        return _aio.alock(self, sets.first, ttl, opts, sets)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """:meth:`acquire_many` for asyncio code, off the event loop and cancellable as
        :meth:`aacquire`. Same arguments, result and exceptions as :meth:`acquire_many`."""
        from . import _aio

        sets, ttl = many(resources, ttl_ms)
        opts = options(
            wait_ms, False, auto_renew, max_hold_ms, max_extensions, True, cancel, None, False,
            False, None, on_lost,
        )  # fmt: skip
        return await _aio.aacquire(self, sets.first, ttl, opts, sets)

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

    def election(self, name: Resource) -> "Election":
        """The leader election ``name``: an :class:`Election` handle, whose
        :meth:`~Election.campaign` (a context manager; :meth:`~Election.lead`, and
        :meth:`~Election.acampaign`, :meth:`~Election.alead` for asyncio) makes this process
        the leader, and whose :meth:`~Election.leader` and :meth:`~Election.observe` read the
        leader. Nothing is sent here. ``name`` is as a resource of :meth:`acquire` (1 to 1024
        bytes; a ``str`` is UTF-8 encoded).

        Raises:
            InvalidArgument: an empty or oversized name.
            TypeError: ``name`` is not ``str`` or ``bytes``.
            HandleClosed: the manager was closed.
        """
        res = _election_name(name)
        if self._handle.closed:
            raise HandleClosed("the manager is closed")
        return Election(self, res)

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
        return _inspect.node_states(self)

    def admit_new_nodes(self, nodes: Iterable[int]) -> None:
        """Trusts nodes you **know are new** (started empty, never held a lock), so that they
        count at once instead of after a restart quarantine (``redlock_manager_admit_new_nodes``).
        ``nodes`` are indexes in the node list (0 for the first). A node quarantined for a
        reason a new server can have (no marker; young in a cluster with no marker yet) is
        trusted and its marker written, confirmed before this returns. Admitting a node that
        did hold a lock and lose it can grant that lock twice within its TTL.

        Raises:
            InvalidArgument: an index out of range, a cluster node, restart quarantine off, or
                a node quarantined for what it did (a restart seen, a promotion, a stale
                marker: not new).
            Unavailable: a node did not answer, or its marker write was not confirmed.
            HandleClosed: the manager was closed.
        """
        _inspect.admit_new_nodes(self, list(nodes))

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
        return _inspect.holders(self, resource)

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
        return _inspect.metrics(self)

    def _new_call(self, res: bytes, ttl_ms: int, key: _OptsKey, ch: Any, cp: Any,
                  target: Optional[_Target] = None) -> Any:
        # For ``redlock._aio``, which imports neither this module nor ``_acquire``.
        return _acquire.new_call(self, res, ttl_ms, key, ch, cp, target)

    def _lease(self, lease_h: Any, res: bytes, ttl_ms: int, key: _OptsKey,
               target: Optional[_Target],
               on_lost: Optional[Callable[[Lease], None]] = None) -> Lease:
        # For ``redlock._aio``, as ``_new_call``.
        return _acquire.lease_of(self, lease_h, res, ttl_ms, key, target, on_lost)

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


