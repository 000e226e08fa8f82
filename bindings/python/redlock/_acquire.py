"""One acquisition of a manager, through the library: ``redlock_acquire`` of a resource,
``redlock_acquire_many`` of a set, ``redlock_semaphore_acquire`` of a permit, with the
manager's cached ``redlock_acquire_opts`` objects, or, for a call that carries a cancel
handle or must stay interruptible, with an options object of its own, on a helper thread
when it may wait on the main thread."""

from __future__ import annotations

import ctypes
import threading
from typing import Any, Callable, Dict, Optional, Tuple

from . import _core, _ffi
from ._args import Options, _OptsKey, _Target
from ._cancel import Cancel, _cancel_hold
from ._core import _check_status, _err_buf, _raise
from ._handle import _Handle, _Process
from ._lease import Lease, _start_watch
from ._threads import _WAIT_SLICE_S, _Call, _drop, _hand_over

#: How many ``redlock_acquire_opts`` objects a manager keeps, one per distinct combination of
#: ``(wait_ms, fenced, auto-renewal bounds, notify, shared, fair)`` it was asked for.
#: ``try_lock``, and ``lock`` without ``wait_ms``, need four at most; a program that passes
#: ever new ``wait_ms`` values fills the rest, after which each new combination gets an
#: options object made and freed around its one call.
_OPTS_CACHE_MAX = 64

_byref = ctypes.byref


def _new_opts(key: _OptsKey, cancel: Any = None) -> Any:
    """A new ``redlock_acquire_opts`` set to ``key`` (and cancellable through the C handle
    ``cancel``, if given); the caller owns (and frees) it."""
    wait_ms, fenced, renew, notify, owner, shared, fair = key
    c = _core._c
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
            # With the library's message, which names the argument and its limit.
            err = _err_buf()
            st = c.redlock_acquire_opts_set_owner_err(opts, owner, len(owner), err, _ffi.ERR_LEN)
            if st:
                _raise(st, err)
        if shared:
            _check_status(c.redlock_acquire_opts_set_shared(opts, True))
        if fair is not None:
            is_fair, drop_out_ms = fair
            if is_fair:
                _check_status(c.redlock_acquire_opts_set_fair(opts, True))
            if drop_out_ms:
                _check_status(c.redlock_acquire_opts_set_drop_out_ms(opts, drop_out_ms))
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
    free_manager = _core._c.redlock_manager_free
    free_opts = _core._c.redlock_acquire_opts_free

    def free(ptr: Any) -> None:
        try:
            free_manager(ptr)
        finally:
            while opts:
                free_opts(opts.popitem()[1])

    return free


def _acquire_args(
    m: Any,
    res: bytes,
    ttl_ms: int,
    opts: Any,
    lease_h: "_Handle",
    err: Any,
    target: Optional[_Target],
) -> Tuple[Any, Tuple[Any, ...]]:
    """The C function and arguments of one acquisition: ``redlock_acquire`` of ``res``, or
    the target's own (``redlock_acquire_many`` of a set, ``redlock_semaphore_acquire`` of a
    permit). The error buffer is the last but one."""
    if target is None:
        return _core._c.redlock_acquire, (
            m, res, len(res), ttl_ms, opts, _byref(lease_h._ptr), err, _ffi.ERR_LEN
        )  # fmt: skip
    return target.call(_core._c, m, ttl_ms, opts, _byref(lease_h._ptr), err)


def check(mgr: Any, res: bytes, ttl_ms: int, key: _OptsKey, target: Optional[_Target]) -> None:
    """Raises what an acquisition with these arguments would raise for its input, as the
    library decides it (``redlock_acquire_check``, or the target's own check), and sends
    nothing: how ``alock`` refuses bad input when it is called, with the library's rules and
    messages."""
    c = _core._c
    err = _err_buf()
    h = mgr._handle
    m = h.acquire()
    opts = _new_opts(key)
    try:
        if target is None:
            st = c.redlock_acquire_check(m, res, len(res), ttl_ms, opts, err, _ffi.ERR_LEN)
        else:
            call = target.check(c, m, ttl_ms, opts, err)
            st = 0 if call is None else call[0](*call[1])
    finally:
        h.release()
        c.redlock_acquire_opts_free(opts)
    if st:
        _raise(st, err)


def acquire(
    mgr: Any, res: bytes, ttl_ms: int, opts: Options, target: Optional[_Target] = None
) -> Lease:
    """Acquires ``res`` (checked) for ``ttl_ms`` (checked) with the checked ``opts`` through
    the manager ``mgr``: the hot path, one C call with an options object made once per
    manager and key. With a ``target``, all of a set's resources (``res`` is the first) or
    a semaphore's permit (``res`` is its name).

    Whichever way the call runs, an exception that comes after the library granted the lock
    and before the lease is returned (a Ctrl-C delivered as the call returns, as a cancel
    handle is let go, as the :class:`Lease` is built) unlocks and frees the lease before it
    is raised: the caller either owns the lease or no key is left."""
    wait_ms = opts[0]
    key: _OptsKey = opts[:7]  # type: ignore[assignment]
    cancel = opts[7]
    on_lost = opts[8]
    # A call that may wait, on the main thread (the only one where Python delivers a
    # Ctrl-C), runs on a helper thread so that the main thread stays interruptible.
    waits = (
        wait_ms != 0
        and (wait_ms is not None or mgr._retry_pauses)
        and threading.get_ident() == _Process.main_ident
    )
    if waits or cancel is not None:
        return _acquire_cancellable(mgr, res, ttl_ms, key, cancel, waits, target, on_lost)
    return _direct(mgr, res, ttl_ms, key, target, on_lost)


def _direct(
    mgr: Any,
    res: bytes,
    ttl_ms: int,
    key: _OptsKey,
    target: Optional[_Target],
    on_lost: Optional[Callable[[Lease], None]],
    cancel_ptr: Any = None,
) -> Lease:
    """One acquisition on this thread (:func:`_call`), and its :class:`Lease`. The lease's
    owner exists before the call and the library writes the new lease's pointer straight
    into it; any exception from then until the lease is returned (a Ctrl-C that arrived
    during the call is delivered as it returns, before its status is even stored) unlocks
    and frees the lease (:func:`_drop`: only if it was written)."""
    lease_h = _Handle(_ffi.LeasePtr(), _core._c.redlock_lease_free, "lease")
    try:
        _call(mgr, key, res, ttl_ms, target, lease_h, cancel_ptr)
        return lease_of(mgr, lease_h, res, ttl_ms, key, target, on_lost)
    except BaseException:
        _drop(lease_h)
        raise


def _call(
    mgr: Any,
    key: _OptsKey,
    res: bytes,
    ttl_ms: int,
    target: Optional[_Target],
    lease_h: _Handle,
    cancel_ptr: Any = None,
) -> None:
    """One acquisition call into ``lease_h``, or the error raised: with the options of
    ``key`` (made once per manager and key), or, with the C cancel handle ``cancel_ptr``,
    with an options object made and freed around the call (a handle belongs to one call,
    while the cached objects are shared)."""
    c = _core._c
    err = _err_buf()
    temp = None
    h = mgr._handle
    m = h.acquire()
    try:
        if cancel_ptr is None:
            opts = mgr._opts.get(key)
            if opts is None:
                opts, temp = _opts_miss(mgr, key)
        else:
            opts = temp = _new_opts(key, cancel_ptr)
        fn, args = _acquire_args(m, res, ttl_ms, opts, lease_h, err, target)
        st = fn(*args)
    finally:
        h.release()
        if temp is not None:
            c.redlock_acquire_opts_free(temp)
    if st:
        lease_h._freed = True  # nothing was written: nothing to free
        _raise(st, err)


def lease_of(
    mgr: Any,
    lease_h: _Handle,
    res: bytes,
    ttl_ms: int,
    key: _OptsKey,
    target: Optional[_Target],
    on_lost: Optional[Callable[[Lease], None]] = None,
) -> Lease:
    """The :class:`Lease` of a granted acquisition for ``ttl_ms`` made with the options
    ``key``; with an ``on_lost`` callback (the options had auto-renewal), its watcher is
    started, as ``Lease.auto_renew(on_lost=...)`` right after the grant would. An exception
    raised here (the watcher thread could not start) leaves the lease to the caller's
    clean-up."""
    lease = Lease(
        lease_h, res, key[1], mgr._node_count, key[2] is not None, key[5],
        None if target is None else target.lease_resources,
        target is not None and target.is_permit,
        key[6] is not None and key[6][0], ttl_ms,
    )  # fmt: skip
    if on_lost is not None:
        _start_watch(lease, lease_h, lease._renew_gen, on_lost)
    return lease


def _acquire_cancellable(
    mgr: Any,
    res: bytes,
    ttl_ms: int,
    key: _OptsKey,
    cancel: Optional[Cancel],
    waits: bool,
    target: Optional[_Target],
    on_lost: Optional[Callable[[Lease], None]] = None,
) -> Lease:
    """An acquisition with a cancel handle: the caller's, or one of its own when the call
    ``waits`` on the main thread (it then runs on a helper thread). Its options object is
    made for this call and freed after it. With a ``target``, of all its resources
    (``redlock_acquire_many``; ``res`` is the first) or of a semaphore's permit
    (``redlock_semaphore_acquire``; ``res`` is its name).

    The cancel handle is let go only once the lease exists; an exception raised then (a
    Ctrl-C delivered as it is let go) unlocks and frees the lease, which the caller never
    got."""
    ch, cp = _cancel_hold(cancel)
    lease: Optional[Lease] = None
    try:
        try:
            if waits:
                call = new_call(mgr, res, ttl_ms, key, ch, cp, target)
                lease = _acquire_on_helper(mgr, res, ttl_ms, key, call, target, on_lost)
            else:
                lease = _direct(mgr, res, ttl_ms, key, target, on_lost, cp)
        finally:
            ch.release()
    except BaseException:
        if lease is not None:
            _drop(lease._handle)
        raise
    return lease


def new_call(
    mgr: Any,
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
    Shared by the Ctrl-C path (:func:`_acquire_on_helper`) and the asyncio one
    (``redlock._aio``)."""
    lease_h = _Handle(_ffi.LeasePtr(), _core._c.redlock_lease_free, "lease")
    h = mgr._handle
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
        _core._c.redlock_acquire_opts_free(opts)
        raise


def _acquire_on_helper(
    mgr: Any,
    res: bytes,
    ttl_ms: int,
    key: _OptsKey,
    call: _Call,
    target: Optional[_Target] = None,
    on_lost: Optional[Callable[[Lease], None]] = None,
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
            return lease_of(mgr, call.lease_h, res, ttl_ms, key, target, on_lost)
    except BaseException:
        call.abandon()
        raise
    if type(st) is not int:
        # The call itself raised (not expected), maybe after the library wrote a lease: the
        # helper is done with it, so it is this thread's to unlock and free.
        _drop(call.lease_h)
        raise st
    call.lease_h._freed = True  # nothing was written: nothing to free
    _raise(st, call.err)
    raise AssertionError("unreachable")  # pragma: no cover


def _opts_miss(mgr: Any, key: _OptsKey) -> Tuple[Any, Any]:
    """The options object for ``key``, not found in the cache: ``(opts, None)`` once made
    and cached, or, when the cache is full, ``(opts, opts)``: made for one call, which
    frees it. Called with the manager's handle acquired, so the cache is not freed
    meanwhile (and everything it caches is freed with the manager)."""
    with mgr._opts_lock:
        opts = mgr._opts.get(key)
        if opts is not None:
            return opts, None
        opts = _new_opts(key)
        if len(mgr._opts) < _OPTS_CACHE_MAX and key[4] is None:
            mgr._opts[key] = opts
            return opts, None
    return opts, opts

