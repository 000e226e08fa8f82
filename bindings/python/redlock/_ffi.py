"""The private declaration table of the C ABI (``include/redlock.h``) and the library loader.

Every ``redlock_*`` function of the header has exactly one entry in :data:`FUNCTIONS`, with
its ``restype`` and ``argtypes``; ``tests/test_ffi.py`` parses the header and fails when a
name, an arity or a type drifts. Nothing else in the package declares a C signature.

The shared library is loaded lazily, on first use, from the first of these that exists:

1. the ``REDLOCK_LIB`` environment variable (a path; if set, nothing else is tried),
2. the library inside this package: built there by ``pip install`` (``_libredlock*.so``, by
   setuptools-rust), or a copy (``libredlock.so``),
3. the repository's ``target/release``, then ``target/debug`` (when the package is used from
   a checkout, e.g. with ``PYTHONPATH=bindings/python``),
4. the system's library search (``dlopen("libredlock.so")``, then
   ``ctypes.util.find_library("redlock")``).

A plain :class:`ctypes.CDLL` releases the GIL around every foreign call, so a thread blocked in
``redlock_acquire`` lets the other Python threads run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

__all__ = [
    "FUNCTIONS",
    "LibraryNotFoundError",
    "lib",
    "library_path",
    "library_candidates",
    "ENV_VAR",
    "ERR_LEN",
]

#: The environment variable naming the shared library to load.
ENV_VAR = "REDLOCK_LIB"

#: Size of the error-message buffer passed to every fallible function.
ERR_LEN = 1024

#: ``REDLOCK_MAX_TTL_MS`` / ``UINT32_MAX``.
UINT32_MAX = 2**32 - 1

#: ``REDLOCK_MAX_RESOURCE_LEN``.
MAX_RESOURCE_LEN = 1024

#: ``REDLOCK_MAX_RESOURCES``: the most resources one ``redlock_acquire_many`` call may name.
MAX_RESOURCES = 1000

#: ``REDLOCK_MAX_PERMITS``: the most permits a semaphore (``redlock_semaphore_acquire``) may
#: have.
MAX_PERMITS = 1000

#: ``REDLOCK_MAX_LEADER_VALUE``: the longest value a candidate may campaign or proclaim with
#: (``redlock_campaign``, ``redlock_lease_proclaim``), in bytes.
MAX_LEADER_VALUE = 65536

#: ``REDLOCK_DEFAULT_DROP_OUT_MS``: a fair waiter's drop-out time in milliseconds when none is
#: given and the lock's TTL is not shorter.
DEFAULT_DROP_OUT_MS = 5000

#: ``REDLOCK_MIN_DROP_OUT_MS``: the shortest drop-out time of a fair waiter, in milliseconds.
MIN_DROP_OUT_MS = 20

#: ``REDLOCK_MAX_DROP_OUT_MS``: the longest drop-out time of a fair waiter, in milliseconds.
MAX_DROP_OUT_MS = 3_600_000

#: ``REDLOCK_MAX_LABEL_LEN``: the longest holder label, in bytes.
MAX_LABEL_LEN = 256

#: ``REDLOCK_MAX_KEY_PREFIX_LEN``: the longest key prefix, in bytes.
MAX_KEY_PREFIX_LEN = 256

#: ``REDLOCK_HOLDERS_QUORUM`` (``SIZE_MAX``): the ``index`` that names the holder a quorum of
#: nodes agrees on.
HOLDERS_QUORUM = ctypes.c_size_t(-1).value


# Opaque handle types: distinct pointer types so that a lease can never be passed where a
# manager is expected.
class Config(Structure):
    """``struct redlock_config`` (opaque)."""


class Manager(Structure):
    """``struct redlock_manager`` (opaque)."""


class Lease(Structure):
    """``struct redlock_lease`` (opaque)."""


class AcquireOpts(Structure):
    """``struct redlock_acquire_opts`` (opaque): the options of one acquisition."""


class Cancel(Structure):
    """``struct redlock_cancel`` (opaque): a cancellation handle."""


class Holders(Structure):
    """``struct redlock_holders`` (opaque): a snapshot of who holds one resource."""


class Leader(Structure):
    """``struct redlock_leader`` (opaque): an election's leader as a quorum held it."""


class HolderInfo(Structure):
    """``struct redlock_holder_info``: one node's answer, or the quorum's holder (a plain
    struct, filled by ``redlock_holders_info``; ``tests/test_ffi.py`` checks its fields
    against the header)."""

    _fields_ = [
        ("state", c_int),  # enum redlock_hold_state
        ("kind", c_int),  # enum redlock_holder_kind
        ("ttl_ms", c_int64),  # -1: not held, or no expiry
        ("held_for_ms", c_int64),  # -1: unknown, or not held
    ]


ConfigPtr = POINTER(Config)
ManagerPtr = POINTER(Manager)
LeasePtr = POINTER(Lease)
AcquireOptsPtr = POINTER(AcquireOpts)
CancelPtr = POINTER(Cancel)
HoldersPtr = POINTER(Holders)
LeaderPtr = POINTER(Leader)

#: ``enum redlock_status`` (returned by every fallible function).
status_t = c_int
#: ``enum redlock_node_outcome``.
node_outcome_t = c_int
#: ``enum redlock_quarantine_reason``.
quarantine_reason_t = c_int
#: ``char *err`` and ``char *buf`` (a ``ctypes.create_string_buffer``).
err_buf_t = POINTER(c_char)
#: ``const uint8_t *resource`` (passed as ``bytes``; the length is passed separately).
resource_t = c_char_p
#: ``const uint8_t *const *resources`` of ``redlock_acquire_many``: an array of ``c_char_p``
#: (``(c_char_p * n)(*names)``), each entry's length in the ``const size_t *`` beside it.
resources_t = POINTER(c_char_p)
#: ``redlock_lost_fn``: ``void (*)(struct redlock_lease *, void *)``. Declared for the table's
#: completeness; the binding always passes NULL (see ``Lease.auto_renew``: Python code never
#: runs on the library's renewal thread).
lost_fn_t = CFUNCTYPE(None, LeasePtr, c_void_p)
#: A NULL ``redlock_lost_fn`` (ctypes does not turn ``None`` into one).
NULL_LOST_FN = lost_fn_t()

# name -> (restype, argtypes). Keep in the header's order.
FUNCTIONS: Dict[str, Tuple[Any, Tuple[Any, ...]]] = {
    "redlock_status_str": (c_char_p, (c_int32,)),
    "redlock_version": (c_char_p, ()),
    "redlock_acquire_opts_new": (AcquireOptsPtr, ()),
    "redlock_acquire_opts_free": (None, (AcquireOptsPtr,)),
    "redlock_acquire_opts_set_wait_ms": (status_t, (AcquireOptsPtr, c_uint32)),
    "redlock_acquire_opts_set_notify": (status_t, (AcquireOptsPtr, c_bool)),
    "redlock_acquire_opts_set_owner": (status_t, (AcquireOptsPtr, resource_t, c_size_t)),
    "redlock_acquire_opts_set_owner_err": (
        status_t,
        (AcquireOptsPtr, resource_t, c_size_t, err_buf_t, c_size_t),
    ),
    "redlock_acquire_opts_set_retries": (status_t, (AcquireOptsPtr,)),
    "redlock_acquire_opts_set_fenced": (status_t, (AcquireOptsPtr, c_bool)),
    "redlock_acquire_opts_set_shared": (status_t, (AcquireOptsPtr, c_bool)),
    "redlock_acquire_opts_set_fair": (status_t, (AcquireOptsPtr, c_bool)),
    "redlock_acquire_opts_set_drop_out_ms": (status_t, (AcquireOptsPtr, c_uint32)),
    "redlock_acquire_opts_set_auto_renew": (status_t, (AcquireOptsPtr, c_uint32, c_uint32)),
    "redlock_acquire": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            c_uint32,
            AcquireOptsPtr,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_acquire_many": (
        status_t,
        (
            ManagerPtr,
            resources_t,
            POINTER(c_size_t),
            c_size_t,
            c_uint32,
            AcquireOptsPtr,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_acquire_check": (
        status_t,
        (ManagerPtr, resource_t, c_size_t, c_uint32, AcquireOptsPtr, err_buf_t, c_size_t),
    ),
    "redlock_acquire_many_check": (
        status_t,
        (
            ManagerPtr,
            resources_t,
            POINTER(c_size_t),
            c_size_t,
            c_uint32,
            AcquireOptsPtr,
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_semaphore_acquire": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            c_uint32,
            c_uint32,
            AcquireOptsPtr,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_lock": (
        status_t,
        (ManagerPtr, resource_t, c_size_t, c_uint32, POINTER(LeasePtr), err_buf_t, c_size_t),
    ),
    "redlock_try_lock": (
        status_t,
        (ManagerPtr, resource_t, c_size_t, c_uint32, POINTER(LeasePtr), err_buf_t, c_size_t),
    ),
    "redlock_lock_wait": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            c_uint32,
            c_uint32,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_lock_opts": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            c_uint32,
            c_uint32,
            c_uint32,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_cancel_new": (CancelPtr, ()),
    "redlock_cancel_fire": (None, (CancelPtr,)),
    "redlock_cancel_is_fired": (c_bool, (CancelPtr,)),
    "redlock_cancel_free": (None, (CancelPtr,)),
    "redlock_acquire_opts_set_cancel": (status_t, (AcquireOptsPtr, CancelPtr)),
    "redlock_config_new": (ConfigPtr, ()),
    "redlock_config_free": (None, (ConfigPtr,)),
    "redlock_config_add_node": (status_t, (ConfigPtr, c_char_p, err_buf_t, c_size_t)),
    "redlock_config_set_retry": (
        status_t,
        (ConfigPtr, c_uint32, c_uint32, err_buf_t, c_size_t),
    ),
    "redlock_config_set_drift_factor": (status_t, (ConfigPtr, c_double, err_buf_t, c_size_t)),
    "redlock_config_set_timeouts": (
        status_t,
        (ConfigPtr, c_uint32, c_uint32, err_buf_t, c_size_t),
    ),
    "redlock_config_set_max_ttl": (status_t, (ConfigPtr, c_uint32, err_buf_t, c_size_t)),
    "redlock_config_set_restart_quarantine": (
        status_t,
        (ConfigPtr, c_bool, err_buf_t, c_size_t),
    ),
    "redlock_config_set_key_prefix": (
        status_t,
        (ConfigPtr, resource_t, c_size_t, err_buf_t, c_size_t),
    ),
    "redlock_config_set_label": (status_t, (ConfigPtr, c_char_p, err_buf_t, c_size_t)),
    "redlock_config_set_sentinel_auth": (
        status_t,
        (ConfigPtr, c_char_p, c_char_p, err_buf_t, c_size_t),
    ),
    "redlock_config_set_replica_acks": (
        status_t,
        (ConfigPtr, c_uint32, c_uint32, err_buf_t, c_size_t),
    ),
    "redlock_config_set_tls_ca_file": (status_t, (ConfigPtr, c_char_p, err_buf_t, c_size_t)),
    "redlock_config_set_tls_client_cert": (
        status_t,
        (ConfigPtr, c_char_p, c_char_p, err_buf_t, c_size_t),
    ),
    "redlock_config_set_tls_server_name": (status_t, (ConfigPtr, c_char_p, err_buf_t, c_size_t)),
    "redlock_config_set_tls_insecure_skip_verify": (
        status_t,
        (ConfigPtr, c_bool, err_buf_t, c_size_t),
    ),
    "redlock_campaign": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            resource_t,
            c_size_t,
            c_uint32,
            AcquireOptsPtr,
            POINTER(LeasePtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_lease_proclaim": (status_t, (LeasePtr, resource_t, c_size_t, err_buf_t, c_size_t)),
    "redlock_leader_get": (
        status_t,
        (ManagerPtr, resource_t, c_size_t, POINTER(LeaderPtr), err_buf_t, c_size_t),
    ),
    "redlock_leader_wait_change": (
        status_t,
        (
            ManagerPtr,
            resource_t,
            c_size_t,
            c_uint64,
            c_uint32,
            POINTER(LeaderPtr),
            err_buf_t,
            c_size_t,
        ),
    ),
    "redlock_leader_term": (c_uint64, (LeaderPtr,)),
    "redlock_leader_value": (POINTER(c_uint8), (LeaderPtr, POINTER(c_size_t))),
    "redlock_leader_validity_ms": (c_uint32, (LeaderPtr,)),
    "redlock_leader_free": (None, (LeaderPtr,)),
    "redlock_holders_get": (
        status_t,
        (ManagerPtr, resource_t, c_size_t, POINTER(HoldersPtr), err_buf_t, c_size_t),
    ),
    "redlock_holders_is_locked": (c_bool, (HoldersPtr,)),
    "redlock_holders_node_count": (c_size_t, (HoldersPtr,)),
    "redlock_holders_info": (
        status_t,
        (HoldersPtr, c_size_t, POINTER(HolderInfo), err_buf_t, c_size_t),
    ),
    "redlock_holders_label": (c_size_t, (HoldersPtr, c_size_t, err_buf_t, c_size_t)),
    "redlock_holders_id": (c_size_t, (HoldersPtr, c_size_t, POINTER(c_uint8), c_size_t)),
    "redlock_holders_free": (None, (HoldersPtr,)),
    "redlock_extend": (status_t, (LeasePtr, c_uint32, err_buf_t, c_size_t)),
    "redlock_unlock": (status_t, (LeasePtr, err_buf_t, c_size_t)),
    "redlock_lease_fencing_token": (c_uint64, (LeasePtr,)),
    "redlock_lease_is_renewing": (c_bool, (LeasePtr,)),
    "redlock_lease_lost_reason": (c_size_t, (LeasePtr, err_buf_t, c_size_t)),
    "redlock_lease_ttl_ms": (c_uint32, (LeasePtr,)),
    "redlock_lease_validity_ms": (c_uint32, (LeasePtr,)),
    "redlock_lease_is_valid": (c_bool, (LeasePtr,)),
    "redlock_lease_token": (c_char_p, (LeasePtr,)),
    "redlock_lease_value": (c_char_p, (LeasePtr,)),
    "redlock_lease_resource": (POINTER(c_uint8), (LeasePtr, POINTER(c_size_t))),
    "redlock_lease_resource_count": (c_size_t, (LeasePtr,)),
    "redlock_lease_resource_at": (POINTER(c_uint8), (LeasePtr, c_size_t, POINTER(c_size_t))),
    "redlock_lease_is_shared": (c_bool, (LeasePtr,)),
    "redlock_lease_ticket": (c_bool, (LeasePtr, POINTER(c_uint64))),
    "redlock_lease_permit": (c_bool, (LeasePtr, POINTER(c_uint32), POINTER(c_uint32))),
    "redlock_lease_node_count": (c_size_t, (LeasePtr,)),
    "redlock_lease_granted": (c_size_t, (LeasePtr,)),
    "redlock_lease_node_outcomes": (c_size_t, (LeasePtr, POINTER(node_outcome_t), c_size_t)),
    "redlock_lease_free": (None, (LeasePtr,)),
    "redlock_lease_auto_renew": (
        status_t,
        (LeasePtr, c_uint32, c_uint32, lost_fn_t, c_void_p, err_buf_t, c_size_t),
    ),
    "redlock_lease_auto_renew64": (
        status_t,
        (LeasePtr, c_uint64, c_uint32, lost_fn_t, c_void_p, err_buf_t, c_size_t),
    ),
    "redlock_lease_stop_renewal": (None, (LeasePtr,)),
    "redlock_lease_is_lost": (c_bool, (LeasePtr,)),
    "redlock_lease_wait_lost": (c_bool, (LeasePtr, c_uint32)),
    "redlock_manager_new": (status_t, (ConfigPtr, POINTER(ManagerPtr), err_buf_t, c_size_t)),
    "redlock_manager_free": (None, (ManagerPtr,)),
    "redlock_manager_node_count": (c_size_t, (ManagerPtr,)),
    "redlock_manager_quorum": (c_size_t, (ManagerPtr,)),
    "redlock_manager_node_state": (
        status_t,
        (ManagerPtr, c_size_t, POINTER(c_bool), POINTER(c_uint32), err_buf_t, c_size_t),
    ),
    "redlock_manager_node_quarantine_reason": (quarantine_reason_t, (ManagerPtr, c_size_t)),
    "redlock_manager_admit_new_nodes": (
        status_t,
        (ManagerPtr, POINTER(c_size_t), c_size_t, err_buf_t, c_size_t),
    ),
    "redlock_manager_metrics": (c_size_t, (ManagerPtr, err_buf_t, c_size_t)),
}


class LibraryNotFoundError(OSError):
    """The shared library ``libredlock`` could not be found or loaded.

    The message lists every place that was tried, in order, and why each failed. Build the
    library with ``cargo build --release`` in the repository, or point ``REDLOCK_LIB`` at it.
    """


def _lib_filename() -> str:
    if sys.platform == "darwin":
        return "libredlock.dylib"
    if sys.platform == "win32":
        return "redlock.dll"
    return "libredlock.so"


#: The file name of the shared library on this platform.
LIB_FILENAME = _lib_filename()

_PACKAGE_DIR = Path(__file__).resolve().parent
# bindings/python/redlock -> the repository root, when used from a checkout.
_REPO_ROOT = _PACKAGE_DIR.parent.parent.parent


def library_candidates() -> List[Tuple[str, Optional[Path]]]:
    """The places searched, in order, as ``(description, path)``; ``path`` is ``None`` for the
    system's library search. ``REDLOCK_LIB`` is not included (it overrides the list)."""
    built = sorted(_PACKAGE_DIR.glob("_libredlock*"))
    return [
        ("library built into the package", built[0] if built else _PACKAGE_DIR / "_libredlock.so"),
        ("copy inside the package", _PACKAGE_DIR / LIB_FILENAME),
        ("repository target/release", _REPO_ROOT / "target" / "release" / LIB_FILENAME),
        ("repository target/debug", _REPO_ROOT / "target" / "debug" / LIB_FILENAME),
        ("system library search", None),
    ]


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def _bind(cdll: ctypes.CDLL, where: str) -> ctypes.CDLL:
    """Applies the declaration table; a missing symbol means a library of another version."""
    for name, (restype, argtypes) in FUNCTIONS.items():
        try:
            fn = getattr(cdll, name)
        except AttributeError:
            raise LibraryNotFoundError(
                f"{where} does not export {name}: it is not a libredlock matching this "
                f"Python package (rebuild it with `cargo build --release`)"
            ) from None
        fn.restype = restype
        fn.argtypes = argtypes
    return cdll


def _try_load(path: str) -> ctypes.CDLL:
    return ctypes.CDLL(path)


def _load() -> Tuple[ctypes.CDLL, str]:
    env = os.environ.get(ENV_VAR)
    if env:
        try:
            cdll = _try_load(env)
        except OSError as e:
            raise LibraryNotFoundError(
                f"could not load the redlock library from {ENV_VAR}={env!r}: {e} "
                f"(unset {ENV_VAR} to search the default places)"
            ) from None
        return _bind(cdll, f"{ENV_VAR}={env!r}"), env

    tried: List[str] = [f"{ENV_VAR}: not set"]
    for what, path in library_candidates():
        if path is not None:
            if not path.is_file():
                tried.append(f"{what}: {path} (not found)")
                continue
            try:
                return _bind(_try_load(str(path)), str(path)), str(path)
            except OSError as e:
                tried.append(f"{what}: {path} ({e})")
            continue
        # The system's search: dlopen's own (LD_LIBRARY_PATH, ld.so.cache, default paths),
        # then whatever ctypes.util.find_library knows.
        names = [LIB_FILENAME]
        found = ctypes.util.find_library("redlock")
        if found and found not in names:
            names.append(found)
        for name in names:
            try:
                cdll = _try_load(name)
            except OSError as e:
                tried.append(f"{what}: {name} ({e})")
                continue
            where = getattr(cdll, "_name", name)
            return _bind(cdll, str(where)), str(where)
    raise LibraryNotFoundError(
        "the redlock shared library was not found. Build it with `cargo build --release` "
        f"in the repository, or set {ENV_VAR} to its path. Looked in, in order:\n  "
        + "\n  ".join(tried)
    )


def lib() -> ctypes.CDLL:
    """The loaded, declared library (loaded on first call; thread-safe)."""
    global _lib, _lib_path
    cdll = _lib
    if cdll is not None:
        return cdll
    with _lock:
        if _lib is None:
            _lib, _lib_path = _load()
        return _lib


def library_path() -> str:
    """The path (or name) the library was loaded from; loads it if needed."""
    lib()
    assert _lib_path is not None
    return _lib_path


def err_buffer() -> "ctypes.Array[c_char]":
    """A fresh, zeroed error buffer of :data:`ERR_LEN` bytes. ``_core`` keeps one per thread
    and reuses it: C writes a NUL-terminated message into it on every failure, and it is read
    only then, right after the call."""
    return ctypes.create_string_buffer(ERR_LEN)


def err_text(buf: "ctypes.Array[c_char]") -> str:
    """The NUL-terminated message in ``buf``, decoded (invalid UTF-8 replaced)."""
    return buf.value.decode("utf-8", errors="replace")
