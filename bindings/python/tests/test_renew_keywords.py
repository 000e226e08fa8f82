"""The renewal keywords of the contract on every acquisition form (issue #39, item 1):
``mgr.lock(resource, ttl_ms, auto_renew=True, max_hold_ms=..., on_lost=callable)`` and
``lk.lost``, on ``lock``, ``try_lock``, ``acquire``, the semaphore's methods, the
multi-resource ones and the asyncio ones.

The lease is made lost by its own bound (``max_hold_ms``, counted from the acquisition), so
no node is touched; the tests wait for the callback with a generous bounded wait and assert
only outcomes (called once, with the lease, on a thread of the binding; ``lost`` true), never
how long it took."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Dict, List

import pytest

import redlock

from redis_nodes import key_of, wait_until

# The TTL outlasts the bound: the lease is lost to its bound, never to a renewal that a busy
# machine delays (with a 300 ms TTL, renewed every 100 ms, a renewal 200 ms late loses it
# first, for another reason).
TTL_MS = 1_000
HOLD_MS = 600  # the lease is lost at this, counted from the acquisition
CALLBACK_WAIT_S = 20.0


def _watchers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "redlock-lost-watcher")


def _many(r: str) -> List[str]:
    return [r, r + ":second"]


# Each synchronous form: (manager, resource, **keywords) -> Lease.
SYNC_FORMS: Dict[str, Callable[..., redlock.Lease]] = {
    "lock": lambda m, r, **kw: m.lock(r, TTL_MS, **kw),
    "try_lock": lambda m, r, **kw: m.try_lock(r, TTL_MS, **kw),
    "acquire": lambda m, r, **kw: m.acquire(r, TTL_MS, **kw),
    "acquire_many": lambda m, r, **kw: m.acquire_many(_many(r), TTL_MS, **kw),
    "semaphore.acquire": lambda m, r, **kw: m.semaphore(r, 2).acquire(TTL_MS, **kw),
    "semaphore.lock": lambda m, r, **kw: m.semaphore(r, 2).lock(TTL_MS, **kw),
    "semaphore.try_acquire": lambda m, r, **kw: m.semaphore(r, 2).try_acquire(TTL_MS, **kw),
}

# Each awaitable form: (manager, resource, **keywords) -> awaitable Lease.
AWAIT_FORMS: Dict[str, Callable[..., Any]] = {
    "aacquire": lambda m, r, **kw: m.aacquire(r, TTL_MS, **kw),
    "aacquire_many": lambda m, r, **kw: m.aacquire_many(_many(r), TTL_MS, **kw),
    "semaphore.aacquire": lambda m, r, **kw: m.semaphore(r, 2).aacquire(TTL_MS, **kw),
}

# Each ``async with`` form: (manager, resource, **keywords) -> AsyncLock.
ASYNC_WITH_FORMS: Dict[str, Callable[..., Any]] = {
    "alock": lambda m, r, **kw: m.alock(r, TTL_MS, **kw),
    "alock_many": lambda m, r, **kw: m.alock_many(_many(r), TTL_MS, **kw),
    "semaphore.alock": lambda m, r, **kw: m.semaphore(r, 2).alock(TTL_MS, **kw),
}


class Recorder:
    """An ``on_lost`` callback that records each call: the lease and the thread."""

    def __init__(self) -> None:
        self.calls: List[Any] = []
        self.fired = threading.Event()

    def __call__(self, lease: redlock.Lease) -> None:
        self.calls.append((lease, threading.current_thread(), lease.lost))
        self.fired.set()


def _check_lost(lease: redlock.Lease) -> None:
    """The lease reads as lost (while its handle is open)."""
    assert lease.lost is True and lease.validity_ms == 0
    assert "maximum hold time" in (lease.lost_reason or ""), lease.lost_reason


def _check_called_once_with(rec: Recorder, lease: redlock.Lease) -> None:
    assert rec.fired.wait(CALLBACK_WAIT_S), "on_lost was not called"
    # The watcher ends after its one call; then no second call can come.
    wait_until(lambda: _watchers() == 0, timeout=CALLBACK_WAIT_S, what="the watcher to end")
    assert len(rec.calls) == 1, rec.calls
    got, thread, lost = rec.calls[0]
    assert got is lease
    assert thread is not threading.main_thread() and thread.daemon
    assert lost is True


@pytest.mark.parametrize("form", sorted(SYNC_FORMS))
def test_on_lost_and_lost_through_every_synchronous_form(mgr, resource, form):
    rec = Recorder()
    lk = SYNC_FORMS[form](
        mgr, resource, auto_renew=True, max_hold_ms=HOLD_MS, on_lost=rec
    )
    try:
        _check_called_once_with(rec, lk)
        _check_lost(lk)
        with pytest.raises(redlock.NotHeld):
            lk.unlock()
    finally:
        lk.close()


@pytest.mark.parametrize("form", sorted(AWAIT_FORMS))
def test_on_lost_and_lost_through_every_awaitable_form(mgr, resource, form):
    rec = Recorder()

    async def take() -> redlock.Lease:
        return await AWAIT_FORMS[form](
            mgr, resource, auto_renew=True, max_hold_ms=HOLD_MS, on_lost=rec
        )

    lk = asyncio.run(take())
    try:
        _check_called_once_with(rec, lk)
        _check_lost(lk)
    finally:
        lk.close()


@pytest.mark.parametrize("form", sorted(ASYNC_WITH_FORMS))
def test_on_lost_and_lost_through_every_async_with_form(mgr, resource, form):
    rec = Recorder()
    seen: List[redlock.Lease] = []

    async def hold() -> None:
        async with ASYNC_WITH_FORMS[form](
            mgr, resource, auto_renew=True, max_hold_ms=HOLD_MS, on_lost=rec
        ) as lk:
            seen.append(lk)
            await asyncio.get_running_loop().run_in_executor(
                None, rec.fired.wait, CALLBACK_WAIT_S
            )
            _check_lost(lk)

    # The block outlived its lock: the unlock at its end says so.
    with pytest.raises(redlock.NotHeld):
        asyncio.run(hold())
    assert len(seen) == 1
    _check_called_once_with(rec, seen[0])


def test_the_contract_form_renews_until_unlocked(cluster, mgr, resource):
    # The exact form of the contract; the lock is renewed, and unlocking stops it without a
    # call to on_lost.
    rec = Recorder()
    with mgr.lock(resource, 1_000, auto_renew=True, max_hold_ms=600_000, on_lost=rec) as lk:
        assert lk.lost is False
        assert cluster.holding(key_of(resource), lk.value) >= 2
    cluster.released(key_of(resource))
    wait_until(lambda: _watchers() == 0, timeout=CALLBACK_WAIT_S, what="the watcher to end")
    assert rec.calls == []


@pytest.mark.parametrize("form", sorted(SYNC_FORMS))
def test_on_lost_is_checked_before_anything_is_sent(cluster, mgr, resource, form):
    with pytest.raises(TypeError, match="on_lost"):
        SYNC_FORMS[form](mgr, resource, auto_renew=True, on_lost="not callable")
    with pytest.raises(redlock.InvalidArgument, match="on_lost"):
        SYNC_FORMS[form](mgr, resource, on_lost=lambda _: None)
    assert cluster.present(key_of(resource)) == 0
