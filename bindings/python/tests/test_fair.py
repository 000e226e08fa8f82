"""The fair (first-come, first-served) lock (``fair=True``, ``drop_out_ms``, ``Lease.ticket``,
``Lease.is_fair``) against real redis-server nodes.

Waiters queued one after another (each started once the one before is in the queue hash
``redlock-fair:<lock key>`` on a majority of the nodes, read with HLEN behind the library's
back) are granted the lock in that order, each with a larger ticket; a release wakes the
next waiter alone (the waiters' drop-out time is long, so none refreshes its place during
the test, and the other waiters' managers make no attempt); a lock granted at once has no
ticket; a waiter that gives up (its wait over, cancelled, its task cancelled) leaves the
queue; the asyncio variants; bad input refused before anything is sent.

Every wait is bounded and generous; the order checks are strict (the lock guarantees them)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest

import redlock

from redis_nodes import key_of, wait_until
from test_acquire import _run, attempts, nothing_reached_the_library, nothing_sent

#: Long enough that no waiter refreshes its place while a test runs (it refreshes every fifth
#: of it): any attempt after a release is a wake-up.
NO_REFRESH_MS = 600_000


def queue_key(resource: str) -> bytes:
    """The fair queue of ``resource``: a hash with one field per waiter."""
    return b"redlock-fair:" + key_of(resource)


def queued(cluster, resource: str) -> List[int]:
    """How many waiters each node's queue of ``resource`` holds."""
    return [s.command("HLEN", queue_key(resource)) for s in cluster.servers]


def wait_queued(cluster, resource: str, n: int) -> None:
    """Waits until at least ``n`` waiters are queued on a majority of the nodes: the last of
    them has finished queueing, so whoever queues now gets a larger ticket."""
    majority = len(cluster.servers) // 2 + 1
    wait_until(
        lambda: sum(1 for q in queued(cluster, resource) if q >= n) >= majority,
        timeout=30.0,
        what=f"{n} fair waiters queued on a majority",
    )


def wait_queue_gone(cluster, resource: str) -> None:
    """Waits until no node has a queue for ``resource`` (each entry left with its waiter)."""
    wait_until(
        lambda: not any(queued(cluster, resource)), timeout=10.0, what="the queue emptied"
    )


def test_a_fair_lock_granted_at_once_has_no_ticket(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    lk = m.try_lock(resource, 10_000, fair=True)
    assert lk.is_fair and lk.ticket is None
    assert not lk.is_shared and lk.fencing_token is None
    assert " fair " in repr(lk) and "ticket=" not in repr(lk)
    assert cluster.holding(key_of(resource), lk.value) >= 2
    # Held: a plain try and a fair try are refused, and the fair try queues nothing.
    with pytest.raises(redlock.NotAcquired):
        m.try_lock(resource, 10_000)
    with pytest.raises(redlock.NotAcquired):
        m.try_lock(resource, 10_000, fair=True)
    with pytest.raises(redlock.NotAcquired):
        m.acquire(resource, 10_000, wait_ms=0, fair=True, drop_out_ms=1_000)
    assert queued(cluster, resource) == [0, 0, 0]
    lk.unlock()
    lk.close()
    # Still readable after close.
    assert lk.is_fair and lk.ticket is None
    # Every acquisition method, free and with nobody queued: no ticket. Fenced works too.
    with m.lock(resource, 10_000, fair=True, drop_out_ms=redlock.MIN_DROP_OUT_MS) as lk:
        assert lk.is_fair and lk.ticket is None
    with m.acquire(resource, 10_000, wait_ms=5_000, fair=True, fenced=True) as lk:
        assert lk.is_fair and lk.ticket is None and lk.fencing_token is not None
    with m.acquire(resource, 10_000, fair=True, drop_out_ms=redlock.MAX_DROP_OUT_MS) as lk:
        assert lk.is_fair and lk.ticket is None
    # A plain lock is not fair.
    with m.try_lock(resource, 10_000) as lk:
        assert not lk.is_fair and lk.ticket is None
    # A fair try's options object is cached, apart from the plain one.
    assert (0, False, None, True, None, False, (True, 0)) in m._opts
    assert (0, False, None, True, None, False, None) in m._opts


def _fair_waiter(
    m: redlock.Redlock,
    resource: str,
    i: int,
    granted: List[Tuple[int, Optional[int]]],
    guard: threading.Lock,
    hold: Optional[threading.Event] = None,
) -> None:
    """Waits for the fair lock, records ``(i, ticket)`` in ``granted`` while holding it (so
    ``granted`` is in grant order), holds it until ``hold`` is set (if given), releases it."""
    with m.lock(resource, 10_000, wait_ms=60_000, fair=True, drop_out_ms=NO_REFRESH_MS) as lk:
        with guard:
            granted.append((i, lk.ticket))
        assert lk.is_fair
        if hold is not None:
            assert hold.wait(60)
        else:
            time.sleep(0.005)


def test_waiters_queued_one_after_another_are_granted_in_that_order(
    cluster, new_manager, resource
):
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    holder = m.try_lock(resource, 30_000, fair=True)
    granted: List[Tuple[int, Optional[int]]] = []
    guard = threading.Lock()
    waiters = []
    for i in range(4):
        waiters.append(_run(_fair_waiter, m, resource, i, granted, guard))
        wait_queued(cluster, resource, i + 1)
    assert all(t.is_alive() for t, _ in waiters) and granted == []
    released = time.monotonic()
    holder.unlock()
    holder.close()
    for t, box in waiters:
        t.join(60)
        assert not t.is_alive()
        assert "error" not in box, box
    took = time.monotonic() - released
    assert [i for i, _ in granted] == [0, 1, 2, 3]
    tickets = [t for _, t in granted]
    assert all(t is not None for t in tickets), tickets
    assert tickets == sorted(tickets) and len(set(tickets)) == 4, tickets
    # Each was woken by the release before it: without wake-ups, each would wait for its
    # next refresh (two minutes) or a retry pause (5 s).
    assert took < 20, took
    wait_queue_gone(cluster, resource)


def test_a_release_wakes_the_next_waiter_only(cluster, new_manager, resource):
    # Each waiter has a manager of its own: after the release, only the next waiter's manager
    # may make an attempt (it may take more than one, should it attempt before a quorum of the
    # nodes has applied the release).
    holder = new_manager(cluster.urls).try_lock(resource, 30_000, fair=True)
    granted: List[Tuple[int, Optional[int]]] = []
    guard = threading.Lock()
    hold = threading.Event()
    waiters = []
    mgrs = []
    try:
        for i in range(3):
            mgrs.append(new_manager(cluster.urls, retry_delay_ms=5_000))
            waiters.append(_run(_fair_waiter, mgrs[i], resource, i, granted, guard, hold))
            wait_queued(cluster, resource, i + 1)
        # Every waiter asleep: the attempt counts settle.
        before = [attempts(m) for m in mgrs]
        for _ in range(100):
            time.sleep(0.3)
            now = [attempts(m) for m in mgrs]
            if now == before:
                break
            before = now
        holder.unlock()
        wait_until(lambda: granted, timeout=10.0, what="the next waiter granted")
        time.sleep(0.3)
        after = [attempts(m) for m in mgrs]
        assert [i for i, _ in granted] == [0]
        assert after[1:] == before[1:], f"another waiter attempted: {before} then {after}"
    finally:
        hold.set()
        holder.close()
        for t, _ in waiters:
            t.join(60)
    assert [i for i, _ in granted] == [0, 1, 2]
    assert all("error" not in box for _, box in waiters), waiters
    wait_queue_gone(cluster, resource)


def test_a_waiter_that_gives_up_leaves_the_queue(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    holder = m.try_lock(resource, 30_000, fair=True)
    # Its wait runs out.
    with pytest.raises(redlock.NotAcquired):
        m.lock(resource, 10_000, wait_ms=300, fair=True)
    wait_queue_gone(cluster, resource)
    # Cancelled from another thread while it waits.
    with redlock.Cancel() as cancel:
        t, box = _run(
            lambda: m.acquire(resource, 10_000, wait_ms=60_000, fair=True, cancel=cancel)
        )
        wait_queued(cluster, resource, 1)
        cancel.fire()
        t.join(30)
        assert isinstance(box.get("error"), redlock.Cancelled), box
    wait_queue_gone(cluster, resource)
    # Nothing of theirs held the next waiter up: granted at once on the release.
    t, box = _run(lambda: m.lock(resource, 10_000, wait_ms=60_000, fair=True))
    wait_queued(cluster, resource, 1)
    holder.unlock()
    holder.close()
    t.join(30)
    lk = box["result"]
    assert isinstance(lk, redlock.Lease) and lk.ticket is not None
    lk.unlock()
    lk.close()
    wait_queue_gone(cluster, resource)


def test_asyncio_fair_waiters_are_granted_in_queue_order(cluster, new_manager, resource):
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    holder = m.try_lock(resource, 30_000, fair=True)

    async def until_queued(n: int) -> None:
        majority = len(cluster.servers) // 2 + 1
        for _ in range(3000):
            if sum(1 for q in queued(cluster, resource) if q >= n) >= majority:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"{n} fair waiters never queued on a majority")

    async def main() -> List[Tuple[str, Optional[int]]]:
        granted: List[Tuple[str, Optional[int]]] = []

        async def by_aacquire() -> None:
            lk = await m.aacquire(resource, 10_000, wait_ms=60_000, fair=True)
            granted.append(("aacquire", lk.ticket))
            assert lk.is_fair
            await lk.aunlock()
            lk.close()

        async def by_alock() -> None:
            async with m.alock(
                resource, 10_000, wait_ms=60_000, fair=True, drop_out_ms=NO_REFRESH_MS
            ) as lk:
                granted.append(("alock", lk.ticket))

        first = asyncio.ensure_future(by_aacquire())
        await until_queued(1)
        second = asyncio.ensure_future(by_alock())
        await until_queued(2)
        # A third, cancelled while it waits, leaves the queue.
        third = asyncio.ensure_future(m.aacquire(resource, 10_000, wait_ms=60_000, fair=True))
        await until_queued(3)
        third.cancel()
        with pytest.raises(asyncio.CancelledError):
            await third
        assert not first.done() and not second.done()
        await holder.aunlock()
        await asyncio.wait_for(asyncio.gather(first, second), 60)
        return granted

    granted = asyncio.run(main())
    holder.close()
    assert [how for how, _ in granted] == ["aacquire", "alock"]
    tickets = [t for _, t in granted]
    assert None not in tickets and tickets[0] < tickets[1], tickets  # type: ignore[operator]
    wait_queue_gone(cluster, resource)


BAD: List[Tuple[Dict[str, object], type]] = [
    ({"fair": "yes"}, TypeError),
    ({"fair": 1}, TypeError),
    ({"fair": None}, TypeError),
    ({"fair": True, "drop_out_ms": 1.5}, TypeError),
    ({"fair": True, "drop_out_ms": True}, TypeError),
    ({"fair": True, "drop_out_ms": "1000"}, TypeError),
    ({"fair": True, "drop_out_ms": redlock.MIN_DROP_OUT_MS - 1}, redlock.InvalidArgument),
    ({"fair": True, "drop_out_ms": redlock.MAX_DROP_OUT_MS + 1}, redlock.InvalidArgument),
    ({"fair": True, "drop_out_ms": -1}, redlock.InvalidArgument),
    ({"fair": True, "drop_out_ms": 2**40}, redlock.InvalidArgument),
    ({"drop_out_ms": 1_000}, redlock.InvalidArgument),
    ({"fair": False, "drop_out_ms": 1_000}, redlock.InvalidArgument),
    ({"fair": True, "owner": "job-1"}, redlock.InvalidArgument),
    ({"fair": True, "shared": True}, redlock.InvalidArgument),
]


@pytest.mark.parametrize("kwargs,exc", BAD, ids=[repr(k) for k, _ in BAD])
def test_bad_input_is_refused_before_anything_is_sent(
    cluster, new_manager, resource, kwargs, exc
):
    m = new_manager(cluster.urls)
    with pytest.raises(exc):
        m.acquire(resource, 1_000, **kwargs)
    with pytest.raises(exc):
        m.lock(resource, 1_000, wait_ms=1_000, **kwargs)
    with pytest.raises(exc):
        m.alock(resource, 1_000, **kwargs)  # checked when called, before it is entered

    async def aacquire() -> None:
        await m.aacquire(resource, 1_000, **kwargs)

    with pytest.raises(exc):
        asyncio.run(aacquire())
    if "drop_out_ms" not in kwargs:
        with pytest.raises(exc):
            m.try_lock(resource, 1_000, **kwargs)
    # Which options combine is the library's rule: refused by it (alock when called), with
    # its message, and nothing sent. Out-of-range values are refused before any C call.
    nothing_sent(m)


def test_fair_is_for_one_resource_and_not_for_a_semaphore_or_a_try(cluster, new_manager):
    m = new_manager(cluster.urls)
    # Not keywords of these methods at all: a set and a permit are never fair, and a single
    # attempt never queues (so it has no drop-out time).
    with pytest.raises(TypeError):
        m.acquire_many(["a", "b"], 1_000, fair=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        m.semaphore("pool", 2).acquire(1_000, fair=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        m.semaphore("pool", 2).lock(1_000, drop_out_ms=1_000)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        m.try_lock("a", 1_000, fair=True, drop_out_ms=1_000)  # type: ignore[call-arg]
    nothing_reached_the_library(m)
