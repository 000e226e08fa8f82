"""Shared (read) locks (``shared=True``) and all-or-nothing locks of several resources
(``Redlock.acquire_many``, ``alock_many``, ``aacquire_many``) against real redis-server nodes.

Shared: 8 holders at once, an exclusive waiter that gets in only after the last of them
released (and keeps new shared holders out meanwhile: writer preference), shared with an
owner refused before anything is sent, the holders' kind. Several resources: two threads
taking {a,b,c} and {c,b,a} 200 times each while a third takes b alone, checked with
non-atomic counters and section flags; an attempt refused on 2 of 3 nodes takes its other
keys back everywhere; extend and unlock act on every key (PTTL read on every node);
1000 resources at once; bad input refused before any C call.

Every wait is bounded; the nodes' state is waited for (the library returns once a quorum
answered, so the last node's write may land just after), never assumed from a sleep alone."""

from __future__ import annotations

import _thread
import asyncio
import ctypes
import threading
import time
from typing import Dict, List, Set

import pytest

import redlock
from redlock import HolderKind, _ffi

from redis_nodes import key_of, wait_until
from test_acquire import (
    _run,
    attempts,
    counters,
    long_holder,
    nothing_reached_the_library,
    nothing_sent,
)

INTENT_PREFIX = b"redlock-intent:"


def holds(cluster, resource: str) -> List[int]:
    """How many shared holds each node's key of ``resource`` has (0: no such hash)."""
    out = []
    for s in cluster.servers:
        fields = s.command("HKEYS", key_of(resource)) or []
        out.append(sum(1 for f in fields if f.startswith(b"hold:")))
    return out


def intents(cluster, resource: str) -> int:
    """On how many nodes an exclusive waiter's intent for ``resource`` stands."""
    return cluster.present(INTENT_PREFIX + key_of(resource))


def node_requests(m: redlock.Redlock) -> int:
    return int(
        sum(v for k, v in counters(m).items() if k.startswith("redlock_node_requests_total{"))
    )


def c_resources(lease: redlock.Lease) -> List[bytes]:
    """The lease's resources as the library lists them (``redlock_lease_resource_at``)."""
    c = _ffi.lib()
    h = lease._handle
    p = h.acquire()
    try:
        out = []
        for i in range(c.redlock_lease_resource_count(p)):
            n = ctypes.c_size_t()
            ptr = c.redlock_lease_resource_at(p, i, ctypes.byref(n))
            out.append(ctypes.string_at(ptr, n.value))
        assert not c.redlock_lease_resource_at(p, len(out), None)  # out of range: NULL
        return out
    finally:
        h.release()


def c_is_shared(lease: redlock.Lease) -> bool:
    h = lease._handle
    p = h.acquire()
    try:
        return bool(_ffi.lib().redlock_lease_is_shared(p))
    finally:
        h.release()


# ---- shared locks ----


def test_eight_shared_holders_then_a_writer_that_waits_for_the_last(
    cluster, new_manager, resource
):
    readers = new_manager(cluster.urls)
    # The cluster is brand-new: one lock first, so that every node is trusted before the
    # eight race. (A grant from a node not yet trusted is taken back, so a hold taken during
    # first contact may be on a quorum of nodes only, not on every node, as checked below.)
    readers.try_lock(f"{resource}:warm-up", 1_000).unlock()
    # Eight holders at once, from eight threads.
    start = threading.Barrier(8)
    leases: List[redlock.Lease] = []
    errors: List[BaseException] = []

    def read() -> None:
        try:
            start.wait(10)
            leases.append(readers.lock(resource, 30_000, shared=True, wait_ms=5_000))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and len(leases) == 8, errors
    assert all(lk.is_shared and c_is_shared(lk) for lk in leases)
    assert len({lk.token for lk in leases}) == 8
    assert all(lk.value == lk.token for lk in leases)  # the hash holds the token
    wait_until(lambda: holds(cluster, resource) == [8, 8, 8], what="8 holds on every node")
    h = readers.holders(resource)
    assert h.is_locked and h.holder.kind == HolderKind.SHARED, h
    assert (h.holder.id, h.holder.label) == (b"", None)

    # An exclusive locker (another manager) waits for them.
    w = new_manager(cluster.urls)
    granted_at: List[float] = []

    def write() -> redlock.Lease:
        lk = w.acquire(resource, 10_000, wait_ms=30_000)
        granted_at.append(time.monotonic())
        return lk

    t, box = _run(write)
    wait_until(lambda: attempts(w) >= 1 and intents(cluster, resource) >= 2,
               timeout=10, what="the writer's intent on a quorum")  # fmt: skip
    # Writer preference: a new shared holder is kept out while the writer waits.
    late = new_manager(cluster.urls)
    with pytest.raises(redlock.NotAcquired):
        late.try_lock(resource, 30_000, shared=True)
    # (A node without the intent may have granted it: taken back.)
    wait_until(lambda: holds(cluster, resource) == [8, 8, 8], what="still 8 holds")

    for lk in leases[:-1]:
        lk.unlock()
        time.sleep(0.05)
        assert not box and t.is_alive(), box  # still held by the others
    last_release = time.monotonic()
    leases[-1].unlock()
    t.join(15)
    assert not t.is_alive() and "result" in box, box
    writer = box["result"]
    assert granted_at[0] >= last_release
    print(f"\nthe writer got the lock {(granted_at[0] - last_release) * 1000:.1f} ms after the "
          "last shared holder began its unlock")  # fmt: skip
    assert not writer.is_shared and writer.resources == [resource.encode()]
    # Exclusive now: a plain lock's value on a quorum, no hold left, the intent gone.
    assert cluster.holding(key_of(resource), writer.value) >= 2
    wait_until(lambda: intents(cluster, resource) == 0, what="the intent removed")
    with pytest.raises(redlock.NotAcquired):
        late.try_lock(resource, 30_000, shared=True)
    writer.unlock()
    cluster.released(key_of(resource))
    with late.try_lock(resource, 30_000, shared=True) as lk:  # shared again
        assert lk.is_shared
    for lk in leases + [writer]:
        lk.close()


def test_a_shared_lock_excludes_and_is_excluded_by_exclusive_ones(cluster, mgr, resource):
    other = f"{resource}:other"
    with mgr.try_lock(resource, 10_000, shared=True, fenced=True) as r1:
        r2 = mgr.acquire(resource, 10_000, shared=True, wait_ms=0, fenced=True)
        # Overlapping shared holders share their tenure's fencing token.
        assert r1.fencing_token is not None and r2.fencing_token == r1.fencing_token
        for exclusive in (
            lambda: mgr.try_lock(resource, 10_000),
            lambda: mgr.try_lock(resource, 10_000, fenced=True),
            lambda: mgr.try_lock(resource, 10_000, owner="job-1"),
            lambda: mgr.acquire_many([other, resource], 10_000, wait_ms=0),
        ):
            with pytest.raises(redlock.NotAcquired):
                exclusive()
        r2.extend(20_000)  # extension works in shared mode
        assert 15_000 < r2.validity_ms <= 20_000 and r2.ttl_ms == 20_000
        r2.unlock()
        r2.close()
    cluster.released(key_of(resource))
    assert cluster.present(key_of(other)) == 0  # the refused set left nothing behind
    with mgr.try_lock(resource, 10_000, fenced=True) as w:  # the next tenure: a larger token
        assert w.fencing_token > r1.fencing_token
    cluster.released(key_of(resource))
    with mgr.try_lock(resource, 10_000, shared=True, fenced=True) as r3:
        assert r3.fencing_token > w.fencing_token
    cluster.released(key_of(resource))
    with mgr.try_lock(resource, 10_000, owner="job-1") as lk:  # reentrant: exclusive
        with pytest.raises(redlock.NotAcquired):
            mgr.try_lock(resource, 10_000, shared=True)
        assert not lk.is_shared
    with mgr.acquire_many([other, resource], 10_000, wait_ms=0):
        with pytest.raises(redlock.NotAcquired):
            mgr.try_lock(resource, 10_000, shared=True)


def test_shared_with_an_owner_is_refused_before_anything_is_sent(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    calls = [
        lambda: m.try_lock(resource, 5_000, shared=True, owner="job-1"),
        lambda: m.lock(resource, 5_000, shared=True, owner=b"job-1"),
        lambda: m.acquire(resource, 5_000, shared=True, owner="job-1", wait_ms=1_000),
        lambda: m.alock(resource, 5_000, shared=True, owner="job-1"),
        lambda: asyncio.run(m.aacquire(resource, 5_000, shared=True, owner="job-1")),
    ]
    for call in calls:
        with pytest.raises(redlock.InvalidArgument, match="shared lock has no owner") as ei:
            call()
        assert ei.value.status == redlock.Status.INVALID_ARGUMENT
    for bad in (1, "yes", None):
        with pytest.raises(TypeError, match="shared must be a bool"):
            m.try_lock(resource, 5_000, shared=bad)
        with pytest.raises(TypeError, match="shared must be a bool"):
            m.alock(resource, 5_000, shared=bad)
    # Refused by the library (alock when called), with its message: nothing sent.
    nothing_sent(m)
    assert cluster.present(key_of(resource)) == 0
    assert m._opts == {}  # options with an owner are never cached


def test_shared_options_are_cached_apart_from_exclusive_ones(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    m.try_lock(resource, 5_000).unlock()
    m.try_lock(resource, 5_000, shared=True).unlock()
    m.try_lock(resource, 5_000, shared=True).unlock()
    m.acquire_many([resource, f"{resource}:2"], 5_000, wait_ms=0).unlock()  # try_lock's
    assert set(m._opts) == {
        (0, False, None, True, None, False, None),
        (0, False, None, True, None, True, None),
    }


# ---- several resources at once ----


def test_overlapping_sets_in_any_order_and_a_plain_locker_never_overlap(
    cluster, new_manager, resource
):
    a, b, c = (f"{resource}:{x}" for x in "abc")
    rounds = 200
    # Non-atomic on purpose: read, yield, write. Two sections that overlapped would lose an
    # update (and trip a section flag).
    count: Dict[str, int] = {a: 0, b: 0, c: 0}
    inside: Set[str] = set()
    violations: List[str] = []
    errors: List[BaseException] = []

    def section(who: str, names: List[str]) -> None:
        for n in names:
            if n in inside:
                violations.append(f"{who} entered {n} while held")
            inside.add(n)
        before = {n: count[n] for n in names}
        time.sleep(0.0002)  # lets the other threads run
        for n in names:
            count[n] = before[n] + 1
            inside.discard(n)

    def many(who: str, names: List[str]) -> None:
        m = new_manager(cluster.urls, retry_delay_ms=10)
        try:
            for _ in range(rounds):
                with m.acquire_many(names, 10_000, wait_ms=60_000) as lk:
                    assert lk.resources == [n.encode() for n in names]
                    section(who, names)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def plain() -> None:
        m = new_manager(cluster.urls, retry_delay_ms=10)
        try:
            for _ in range(rounds):
                with m.lock(b, 10_000, wait_ms=60_000):
                    section("plain", [b])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [
        threading.Thread(target=many, args=("abc", [a, b, c])),
        threading.Thread(target=many, args=("cba", [c, b, a])),
        threading.Thread(target=plain),
    ]
    began = time.monotonic()
    for t in threads:
        t.start()
    deadline = began + 240
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "the lockers did not finish in time"
    print(f"\n{3 * rounds} acquisitions in {time.monotonic() - began:.1f} s")
    assert not errors, errors[0]
    assert violations == []
    assert count == {a: 2 * rounds, b: 3 * rounds, c: 2 * rounds}
    for n in (a, b, c):
        cluster.released(key_of(n))


def test_a_set_refused_on_two_of_three_nodes_leaves_no_key(make_cluster, new_manager):
    cl = make_cluster(3)
    m = new_manager(cl.urls)
    for s in cl.servers[:2]:
        assert s.command("SET", b"redlock:b", b"someone else") == "OK"
    for wait in (0, None):  # one attempt; the retry policy (4 attempts)
        with pytest.raises(redlock.NotAcquired) as ei:
            m.acquire_many(["a", "b", "c"], 10_000, wait_ms=wait)
        assert "1/3" in ei.value.message or "0/3" in ei.value.message, ei.value.message
        # Node 2 granted the set; the failed attempt took it back there too.
        cl.released(b"redlock:a")
        cl.released(b"redlock:c")
    assert [s.get(b"redlock:b") for s in cl.servers] == [b"someone else"] * 2 + [None]
    # The foreign key on one node only: a quorum grants the whole set.
    assert cl.servers[1].command("DEL", b"redlock:b") == 1
    with m.acquire_many(["a", "b", "c"], 10_000, wait_ms=0) as lk:
        assert lk.granted == 2
        assert lk.node_outcomes[0] in (redlock.NodeOutcome.REJECTED, redlock.NodeOutcome.PENDING)
        for key in (b"redlock:a", b"redlock:b", b"redlock:c"):
            wait_until(lambda: cl.holding(key, lk.value) == 2, what=f"{key!r} on nodes 1, 2")
        assert cl.servers[0].get(b"redlock:a") is None  # nothing of the set on node 0
    assert cl.servers[0].get(b"redlock:b") == b"someone else"  # never touched
    for key in (b"redlock:a", b"redlock:c"):
        wait_until(lambda: cl.present(key) == 0, what=f"{key!r} released")
    assert cl.servers[1].get(b"redlock:b") is None and cl.servers[2].get(b"redlock:b") is None


def test_extend_and_unlock_of_a_set_act_on_every_key(cluster, mgr, resource):
    names = [f"{resource}:{x}" for x in ("x", "y", "z")]
    keys = [key_of(n) for n in names]
    lk = mgr.acquire_many(names, 5_000)
    assert lk.resources == [n.encode() for n in names] == c_resources(lk)
    assert lk.resource == names[0].encode() and not lk.is_shared and not c_is_shared(lk)
    assert lk.fencing_token is None and lk.ttl_ms == 5_000
    for key in keys:
        wait_until(lambda: cluster.holding(key, lk.value) == 3, what=f"{key!r} everywhere")
    assert all(0 < s.pttl(k) <= 5_000 for s in cluster.servers for k in keys)

    lk.extend(40_000)
    assert lk.ttl_ms == 40_000 and 30_000 < lk.validity_ms <= 40_000
    wait_until(
        lambda: all(30_000 < s.pttl(k) <= 40_000 for s in cluster.servers for k in keys),
        what="every key of the set extended on every node",
    )
    lk.unlock()
    for key in keys:
        cluster.released(key)
    with pytest.raises(redlock.NotHeld):
        lk.extend(10_000)
    lk.close()
    assert lk.resources == [n.encode() for n in names]  # a fact recorded at acquisition
    assert "resources=[" in repr(lk)


def test_a_set_renews_as_one(cluster, mgr, resource):
    names = [f"{resource}:{i}" for i in range(3)]
    with mgr.acquire_many(names, 1_000, auto_renew=True, max_hold_ms=60_000) as lk:
        assert lk.renewing
        time.sleep(2.0)  # twice the TTL
        assert lk.valid and not lk.lost
        for n in names:
            assert cluster.holding(key_of(n), lk.value) >= 2
    for n in names:
        cluster.released(key_of(n))


def test_a_thousand_resources_at_once(cluster, mgr, resource):
    names = [f"{resource}:{i}".encode() for i in range(redlock.MAX_RESOURCES)]
    with mgr.acquire_many(iter(names), 10_000, wait_ms=0) as lk:  # any iterable
        assert lk.resources == names and len(c_resources(lk)) == 1_000
        assert "1000 in all" in repr(lk)
        pattern = key_of(resource) + b":*"
        held = [len(s.command("KEYS", pattern)) for s in cluster.servers]
        assert sum(n == 1_000 for n in held) >= 2, held
    wait_until(
        lambda: all(not s.command("KEYS", pattern) for s in cluster.servers),
        what="all 1000 keys released",
    )


def test_a_set_held_by_one_excludes_any_other_set_sharing_a_resource(cluster, mgr, resource):
    a, b, c = (f"{resource}:{x}" for x in "abc")
    with mgr.acquire_many([a, b], 10_000, wait_ms=0):
        with pytest.raises(redlock.NotAcquired):
            mgr.acquire_many([c, b], 10_000, wait_ms=0)
        with pytest.raises(redlock.NotAcquired):
            mgr.try_lock(a, 10_000)
        assert cluster.present(key_of(c)) == 0
        with mgr.try_lock(c, 10_000):  # disjoint: free
            pass
    with mgr.acquire_many([c, b], 10_000, wait_ms=0):
        pass


def test_a_waiting_set_is_granted_when_the_holder_releases(cluster, new_manager, resource):
    a, b = f"{resource}:a", f"{resource}:b"
    holder = new_manager(cluster.urls).acquire(b, 30_000)
    m = new_manager(cluster.urls, retry_delay_ms=20)
    t, box = _run(lambda: m.acquire_many([a, b], 10_000, wait_ms=20_000))
    wait_until(lambda: attempts(m) >= 2, what="the set refused twice")
    assert not box
    holder.unlock()
    t.join(15)
    lk = box["result"]
    assert isinstance(lk, redlock.Lease) and lk.resources == [a.encode(), b.encode()]
    lk.unlock()


def test_ctrl_c_during_a_wait_for_a_set_leaves_no_key(cluster, new_manager, resource):
    a, b, c = (f"{resource}:{x}" for x in "abc")
    holder = long_holder(cluster, new_manager, b)
    m = new_manager(cluster.urls, retry_delay_ms=200)

    def interrupt() -> None:
        wait_until(lambda: attempts(m) >= 2, timeout=10, what="the set refused twice")
        _thread.interrupt_main()

    t = threading.Thread(target=interrupt, daemon=True)
    t.start()
    began = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        m.acquire_many([a, b, c], 10_000, wait_ms=30_000)  # on the main thread: a helper's
    assert time.monotonic() - began < 15
    t.join(10)
    assert counters(m)['redlock_acquire_total{result="cancelled"}'] == 1
    assert cluster.present(key_of(a)) == 0 and cluster.present(key_of(c)) == 0
    assert cluster.holding(key_of(b), holder.value) >= 2
    holder.unlock()


def test_asyncio_forms(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    names = [f"{resource}:{x}" for x in "abc"]
    holder = long_holder(cluster, new_manager, names[1])

    async def main() -> None:
        async with m.alock(resource, 10_000, shared=True) as r1:
            async with m.alock(resource, 10_000, shared=True, wait_ms=1_000) as r2:
                assert r1.is_shared and r2.is_shared
                assert await asyncio.get_running_loop().run_in_executor(
                    None, holds, cluster, resource
                ) != [0, 0, 0]
        # A set that waits for the holder of its middle resource; cancelled at 0.5 s.
        lock = m.alock_many(names, 10_000, wait_ms=30_000)
        assert "resources=3" in repr(lock)

        async def take() -> None:
            async with lock:
                raise AssertionError("the holder keeps it")

        began = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(take(), timeout=0.5)
        assert time.monotonic() - began < 5
        await holder.aunlock()
        async with m.alock_many(names, 10_000, wait_ms=5_000) as lk:
            assert lk.resources == [n.encode() for n in names]
        lk2 = await m.aacquire_many(names, 10_000, wait_ms=0)
        assert lk2.resources == [n.encode() for n in names]
        await lk2.aextend(20_000)
        await lk2.aunlock()
        lk2.close()

    asyncio.run(main())
    for n in names:
        cluster.released(key_of(n))
    cluster.released(key_of(resource))


# ---- bad input ----


def test_bad_resource_lists_are_refused_before_any_c_call(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    a = f"{resource}:a"
    invalid = [
        ([], "no resources: name at least one"),
        ([a, a], r"resource 1 \(.*\) is resource 0 again"),
        ([a, "x", a.encode()], r"resource 2 \(.*\) is resource 0 again"),  # str == its bytes
        ([f"{resource}:{i}" for i in range(redlock.MAX_RESOURCES + 1)], "limit is 1000"),
        (["\ud800"], "UTF-8"),
    ]
    wrong_type = [
        (a, "not a single str"),
        (a.encode(), "not a single bytes"),
        (7, "not int"),
        (None, "not NoneType"),
        ([a, 7], r"resources\[1\] must be str or bytes, not int"),
        ([None], r"resources\[0\] must be str or bytes"),
        ([[a]], r"resources\[0\] must be str or bytes, not list"),
    ]
    for bad, why in invalid:
        for call in (
            lambda: m.acquire_many(bad, 5_000),
            lambda: m.alock_many(bad, 5_000),
            lambda: asyncio.run(m.aacquire_many(bad, 5_000)),
        ):
            with pytest.raises(redlock.InvalidArgument, match=why) as ei:
                call()
            assert isinstance(ei.value, ValueError)
    for bad, why in wrong_type:
        for call in (lambda: m.acquire_many(bad, 5_000), lambda: m.alock_many(bad, 5_000)):
            with pytest.raises(TypeError, match=why):
                call()
    # The other arguments, as for acquire; and no fenced, owner or shared for a set.
    for kw, exc in (
        ({"ttl_ms": 0}, redlock.InvalidArgument),
        ({"ttl_ms": 2**32}, redlock.InvalidArgument),
        ({"ttl_ms": 1.5}, TypeError),
        ({"wait_ms": -1}, redlock.InvalidArgument),
        ({"wait_ms": 0.5}, TypeError),
        ({"max_hold_ms": 1_000}, redlock.InvalidArgument),  # without auto_renew
        ({"auto_renew": 1}, TypeError),
        ({"cancel": "now"}, TypeError),
        ({"fenced": True}, TypeError),
        ({"owner": "job-1"}, TypeError),
        ({"shared": True}, TypeError),
        ({"notify": False}, TypeError),
    ):
        args = {"ttl_ms": 5_000, **kw}
        with pytest.raises(exc):
            m.acquire_many([a], **args)
        with pytest.raises(exc):
            m.alock_many([a], **args)
    # The empty and repeated sets are refused by the library, with its message: nothing sent.
    nothing_sent(m)
    assert m._opts == {}

    # What only the library checks (each name's length) is refused there, and nothing is
    # sent to a node.
    for bad in ([a, ""], [a, b"x" * (redlock.MAX_RESOURCE_LEN + 1)]):
        with pytest.raises(redlock.InvalidArgument):
            m.acquire_many(bad, 5_000, wait_ms=0)
    assert node_requests(m) == 0
    assert cluster.present(key_of(a)) == 0
    m.close()
    with pytest.raises(redlock.HandleClosed):
        m.acquire_many([a], 5_000)
