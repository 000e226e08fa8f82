"""Leader election (``Redlock.election`` -> ``Election``: ``campaign``, ``lead``, ``leader``,
``wait_change``, ``observe`` and the asyncio forms; ``Leadership``: ``term``, ``value``,
``proclaim``, ``resign``, ``lost``, ``wait_lost``) against real redis-server nodes.

Campaign, read, proclaim and resign with terms that increase from one leader to the next; a
waiting candidate woken by the leader's resignation; an observer that sees every leader of
several changes in increasing term order, without duplicates; a waiting campaign ended by a
``Cancel``, by a cancelled asyncio task and by a Ctrl-C, each leaving nothing held; bad input
refused with a typed error, by this binding and by the library.

The module's three nodes are shared; each test has an election of its own. Every wait is
bounded generously, and no test asserts how long something took beyond bounds far from what
a loaded two-core machine needs."""

from __future__ import annotations

import _thread
import asyncio
import ctypes
import threading
import time
from typing import List

import pytest

import redlock
from redlock import _acquire, _core, _ffi

from redis_nodes import key_of, wait_until
from test_acquire import _run, attempts, counters
from test_cancel import cancelled, subscribers

#: Generous: a waiting candidate or observer is woken within a round trip; this bounds a hang.
LIMIT_S = 30


def elect_key(name: str) -> bytes:
    """The election's key (its resignation channel): ``redlock-elect:`` and the lock key."""
    return b"redlock-elect:" + key_of(name)


def record_key(name: str) -> bytes:
    """The leader record (a hash, also the channel new terms are announced on)."""
    return b"redlock-leader:" + elect_key(name)


def holding(cluster, name: str, lead: redlock.Leadership) -> int:
    """On how many nodes the election's key holds ``lead``'s lease value."""
    return cluster.holding(elect_key(name), lead.lease.value)


def waiting(cluster, m: redlock.Redlock, name: str, since: int = 0) -> None:
    """Until ``m``'s campaign waits for a resignation: refused twice more than ``since``
    attempts (the second follows the subscription), and subscribed on a quorum of nodes."""
    wait_until(
        lambda: attempts(m) >= since + 2 and subscribers(cluster, elect_key(name)) >= 2,
        timeout=LIMIT_S,
        what="the candidate to wait",
    )


# ---- campaign, leader, proclaim, resign ----


def test_campaign_leader_proclaim_resign_with_increasing_terms(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    e = m.election(resource)
    assert (e.name, e.manager) == (resource.encode(), m)
    assert repr(e) == f"<redlock.Election name={resource.encode()!r}>"
    assert e.leader() is None  # nobody elected yet

    terms: List[int] = []
    for i in range(3):
        with e.campaign(f"node-{i}", 10_000, wait_ms=0) as lead:
            assert isinstance(lead, redlock.Leadership)
            assert lead.election == resource.encode() and lead.value == f"node-{i}".encode()
            assert lead.term > 0 and lead.term == lead.lease.fencing_token
            assert not lead.lost and lead.validity_ms > 0 and lead.lease.renewing
            assert f"term={lead.term} open" in repr(lead)
            got = e.leader()
            assert got == redlock.Leader(lead.term, f"node-{i}".encode(), got.validity_ms)
            assert 0 < got.validity_ms <= 10_000
            lead.proclaim(b"\x00moved\xff")
            assert lead.value == b"\x00moved\xff"
            assert e.leader()[:2] == (lead.term, b"\x00moved\xff")  # same term, new value
            # Another candidate is refused while it leads.
            with pytest.raises(redlock.NotAcquired):
                e.lead(b"rival", 10_000, wait_ms=0)
            terms.append(lead.term)
        # Resigned (and closed) by the block's end: no leader, and it knows.
        assert lead.lost and lead.wait_lost(0) and lead.lease.closed
        wait_until(lambda: e.leader() is None, what="no leader after the resignation")
    assert terms == sorted(set(terms)) and len(terms) == 3

    # lead(): a leadership without a block, resigned by hand.
    lead = e.lead("solo", 10_000)
    assert lead.term > terms[-1] and e.leader().term == lead.term
    assert not lead.wait_lost(1)  # renewed: not lost
    lead.resign()
    assert lead.lost and lead.wait_lost(10_000)
    with pytest.raises(redlock.NotHeld):
        lead.resign()
    with pytest.raises(redlock.NotHeld):
        lead.proclaim("late")
    assert lead.value == b"solo"
    lead.close()
    lead.close()  # idempotent
    assert e.leader() is None
    assert cluster.present(elect_key(resource)) == 0


def test_a_waiting_candidate_takes_over_after_the_leader_resigns(cluster, new_manager, resource):
    first = new_manager(cluster.urls).election(resource)
    m2 = new_manager(cluster.urls, retry_delay_ms=5_000)  # woken by the resignation, not polling
    second = m2.election(resource)
    lead1 = first.lead(b"first", 30_000)
    t, box = _run(lambda: second.lead(b"second", 30_000))  # waits until it leads
    waiting(cluster, m2, resource)
    assert t.is_alive() and first.leader().term == lead1.term
    lead1.resign()
    t.join(LIMIT_S)
    assert not t.is_alive(), "the waiting candidate was not woken"
    lead2 = box["result"]
    assert isinstance(lead2, redlock.Leadership) and lead2.term > lead1.term
    assert first.leader()[:2] == (lead2.term, b"second")
    assert lead1.lost and not lead2.lost
    lead2.resign()
    lead2.close()
    lead1.close()


def test_a_lost_leadership_is_told(cluster, new_manager, resource):
    e = new_manager(cluster.urls).election(resource)
    told: List[redlock.Leadership] = []
    lost = threading.Event()

    def on_lost(ld: redlock.Leadership) -> None:
        told.append(ld)
        lost.set()

    # The default renewal: taken over on every node behind its back, it is told.
    lead = e.lead(b"a", 1_000, on_lost=on_lost)
    assert not lead.lost and lead.lease.renewing
    for s in cluster.servers:
        s.command("SET", elect_key(resource), b"intruder", "PX", 60_000)
    assert lead.wait_lost(LIMIT_S * 1000)
    assert lost.wait(LIMIT_S) and told == [lead]
    assert lead.lost and lead.lost_reason and lead.validity_ms == 0
    with pytest.raises(redlock.NotHeld):
        lead.proclaim(b"b")
    lead.close()
    for s in cluster.servers:
        s.command("DEL", elect_key(resource))

    # auto_renew's bound: lost when it is reached, and told with the leadership.
    told.clear()
    lost.clear()
    with e.campaign(b"c", 1_000, auto_renew=True, max_hold_ms=300, on_lost=on_lost) as lead:
        assert lost.wait(LIMIT_S) and told == [lead] and lead.lost
        assert "hold" in (lead.lost_reason or "")
        with pytest.raises(redlock.NotHeld):
            lead.resign()


# ---- observe ----


def test_observe_yields_each_leader_in_increasing_term_order(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    e = m.election(resource)
    seen: List[redlock.Leader] = []
    done = threading.Event()

    def watch() -> None:
        for leader in new_manager(cluster.urls).election(resource).observe():
            seen.append(leader)
            if leader.value == b"last":
                done.set()
                return

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    leaders = []
    for i, value in enumerate([b"a", b"b", b"c", b"last"]):
        with e.campaign(value, 10_000, wait_ms=LIMIT_S * 1000) as lead:
            leaders.append((lead.term, value))
            # Until the observer has seen this one: each change is then seen, none skipped.
            wait_until(
                lambda: len(seen) > i, timeout=LIMIT_S, what=f"the observer to see {value!r}"
            )
    assert done.wait(LIMIT_S)
    t.join(LIMIT_S)
    terms = [leader.term for leader in seen]
    assert terms == sorted(set(terms)), terms  # increasing, no duplicates
    assert [(leader.term, leader.value) for leader in seen] == leaders


def test_wait_change_times_out_with_none(cluster, new_manager, resource):
    e = new_manager(cluster.urls).election(resource)
    assert e.wait_change(0, 100) is None
    with e.campaign(b"x", 10_000) as lead:
        got = e.wait_change(0, LIMIT_S * 1000)
        assert got is not None and got.term == lead.term
        assert e.wait_change(lead.term, 100) is None  # no newer term
    with pytest.raises(TypeError):
        e.wait_change("1")
    with pytest.raises(redlock.InvalidArgument):
        e.wait_change(-1)


# ---- cancellation ----


def test_a_cancelled_campaign_returns_promptly_and_holds_nothing(cluster, new_manager, resource):
    holder = new_manager(cluster.urls).election(resource).lead(b"holder", 30_000)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    e = m.election(resource)
    with redlock.Cancel() as c:
        fire, _ = _run(lambda: (waiting(cluster, m, resource), c.fire()))
        began = time.monotonic()
        with pytest.raises(redlock.Cancelled):
            with e.campaign(b"waiter", 10_000, cancel=c):
                raise AssertionError("the holder leads")
        assert time.monotonic() - began < LIMIT_S
        fire.join(LIMIT_S)
        with pytest.raises(redlock.Cancelled):  # a fired handle: nothing sent
            e.lead(b"waiter", 10_000, cancel=c)
    assert cancelled(m) == 2

    # A Ctrl-C on the main thread ends a campaign that waits until it leads.
    since = attempts(m)
    interrupt, _ = _run(lambda: (waiting(cluster, m, resource, since), _thread.interrupt_main()))
    with pytest.raises(KeyboardInterrupt):
        e.lead(b"waiter", 10_000)
    interrupt.join(LIMIT_S)
    assert cancelled(m) == 3

    # Only the holder's key: the waiter left nothing behind.
    assert cluster.present(elect_key(resource)) == holding(cluster, resource, holder) >= 2
    assert e.leader()[:2] == (holder.term, b"holder")
    holder.resign()
    holder.close()
    cluster.released(elect_key(resource))


# ---- asyncio ----


def test_asyncio_forms(cluster, new_manager, resource):
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    e = m.election(resource)

    async def main() -> None:
        assert await e.aleader() is None
        camp = e.acampaign(b"a", 10_000)
        assert repr(camp) == f"<redlock.AsyncCampaign election={resource.encode()!r} new>"
        async with camp as lead:
            assert (await e.aleader())[:2] == (lead.term, b"a")
            await lead.aproclaim("b")
            assert (await e.aleader()).value == b"b"
            first = lead.term

            # A second candidate waits; cancelling its task leaves nothing held.
            loop = asyncio.get_running_loop()
            since = attempts(m)
            task = asyncio.ensure_future(e.alead(b"c", 10_000))
            await loop.run_in_executor(None, waiting, cluster, m, resource, since)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, LIMIT_S)
            assert counters(m)['redlock_acquire_total{result="cancelled"}'] == 1

        # aobserve: the next leader, after the resignation at the block's end.
        observed: List[int] = []

        async def observe() -> None:
            async for leader in e.aobserve():
                observed.append(leader.term)
                if leader.value == b"d":
                    return

        obs = asyncio.ensure_future(observe())
        lead2 = await e.alead(b"d", 10_000)
        assert lead2.term > first
        await asyncio.wait_for(obs, LIMIT_S)
        assert observed[-1] == lead2.term and observed == sorted(set(observed))
        await lead2.aresign()
        lead2.close()

    asyncio.run(asyncio.wait_for(main(), LIMIT_S * 3))


# ---- bad input ----


def test_bad_input_is_refused_with_a_typed_error(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    e = m.election(resource)
    too_long = b"x" * (redlock.MAX_LEADER_VALUE + 1)
    with pytest.raises(redlock.InvalidArgument, match="at most 65536 bytes, got 65537"):
        e.campaign(too_long, 10_000)
    with pytest.raises(redlock.InvalidArgument, match="at most 65536 bytes"):
        e.lead(too_long, 10_000)
    for kw in ({"owner": "me"}, {"shared": True}, {"fair": True}, {"fenced": True}):
        with pytest.raises(TypeError):
            e.campaign(b"v", 10_000, **kw)
    with pytest.raises(TypeError):
        e.campaign(42, 10_000)
    with pytest.raises(TypeError):
        e.campaign(b"v", 10_000, on_lost="not callable")
    with pytest.raises(redlock.InvalidArgument):
        e.campaign(b"v", 0)
    with pytest.raises(redlock.InvalidArgument):
        m.election("")
    with pytest.raises(TypeError):
        m.election(7)
    assert counters(m)["redlock_acquire_attempts_total"] == 0  # nothing was sent

    # The library's own check, for a caller of the C ABI passing an owner or shared options.
    c = _core._c
    name, value = resource.encode(), b"v"
    for key in ((None, False, None, True, b"me", False, None),
                (None, False, None, True, None, True, None)):  # fmt: skip
        opts = _acquire._new_opts(key)
        out, err = _ffi.LeasePtr(), _ffi.err_buffer()
        p = m._handle.acquire()
        try:
            st = c.redlock_campaign(
                p, name, len(name), value, 1, 10_000, opts, ctypes.byref(out), err, _ffi.ERR_LEN
            )
        finally:
            m._handle.release()
            c.redlock_acquire_opts_free(opts)
        assert st == redlock.Status.INVALID_ARGUMENT and not out
        assert "neither reentrant, shared nor fair" in _ffi.err_text(err)
    # Proclaiming too long a value: refused, the leadership kept.
    with e.campaign(b"v", 10_000) as lead:
        with pytest.raises(redlock.InvalidArgument, match="at most 65536 bytes"):
            lead.proclaim(too_long)
        lead.proclaim(b"y" * redlock.MAX_LEADER_VALUE)  # the limit itself is fine
        assert e.leader().value == b"y" * redlock.MAX_LEADER_VALUE
    # A closed manager.
    m.close()
    with pytest.raises(redlock.HandleClosed):
        e.campaign(b"v", 10_000)
    with pytest.raises(redlock.HandleClosed):
        e.leader()
