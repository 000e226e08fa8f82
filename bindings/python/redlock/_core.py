"""The loaded library and the conversion of its statuses into exceptions.

Every module of the binding reaches the C functions through :data:`_c` (``_core._c``), set
by :func:`load` when the first :class:`~redlock.Redlock` or :class:`~redlock.Cancel` is
made (every :class:`~redlock.Lease` comes from a manager): the hot paths read a module
attribute instead of calling ``_ffi.lib()``.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

from . import _ffi
from ._errors import error_for_status

# The loaded library (see the module's docstring).
_c: Any = None

# ``redlock_lock_opts`` flags (include/redlock.h). The binding itself acquires through
# ``redlock_acquire`` and its options objects; these mirror the header (tests/test_ffi.py).
LOCK_FENCED = 1
LOCK_ONCE = 2
LOCK_WAIT = 4

# One reusable error buffer per thread: C writes a NUL-terminated message into it on every
# failure (and only then is it read, right after the call, on the same thread).
_tls = threading.local()


def load() -> Any:
    """Loads the library (once) and keeps it as :data:`_c`; returns it."""
    global _c
    c = _c = _ffi.lib()
    return c


def _err_buf() -> "ctypes.Array[ctypes.c_char]":
    try:
        return _tls.err
    except AttributeError:
        buf = _tls.err = _ffi.err_buffer()
        return buf


def version() -> str:
    """The version of the loaded C library (``redlock_version()``), e.g. ``"0.1.0"``."""
    raw = _ffi.lib().redlock_version()
    return raw.decode("ascii") if raw else ""


def _check(status: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    """Raises the exception for a non-OK status, with the message from ``err``."""
    if status:
        _raise(status, err)


def _check_status(status: int) -> None:
    """Raises the exception for a non-OK status of a function without an error buffer."""
    if status:
        raw = _ffi.lib().redlock_status_str(status)
        message = raw.decode("utf-8", "replace") if raw else f"redlock status {status}"
        raise error_for_status(status, message)


def _raise(status: int, err: "ctypes.Array[ctypes.c_char]") -> None:
    """Raises the exception for the non-OK ``status``, with the message from ``err``."""
    message = _ffi.err_text(err)
    if not message:
        raw = _ffi.lib().redlock_status_str(status)
        message = raw.decode("utf-8", "replace") if raw else f"redlock status {status}"
    raise error_for_status(status, message)
