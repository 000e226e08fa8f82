"""Cluster nodes (``redis+cluster://``) through the Python binding, against real
``redis-server`` processes in cluster mode: a lock where each node is a Redis Cluster."""

from __future__ import annotations

import pytest

import redlock
from redlock import NodeOutcome

from redis_nodes import OneShardCluster


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
