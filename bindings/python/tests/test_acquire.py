"""Redlock.acquire (redlock_acquire with redlock_acquire_opts) and the lock/try_lock shims over
it: each option against real nodes, the argument checks, the manager's cache of options
objects, and that no lease leaks when an exception arrives after the grant.

Every test uses its own resources; the tests that count with the metrics use managers of
their own. Nothing here depends on how fast a thread gets scheduled: a waiter is known to be
waiting from its manager's retry counter, and times are only checked as lower bounds or with
wide margins."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Dict, List

import pytest

import redlock
from redlock import _acquire, _core

from redis_nodes import key_of, wait_until


def counters(m: redlock.Redlock) -> Dict[str, float]:
    """The manager's samples, ``{name{labels}: value}``."""
    out = {}
    for line in m.metrics().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def attempts(m: redlock.Redlock) -> int:
    return int(counters(m)["redlock_acquire_attempts_total"])


def retries(m: redlock.Redlock) -> int:
    return int(counters(m)["redlock_acquire_retries_total"])


def nothing_reached_the_library(m: redlock.Redlock) -> None:
    """No acquisition was counted (not even a refused one: the library counts its own input
    errors as ``invalid_input``) and no node was sent anything."""
    c = counters(m)
    assert sum(v for k, v in c.items() if k.startswith("redlock_acquire_total{")) == 0, c
    assert sum(v for k, v in c.items() if k.startswith("redlock_node_requests_total{")) == 0, c
    assert c["redlock_acquire_attempts_total"] == 0


def nothing_sent(m: redlock.Redlock) -> None:
    """No node was sent anything and no attempt was made: what an acquisition that the
    library refused for its input leaves (it counts each refusal as ``invalid_input``)."""
    c = counters(m)
    assert sum(v for k, v in c.items() if k.startswith("redlock_node_requests_total{")) == 0, c
    assert c["redlock_acquire_attempts_total"] == 0
    refused = sum(v for k, v in c.items() if k.startswith("redlock_acquire_total{"))
    assert refused == c['redlock_acquire_total{result="invalid_input"}'], c


def fence_key(resource: str) -> bytes:
    return b"redlock-fence:" + resource.encode()


def long_holder(cluster, new_manager, resource: str) -> redlock.Lease:
    """A lease on ``resource`` from a manager of its own, held far longer than any test runs
    (so that it cannot expire while a test waits for something on a slow machine)."""
    return new_manager(cluster.urls, max_ttl_ms=600_000).acquire(resource, 600_000)


def _run(target, *args):
    """Runs ``target(*args)`` on a thread; returns the thread and a dict that gets its
    ``result`` or ``error``."""
    box: Dict[str, object] = {}

    def body():
        try:
            box["result"] = target(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            box["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, box


# ---- the options, one by one ----


def test_acquire_with_defaults_returns_a_plain_lease(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    lk = m.acquire(resource, 5_000)
    assert isinstance(lk, redlock.Lease)
    assert lk.fencing_token is None and lk.renewing is False and lk.lost is False
    assert lk.ttl_ms == 5_000 and 4_000 < lk.validity_ms <= 5_000
    assert lk.resource == resource.encode() and len(lk.token) == 40
    assert cluster.holding(key_of(resource), lk.value) >= 2
    lk.unlock()
    cluster.released(key_of(resource))
    lk.close()
    with m.acquire(resource.encode(), ttl_ms=2_000) as lk2:  # bytes, keyword TTL
        assert lk2.valid
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 2


def test_wait_ms_zero_makes_one_attempt_none_follows_the_retry_policy(
    cluster, new_manager, resource
):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_count=3, retry_delay_ms=20)

    with pytest.raises(redlock.NotAcquired):
        m.acquire(resource, 1_000, wait_ms=0)
    assert (attempts(m), retries(m)) == (1, 0)
    with pytest.raises(redlock.NotAcquired):
        m.try_lock(resource, 1_000)  # the same options
    assert (attempts(m), retries(m)) == (2, 0)
    with pytest.raises(redlock.NotAcquired):
        m.lock(resource, 1_000, wait_ms=0)  # lock(wait_ms=0): one attempt too
    assert (attempts(m), retries(m)) == (3, 0)

    with pytest.raises(redlock.NotAcquired):
        m.acquire(resource, 1_000)  # wait_ms=None: 1 + retry_count attempts
    assert (attempts(m), retries(m)) == (7, 3)
    with pytest.raises(redlock.NotAcquired):
        m.lock(resource, 1_000)
    assert (attempts(m), retries(m)) == (11, 6)

    # wait_ms > 0: retries until then, whatever the retry count; never returns before.
    t0 = time.monotonic()
    with pytest.raises(redlock.NotAcquired) as ei:
        m.acquire(resource, 1_000, wait_ms=1_500)
    assert time.monotonic() - t0 >= 1.45
    assert retries(m) - 6 >= 1 and "held by another owner" in ei.value.message
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 0
    assert cluster.holding(key_of(resource), holder.value) >= 2  # untouched
    holder.unlock()
    holder.close()


@pytest.mark.parametrize("how", ["acquire", "acquire-fenced", "lock"])
def test_waiting_acquire_gets_the_lock_once_the_holder_releases(
    cluster, new_manager, resource, how
):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_count=0, retry_delay_ms=20)
    if how == "lock":
        t, box = _run(lambda: m.lock(resource, 5_000, wait_ms=60_000))
    else:
        t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=60_000, fenced=how.endswith("d")))
    # It is waiting once one attempt was refused and it has paused (retry_count=0 does not
    # apply to a wait); only then is the lock released.
    wait_until(lambda: retries(m) >= 1 or not t.is_alive(), timeout=30, what="a retry")
    assert t.is_alive(), box
    holder.unlock()  # would raise NotHeld had the waiter taken the lock meanwhile
    t.join(60)
    assert not t.is_alive()
    assert "error" not in box, box
    lk = box["result"]
    assert isinstance(lk, redlock.Lease) and lk.valid
    assert cluster.holding(key_of(resource), lk.value) >= 2
    assert (lk.fencing_token is not None) == (how == "acquire-fenced")
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 1
    lk.unlock()
    lk.close()
    holder.close()


def test_fenced_tokens_increase_over_every_entry_point(cluster, new_manager, resource):
    m1 = new_manager(cluster.urls)
    m2 = new_manager(cluster.urls)
    takes = [
        lambda: m1.acquire(resource, 2_000, fenced=True),
        lambda: m2.acquire(resource, 2_000, fenced=True, wait_ms=0),
        lambda: m1.acquire(resource, 2_000, fenced=True, wait_ms=5_000),
        lambda: m2.acquire(resource, 2_000, fenced=True, auto_renew=True),
        lambda: m1.lock(resource, 2_000, fenced=True),
        lambda: m2.try_lock(resource, 2_000, fenced=True),
        lambda: m1.acquire(resource, 2_000, fenced=True),
    ]
    tokens: List[int] = []
    for take in takes:
        lk = take()
        assert type(lk.fencing_token) is int and lk.fencing_token > 0
        tokens.append(lk.fencing_token)
        lk.unlock()
        lk.close()
    assert tokens == sorted(set(tokens)), tokens  # strictly increasing
    counter = [s.get(fence_key(resource)) for s in cluster.servers]
    assert sum(1 for v in counter if v == str(tokens[-1]).encode()) >= 2, counter
    # A plain grant neither gets a token nor advances the counter.
    with m1.acquire(resource, 2_000) as plain:
        assert plain.fencing_token is None
    assert [s.get(fence_key(resource)) for s in cluster.servers] == counter
    with m2.acquire(resource, 2_000, fenced=True) as lk:
        assert lk.fencing_token > tokens[-1]


def test_auto_renew_keeps_a_one_second_lock_past_three_seconds_and_stops_on_unlock(
    cluster, new_manager, resource
):
    key = key_of(resource)
    m = new_manager(cluster.urls)
    t0 = time.monotonic()
    lk = m.acquire(resource, 1_000, auto_renew=True)
    assert lk.renewing is True and lk.lost is False and lk.lost_reason is None
    assert lk.wait_lost(0) is False  # renewing, not lost
    time.sleep(max(0.0, 3.3 - (time.monotonic() - t0)))
    # Three times its TTL later the lock is still held, by this lease, on a quorum.
    assert lk.renewing and not lk.lost
    assert lk.valid and 0 < lk.validity_ms <= 1_000
    assert cluster.holding(key, lk.value) >= 2
    assert counters(m)["redlock_renewals_total"] >= 3
    other = new_manager(cluster.urls, retry_count=0)
    with pytest.raises(redlock.NotAcquired):
        other.try_lock(resource, ttl_ms=1_000)

    lk.unlock()  # stops renewal first
    assert lk.renewing is False and lk.lost is False and lk.validity_ms == 0
    assert lk.wait_lost(10_000) is False  # at once: renewal is off
    cluster.released(key)
    renewals = counters(m)["redlock_renewals_total"]
    time.sleep(1.5)  # longer than the TTL: a renewal would have recreated or extended it
    assert cluster.present(key) == 0
    assert counters(m)["redlock_renewals_total"] == renewals
    assert not lk.lost
    lk.close()


@pytest.mark.parametrize("how", ["acquire(auto_renew=True)", "lock() + auto_renew()"])
def test_auto_renew_at_acquisition_behaves_as_auto_renew_after_it(cluster, mgr, resource, how):
    """The same observable lease either way: renewing, then lost at the bound (renewal ends,
    validity 0, the reason), wait_lost, and a failing unlock."""
    # A 1.5 s TTL, renewed every third of it: a renewal late by most of a second (a busy
    # machine) does not lose the lease before the bound, with another reason.
    if how.startswith("acquire"):
        lk = mgr.acquire(resource, 1_500, auto_renew=True, max_extensions=1)
    else:
        lk = mgr.lock(resource, 1_500)
        lk.auto_renew(max_extensions=1)
    assert lk.renewing is True and lk.lost is False
    assert lk.wait_lost(10_000) is True
    assert lk.lost is True and lk.renewing is False and lk.validity_ms == 0
    assert lk.lost_reason == "maximum of 1 extensions reached"
    assert lk.ttl_ms == 1_500
    with pytest.raises(redlock.NotHeld):
        lk.unlock()
    with pytest.raises(redlock.NotHeld):
        lk.auto_renew()
    lk.close()


def test_auto_renew_max_hold_counts_from_the_acquisition(cluster, mgr, resource):
    # A 1 s TTL renewed every third of it: a renewal late by most of a second (a busy machine)
    # does not lose the lease before the bound, with another reason.
    t0 = time.monotonic()
    lk = mgr.acquire(resource, 1_000, auto_renew=True, max_hold_ms=2_500)
    assert lk.wait_lost(10_000)
    # Renewed past its TTL, lost at the bound: counted from the acquisition, after t0.
    assert time.monotonic() - t0 >= 2.5
    assert lk.lost_reason.startswith("maximum hold time reached after"), lk.lost_reason
    lk.close()


def test_on_lost_can_be_added_to_a_lease_that_renews_from_its_acquisition(
    cluster, mgr, resource
):
    # 1 s: still held (renewed) when auto_renew() replaces the settings, however late a busy
    # machine runs the renewal thread or this one.
    lk = mgr.acquire(resource, 1_000, auto_renew=True)
    fired = threading.Event()
    seen = []

    def on_lost(lease):
        seen.append((lease, threading.current_thread().name, lease.lost))
        fired.set()

    lk.auto_renew(max_extensions=1, on_lost=on_lost)  # replaces the settings
    assert fired.wait(10), "on_lost was not called"
    assert seen == [(lk, "redlock-lost-watcher", True)]
    lk.close()


def test_with_block_stops_renewal_and_unlocks(cluster, mgr, resource):
    with mgr.acquire(resource, 1_000, auto_renew=True, fenced=True, wait_ms=0) as lk:
        assert lk.renewing and lk.fencing_token is not None
    assert lk.closed
    cluster.released(key_of(resource))


def test_dropping_a_renewing_lease_stops_its_renewal(cluster, mgr, resource):
    key = key_of(resource)
    lk = mgr.acquire(resource, 500, auto_renew=True)
    handle = weakref.ref(lk._handle)
    del lk
    gc.collect()
    assert handle() is None  # freed with the lease (not unlocked)
    # Nothing renews it any more: the key expires after its TTL.
    wait_until(lambda: cluster.present(key) == 0, timeout=10, what="the key to expire")


# ---- argument checks: before any C call ----

BAD_ACQUIRE_ARGS = [
    ({"wait_ms": -1}, redlock.InvalidArgument),
    ({"wait_ms": 2**32}, redlock.InvalidArgument),
    ({"wait_ms": 0.5}, TypeError),
    ({"wait_ms": "100"}, TypeError),
    ({"wait_ms": True}, TypeError),
    ({"fenced": 1}, TypeError),
    ({"fenced": None}, TypeError),
    ({"fenced": "yes"}, TypeError),
    ({"auto_renew": 1}, TypeError),
    ({"auto_renew": None}, TypeError),
    ({"auto_renew": "true"}, TypeError),
    ({"auto_renew": True, "max_hold_ms": -1}, redlock.InvalidArgument),
    ({"auto_renew": True, "max_hold_ms": 2**32}, redlock.InvalidArgument),
    ({"auto_renew": True, "max_hold_ms": 1.5}, TypeError),
    ({"auto_renew": True, "max_hold_ms": False}, TypeError),
    ({"auto_renew": True, "max_extensions": -3}, redlock.InvalidArgument),
    ({"auto_renew": True, "max_extensions": 2**40}, redlock.InvalidArgument),
    ({"auto_renew": True, "max_extensions": "2"}, TypeError),
    ({"max_hold_ms": 1_000}, redlock.InvalidArgument),  # a bound without auto_renew
    ({"max_extensions": 2}, redlock.InvalidArgument),
    ({"max_hold_ms": 0.0}, TypeError),  # checked even when renewal is off
    ({"max_extensions": -1}, redlock.InvalidArgument),
    ({"ttl_ms": 0}, redlock.InvalidArgument),
    ({"ttl_ms": -5}, redlock.InvalidArgument),
    ({"ttl_ms": 2**32}, redlock.InvalidArgument),
    ({"ttl_ms": 1_000.0}, TypeError),
    ({"ttl_ms": None}, TypeError),
    ({"resource": 42}, TypeError),
    ({"resource": None}, TypeError),
    ({"resource": "\ud800"}, redlock.InvalidArgument),
]


@pytest.mark.parametrize(
    "kwargs, exc", BAD_ACQUIRE_ARGS, ids=[repr(k) for k, _ in BAD_ACQUIRE_ARGS]
)
def test_bad_arguments_raise_before_anything_is_sent(cluster, new_manager, resource, kwargs, exc):
    m = new_manager(cluster.urls)
    args = {"resource": resource, "ttl_ms": 5_000}
    args.update(kwargs)
    with pytest.raises(exc) as ei:
        m.acquire(args.pop("resource"), args.pop("ttl_ms"), **args)
    if exc is redlock.InvalidArgument:
        assert isinstance(ei.value, ValueError) and ei.value.status == 10
    nothing_reached_the_library(m)
    assert m._opts == {}  # not even an options object was made
    assert cluster.present(key_of(resource)) == 0
    # The manager is fine afterwards.
    with m.acquire(resource, 5_000, wait_ms=0) as lk:
        assert lk.valid


def test_arguments_are_keyword_only(mgr, resource):
    with pytest.raises(TypeError):
        mgr.acquire(resource, 1_000, 0)  # wait_ms must be named
    with pytest.raises(TypeError):
        mgr.acquire(resource, 1_000, 0, True)  # so must every other option
    # on_lost is an acquire option (issue #39), only with auto-renewal.
    with pytest.raises(redlock.InvalidArgument, match="on_lost"):
        mgr.acquire(resource, 1_000, wait_ms=0, on_lost=print)


def test_bounds_of_zero_or_none_mean_the_defaults(cluster, mgr, resource):
    for i, kwargs in enumerate(
        ({"max_hold_ms": None, "max_extensions": None}, {"max_hold_ms": 0}, {})
    ):
        with mgr.acquire(f"{resource}:{i}", 1_000, **kwargs) as lk:
            assert not lk.renewing
        with mgr.acquire(f"{resource}:r{i}", 1_000, auto_renew=True, **kwargs) as lk:
            assert lk.renewing
    # The largest bounds are accepted.
    with mgr.acquire(resource, 1_000, auto_renew=True, max_hold_ms=2**32 - 1,
                     max_extensions=2**32 - 1, wait_ms=2**32 - 1) as lk:  # fmt: skip
        assert lk.renewing


def test_library_side_refusals_still_raise_invalid_argument(cluster, new_manager, resource):
    m = new_manager(cluster.urls, max_ttl_ms=10_000)
    for res, ttl in (("", 1_000), (b"x" * 1025, 1_000), (resource, 1), (resource, 10_001)):
        with pytest.raises(redlock.InvalidArgument):
            m.acquire(res, ttl, auto_renew=True, fenced=True)
    c = counters(m)
    assert c['redlock_acquire_total{result="invalid_input"}'] == 4
    assert c["redlock_acquire_attempts_total"] == 0  # refused before any attempt
    assert cluster.present(key_of(resource)) == 0


def test_closed_manager(cluster, resource):
    m = redlock.Redlock(cluster.urls)
    m.close()
    with pytest.raises(redlock.HandleClosed, match="manager is closed"):
        m.acquire(resource, 1_000)
    with pytest.raises(TypeError):  # the argument checks come first
        m.acquire(resource, 1_000, fenced="no")


# ---- the cache of options objects ----
#
# The cache serves the direct calls: one attempt (``wait_ms=0``) anywhere, and every call on a
# thread other than the main one. A call that may wait on the main thread runs on a helper
# thread with a cancel handle of its own, hence an options object of its own (test_cancel.py).


def _on_a_thread(body) -> None:
    """Runs ``body()`` on a thread other than the main one; re-raises what it raised."""
    t, box = _run(body)
    t.join(120)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]


def test_options_objects_are_made_once_per_combination(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    for _ in range(5):
        m.try_lock(resource, 2_000).unlock()
    assert list(m._opts) == [(0, False, None, True, None, False, None)]

    def body() -> None:
        for _ in range(3):
            m.acquire(resource, 2_000, wait_ms=0).unlock()  # try_lock's options
            m.acquire(resource, 2_000, wait_ms=0, notify=False).unlock()  # the same
            m.lock(resource, 2_000).unlock()
            m.acquire(resource, 2_000).unlock()  # lock's options
            m.acquire(resource, 2_000, notify=False).unlock()  # the same: no wait_ms
            m.lock(resource, 2_000, fenced=True).unlock()
            m.acquire(resource, 2_000, auto_renew=True, max_extensions=9).unlock()
            m.lock(resource, 2_000, wait_ms=1_000).unlock()
            m.lock(resource, 2_000, wait_ms=1_000, notify=False).unlock()

    _on_a_thread(body)
    assert set(m._opts) == {
        (0, False, None, True, None, False, None),
        (None, False, None, True, None, False, None),
        (None, True, None, True, None, False, None),
        (None, False, (0, 9), True, None, False, None),
        (1_000, False, None, True, None, False, None),
        (1_000, False, None, False, None, False, None),
    }
    # Calls that may wait, made on the main thread, leave the cache alone.
    m.lock(resource, 2_000, wait_ms=2_000).unlock()
    m.lock(resource, 2_000, fenced=True).unlock()
    assert len(m._opts) == 6
    # Options with an owner (often one per request) are never cached.
    _on_a_thread(lambda: m.try_lock(resource, 2_000, owner="o").unlock())
    assert len(m._opts) == 6


def test_the_cache_is_bounded_and_acquisitions_beyond_it_still_work(
    cluster, new_manager, resource
):
    m = new_manager(cluster.urls)
    n = _acquire._OPTS_CACHE_MAX + 10

    def body() -> None:
        for wait in range(1, n + 1):
            lk = m.acquire(resource, 2_000, wait_ms=wait)
            lk.unlock()
            lk.close()
        assert len(m._opts) == _acquire._OPTS_CACHE_MAX
        assert counters(m)['redlock_acquire_total{result="granted"}'] == n
        # An uncached combination with a fencing token and renewal, beyond the bound.
        with m.acquire(resource, 2_000, wait_ms=n + 1, fenced=True, auto_renew=True) as lk:
            assert lk.renewing and lk.fencing_token is not None
        assert len(m._opts) == _acquire._OPTS_CACHE_MAX

    _on_a_thread(body)


def test_close_frees_the_cached_options(cluster, resource):
    m = redlock.Redlock(cluster.urls)
    m.try_lock(resource, 1_000).unlock()
    m.try_lock(resource, 1_000, fenced=True).unlock()
    _on_a_thread(lambda: m.lock(resource, 1_000).unlock())
    assert len(m._opts) == 3
    m.close()
    assert m._handle.freed and m._opts == {}


def test_close_while_an_acquisition_waits_frees_its_options_only_after_it(
    cluster, new_manager, resource
):
    holder = long_holder(cluster, new_manager, resource)
    m = redlock.Redlock(cluster.urls, retry_delay_ms=20)
    t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=60_000, fenced=True))
    wait_until(lambda: retries(m) >= 1 or not t.is_alive(), timeout=30, what="a retry")
    assert t.is_alive(), box
    m.close()  # the waiting call still reads its options and the manager
    assert m.closed and not m._handle.freed and len(m._opts) == 1
    with pytest.raises(redlock.HandleClosed):
        m.acquire(resource, 1_000)
    holder.unlock()
    t.join(60)
    assert "error" not in box, box
    lk = box["result"]
    assert lk.valid and lk.fencing_token is not None
    assert m._handle.freed and m._opts == {}  # freed when that call returned
    lk.unlock()
    lk.close()
    holder.close()


def test_many_threads_share_the_options(cluster, new_manager, resource):
    m = new_manager(cluster.urls, retry_delay_ms=5)
    errors: List[BaseException] = []
    kinds = [
        {},
        {"wait_ms": 0},
        {"fenced": True},
        {"wait_ms": 2_000, "fenced": True},
        {"auto_renew": True},
    ]

    def worker(i: int) -> None:
        try:
            for j in range(20):
                kw = kinds[(i + j) % len(kinds)]
                with m.acquire(f"{resource}:{i}", 5_000, **kw) as lk:
                    assert lk.valid
                    assert (lk.fencing_token is not None) == kw.get("fenced", False)
                    assert lk.renewing == kw.get("auto_renew", False)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert len(m._opts) == len(kinds)
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 6 * 20


# ---- no lease leaks between the C call and the return ----


class _RaiseAfterAcquire:
    """Stands in for the loaded library: ``redlock_acquire`` runs, then raises as if a
    Ctrl-C that arrived during the call were delivered as it returns."""

    def __init__(self, real):
        self._real = real
        self.granted = 0

    def __getattr__(self, name):
        return getattr(self._real, name)

    def redlock_acquire(self, *args):
        st = self._real.redlock_acquire(*args)
        if st == 0:
            self.granted += 1
        raise KeyboardInterrupt


def test_an_exception_as_the_call_returns_unlocks_and_frees_the_granted_lease(
    cluster, mgr, resource, monkeypatch
):
    key = key_of(resource)
    fake = _RaiseAfterAcquire(_core._c)
    monkeypatch.setattr(_core, "_c", fake)
    try:
        mgr.acquire(resource, 60_000, auto_renew=True)
    except KeyboardInterrupt:
        pass
    else:
        pytest.fail("KeyboardInterrupt expected")
    monkeypatch.undo()
    assert fake.granted == 1  # it was granted
    # ... and unlocked before the exception was raised (issue #39), not left to its TTL (nor
    # renewed: had it leaked, it would be renewed for an hour).
    cluster.released(key)
    gc.collect()
    # The manager's handle was returned: it frees on close.
    mgr.close()
    assert mgr._handle.freed


def test_an_exception_while_the_lease_is_built_frees_it(cluster, mgr, resource, monkeypatch):
    seen = []

    def failing_lease(handle, *args):
        seen.append(weakref.ref(handle))
        raise RuntimeError("boom")

    monkeypatch.setattr(_acquire, "Lease", failing_lease)
    with pytest.raises(RuntimeError, match="boom"):
        mgr.acquire(resource, 500, auto_renew=True)
    monkeypatch.undo()
    gc.collect()
    assert len(seen) == 1 and seen[0]() is None  # the handle was dropped, hence freed
    wait_until(lambda: cluster.present(key_of(resource)) == 0, timeout=10, what="expiry")
