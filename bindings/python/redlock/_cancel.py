"""Cancellation: :class:`Cancel` (``redlock_cancel``), and the cancel handle each
cancellable acquisition carries (:func:`_cancel_hold`)."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Optional, Tuple, Type

from . import _core
from ._errors import RedlockError
from ._handle import _Handle


class Cancel:
    """A cancellation handle (``redlock_cancel``): pass it as ``cancel=`` to
    :meth:`Redlock.acquire`, :meth:`Redlock.lock` or :meth:`Redlock.try_lock`, and
    :meth:`fire` it, from any thread, to stop every acquisition that carries it. Such an
    acquisition raises :class:`~redlock.Cancelled`: at once while it waits, within one round
    trip while it is talking to the nodes, and it leaves no key behind (a lock granted as the
    handle fired is released before the call returns).

    A handle that has fired stays fired: an acquisition started with it raises
    :class:`~redlock.Cancelled` without contacting any node. Use a new handle for each
    operation you may want to cancel. One handle may serve any number of acquisitions, on
    any number of threads, at once.

    A ``KeyboardInterrupt`` (Ctrl-C) that ends a waiting acquisition on the main thread fires
    the handle that acquisition carries (see :meth:`Redlock.acquire`).

    Free it with :meth:`close` or a ``with`` block (or leave it to garbage collection);
    closing it while an acquisition uses it is safe (the acquisition keeps what it needs), but
    it can then no longer be fired. After :meth:`close`, :meth:`fire` and :attr:`fired` raise
    :class:`~redlock.HandleClosed`.
    """

    __slots__ = ("_handle", "__weakref__")

    def __init__(self) -> None:
        c = _core.load()
        ptr = c.redlock_cancel_new()
        if not ptr:
            raise MemoryError("redlock_cancel_new returned NULL")
        self._handle = _Handle(ptr, c.redlock_cancel_free, "cancel handle")

    def fire(self) -> None:
        """Fires the handle: every acquisition carrying it stops with
        :class:`~redlock.Cancelled` (waking at once if it waits), now and later. Thread-safe
        and idempotent; never blocks on the acquisitions it stops.

        Raises:
            HandleClosed: the handle was closed.
        """
        h = self._handle
        p = h.acquire()
        try:
            _core._c.redlock_cancel_fire(p)
        finally:
            h.release()

    @property
    def fired(self) -> bool:
        """True once :meth:`fire` was called (by you, or by a Ctrl-C that ended an acquisition
        carrying this handle). Raises :class:`~redlock.HandleClosed` after :meth:`close`."""
        h = self._handle
        p = h.acquire()
        try:
            return bool(_core._c.redlock_cancel_is_fired(p))
        finally:
            h.release()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the ``with`` block ended)."""
        return self._handle.closed

    def close(self) -> None:
        """Frees the handle (idempotent). Does not fire it: acquisitions that carry it go on,
        no longer cancellable through it."""
        self._handle.close()

    def __reduce__(self) -> Any:
        raise TypeError("a redlock.Cancel cannot be pickled or sent to another process")

    def __enter__(self) -> "Cancel":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        h = self._handle
        if h.closed:
            return "<redlock.Cancel closed>"
        try:
            state = "fired" if self.fired else "not fired"
        except RedlockError:  # closed meanwhile
            state = "closed"
        return f"<redlock.Cancel {state}>"


def _cancel_hold(cancel: Optional[Cancel]) -> Tuple[_Handle, Any]:
    """The cancel handle an acquisition carries, acquired: ``cancel``'s, or a new one of the
    call's own when ``cancel`` is ``None`` (closed at once, so freed with the last hold).
    Returns ``(handle, pointer)``; pair with ``handle.release()`` in a ``finally`` (closing
    the caller's :class:`Cancel` meanwhile then waits for the call)."""
    if cancel is None:
        c = _core._c
        ptr = c.redlock_cancel_new()
        if not ptr:
            raise MemoryError("redlock_cancel_new returned NULL")
        ch = _Handle(ptr, c.redlock_cancel_free, "cancel handle")
        cp = ch.acquire()
        ch.close()  # freed when the last hold on it is released
        return ch, cp
    ch = cancel._handle
    return ch, ch.acquire()
