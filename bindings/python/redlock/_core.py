"""The public classes, :class:`Redlock` and :class:`Lease`, over the C handles."""

from __future__ import annotations

import ctypes
import itertools
import math
import os
import threading
import weakref
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Callable, Iterable, Iterator, List, Optional, Tuple, Type, Union

from . import _ffi
from ._errors import (
    HandleClosed,
    InvalidArgument,
    NodeOutcome,
    RedlockError,
    Status,
    error_for_status,
)

__all__ = ["Redlock", "Lease", "Resource", "version"]

#: A resource name: ``str`` (encoded as UTF-8) or ``bytes`` (used as is).
Resource = Union[str, bytes]

#: How long one ``redlock_lease_wait_lost`` call of an ``on_lost`` watcher lasts: the longest a
#: watcher keeps a closed (or dropped) lease's handle from being freed.
_WATCH_SLICE_MS = 200

# Renewal generations: a watcher serves only the ``auto_renew`` call that started it.
_generations = itertools.count(1)

# Defaults documented in include/redlock.h, used only when one of a pair of options that C
# sets together (retry count and delay; connect and node timeouts) is given without the other.
_DEFAULT_RETRY_COUNT = 3
_DEFAULT_RETRY_DELAY_MS = 200
_DEFAULT_CONNECT_TIMEOUT_MS = 250


def version() -> str:
    """The version of the loaded C library (``redlock_version()``), e.g. ``"0.1.0"``."""
    raw = _ffi.lib().redlock_version()
    return raw.decode("ascii") if raw else ""


def _check(status: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    """Raises the exception for a non-OK status, with the message from ``err``."""
    if status == Status.OK:
        return
    message = _ffi.err_text(err)
    if not message:
        raw = _ffi.lib().redlock_status_str(status)
        message = raw.decode("utf-8", "replace") if raw else f"redlock status {status}"
    raise error_for_status(status, message)


# ---- argument checks (before any C call: nothing wraps around through c_uint32) ----


def _u32(name: str, value: object, *, minimum: int = 0) -> int:
    """``value`` as a C ``uint32_t``: an ``int`` (not a ``bool``) in ``minimum..2**32-1``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not minimum <= value <= _ffi.UINT32_MAX:
        raise InvalidArgument(f"{name} must be in {minimum}..{_ffi.UINT32_MAX}, got {value}")
    return int(value)


def _ttl(name: str, value: object) -> int:
    return _u32(name, value, minimum=1)


def _resource(resource: object) -> bytes:
    """A resource name as bytes: ``str`` is UTF-8 encoded; ``bytes``/``bytearray`` as is."""
    if isinstance(resource, str):
        try:
            return resource.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(f"resource is not encodable as UTF-8: {e}") from None
    if isinstance(resource, (bytes, bytearray)):
        return bytes(resource)
    raise TypeError(f"resource must be str or bytes, not {type(resource).__name__}")


def _url(url: object) -> bytes:
    if not isinstance(url, str):
        raise TypeError(f"each node must be a str URL, not {type(url).__name__}")
    if "\0" in url:
        raise InvalidArgument("a node URL must not contain a NUL character")
    try:
        return url.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidArgument(f"a node URL is not encodable as UTF-8: {e}") from None


# ---- handles: a C pointer, a count of calls in progress, and a free-only finalizer ----


def _free_in_owner(free: Callable[[Any], None], ptr: Any, pid: int) -> None:
    # A forked child has a copy of the handle but not the library's threads, and shares the
    # parent's sockets: it must neither use nor free it (the copy is left to the OS).
    if os.getpid() == pid:
        free(ptr)


class _Handle:
    """Owns one C pointer. ``use()`` lends it to one C call; ``close()`` frees it at once if no
    call is in progress, otherwise when the last one returns, so no C call ever runs on freed
    memory. The finalizer (garbage collection) only calls the ``*_free`` function: no unlock,
    no I/O. It does not run at interpreter exit, when a daemon thread may still be inside a
    C call on the handle, nor in a forked child."""

    __slots__ = (
        "_ptr",
        "_what",
        "_pid",
        "_mutex",
        "_users",
        "_closed",
        "_finalizer",
        "__weakref__",
    )

    def __init__(self, ptr: Any, free: Callable[[Any], None], what: str) -> None:
        self._ptr = ptr
        self._what = what
        self._pid = os.getpid()
        self._mutex = threading.Lock()
        self._users = 0
        self._closed = False
        self._finalizer = weakref.finalize(self, _free_in_owner, free, ptr, self._pid)
        self._finalizer.atexit = False

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def use(self) -> Iterator[Any]:
        if os.getpid() != self._pid:
            raise RedlockError(
                f"this {self._what} was created in process {self._pid} and cannot be used in "
                f"a forked child ({os.getpid()}): create a new Redlock in the child"
            )
        with self._mutex:
            if self._closed:
                raise HandleClosed(f"the {self._what} is closed")
            self._users += 1
        try:
            yield self._ptr
        finally:
            with self._mutex:
                self._users -= 1
                free_now = self._closed and self._users == 0
            if free_now:
                self._finalizer()

    def close(self) -> None:
        if os.getpid() != self._pid:
            self._closed = True  # never free the parent's handle from a child
            return
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            free_now = self._users == 0
        if free_now:
            self._finalizer()

    @property
    def freed(self) -> bool:
        """True once the C ``*_free`` function has run."""
        return not self._finalizer.alive


class Lease:
    """A held lock, returned by :meth:`Redlock.lock` and :meth:`Redlock.try_lock`.

    Use it as a context manager (``with mgr.lock(...) as lk:``) to unlock when the block ends,
    or call :meth:`unlock` and then :meth:`close` yourself.

    **When the unlock at the end of a ``with`` block fails** (typically :class:`NotHeld`
    because the lock expired while the block ran, or :class:`Unavailable`), the exception is
    raised from the ``with`` statement, so that you learn your critical section outlived the
    lock. If another exception is already propagating out of the block, that exception wins
    and the unlock failure is attached to it as a note (Python 3.11+). Either way the lease
    is closed. If you called :meth:`unlock` (or :meth:`close`) inside the block, nothing more
    is done at its end.

    Facts recorded at acquisition (:attr:`token`, :attr:`resource`, :attr:`node_outcomes`,
    :attr:`granted`) stay readable after :meth:`close`; everything that needs the C handle
    (:attr:`validity_ms`, :attr:`valid`, :attr:`lost`, :meth:`extend`, :meth:`unlock`,
    :meth:`auto_renew`, :meth:`stop_renewal`, :meth:`wait_lost`) then raises
    :class:`HandleClosed`.

    Not constructed directly: :meth:`Redlock.lock` and :meth:`Redlock.try_lock` return one.

    A lease stays usable after its :class:`Redlock` is closed. Calls on one lease from several
    threads are serialised by the library. Dropping a lease without unlocking it frees its
    handle (at garbage collection) but does **not** unlock: the lock expires after its TTL.
    """

    __slots__ = (
        "_handle",
        "_token",
        "_resource",
        "_outcomes",
        "_granted",
        "_unlock_attempted",
        "_renew_gen",
        "__weakref__",
    )

    def __init__(self, ptr: Any) -> None:
        # Take ownership first, so the handle is freed whatever happens below.
        self._handle = _Handle(ptr, _ffi.lib().redlock_lease_free, "lease")
        self._unlock_attempted = False
        self._renew_gen = 0
        c = _ffi.lib()
        with self._handle.use() as p:
            raw_token = c.redlock_lease_token(p)
            self._token: str = raw_token.decode("ascii") if raw_token else ""
            n = ctypes.c_size_t(0)
            data = c.redlock_lease_resource(p, ctypes.byref(n))
            self._resource: bytes = ctypes.string_at(data, n.value) if data else b""
            count = c.redlock_lease_node_count(p)
            arr = (_ffi.node_outcome_t * max(count, 1))()
            total = c.redlock_lease_node_outcomes(p, arr, count)
            self._outcomes: Tuple[NodeOutcome, ...] = tuple(
                _outcome(arr[i]) for i in range(min(total, count))
            )
            self._granted: int = c.redlock_lease_granted(p)

    # ---- facts recorded at acquisition ----

    @property
    def token(self) -> str:
        """This lock's owner token: 40 hex characters, the value stored on the nodes."""
        return self._token

    @property
    def resource(self) -> bytes:
        """The resource name as bytes (a ``str`` resource is its UTF-8 encoding)."""
        return self._resource

    @property
    def node_outcomes(self) -> List[NodeOutcome]:
        """Each node's :class:`NodeOutcome` during the acquisition, in configuration order."""
        return list(self._outcomes)

    @property
    def granted(self) -> int:
        """How many nodes had granted the lock when the acquisition was decided (at least the
        quorum). Nodes that answered after the decision are ``PENDING``, not counted here."""
        return self._granted

    # ---- live state ----

    @property
    def validity_ms(self) -> int:
        """The remaining validity in milliseconds (rounded down): 0 once expired or unlocked.
        Finish the critical section before it reaches 0. Raises :class:`HandleClosed` after
        :meth:`close`."""
        with self._handle.use() as p:
            return int(_ffi.lib().redlock_lease_validity_ms(p))

    @property
    def valid(self) -> bool:
        """True while the remaining validity is positive. Raises :class:`HandleClosed` after
        :meth:`close`."""
        with self._handle.use() as p:
            return bool(_ffi.lib().redlock_lease_is_valid(p))

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the ``with`` block ended)."""
        return self._handle.closed

    def extend(self, ttl_ms: int) -> None:
        """Extends the lock to ``ttl_ms`` milliseconds from now, if a quorum confirms before
        the current validity ends. Never recreates an expired key.

        Raises:
            NotHeld: the lock expired, was unlocked or was taken over (nothing is sent when
                the validity already ended).
            Unavailable: too many nodes failed.
            InvalidArgument: ``ttl_ms`` out of range (it must exceed its drift allowance).
            TypeError: ``ttl_ms`` is not an ``int``.
            HandleClosed: the lease was closed.
        """
        ttl = _ttl("ttl_ms", ttl_ms)
        err = _ffi.err_buffer()
        with self._handle.use() as p:
            st = _ffi.lib().redlock_extend(p, ttl, err, _ffi.ERR_LEN)
        _check(st, err)

    def unlock(self) -> None:
        """Releases the lock on every node (only where it still holds this lease's token).
        Does not close the lease; from now on :attr:`validity_ms` reads 0.

        Raises:
            NotHeld: expired, already unlocked, or not confirmed by a quorum.
            Unavailable: too many nodes failed; the lock expires after its TTL.
            HandleClosed: the lease was closed.
        """
        err = _ffi.err_buffer()
        with self._handle.use() as p:
            self._unlock_attempted = True
            self._renew_gen = 0  # an unlocked lease is never lost: its watcher may go
            st = _ffi.lib().redlock_unlock(p, err, _ffi.ERR_LEN)
        _check(st, err)

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
        it while the lease is valid. It never recreates an expired or released lock.

        Renewal is bounded by ``max_hold_ms`` from the acquisition (``None`` or 0: the
        library's default, one hour) and by ``max_extensions`` automatic extensions (``None``
        or 0: no limit besides the hold time). When a renewal cannot be confirmed in time, or a
        bound is reached, the lease is marked lost shortly *before* its validity ends:
        :attr:`lost` turns true and :attr:`validity_ms` reads 0 for good.

        ``on_lost``, if given, is then called once with this lease, on a daemon thread of this
        binding that waits with ``redlock_lease_wait_lost`` (Python code never runs on the
        library's renewal thread, so neither a slow callback nor the GIL can delay other
        leases' renewals). An exception it raises goes to :func:`threading.excepthook`. It is
        not called after :meth:`stop_renewal`, :meth:`unlock` or :meth:`close`, or once the
        lease object is garbage-collected. Keep a reference to the lease while it renews:
        dropping it frees the handle, which stops renewal (without unlocking).

        :meth:`unlock` stops renewal first. Calling this again replaces the settings.

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
        err = _ffi.err_buffer()
        gen = next(_generations)
        with self._handle.use() as p:
            st = _ffi.lib().redlock_lease_auto_renew(
                p, hold, extensions, _ffi.NULL_LOST_FN, None, err, _ffi.ERR_LEN
            )
            if st == Status.OK:
                self._renew_gen = gen
        _check(st, err)
        if on_lost is not None:
            threading.Thread(
                target=_watch_lost,
                args=(weakref.ref(self), self._handle, gen, on_lost),
                name="redlock-lost-watcher",
                daemon=True,
            ).start()

    def stop_renewal(self) -> None:
        """Stops auto-renewal without unlocking (waiting for a renewal in flight). No effect
        when renewal is off. Raises :class:`HandleClosed` after :meth:`close`."""
        with self._handle.use() as p:
            self._renew_gen = 0
            _ffi.lib().redlock_lease_stop_renewal(p)

    @property
    def lost(self) -> bool:
        """True once the lease is known lost (auto-renewal failed or reached its bound). A lost
        lease never becomes valid again. Raises :class:`HandleClosed` after :meth:`close`."""
        with self._handle.use() as p:
            return bool(_ffi.lib().redlock_lease_is_lost(p))

    def wait_lost(self, timeout_ms: int) -> bool:
        """Blocks (with the GIL released) until the lease is lost or ``timeout_ms``
        milliseconds pass; returns whether it is lost. An unlocked lease is not lost, so this
        does not return early on unlock. Raises :class:`HandleClosed` after :meth:`close`
        (a :meth:`close` from another thread frees the handle when this call returns)."""
        timeout = _u32("timeout_ms", timeout_ms)
        with self._handle.use() as p:
            return bool(_ffi.lib().redlock_lease_wait_lost(p, timeout))

    def close(self) -> None:
        """Frees the C handle. Does **not** unlock (an unreleased lock expires after its TTL);
        stops auto-renewal. Idempotent; if another thread is inside a call on this lease, the
        handle is freed when that call returns."""
        self._renew_gen = 0
        self._handle.close()

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
            if self._unlock_attempted or self._handle.closed:
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
        return f"<redlock.Lease resource={self._resource!r} {state}>"


def _watch_lost(
    lease_ref: "weakref.ReferenceType[Lease]",
    handle: _Handle,
    gen: int,
    on_lost: Callable[[Lease], None],
) -> None:
    """Waits, in slices, for the lease to be lost, then calls ``on_lost`` once. Ends as soon
    as its ``auto_renew`` call is superseded (stop, unlock, close, a new ``auto_renew``) or the
    lease object is gone. Holds no strong reference to the lease while it waits."""
    while True:
        lease = lease_ref()
        if lease is None or lease._renew_gen != gen:
            return
        del lease
        try:
            with handle.use() as p:
                lost = _ffi.lib().redlock_lease_wait_lost(p, _WATCH_SLICE_MS)
        except HandleClosed:
            return
        if lost:
            lease = lease_ref()
            if lease is not None and lease._renew_gen == gen:
                on_lost(lease)
            return


def _outcome(value: int) -> NodeOutcome:
    try:
        return NodeOutcome(value)
    except ValueError:  # a newer library with an outcome this package does not know
        return value  # type: ignore[return-value]


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
        node_timeout_ms: per-node wait in each step; ``None`` or 0 derives it from each
            lock's TTL (TTL / 200, clamped to [10 ms, 50 ms]).

    ``None`` leaves an option at the library's default. Validation happens here: no nodes,
    a malformed URL, a node listed twice, a host that does not resolve or an option out of
    range raise :class:`InvalidArgument`; a value of the wrong type raises ``TypeError``. No
    connection is made until the first lock.

    The manager is thread-safe: any number of threads may lock through it at once, and each
    blocking call releases the GIL. Close it with :meth:`close` or a ``with`` block; closing
    never unlocks anything, and leases it made stay usable. If a thread is inside a call on the
    manager when it is closed, the C handle is freed when that call returns. At garbage
    collection an unclosed manager is freed (never unlocked).
    """

    __slots__ = ("_handle", "_node_count", "_quorum", "__weakref__")

    def __init__(
        self,
        nodes: Iterable[str],
        *,
        retry_count: Optional[int] = None,
        retry_delay_ms: Optional[int] = None,
        drift_factor: Optional[float] = None,
        connect_timeout_ms: Optional[int] = None,
        node_timeout_ms: Optional[int] = None,
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

        c = _ffi.lib()
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
            out = _ffi.ManagerPtr()
            _check(c.redlock_manager_new(cfg, ctypes.byref(out), err, _ffi.ERR_LEN), err)
        finally:
            c.redlock_config_free(cfg)
        self._handle = _Handle(out, c.redlock_manager_free, "manager")
        self._node_count = int(c.redlock_manager_node_count(out))
        self._quorum = int(c.redlock_manager_quorum(out))

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

    def lock(self, resource: Resource, ttl_ms: int, *, wait_ms: Optional[int] = None) -> Lease:
        """Acquires ``resource`` for ``ttl_ms`` milliseconds, retrying.

        With ``wait_ms=None`` it retries as configured (``retry_count`` more attempts, each
        after a random pause of up to ``retry_delay_ms``); with ``wait_ms`` it retries after
        such pauses until ``wait_ms`` milliseconds have passed, whatever the retry count (no
        attempt starts after that). It blocks, never forever, with the GIL released.

        Args:
            resource: 1 to 1024 bytes; a ``str`` is UTF-8 encoded. Any bytes are fine.
            ttl_ms: the lock's time to live, 3..2**32-1 milliseconds (it must exceed its own
                drift allowance ``ttl_ms × drift_factor + 2``).
            wait_ms: ``None`` for the configured retries, or the time to keep retrying.

        Returns:
            A :class:`Lease`; use it in a ``with`` block to unlock when the block ends. If
            that unlock fails (e.g. :class:`NotHeld`: the lock expired while the block ran),
            the ``with`` statement raises it, unless the block is already propagating an
            exception, which then wins (the unlock failure is added to it as a note).

        Raises:
            NotAcquired: held elsewhere (on every attempt).
            Unavailable: too many nodes failed for a quorum.
            InvalidArgument: empty or oversized resource, TTL or ``wait_ms`` out of range.
            TypeError: an argument of the wrong type.
            HandleClosed: the manager was closed.
        """
        res = _resource(resource)
        ttl = _ttl("ttl_ms", ttl_ms)
        wait = None if wait_ms is None else _u32("wait_ms", wait_ms)
        out = _ffi.LeasePtr()
        err = _ffi.err_buffer()
        c = _ffi.lib()
        with self._handle.use() as m:
            if wait is None:
                st = c.redlock_lock(m, res, len(res), ttl, ctypes.byref(out), err, _ffi.ERR_LEN)
            else:
                st = c.redlock_lock_wait(
                    m, res, len(res), ttl, wait, ctypes.byref(out), err, _ffi.ERR_LEN
                )
        _check(st, err)
        return Lease(out)

    def try_lock(self, resource: Resource, ttl_ms: int) -> Lease:
        """One attempt to acquire ``resource`` for ``ttl_ms`` milliseconds, with no retry.
        Same arguments, result and exceptions as :meth:`lock`."""
        res = _resource(resource)
        ttl = _ttl("ttl_ms", ttl_ms)
        out = _ffi.LeasePtr()
        err = _ffi.err_buffer()
        c = _ffi.lib()
        with self._handle.use() as m:
            st = c.redlock_try_lock(m, res, len(res), ttl, ctypes.byref(out), err, _ffi.ERR_LEN)
        _check(st, err)
        return Lease(out)

    def close(self) -> None:
        """Frees the manager and closes its idle connections. Never unlocks anything; leases
        it made stay usable. Idempotent. Later :meth:`lock` / :meth:`try_lock` calls raise
        :class:`HandleClosed`."""
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
