"""Waiting by notification, cancellation (redlock.Cancel, redlock.Cancelled) and Ctrl-C.

Against real redis-server nodes (the module's three, each test on resources of its own; the
SIGINT test in a child Python process of its own). A waiter is known to be waiting from its
manager's attempt counter and from the nodes (``PUBSUB NUMSUB`` on the lock key: a waiter
subscribes to the key's release announcements), never from a sleep alone. Times are measured
and printed; they are only checked against bounds far above what they should be (a few
hundred ms at least), as the machines that run this have two busy cores."""

from __future__ import annotations

import _thread
import gc
import os
import pickle
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import List

import pytest

import redlock
from redlock import _acquire, _core, _errors, _handle, _threads

from conftest import PACKAGE_ROOT, TESTS_DIR
from redis_nodes import key_of, wait_until
from test_acquire import _run, attempts, counters, long_holder, retries


def requests(m: redlock.Redlock) -> int:
    """Requests the manager sent to any node."""
    return int(
        sum(v for k, v in counters(m).items() if k.startswith("redlock_node_requests_total{"))
    )


def cancelled(m: redlock.Redlock) -> int:
    return int(counters(m)['redlock_acquire_total{result="cancelled"}'])


def subscribers(cluster, key: bytes) -> int:
    """How many subscriptions to ``key``'s release channel the nodes have, all together."""
    total = 0
    for s in cluster.servers:
        reply = s.command("PUBSUB", "NUMSUB", key)
        total += int(reply[1])
    return total


def wait_until_waiting(cluster, m: redlock.Redlock, resource: str, t=None) -> None:
    """Until ``m`` waits for ``resource`` to be released: refused twice (the second attempt
    follows the subscription), and subscribed on a quorum of the nodes."""
    wait_until(
        lambda: (attempts(m) >= 2 and subscribers(cluster, key_of(resource)) >= 2)
        or (t is not None and not t.is_alive()),
        timeout=30,
        what="the waiter to wait",
    )
    if t is not None:
        assert t.is_alive()


def no_key_but_the_holders(cluster, resource: str, holder: redlock.Lease) -> None:
    """Every node that has the resource's key has the holder's token (on a quorum at least);
    after the holder's unlock, no node has the key."""
    key = key_of(resource)
    assert cluster.present(key) == cluster.holding(key, holder.value) >= 2
    holder.unlock()
    holder.close()
    cluster.released(key)


# ---- the status and the exception ----


def test_cancelled_status_and_exception():
    assert redlock.Status.CANCELLED == 5
    assert redlock.STATUS_EXCEPTIONS[5] is redlock.Cancelled
    e = _errors.error_for_status(5, "cancelled")
    assert type(e) is redlock.Cancelled and e.status == 5 and str(e) == "cancelled"
    assert issubclass(redlock.Cancelled, redlock.RedlockError)
    assert not issubclass(redlock.Cancelled, (redlock.NotAcquired, redlock.Unavailable))
    assert redlock.Cancelled("x").status == 5
    assert type(pickle.loads(pickle.dumps(e))) is redlock.Cancelled
    assert redlock.Cancelled.__module__ == "redlock" and redlock.Cancel.__module__ == "redlock"
    assert "Cancel" in redlock.__all__ and "Cancelled" in redlock.__all__


def test_cancel_handle_basics():
    c = redlock.Cancel()
    assert c.fired is False and not c.closed and repr(c) == "<redlock.Cancel not fired>"
    c.fire()
    c.fire()  # idempotent
    assert c.fired is True and repr(c) == "<redlock.Cancel fired>"
    with pytest.raises(TypeError):
        pickle.dumps(c)
    c.close()
    c.close()  # idempotent
    assert c.closed and c._handle.freed and repr(c) == "<redlock.Cancel closed>"
    with pytest.raises(redlock.HandleClosed):
        c.fire()
    with pytest.raises(redlock.HandleClosed):
        c.fired  # noqa: B018
    with redlock.Cancel() as c2:
        assert not c2.fired
    assert c2.closed
    # Fired from many threads at once.
    c3 = redlock.Cancel()
    threads = [threading.Thread(target=c3.fire) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert c3.fired
    del c3
    gc.collect()  # freed by its finalizer


@pytest.mark.parametrize("where", ["main", "other"])
@pytest.mark.parametrize("how", ["acquire", "lock", "try_lock", "acquire-wait"])
def test_a_fired_handle_raises_cancelled_without_contacting_any_node(
    cluster, new_manager, resource, how, where
):
    m = new_manager(cluster.urls)
    with redlock.Cancel() as c:
        c.fire()
        calls = {
            "acquire": lambda: m.acquire(resource, 5_000, cancel=c, fenced=True),
            "lock": lambda: m.lock(resource, 5_000, cancel=c),
            "try_lock": lambda: m.try_lock(resource, 5_000, cancel=c),
            "acquire-wait": lambda: m.acquire(resource, 5_000, wait_ms=10_000, cancel=c),
        }
        if where == "main":
            with pytest.raises(redlock.Cancelled) as ei:
                calls[how]()
            err = ei.value
        else:
            t, box = _run(calls[how])
            t.join(30)
            err = box.get("error")
            assert isinstance(err, redlock.Cancelled), box
        assert err.status == redlock.Status.CANCELLED and err.message == "cancelled"
    assert requests(m) == 0 and attempts(m) == 0  # no node was contacted
    assert cancelled(m) == 1
    assert cluster.present(key_of(resource)) == 0
    # The manager is fine afterwards, and its options cache was not touched by the handle.
    with m.try_lock(resource, 5_000) as lk:
        assert lk.valid
    assert all(k[0] == 0 for k in m._opts)


@pytest.mark.parametrize("kwargs", [{"notify": 1}, {"notify": None}, {"cancel": object()},
                                    {"cancel": True}])  # fmt: skip
def test_bad_notify_or_cancel_raise_type_error_before_anything_is_sent(
    cluster, new_manager, resource, kwargs
):
    m = new_manager(cluster.urls)
    with pytest.raises(TypeError):
        m.acquire(resource, 5_000, wait_ms=100, **kwargs)
    if "cancel" in kwargs:
        with pytest.raises(TypeError):
            m.try_lock(resource, 5_000, **kwargs)
    with pytest.raises(TypeError):
        m.lock(resource, 5_000, wait_ms=100, **kwargs)
    assert requests(m) == 0 and attempts(m) == 0 and m._opts == {}


def test_a_closed_handle_cannot_be_passed(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    c = redlock.Cancel()
    c.close()
    with pytest.raises(redlock.HandleClosed):
        m.acquire(resource, 5_000, wait_ms=1_000, cancel=c)
    assert requests(m) == 0


# ---- cancelling a wait ----


@pytest.mark.parametrize("where", ["main", "other"])
def test_cancel_from_another_thread_during_a_wait(cluster, new_manager, resource, where):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    c = redlock.Cancel()
    fired_at: List[float] = []

    def fire_when_waiting() -> None:
        wait_until_waiting(cluster, m, resource)
        time.sleep(0.2)
        fired_at.append(time.monotonic())
        c.fire()

    if where == "main":
        # The test's own (main) thread waits: the call runs on a helper thread.
        firer = threading.Thread(target=fire_when_waiting, daemon=True)
        firer.start()
        with pytest.raises(redlock.Cancelled):
            m.acquire(resource, 5_000, wait_ms=20_000, cancel=c)
        returned_at = time.monotonic()
        firer.join(30)
    else:
        t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=20_000, cancel=c))
        fire_when_waiting()
        t.join(30)
        returned_at = time.monotonic()  # an upper bound of the return
        assert isinstance(box.get("error"), redlock.Cancelled), box
    latency = returned_at - fired_at[0]
    print(f"\ncancel latency (waiting on the {where} thread): {latency * 1000:.1f} ms after fire()")
    # At once: without the cancel the wait would last 20 s. A bound of a quarter of that, not
    # of milliseconds, which a busy machine may take to schedule the thread.
    assert latency < 5.0
    assert c.fired and cancelled(m) == 1
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 0
    no_key_but_the_holders(cluster, resource, holder)
    c.close()


def test_closing_the_handle_while_an_acquisition_carries_it(cluster, new_manager, resource):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    c = redlock.Cancel()
    t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=30_000, cancel=c))
    wait_until_waiting(cluster, m, resource, t)
    c.close()  # safe: freed when the call lets go of it; it can no longer be fired
    assert c.closed
    with pytest.raises(redlock.HandleClosed):
        c.fire()
    holder.unlock()
    holder.close()
    t.join(30)
    lk = box.get("result")
    assert isinstance(lk, redlock.Lease), box
    assert c._handle.freed
    lk.unlock()
    lk.close()


# ---- waiting by notification ----


@pytest.mark.parametrize("where", ["main", "other"])
def test_a_waiter_is_woken_by_the_release(cluster, new_manager, resource, where):
    # A retry delay of 30 s: a waiter that polled would pause up to that long (a tenth of the
    # time under 3 s); one woken by the release gets the lock within a round trip or two, or
    # a second or two on a busy machine. Three hand-overs in a row.
    holder_mgr = new_manager(cluster.urls, max_ttl_ms=60_000)
    m = new_manager(cluster.urls, retry_delay_ms=30_000)
    times: List[float] = []
    for i in range(3):
        holder = holder_mgr.acquire(resource, 30_000)
        released_at: List[float] = []
        before = attempts(m)

        def release_when_waiting() -> None:
            wait_until(
                lambda: attempts(m) >= before + 2 and subscribers(cluster, key_of(resource)) >= 2,
                timeout=30,
                what="the waiter to wait",
            )
            time.sleep(0.2)
            released_at.append(time.monotonic())
            holder.unlock()

        if where == "main":
            releaser = threading.Thread(target=release_when_waiting, daemon=True)
            releaser.start()
            lk = m.acquire(resource, 5_000, wait_ms=20_000)
            granted_at = time.monotonic()
            releaser.join(30)
        else:
            t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=20_000))
            release_when_waiting()
            t.join(30)
            granted_at = time.monotonic()
            lk = box.get("result")
            assert isinstance(lk, redlock.Lease), box
        times.append(granted_at - released_at[0])
        assert lk.valid and cluster.holding(key_of(resource), lk.value) >= 2
        lk.unlock()
        lk.close()
        holder.close()
    print(f"\nhand-over after the release (waiting on the {where} thread): " + ", ".join(
        f"{t * 1000:.1f} ms" for t in times))  # fmt: skip
    assert max(times) < 3.0, times
    assert counters(m)['redlock_acquire_total{result="granted"}'] == 3


@pytest.mark.parametrize("how", ["acquire", "lock"])
def test_notify_false_polls(cluster, new_manager, resource, how):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=100)
    if how == "acquire":
        t, box = _run(lambda: m.acquire(resource, 5_000, wait_ms=30_000, notify=False))
    else:
        t, box = _run(lambda: m.lock(resource, 5_000, wait_ms=30_000, notify=False))
    # Polling: retry after retry while the lock is held (a notified waiter would sleep until
    # the release, or the holder's TTL), and no subscription.
    wait_until(lambda: retries(m) >= 4 or not t.is_alive(), timeout=30, what="retries")
    assert t.is_alive(), box
    assert subscribers(cluster, key_of(resource)) == 0
    holder.unlock()
    holder.close()
    t.join(30)
    lk = box.get("result")
    assert isinstance(lk, redlock.Lease), box
    assert cluster.holding(key_of(resource), lk.value) >= 2
    lk.unlock()
    lk.close()
    assert (30_000, False, None, False, None, False, None) in m._opts  # its own options object


def test_notify_false_on_the_main_thread_still_waits_and_is_cancellable(
    cluster, new_manager, resource
):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=100)
    c = redlock.Cancel()

    def fire() -> None:
        wait_until(lambda: retries(m) >= 3, timeout=30, what="retries")
        c.fire()

    firer = threading.Thread(target=fire, daemon=True)
    firer.start()
    with pytest.raises(redlock.Cancelled):
        m.acquire(resource, 5_000, wait_ms=30_000, notify=False, cancel=c)
    firer.join(30)
    no_key_but_the_holders(cluster, resource, holder)


# ---- Ctrl-C ----


@pytest.mark.parametrize("own_cancel", [False, True], ids=["no-cancel", "with-cancel"])
def test_keyboard_interrupt_during_a_wait_on_the_main_thread(
    cluster, new_manager, resource, own_cancel
):
    """``_thread.interrupt_main`` delivers a SIGINT's KeyboardInterrupt to this (main)
    thread, as Ctrl-C would."""
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    c = redlock.Cancel() if own_cancel else None
    sent_at: List[float] = []

    def interrupt_when_waiting() -> None:
        wait_until_waiting(cluster, m, resource)
        time.sleep(0.2)
        sent_at.append(time.monotonic())
        _thread.interrupt_main()

    t = threading.Thread(target=interrupt_when_waiting, daemon=True)
    t.start()
    with pytest.raises(KeyboardInterrupt):
        m.acquire(resource, 5_000, wait_ms=20_000, cancel=c)
    latency = time.monotonic() - sent_at[0]
    t.join(30)
    print(f"\nKeyboardInterrupt re-raised {latency * 1000:.1f} ms after the interrupt")
    assert latency < 5.0  # at once: the wait would last 20 s
    assert cancelled(m) == 1  # the library's acquisition was cancelled, not left running
    if c is not None:
        assert c.fired  # the interrupt fired the caller's handle
        c.close()
    no_key_but_the_holders(cluster, resource, holder)
    m.close()
    assert m._handle.freed  # the helper let go of the manager


class _InterruptAtCancelRelease:
    """Makes the first release of a cancel handle's hold on the main thread raise
    ``KeyboardInterrupt`` once (after releasing it): a Ctrl-C delivered right after the
    library granted the lock, as the acquisition lets go of its cancel handle, after the
    helper thread has returned the lease. Patches ``_Handle.release`` for the test only."""

    def __init__(self, monkeypatch) -> None:
        self.raised = 0
        real = _handle._Handle.release

        def release(handle) -> None:
            real(handle)
            if (
                not self.raised
                and handle._what == "cancel handle"
                and threading.current_thread() is threading.main_thread()
            ):
                self.raised += 1
                raise KeyboardInterrupt

        monkeypatch.setattr(_handle._Handle, "release", release)


@pytest.mark.parametrize("how", ["lock", "lock with cancel", "acquire_many", "semaphore"])
def test_ctrl_c_right_after_a_grant_leaves_no_key(cluster, new_manager, resource, how,
                                                   monkeypatch):
    # A free resource, taken on the main thread by a call that may wait (the retry policy),
    # so on a helper thread; the KeyboardInterrupt comes after that thread returned the lease.
    m = new_manager(cluster.urls)
    keys = {
        "lock": [key_of(resource)],
        "lock with cancel": [key_of(resource)],
        "acquire_many": [key_of(resource), key_of(resource + ":2")],
        "semaphore": [b"redlock-sem:" + key_of(resource)],
    }[how]
    interrupt = _InterruptAtCancelRelease(monkeypatch)
    with redlock.Cancel() as c:
        with pytest.raises(KeyboardInterrupt):
            if how == "lock":
                m.lock(resource, 60_000)
            elif how == "lock with cancel":
                m.lock(resource, 60_000, cancel=c)
            elif how == "acquire_many":
                m.acquire_many([resource, resource + ":2"], 60_000)
            else:
                m.semaphore(resource, 2).lock(60_000)
    monkeypatch.undo()
    assert interrupt.raised == 1
    assert int(counters(m)['redlock_acquire_total{result="granted"}']) == 1  # it was granted
    # ... and released on every node, not left to its 60 s TTL.
    for key in keys:
        cluster.released(key)


class _RaiseAsAcquireReturns:
    """Stands in for the loaded library: ``redlock_acquire`` runs (on the calling thread),
    then a Ctrl-C that arrived during the call is delivered as it returns, before its status
    is even stored."""

    def __init__(self, real):
        self._real = real
        self.statuses: List[int] = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def redlock_acquire(self, *args):
        self.statuses.append(self._real.redlock_acquire(*args))
        raise KeyboardInterrupt


@pytest.mark.parametrize("cancel", [False, True])
def test_ctrl_c_as_a_direct_grant_returns_leaves_no_key(cluster, mgr, resource, cancel,
                                                         monkeypatch):
    # wait_ms=0 on the main thread: the library is called directly (no helper thread).
    with redlock.Cancel() as c:  # made first: making one reloads _core._c
        fake = _RaiseAsAcquireReturns(_core._c)
        monkeypatch.setattr(_core, "_c", fake)
        with pytest.raises(KeyboardInterrupt):
            mgr.try_lock(resource, 60_000, cancel=c if cancel else None)
        monkeypatch.undo()
    assert fake.statuses == [0]  # it was granted
    cluster.released(key_of(resource))  # and released at once, not after 60 s


class _GrantThenInterrupt:
    """Stands in for the loaded library: ``redlock_acquire`` (on the helper thread) is
    granted, then a Ctrl-C reaches the main thread while the call has not returned yet: the
    race where the caller gives up on an acquisition that succeeds all the same."""

    def __init__(self, real):
        self._real = real
        self.statuses: List[int] = []

    def __getattr__(self, name):
        return getattr(self._real, name)

    def redlock_acquire(self, *args):
        st = self._real.redlock_acquire(*args)
        self.statuses.append(st)
        _thread.interrupt_main()
        time.sleep(0.5)  # the main thread gives up meanwhile
        return st


def test_a_lease_granted_as_the_caller_gives_up_is_unlocked(
    cluster, mgr, resource, monkeypatch
):
    key = key_of(resource)
    fake = _GrantThenInterrupt(_core._c)
    monkeypatch.setattr(_core, "_c", fake)
    with pytest.raises(KeyboardInterrupt):
        mgr.acquire(resource, 60_000, wait_ms=5_000, auto_renew=True)
    monkeypatch.undo()
    assert fake.statuses == [0]  # it was granted
    # ... and unlocked by the helper thread before the KeyboardInterrupt was re-raised (a
    # quorum confirmed; the last node within moments), not left to its 60 s TTL.
    cluster.released(key)
    mgr.close()
    assert mgr._handle.freed


def test_an_exception_after_a_helper_grant_unlocks_the_lease(
    cluster, mgr, resource, monkeypatch
):
    # The helper thread returned with the lock; the exception comes as the Lease is built
    # (a KeyboardInterrupt right then would be the same).
    seen = []

    def failing_lease(handle, *args):
        seen.append(handle)
        raise KeyboardInterrupt

    monkeypatch.setattr(_acquire, "Lease", failing_lease)
    with pytest.raises(KeyboardInterrupt):
        mgr.acquire(resource, 60_000, wait_ms=5_000)
    monkeypatch.undo()
    assert len(seen) == 1 and seen[0].freed  # unlocked and freed
    cluster.released(key_of(resource))  # at once, not after the 60 s TTL


def test_a_helper_thread_that_cannot_start_leaves_nothing_held(
    cluster, new_manager, resource, monkeypatch
):
    m = new_manager(cluster.urls)

    class NoThread:
        def __init__(self, *args, **kwargs):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_threads, "_idle_helpers", [])  # no helper thread to reuse
    monkeypatch.setattr(_core.threading, "Thread", NoThread)
    with redlock.Cancel() as c:
        with pytest.raises(RuntimeError, match="start new thread"):
            m.acquire(resource, 5_000, wait_ms=5_000, cancel=c)
        monkeypatch.undo()
        assert not c.fired and c._handle._users == 0
    assert attempts(m) == 0 and cluster.present(key_of(resource)) == 0
    m.close()
    assert m._handle.freed  # its hold on the manager was released


def test_only_waits_on_the_main_thread_run_on_a_helper_thread(
    cluster, new_manager, resource, monkeypatch
):
    m = new_manager(cluster.urls)
    m0 = new_manager(cluster.urls, retry_count=0)
    handed: List[str] = []
    real_call = _acquire._Call

    class CountingCall(real_call):  # type: ignore[misc, valid-type]
        __slots__ = ()

        def run(self):
            handed.append(threading.current_thread().name)
            super().run()

    monkeypatch.setattr(_acquire, "_Call", CountingCall)
    # Direct calls: one attempt (with or without a handle), a retry policy that never pauses,
    # and any call on another thread (Python delivers no signal there).
    m.try_lock(resource, 5_000).unlock()
    with redlock.Cancel() as c:
        m.try_lock(resource, 5_000, cancel=c).unlock()
        m.acquire(resource, 5_000, wait_ms=0, cancel=c).unlock()
    m0.lock(resource, 5_000).unlock()
    t, box = _run(lambda: m.lock(resource, 5_000, wait_ms=1_000))
    t.join(30)
    box["result"].unlock()
    assert handed == []
    # Calls that may wait, on the main thread: handed to one helper thread, kept between them.
    m.lock(resource, 5_000, wait_ms=1_000).unlock()
    m.lock(resource, 5_000).unlock()  # the retry policy pauses too
    m.acquire(resource, 5_000, wait_ms=1_000, notify=False, fenced=True).unlock()
    assert handed == ["redlock-acquire"] * 3


def test_the_helper_thread_keeps_nothing_and_ends_when_idle(
    cluster, new_manager, resource, monkeypatch
):
    m = new_manager(cluster.urls)
    monkeypatch.setattr(_threads, "_idle_helpers", [])  # a helper thread of this test's own
    # Idle 2 s: long enough that a busy machine's pause between the two calls below does not
    # end the helper before the second (which would then start another).
    monkeypatch.setattr(_threads, "_HELPER_IDLE_S", 2.0)
    before = set(threading.enumerate())
    lk = m.lock(resource, 1_000, wait_ms=1_000)
    lk2 = m.lock(resource + ":2", 1_000, wait_ms=1_000)  # the same thread again
    helpers = [t for t in set(threading.enumerate()) - before if t.name == "redlock-acquire"]
    assert len(helpers) == 1
    # A lease dropped unlocked is freed (its handle is not kept by the helper thread), and
    # expires after its TTL.
    handle = weakref.ref(lk._handle)
    lk2.unlock()
    del lk, lk2
    gc.collect()
    assert handle() is None  # collected, hence freed
    wait_until(lambda: cluster.present(key_of(resource)) == 0, timeout=10, what="expiry")
    helpers[0].join(10)
    assert not helpers[0].is_alive() and _threads._idle_helpers == []


# ---- SIGINT, for real, in a child process ----

CHILD = r"""
import sys, time
sys.path.insert(0, {package_root!r})
import redlock

urls, resource, with_cancel = sys.argv[1].split(","), sys.argv[2], sys.argv[3] == "1"
m = redlock.Redlock(urls, retry_delay_ms=5_000, node_timeout_ms=500, connect_timeout_ms=1_000)
cancel = redlock.Cancel() if with_cancel else None
print("waiting", flush=True)
try:
    lk = m.acquire(resource, 10_000, wait_ms=20_000, cancel=cancel)
except KeyboardInterrupt:
    print("interrupted", "fired" if cancel is not None and cancel.fired else "-", flush=True)
    raise
print("acquired", lk.token, flush=True)
sys.exit(3)
"""


@pytest.mark.parametrize("with_cancel", [False, True], ids=["no-cancel", "with-cancel"])
def test_sigint_interrupts_a_waiting_child_promptly_and_leaves_no_key(
    cluster, new_manager, resource, with_cancel
):
    holder = long_holder(cluster, new_manager, resource)
    key = key_of(resource)
    script = CHILD.format(package_root=PACKAGE_ROOT)
    child = subprocess.Popen(
        [sys.executable, "-c", script, ",".join(cluster.urls), resource,
         "1" if with_cancel else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=TESTS_DIR,
    )  # fmt: skip
    lines: "queue.Queue[str]" = queue.Queue()

    def read() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=60) == "waiting"
        # Waiting: subscribed to the release of the lock key on a quorum of the nodes.
        wait_until(lambda: subscribers(cluster, key) >= 2, timeout=30, what="the child to wait")
        time.sleep(0.2)
        assert child.poll() is None
        sent = time.monotonic()
        os.kill(child.pid, signal.SIGINT)
        rc = child.wait(timeout=30)
        exit_s = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        reader.join(10)
        assert child.stdout is not None and child.stderr is not None
        err = child.stderr.read()
        child.stdout.close()
        child.stderr.close()
    out: List[str] = []
    while not lines.empty():
        out.append(lines.get())
    print(f"\nSIGINT to exit: {exit_s * 1000:.1f} ms ({'with' if with_cancel else 'no'} Cancel)")
    assert out == ["interrupted " + ("fired" if with_cancel else "-")], (out, err)
    assert re.search(r"^KeyboardInterrupt", err, re.M), err
    assert rc == -signal.SIGINT, (rc, err)  # an uncaught KeyboardInterrupt
    assert exit_s < 10.0  # the child's wait would last 20 s; the rest is interpreter exit
    # The child left nothing: the holder's key is intact, and no subscription remains.
    assert subscribers(cluster, key) == 0
    no_key_but_the_holders(cluster, resource, holder)
