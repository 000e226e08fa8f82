"""Handle lifetime: :class:`_Handle` owns one C pointer (a call in progress never runs on
freed memory), and :class:`_Process` keeps the process id and the main thread current across
``os.fork()`` (a handle is never used, nor freed, in a forked child)."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Any, Callable, Optional

from ._errors import HandleClosed, RedlockError


class _Process:
    """This process's id, kept current across ``os.fork()`` (a ``getpid`` syscall per call
    would be wasted), and whether the interpreter is exiting. Class attributes, so that
    ``_Handle.__del__`` still finds them while modules are torn down."""

    pid = os.getpid()
    exiting = False
    #: The main thread's id: the only thread Python runs signal handlers on, hence the only
    #: one whose waits are made interruptible (by running them on a helper thread).
    main_ident = threading.main_thread().ident


def _after_fork_in_child() -> None:
    _Process.pid = os.getpid()
    # The forking thread is the child's only thread, and its main thread.
    _Process.main_ident = threading.get_ident()


def _at_exit() -> None:
    # From here on the collector frees nothing: a daemon thread may still be inside a C call
    # on a handle, and the OS reclaims everything anyway.
    _Process.exiting = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_at_exit)


class _Handle:
    """Owns one C pointer. ``acquire()`` lends it to one C call (``release()`` in a
    ``finally`` returns it); ``close()`` frees it at once if no call is in progress, otherwise
    when the last one returns, so no C call ever runs on freed memory.

    A handle that is garbage-collected unclosed is freed by ``__del__``, which only calls the
    ``*_free`` function: no unlock, no I/O. (Every call in progress holds a reference to the
    handle, so it is never collected under a call.) Nothing is freed once the interpreter is
    exiting (a daemon thread may still be inside a C call), nor in a forked child (it shares
    the parent's sockets but not the library's threads: the copy is left to the OS).

    Nothing inside the mutex allocates an object the cyclic garbage collector tracks, so a
    finalizer run by the collector never finds the mutex held by its own thread."""

    __slots__ = ("_ptr", "_free", "_what", "_pid", "_mutex", "_users", "_waiters", "_closed",
                 "_freed", "__weakref__")  # fmt: skip

    def __init__(self, ptr: Any, free: Callable[[Any], None], what: str) -> None:
        self._ptr = ptr
        self._free = free
        self._freed = False
        self._pid = _Process.pid
        self._what = what
        self._mutex = threading.Lock()
        self._users = 0
        self._waiters = 0
        self._closed = False

    def __del__(self, _proc: Any = _Process) -> None:
        # Unreferenced: no call can be in progress. ``_proc`` is bound now, so this works
        # during module teardown too (when it does nothing: exiting is set by then).
        if not self._freed and not _proc.exiting and self._pid == _proc.pid:
            self._freed = True
            self._free(self._ptr)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def freed(self) -> bool:
        """True once the C ``*_free`` function has run."""
        return self._freed

    def _free_now(self) -> None:
        # Called once: by whoever saw the handle closed with no call in progress.
        self._freed = True
        self._free(self._ptr)

    def acquire(self) -> Any:
        """The pointer, lent to one C call; pair with :meth:`release` (in a ``finally``)."""
        if self._pid != _Process.pid:
            raise RedlockError(
                f"this {self._what} was created in process {self._pid} and cannot be used in "
                f"a forked child ({os.getpid()}): create a new Redlock in the child"
            )
        with self._mutex:
            if not self._closed:
                self._users += 1
                return self._ptr
        raise HandleClosed(f"the {self._what} is closed")

    def hold(self) -> None:
        """One more hold on the pointer, for a caller that holds one already (from
        :meth:`acquire`), to hand to another thread; pair with :meth:`release`. Unlike
        :meth:`acquire` it works on a closed handle too: one that a call holds is not freed."""
        with self._mutex:
            assert self._users > 0, "hold() without a hold"
            self._users += 1

    def release(self) -> None:
        with self._mutex:
            self._users -= 1
            free_now = self._closed and not self._users
        if free_now:
            self._free_now()

    def acquire_waiting(self) -> Any:
        """:meth:`acquire` for a call that may block until interrupted (``wait_lost``); pair
        with :meth:`release_waiting`."""
        ptr = self.acquire()
        with self._mutex:
            self._waiters += 1
        return ptr

    def release_waiting(self) -> None:
        with self._mutex:
            self._waiters -= 1
        self.release()

    def close(self, interrupt: Optional[Callable[[Any], None]] = None) -> None:
        """Marks the handle closed and frees it now, or when the calls in progress return.
        If one of those is a waiting call (:meth:`acquire_waiting`), ``interrupt(ptr)`` (if
        given) is called first to make it return early (a lease's: stop its renewal, which
        ends ``wait_lost``). Otherwise close never waits for a call in progress."""
        if self._pid != _Process.pid:
            self._closed = True  # never free the parent's handle from a child
            return
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            busy = self._users > 0
            interrupting = busy and self._waiters > 0 and interrupt is not None
            if interrupting:
                self._users += 1  # the interrupt is a call in progress too
        if not busy:
            self._free_now()
        elif interrupting:
            try:
                interrupt(self._ptr)  # type: ignore[misc]
            finally:
                self.release()
