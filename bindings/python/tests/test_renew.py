"""Auto-renewal (redlock_lease_auto_renew and friends) through the binding."""

from __future__ import annotations

import ctypes
import threading
import time

import pytest

import redlock
from redlock import _ffi

from redis_nodes import key_of, wait_until


def _watchers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "redlock-lost-watcher")


def test_auto_renew_keeps_a_short_lock_alive(cluster, mgr, new_manager, resource):
    key = key_of(resource)
    # 1 s, renewed every third of it: a renewal late by most of a second (a busy machine) is
    # not a loss.
    lk = mgr.lock(resource, ttl_ms=1_000)
    lk.auto_renew()
    time.sleep(2.5)  # more than two TTLs
    assert lk.valid and not lk.lost
    assert 0 < lk.validity_ms <= 1_000
    assert cluster.holding(key, lk.value) >= 2
    other = new_manager(cluster.urls, retry_count=0)
    with pytest.raises(redlock.NotAcquired):
        other.try_lock(resource, ttl_ms=1_000)
    lk.unlock()  # stops renewal first
    cluster.released(key)
    time.sleep(0.3)
    assert cluster.present(key) == 0  # no renewal recreated it
    assert not lk.lost
    lk.close()


# The leases below that must still be held when auto_renew() (or stop_renewal()) is called
# have a 1 s TTL: a shorter one can run out first on a busy machine (the call comes late, or
# the renewal does), and auto_renew() then raises NotHeld or the lease is lost too soon.


def test_bound_reached_marks_lost_and_calls_on_lost(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=1_000)
    called = []
    fired = threading.Event()

    def on_lost(lease: redlock.Lease) -> None:
        called.append((lease, threading.current_thread().name, lease.lost, lease.validity_ms))
        fired.set()

    lk.auto_renew(max_extensions=1, on_lost=on_lost)
    assert fired.wait(5), "on_lost was not called"
    assert len(called) == 1
    lease, thread_name, lost, validity = called[0]
    assert lease is lk and thread_name == "redlock-lost-watcher"
    assert lost is True and validity == 0
    assert lk.lost and lk.validity_ms == 0 and lk.wait_lost(0)
    with pytest.raises(redlock.NotHeld):
        lk.unlock()
    with pytest.raises(redlock.NotHeld):
        lk.auto_renew()
    lk.close()
    time.sleep(0.05)
    assert called == called[:1]  # once


def test_max_hold_bound(cluster, mgr, resource):
    # t0 before the acquisition, from which the bound counts: lost no sooner than 2.5 s after
    # it, however long the acquisition took. A 1 s TTL renewed every third of it: a renewal
    # late by most of a second (a busy machine) is not a loss before the bound.
    t0 = time.monotonic()
    lk = mgr.lock(resource, ttl_ms=1_000)
    lk.auto_renew(max_hold_ms=2_500)
    assert lk.wait_lost(10_000)
    # Renewed past its TTL, then lost at the bound (measured from the acquisition).
    assert 2.5 <= time.monotonic() - t0 < 6.0
    assert lk.lost_reason.startswith("maximum hold time reached after"), lk.lost_reason
    lk.close()


def test_with_block_that_loses_its_renewed_lock_raises_not_held(cluster, mgr, resource):
    with pytest.raises(redlock.NotHeld):
        with mgr.lock(resource, ttl_ms=1_000) as lk:
            lk.auto_renew(max_extensions=1)
            assert lk.wait_lost(5_000)


def test_stop_renewal_lets_the_lock_expire(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=1_000)
    fired = threading.Event()
    lk.auto_renew(on_lost=lambda _: fired.set())
    lk.stop_renewal()
    lk.stop_renewal()  # no effect when off
    wait_until(lambda: lk.validity_ms == 0, timeout=5, what="expiry")
    wait_until(lambda: cluster.present(key_of(resource)) == 0, timeout=5, what="key expiry")
    assert not lk.lost and not fired.is_set()
    assert not lk.wait_lost(50)
    wait_until(lambda: _watchers() == 0, timeout=5, what="the watcher to end")
    lk.close()


def test_watcher_ends_on_unlock_close_and_collection(cluster, mgr, resource):
    import gc

    for end in ("unlock", "close", "drop"):
        lk = mgr.lock(f"{resource}:{end}", ttl_ms=3_000)
        lk.auto_renew(on_lost=lambda _: None)
        assert _watchers() >= 1
        if end == "unlock":
            lk.unlock()
        elif end == "close":
            lk.close()
        else:
            handle = lk._handle
            del lk
            gc.collect()
        wait_until(lambda: _watchers() == 0, timeout=5, what=f"the watcher to end ({end})")
        if end == "drop":
            wait_until(lambda: handle.freed, timeout=5, what="the lease to be freed")
            del handle


def test_auto_renew_arguments(cluster, mgr, resource):
    with mgr.lock(resource, ttl_ms=2_000) as lk:
        with pytest.raises(redlock.InvalidArgument):
            lk.auto_renew(max_hold_ms=-1)
        with pytest.raises(redlock.InvalidArgument):
            lk.auto_renew(max_extensions=2**32)
        with pytest.raises(TypeError):
            lk.auto_renew(max_hold_ms=1.5)
        with pytest.raises(TypeError):
            lk.auto_renew(on_lost="not callable")
        with pytest.raises(redlock.InvalidArgument):
            lk.wait_lost(-1)
        assert lk.wait_lost(0) is False


def test_renewal_fails_when_the_majority_goes_down(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(c.urls)
    lk = m.lock(resource, ttl_ms=1_000)
    lost_in = []
    lk.auto_renew(on_lost=lambda lease: lost_in.append(lease.validity_ms))
    c.servers[0].kill()
    c.servers[1].kill()
    assert lk.wait_lost(5_000)
    wait_until(lambda: lost_in, timeout=5, what="on_lost")
    assert lost_in == [0]
    # The whole reason, however long (redlock_lease_lost_reason is snprintf-style).
    reason = lk.lost_reason
    assert reason.startswith("renewal failed") and "quorum 2" in reason, reason
    c_lib = _ffi.lib()
    p = lk._handle.acquire()
    try:
        small = ctypes.create_string_buffer(8)
        assert c_lib.redlock_lease_lost_reason(p, small, 8) == len(reason.encode())
        assert small.value == reason.encode()[:7]  # cut short, NUL-terminated
        assert c_lib.redlock_lease_lost_reason(p, None, 0) == len(reason.encode())
    finally:
        lk._handle.release()
    with pytest.raises((redlock.NotHeld, redlock.Unavailable)):
        lk.unlock()
    lk.close()


def test_auto_renew_again_hands_the_callback_to_the_same_watcher(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=1_000)
    calls = []
    fired = threading.Event()
    lk.auto_renew(on_lost=lambda _: calls.append("first"))
    lk.auto_renew(on_lost=lambda _: calls.append("second"))
    lk.stop_renewal()
    lk.auto_renew(max_extensions=1, on_lost=lambda _: (calls.append("third"), fired.set()))
    assert _watchers() <= 2  # the first one may still be on its way out after the stop
    assert fired.wait(5), "on_lost was not called"
    time.sleep(0.1)
    assert calls == ["third"]
    wait_until(lambda: _watchers() == 0, timeout=5, what="the watcher to end")
    lk.close()


def test_auto_renew_without_callback_replaces_the_callback(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=1_000)
    calls = []
    lk.auto_renew(on_lost=lambda _: calls.append("old"))
    lk.auto_renew(max_extensions=1)  # no callback from now on
    assert lk.wait_lost(5_000)
    wait_until(lambda: _watchers() == 0, timeout=5, what="the watcher to end")
    assert calls == []
    lk.close()
