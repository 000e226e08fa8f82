"""The helper-thread pool: a blocking acquisition handed over by the main thread (so that a
Ctrl-C is seen at once) or by an event loop (``_aio``) runs on one of these threads.

A :class:`_Call` is one acquisition run there, with the claims that settle who cleans up
when the caller gives up; :func:`_hand_over` gives a call to an idle helper thread, or to a
new one."""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

from . import _core, _ffi
from ._handle import _Handle

#: How long one slice of the calling thread's wait for an acquisition run on a helper thread
#: lasts (see ``_Call``). A signal's Python handler (Ctrl-C's ``KeyboardInterrupt``) runs
#: between two slices at the latest; on Linux it also cuts a slice short.
_WAIT_SLICE_S = 0.02

#: How long an interrupted caller waits, at most, for the cancelled acquisition to return
#: (it returns within one round trip of the cancel); only a safety net, as the helper thread
#: cleans up after itself whenever it returns.
_ABANDON_WAIT_S = 30.0

#: How long a helper thread stays for the next call before it ends. Kept between calls: the
#: library sets up per-thread state on a thread's first call, which costs far more than
#: handing a call to a thread that already runs.
_HELPER_IDLE_S = 30.0


def _discard(lease_h: _Handle) -> None:
    """Unlocks (whatever the outcome: a lock not released expires after its TTL) and frees a
    lease that was granted to a caller that gave up on it."""
    try:
        _core._c.redlock_unlock(lease_h._ptr, _ffi.err_buffer(), _ffi.ERR_LEN)
    finally:
        lease_h.close()


def _written(lease_h: _Handle) -> bool:
    """Whether the library wrote a lease into ``lease_h`` (it granted) that nobody has
    freed, discarded or closed yet."""
    return bool(lease_h._ptr) and not lease_h._freed and not lease_h._closed


def _drop(lease_h: _Handle) -> None:
    """:func:`_discard` for the lease handle of an acquisition whose caller did not get the
    lease (an exception came between the grant and the return): unlocks and frees the lease
    if the library wrote one (:func:`_written`); nothing otherwise. Only for a handle no
    other thread uses any more."""
    if _written(lease_h):
        _discard(lease_h)


def _wait_out(done: threading.Event, limit_s: float) -> None:
    """Waits until ``done`` is set, or ``limit_s`` seconds have passed, whatever exceptions
    (another Ctrl-C, say) arrive meanwhile: they are dropped, and the caller re-raises the one
    it is handling."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            if done.wait(_WAIT_SLICE_S) or time.monotonic() >= deadline:
                return
        except BaseException:  # noqa: BLE001 - see above
            pass


class _Call:
    """One ``redlock_acquire`` (or another acquisition: ``fn``) run on a helper thread
    (see :func:`_hand_over`) for a caller on the main thread, which must stay interruptible: a
    ctypes call holds its thread in C, where
    Python cannot run a signal handler, so a Ctrl-C during a wait in the main thread itself
    would be seen only when the wait ended. The caller waits for ``done`` in short slices
    instead, and when an exception arrives meanwhile it fires the call's cancel handle, which
    makes the library return at once (within one round trip if it is talking to the nodes),
    without a key left.

    Who cleans up is settled by two claims, each taken once, by whichever side comes first
    (``dict.setdefault`` on ``gate`` is atomic under the GIL):

    * ``"start"``: the helper takes it before calling the library. A caller interrupted first
      (the thread may not even have begun) takes it instead, and the helper then does
      nothing. Whoever takes it releases the manager, the options and the helper's hold on
      the cancel handle (:meth:`release`).
    * ``"end"``: the helper takes it as soon as the library returns. A caller interrupted
      first takes it instead and fires the cancel handle; the helper then unlocks and frees
      a lease granted all the same. If the helper came first, the caller does that itself.

    The helper owns everything the library call uses until it ends, so nothing that happens
    in the calling thread (not even a second Ctrl-C during the clean-up) frees memory under
    it."""

    __slots__ = ("gate", "done", "status", "err", "lease_h", "fn", "args", "manager", "opts",
                 "cancel", "cancel_ptr")  # fmt: skip

    def __init__(
        self,
        manager: _Handle,
        opts: Any,
        cancel: _Handle,
        lease_h: _Handle,
        args: Tuple[Any, ...],
        fn: Any = None,
    ) -> None:
        # The caller has acquired ``manager`` and ``cancel`` (and keeps its own hold on
        # ``cancel`` until it returns); this call owns the manager's hold, ``opts`` and the
        # hold on ``cancel`` taken last here, until released by :meth:`release`.
        self.gate: Dict[str, str] = {}
        self.done = threading.Event()
        self.status: Any = None
        self.err = args[-2]
        self.lease_h = lease_h
        self.fn = _core._c.redlock_acquire if fn is None else fn
        self.args = args
        self.manager = manager
        self.opts = opts
        self.cancel = cancel
        self.cancel_ptr = cancel._ptr
        cancel.hold()

    def release(self) -> None:
        try:
            self.manager.release()
        finally:
            try:
                _core._c.redlock_acquire_opts_free(self.opts)
            finally:
                self.cancel.release()

    def run(self) -> None:
        """Runs the call on a helper thread (which then sets ``done``)."""
        gate = self.gate
        if gate.setdefault("start", "helper") != "helper":
            return  # the caller gave up first and cleaned up
        try:
            try:
                st = self.fn(*self.args)
            except BaseException as e:  # noqa: BLE001 - not expected; handed to the caller
                st = e
            self.status = st
            if gate.setdefault("end", "helper") != "helper" and st == 0:
                _discard(self.lease_h)  # granted, but the caller has given up
        finally:
            self.release()

    def abandon(self) -> None:
        """Called by the caller when an exception arrives: makes sure the call ends and leaves
        no key behind, waiting (bounded) for the cancelled call to return."""
        gate = self.gate
        if gate.setdefault("start", "caller") == "caller":
            self.release()  # the library was never called
            return
        if gate.setdefault("end", "caller") == "caller":
            _core._c.redlock_cancel_fire(self.cancel_ptr)
            _wait_out(self.done, _ABANDON_WAIT_S)  # the helper discards a lease granted anyway
        elif self.status == 0:
            _discard(self.lease_h)


class _Helper:
    """A helper thread's mailbox: the thread runs the calls put there, one at a time. A call
    is a :class:`_Call`, or anything with its ``run()`` and ``done`` (``set()``): the asyncio
    API (``redlock._aio``) hands its acquisitions, unlocks and extensions over this way too,
    so that no blocking call runs on an event loop."""

    __slots__ = ("jobs", "served")

    def __init__(self) -> None:
        self.jobs: "queue.SimpleQueue[Any]" = queue.SimpleQueue()
        self.served = False


# The helper threads waiting for a call (normally one at most for synchronous code: only the
# main thread hands calls over, one at a time, unless a signal handler acquires while a call
# waits; an event loop hands over one call per coroutine that waits, each on its own thread).
_helpers_lock = threading.Lock()
_idle_helpers: List[_Helper] = []


def _helper_loop(helper: _Helper) -> None:
    """A helper thread: runs the calls put in its mailbox, going back to the idle list before
    each call's ``done`` is set (so that the caller's next call finds it there), and ends
    after :data:`_HELPER_IDLE_S` without one. It never ends with a call pending: one taken from
    the idle list is no longer there when it gives up waiting."""
    jobs = helper.jobs
    while True:
        try:
            call = jobs.get(timeout=_HELPER_IDLE_S)
        except queue.Empty:
            with _helpers_lock:
                if helper in _idle_helpers:
                    _idle_helpers.remove(helper)
                    return
                if not helper.served:
                    return  # new, and its creator gave up before handing it a call
            continue  # taken from the idle list: its call is on the way
        helper.served = True
        try:
            call.run()
        except BaseException:  # noqa: BLE001 - not expected: reported, and the thread goes on
            try:
                args = (*sys.exc_info(), threading.current_thread())
                threading.excepthook(threading.ExceptHookArgs(args))  # type: ignore[arg-type]
            except BaseException:  # noqa: BLE001
                pass
        finally:
            with _helpers_lock:
                _idle_helpers.append(helper)
            call.done.set()
            del call  # nothing of the call is kept (its lease's handle, say) until the next


def _hand_over(call: Any) -> None:
    """Hands ``call`` to an idle helper thread, or to a new one."""
    with _helpers_lock:
        helper = _idle_helpers.pop() if _idle_helpers else None
        if helper is not None:
            helper.jobs.put(call)
            return
    helper = _Helper()
    threading.Thread(
        target=_helper_loop, args=(helper,), name="redlock-acquire", daemon=True
    ).start()
    helper.jobs.put(call)


def _after_fork_in_child() -> None:
    global _helpers_lock
    # The helper threads did not survive the fork (and another thread may have held the lock).
    _helpers_lock = threading.Lock()
    _idle_helpers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
