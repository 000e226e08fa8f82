"""Failing nodes, and handles dropped or left behind without crashing the interpreter."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import time

import pytest

import redlock
from redlock import NodeOutcome

from conftest import PACKAGE_ROOT, first_contact
from redis_nodes import key_of


def test_one_node_killed(make_cluster, new_manager, resource):
    c = make_cluster(3)
    # A node that fails in a cluster in use (one that never answered keeps a brand-new cluster
    # undecided for a maximum TTL: test_quarantine.py).
    first_contact(c)
    m = new_manager(c.urls)
    c.servers[1].kill()
    lk = m.lock(resource, ttl_ms=10_000)
    assert lk.granted == 2
    outcomes = lk.node_outcomes
    assert outcomes[1] in (NodeOutcome.UNREACHABLE, NodeOutcome.BACKOFF)
    assert outcomes[0] == outcomes[2] == NodeOutcome.SUCCESS
    assert c.holding(key_of(resource), lk.value) == 2
    lk.extend(20_000)
    assert lk.validity_ms > 15_000
    lk.unlock()
    c.released(key_of(resource))
    lk.close()


def test_node_killed_while_a_lock_is_held(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(c.urls)
    with m.lock(resource, ttl_ms=10_000) as lk:
        c.servers[0].kill()
        lk.extend(10_000)
        # Still exclusive: the two live nodes hold it.
        other = new_manager(c.urls, retry_count=0)
        with pytest.raises(redlock.NotAcquired):
            other.try_lock(resource, ttl_ms=1_000)
    c.released(key_of(resource))  # released on the live nodes


def test_majority_down_is_unavailable_and_fast(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(c.urls, retry_count=1, retry_delay_ms=10)
    c.servers[0].kill()
    c.servers[2].kill()
    t0 = time.monotonic()
    with pytest.raises(redlock.Unavailable) as ei:
        m.lock(resource, ttl_ms=5_000)
    assert time.monotonic() - t0 < 3.0
    assert ei.value.status == redlock.Status.UNAVAILABLE == 3
    assert "unavailable" in ei.value.message
    # No lock was left on the surviving node.
    c.released(key_of(resource))


def test_paused_node_does_not_block_the_quorum(make_cluster, new_manager, resource):
    c = make_cluster(3)
    first_contact(c)  # see test_one_node_killed
    m = new_manager(c.urls)
    c.servers[2].pause()
    try:
        t0 = time.monotonic()
        lk = m.try_lock(resource, ttl_ms=10_000)
        assert time.monotonic() - t0 < 2.0
        assert lk.granted == 2
        assert lk.node_outcomes[2] in (NodeOutcome.PENDING, NodeOutcome.TIMEOUT)
        lk.unlock()
        lk.close()
    finally:
        c.servers[2].resume()


def _run_child(code: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_dropped_manager_with_live_locks_does_not_crash(cluster, resource):
    code = f"""
        import gc, sys, threading
        import redlock
        urls = {cluster.urls!r}
        res = {resource!r}

        mgr = redlock.Redlock(urls, node_timeout_ms=500, connect_timeout_ms=1000)
        kept = mgr.lock(res + ":kept", ttl_ms=30_000)
        dropped = mgr.lock(res + ":dropped", ttl_ms=30_000)
        renewing = mgr.lock(res + ":renewing", ttl_ms=30_000)
        renewing.auto_renew(on_lost=lambda lk: None)
        print("dropped-value", dropped.value, flush=True)

        # Drop the manager while its leases live: they keep working.
        del mgr
        gc.collect()
        assert kept.validity_ms > 0
        kept.extend(30_000)
        # Drop a lease without unlocking it: its handle is freed, the lock is not released.
        del dropped
        gc.collect()

        # A thread blocked in a lock call on a manager nobody else references, at exit.
        m2 = redlock.Redlock(urls, node_timeout_ms=500, retry_delay_ms=20)
        started = threading.Event()
        def blocked():
            started.set()
            try:
                m2.lock(res + ":kept", ttl_ms=1_000, wait_ms=3_000)
            except redlock.NotAcquired:
                pass
        threading.Thread(target=blocked, daemon=True).start()
        started.wait(5)
        del m2
        gc.collect()
        # A cycle holding a manager and a lease, left to the collector at exit.
        class Holder: pass
        h = Holder(); h.self = h
        h.mgr = redlock.Redlock(urls, node_timeout_ms=500)
        h.lease = h.mgr.try_lock(res + ":cycle", ttl_ms=30_000)
        del h
        print("done", flush=True)
    """
    proc = _run_child(code)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "done" in proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    value = proc.stdout.split("dropped-value ")[1].split()[0]
    # Finalizers only free: every lock the child held is still on the nodes.
    assert cluster.holding(key_of(resource + ":dropped"), value) >= 2
    for suffix in (":kept", ":renewing", ":cycle"):
        assert cluster.present(key_of(resource + suffix)) >= 2, suffix


def _record_free(handle, freed: list) -> None:
    """Wraps a handle's C free function so that the test sees it run (once)."""
    free = handle._free

    def recording(ptr) -> None:
        freed.append(ptr)
        free(ptr)

    handle._free = recording


def test_manager_freed_by_the_collector_in_process(cluster, resource):
    m = redlock.Redlock(cluster.urls, node_timeout_ms=500)
    lk = m.try_lock(resource, ttl_ms=10_000)
    manager_freed: list = []
    _record_free(m._handle, manager_freed)
    del m
    gc.collect()
    assert len(manager_freed) == 1  # redlock_manager_free ran
    # The lease still works after its manager was collected.
    lk.extend(10_000)
    lk.unlock()
    cluster.released(key_of(resource))
    lease_freed: list = []
    _record_free(lk._handle, lease_freed)
    del lk
    gc.collect()
    assert len(lease_freed) == 1  # redlock_lease_free ran


def test_closed_handles_are_not_freed_again_by_the_collector(cluster, resource):
    m = redlock.Redlock(cluster.urls, node_timeout_ms=500)
    lk = m.try_lock(resource, ttl_ms=10_000)
    freed: list = []
    _record_free(m._handle, freed)
    _record_free(lk._handle, freed)
    lk.unlock()
    lk.close()
    m.close()
    assert len(freed) == 2
    del m, lk
    gc.collect()
    assert len(freed) == 2
