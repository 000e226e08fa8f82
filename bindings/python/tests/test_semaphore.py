"""Counting semaphores (``Redlock.semaphore`` -> ``Semaphore``: ``acquire``, ``lock``,
``try_acquire``, ``alock``, ``aacquire``; ``Lease.permit``) against real redis-server nodes.

Three permits on three distinct slots and a fourth refused, a released slot given to the
next holder; 8 threads taking a permit of 2 twenty-five times each, counted in-process
(never more than 2 holders, never two on one slot); a waiter woken by a release well before
the holder's 30 s TTL, on a thread and on the main thread; another permit count refused
naming the recorded one; fencing tokens, extend, renewal and the permit facts; asyncio, a
cancelled asyncio wait and a Ctrl-C during a wait, neither leaving a hold behind; bad input
refused before anything is sent.

Each test has three nodes of its own (what it reads on them, the semaphore's hash and its
holds, is its own). Every wait is bounded; the nodes' state is waited for (the library
returns once a quorum answered, so the last node's write may land just after), never assumed
from a sleep alone, and times are only checked as bounds far from what a loaded machine
needs."""

from __future__ import annotations

import _thread
import asyncio
import ctypes
import pickle
import threading
import time
from typing import Dict, List, Optional, Tuple

import pytest

import redlock
from redlock import _ffi

from redis_nodes import key_of, wait_until
from test_acquire import _run, attempts, counters, nothing_reached_the_library
from test_cancel import cancelled, subscribers


@pytest.fixture
def cluster(make_cluster):
    """Three nodes of this test's own (this module's tests read the nodes' semaphore hashes)."""
    return make_cluster(3)


def sem_key(name: str) -> bytes:
    """The key (and release channel) of semaphore ``name``: ``redlock-sem:`` and the lock key
    of its name."""
    return b"redlock-sem:" + key_of(name)


def holds(cluster, name: str) -> List[int]:
    """How many holds (live or not yet pruned) each node's hash of ``name`` has."""
    out = []
    for s in cluster.servers:
        fields = s.command("HKEYS", sem_key(name)) or []
        out.append(sum(1 for f in fields if f.startswith(b"hold:")))
    return out


def slot_on(server, name: str, slot: int) -> Optional[bytes]:
    """Whose hold has ``slot`` on one node: the hold's id (the lease's token)."""
    return server.command("HGET", sem_key(name), f"slot:{slot}")


def on_every_node(cluster, name: str, lease: redlock.Lease) -> bool:
    """Whether every node gives the lease's slot to the lease's hold."""
    slot = lease.permit[0]
    return all(slot_on(s, name, slot) == lease.token.encode() for s in cluster.servers)


def c_permit(lease: redlock.Lease) -> Optional[Tuple[int, int]]:
    """What ``redlock_lease_permit`` says of the lease now (``None``: not a permit)."""
    slot, permits = ctypes.c_uint32(), ctypes.c_uint32()
    h = lease._handle
    p = h.acquire()
    try:
        if not _ffi.lib().redlock_lease_permit(p, ctypes.byref(slot), ctypes.byref(permits)):
            return None
        return slot.value, permits.value
    finally:
        h.release()


def wait_until_waiting(cluster, m: redlock.Redlock, name: str, since: int = 0) -> None:
    """Until ``m`` waits for a permit of ``name``: refused twice more than ``since``
    attempts (the second attempt follows the subscription to the semaphore's channel), and
    subscribed on a quorum of the nodes."""
    wait_until(
        lambda: attempts(m) >= since + 2 and subscribers(cluster, sem_key(name)) >= 2,
        timeout=30,
        what="the waiter to wait",
    )


def released(cluster, name: str) -> None:
    """No hold of ``name`` left: its key gone from every node (at once on a quorum)."""
    cluster.released(sem_key(name))


# ---- permits and slots ----


def test_three_permits_on_distinct_slots_and_a_fourth_refused(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    sem = m.semaphore(resource, 3)
    assert (sem.name, sem.permits, sem.manager) == (resource.encode(), 3, m)
    assert repr(sem) == f"<redlock.Semaphore name={resource.encode()!r} permits=3>"
    leases = [sem.try_acquire(10_000) for _ in range(3)]
    assert sorted(lk.permit[0] for lk in leases) == [0, 1, 2]
    for lk in leases:
        assert lk.permit == c_permit(lk) and lk.permit[1] == 3
        assert lk.resource == resource.encode() and lk.resources == [resource.encode()]
        assert not lk.is_shared and lk.fencing_token is None and lk.value == lk.token
        assert f"permit={lk.permit[0]}/3" in repr(lk)
        assert lk.ttl_ms == 10_000 and 8_000 < lk.validity_ms <= 10_000
    wait_until(lambda: holds(cluster, resource) == [3, 3, 3], what="3 holds on every node")
    for lk in leases:
        assert on_every_node(cluster, resource, lk)
    assert len({lk.token for lk in leases}) == 3

    with pytest.raises(redlock.NotAcquired) as ei:
        sem.try_acquire(10_000)
    assert ei.value.status == redlock.Status.NOT_ACQUIRED
    with pytest.raises(redlock.NotAcquired):
        m.semaphore(resource.encode(), 3).acquire(10_000, wait_ms=0)  # another handle
    assert holds(cluster, resource) == [3, 3, 3]  # the refused attempts left no hold

    # Slot 1 freed: the next permit takes it (the only free one).
    freed = next(lk for lk in leases if lk.permit[0] == 1)
    freed.unlock()
    freed.close()
    assert freed.permit == (1, 3)  # a fact recorded at acquisition
    with sem.try_acquire(10_000) as nxt:
        assert nxt.permit == (1, 3) and nxt.token != freed.token
        wait_until(lambda: on_every_node(cluster, resource, nxt), what="slot 1 on every node")
        with pytest.raises(redlock.NotAcquired):
            sem.try_acquire(10_000)
    for lk in leases:
        if lk is not freed:
            lk.unlock()
            lk.close()
    released(cluster, resource)
    # A lock's lease is no permit; the options objects are the locks' own.
    with m.try_lock(resource, 5_000) as lock:
        assert lock.permit is None and c_permit(lock) is None
    assert set(m._opts) == {(0, False, None, True, None, False, None)}
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 5


def test_eight_threads_never_more_than_two_holders(cluster, new_manager, resource):
    threads_n, cycles, permits = 8, 25, 2
    managers = [new_manager(cluster.urls) for _ in range(4)]  # two threads on each
    guard = threading.Lock()
    state: Dict[str, int] = {"holding": 0, "most": 0}
    in_slot: Dict[int, int] = {}
    served = [0] * threads_n
    violations: List[str] = []
    errors: List[BaseException] = []

    def worker(i: int) -> None:
        sem = managers[i % len(managers)].semaphore(resource, permits)
        try:
            for _ in range(cycles):
                with sem.lock(10_000, wait_ms=60_000) as permit:
                    slot = permit.permit[0]
                    with guard:
                        state["holding"] += 1
                        state["most"] = max(state["most"], state["holding"])
                        if state["holding"] > permits:
                            violations.append(f"{state['holding']} holders at once")
                        if slot in in_slot:
                            violations.append(f"thread {i} got slot {slot} of {in_slot[slot]}")
                        in_slot[slot] = i
                    time.sleep(0.001)  # lets the other threads run
                    with guard:
                        del in_slot[slot]
                        state["holding"] -= 1
                    served[i] += 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(threads_n)]
    began = time.monotonic()
    for t in threads:
        t.start()
    deadline = began + 240
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "the workers did not finish in time"
    print(f"\n{threads_n * cycles} permits in {time.monotonic() - began:.1f} s, at most "
          f"{state['most']} held at once")  # fmt: skip
    assert not errors, errors[0]
    assert violations == []
    assert 1 <= state["most"] <= permits
    assert served == [cycles] * threads_n  # every thread served, every time
    released(cluster, resource)


# ---- waiting ----


@pytest.mark.parametrize("how", ["acquire-on-a-thread", "lock-on-the-main-thread"])
def test_a_waiter_is_woken_by_a_release(cluster, new_manager, resource, how):
    holder = new_manager(cluster.urls).semaphore(resource, 2)
    held = [holder.acquire(30_000) for _ in range(2)]
    # A 10 s retry delay: a waiter that polled would not get in within 5 s of the release.
    w = new_manager(cluster.urls, retry_delay_ms=10_000)
    sem = w.semaphore(resource, 2)
    freed = held[1]
    released_at: List[float] = []

    def release() -> None:
        wait_until_waiting(cluster, w, resource)
        released_at.append(time.monotonic())
        freed.unlock()

    began = time.monotonic()
    if how == "acquire-on-a-thread":
        t, box = _run(lambda: sem.acquire(10_000, wait_ms=60_000))
        release()
        t.join(30)
        assert not t.is_alive() and "result" in box, box
        permit = box["result"]
    else:
        t, box = _run(release)
        permit = sem.lock(10_000, wait_ms=60_000)  # a helper thread's wait, interruptible
        t.join(30)
        assert "error" not in box, box
    got_at = time.monotonic()
    latency = got_at - released_at[0]
    print(f"\nthe waiter got the permit {latency * 1000:.1f} ms after the release "
          f"({got_at - began:.2f} s after it began to wait; the holder's TTL is 30 s)")  # fmt: skip
    assert latency < 5
    assert permit.permit == freed.permit  # the freed slot
    assert held[0].valid  # the other holder was never disturbed
    for lk in (permit, held[0]):
        lk.unlock()
        lk.close()
    freed.close()
    released(cluster, resource)


# ---- the permit count ----


def test_another_permit_count_is_refused_naming_the_recorded_one(
    cluster, new_manager, resource
):
    m = new_manager(cluster.urls)
    lk = m.semaphore(resource, 3).acquire(10_000)
    wait_until(lambda: holds(cluster, resource) == [1, 1, 1], what="the hold on every node")
    other = new_manager(cluster.urls)  # the count is the nodes' record, not the process's
    four = other.semaphore(resource, 4)
    for call in (
        lambda: four.try_acquire(10_000),
        lambda: four.acquire(10_000, wait_ms=2_000),
        lambda: four.lock(10_000),
        lambda: asyncio.run(four.aacquire(10_000, wait_ms=0)),
    ):
        with pytest.raises(redlock.InvalidArgument) as ei:
            call()
        assert isinstance(ei.value, ValueError)
        assert ei.value.status == redlock.Status.INVALID_ARGUMENT
        assert "has 3 permits" in ei.value.message and "named 4" in ei.value.message, (
            ei.value.message
        )
    assert holds(cluster, resource) == [1, 1, 1]  # nothing taken
    with m.semaphore(resource, 3).try_acquire(10_000) as second:  # the recorded count works
        assert second.permit[1] == 3
    lk.unlock()
    lk.close()
    released(cluster, resource)
    # Once no permit is held, a new count applies, and the old one is refused in turn.
    fours = [four.try_acquire(10_000) for _ in range(4)]
    assert sorted(p.permit for p in fours) == [(0, 4), (1, 4), (2, 4), (3, 4)]
    wait_until(lambda: holds(cluster, resource) == [4, 4, 4], what="4 holds on every node")
    with pytest.raises(redlock.InvalidArgument, match="has 4 permits"):
        m.semaphore(resource, 3).try_acquire(10_000)
    for p in fours:
        p.unlock()
        p.close()
    released(cluster, resource)


# ---- fencing, extend, renewal ----


def test_fenced_permits_extend_and_the_lock_of_the_same_name(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    sem = m.semaphore(resource, 2)
    a = sem.acquire(5_000, fenced=True, wait_ms=0)
    b = sem.try_acquire(5_000, fenced=True)
    assert isinstance(a.fencing_token, int) and isinstance(b.fencing_token, int)
    assert a.fencing_token >= 1 and b.fencing_token >= 1
    assert {a.permit[0], b.permit[0]} == {0, 1}

    # extend: the permit's TTL and its hold on every node.
    a.extend(40_000)
    assert a.ttl_ms == 40_000 and 30_000 < a.validity_ms <= 40_000
    assert a.fencing_token is not None and a.permit == c_permit(a)
    wait_until(
        lambda: all(30_000 < s.pttl(sem_key(resource)) <= 40_000 for s in cluster.servers),
        what="the hash kept alive for the extended hold on every node",
    )
    # A lock of the same name is independent of the semaphore (full now) ...
    with pytest.raises(redlock.NotAcquired):
        sem.try_acquire(5_000)
    with m.try_lock(resource, 5_000, fenced=True) as lock:
        # ... and shares its fencing counter: later than both permits.
        assert lock.fencing_token > max(a.fencing_token, b.fencing_token)
    cluster.released(key_of(resource))

    # The next holder of a's slot gets a larger token than a's.
    a.unlock()
    with pytest.raises(redlock.NotHeld):
        a.extend(10_000)
    with sem.try_acquire(5_000, fenced=True) as c:
        assert c.permit == a.permit and c.fencing_token > a.fencing_token
        assert c.fencing_token > lock.fencing_token
    b.unlock()
    for lk in (a, b):
        lk.close()
        assert lk.permit is not None and lk.fencing_token is not None  # kept after close
    released(cluster, resource)


def test_a_permit_renews(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    sem = m.semaphore(resource, 1)
    # Renewed every ~0.7 s: a renewal round has over a second, twice the node timeout, to
    # be confirmed before the validity ends, even on a loaded machine.
    with sem.acquire(2_000, auto_renew=True, max_hold_ms=60_000) as lk:
        assert lk.renewing and lk.permit == (0, 1)
        time.sleep(4.2)  # over twice the TTL
        assert lk.valid and not lk.lost
        assert sum(slot_on(s, resource, 0) == lk.token.encode() for s in cluster.servers) >= 2
        with pytest.raises(redlock.NotAcquired):
            sem.try_acquire(2_000)
    released(cluster, resource)


# ---- asyncio, cancellation, Ctrl-C ----


def test_asyncio_forms(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    sem = m.semaphore(resource, 1)
    holder = new_manager(cluster.urls).semaphore(resource, 1).acquire(30_000)
    wait_until(lambda: holds(cluster, resource) == [1, 1, 1], what="the holder's hold")

    async def main() -> None:
        lock = sem.alock(10_000, wait_ms=30_000)
        assert repr(lock) == (
            f"<redlock.AsyncLock semaphore={resource.encode()!r} permits=1 new>"
        )

        async def take() -> None:
            async with lock:
                raise AssertionError("the holder keeps it")

        # Cancelled at 0.5 s while it waits: no hold of its own is left.
        began = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(take(), timeout=0.5)
        assert time.monotonic() - began < 5
        loop = asyncio.get_running_loop()
        # A refused attempt leaves no hold: the holder's only.
        assert await loop.run_in_executor(None, holds, cluster, resource) == [1, 1, 1]

        # A waiting alock woken by the holder's release.
        async def waiter() -> Tuple[int, int]:
            async with sem.alock(10_000, wait_ms=30_000) as lk:
                return lk.permit

        since = attempts(m)
        task = asyncio.ensure_future(waiter())
        await loop.run_in_executor(None, wait_until_waiting, cluster, m, resource, since)
        await holder.aunlock()
        assert await asyncio.wait_for(task, timeout=10) == (0, 1)

        lk2 = await sem.aacquire(10_000, wait_ms=0, fenced=True)
        assert lk2.permit == (0, 1) and lk2.fencing_token is not None
        await lk2.aextend(20_000)
        assert lk2.ttl_ms == 20_000
        await lk2.aunlock()
        lk2.close()

    asyncio.run(main())
    holder.close()
    released(cluster, resource)


def test_ctrl_c_and_cancel_during_a_wait_leave_no_hold(cluster, new_manager, resource):
    holder = new_manager(cluster.urls).semaphore(resource, 1).acquire(30_000)
    wait_until(lambda: holds(cluster, resource) == [1, 1, 1], what="the holder's hold")
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    sem = m.semaphore(resource, 1)

    def interrupt() -> None:
        wait_until_waiting(cluster, m, resource)
        _thread.interrupt_main()

    t = threading.Thread(target=interrupt, daemon=True)
    t.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        sem.acquire(10_000, wait_ms=30_000)  # on the main thread: a helper's
    assert time.monotonic() - began < 25
    t.join(10)
    assert cancelled(m) == 1

    # A handle fired from another thread ends a wait too.
    with redlock.Cancel() as c:
        since = attempts(m)
        fire, _ = _run(lambda: (wait_until_waiting(cluster, m, resource, since), c.fire()))
        with pytest.raises(redlock.Cancelled):
            sem.lock(10_000, wait_ms=30_000, cancel=c)
        fire.join(30)
        # A fired handle: refused without contacting any node.
        with pytest.raises(redlock.Cancelled):
            sem.try_acquire(10_000, cancel=c)
    assert cancelled(m) == 3
    assert holds(cluster, resource) == [1, 1, 1]  # the holder's only
    assert all(slot_on(s, resource, 0) == holder.token.encode() for s in cluster.servers)
    holder.unlock()
    holder.close()
    released(cluster, resource)


# ---- bad input ----


def test_bad_input_is_refused_before_anything_is_sent(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    for permits, exc in (
        (0, redlock.InvalidArgument),
        (redlock.MAX_PERMITS + 1, redlock.InvalidArgument),
        (-1, redlock.InvalidArgument),
        (2**32 + 3, redlock.InvalidArgument),
        (1.5, TypeError),
        (True, TypeError),
        ("3", TypeError),
        (None, TypeError),
    ):
        with pytest.raises(exc, match="permits") as ei:
            m.semaphore(resource, permits)
        if exc is redlock.InvalidArgument:
            assert ei.value.status == redlock.Status.INVALID_ARGUMENT
            assert f"1 to 1000 permits, not {permits}" in ei.value.message
    for name, exc, why in (
        ("", redlock.InvalidArgument, "must not be empty"),
        (b"", redlock.InvalidArgument, "must not be empty"),
        (b"x" * (redlock.MAX_RESOURCE_LEN + 1), redlock.InvalidArgument, "limit is 1024"),
        ("é" * 513, redlock.InvalidArgument, "limit is 1024"),
        ("\ud800", redlock.InvalidArgument, "UTF-8"),
        (7, TypeError, "must be str or bytes"),
        (None, TypeError, "must be str or bytes"),
        ([resource], TypeError, "must be str or bytes"),
    ):
        with pytest.raises(exc, match=why):
            m.semaphore(name, 3)

    sem = m.semaphore(resource, 3)
    # owner and shared are not options of a permit; the others are checked as acquire's.
    for kw, exc in (
        ({"owner": "job-1"}, TypeError),
        ({"shared": True}, TypeError),
        ({"shared": False}, TypeError),
        ({"ttl_ms": 0}, redlock.InvalidArgument),
        ({"ttl_ms": 2**32}, redlock.InvalidArgument),
        ({"ttl_ms": 1.5}, TypeError),
        ({"wait_ms": -1}, redlock.InvalidArgument),
        ({"wait_ms": 0.5}, TypeError),
        ({"fenced": 1}, TypeError),
        ({"notify": None}, TypeError),
        ({"auto_renew": 1}, TypeError),
        ({"max_hold_ms": 1_000}, redlock.InvalidArgument),  # without auto_renew
        ({"cancel": "now"}, TypeError),
    ):
        args = {"ttl_ms": 5_000, **kw}
        with pytest.raises(exc):
            sem.acquire(**args)
        with pytest.raises(exc):
            sem.alock(**args)
        with pytest.raises(exc):
            asyncio.run(sem.aacquire(**args))
        if set(kw) <= {"owner", "shared", "ttl_ms", "wait_ms", "fenced", "notify", "cancel"}:
            with pytest.raises(exc):
                sem.lock(**args)
        if set(kw) <= {"owner", "shared", "ttl_ms", "fenced", "cancel"}:
            with pytest.raises(exc):
                sem.try_acquire(**args)
    with pytest.raises(TypeError):
        sem.try_acquire(5_000, wait_ms=1_000)  # try_acquire makes one attempt
    nothing_reached_the_library(m)
    assert m._opts == {}
    assert cluster.present(sem_key(resource)) == 0

    # The limits themselves are fine.
    with m.semaphore(resource, redlock.MAX_PERMITS).try_acquire(5_000) as lk:
        assert lk.permit[1] == redlock.MAX_PERMITS and 0 <= lk.permit[0] < 1000
    with m.semaphore(b"s" * redlock.MAX_RESOURCE_LEN, 1).try_acquire(5_000) as lk:
        assert lk.permit == (0, 1)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(sem)

    # What only the library knows: with the empty key prefix, a name whose key would be in
    # the library's own namespace is refused by the first acquisition; nothing is sent.
    bare = new_manager(cluster.urls, key_prefix="")
    own = bare.semaphore("redlock-fence:x", 1)  # no I/O here
    with pytest.raises(redlock.InvalidArgument, match="own namespace"):
        own.try_acquire(5_000)
    assert sum(
        v for k, v in counters(bare).items() if k.startswith("redlock_node_requests_total{")
    ) == 0

    m.close()
    with pytest.raises(redlock.HandleClosed):
        sem.try_acquire(5_000)
    with pytest.raises(redlock.HandleClosed):
        m.semaphore(resource, 3)
