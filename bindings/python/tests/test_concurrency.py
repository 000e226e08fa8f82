"""Threads and processes contending on one resource, the GIL released while blocked, and
close() racing with calls in progress."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time

import pytest

import redlock

from conftest import make_manager
from redis_nodes import key_of, wait_until
from workers import critical_section, process_main


def _run_threads(threads, timeout=60.0):
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "threads did not finish in time"


def test_threads_contending_keep_mutual_exclusion(cluster, tmp_path, resource):
    marker, counter = str(tmp_path / "inside"), str(tmp_path / "counter")
    with open(counter, "w") as f:
        f.write("0")
    shared = make_manager(cluster.urls, retry_delay_ms=20)
    n_threads, rounds = 6, 5
    errors: "queue.Queue[BaseException]" = queue.Queue()
    violations = []

    def worker(i: int) -> None:
        # Half the threads share one manager, the others have their own.
        own = None if i % 2 == 0 else make_manager(cluster.urls, retry_delay_ms=20)
        m = own or shared
        try:
            for _ in range(rounds):
                with m.lock(resource, ttl_ms=10_000, wait_ms=20_000):
                    if not critical_section(marker, counter):
                        violations.append(i)
        except BaseException as e:  # reported by the main thread
            errors.put(e)
        finally:
            if own is not None:
                own.close()

    _run_threads([threading.Thread(target=worker, args=(i,)) for i in range(n_threads)])
    shared.close()
    assert errors.empty(), errors.get()
    assert violations == []
    with open(counter) as f:
        assert int(f.read()) == n_threads * rounds
    cluster.released(key_of(resource))


def test_processes_contending_keep_mutual_exclusion(cluster, tmp_path, resource):
    marker, counter = str(tmp_path / "inside"), str(tmp_path / "counter")
    with open(counter, "w") as f:
        f.write("0")
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    n_procs, rounds = 3, 8
    start = ctx.Barrier(n_procs)
    procs = [
        ctx.Process(
            target=process_main,
            args=(cluster.urls, resource, rounds, marker, counter, start, results),
        )
        for _ in range(n_procs)
    ]
    for p in procs:
        p.start()
    try:
        outcomes = [results.get(timeout=60) for _ in procs]
        deadline = time.monotonic() + 30
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
    assert [v for v, _, _ in outcomes] == [0] * n_procs, "mutual exclusion violated"
    # They really contended: every process was still at it when the last one started.
    assert max(first for _, first, _ in outcomes) < min(last for _, _, last in outcomes)
    with open(counter) as f:
        assert int(f.read()) == n_procs * rounds
    cluster.released(key_of(resource))


def test_blocking_lock_releases_the_gil(cluster, new_manager, resource):
    holder_mgr = new_manager(cluster.urls)
    waiter_mgr = new_manager(cluster.urls, retry_delay_ms=20)
    holder = holder_mgr.try_lock(resource, ttl_ms=10_000)
    window = {}

    def blocked() -> None:
        window["start"] = time.monotonic()
        try:
            waiter_mgr.lock(resource, ttl_ms=1_000, wait_ms=800)
        except redlock.NotAcquired:
            window["result"] = "not acquired"
        window["end"] = time.monotonic()

    ticks = []
    stop = threading.Event()

    def ticker() -> None:
        # Pure Python work: it can only run while no other thread holds the GIL.
        while not stop.is_set():
            ticks.append(time.monotonic())
            x = 0
            for i in range(2000):
                x += i

    t_tick = threading.Thread(target=ticker)
    t_block = threading.Thread(target=blocked)
    t_tick.start()
    t_block.start()
    t_block.join(10)
    stop.set()
    t_tick.join(10)
    assert window.get("result") == "not acquired"
    start, end = window["start"], window["end"]
    assert end - start >= 0.7
    inside = [t for t in ticks if start + 0.1 < t < end - 0.1]
    # With the GIL held by the blocked call there would be no tick in the window at all.
    assert len(inside) > 50, len(inside)
    holder.unlock()
    holder.close()


def test_close_while_a_call_is_in_progress_defers_the_free(cluster, new_manager, resource):
    holder_mgr = new_manager(cluster.urls)
    holder = holder_mgr.try_lock(resource, ttl_ms=10_000)
    m = make_manager(cluster.urls, retry_delay_ms=20)
    entered = threading.Event()
    outcome = {}

    def blocked() -> None:
        entered.set()
        try:
            m.lock(resource, ttl_ms=1_000, wait_ms=4_000)
        except redlock.RedlockError as e:
            outcome["error"] = e

    t = threading.Thread(target=blocked)
    t.start()
    entered.wait(5)
    wait_until(lambda: m._handle._users == 1, timeout=5, interval=0.001, what="call in progress")
    t0 = time.monotonic()
    m.close()
    # Close does not wait for the call, which waits 4 s: half of that is not a scheduling
    # delay, even on a busy machine.
    assert time.monotonic() - t0 < 2.0
    assert m.closed
    assert not m._handle.freed  # the running call still uses the manager
    with pytest.raises(redlock.HandleClosed):
        m.try_lock(resource + ":other", ttl_ms=1_000)
    t.join(10)
    assert not t.is_alive()
    assert isinstance(outcome.get("error"), redlock.NotAcquired)
    assert m._handle.freed  # freed when the call returned
    holder.unlock()
    holder.close()


def test_lease_close_during_a_blocking_lease_call(make_cluster, new_manager, resource):
    c = make_cluster(3)
    # The extend below waits out its node timeout, 5 s: the flags, read meanwhile, must not
    # wait for it, and the extend is still under way when the test closes the lease, however
    # slowly a busy machine runs the test.
    m = new_manager(c.urls, node_timeout_ms=5_000)
    lk = m.try_lock(resource, ttl_ms=10_000)
    c.servers[0].pause()
    c.servers[1].pause()
    result = {}

    def extender() -> None:
        try:
            lk.extend(10_000)
            result["ok"] = True
        except redlock.RedlockError as e:
            result["error"] = e

    t = threading.Thread(target=extender)
    t.start()
    wait_until(lambda: lk._handle._users == 1, timeout=5, interval=0.001, what="extend")
    time.sleep(0.05)  # well inside the extend
    # The flags never wait for the extend in flight (nor for its lease state).
    t0 = time.monotonic()
    assert lk.lost is False and lk.renewing is False
    assert time.monotonic() - t0 < 2.0  # not the extend's 5 s
    assert t.is_alive()
    lk.close()
    assert lk.closed
    assert not lk._handle.freed  # the running call still uses the lease
    assert lk.validity_ms == 0 and lk.lost is False  # closed: read, never raised
    with pytest.raises(redlock.HandleClosed):
        lk.unlock()
    t.join(10)
    assert not t.is_alive()
    assert isinstance(result.get("error"), (redlock.Unavailable, redlock.NotHeld)), result
    assert lk._handle.freed  # freed when the call returned
    c.servers[0].resume()
    c.servers[1].resume()


def test_lease_close_wakes_a_wait_lost_in_another_thread(cluster, mgr, resource):
    lk = mgr.try_lock(resource, ttl_ms=1_000)
    lk.auto_renew()
    result = {}

    def waiter() -> None:
        result["lost"] = lk.wait_lost(30_000)

    t = threading.Thread(target=waiter)
    t.start()
    wait_until(lambda: lk._handle._users == 1, timeout=5, interval=0.001, what="wait_lost")
    t0 = time.monotonic()
    lk.close()  # stops renewal first: the wait returns at once, then the handle is freed
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2.0
    assert result == {"lost": False}
    wait_until(lambda: lk._handle.freed, timeout=5, what="the lease to be freed")
    # Closing never unlocked it; renewal stopped, so it expires after its TTL.
    assert cluster.holding(key_of(resource), lk.value) >= 2
    wait_until(lambda: cluster.present(key_of(resource)) == 0, timeout=5, what="expiry")


def test_many_threads_racing_close(cluster, resource):
    m = make_manager(cluster.urls, retry_count=0)
    errors = []
    ok = [0]

    def hammer(i: int) -> None:
        for j in range(200):
            try:
                with m.try_lock(f"{resource}:{i}:{j}", ttl_ms=2_000):
                    ok[0] += 1
            except redlock.HandleClosed:
                return
            except BaseException as e:
                errors.append(e)
                return

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: ok[0] >= 8, timeout=10, what="some locks")
    m.close()
    for t in threads:
        t.join(20)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert m._handle.freed
