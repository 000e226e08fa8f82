"""Argument checks and conversions, before any C call (nothing wraps around through
``c_uint32``).

What stays here is what only Python knows: the types of the arguments, their conversion to
C (UTF-8, ``uint32_t`` ranges), and the checks an acquisition that sends nothing must make
before it is entered or awaited (``alock``). The library checks the rest.
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from . import _ffi
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
    any iterable but a single ``str``/``bytes``) of 1 to :data:`MAX_RESOURCES` names, each as
    for :func:`_resource`, no two alike (a ``str`` and its UTF-8 bytes are alike). The length
    of each name is checked by the library."""
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
    if not items:
        raise InvalidArgument("resources must name at least one resource, got none")
    if len(items) > _ffi.MAX_RESOURCES:
        raise InvalidArgument(
            f"{len(items)} resources; the limit is {_ffi.MAX_RESOURCES} per call"
        )
    names: List[bytes] = []
    seen: Dict[bytes, int] = {}
    for i, item in enumerate(items):
        if type(item) is bytes:
            name = item
        elif isinstance(item, (str, bytes, bytearray)):
            name = _resource(item)
        else:
            raise TypeError(
                f"resources[{i}] must be str or bytes, not {type(item).__name__}"
            )
        first = seen.setdefault(name, i)
        if first != i:
            raise InvalidArgument(
                f"resources[{i}] repeats resources[{first}] ({name!r}): name each resource once"
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


#: What an acquisition takes when it is not one resource (``None``): a set of resources
#: (``redlock_acquire_many``) or a permit of a semaphore (``redlock_semaphore_acquire``).
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


def _fair(fair: object, drop_out_ms: object, owner: object, shared: object) -> Optional[int]:
    """The ``fair`` part of an options key, with the checks of :meth:`Redlock.acquire`:
    ``None`` for a lock that is not fair, else the drop-out time in milliseconds (``0``: the
    library's default). ``owner`` and ``shared`` are the caller's (checked already)."""
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
    if not fair:
        if drop_out:
            raise InvalidArgument("drop_out_ms applies only with fair=True")
        return None
    if owner is not None or shared:
        raise InvalidArgument(
            "a fair lock is neither reentrant nor shared: pass fair=True, or owner= / "
            "shared=True, not both"
        )
    return int(drop_out)


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


#: The key of an options object: ``(wait_ms, fenced, renew, notify, owner, shared, fair)``,
#: with ``wait_ms`` ``None`` for the manager's retry policy, ``renew`` ``None`` or
#: ``(max_hold_ms, max_extensions)``, ``notify`` whether a ``wait_ms`` wait is woken by
#: releases (always ``True`` without a ``wait_ms`` wait, where it does not apply), ``owner``
#: the reentrant lock's owner id (``None``: not reentrant), ``shared`` whether the lock is
#: shared (a read lock), and ``fair`` ``None`` for a lock that is not fair, else the fair
#: waiter's drop-out time in milliseconds (``0``: the default). Options with an owner are
#: never cached (owners are often per request).
_OptsKey = Tuple[
    Optional[int], bool, Optional[Tuple[int, int]], bool, Optional[bytes], bool, Optional[int]
]

