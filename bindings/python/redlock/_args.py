"""Argument checks and conversions, before any C call (nothing wraps around through
``c_uint32``), and :class:`Options`: the acquisition keywords (``wait_ms``, ``fenced``,
``auto_renew``, ``max_hold_ms``, ``max_extensions``, ``on_lost``, ``notify``, ``cancel``,
``owner``, ``shared``, ``fair``, ``drop_out_ms``), checked once by :func:`options` for every method
that takes them.

What stays here is what only Python knows: the types of the arguments, their conversion to
C (UTF-8, ``uint32_t`` ranges, the bound on the C arrays of a set), and the ranges that a C
option setter reports as a bare status. Which options combine, and the rest of the rules, are
the library's: it checks them at the acquisition, and ``alock`` asks it
(``redlock_acquire_check``) when it is called, so its messages reach the caller unchanged.
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, List, NamedTuple, Optional, Tuple, Union

from . import _ffi
from ._cancel import Cancel
from ._errors import InvalidArgument

#: A resource name: ``str`` (encoded as UTF-8) or ``bytes`` (used as is).
Resource = Union[str, bytes]

_UINT32_MAX = _ffi.UINT32_MAX


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


def _resource_list(resources: object) -> Tuple[bytes, ...]:
    """The resources of an ``acquire_many`` call as bytes, in the caller's order: a list (or
    any iterable but a single ``str``/``bytes``) of at most :data:`MAX_RESOURCES` names, each
    as for :func:`_resource`. That there is at least one, none named twice (a ``str`` and its
    UTF-8 bytes are alike), and each name's length are checked by the library."""
    if isinstance(resources, (str, bytes, bytearray)):
        raise TypeError(
            "resources must be a list of str or bytes, not a single "
            f"{type(resources).__name__}: wrap it in a list"
        )
    try:
        items = list(resources)  # type: ignore[call-overload]
    except TypeError:
        raise TypeError(
            f"resources must be a list of str or bytes, not {type(resources).__name__}"
        ) from None
    # At least one, none twice: the library's rule, with its message. The count is bounded
    # here, as it bounds the C arrays made for the call.
    if len(items) > _ffi.MAX_RESOURCES:
        raise InvalidArgument(
            f"{len(items)} resources; the limit is {_ffi.MAX_RESOURCES} per call"
        )
    names: List[bytes] = []
    for i, item in enumerate(items):
        if type(item) is bytes:
            name = item
        elif isinstance(item, (str, bytes, bytearray)):
            name = _resource(item)
        else:
            raise TypeError(
                f"resources[{i}] must be str or bytes, not {type(item).__name__}"
            )
        names.append(name)
    return tuple(names)


class _Many(NamedTuple):
    """The resources of one ``redlock_acquire_many`` call, and the C arrays that pass them:
    ``ptrs`` (``const uint8_t *const *``; the array keeps each ``bytes`` alive) and ``lens``
    (``const size_t *``)."""

    resources: Tuple[bytes, ...]
    ptrs: Any
    lens: Any

    #: Whether the lease is a semaphore's permit.
    is_permit = False

    @property
    def first(self) -> bytes:
        """The first resource (the lease's ``resource``); empty for no resources, which the
        library refuses."""
        return self.resources[0] if self.resources else b""

    @property
    def lease_resources(self) -> Optional[Tuple[bytes, ...]]:
        """Every resource the lease will hold."""
        return self.resources

    def call(self, c: Any, m: Any, ttl_ms: int, opts: Any, out: Any, err: Any) -> Tuple[Any, ...]:
        """The C function and arguments of the acquisition (``out``: where the lease goes)."""
        n = len(self.resources)
        return c.redlock_acquire_many, (
            m, self.ptrs, self.lens, n, ttl_ms, opts, out, err, _ffi.ERR_LEN
        )  # fmt: skip

    def check(self, c: Any, m: Any, ttl_ms: int, opts: Any, err: Any) -> Optional[Tuple[Any, ...]]:
        """The C function and arguments that check the acquisition's input, sending nothing."""
        n = len(self.resources)
        return c.redlock_acquire_many_check, (
            m, self.ptrs, self.lens, n, ttl_ms, opts, err, _ffi.ERR_LEN
        )  # fmt: skip

    def label(self) -> str:
        """What ``repr`` says of the target."""
        return f"resources={len(self.resources)}"


def _many(resources: Tuple[bytes, ...]) -> _Many:
    n = len(resources)
    ptrs = (ctypes.c_char_p * n)(*resources)
    lens = (ctypes.c_size_t * n)(*[len(r) for r in resources])
    return _Many(resources, ptrs, lens)


class _Sem(NamedTuple):
    """The semaphore of one ``redlock_semaphore_acquire`` call: its name (checked by
    :meth:`Redlock.semaphore`) and its permit count."""

    name: bytes
    permits: int

    #: Whether the lease is a semaphore's permit.
    is_permit = True
    #: A permit holds its semaphore, not a list of resources.
    lease_resources = None

    def call(self, c: Any, m: Any, ttl_ms: int, opts: Any, out: Any, err: Any) -> Tuple[Any, ...]:
        """The C function and arguments of the acquisition (``out``: where the lease goes)."""
        return c.redlock_semaphore_acquire, (
            m, self.name, len(self.name), self.permits, ttl_ms, opts, out, err, _ffi.ERR_LEN
        )  # fmt: skip

    def check(self, c: Any, m: Any, ttl_ms: int, opts: Any, err: Any) -> Optional[Tuple[Any, ...]]:
        """Nothing to ask the library: a permit takes no owner, shared or fair keyword, and
        its name and count were checked when the semaphore was made."""
        return None

    def label(self) -> str:
        """What ``repr`` says of the target."""
        return f"semaphore={self.name!r} permits={self.permits}"


#: What an acquisition takes when it is not one resource (``None``): a set of resources
#: (``redlock_acquire_many``) or a permit of a semaphore (``redlock_semaphore_acquire``).
#: A target says which C functions acquire and check it (``call``, ``check``), what the
#: lease holds (``lease_resources``, ``is_permit``) and how ``repr`` names it (``label``), so
#: a new kind of acquisition brings its own target and the acquisition path stays as it is.
_Target = Union[_Many, _Sem]


def _semaphore_name(name: object) -> bytes:
    """A semaphore's name as bytes, as a resource's (:func:`_resource`), 1 to
    :data:`MAX_RESOURCE_LEN` bytes: checked here, as :meth:`Redlock.semaphore` sends nothing.
    (That its key is outside the library's own namespaces, which only matters with
    ``key_prefix=""``, is checked by the library, at the first acquisition.)"""
    res = _resource(name)
    if not res:
        raise InvalidArgument("a semaphore's name must not be empty")
    if len(res) > _ffi.MAX_RESOURCE_LEN:
        raise InvalidArgument(
            f"a semaphore's name is {len(res)} bytes; the limit is {_ffi.MAX_RESOURCE_LEN}"
        )
    return res


def _permits(permits: object) -> int:
    """A semaphore's permit count: an ``int`` (not a ``bool``) in 1..:data:`MAX_PERMITS`."""
    if isinstance(permits, bool) or not isinstance(permits, int):
        raise TypeError(f"permits must be an int, not {type(permits).__name__}")
    if not 1 <= permits <= _ffi.MAX_PERMITS:
        raise InvalidArgument(f"a semaphore has 1 to {_ffi.MAX_PERMITS} permits, not {permits}")
    return int(permits)


def _owner(owner: object) -> bytes:
    """An owner id as bytes, like a resource name; its length is checked by the library."""
    if isinstance(owner, str):
        try:
            return owner.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidArgument(f"owner is not encodable as UTF-8: {e}") from None
    if isinstance(owner, (bytes, bytearray)):
        return bytes(owner)
    raise TypeError(f"owner must be str or bytes, not {type(owner).__name__}")


def _fair(fair: object, drop_out_ms: object) -> Optional[Tuple[bool, int]]:
    """The ``fair`` part of an options key: ``None`` for the defaults (not fair, no drop-out
    time), else ``(fair, drop-out time in milliseconds)`` (``0``: the library's default).
    Which options combine (fair with an owner or shared, a drop-out time without fair) is
    the library's rule, checked at the acquisition (and by ``alock`` when it is called) with
    its message; the range is checked here, as the C setter reports a status only."""
    if fair is not True and fair is not False:
        raise TypeError(f"fair must be a bool, not {type(fair).__name__}")
    drop_out = 0 if drop_out_ms is None else drop_out_ms
    if isinstance(drop_out, bool) or not isinstance(drop_out, int):
        raise TypeError(f"drop_out_ms must be an int, not {type(drop_out).__name__}")
    if drop_out and not _ffi.MIN_DROP_OUT_MS <= drop_out <= _ffi.MAX_DROP_OUT_MS:
        raise InvalidArgument(
            f"drop_out_ms must be in {_ffi.MIN_DROP_OUT_MS}..{_ffi.MAX_DROP_OUT_MS} "
            f"(0 or None: the default), got {drop_out}"
        )
    if not fair and not drop_out:
        return None
    return (bool(fair), int(drop_out))


def _renewal(
    auto_renew: object, max_hold_ms: object, max_extensions: object
) -> Optional[Tuple[int, int]]:
    """The ``renew`` part of an options key (``None``: no auto-renewal), with the checks of
    :meth:`Redlock.acquire`."""
    hold = _u32("max_hold_ms", 0 if max_hold_ms is None else max_hold_ms)
    extensions = _u32("max_extensions", 0 if max_extensions is None else max_extensions)
    if auto_renew is True:
        return (hold, extensions)
    if auto_renew is False:
        if hold or extensions:
            raise InvalidArgument("max_hold_ms and max_extensions apply only with auto_renew=True")
        return None
    raise TypeError(f"auto_renew must be a bool, not {type(auto_renew).__name__}")


def _on_lost(on_lost: object, renew: Optional[Tuple[int, int]]) -> None:
    """Checks an ``on_lost`` callback (not ``None``): callable, and given with
    ``auto_renew=True`` (``renew`` not ``None``): only a renewing lease can be lost."""
    if not callable(on_lost):
        raise TypeError(f"on_lost must be callable, not {type(on_lost).__name__}")
    if renew is None:
        raise InvalidArgument("on_lost applies only with auto_renew=True")


#: The key of an options object: ``(wait_ms, fenced, renew, notify, owner, shared, fair)``,
#: with ``wait_ms`` ``None`` for the manager's retry policy, ``renew`` ``None`` or
#: ``(max_hold_ms, max_extensions)``, ``notify`` whether a ``wait_ms`` wait is woken by
#: releases (always ``True`` without a ``wait_ms`` wait, where it does not apply), ``owner``
#: the reentrant lock's owner id (``None``: not reentrant), ``shared`` whether the lock is
#: shared (a read lock), and ``fair`` ``None`` for a lock that is neither fair nor given a
#: drop-out time, else ``(fair, drop-out ms)`` (``0``: the default). Options with an owner are
#: never cached (owners are often per request).
_OptsKey = Tuple[
    Optional[int],
    bool,
    Optional[Tuple[int, int]],
    bool,
    Optional[bytes],
    bool,
    Optional[Tuple[bool, int]],
]


class Options(NamedTuple):
    """The acquisition keywords of one call, checked (:func:`options`). The first seven
    fields are :attr:`key`, the key of the manager's C options object; ``cancel`` is the
    :class:`Cancel` handle the call carries (``None``: none); ``on_lost`` the callback that
    the granted lease's watcher calls once if the lease is lost (``None``: none; only with
    auto-renewal)."""

    wait_ms: Optional[int]
    fenced: bool
    renew: Optional[Tuple[int, int]]
    notify: bool
    owner: Optional[bytes]
    shared: bool
    fair: Optional[Tuple[bool, int]]
    cancel: Optional[Cancel]
    on_lost: Optional[Callable[[Any], None]] = None

    @property
    def key(self) -> _OptsKey:
        """The key of the manager's C options object: the first seven fields."""
        return self[:7]  # type: ignore[return-value]


def options(
    wait_ms: Any = None,
    fenced: Any = False,
    auto_renew: Any = False,
    max_hold_ms: Any = 0,
    max_extensions: Any = 0,
    notify: Any = True,
    cancel: Any = None,
    owner: Any = None,
    shared: Any = False,
    fair: Any = False,
    drop_out_ms: Any = None,
    on_lost: Any = None,
) -> Options:
    """The acquisition keywords of :meth:`Redlock.acquire` (and of every method that takes
    some of them: the others pass their fixed values), checked with the exceptions it
    documents: cheap exact-type checks first, the full ones only to word an error."""
    if wait_ms is not None and (type(wait_ms) is not int or not 0 <= wait_ms <= _UINT32_MAX):
        wait_ms = _u32("wait_ms", wait_ms)
    if fenced is not True and fenced is not False:
        raise TypeError(f"fenced must be a bool, not {type(fenced).__name__}")
    if (
        auto_renew is False
        and (max_hold_ms is None or (type(max_hold_ms) is int and max_hold_ms == 0))
        and (max_extensions is None or (type(max_extensions) is int and max_extensions == 0))
    ):
        renew = None
    else:
        renew = _renewal(auto_renew, max_hold_ms, max_extensions)
    if on_lost is not None:
        _on_lost(on_lost, renew)
    if notify is not True and notify is not False:
        raise TypeError(f"notify must be a bool, not {type(notify).__name__}")
    if cancel is not None and not isinstance(cancel, Cancel):
        raise TypeError(f"cancel must be a redlock.Cancel, not {type(cancel).__name__}")
    if shared is not False and shared is not True:
        raise TypeError(f"shared must be a bool, not {type(shared).__name__}")
    if owner is not None:
        owner = _owner(owner)
    fair_key = None
    if fair is not False or drop_out_ms is not None:
        fair_key = _fair(fair, drop_out_ms)
    # ``notify`` only applies to a ``wait_ms`` wait: one key for the others.
    return Options(
        wait_ms, fenced, renew, notify or not wait_ms, owner, shared, fair_key, cancel, on_lost
    )


def target(resource: Any, ttl_ms: Any) -> Tuple[bytes, int]:
    """The resource (as bytes) and the TTL of one acquisition, checked."""
    res = resource if type(resource) is bytes else _resource(resource)
    if type(ttl_ms) is not int or not 0 < ttl_ms <= _UINT32_MAX:
        ttl_ms = _ttl("ttl_ms", ttl_ms)
    return res, ttl_ms


def many(resources: object, ttl_ms: object) -> Tuple[_Many, int]:
    """The resources of :meth:`Redlock.acquire_many` and their C arrays, and the TTL,
    checked."""
    return _many(_resource_list(resources)), _ttl("ttl_ms", ttl_ms)


#: The arguments of :meth:`Redlock.acquire`, as its docstring shows them (written once: the
#: other methods refer to them).
ACQUIRE_ARGS_DOC = """\
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
                behave as after that call. If renewal (or the ``on_lost`` watcher) cannot be
                started, the lock is released and the error raised.
            max_hold_ms: with ``auto_renew``, stop renewing (the lease is then lost) this long
                after the acquisition; ``0`` or ``None``: the library's default, one hour.
            max_extensions: with ``auto_renew``, at most this many automatic extensions;
                ``0`` or ``None``: no limit besides the hold time. Either bound given
                (non-zero) without ``auto_renew=True`` is an :class:`InvalidArgument`.
            on_lost: with ``auto_renew``, a callable called once with the :class:`Lease` if
                it is lost (renewal failed or reached a bound), on a daemon thread of this
                binding, exactly as ``Lease.auto_renew(on_lost=...)`` right after the grant
                would; ``None`` (the default): no callback. Not callable is a ``TypeError``;
                given without ``auto_renew=True``, an :class:`InvalidArgument`.
"""


def with_acquire_args(fn: Any) -> Any:
    """Puts :data:`ACQUIRE_ARGS_DOC` in place of the ``<ARGS>`` line of ``fn``'s docstring."""
    if fn.__doc__:
        fn.__doc__ = fn.__doc__.replace("        <ARGS>\n", ACQUIRE_ARGS_DOC)
    return fn
