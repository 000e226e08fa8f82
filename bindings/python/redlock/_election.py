"""Leader election: :class:`Election` (made by :meth:`Redlock.election`), its
:class:`Leadership` and the :class:`Leader` snapshots it reads (``redlock_campaign``,
``redlock_lease_proclaim``, ``redlock_leader_get``, ``redlock_leader_wait_change``).

A campaign is an acquisition of its own kind: its *target* (:class:`_Elect`) names the C
function that makes it, so the shared acquisition path (``_acquire``: cached options, helper
threads, cancellation, Ctrl-C; ``_aio`` for asyncio) takes it unchanged, and the granted
:class:`Lease` is wrapped in a :class:`Leadership`.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from types import TracebackType
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Iterator,
    NamedTuple,
    Optional,
    Tuple,
    Type,
)

from . import _acquire, _core, _ffi
from ._args import Options, _resource, _ttl, _u32, options
from ._cancel import Cancel
from ._core import _err_buf, _raise
from ._errors import HandleClosed, InvalidArgument, Status, Unavailable
from ._handle import _Process
from ._lease import Lease, _generations, _start_watch

#: The manager (``redlock.Redlock``), which imports this module.
_Manager = Any

__all__ = ["Election", "Leadership", "Leader", "Campaign", "AsyncCampaign"]

#: How long one ``redlock_leader_wait_change`` call of :meth:`Election.observe` (and
#: :meth:`Election.aobserve`) lasts at most: the observer is woken by each new term at once;
#: the slice only bounds how soon a Ctrl-C, a cancelled task or a closed manager is noticed.
OBSERVE_SLICE_MS = 1000

_byref = ctypes.byref


class Leader(NamedTuple):
    """An election's leader as a quorum of nodes held it when it was read
    (:meth:`Election.leader`, :meth:`Election.observe`): a snapshot, which may change as soon
    as it is read."""

    #: The leader's term: its leadership's fencing token, greater than every earlier
    #: leader's.
    term: int
    #: The value it campaigned with, or the latest it proclaimed.
    value: bytes
    #: How long its leadership stayed valid at least, in milliseconds, as the nodes' TTLs
    #: said when it was read (unless it is renewed, which a live leader's is).
    validity_ms: int


class _Elect(NamedTuple):
    """The target of a campaign (``redlock_campaign``): the election's name and the value."""

    name: bytes
    value: bytes

    #: A leadership is not a semaphore's permit, and holds its election, not a resource list.
    is_permit = False
    lease_resources = None

    def call(self, c: Any, m: Any, ttl_ms: int, opts: Any, out: Any, err: Any) -> Tuple[Any, ...]:
        """The C function and arguments of the campaign (``out``: where the lease goes)."""
        name, value = self.name, self.value
        return c.redlock_campaign, (
            m, name, len(name), value, len(value), ttl_ms, opts, out, err, _ffi.ERR_LEN
        )  # fmt: skip

    def check(self, c: Any, m: Any, ttl_ms: int, opts: Any, err: Any) -> Optional[Tuple[Any, ...]]:
        """Nothing to ask the library: the name and value were checked here, and a campaign
        takes no owner, shared or fair keyword."""
        return None

    def label(self) -> str:
        """What ``repr`` says of the target."""
        return f"election={self.name!r}"


def _election_name(name: object) -> bytes:
    """An election's name as bytes, as a resource's: 1 to :data:`MAX_RESOURCE_LEN` bytes."""
    res = _resource(name)
    if not res:
        raise InvalidArgument("an election's name must not be empty")
    if len(res) > _ffi.MAX_RESOURCE_LEN:
        raise InvalidArgument(
            f"an election's name is {len(res)} bytes; the limit is {_ffi.MAX_RESOURCE_LEN}"
        )
    return res


def _value(value: object) -> bytes:
    """A leader's value as bytes (a ``str`` is UTF-8 encoded), at most
    :data:`MAX_LEADER_VALUE` bytes."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray)):
        value = bytes(value)
    else:
        raise TypeError(f"value must be str or bytes, not {type(value).__name__}")
    if len(value) > _ffi.MAX_LEADER_VALUE:
        raise InvalidArgument(
            f"a leader's value is at most {_ffi.MAX_LEADER_VALUE} bytes, got {len(value)}"
        )
    return value


def _campaign_options(
    wait_ms: Any, notify: Any, cancel: Any, auto_renew: Any, max_hold_ms: Any,
    max_extensions: Any, on_lost: Any,
) -> Options:
    """The checked options of a campaign: always fenced (the term is the fencing token), no
    owner, not shared, not fair. ``on_lost`` is checked here and kept out of the options: the
    leadership calls it (with itself), whether renewal is the default or ``auto_renew``'s."""
    if on_lost is not None and not callable(on_lost):
        raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
    return options(
        wait_ms, True, auto_renew, max_hold_ms, max_extensions, notify, cancel, None, False,
        False, None, None,
    )  # fmt: skip


def _leader_of(ptr: Any) -> Leader:
    """The :class:`Leader` of a live ``redlock_leader`` snapshot (freed by the caller)."""
    c = _core._c
    n = ctypes.c_size_t()
    p = c.redlock_leader_value(ptr, _byref(n))
    value = ctypes.string_at(p, n.value) if p and n.value else b""
    return Leader(int(c.redlock_leader_term(ptr)), value, int(c.redlock_leader_validity_ms(ptr)))


def _read(mgr: Any, fn: Callable[..., int], name: bytes, *args: Any) -> Optional[Leader]:
    """One ``redlock_leader_get`` (no ``args``) or ``redlock_leader_wait_change`` call:
    the leader, or ``None`` for its "none" status (NOT_HELD, NOT_ACQUIRED)."""
    c = _core._c
    err = _err_buf()
    out = _ffi.LeaderPtr()
    h = mgr._handle
    m = h.acquire()
    try:
        st = fn(m, name, len(name), *args, _byref(out), err, _ffi.ERR_LEN)
    finally:
        h.release()
    if st == 0:
        try:
            return _leader_of(out)
        finally:
            c.redlock_leader_free(out)
    if st in _NONE:
        return None
    _raise(st, err)
    raise AssertionError("unreachable")  # pragma: no cover


#: The statuses that say "no leader": ``redlock_leader_get``'s NOT_HELD,
#: ``redlock_leader_wait_change``'s NOT_ACQUIRED (the time was up).
_NONE = (Status.NOT_HELD.value, Status.NOT_ACQUIRED.value)


class Leadership:
    """This process's leadership of an election, from :meth:`Election.campaign` (entered),
    :meth:`Election.lead` or their asyncio forms: a fenced :class:`Lease` (:attr:`lease`),
    renewed automatically, whose fencing token is the :attr:`term`.

    :meth:`resign` (or the end of a ``with`` block) releases it, which wakes the waiting
    candidates; :meth:`proclaim` changes the value observers read, keeping the term. A
    leader is told it lost its leadership a margin before its validity ends (renewal could
    not be confirmed in time): :attr:`lost` turns true, :meth:`wait_lost` returns, and the
    campaign's ``on_lost`` callback runs. A leader must stop acting as one when told, and
    should pass :attr:`term` to every store it writes to (which refuses a lower one).

    Not constructed directly. Keep a reference while leading: dropping it frees the lease,
    which stops renewal (without resigning; the leadership then ends with its TTL).
    """

    __slots__ = ("_lease", "_value", "_name", "__weakref__")

    def __init__(self, lease: Lease, name: bytes, value: bytes) -> None:
        self._lease = lease
        self._name = name
        self._value = value

    @property
    def term(self) -> int:
        """The term: this leadership's fencing token, greater than every earlier leader's
        (``redlock_lease_fencing_token``)."""
        return self._lease.fencing_token or 0

    @property
    def value(self) -> bytes:
        """The value it campaigned with, or the latest it proclaimed successfully."""
        return self._value

    @property
    def election(self) -> bytes:
        """The name of the election it leads, as bytes."""
        return self._name

    @property
    def lease(self) -> Lease:
        """The leadership's :class:`Lease` (its fencing token is the term; unlocking it
        resigns)."""
        return self._lease

    def proclaim(self, value: Any) -> None:
        """Changes the leader's value, keeping the term (``redlock_lease_proclaim``): done
        when a quorum confirmed it while the leadership was valid; observers reading the
        leader see it (a proclamation is not a new term: :meth:`Election.observe` does not
        yield it again). A failed proclamation may still be read by some readers.

        Raises:
            NotHeld: the leadership was lost, resigned, or not confirmed in time.
            InvalidArgument: a value over :data:`MAX_LEADER_VALUE` bytes (nothing is sent).
            TypeError: ``value`` is not ``str`` or ``bytes``.
            Unavailable, AuthFailed, HandleClosed: as for :meth:`Lease.extend`.
        """
        v = _value(value)
        err = _err_buf()
        h = self._lease._handle
        p = h.acquire()
        try:
            st = _core._c.redlock_lease_proclaim(p, v, len(v), err, _ffi.ERR_LEN)
        finally:
            h.release()
        if st:
            _raise(st, err)
        self._value = v

    def resign(self) -> None:
        """Resigns: releases the leadership at once (:meth:`Lease.unlock`), which wakes the
        waiting candidates. Does not close the lease. Same exceptions as
        :meth:`Lease.unlock` (:class:`NotHeld` once lost or resigned)."""
        self._lease.unlock()

    @property
    def lost(self) -> bool:
        """True once this process no longer leads: renewal could not confirm the leadership
        in time (told a margin before the validity ends), it reached a bound of the
        campaign's ``auto_renew`` options, its validity ran out, it resigned, or it was
        closed."""
        lease = self._lease
        return lease.lost or not lease.valid

    @property
    def lost_reason(self) -> Optional[str]:
        """Why renewal lost the leadership (:attr:`Lease.lost_reason`), ``None`` otherwise."""
        return self._lease.lost_reason

    def wait_lost(self, timeout_ms: int) -> bool:
        """Blocks (with the GIL released) until the leadership is lost (``True``) or
        ``timeout_ms`` milliseconds pass (``False``); ``True`` at once when it is lost or
        over already (resigned, expired, closed)."""
        timeout = _u32("timeout_ms", timeout_ms)
        if self.lost:
            return True
        return self._lease.wait_lost(timeout) or self.lost

    @property
    def validity_ms(self) -> int:
        """The remaining validity in milliseconds (0 once lost, resigned or closed)."""
        return self._lease.validity_ms

    def close(self) -> None:
        """Frees the lease (:meth:`Lease.close`): stops renewal, does **not** resign (the
        leadership ends with its TTL). Idempotent."""
        self._lease.close()

    async def aresign(self) -> None:
        """:meth:`resign` for asyncio code, off the event loop (as :meth:`Lease.aunlock`)."""
        await self._lease.aunlock()

    async def aproclaim(self, value: Any) -> None:
        """:meth:`proclaim` for asyncio code, off the event loop and not cancellable (as
        :meth:`Lease.aextend`). Same arguments and exceptions as :meth:`proclaim`."""
        from . import _aio

        v = _value(value)
        await _aio._off_loop(self.proclaim, v)

    def __reduce__(self) -> Any:
        raise TypeError("a redlock.Leadership cannot be pickled or sent to another process")

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        """Resigns (unless resigned already) and closes, as :meth:`Lease.__exit__` unlocks
        and closes: a failed resignation is raised, or noted on the exception leaving the
        block."""
        self._lease.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        state = "closed" if self._lease.closed else "open"
        return f"<redlock.Leadership election={self._name!r} term={self.term} {state}>"


def _leadership(lease: Lease, target: _Elect, opts: Options, on_lost: Any) -> Leadership:
    """The :class:`Leadership` of a granted campaign's lease. Renewal is on from the grant
    (the default, or ``auto_renew``'s): it counts as an ``auto_renew`` call of its own
    generation, and ``on_lost`` is called with the leadership (held weakly: dropping it stops
    renewal). An exception here resigns and closes the lease before it is raised."""
    try:
        if opts.renew is None:
            lease._renew_gen = next(_generations)
        ld = Leadership(lease, target.name, target.value)
        if on_lost is not None:
            ref = weakref.ref(ld)

            def call(_lease: Lease) -> None:
                leadership = ref()
                if leadership is not None:
                    on_lost(leadership)

            _start_watch(lease, lease._handle, lease._renew_gen, call)
        return ld
    except BaseException:
        try:
            lease.unlock()
        except Exception:  # noqa: BLE001 - the error that matters is raised below
            pass
        lease.close()
        raise


def _campaign(mgr: Any, target: _Elect, ttl_ms: int, opts: Options) -> Lease:
    """The campaign through the shared acquisition path. Without ``wait_ms`` a campaign waits
    until it leads (not the manager's retry policy), so on the main thread it always runs on a
    helper thread, where a Ctrl-C ends it at once."""
    waits = opts.wait_ms != 0 and threading.get_ident() == _Process.main_ident
    key = opts.key
    if waits or opts.cancel is not None:
        return _acquire._acquire_cancellable(
            mgr, target.name, ttl_ms, key, opts.cancel, waits, target
        )  # fmt: skip
    return _acquire._direct(mgr, target.name, ttl_ms, key, target, None)


class Campaign:
    """What :meth:`Election.campaign` returns: a context manager that campaigns when entered
    (``with election.campaign(value, ttl_ms) as leadership:``, giving the
    :class:`Leadership`) and resigns and closes it when the block ends. Entered once. Not
    constructed directly."""

    __slots__ = ("_mgr", "_target", "_ttl", "_opts", "_on_lost", "_leadership", "_entered")

    def __init__(self, mgr: Any, target: _Elect, ttl_ms: int, opts: Options, on_lost: Any):
        self._mgr = mgr
        self._target = target
        self._ttl = ttl_ms
        self._opts = opts
        self._on_lost = on_lost
        self._leadership: Optional[Leadership] = None
        self._entered = False

    def __enter__(self) -> Leadership:
        if self._entered:
            raise RuntimeError("a campaign(...) is entered once: call campaign(...) again")
        self._entered = True
        lease = _campaign(self._mgr, self._target, self._ttl, self._opts)
        ld = self._leadership = _leadership(lease, self._target, self._opts, self._on_lost)
        return ld

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        ld, self._leadership = self._leadership, None
        if ld is not None:
            ld.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        state = "leading" if self._leadership is not None else (
            "done" if self._entered else "new")  # fmt: skip
        return f"<redlock.Campaign {self._target.label()} {state}>"


class AsyncCampaign:
    """What :meth:`Election.acampaign` returns: :class:`Campaign` for asyncio code
    (``async with election.acampaign(value, ttl_ms) as leadership:``). The campaign waits off
    the event loop, on the binding's helper threads; cancelling the task while it waits ends
    the campaign and leaves nothing held (as :meth:`Redlock.alock`). Leaving the block
    resigns and closes, off the loop. Entered once. Not constructed directly."""

    __slots__ = ("_mgr", "_target", "_ttl", "_opts", "_on_lost", "_leadership", "_entered")

    def __init__(self, mgr: Any, target: _Elect, ttl_ms: int, opts: Options, on_lost: Any):
        self._mgr = mgr
        self._target = target
        self._ttl = ttl_ms
        self._opts = opts
        self._on_lost = on_lost
        self._leadership: Optional[Leadership] = None
        self._entered = False

    async def __aenter__(self) -> Leadership:
        if self._entered:
            raise RuntimeError("an acampaign(...) is entered once: call acampaign(...) again")
        self._entered = True
        ld = await _alead(self._mgr, self._target, self._ttl, self._opts, self._on_lost)
        self._leadership = ld
        return ld

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        from . import _aio

        ld, self._leadership = self._leadership, None
        if ld is not None:
            await _aio._off_loop(ld.__exit__, exc_type, exc, tb)

    def __repr__(self) -> str:
        state = "leading" if self._leadership is not None else (
            "done" if self._entered else "new")  # fmt: skip
        return f"<redlock.AsyncCampaign {self._target.label()} {state}>"


async def _alead(mgr: Any, target: _Elect, ttl_ms: int, opts: Options, on_lost: Any) -> Leadership:
    """A campaign awaited off the event loop (``_aio``'s acquisition), and its leadership."""
    from . import _aio

    lease = await _aio._acquire(mgr, target.name, ttl_ms, opts.key, opts.cancel, target)
    return _leadership(lease, target, opts, on_lost)


class Election:
    """A leader election over the quorum, made by :meth:`Redlock.election`: candidates
    campaign (:meth:`campaign`, :meth:`lead`) and one of them leads at a time; anyone reads
    the :meth:`leader` or :meth:`observe`\\ s each new one. Every blocking call has an asyncio
    form (:meth:`acampaign`, :meth:`alead`, :meth:`aleader`, :meth:`aobserve`).

    The handle holds only the name and its manager and sends nothing itself: any number of
    threads may share it. Its calls raise :class:`HandleClosed` once the manager is closed.
    An election and a lock of the same name are independent (its key is ``redlock-elect:``
    followed by the lock key of its name; the leader record, ``redlock-leader:`` and that
    key, is kept on the nodes without a TTL, as the fencing counters are).
    """

    __slots__ = ("_mgr", "_name")

    def __init__(self, mgr: Any, name: bytes) -> None:
        # Not constructed directly: Redlock.election checks the name.
        self._mgr = mgr
        self._name = name

    @property
    def name(self) -> bytes:
        """The election's name as bytes (a ``str`` name is its UTF-8 encoding)."""
        return self._name

    @property
    def manager(self) -> _Manager:
        """The :class:`Redlock` manager it goes through."""
        return self._mgr

    def campaign(
        self,
        value: Any,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Leadership], None]] = None,
    ) -> Campaign:
        """A campaign with ``value`` for a leadership of ``ttl_ms``, as a context manager::

            with mgr.election("scheduler").campaign(b"10.0.0.7:8080", 10_000) as leadership:
                ...   # leading in term leadership.term; resigns when the block ends

        Entering it campaigns (``redlock_campaign``) until this candidate leads and gives
        the :class:`Leadership`; leaving it resigns and closes. Arguments are checked here,
        when ``campaign`` is called (nothing is sent on an error).

        Args:
            value: what observers read of this leader (an address, say): ``str`` (UTF-8) or
                ``bytes``, at most :data:`MAX_LEADER_VALUE` (65536) bytes.
            ttl_ms: the leadership's TTL in milliseconds, as a lock's (at most the manager's
                ``max_ttl_ms``); it is renewed automatically, for as long as the process
                lives, unless ``auto_renew`` bounds it.
            wait_ms: ``None`` (the default): wait until this candidate leads (not the
                manager's retry policy); ``0``: one attempt; ``> 0``: give up with
                :class:`NotAcquired` after that many milliseconds. A wait is woken by the
                leader's resignation (or its TTL running out).
            notify, cancel: as for :meth:`Redlock.acquire` (a fired :class:`Cancel` ends the
                wait with :class:`Cancelled`, leaving nothing held; so does a Ctrl-C on the
                main thread, as ``KeyboardInterrupt``).
            auto_renew, max_hold_ms, max_extensions: ``auto_renew=True`` replaces the
                default renewal with one bounded as for :meth:`Redlock.acquire`.
            on_lost: called once with the :class:`Leadership` if it is lost, on a daemon
                thread of this binding (with or without ``auto_renew``).

        Raises (when entered):
            NotAcquired: another leads and ``wait_ms`` is over.
            Cancelled, Unavailable, AuthFailed, Internal, HandleClosed: as for
                :meth:`Redlock.acquire`.
        Raises (here):
            InvalidArgument: a value over :data:`MAX_LEADER_VALUE` bytes, a TTL, ``wait_ms``
                or bound out of range.
            TypeError: an argument of the wrong type; ``owner``, ``shared``, ``fair``,
                ``fenced`` and ``drop_out_ms`` are not accepted (a leadership is always
                fenced, and neither reentrant, shared nor fair).
        """
        target, ttl, opts = self._args(
            value, ttl_ms, wait_ms, notify, cancel, auto_renew, max_hold_ms, max_extensions,
            on_lost,
        )  # fmt: skip
        return Campaign(self._mgr, target, ttl, opts, on_lost)

    def lead(
        self,
        value: Any,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Leadership], None]] = None,
    ) -> Leadership:
        """Campaigns at once, as entering :meth:`campaign` does, and returns the
        :class:`Leadership`, for code that does not lead within one block: resign with
        :meth:`Leadership.resign` (then :meth:`Leadership.close`), or use the leadership in
        a ``with`` block. Same arguments and exceptions as :meth:`campaign`."""
        target, ttl, opts = self._args(
            value, ttl_ms, wait_ms, notify, cancel, auto_renew, max_hold_ms, max_extensions,
            on_lost,
        )  # fmt: skip
        lease = _campaign(self._mgr, target, ttl, opts)
        return _leadership(lease, target, opts, on_lost)

    def acampaign(
        self,
        value: Any,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Leadership], None]] = None,
    ) -> AsyncCampaign:
        """:meth:`campaign` for asyncio code: an asynchronous context manager
        (``async with election.acampaign(value, ttl_ms) as leadership:``) that campaigns off
        the event loop; cancelling the task while it waits leaves nothing held. Same
        arguments and exceptions as :meth:`campaign`."""
        target, ttl, opts = self._args(
            value, ttl_ms, wait_ms, notify, cancel, auto_renew, max_hold_ms, max_extensions,
            on_lost,
        )  # fmt: skip
        return AsyncCampaign(self._mgr, target, ttl, opts, on_lost)

    async def alead(
        self,
        value: Any,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Leadership], None]] = None,
    ) -> Leadership:
        """:meth:`lead` for asyncio code, off the event loop and cancellable as
        :meth:`acampaign`. Resign with :meth:`Leadership.aresign`."""
        target, ttl, opts = self._args(
            value, ttl_ms, wait_ms, notify, cancel, auto_renew, max_hold_ms, max_extensions,
            on_lost,
        )  # fmt: skip
        return await _alead(self._mgr, target, ttl, opts, on_lost)

    def leader(self) -> Optional[Leader]:
        """The current leader, read from every node (``redlock_leader_get``): a
        :class:`Leader` ``(term, value, validity_ms)``, or ``None`` when no leader is held by
        a quorum (nobody elected, the last leadership over, or a campaign under way).

        Raises:
            Unavailable: fewer than a quorum of nodes answered.
            InvalidArgument: a name whose key falls in the library's own namespaces (only
                with ``key_prefix=""``).
            HandleClosed: the manager was closed.
        """
        return _read(self._mgr, _core._c.redlock_leader_get, self._name)

    async def aleader(self) -> Optional[Leader]:
        """:meth:`leader` for asyncio code, off the event loop."""
        from . import _aio

        return await _aio._off_loop(self.leader)

    def wait_change(
        self, after_term: int = 0, timeout_ms: int = OBSERVE_SLICE_MS
    ) -> Optional[Leader]:
        """Waits up to ``timeout_ms`` for a leader whose term is above ``after_term`` (0: any
        leader) and returns it, or ``None`` when the time is up (``redlock_leader_wait_change``).
        Woken by the nodes' announcement of each new term, not by polling. A leader elected
        meanwhile is returned as the latest, whatever terms were missed.

        Raises:
            Unavailable: the nodes could not be read when the time was up.
            InvalidArgument, TypeError: an argument out of range or of the wrong type.
            HandleClosed: the manager was closed.
        """
        if isinstance(after_term, bool) or not isinstance(after_term, int):
            raise TypeError(f"after_term must be an int, not {type(after_term).__name__}")
        if not 0 <= after_term < 2**64:
            raise InvalidArgument(f"after_term must be in 0..2**64-1, got {after_term}")
        timeout = _u32("timeout_ms", timeout_ms)
        c = _core._c
        return _read(self._mgr, c.redlock_leader_wait_change, self._name, after_term, timeout)

    def observe(self) -> Iterator[Leader]:
        """Every leader from now on, in increasing term order: an iterator that yields the
        current leader first (if any), then each new one as it is elected, blocking until
        then (woken by the nodes' announcements). Terms never repeat or go back;
        intermediate ones may be skipped, never the latest. A proclamation keeps its term and
        is not yielded again. Each wait is a :meth:`wait_change` of at most
        :data:`OBSERVE_SLICE_MS`, so a Ctrl-C or a closed manager is noticed within about a
        second; :class:`Unavailable` nodes are waited out.

        Raises (from ``next``): HandleClosed once the manager is closed; InvalidArgument for
        a name in the library's own namespaces."""
        last = 0
        while True:
            try:
                found = self.wait_change(last, OBSERVE_SLICE_MS)
            except Unavailable:
                continue
            if found is not None:
                last = found.term
                yield found

    async def aobserve(self) -> AsyncIterator[Leader]:
        """:meth:`observe` for asyncio code: an asynchronous iterator (``async for leader in
        election.aobserve():``) whose waits run off the event loop. Cancelling the task ends
        it once the current wait (at most about a second) has returned."""
        from . import _aio

        last = 0
        while True:
            try:
                found = await _aio._off_loop(self.wait_change, last, OBSERVE_SLICE_MS)
            except Unavailable:
                continue
            if found is not None:
                last = found.term
                yield found

    def _args(
        self, value: Any, ttl_ms: Any, wait_ms: Any, notify: Any, cancel: Any, auto_renew: Any,
        max_hold_ms: Any, max_extensions: Any, on_lost: Any,
    ) -> Tuple[_Elect, int, Options]:
        """The target, TTL and options of a campaign, checked."""
        if self._mgr._handle.closed:
            raise HandleClosed("the manager is closed")
        target = _Elect(self._name, _value(value))
        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _campaign_options(
            wait_ms, notify, cancel, auto_renew, max_hold_ms, max_extensions, on_lost
        )
        return target, ttl, opts

    def __reduce__(self) -> Any:
        raise TypeError(
            "a redlock.Election cannot be pickled or sent to another process: call "
            "mgr.election(name) in each process"
        )

    def __repr__(self) -> str:
        return f"<redlock.Election name={self._name!r}>"
