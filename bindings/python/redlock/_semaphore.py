"""The counting semaphore: :class:`Semaphore`, made by :meth:`Redlock.semaphore`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from . import _acquire
from ._args import Options, _Sem, _ttl, options
from ._cancel import Cancel
from ._lease import Lease

if TYPE_CHECKING:  # annotations only: imported on first use
    from ._aio import AsyncLock

#: The manager (``redlock.Redlock``), which imports this module.
_Manager = Any


def _options(
    wait_ms: Any, fenced: Any, auto_renew: Any, max_hold_ms: Any, max_extensions: Any,
    notify: Any, cancel: Any, on_lost: Any,
) -> Options:
    """The checked options of a permit's acquisition: those of a lock without ``owner``,
    ``shared``, ``fair`` and ``drop_out_ms``."""
    return options(
        wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, None, False,
        False, None, on_lost,
    )  # fmt: skip


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

    def __init__(self, mgr: _Manager, sem: _Sem) -> None:
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
    def manager(self) -> _Manager:
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
        on_lost: Optional[Callable[[Lease], None]] = None,
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
            auto_renew, max_hold_ms, max_extensions, on_lost: auto-renewal of the permit from
                the grant on, and the callback called once if it is lost, as for
                :meth:`Redlock.acquire`.

        Returns:
            A :class:`Lease`, the permit (:attr:`Lease.permit` is ``(slot, permits)``); use
            it in a ``with`` block to release it when the block ends.

        Raises:
            NotAcquired: every permit was held (on every attempt).
            InvalidArgument: the nodes record another permit count for this semaphore
                (the message names it; a new count applies once no permit is held); or a
                TTL, ``wait_ms`` or renewal bound out of range, or a bound or ``on_lost``
                without ``auto_renew`` (nothing is sent).
            Cancelled, Unavailable, AuthFailed, Internal, HandleClosed: as for
                :meth:`Redlock.acquire`.
            TypeError: an argument of the wrong type (``owner``, ``shared``, ``fair`` and
                ``drop_out_ms`` are not accepted). Nothing is sent.
        """
        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, on_lost
        )
        return self._take(ttl, opts)

    def lock(
        self,
        ttl_ms: int,
        *,
        wait_ms: Optional[int] = None,
        fenced: bool = False,
        notify: bool = True,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """Takes one permit for ``ttl_ms`` milliseconds, retrying: :meth:`acquire`, with the
        same options, as :meth:`Redlock.lock` is for a lock. With ``wait_ms=None`` it
        retries as configured; with ``wait_ms`` it attempts again whenever a holder releases
        a permit until ``wait_ms`` milliseconds have passed (``0``: one attempt). Use it in a
        ``with`` block::

            with mgr.semaphore("exports", 4).lock(60_000, wait_ms=30_000) as permit:
                ...   # released when the block ends

        Same arguments (``wait_ms``, ``fenced``, ``notify``, ``cancel``, ``auto_renew``,
        ``max_hold_ms``, ``max_extensions``, ``on_lost``), result and exceptions as
        :meth:`acquire`."""
        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, on_lost
        )
        return self._take(ttl, opts)

    def try_acquire(
        self,
        ttl_ms: int,
        *,
        fenced: bool = False,
        cancel: Optional[Cancel] = None,
        auto_renew: bool = False,
        max_hold_ms: Optional[int] = 0,
        max_extensions: Optional[int] = 0,
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """One attempt to take a permit for ``ttl_ms`` milliseconds, with no retry:
        :meth:`acquire` with ``wait_ms=0``. Raises :class:`NotAcquired` at once when every
        permit is held. Same arguments (``fenced``, ``cancel``, ``auto_renew``,
        ``max_hold_ms``, ``max_extensions``, ``on_lost``), result and exceptions as
        :meth:`acquire`."""
        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _options(0, fenced, auto_renew, max_hold_ms, max_extensions, True, cancel, on_lost)
        return self._take(ttl, opts)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
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

        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, on_lost
        )
        return _aio.alock(self._mgr, self._sem.name, ttl, opts, self._sem)

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
        on_lost: Optional[Callable[[Lease], None]] = None,
    ) -> Lease:
        """:meth:`acquire` for asyncio code, off the event loop and cancellable as
        :meth:`Redlock.aacquire`. Same arguments, result and exceptions as :meth:`acquire`.
        Release the permit with :meth:`Lease.aunlock` (then :meth:`Lease.close`), or prefer
        :meth:`alock`, which does both."""
        from . import _aio

        ttl = _ttl("ttl_ms", ttl_ms)
        opts = _options(
            wait_ms, fenced, auto_renew, max_hold_ms, max_extensions, notify, cancel, on_lost
        )
        return await _aio.aacquire(self._mgr, self._sem.name, ttl, opts, self._sem)

    def _take(self, ttl_ms: int, opts: Options) -> Lease:
        """One permit through the manager (the options checked)."""
        # Through the manager's handle and cached options objects: a permit's key is that of
        # an acquisition without an owner, exclusive and unfair, shared with its locks.
        return _acquire.acquire(self._mgr, self._sem.name, ttl_ms, opts, self._sem)

    def __reduce__(self) -> Any:
        raise TypeError(
            "a redlock.Semaphore cannot be pickled or sent to another process: call "
            "mgr.semaphore(name, permits) in each process"
        )

    def __repr__(self) -> str:
        return f"<redlock.Semaphore name={self._sem.name!r} permits={self._sem.permits}>"
