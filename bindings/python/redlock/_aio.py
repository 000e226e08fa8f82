"""asyncio: :meth:`Redlock.alock` and :meth:`Redlock.aacquire`, :meth:`Redlock.alock_many` and
:meth:`Redlock.aacquire_many`, :meth:`Semaphore.alock` and :meth:`Semaphore.aacquire`,
:meth:`Lease.aunlock` and :meth:`Lease.aextend`.

Every blocking library call runs on one of the binding's helper threads (``_threads._hand_over``,
the threads that already keep a main-thread wait interruptible), never on the event loop; the
loop is woken when the call returns. Not the loop's default executor: it has a few threads
only (``min(32, cores + 4)``), so a handful of coroutines waiting for a lock would hold every
one of them and queue the holder's unlock behind their waits. A helper thread is kept between
calls (and ends after 30 s without one), so handing a call over does not start a thread.

Cancelling a task that awaits an acquisition fires the acquisition's cancel handle (as a
Ctrl-C does on the main thread): the library returns at once while it waits, within one
round trip while it talks to the nodes, and leaves no key behind; a lease granted all the same
(the grant raced with the cancellation) is unlocked and freed. Only then is the
``CancelledError`` re-raised, so a cancelled task has never a lock held in its name. Unlocks
and extensions are not cancellable (each is bounded by the node timeouts): a cancellation
that arrives meanwhile is re-raised once the call has returned.

Imported on first use of one of these methods, so that synchronous programs never import
:mod:`asyncio`.
"""

from __future__ import annotations

import asyncio
import threading
from types import TracebackType
from typing import Any, Callable, Optional, Tuple, Type

from . import _core
from ._args import _fair, _Many, _owner, _resource, _Sem, _Target, _ttl, _u32
from ._cancel import Cancel, _cancel_hold
from ._core import Lease, Redlock, _many_key, _permit_key, _raise
from ._errors import InvalidArgument
from ._threads import _ABANDON_WAIT_S, _Call, _discard, _hand_over

__all__ = ["AsyncLock"]


class _LoopEvent(threading.Event):
    """The ``done`` event of a call handed to a helper thread from an event loop: setting it
    (on the helper thread) also resolves ``fut`` on ``loop``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: "asyncio.Future[None]") -> None:
        super().__init__()
        self._loop = loop
        self._fut = fut

    def set(self) -> None:
        super().set()
        try:
            self._loop.call_soon_threadsafe(_resolve, self._fut)
        except RuntimeError:
            pass  # the loop is closed: nobody awaits the call any more


def _resolve(fut: "asyncio.Future[None]") -> None:
    if not fut.done():
        fut.set_result(None)


class _Job:
    """A blocking function call for a helper thread (``unlock``, ``extend``, a lease's
    ``__exit__``): its result or exception is kept for the coroutine that awaits it."""

    __slots__ = ("fn", "args", "result", "error", "done")

    def __init__(self, fn: Callable[..., Any], args: Tuple[Any, ...], done: _LoopEvent) -> None:
        self.fn = fn
        self.args = args
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.done = done

    def run(self) -> None:
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # noqa: BLE001 - handed to the awaiting coroutine
            self.error = e


def _loop_future() -> Tuple[asyncio.AbstractEventLoop, "asyncio.Future[None]"]:
    loop = asyncio.get_running_loop()
    return loop, loop.create_future()


async def _wait_out(fut: "asyncio.Future[None]", limit_s: float) -> None:
    """Waits until ``fut`` is done, or ``limit_s`` seconds have passed, whatever cancellations
    arrive meanwhile: they are dropped, and the caller re-raises the one it is handling."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not fut.done():
        left = deadline - loop.time()
        if left <= 0:
            return
        try:
            await asyncio.wait((fut,), timeout=left)  # never cancels ``fut`` itself
        except asyncio.CancelledError:
            pass


async def _off_loop(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` on a helper thread; returns its result or raises its exception. Not
    cancellable: a cancellation that arrives meanwhile is re-raised once ``fn`` has returned
    (``fn`` is a library call bounded by the node timeouts), so that its effect (an unlock,
    say) is complete when the cancelled task goes on."""
    loop, fut = _loop_future()
    job = _Job(fn, args, _LoopEvent(loop, fut))
    try:
        _hand_over(job)
    except BaseException:  # noqa: BLE001 - no thread could be started: run it here
        return fn(*args)
    cancelled: Optional[BaseException] = None
    while not fut.done():
        try:
            await asyncio.wait((fut,))
        except asyncio.CancelledError as e:
            cancelled = e
    error, result = job.error, job.result
    del job
    if cancelled is not None:
        if error is not None and hasattr(cancelled, "add_note"):
            cancelled.add_note(
                f"redlock: the call cancelled meanwhile also failed: {type(error).__name__}: "
                f"{error}"
            )
        raise cancelled
    if error is not None:
        try:
            raise error
        finally:
            del error
    return result


async def _abandon(call: _Call, fut: "asyncio.Future[None]") -> None:
    """What ``_Call.abandon`` does for a thread, for a coroutine that gives up on ``call``
    (cancelled, or any other exception): the call ends and leaves no key behind, and the
    loop is never blocked meanwhile. The claims on ``call.gate`` are taken on the loop's
    thread, as the caller's (see :class:`_threads._Call`)."""
    gate = call.gate
    if gate.setdefault("start", "caller") == "caller":
        call.release()  # the library was never called
        return
    if gate.setdefault("end", "caller") == "caller":
        _core._c.redlock_cancel_fire(call.cancel_ptr)
        await _wait_out(fut, _ABANDON_WAIT_S)  # the helper discards a lease granted anyway
    elif call.status == 0:
        # Granted, and returned, before the caller gave up: unlock it off the loop.
        loop, done = _loop_future()
        job = _Job(_discard, (call.lease_h,), _LoopEvent(loop, done))
        try:
            _hand_over(job)
        except BaseException:  # noqa: BLE001 - no thread: unlock here, blocking the loop
            _discard(call.lease_h)
            return
        await _wait_out(done, _ABANDON_WAIT_S)


async def _acquire(
    mgr: Redlock,
    res: bytes,
    ttl_ms: int,
    key: _core._OptsKey,
    cancel: Optional[Cancel],
    target: Optional[_Target] = None,
) -> Lease:
    """``redlock_acquire`` (with a ``target``: ``redlock_acquire_many`` or
    ``redlock_semaphore_acquire``) on a helper thread, awaited; see the module's docstring for
    what a cancellation does."""
    ch, cp = _cancel_hold(cancel)
    try:
        call = mgr._new_call(res, ttl_ms, key, ch, cp, target)
        loop, fut = _loop_future()
        call.done = _LoopEvent(loop, fut)
        try:
            _hand_over(call)
            # Shielded: a cancellation must not cancel ``fut``, which ``_abandon`` awaits.
            await asyncio.shield(fut)
            st = call.status
            if st == 0:
                return mgr._lease(call.lease_h, res, key, target)
        except BaseException:
            await _abandon(call, fut)
            raise
    finally:
        ch.release()
    if type(st) is not int:
        raise st  # the call itself raised (not expected)
    call.lease_h._freed = True  # nothing was written: nothing to free
    _raise(st, call.err)
    raise AssertionError("unreachable")  # pragma: no cover


def _key(
    resource: Any,
    ttl_ms: Any,
    wait_ms: Any,
    fenced: Any,
    auto_renew: Any,
    max_hold_ms: Any,
    max_extensions: Any,
    notify: Any,
    cancel: Any,
    owner: Any,
    shared: Any,
    fair: Any,
    drop_out_ms: Any,
) -> Tuple[bytes, int, _core._OptsKey]:
    """The checks of :meth:`Redlock.acquire`, with the same exceptions (raised before anything
    is sent): ``(resource bytes, ttl_ms, options key)``."""
    res = _resource(resource)
    ttl = _ttl("ttl_ms", ttl_ms)
    if wait_ms is not None:
        wait_ms = _u32("wait_ms", wait_ms)
    hold = _u32("max_hold_ms", 0 if max_hold_ms is None else max_hold_ms)
    extensions = _u32("max_extensions", 0 if max_extensions is None else max_extensions)
    if auto_renew is True:
        renew: Optional[Tuple[int, int]] = (hold, extensions)
    elif auto_renew is False:
        if hold or extensions:
            raise InvalidArgument("max_hold_ms and max_extensions apply only with auto_renew=True")
        renew = None
    else:
        raise TypeError(f"auto_renew must be a bool, not {type(auto_renew).__name__}")
    if fenced is not True and fenced is not False:
        raise TypeError(f"fenced must be a bool, not {type(fenced).__name__}")
    if notify is not True and notify is not False:
        raise TypeError(f"notify must be a bool, not {type(notify).__name__}")
    if cancel is not None and not isinstance(cancel, Cancel):
        raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
    if shared is not True and shared is not False:
        raise TypeError(f"shared must be a bool, not {type(shared).__name__}")
    if shared and owner is not None:
        raise InvalidArgument("a shared lock has no owner: pass shared=True or owner=, not both")
    own = None if owner is None else _owner(owner)
    fair_key = _fair(fair, drop_out_ms, own, shared)
    return res, ttl, (wait_ms, fenced, renew, notify or not wait_ms, own, shared, fair_key)


class AsyncLock:
    """What :meth:`Redlock.alock` returns (and :meth:`Redlock.alock_many` and
    :meth:`Semaphore.alock`): an asynchronous context manager that acquires the lock when
    entered (``async with mgr.alock(...) as lease:``, giving the :class:`Lease`) and unlocks
    and closes it when the block ends, each off the event loop. Entered once: call
    :meth:`Redlock.alock` again for another acquisition. Not constructed directly."""

    __slots__ = ("_mgr", "_res", "_ttl", "_key", "_cancel", "_target", "_lease", "_entered")

    def __init__(
        self,
        mgr: Redlock,
        res: bytes,
        ttl_ms: int,
        key: _core._OptsKey,
        cancel: Optional[Cancel],
        target: Optional[_Target] = None,
    ) -> None:
        self._mgr = mgr
        self._res = res
        self._target = target
        self._ttl = ttl_ms
        self._key = key
        self._cancel = cancel
        self._lease: Optional[Lease] = None
        self._entered = False

    async def __aenter__(self) -> Lease:
        if self._entered:
            raise RuntimeError("an alock(...) is entered once: call mgr.alock(...) again")
        self._entered = True
        lease = await _acquire(
            self._mgr, self._res, self._ttl, self._key, self._cancel, self._target
        )
        self._lease = lease
        return lease

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            # ``Lease.__exit__`` on a helper thread: unlock (an unlock failure raised, or
            # added as a note to the exception leaving the block), then close.
            await _off_loop(lease.__exit__, exc_type, exc, tb)

    def __repr__(self) -> str:
        state = "held" if self._lease is not None else ("done" if self._entered else "new")
        target = self._target
        if type(target) is _Many:
            return f"<redlock.AsyncLock resources={len(target.resources)} {state}>"
        if type(target) is _Sem:
            return (
                f"<redlock.AsyncLock semaphore={target.name!r} permits={target.permits} "
                f"{state}>"
            )
        return f"<redlock.AsyncLock resource={self._res!r} {state}>"


def alock(mgr: Redlock, *args: Any) -> AsyncLock:
    res, ttl, key = _key(*args)
    return AsyncLock(mgr, res, ttl, key, args[8])


async def aacquire(mgr: Redlock, *args: Any) -> Lease:
    res, ttl, key = _key(*args)
    return await _acquire(mgr, res, ttl, key, args[8])


def alock_many(mgr: Redlock, resources: Any, ttl_ms: Any, *args: Any) -> AsyncLock:
    many, ttl, key = _many_key(resources, ttl_ms, *args)
    return AsyncLock(mgr, many.resources[0], ttl, key, args[-1], many)


async def aacquire_many(mgr: Redlock, resources: Any, ttl_ms: Any, *args: Any) -> Lease:
    many, ttl, key = _many_key(resources, ttl_ms, *args)
    return await _acquire(mgr, many.resources[0], ttl, key, args[-1], many)


def alock_permit(mgr: Redlock, sem: _Sem, ttl_ms: Any, *args: Any) -> AsyncLock:
    ttl, key = _permit_key(ttl_ms, *args)
    return AsyncLock(mgr, sem.name, ttl, key, args[-1], sem)


async def aacquire_permit(mgr: Redlock, sem: _Sem, ttl_ms: Any, *args: Any) -> Lease:
    ttl, key = _permit_key(ttl_ms, *args)
    return await _acquire(mgr, sem.name, ttl, key, args[-1], sem)
