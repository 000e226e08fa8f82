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
from ._args import Options, _OptsKey, _Target
from ._cancel import Cancel, _cancel_hold
from ._core import _raise
from ._threads import _ABANDON_WAIT_S, _Call, _discard, _hand_over, _written

# The manager (``redlock.Redlock``) and the lease (``redlock.Lease``) are passed in, never
# imported: their modules import this one (on first use), and not the other way round.
_Manager = Any
_Lease = Any

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
        await _discard_off_loop(call.lease_h)


async def _discard_off_loop(lease_h: Any) -> None:
    """``_threads._discard`` (unlock and free a lease its caller gave up on) on a helper
    thread, awaited whatever cancellations arrive meanwhile (bounded), so that the loop is
    never blocked by the unlock."""
    loop, done = _loop_future()
    job = _Job(_discard, (lease_h,), _LoopEvent(loop, done))
    try:
        _hand_over(job)
    except BaseException:  # noqa: BLE001 - no thread: unlock here, blocking the loop
        _discard(lease_h)
        return
    await _wait_out(done, _ABANDON_WAIT_S)


async def _acquire(
    mgr: _Manager,
    res: bytes,
    ttl_ms: int,
    key: _OptsKey,
    cancel: Optional[Cancel],
    target: Optional[_Target] = None,
    on_lost: Optional[Callable[[_Lease], None]] = None,
) -> _Lease:
    """``redlock_acquire`` (with a ``target``: ``redlock_acquire_many`` or
    ``redlock_semaphore_acquire``) on a helper thread, awaited; see the module's docstring for
    what a cancellation does. The cancel handle is let go once the lease exists; an
    exception raised then (a Ctrl-C delivered as it is let go) unlocks and frees the lease,
    which the caller never got."""
    ch, cp = _cancel_hold(cancel)
    lease: Optional[_Lease] = None
    try:
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
                    lease = mgr._lease(call.lease_h, res, ttl_ms, key, target, on_lost)
            except BaseException:
                await _abandon(call, fut)
                raise
        finally:
            ch.release()
    except BaseException:
        if lease is not None:
            await _discard_off_loop(lease._handle)
        raise
    if lease is not None:
        return lease
    if type(st) is not int:
        # The call itself raised (not expected), maybe after the library wrote a lease: the
        # helper is done with it.
        if _written(call.lease_h):
            await _discard_off_loop(call.lease_h)
        raise st
    call.lease_h._freed = True  # nothing was written: nothing to free
    _raise(st, call.err)
    raise AssertionError("unreachable")  # pragma: no cover


class AsyncLock:
    """What :meth:`Redlock.alock` returns (and :meth:`Redlock.alock_many` and
    :meth:`Semaphore.alock`): an asynchronous context manager that acquires the lock when
    entered (``async with mgr.alock(...) as lease:``, giving the :class:`Lease`) and unlocks
    and closes it when the block ends, each off the event loop. Entered once: call
    :meth:`Redlock.alock` again for another acquisition. Not constructed directly."""

    __slots__ = (
        "_mgr", "_res", "_ttl", "_key", "_cancel", "_target", "_on_lost", "_lease", "_entered",
    )  # fmt: skip

    def __init__(
        self,
        mgr: _Manager,
        res: bytes,
        ttl_ms: int,
        key: _OptsKey,
        cancel: Optional[Cancel],
        target: Optional[_Target] = None,
        on_lost: Optional[Callable[[_Lease], None]] = None,
    ) -> None:
        self._mgr = mgr
        self._on_lost = on_lost
        self._res = res
        self._target = target
        self._ttl = ttl_ms
        self._key = key
        self._cancel = cancel
        self._lease: Optional[_Lease] = None
        self._entered = False

    async def __aenter__(self) -> _Lease:
        if self._entered:
            raise RuntimeError("an alock(...) is entered once: call mgr.alock(...) again")
        self._entered = True
        lease = await _acquire(
            self._mgr, self._res, self._ttl, self._key, self._cancel, self._target,
            self._on_lost,
        )  # fmt: skip
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
        what = f"resource={self._res!r}" if target is None else target.label()
        return f"<redlock.AsyncLock {what} {state}>"


def alock(
    mgr: _Manager, res: bytes, ttl_ms: int, opts: Options, target: Optional[_Target] = None
) -> AsyncLock:
    """What ``alock`` returns (for a lock, a set, or a permit: ``target``), with its
    arguments checked already."""
    return AsyncLock(mgr, res, ttl_ms, opts.key, opts.cancel, target, opts.on_lost)


async def aacquire(
    mgr: _Manager, res: bytes, ttl_ms: int, opts: Options, target: Optional[_Target] = None
) -> _Lease:
    """``aacquire`` (for a lock, a set, or a permit: ``target``), its arguments checked."""
    return await _acquire(mgr, res, ttl_ms, opts.key, opts.cancel, target, opts.on_lost)
