"""Lock, unlock and extend against three real nodes; with-blocks; expiry; waiting. Every
outcome is checked on the nodes themselves (RESP) or through a second manager."""

from __future__ import annotations

import re
import sys
import time

import pytest

import redlock
from redlock import NodeOutcome

from redis_nodes import key_of, wait_until


class Boom(Exception):
    pass


def wait_expired(lk: redlock.Lease, cluster, ttl_ms: int) -> None:
    """Until the lease's validity is 0 and its key is gone from every node (bounded)."""
    wait_until(lambda: lk.validity_ms == 0, timeout=ttl_ms / 1000 + 5, what="validity 0")
    key = key_of(lk.resource)
    wait_until(lambda: cluster.present(key) == 0, timeout=ttl_ms / 1000 + 5, what="key expiry")


def test_lock_unlock_extend(cluster, mgr, new_manager, resource):
    assert mgr.node_count == 3
    assert mgr.quorum == 2
    key = key_of(resource)

    lk = mgr.lock(resource, ttl_ms=10_000)
    assert re.fullmatch(r"[0-9a-f]{40}", lk.token)
    assert lk.resource == resource.encode()
    assert cluster.holding(key, lk.value) >= 2
    assert 9_000 < lk.validity_ms <= 10_000
    assert lk.valid is True
    assert lk.granted >= mgr.quorum
    outcomes = lk.node_outcomes
    assert len(outcomes) == 3 and all(isinstance(o, NodeOutcome) for o in outcomes)
    assert outcomes.count(NodeOutcome.SUCCESS) == lk.granted
    assert set(outcomes) <= {NodeOutcome.SUCCESS, NodeOutcome.PENDING}
    for s in cluster.servers:
        if s.get(key) == lk.value.encode():
            assert 8_000 < s.pttl(key) <= 10_000

    # Someone else cannot take it.
    other = new_manager(cluster.urls)
    with pytest.raises(redlock.NotAcquired) as ei:
        other.try_lock(resource, ttl_ms=1_000)
    assert ei.value.status == redlock.Status.NOT_ACQUIRED == 1
    assert "not acquired" in ei.value.message and "quorum" in ei.value.message

    lk.extend(30_000)
    assert 25_000 < lk.validity_ms <= 30_000
    assert cluster.holding(key, lk.value) >= 2
    for s in cluster.servers:
        if s.get(key) == lk.value.encode():
            assert 25_000 < s.pttl(key) <= 30_000

    lk.unlock()
    cluster.released(key)
    assert lk.validity_ms == 0
    assert lk.valid is False
    with pytest.raises(redlock.NotHeld) as ei:
        lk.unlock()
    assert ei.value.status == 2
    with pytest.raises(redlock.NotHeld):
        lk.extend(1_000)
    lk.close()
    lk.close()  # idempotent
    assert lk.closed

    # Released for real: another manager gets it at once.
    lk2 = other.try_lock(resource, ttl_ms=5_000)
    assert cluster.holding(key, lk2.value) >= 2
    lk2.unlock()
    lk2.close()


def test_str_and_bytes_name_the_same_resource(cluster, mgr, resource):
    name = resource + ":é"
    with mgr.lock(name, ttl_ms=5_000) as lk:
        assert lk.resource == name.encode("utf-8")
        with pytest.raises(redlock.NotAcquired):
            mgr.try_lock(name.encode("utf-8"), ttl_ms=5_000)
        with pytest.raises(redlock.NotAcquired):
            mgr.try_lock(bytearray(name.encode("utf-8")), ttl_ms=5_000)
        assert cluster.holding(key_of(name), lk.value) >= 2
    cluster.released(key_of(name))


def test_binary_resource_and_maximum_length(cluster, mgr, resource):
    raw = resource.encode() + b"\x00\r\n\xff"
    with mgr.try_lock(raw, ttl_ms=5_000) as lk:
        assert lk.resource == raw
        assert cluster.holding(b"redlock:" + raw, lk.value) >= 2
    cluster.released(b"redlock:" + raw)

    longest = (resource.encode() * 100)[: redlock.MAX_RESOURCE_LEN]
    assert len(longest) == 1024
    with mgr.try_lock(longest, ttl_ms=5_000) as lk:
        assert lk.resource == longest
    with pytest.raises(redlock.InvalidArgument):
        mgr.try_lock(longest + b"x", ttl_ms=5_000)


def test_with_block_unlocks(cluster, mgr, resource):
    key = key_of(resource)
    with mgr.lock(resource, ttl_ms=10_000) as lk:
        assert isinstance(lk, redlock.Lease)
        assert cluster.holding(key, lk.value) >= 2
        token = lk.token
    cluster.released(key)
    assert lk.closed
    assert lk.token == token  # facts recorded at acquisition stay readable
    assert lk.validity_ms == 0  # and so does the validity (issue #39)
    with pytest.raises(redlock.HandleClosed):
        lk.unlock()


def test_a_released_lease_still_answers_what_it_was(cluster, mgr, resource):
    # The contract: validity_ms is "an int, the remaining validity, 0 once expired". A
    # released lease is a fact a program may still read; only operations raise.
    key = key_of(resource)
    with mgr.lock(resource, ttl_ms=10_000, fenced=True) as lk:
        token, value, fence = lk.token, lk.value, lk.fencing_token
        assert lk.validity_ms > 0 and lk.lost is False
    cluster.released(key)
    assert lk.closed
    assert lk.validity_ms == 0 and lk.valid is False
    assert lk.lost is False and lk.lost_reason is None and lk.renewing is False
    assert lk.ttl_ms == 10_000
    assert (lk.token, lk.value, lk.fencing_token) == (token, value, fence)
    assert isinstance(fence, int) and lk.resource == resource.encode()
    with pytest.raises(redlock.HandleClosed):
        lk.unlock()
    with pytest.raises(redlock.HandleClosed):
        lk.extend(1_000)

    # Closed without unlocking (still held on the nodes): the same answers.
    lk2 = mgr.try_lock(resource, ttl_ms=10_000)
    lk2.close()
    assert lk2.validity_ms == 0 and lk2.valid is False and lk2.lost is False
    assert cluster.holding(key, lk2.value) >= 2
    assert lk2.fencing_token is None and lk2.resource == resource.encode()
    with pytest.raises(redlock.HandleClosed):
        lk2.unlock()
    # (It expires by its TTL; take it down now for the other tests.)
    for s in cluster.servers:
        s.command("DEL", key)


def test_token_and_value_say_which_is_stored_on_the_nodes(cluster, mgr, resource):
    # The nodes store lease.value ("<token>.<unix ms>[ label]"), not lease.token: the
    # documentation must say which is which (issue #39, item 3).
    key = key_of(resource)
    with mgr.lock(resource, ttl_ms=10_000) as lk:
        assert cluster.holding(key, lk.value) >= 2
        assert cluster.holding(key, lk.token) == 0
        token, _, millis = lk.value.partition(".")
        assert token == lk.token and millis.isdigit()
    token_doc = " ".join((redlock.Lease.token.__doc__ or "").split())
    value_doc = " ".join((redlock.Lease.value.__doc__ or "").split())
    assert "stored on the nodes" not in token_doc, token_doc
    assert ":attr:`value`" in token_doc, token_doc
    assert "<token>.<unix ms>" in value_doc, value_doc


def test_a_lost_lease_still_reads_lost_after_close(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=300, auto_renew=True, max_extensions=1)
    assert lk.wait_lost(20_000)
    reason = lk.lost_reason
    assert reason
    lk.close()
    assert lk.lost is True and lk.lost_reason == reason
    assert lk.validity_ms == 0 and lk.valid is False and lk.renewing is False
    with pytest.raises(redlock.HandleClosed):
        lk.unlock()


def test_with_block_that_raises_still_unlocks(cluster, mgr, resource):
    key = key_of(resource)
    with pytest.raises(Boom):
        with mgr.lock(resource, ttl_ms=10_000) as lk:
            assert cluster.holding(key, lk.value) >= 2
            raise Boom("inside the critical section")
    cluster.released(key)
    assert lk.closed
    # And it is free for the next holder.
    with mgr.try_lock(resource, ttl_ms=1_000):
        pass


# The locks below that are left to expire have a 1 s TTL: with a shorter one (150 ms), an
# acquisition that a busy machine slows past its TTL is refused (no validity left).
SHORT_TTL_MS = 1_000


def test_with_block_outliving_its_lock_raises_not_held(cluster, mgr, resource):
    with pytest.raises(redlock.NotHeld):
        with mgr.lock(resource, ttl_ms=SHORT_TTL_MS) as lk:
            wait_expired(lk, cluster, SHORT_TTL_MS)
    assert lk.closed


def test_with_block_exception_wins_over_failed_unlock(cluster, mgr, resource):
    with pytest.raises(Boom) as ei:
        with mgr.lock(resource, ttl_ms=SHORT_TTL_MS) as lk:
            wait_expired(lk, cluster, SHORT_TTL_MS)
            raise Boom("the body's own error")
    assert lk.closed
    if sys.version_info >= (3, 11):
        notes = getattr(ei.value, "__notes__", [])
        assert any("NotHeld" in n for n in notes), notes


def test_unlock_inside_with_block_is_not_repeated(cluster, mgr, resource):
    with mgr.lock(resource, ttl_ms=5_000) as lk:
        lk.unlock()
        cluster.released(key_of(resource))
    assert lk.closed


def test_unlock_and_extend_after_expiry_raise_not_held(cluster, mgr, resource):
    lk = mgr.try_lock(resource, ttl_ms=SHORT_TTL_MS)
    wait_expired(lk, cluster, SHORT_TTL_MS)
    assert lk.valid is False
    with pytest.raises(redlock.NotHeld) as ei:
        lk.extend(5_000)
    assert ei.value.status == redlock.Status.NOT_HELD
    assert cluster.present(key_of(resource)) == 0  # extend never recreates an expired key
    with pytest.raises(redlock.NotHeld):
        lk.unlock()
    lk.close()


def test_expired_lock_can_be_taken_over_and_old_unlock_does_not_release_it(
    cluster, mgr, new_manager, resource
):
    old = mgr.try_lock(resource, ttl_ms=SHORT_TTL_MS)
    wait_expired(old, cluster, SHORT_TTL_MS)
    other = new_manager(cluster.urls)
    new = other.try_lock(resource, ttl_ms=10_000)
    with pytest.raises(redlock.NotHeld):
        old.unlock()
    # The owner check kept the new holder's key on the nodes.
    assert cluster.holding(key_of(resource), new.value) >= 2
    new.unlock()
    old.close()
    new.close()


def test_wait_ms_gives_up_after_the_wait(cluster, mgr, new_manager, resource):
    holder = mgr.try_lock(resource, ttl_ms=20_000)
    other = new_manager(cluster.urls, retry_delay_ms=50)
    t0 = time.monotonic()
    with pytest.raises(redlock.NotAcquired):
        other.lock(resource, ttl_ms=1_000, wait_ms=400)
    elapsed = time.monotonic() - t0
    assert 0.35 <= elapsed < 5.0, elapsed
    # wait_ms=0: one attempt.
    with pytest.raises(redlock.NotAcquired):
        other.lock(resource, ttl_ms=1_000, wait_ms=0)
    # The configured retries (retry_count=3, delay up to 50 ms): bounded as well.
    t0 = time.monotonic()
    with pytest.raises(redlock.NotAcquired):
        other.lock(resource, ttl_ms=1_000)
    assert time.monotonic() - t0 < 5.0
    holder.unlock()
    holder.close()


def test_wait_ms_acquires_once_the_holder_expires(cluster, mgr, new_manager, resource):
    # From before the holder's acquisition: its keys are set after this, so they expire 1 s
    # after it at the earliest, however long a busy machine takes between the steps below.
    before_held = time.monotonic()
    holder = mgr.try_lock(resource, ttl_ms=SHORT_TTL_MS)
    other = new_manager(cluster.urls, retry_delay_ms=30)
    t0 = time.monotonic()
    with other.lock(resource, ttl_ms=5_000, wait_ms=5_000) as lk:
        granted = time.monotonic()
        assert cluster.holding(key_of(resource), lk.value) >= 2
        assert lk.token != holder.token
    waited = granted - t0
    assert granted - before_held >= 0.99, granted - before_held  # not before the expiry
    assert waited < 5.0, waited
    holder.close()


def test_lease_outlives_its_closed_manager(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    lk = m.lock(resource, ttl_ms=5_000)
    m.close()
    assert m.closed
    with pytest.raises(redlock.HandleClosed):
        m.try_lock(resource + ":2", ttl_ms=1_000)
    lk.extend(8_000)
    assert lk.validity_ms > 6_000
    lk.unlock()
    cluster.released(key_of(resource))
    lk.close()


def test_passwords_never_appear(cluster, new_manager, resource):
    port = cluster.servers[0].port
    m = new_manager([f"redis://:hunter2@127.0.0.1:{port}"], retry_count=0)
    assert "hunter2" not in repr(m)
    # The node has no password: AUTH fails with a server error.
    with pytest.raises(redlock.RedlockError) as ei:
        m.try_lock(resource, ttl_ms=1_000)
    assert "hunter2" not in str(ei.value) and "hunter2" not in repr(ei.value)
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(["redis://:hunter2@127.0.0.1:0"])
    assert "hunter2" not in str(ei.value)


def test_credentials_refused_by_a_quorum_raise_auth_failed(cluster, new_manager, resource):
    # These nodes need no password: AUTH with one fails. Two of three refuse: without them a
    # quorum is out of reach, and that is an authentication failure, not a dead cluster.
    urls = [cluster.urls[0]] + [
        f"redis://:wrong-pw@127.0.0.1:{s.port}" for s in cluster.servers[1:]
    ]
    m = new_manager(urls, retry_count=1, retry_delay_ms=5)
    with pytest.raises(redlock.AuthFailed) as ei:
        m.lock(resource, ttl_ms=5_000)
    e = ei.value
    assert e.status == redlock.Status.AUTH == 4
    assert isinstance(e, redlock.Unavailable)  # handled wherever Unavailable is
    assert str(e).startswith("authentication failed: ") and "wrong-pw" not in str(e)
    assert redlock.STATUS_EXCEPTIONS[4] is redlock.AuthFailed
