"""Failover groups (``redis+sentinel://``) through the Python binding, against a real
``redis-server`` master and real ``redis-server --sentinel`` processes: a lock through a group,
the sentinels' credentials, the replica-acknowledgement keywords, and the new outcomes."""

from __future__ import annotations

import pytest

import redlock
from redlock import NodeOutcome, QuarantineReason

from redis_nodes import RedisServer, Sentinel


@pytest.fixture(scope="module")
def group():
    """A master, a sentinel watching it, and one that requires the password ``s3cret``."""
    master = RedisServer()
    open_ = Sentinel("svc", master.port)
    locked = Sentinel("svc", master.port, password="s3cret")
    try:
        yield master, open_, locked
    finally:
        locked.stop()
        open_.stop()
        master.stop()


def test_a_lock_through_a_failover_group(group) -> None:
    master, sentinel, _ = group
    # The group alone, so that its answer decides.
    with redlock.Redlock([sentinel.url("svc")], retry_count=0) as m:
        with m.lock("py:sentinel:lock", ttl_ms=10_000) as lease:
            assert lease.node_outcomes == [NodeOutcome.SUCCESS]
            assert master.get(b"redlock:py:sentinel:lock") == lease.value.encode()


def test_the_sentinels_credentials(group) -> None:
    _, _, locked = group
    url = locked.url("svc")
    with redlock.Redlock([url], retry_count=0) as m:
        with pytest.raises(redlock.Unavailable) as e:
            m.try_lock("py:sentinel:auth", ttl_ms=10_000)
        assert "failover group" in str(e.value) and "NOAUTH" in str(e.value)
    with redlock.Redlock([url], retry_count=0, sentinel_password="s3cret") as m:
        lease = m.try_lock("py:sentinel:auth", ttl_ms=10_000)
        assert lease.node_outcomes == [NodeOutcome.SUCCESS]
        lease.unlock()


def test_the_new_keywords_are_checked() -> None:
    url = "redis+sentinel://127.0.0.1:26379/svc"
    with pytest.raises(TypeError):
        redlock.Redlock([url], sentinel_username="alice")  # no password
    with pytest.raises(TypeError):
        redlock.Redlock([url], sentinel_password=b"pw")  # type: ignore[arg-type]
    for bad in ({"sentinel_password": ""}, {"replica_acks": 0}, {"replica_ack_timeout_ms": 0}):
        with pytest.raises(redlock.InvalidArgument):
            redlock.Redlock([url], **bad)  # type: ignore[arg-type]
    with pytest.raises(redlock.InvalidArgument, match="SERVICE"):
        redlock.Redlock(["redis+sentinel://127.0.0.1:26379"])
    # Accepted (nothing is connected until the first lock).
    redlock.Redlock(
        [url, "redis://127.0.0.1:7000?durable=true"],
        sentinel_username="alice",
        sentinel_password="pw",
        replica_acks=1,
        replica_ack_timeout_ms=100,
    ).close()
    assert NodeOutcome.SENTINEL == 11 and NodeOutcome.UNACKNOWLEDGED == 12
    assert QuarantineReason.PROMOTED == 6
