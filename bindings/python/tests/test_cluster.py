"""Cluster nodes (``redis+cluster://``) through the Python binding, against real
``redis-server`` processes in cluster mode: a lock where each node is a Redis Cluster."""

from __future__ import annotations

import pytest

import redlock
from redlock import NodeOutcome

from redis_nodes import OneShardCluster, wait_until


@pytest.fixture(scope="module")
def clusters():
    """Three one-shard clusters."""
    cs = []
    try:
        for _ in range(3):
            cs.append(OneShardCluster())
        yield cs
    finally:
        for c in cs:
            c.stop()


def test_a_lock_on_cluster_nodes(clusters) -> None:
    urls = [c.cluster_url for c in clusters]
    # Restart quarantine on (per shard), as by default.
    with redlock.Redlock(urls, retry_count=3) as m:
        with m.lock("py:cluster:lock", ttl_ms=10_000) as lease:
            # Granted at quorum: the last cluster may still be pending.
            outcomes = lease.node_outcomes
            assert outcomes.count(NodeOutcome.SUCCESS) >= 2, outcomes
            assert set(outcomes) <= {NodeOutcome.SUCCESS, NodeOutcome.PENDING}, outcomes
            key = b"redlock:py:cluster:lock"
            held = sum(1 for c in clusters if c.get(key) == lease.value.encode())
            assert held >= 2
            with pytest.raises(redlock.NotAcquired):
                m.try_lock("py:cluster:lock", ttl_ms=10_000)


def test_a_cluster_url_without_a_seed_is_refused() -> None:
    with pytest.raises(redlock.InvalidArgument, match="seed"):
        redlock.Redlock(["redis+cluster://"])


def test_several_resources_across_slots_on_cluster_nodes(clusters) -> None:
    """``acquire_many`` over keys in different slots: each cluster gets one script per slot
    (here all on its one shard, in one round) and grants all of them or none."""
    names = ["py:cluster:many:a", "py:cluster:many:b", "py:cluster:many:c"]
    keys = [b"redlock:" + n.encode() for n in names]
    slots = {clusters[0].command("CLUSTER", "KEYSLOT", k) for k in keys}
    assert len(slots) > 1, slots
    urls = [c.cluster_url for c in clusters]
    with redlock.Redlock(urls, retry_count=3) as m:
        lease = m.acquire_many(names, ttl_ms=10_000)
        try:
            for k in keys:
                held = sum(1 for c in clusters if c.get(k) == lease.value.encode())
                assert held >= 2, k
            with pytest.raises(redlock.NotAcquired):
                m.try_lock(names[2], ttl_ms=10_000)
            lease.extend(20_000)
        finally:
            lease.unlock()
        # One resource held elsewhere: the set is refused, and no cluster keeps the others.
        with m.lock(names[1], ttl_ms=10_000):
            with pytest.raises(redlock.NotAcquired):
                m.acquire_many(names, ttl_ms=10_000)
            wait_until(
                lambda: all(c.get(k) is None for c in clusters for k in (keys[0], keys[2])),
                timeout=10.0,
                what="the refused set's other keys taken back",
            )
