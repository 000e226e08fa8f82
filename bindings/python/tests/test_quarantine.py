"""Restart quarantine (on by default): a node whose uptime is below the manager's maximum TTL
(plus 1 s of rounding) does not count toward a quorum. The only tests that leave it on; each
starts its own nodes, so their age is known.

Timing bounds used below (``max_ttl`` = the manager's ``max_ttl_ms``): a node seen at ``s``
reporting ``uptime`` whole seconds leaves quarantine at ``s - uptime + max_ttl + 1 s``. Redis
counts uptime in whole wall-clock seconds, so it may exceed the real age by up to 1 s, but never
by 1 s: quarantine never ends before ``max_ttl`` after the node really started (the guarantee
checked here), and lasts at most ``max_ttl + 1 s`` after a sighting."""

from __future__ import annotations

import itertools
import time

import pytest

import redlock
from redlock import NodeOutcome

from conftest import CONNECT_TIMEOUT_MS, NODE_TIMEOUT_MS
from redis_nodes import key_of, wait_until

#: A short maximum TTL, so that quarantines end within the test.
SHORT_MAX_TTL_MS = 1_000


def _quarantined(m: redlock.Redlock):
    return [s for s in m.node_states() if s.quarantined]


_probes = itertools.count()


def _probe(m: redlock.Redlock, resource: str) -> redlock.Lease:
    """One attempt, on a resource name of its own: a probe is closed without unlocking (its
    key expires after the short TTL), so a slow machine never turns it into a NotHeld."""
    return m.try_lock(f"{resource}:{next(_probes)}", ttl_ms=SHORT_MAX_TTL_MS)


def _lock_once_counted(m: redlock.Redlock, resource: str, timeout: float):
    """Probes every 50 ms until a lock is granted; returns ``(lease, time of the grant)`` (read
    right after it, so not earlier than the library's decision). Only Unavailable (quarantine)
    is expected meanwhile."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            lk = _probe(m, resource)
            return lk, time.monotonic()
        except redlock.Unavailable as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"no lock within {timeout} s; last: {last!r}")


def test_fresh_nodes_are_quarantined_by_default(make_cluster, resource):
    c = make_cluster(3)
    # Every option but the timeouts at the library's default: quarantine on, max TTL 60 s.
    with redlock.Redlock(
        c.urls,
        retry_count=0,
        node_timeout_ms=NODE_TIMEOUT_MS,
        connect_timeout_ms=CONNECT_TIMEOUT_MS,
    ) as m:
        # Nothing is known before the first connection.
        assert m.node_states() == [redlock.NodeState(i, False, 0) for i in range(3)]
        for attempt in (
            lambda: m.try_lock(resource, ttl_ms=5_000),
            lambda: m.lock(resource, ttl_ms=5_000),
        ):
            with pytest.raises(redlock.Unavailable) as ei:
                attempt()
            assert ei.value.status == redlock.Status.UNAVAILABLE
            assert "restart quarantine" in ei.value.message
        states = m.node_states()
        assert [s.index for s in states] == [0, 1, 2]
        assert all(isinstance(s, redlock.NodeState) for s in states)
        # An attempt is decided once a quorum is out of reach, so a node may not be seen yet.
        quarantined = [s for s in states if s.quarantined]
        assert len(quarantined) >= m.quorum, states
        for s in states:
            if s.quarantined:
                assert 30_000 <= s.remaining_ms <= 61_000, s
            else:
                assert s.remaining_ms == 0, s
        text = m.metrics()
        assert 'redlock_acquire_total{result="unavailable"} 2' in text.splitlines()
        # The grants of quarantined nodes were taken back.
        wait_until(lambda: c.present(key_of(resource)) == 0, what="no key left")


def test_short_max_ttl_counts_nodes_once_old_enough(make_cluster, new_manager, resource):
    t_before = time.monotonic()  # every node starts after this
    c = make_cluster(3)
    m = new_manager(
        c.urls, restart_quarantine=True, max_ttl_ms=SHORT_MAX_TTL_MS, retry_count=0
    )
    with pytest.raises(redlock.Unavailable, match="restart quarantine"):
        _probe(m, resource)
    quarantined = _quarantined(m)
    assert len(quarantined) >= m.quorum
    for s in quarantined:
        assert 0 < s.remaining_ms <= SHORT_MAX_TTL_MS + 1_000, s

    lk, t_ok = _lock_once_counted(m, resource, timeout=8.0)
    # Never counted before the maximum TTL after the node started.
    assert t_ok - t_before >= SHORT_MAX_TTL_MS / 1000, t_ok - t_before
    assert lk.granted >= m.quorum
    assert c.holding(key_of(lk.resource), lk.token) >= m.quorum
    lk.close()


def test_restarted_node_is_quarantined_again(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(
        c.urls, restart_quarantine=True, max_ttl_ms=SHORT_MAX_TTL_MS, retry_count=0
    )

    # Until every node counts: all three granted one lock.
    def all_granted() -> bool:
        lk, _ = _lock_once_counted(m, resource, timeout=8.0)
        lk.close()
        return lk.granted == 3

    wait_until(all_granted, timeout=15, interval=0.05, what="all three nodes to count")
    assert _quarantined(m) == []

    # kill -9 and start again on the same port, without persistence: back empty.
    t_kill = time.monotonic()
    c.servers[1].restart()

    # The next acquisitions reconnect and read its uptime; it never counts meanwhile. The
    # first ones may be decided by nodes 0 and 2 before node 1's handshake is read (PENDING).
    seen = []
    deadline = time.monotonic() + 5.0
    while True:
        assert time.monotonic() < deadline, f"node 1's restart was never seen: {seen}"
        lk = _probe(m, resource)
        lk.close()
        outcome = lk.node_outcomes[1]
        seen.append(outcome)
        assert lk.granted == 2 and outcome != NodeOutcome.SUCCESS, seen
        assert outcome in (
            NodeOutcome.QUARANTINED,
            NodeOutcome.PENDING,
            NodeOutcome.UNREACHABLE,
            NodeOutcome.BACKOFF,
        ), seen
        if outcome == NodeOutcome.QUARANTINED:
            break

    states = m.node_states()
    elapsed_ms = (time.monotonic() - t_kill) * 1000
    assert [s.quarantined for s in states] == [False, True, False], states
    # About max TTL + 1 s: at most that, and never ending before max TTL after the restart.
    # (1 ms of slack: the library rounds remaining_ms down.)
    assert SHORT_MAX_TTL_MS - elapsed_ms - 1 <= states[1].remaining_ms <= SHORT_MAX_TTL_MS + 1_000
    assert states[1].remaining_ms > 300, "too slow to check the quarantine below"
    metrics = m.metrics()
    assert f'redlock_node_quarantined{{node="1",addr="127.0.0.1:{c.servers[1].port}"}} 1' in (
        metrics.splitlines()
    )

    # Node 0 goes down: node 1 does not count yet, so there is no quorum.
    c.servers[0].kill()
    with pytest.raises(redlock.Unavailable) as ei:
        _probe(m, resource)
    assert "restart quarantine" in ei.value.message

    # Once its quarantine is over, node 1 counts again: nodes 1 and 2 make the quorum.
    wait_until(
        lambda: not m.node_states()[1].quarantined,
        timeout=SHORT_MAX_TTL_MS / 1000 + 3,
        what="node 1's quarantine to end",
    )
    assert time.monotonic() - t_kill >= SHORT_MAX_TTL_MS / 1000
    lk, _ = _lock_once_counted(m, resource, timeout=5.0)
    outcomes = lk.node_outcomes
    assert lk.granted == 2
    assert outcomes[1] == outcomes[2] == NodeOutcome.SUCCESS, outcomes
    assert outcomes[0] in (NodeOutcome.UNREACHABLE, NodeOutcome.BACKOFF), outcomes
    assert c.holding(key_of(lk.resource), lk.token) == 2  # on nodes 1 and 2
    lk.close()


def test_ttl_above_the_maximum_is_invalid(cluster, new_manager, resource):
    maximum = 5_000
    m = new_manager(cluster.urls, max_ttl_ms=maximum)
    over = maximum + 1
    for attempt in (
        lambda: m.try_lock(resource, ttl_ms=over),
        lambda: m.lock(resource, ttl_ms=over),
        lambda: m.lock(resource, ttl_ms=over, wait_ms=10),
        lambda: m.try_lock(resource, ttl_ms=over, fenced=True),
    ):
        with pytest.raises(redlock.InvalidArgument) as ei:
            attempt()
        assert ei.value.status == redlock.Status.INVALID_ARGUMENT
        assert "maximum TTL" in ei.value.message
    assert cluster.present(key_of(resource)) == 0  # nothing was sent
    with m.try_lock(resource, ttl_ms=maximum) as lk:  # the maximum itself is fine
        with pytest.raises(redlock.InvalidArgument, match="maximum TTL"):
            lk.extend(over)
        assert lk.valid  # nothing was sent
        lk.extend(maximum)

    # The default maximum is 60 s.
    d = new_manager(cluster.urls)
    with pytest.raises(redlock.InvalidArgument, match="maximum TTL"):
        d.try_lock(resource, ttl_ms=60_001)
    with d.try_lock(resource, ttl_ms=60_000):
        pass
