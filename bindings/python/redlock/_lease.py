"""A held lock: :class:`Lease`, and the ``on_lost`` watcher thread of an auto-renewing one."""

from __future__ import annotations

import ctypes
import itertools
import threading
import weakref
from types import TracebackType
from typing import Any, Callable, List, Optional, Tuple, Type

from . import _core, _ffi
from ._args import _UINT32_MAX, _ttl, _u32
from ._core import _check, _err_buf, _raise
from ._errors import HandleClosed, NodeOutcome, RedlockError
from ._handle import _Handle

#: How long one ``redlock_lease_wait_lost`` call of an ``on_lost`` watcher may last. Every way
#: a watcher has to end (unlock, stop_renewal, close, the lease being dropped, loss) wakes it at
#: once: the wait returns as soon as renewal stops, and closing or dropping a lease that a call
#: is blocked in stops renewal first. The slice is only a safety net.
_WATCH_SLICE_MS = 60_000

# Renewal generations: a watcher serves only the ``auto_renew`` call it was started or handed
# over by.
_generations = itertools.count(1)

_byref = ctypes.byref

# Guards only the creation of a lease's ``_Watch`` (once per lease); the hand-over between
# ``auto_renew`` and the lease's watcher thread is guarded by that ``_Watch``'s own lock.
_watch_create_lock = threading.Lock()

# NodeOutcome members by value (an Enum call per node would cost more than the C calls).
_OUTCOMES = {o.value: o for o in NodeOutcome}


def _outcome(value: int) -> NodeOutcome:
    # A newer library may report an outcome this package does not know: kept as an int.
    return _OUTCOMES.get(value, value)  # type: ignore[return-value]


def _stop_renewal(ptr: Any) -> None:
    _core._c.redlock_lease_stop_renewal(ptr)


def _lost_reason(ptr: Any) -> Optional[str]:
    """``redlock_lease_lost_reason`` of a lease (its pointer, held by the caller), whole."""
    reason = _core._c.redlock_lease_lost_reason
    # snprintf-style: the first call only sizes (0: not lost); a lost lease's reason never
    # changes, so the second call fits. The loop is only a safety net.
    n = reason(ptr, None, 0)
    for _ in range(4):
        if not n:
            return None
        buf = ctypes.create_string_buffer(n + 1)
        got = reason(ptr, buf, n + 1)
        if got <= n:
            return buf.raw[:got].decode("utf-8", "replace") if got else None
        n = got
    raise RedlockError("redlock_lease_lost_reason kept growing")  # not expected


#: What a closed lease's :attr:`Lease.lost` and :attr:`Lease.lost_reason` answer when
#: :meth:`Lease.close` could not read them (a lease closed in a forked child).
_UNKNOWN_FINAL = (False, None)


def _close_dropped_lease(handle: _Handle) -> None:
    # A lease whose ``on_lost`` watcher is blocked in wait_lost was garbage-collected: stop its
    # renewal (which wakes the watcher) and free the handle when the watcher lets go.
    handle.close(_stop_renewal)


class _Watch:
    """What a lease's ``on_lost`` watcher thread shares with ``auto_renew`` (one per lease,
    under its ``lock``): the generation and callback to serve, and whether the thread is
    ``alive``. While it is, ``auto_renew(on_lost=...)`` hands its generation and callback to
    that thread instead of starting another, so a lease has at most one watcher."""

    __slots__ = ("lock", "gen", "on_lost", "alive")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.gen = 0
        self.on_lost: Optional[Callable[["Lease"], None]] = None
        self.alive = False


class Lease:
    """A held lock, returned by :meth:`Redlock.acquire`, :meth:`Redlock.lock`,
    :meth:`Redlock.try_lock` and :meth:`Redlock.acquire_many` (one lease for the whole set:
    :meth:`unlock`, :meth:`extend` and auto-renewal act on every resource of it), or a permit
    of a :class:`Semaphore` (:meth:`Semaphore.acquire` and its variants; :attr:`permit` says
    which slot it holds), which unlocks, extends and renews as a lock does. A fair lock's
    (``fair=True``) has :attr:`is_fair` true and, if it queued, a :attr:`ticket`.

    Use it as a context manager (``with mgr.lock(...) as lk:``) to unlock when the block ends,
    or call :meth:`unlock` and then :meth:`close` yourself.

    **When the unlock at the end of a ``with`` block fails** (typically :class:`NotHeld`
    because the lock expired while the block ran, or :class:`Unavailable`), the exception is
    raised from the ``with`` statement, so that you learn your critical section outlived the
    lock. If another exception is already propagating out of the block, that exception wins
    and the unlock failure is attached to it as a note (Python 3.11+). Either way the lease
    is closed. If you called :meth:`unlock` (or :meth:`close`) inside the block, nothing more
    is done at its end.

    A released lease is a fact a program may still read: after :meth:`close` (and so after
    a ``with`` block), reading never raises. The facts recorded at acquisition
    (:attr:`token`, :attr:`value`, :attr:`resource`, :attr:`resources`, :attr:`is_shared`,
    :attr:`is_fair`, :attr:`ticket`, :attr:`permit`, :attr:`fencing_token`,
    :attr:`node_outcomes`, :attr:`granted`) keep their values; :attr:`validity_ms` reads 0,
    :attr:`valid` and :attr:`renewing` ``False``, and :attr:`ttl_ms`, :attr:`lost` and
    :attr:`lost_reason` what they read when :meth:`close` was called. The operations
    (:meth:`extend`, :meth:`unlock`, :meth:`auto_renew`, :meth:`stop_renewal`,
    :meth:`wait_lost`) raise :class:`HandleClosed`.

    Not constructed directly: :meth:`Redlock.acquire`, :meth:`Redlock.lock`,
    :meth:`Redlock.try_lock` and the semaphore's methods return one.

    A lease stays usable after its :class:`Redlock` is closed. Calls on one lease from several
    threads are serialised by the library. Dropping a lease without unlocking it frees its
    handle (at garbage collection) but does **not** unlock: the lock expires after its TTL.
    """

    __slots__ = (
        "_handle",
        "_token",
        "_value",
        "_resource",
        "_resources",
        "_shared",
        "_fair",
        "_ticket",
        "_permit",
        "_outcomes",
        "_granted",
        "_fencing",
        "_unlock_attempted",
        "_renew_gen",
        "_watch",
        "_ttl",
        "_final",
        "__weakref__",
    )

    def __init__(
        self,
        handle: _Handle,
        resource: bytes,
        fenced: bool,
        node_count: int,
        renewing: bool,
        shared: bool = False,
        resources: Optional[Tuple[bytes, ...]] = None,
        permit: bool = False,
        fair: bool = False,
        ttl_ms: int = 0,
    ) -> None:
        # Runs right after the acquisition returns, while the library still takes in the late
        # nodes' replies: kept to the few C calls the facts below need (``node_count`` comes
        # from the manager; the token is decoded and the outcomes converted when read).
        # ``handle`` has owned the C pointer since the library wrote it (see
        # ``Redlock._acquire``), so it is freed whatever happens below. No other thread can
        # know of it yet: the reads below need no acquire().
        c = _core._c
        self._handle = handle
        ptr = handle._ptr
        self._unlock_attempted = False
        # Renewal turned on by the acquisition (``acquire(auto_renew=True)``) counts as an
        # ``auto_renew()`` call of its own generation, as if made right after the grant.
        self._renew_gen = next(_generations) if renewing else 0
        self._watch: Optional[_Watch] = None
        # The TTL of the acquisition, then of each successful extend() (renewal extends to
        # it): what ttl_ms reads once closed. ``(lost, lost_reason)`` as read by close().
        self._ttl = ttl_ms
        self._final: Optional[Tuple[bool, Optional[str]]] = None
        self._resource = resource
        # ``None`` for one resource (``[resource]``); the caller's tuple for ``acquire_many``
        # (the library keeps them in that order: ``redlock_lease_resource_at``).
        self._resources = resources
        self._shared = shared
        self._token: Any = c.redlock_lease_token(ptr)  # bytes until read
        self._value: Any = c.redlock_lease_value(ptr)  # bytes until read
        arr = (_ffi.node_outcome_t * node_count)()
        total = c.redlock_lease_node_outcomes(ptr, arr, node_count)
        if total > node_count:  # not expected: the report has one entry per node
            arr = (_ffi.node_outcome_t * total)()
            total = c.redlock_lease_node_outcomes(ptr, arr, total)
        # Raw values; turned into NodeOutcome members when read.
        self._outcomes: Tuple[int, ...] = tuple(arr[:total])
        self._granted: int = c.redlock_lease_granted(ptr)
        self._fencing: Optional[int] = None
        if fenced:
            self._fencing = c.redlock_lease_fencing_token(ptr) or None
        # Asked of the library only for a fair lock (no other lease has a ticket).
        self._fair = fair
        self._ticket: Optional[int] = None
        if fair:
            ticket = ctypes.c_uint64()
            if c.redlock_lease_ticket(ptr, _byref(ticket)):
                self._ticket = ticket.value
        # Asked of the library only for a semaphore's permit (a lock has none).
        self._permit: Optional[Tuple[int, int]] = None
        if permit:
            slot, permits = ctypes.c_uint32(), ctypes.c_uint32()
            if c.redlock_lease_permit(ptr, _byref(slot), _byref(permits)):
                self._permit = (slot.value, permits.value)

    # ---- facts recorded at acquisition ----

    @property
    def token(self) -> str:
        """This lease's random token, 40 hex characters, unique to it. It is **not** what the
        nodes store under the lock's key: that is :attr:`value`, which for a plain lock
        begins with the token (``<token>.<unix ms>[ label]``). For a reentrant or shared lock
        and a semaphore's permit, the token names the lease's hold on the nodes (and
        :attr:`value` is the token itself)."""
        token = self._token
        if type(token) is not str:
            token = self._token = token.decode("ascii") if token else ""
        return token

    @property
    def value(self) -> str:
        """What this lease stored on the nodes (``redlock_lease_value``), the proof of ownership
        that every unlock and extension compares: for a plain lock (each key of an
        :meth:`Redlock.acquire_many` set too), ``<token>.<unix ms>[ label]``: :attr:`token`,
        then ``.`` and the wall-clock milliseconds at which the attempt started, then a space
        and the manager's ``label`` if it has one (``"<40 hex>.1700000000000
        web-1:4242"``); for a reentrant lock (``owner=``), :attr:`token` (the nodes show its
        owner id instead); for a shared lock and a :class:`Semaphore`'s permit, :attr:`token`
        (the nodes keep one hold per lease, named by it). A plain lock's value is the identity
        :meth:`Redlock.holders` reports for it: ``holder.id == lease.value.encode()``."""
        value = self._value
        if type(value) is not str:
            value = self._value = value.decode("utf-8", "replace") if value else ""
        return value

    @property
    def resource(self) -> bytes:
        """The resource name as bytes (a ``str`` resource is its UTF-8 encoding); the first
        one for a lease of :meth:`Redlock.acquire_many`; the semaphore's name for a
        permit."""
        return self._resource

    @property
    def resources(self) -> List[bytes]:
        """Every resource the lease holds, as bytes: ``[resource]``, or the resources given to
        :meth:`Redlock.acquire_many`, in that order (a new list on each read)."""
        many = self._resources
        return [self._resource] if many is None else list(many)

    @property
    def is_shared(self) -> bool:
        """True for a shared (read) lock, taken with ``shared=True``; False for an exclusive
        one."""
        return self._shared

    @property
    def is_fair(self) -> bool:
        """True for a fair (first-come, first-served) lock, taken with ``fair=True``."""
        return self._fair

    @property
    def ticket(self) -> Optional[int]:
        """For a fair lock (``fair=True``) that queued: its ticket, an ``int`` that ordered it
        among the resource's waiters (lower tickets are granted first; a waiter that queued
        after another had finished queueing has a larger one), as ``redlock_lease_ticket``
        reports it. ``None`` for a fair lock granted at once with nobody queued, and for every
        other lease."""
        return self._ticket

    @property
    def permit(self) -> Optional[Tuple[int, int]]:
        """For a permit of a :class:`Semaphore`: ``(slot, permits)``, the slot it holds (0 to
        ``permits - 1``; no two valid permits of one semaphore hold the same slot) and the
        semaphore's permit count, as ``redlock_lease_permit`` reports them. ``None`` for a
        lock."""
        return self._permit

    @property
    def fencing_token(self) -> Optional[int]:
        """The fencing token of a lease taken with ``fenced=True``: an ``int`` strictly greater
        than that of every earlier fenced grant of this resource (while a majority of the nodes
        keeps its data). ``None`` for a plain lease.

        Pass it with every write to the protected store, and have the store refuse a token
        smaller than the largest it has seen (e.g. ``UPDATE … SET fence = $t WHERE id = $id
        AND fence < $t``): a holder that paused past its validity can then no longer overwrite
        the work of the next holder. Renewal and :meth:`extend` keep the token."""
        return self._fencing

    @property
    def node_outcomes(self) -> List[NodeOutcome]:
        """Each node's :class:`NodeOutcome` during the acquisition, in configuration order."""
        return [_outcome(v) for v in self._outcomes]

    @property
    def granted(self) -> int:
        """How many nodes had granted the lock when the acquisition was decided (at least the
        quorum). Nodes that answered after the decision are ``PENDING``, not counted here."""
        return self._granted

    # ---- live state ----

    @property
    def validity_ms(self) -> int:
        """The remaining validity in milliseconds (rounded down): 0 once expired, unlocked,
        lost or closed. Finish the critical section before it reaches 0."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return 0
        try:
            return _core._c.redlock_lease_validity_ms(p)
        finally:
            h.release()

    @property
    def valid(self) -> bool:
        """True while the remaining validity is positive; ``False`` once closed."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return False
        try:
            return _core._c.redlock_lease_is_valid(p)
        finally:
            h.release()

    @property
    def ttl_ms(self) -> int:
        """The TTL, in milliseconds, of the last successful acquisition or extension (by
        :meth:`extend` or by auto-renewal); after :meth:`close`, what it was then."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return self._ttl
        try:
            return _core._c.redlock_lease_ttl_ms(p)
        finally:
            h.release()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the ``with`` block ended)."""
        return self._handle.closed

    def extend(self, ttl_ms: int) -> None:
        """Extends the lock to ``ttl_ms`` milliseconds from now, if a quorum confirms before
        the current validity ends. Never recreates an expired key. A fenced lease keeps its
        :attr:`fencing_token`; :attr:`ttl_ms` becomes ``ttl_ms``.

        Raises:
            NotHeld: the lock expired, was unlocked or was taken over (nothing is sent when
                the validity already ended).
            Unavailable: too many nodes failed (:class:`AuthFailed`: refused the
                credentials).
            InvalidArgument: ``ttl_ms`` out of range (it must exceed its drift allowance and
                be at most the manager's ``max_ttl_ms``).
            TypeError: ``ttl_ms`` is not an ``int``.
            HandleClosed: the lease was closed.
        """
        if type(ttl_ms) is not int or not 0 < ttl_ms <= _UINT32_MAX:
            ttl_ms = _ttl("ttl_ms", ttl_ms)
        err = _err_buf()
        h = self._handle
        p = h.acquire()
        try:
            st = _core._c.redlock_extend(p, ttl_ms, err, _ffi.ERR_LEN)
            if not st:
                self._ttl = ttl_ms
        finally:
            h.release()
        if st:
            _raise(st, err)

    def unlock(self) -> None:
        """Releases the lock on every node (only where it still holds this lease's token).
        Does not close the lease; from now on :attr:`validity_ms` reads 0. Stops auto-renewal
        first.

        Raises:
            NotHeld: expired, already unlocked, or not confirmed by a quorum.
            Unavailable: too many nodes failed (:class:`AuthFailed`: refused the
                credentials); the lock expires after its TTL.
            HandleClosed: the lease was closed.
        """
        err = _err_buf()
        h = self._handle
        p = h.acquire()
        try:
            self._unlock_attempted = True
            self._renew_gen = 0  # an unlocked lease is never lost: its watcher may go
            st = _core._c.redlock_unlock(p, err, _ffi.ERR_LEN)
        finally:
            h.release()
        if st:
            _raise(st, err)

    # ---- auto-renewal ----

    def auto_renew(
        self,
        *,
        max_hold_ms: Optional[int] = None,
        max_extensions: Optional[int] = None,
        on_lost: Optional[Callable[["Lease"], None]] = None,
    ) -> None:
        """Turns on auto-renewal: the manager's renewal thread (in the library) extends the lock
        to its TTL whenever a third of it has passed, and restores the key on a node that lost
        it while the lease is valid. It never recreates an expired or released lock. A fenced
        lease keeps its :attr:`fencing_token` while it renews.

        Renewal is bounded by ``max_hold_ms`` from the acquisition (``None`` or 0: the
        library's default, one hour) and by ``max_extensions`` automatic extensions (``None``
        or 0: no limit besides the hold time). When a renewal cannot be confirmed in time, or a
        bound is reached, the lease is marked lost shortly *before* its validity ends:
        :attr:`lost` turns true, :attr:`lost_reason` says why, :attr:`renewing` turns false
        and :attr:`validity_ms` reads 0 for good.

        ``on_lost``, if given, is then called once with this lease, on a daemon thread of this
        binding that waits with ``redlock_lease_wait_lost`` (Python code never runs on the
        library's renewal thread, so neither a slow callback nor the GIL can delay other
        leases' renewals). An exception it raises goes to :func:`threading.excepthook`. It is
        not called after :meth:`stop_renewal`, :meth:`unlock` or :meth:`close`, or once the
        lease object is garbage-collected. Keep a reference to the lease while it renews:
        dropping it frees the handle, which stops renewal (without unlocking).

        :meth:`unlock` stops renewal first. Calling this again replaces the settings (and the
        callback; ``on_lost=None`` then means no callback). ``Redlock.acquire(...,
        auto_renew=True, on_lost=...)`` (and ``lock``, ``try_lock``, the semaphore's,
        multi-resource and asyncio forms) does the same as this call right after the grant.

        Raises:
            NotHeld: the lease was unlocked, lost or has expired.
            InvalidArgument: a bound out of range.
            TypeError: a bound is not an ``int``, or ``on_lost`` is not callable.
            Internal: the renewal thread could not be started.
            HandleClosed: the lease was closed.
        """
        hold = 0 if max_hold_ms is None else _u32("max_hold_ms", max_hold_ms)
        extensions = 0 if max_extensions is None else _u32("max_extensions", max_extensions)
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
        err = _err_buf()
        gen = next(_generations)
        h = self._handle
        p = h.acquire()
        try:
            st = _core._c.redlock_lease_auto_renew(
                p, hold, extensions, _ffi.NULL_LOST_FN, None, err, _ffi.ERR_LEN
            )
            if not st:
                self._renew_gen = gen
        finally:
            h.release()
        _check(st, err)
        if on_lost is not None:
            _start_watch(self, h, gen, on_lost)

    def stop_renewal(self) -> None:
        """Stops auto-renewal without unlocking (waiting for a renewal in flight). No effect
        when renewal is off. Raises :class:`HandleClosed` after :meth:`close`."""
        h = self._handle
        p = h.acquire()
        try:
            self._renew_gen = 0
            _core._c.redlock_lease_stop_renewal(p)
        finally:
            h.release()

    @property
    def renewing(self) -> bool:
        """True while auto-renewal is on: started by :meth:`auto_renew` (or by
        ``Redlock.acquire(auto_renew=True)``), and not stopped, unlocked, lost or at its bound;
        ``False`` once closed (closing stops renewal)."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return False
        try:
            return _core._c.redlock_lease_is_renewing(p)
        finally:
            h.release()

    @property
    def lost(self) -> bool:
        """True once the lease is known lost (auto-renewal failed or reached its bound). A lost
        lease never becomes valid again. After :meth:`close`, what it was then."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return self._closed_state()[0]
        try:
            return _core._c.redlock_lease_is_lost(p)
        finally:
            h.release()

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the lease was lost, once :attr:`lost` (``None`` before), for example
        ``"maximum hold time reached after 3000 ms"`` or ``"renewal failed: 1/5 extended
        (quorum 3); node 2 (…): connection refused; …"``, whole however long it is. After
        :meth:`close`, what it was then."""
        h = self._handle
        try:
            p = h.acquire()
        except HandleClosed:
            return self._closed_state()[1]
        try:
            return _lost_reason(p)
        finally:
            h.release()

    def _closed_state(self) -> Tuple[bool, Optional[str]]:
        """``(lost, lost_reason)`` as :meth:`close` read them."""
        final = self._final
        return _UNKNOWN_FINAL if final is None else final

    async def aunlock(self) -> None:
        """:meth:`unlock` for asyncio code: the call runs on a helper thread, never on the
        event loop. Not cancellable: a cancellation of the awaiting task that arrives
        meanwhile is re-raised once the unlock has returned (it is bounded by the node
        timeouts), so the lock is released, or known not to be, when the task goes on. Same
        exceptions as :meth:`unlock`."""
        from . import _aio

        await _aio._off_loop(self.unlock)

    async def aextend(self, ttl_ms: int) -> None:
        """:meth:`extend` for asyncio code, off the event loop and not cancellable, as
        :meth:`aunlock`. Same arguments and exceptions as :meth:`extend`."""
        from . import _aio

        if type(ttl_ms) is not int or not 0 < ttl_ms <= _UINT32_MAX:
            ttl_ms = _ttl("ttl_ms", ttl_ms)
        await _aio._off_loop(self.extend, ttl_ms)

    def wait_lost(self, timeout_ms: int) -> bool:
        """Blocks (with the GIL released) while auto-renewal is on, until the lease is lost or
        ``timeout_ms`` milliseconds pass; returns whether it is lost. Returns ``False`` at
        once when renewal is off (never started, or stopped by :meth:`stop_renewal`,
        :meth:`unlock` or :meth:`close`, also from another thread). Raises
        :class:`HandleClosed` after :meth:`close`."""
        timeout = _u32("timeout_ms", timeout_ms)
        h = self._handle
        p = h.acquire_waiting()
        try:
            return _core._c.redlock_lease_wait_lost(p, timeout)
        finally:
            h.release_waiting()

    def close(self) -> None:
        """Frees the C handle. Does **not** unlock (an unreleased lock expires after its TTL);
        stops auto-renewal. Idempotent. If another thread is inside a call on this lease, the
        handle is freed when that call returns; if that call is :meth:`wait_lost` (or an
        ``on_lost`` watcher waits), renewal is stopped first so that the wait returns
        ``False`` at once (this may wait for a renewal, :meth:`extend` or :meth:`unlock` in
        flight on another thread, as freeing does).

        The lease stays readable (see the class): :attr:`lost` and :attr:`lost_reason` are
        read here, and answer that from now on, as :attr:`ttl_ms` answers the last TTL
        granted."""
        h = self._handle
        if self._final is None:
            try:
                p = h.acquire()
            except RedlockError:
                pass  # closed already (by another thread), or in a forked child
            else:
                try:
                    # Never waits for a call in flight (is_lost does not; a lost lease has no
                    # renewal or extension in flight that its reason would wait for).
                    lost = bool(_core._c.redlock_lease_is_lost(p))
                    self._final = (lost, _lost_reason(p) if lost else None)
                finally:
                    h.release()
        self._renew_gen = 0
        h.close(_stop_renewal)

    def __reduce__(self) -> Any:
        raise TypeError("a redlock.Lease cannot be pickled or sent to another process")

    def __enter__(self) -> "Lease":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            if self._unlock_attempted or self._handle._closed:
                return
            try:
                self.unlock()
            except RedlockError as unlock_error:
                if exc is None:
                    raise
                add_note = getattr(exc, "add_note", None)
                if add_note is not None:
                    add_note(
                        "redlock: the unlock at the end of the with block also failed: "
                        f"{type(unlock_error).__name__}: {unlock_error}"
                    )
        finally:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle.closed else "open"
        fence = "" if self._fencing is None else f" fencing_token={self._fencing}"
        many = self._resources
        if many is None:
            what = f"resource={self._resource!r}"
        elif len(many) <= 4:
            what = f"resources={list(many)!r}"
        else:
            what = f"resources=[{many[0]!r}, {many[1]!r}, ... ({len(many)} in all)]"
        shared = " shared" if self._shared else ""
        if self._fair:
            shared += " fair" if self._ticket is None else f" fair ticket={self._ticket}"
        permit = self._permit
        if permit is not None:
            what = f"semaphore={self._resource!r} permit={permit[0]}/{permit[1]}"
        return f"<redlock.Lease {what}{shared}{fence} {state}>"



def _start_watch(
    lease: Lease, h: _Handle, gen: int, on_lost: Callable[[Lease], None]
) -> None:
    """Has the lease's ``on_lost`` watcher serve generation ``gen`` with ``on_lost``: hands
    them to the running watcher, or starts one. (Without a callback, ``auto_renew`` starts
    nothing: a live watcher of an earlier generation will not call its callback.)"""
    with _watch_create_lock:
        w = lease._watch
        first = w is None
        if first:
            w = lease._watch = _Watch()
    with w.lock:
        w.gen, w.on_lost = gen, on_lost
        if w.alive:
            return  # handed over to the running watcher
        w.alive = True
    thread = threading.Thread(
        target=_watch_lost,
        args=(weakref.ref(lease), h, w),
        name="redlock-lost-watcher",
        daemon=True,
    )
    if first:
        # If the lease is dropped while a watcher waits, stop renewal (waking the watcher)
        # and free the handle; an idempotent no-op once the lease was closed.
        weakref.finalize(lease, _close_dropped_lease, h).atexit = False
    try:
        thread.start()
    except BaseException:
        with w.lock:
            w.alive = False
        raise


def _watch_lost(
    lease_ref: "weakref.ReferenceType[Lease]", handle: _Handle, w: _Watch
) -> None:
    """Waits for the lease to be lost, then calls the current ``on_lost`` once. Ends as soon as
    its generation is superseded without a hand-over (stop, unlock, close, ``auto_renew``
    without a callback), renewal stops, or the lease object is gone. Holds no strong
    reference to the lease while it waits."""
    c = _core._c
    while True:
        try:
            p = handle.acquire_waiting()
        except RedlockError:  # closed (or a forked child)
            break
        try:
            # Returns at once when renewal is off, and as soon as it stops.
            lost = c.redlock_lease_wait_lost(p, _WATCH_SLICE_MS)
            if not lost:
                with w.lock:
                    lease = lease_ref()
                    # Under the lock, so that an auto_renew that turned renewal back on either
                    # is seen here or finds this watcher dead and starts another. Both flags
                    # are read without waiting (not even for an unlock or extend in flight),
                    # so the lock is never held across a wait.
                    lost = c.redlock_lease_is_lost(p)
                    if not lost and (
                        lease is None
                        or lease._renew_gen != w.gen
                        or not c.redlock_lease_is_renewing(p)
                    ):
                        w.alive = False
                        return
                    del lease
        finally:
            handle.release_waiting()
        if lost:
            lease = lease_ref()
            with w.lock:
                w.alive = False
                on_lost = w.on_lost if lease is not None and lease._renew_gen == w.gen else None
            if on_lost is not None:
                on_lost(lease)  # type: ignore[arg-type]
            return
    with w.lock:
        w.alive = False
