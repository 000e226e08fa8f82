"""Fencing tokens (fenced=True, through redlock_acquire) and the lease accessors
(fencing_token, renewing, lost_reason, ttl_ms) through the binding."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import redlock

from conftest import PACKAGE_ROOT, TESTS_DIR
from redis_nodes import RedisServer, key_of, wait_until
from workers import fenced_grants, fenced_grants_main, fenced_write


def fence_key(resource: str) -> bytes:
    return b"redlock-fence:" + resource.encode()


# ---- plain leases: the accessors ----


def test_plain_lease_accessors(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=5_000)
    assert lk.fencing_token is None
    assert lk.renewing is False
    assert lk.lost is False and lk.lost_reason is None
    assert lk.ttl_ms == 5_000
    lk.extend(8_000)
    assert lk.ttl_ms == 8_000
    assert 7_000 < lk.validity_ms <= 8_000
    lk.auto_renew()
    assert lk.renewing is True
    lk.stop_renewal()
    assert lk.renewing is False
    lk.auto_renew()
    lk.unlock()  # stops renewal
    assert lk.renewing is False and lk.lost is False and lk.lost_reason is None
    assert lk.ttl_ms == 8_000  # the last successful acquisition or extension
    assert cluster.present(fence_key(resource)) == 0  # plain locks touch no counter
    lk.close()
    assert lk.fencing_token is None  # a fact: still readable
    # So is what it was when closed (issue #39).
    assert (lk.ttl_ms, lk.renewing, lk.lost_reason) == (8_000, False, None)


def test_lost_reason_after_the_maximum_hold_time(cluster, mgr, resource):
    # A 1 s TTL renewed every third of it: a renewal late by most of a second (a busy machine)
    # does not lose the lease before the bound, with another reason.
    lk = mgr.lock(resource, ttl_ms=1_000)
    reasons = []
    lk.auto_renew(max_hold_ms=2_000, on_lost=lambda lease: reasons.append(lease.lost_reason))
    assert lk.renewing
    assert lk.wait_lost(5_000)
    assert lk.lost and not lk.renewing and lk.validity_ms == 0
    assert "maximum hold time" in lk.lost_reason
    wait_until(lambda: reasons, timeout=5, what="on_lost")
    assert reasons == [lk.lost_reason]
    assert lk.ttl_ms == 1_000  # renewals extended it to its own TTL
    lk.close()


def test_lost_reason_after_the_maximum_extensions(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=1_000)  # not lost to a renewal that a busy machine delays
    lk.auto_renew(max_extensions=1)
    assert lk.wait_lost(5_000)
    assert "extensions" in lk.lost_reason
    lk.close()


def test_wait_lost_returns_at_once_when_renewal_stops(cluster, mgr, resource):
    lk = mgr.lock(resource, ttl_ms=5_000)
    t0 = time.monotonic()
    assert lk.wait_lost(10_000) is False  # never started
    lk.auto_renew()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("lost", lk.wait_lost(30_000)))
    t.start()
    wait_until(lambda: lk._handle._waiters == 1, timeout=5, interval=0.001, what="wait_lost")
    lk.stop_renewal()
    t.join(5)
    assert result == {"lost": False}
    assert time.monotonic() - t0 < 3.0
    lk.unlock()
    lk.close()


# ---- fenced leases ----


def test_fenced_tokens_grow_and_stay_with_the_lease(cluster, mgr, resource):
    seen = []
    lk = mgr.lock(resource, ttl_ms=5_000, fenced=True)
    assert type(lk.fencing_token) is int and lk.fencing_token > 0
    seen.append(lk.fencing_token)
    assert f"fencing_token={lk.fencing_token}" in repr(lk)
    lk.extend(6_000)
    assert lk.fencing_token == seen[-1] and lk.ttl_ms == 6_000
    lk.unlock()
    lk.close()
    assert lk.fencing_token == seen[-1]  # readable after close

    # Every way to acquire takes the flag; plain grants in between neither get nor use one.
    with mgr.try_lock(resource, ttl_ms=5_000, fenced=True) as lk:
        seen.append(lk.fencing_token)
    with mgr.lock(resource, ttl_ms=5_000) as plain:
        assert plain.fencing_token is None
    with mgr.lock(resource, ttl_ms=5_000, wait_ms=2_000, fenced=True) as lk:
        seen.append(lk.fencing_token)
    with mgr.try_lock(resource.encode(), ttl_ms=5_000, fenced=True) as lk:
        seen.append(lk.fencing_token)
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen
    # The counter lives on the nodes (a quorum holds the last token), without expiry.
    holding = [s.get(fence_key(resource)) for s in cluster.servers]
    assert sum(1 for v in holding if v == str(seen[-1]).encode()) >= 2, holding
    for s in cluster.servers:
        if s.get(fence_key(resource)) is not None:
            assert s.pttl(fence_key(resource)) == -1  # never expires


def test_fenced_and_auto_renew_compose(cluster, mgr, new_manager, resource):
    # 1 s, renewed every third of it: a 400 ms TTL is lost to a renewal that a busy machine
    # delays by a quarter of a second.
    lk = mgr.lock(resource, ttl_ms=1_000, fenced=True)
    token = lk.fencing_token
    lk.auto_renew()
    time.sleep(2.5)  # more than two TTLs: renewed several times
    assert lk.valid and lk.renewing and not lk.lost
    assert lk.fencing_token == token
    assert cluster.holding(key_of(resource), lk.value) >= 2
    other = new_manager(cluster.urls, retry_count=0)
    with pytest.raises(redlock.NotAcquired):
        other.try_lock(resource, ttl_ms=1_000, fenced=True)
    lk.unlock()
    lk.close()
    # The next fenced grant, once it is released, has a larger token.
    with other.try_lock(resource, ttl_ms=1_000, fenced=True) as nxt:
        assert nxt.fencing_token > token


def test_fenced_argument_checks(cluster, mgr, resource):
    for bad in (1, "yes", None):
        with pytest.raises(TypeError):
            mgr.try_lock(resource, ttl_ms=1_000, fenced=bad)
        with pytest.raises(TypeError):
            mgr.lock(resource, ttl_ms=1_000, fenced=bad)
    with pytest.raises(redlock.InvalidArgument):
        mgr.lock(resource, ttl_ms=0, fenced=True)
    with pytest.raises(redlock.InvalidArgument):
        mgr.lock("", ttl_ms=1_000, fenced=True)
    with pytest.raises(redlock.InvalidArgument):
        mgr.lock(resource, ttl_ms=1_000, wait_ms=-1, fenced=True)
    # Nothing was granted by the refused calls.
    assert cluster.present(key_of(resource)) == 0


def test_fencing_tokens_strictly_increase_across_threads_and_processes(cluster, resource):
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    n_procs, n_threads, per_thread = 3, 2, 25
    start = ctx.Barrier(n_procs + 1)
    procs = [
        ctx.Process(
            target=fenced_grants_main,
            args=(cluster.urls, resource, n_threads, per_thread, start, results),
        )
        for _ in range(n_procs)
    ]
    for p in procs:
        p.start()
    try:
        # This process contends too, from two threads of its own.
        mine = fenced_grants(cluster.urls, resource, 2, per_thread, start)
        outcomes = [results.get(timeout=90) for _ in procs]
        deadline = time.monotonic() + 30
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    assert all(kind == "ok" for kind, _ in outcomes), outcomes
    records = list(mine)
    for _, recs in outcomes:
        records.extend(recs)
    assert len(records) == (n_procs * n_threads + 2) * per_thread
    # CLOCK_MONOTONIC is one clock for every process on this machine.
    records.sort()
    assert all(type(tok) is int and tok > 0 for _, tok, _ in records)
    bad = [(a, b) for a, b in zip(records, records[1:]) if not a[1] < b[1]]
    assert not bad, f"fencing tokens not strictly increasing in grant order: {bad[:5]}"
    # They really contended: 4 processes, 8 threads, whose grants interleave.
    sources = [src for _, _, src in records]
    assert len(set(sources)) == n_procs * n_threads + 2
    assert len({s.split(":")[0] for s in sources}) == n_procs + 1
    switches = sum(1 for a, b in zip(sources, sources[1:]) if a != b)
    assert switches >= len(set(sources)), switches
    cluster.released(key_of(resource))


def _read_line(proc: subprocess.Popen, prefix: str, timeout: float = 20.0) -> str:
    """The next stdout line of ``proc``, which must start with ``prefix`` (bounded wait)."""
    box = {}
    reader = threading.Thread(target=lambda: box.setdefault("line", proc.stdout.readline()))
    reader.daemon = True
    reader.start()
    reader.join(timeout)
    line = box.get("line")
    if not line:
        stderr = proc.stderr.read() if proc.poll() is not None else "(still running)"
        raise AssertionError(f"child said nothing (waiting for {prefix!r}); stderr: {stderr}")
    assert line.startswith(prefix), line
    return line[len(prefix) :].strip()


def test_paused_holder_write_is_rejected_by_the_fenced_store(cluster, new_manager, resource):
    """A child takes a fenced lock (500 ms TTL) and is SIGSTOPped before its write, past its TTL;
    the parent takes the lock and writes with its larger token; the child, resumed, writes with
    its stale token: the store must turn it away, every round."""
    rounds, ttl_ms = 3, 500
    store = RedisServer()
    record = f"record:{resource}"
    child = None
    try:
        args = {
            "urls": cluster.urls,
            "resource": resource,
            "ttl_ms": ttl_ms,
            "rounds": rounds,
            "store_port": store.port,
            "record": record,
        }
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([TESTS_DIR, PACKAGE_ROOT]))
        child = subprocess.Popen(
            [sys.executable, "-c", "import workers; workers.paused_writer_main()",
             json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        m = new_manager(cluster.urls, retry_delay_ms=10)
        for i in range(rounds):
            child_token, child_validity = map(int, _read_line(child, "token ").split())
            assert child_validity > 0
            os.kill(child.pid, signal.SIGSTOP)
            time.sleep(ttl_ms / 1000 + 0.2)  # past the child's TTL while it is stopped
            with m.lock(resource, ttl_ms=5_000, wait_ms=5_000, fenced=True) as lk:
                assert lk.fencing_token > child_token
                assert fenced_write(store.port, record, lk.fencing_token, f"parent {i}") == 1
                child.stdin.write("go\n")  # read by the child once it runs again
                child.stdin.flush()
                os.kill(child.pid, signal.SIGCONT)
                assert _read_line(child, "write ") == "0", f"round {i}: stale write accepted"
                assert store.command("HGET", record, "value") == f"parent {i}".encode()
                assert store.command("HGET", record, "fence") == str(lk.fencing_token).encode()
        child.stdin.close()
        assert child.wait(timeout=20) == 0, child.stderr.read()
    finally:
        if child is not None and child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        if child is not None:
            for f in (child.stdin, child.stdout, child.stderr):
                try:
                    f.close()
                except (OSError, ValueError):
                    pass
        store.stop()
