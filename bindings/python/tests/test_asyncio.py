"""asyncio: Redlock.alock (and aacquire, Lease.aunlock, Lease.aextend) against real
redis-server nodes (the module's three; each test on resources of its own).

Each test runs its coroutines with ``asyncio.run`` (no pytest plugin). A waiter is known to be
waiting from its manager's attempt counter and from the nodes (``PUBSUB NUMSUB``), checked
off the loop, never from a sleep alone. The races around a grant are made to happen by
stand-ins for the library (a grant that returns only once the waiter has given up; a
cancellation delivered just as the grant reaches the loop), plus a bounded loop of
cancellations at spread-out moments whose outcomes are printed, not asserted. Times are
printed and checked only against bounds far above what they should be."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import pytest

import redlock
from redlock import _aio, _core, _threads

from conftest import PACKAGE_ROOT
from redis_nodes import key_of, wait_until
from test_acquire import counters, long_holder, nothing_reached_the_library
from test_cancel import (
    cancelled,
    no_key_but_the_holders,
    subscribers,
    wait_until_waiting,
)


def granted(m: redlock.Redlock) -> int:
    return int(counters(m)['redlock_acquire_total{result="granted"}'])


def unlocked(m: redlock.Redlock) -> int:
    return int(counters(m)['redlock_unlock_total{result="ok"}'])


async def off_loop(fn, *args):
    """A blocking test helper (node inspection, polling) run off the loop under test."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def none_left(cluster, resource: str, timeout: float = 5.0) -> None:
    """No node has the resource's key: not on a quorum at once, on none within moments (an
    unlock returns as soon as a quorum confirmed)."""
    cluster.released(key_of(resource), timeout=timeout)


# ---- acquire and release ----


def test_alock_acquires_and_releases(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    key = key_of(resource)

    async def main() -> Dict[str, Any]:
        async with m.alock(resource, 5_000, fenced=True, auto_renew=True) as lk:
            assert isinstance(lk, redlock.Lease) and lk.valid and lk.renewing
            held = await off_loop(cluster.holding, key, lk.value)
            return {"lease": lk, "held": held}

    out = asyncio.run(main())
    lk = out["lease"]
    assert out["held"] >= 2 and lk.fencing_token is not None
    assert lk.closed  # unlocked and closed by the block's end
    none_left(cluster, resource)
    assert granted(m) == 1 and unlocked(m) == 1


def test_aacquire_aextend_aunlock(cluster, new_manager, resource):
    m = new_manager(cluster.urls)

    async def main() -> redlock.Lease:
        lk = await m.aacquire(resource, 2_000, wait_ms=1_000, owner="job-1")
        await lk.aextend(30_000)
        assert lk.ttl_ms == 30_000
        await lk.aunlock()
        with pytest.raises(redlock.NotHeld):
            await lk.aunlock()
        lk.close()
        return lk

    asyncio.run(main())
    none_left(cluster, resource)


def test_alock_raises_what_acquire_raises(cluster, new_manager, resource):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_count=0)

    async def main() -> None:
        with pytest.raises(redlock.NotAcquired):
            async with m.alock(resource, 5_000, wait_ms=0):
                raise AssertionError("entered a lock held elsewhere")
        with redlock.Cancel() as c:
            c.fire()  # fired by someone else: Cancelled, as for acquire
            with pytest.raises(redlock.Cancelled):
                async with m.alock(resource, 5_000, wait_ms=10_000, cancel=c):
                    raise AssertionError("entered with a fired handle")

    asyncio.run(main())
    no_key_but_the_holders(cluster, resource, holder)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"wait_ms": -1}, redlock.InvalidArgument),
        ({"wait_ms": 1.5}, TypeError),
        ({"fenced": 1}, TypeError),
        ({"auto_renew": "yes"}, TypeError),
        ({"max_hold_ms": 1_000}, redlock.InvalidArgument),  # without auto_renew
        ({"notify": None}, TypeError),
        ({"cancel": object()}, TypeError),
        ({"owner": 7}, TypeError),
        ({"ttl_ms": 0}, redlock.InvalidArgument),
        ({"resource": 3}, TypeError),
    ],
)
def test_bad_arguments_raise_when_alock_is_called(cluster, new_manager, resource, kwargs, exc):
    m = new_manager(cluster.urls)
    args: Dict[str, Any] = {"resource": resource, "ttl_ms": 5_000, **kwargs}
    with pytest.raises(exc):
        m.alock(**args)  # no event loop needed: checked before anything else
    nothing_reached_the_library(m)


def test_an_alock_is_entered_once(cluster, new_manager, resource):
    m = new_manager(cluster.urls)

    async def main() -> None:
        cm = m.alock(resource, 5_000)
        assert "new" in repr(cm)
        async with cm:
            assert "held" in repr(cm)
        with pytest.raises(RuntimeError, match="entered once"):
            async with cm:
                pass

    asyncio.run(main())
    none_left(cluster, resource)
    assert granted(m) == 1


def test_exceptions_inside_the_block_still_release(cluster, new_manager, resource):
    m = new_manager(cluster.urls)

    async def main() -> None:
        with pytest.raises(ValueError, match="boom"):
            async with m.alock(resource, 30_000) as lk:
                assert await off_loop(cluster.holding, key_of(resource), lk.value) >= 2
                raise ValueError("boom")
        assert lk.closed

    asyncio.run(main())
    none_left(cluster, resource)  # at once, not after the 30 s TTL
    assert unlocked(m) == 1


def test_an_unlock_failure_at_the_end_of_the_block(cluster, new_manager, resource):
    m = new_manager(cluster.urls)

    async def main() -> None:
        # The block unlocked already: nothing more is done at its end.
        async with m.alock(resource, 5_000) as lk:
            await lk.aunlock()
        # The lock expired while the block ran: NotHeld from the async with statement...
        # (A 1 s TTL: a 200 ms one could run out during the acquisition on a busy machine.)
        with pytest.raises(redlock.NotHeld):
            async with m.alock(resource, 1_000) as lk:
                while lk.valid:
                    await asyncio.sleep(0.05)
        # ... unless an exception leaves the block, which wins.
        with pytest.raises(KeyError):
            async with m.alock(resource, 1_000) as lk:
                while lk.valid:
                    await asyncio.sleep(0.05)
                raise KeyError("mine")

    asyncio.run(main())
    none_left(cluster, resource)


# ---- the loop goes on while a task waits ----


def test_the_loop_stays_responsive_while_a_task_waits(cluster, new_manager, resource):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    ticks: List[float] = []

    async def ticker(stop: asyncio.Event) -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main() -> Dict[str, Any]:
        stop = asyncio.Event()
        tick_task = asyncio.ensure_future(ticker(stop))
        got: Dict[str, Any] = {}

        async def waiter() -> None:
            async with m.alock(resource, 5_000, wait_ms=30_000) as lk:
                got["at"] = time.monotonic()
                got["token"] = lk.token
                got["held"] = await off_loop(cluster.holding, key_of(resource), lk.value)

        task = asyncio.ensure_future(waiter())
        await off_loop(wait_until_waiting, cluster, m, resource)
        start, n0 = time.monotonic(), len(ticks)
        await asyncio.sleep(1.0)  # the waiter waits; the ticker should tick all along
        window = ticks[n0:]
        assert not task.done()
        released_at = time.monotonic()
        await holder.aunlock()
        await asyncio.wait_for(task, 30)
        stop.set()
        await tick_task
        return {"window": window, "start": start, "released": released_at, **got}

    out = asyncio.run(main())
    holder.close()
    window = out["window"]
    gaps = [b - a for a, b in zip([out["start"]] + window, window)]
    print(
        f"\nticks while a task waited 1 s for the lock: {len(window)} (10 ms sleeps), largest "
        f"gap {max(gaps) * 1000:.1f} ms; lock handed over "
        f"{(out['at'] - out['released']) * 1000:.1f} ms after the holder's unlock began"
    )
    assert len(window) >= 10  # about 90 on an idle machine; 0 if the wait blocked the loop
    assert out["held"] >= 2
    none_left(cluster, resource)


# ---- cancellation ----


@pytest.mark.parametrize("with_cancel", [False, True], ids=["own-handle", "caller-handle"])
def test_cancelling_a_waiting_task_returns_promptly_and_leaves_nothing(
    cluster, new_manager, resource, with_cancel
):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)
    c = redlock.Cancel() if with_cancel else None
    entered: List[redlock.Lease] = []

    async def waiter() -> None:
        async with m.alock(resource, 5_000, wait_ms=30_000, cancel=c) as lk:
            entered.append(lk)

    async def main() -> float:
        task = asyncio.ensure_future(waiter())
        await off_loop(wait_until_waiting, cluster, m, resource)
        fired_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - fired_at

    latency = asyncio.run(main())
    print(f"\ncancel latency of a waiting task: {latency * 1000:.1f} ms (wait_ms was 30 s)")
    assert latency < 5.0  # a few ms on an idle machine; the wait would last 30 s
    assert entered == [] and cancelled(m) == 1 and granted(m) == 0
    if c is not None:
        assert c.fired  # the caller's handle was fired, as a Ctrl-C would
        c.close()
    # Nothing of the waiter on the nodes: its subscription ends, and only the holder's key
    # is there; once the holder unlocks, another manager gets the lock at once.
    wait_until(lambda: subscribers(cluster, key_of(resource)) == 0, timeout=10,
               what="the waiter's subscriptions to end")  # fmt: skip
    no_key_but_the_holders(cluster, resource, holder)
    other = new_manager(cluster.urls, retry_count=0)
    other.try_lock(resource, 5_000).unlock()


def test_wait_for_timing_out_cancels_the_wait(cluster, new_manager, resource):
    holder = long_holder(cluster, new_manager, resource)
    m = new_manager(cluster.urls, retry_delay_ms=5_000)

    async def take() -> None:
        async with m.alock(resource, 5_000, wait_ms=30_000):
            raise AssertionError("entered a lock held elsewhere")

    async def main() -> None:
        # Timed out once it waits (not before the helper thread has even called the library,
        # which a busy machine may take longer than the timeout to do: nothing to cancel then).
        task = asyncio.ensure_future(take())
        await off_loop(wait_until_waiting, cluster, m, resource)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(task, 0.5)

    asyncio.run(main())
    assert cancelled(m) == 1 and granted(m) == 0
    no_key_but_the_holders(cluster, resource, holder)


class _FakeLib:
    """Stands in for the loaded library; every function but the ones overridden is the real
    one."""

    def __init__(self, real: Any) -> None:
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_grant_that_returns_after_the_task_gave_up_is_unlocked(
    cluster, new_manager, resource, monkeypatch
):
    # The library grants the lock, but returns only after the task was cancelled and the
    # binding fired the cancel handle: the helper thread must unlock the lease itself.
    m = new_manager(cluster.urls)
    c = redlock.Cancel()
    statuses: List[int] = []
    to_cancel: List[asyncio.Task] = []
    loop_box: List[asyncio.AbstractEventLoop] = []

    class GrantThenWait(_FakeLib):
        def redlock_acquire(self, *args: Any) -> int:
            st = self._real.redlock_acquire(*args)
            statuses.append(st)
            loop_box[0].call_soon_threadsafe(to_cancel[0].cancel)
            # Returns only once the task has given up (the binding fires the handle then).
            deadline = time.monotonic() + 30
            while not c.fired and time.monotonic() < deadline:
                time.sleep(0.005)
            return st

    async def take() -> None:
        async with m.alock(resource, 60_000, wait_ms=5_000, cancel=c, auto_renew=True):
            raise AssertionError("the task got the lease")

    async def main() -> None:
        loop_box.append(asyncio.get_running_loop())
        task = asyncio.ensure_future(take())
        to_cancel.append(task)
        with pytest.raises(asyncio.CancelledError):
            await task

    monkeypatch.setattr(_core, "_c", GrantThenWait(_core._c))
    asyncio.run(main())
    monkeypatch.undo()
    assert statuses == [0] and c.fired  # granted, and the task had given up first
    # Unlocked before the CancelledError was re-raised (a quorum confirmed), not after the
    # 60 s TTL.
    none_left(cluster, resource)
    assert granted(m) == 1 and unlocked(m) == 1
    c.close()


def test_a_cancellation_as_the_grant_reaches_the_loop_unlocks_it(
    cluster, new_manager, resource, monkeypatch
):
    # The library returned the grant and the helper thread woke the loop; the task is
    # cancelled before it runs again: the task unlocks the lease off the loop, then re-raises.
    m = new_manager(cluster.urls)
    to_cancel: List[asyncio.Task] = []
    real_resolve = _aio._resolve

    def resolve_then_cancel(fut: Any) -> None:
        real_resolve(fut)
        if to_cancel:
            to_cancel.pop().cancel()

    async def take() -> None:
        async with m.alock(resource, 60_000, wait_ms=5_000):
            raise AssertionError("the task got the lease")

    async def main() -> None:
        task = asyncio.ensure_future(take())
        to_cancel.append(task)
        with pytest.raises(asyncio.CancelledError):
            await task

    monkeypatch.setattr(_aio, "_resolve", resolve_then_cancel)
    asyncio.run(main())
    monkeypatch.undo()
    assert to_cancel == []  # the cancellation came as the grant reached the loop
    assert granted(m) == 1 and unlocked(m) == 1
    none_left(cluster, resource)


@pytest.mark.parametrize("how", ["aacquire", "alock", "aacquire_many", "semaphore"])
def test_ctrl_c_right_after_a_grant_leaves_no_key(cluster, new_manager, resource, how,
                                                   monkeypatch):
    # A KeyboardInterrupt (a signal's exception, raised on the loop's thread) as the
    # acquisition lets go of its cancel handle, after the helper thread returned the lease.
    from test_cancel import _InterruptAtCancelRelease

    m = new_manager(cluster.urls)
    many = [resource, resource + ":2"]
    keys = {
        "aacquire": [key_of(resource)],
        "alock": [key_of(resource)],
        "aacquire_many": [key_of(r) for r in many],
        "semaphore": [b"redlock-sem:" + key_of(resource)],
    }[how]

    async def take() -> None:
        if how == "aacquire":
            await m.aacquire(resource, 60_000)
        elif how == "alock":
            async with m.alock(resource, 60_000):
                pass
        elif how == "aacquire_many":
            await m.aacquire_many(many, 60_000)
        else:
            await m.semaphore(resource, 2).aacquire(60_000)

    interrupt = _InterruptAtCancelRelease(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(take())
    monkeypatch.undo()
    assert interrupt.raised == 1
    assert granted(m) == 1  # it was granted
    for key in keys:  # ... and released on every node, not left to its 60 s TTL
        cluster.released(key)


def test_cancellations_around_the_grant_never_leave_a_key(cluster, new_manager, resource):
    # Uncontended acquisitions cancelled at moments spread over the acquisition's own
    # duration (before it starts, while it talks to the nodes, as it returns, in the block):
    # whatever the moment, once the cancelled task has ended no node has the key. Bounded
    # in count and in time; the outcomes are printed, not asserted (they depend on timing).
    m = new_manager(cluster.urls)
    key = key_of(resource)
    outcomes = {"before-grant": 0, "in-block": 0}

    async def take(entered: List[bool]) -> None:
        async with m.alock(resource, 60_000, wait_ms=0):
            entered.append(True)
            await asyncio.sleep(60)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        # How long one acquisition takes here (the cancellations are spread over it).
        t0 = loop.time()
        for _ in range(5):
            async with m.alock(resource, 60_000, wait_ms=0):
                pass
        per = (loop.time() - t0) / 5
        deadline = loop.time() + 20.0
        n = 0
        for i in range(150):
            if loop.time() > deadline:
                break
            entered: List[bool] = []
            task = asyncio.ensure_future(take(entered))
            delay = per * 1.5 * (i % 30) / 30  # 0 .. 1.5 acquisitions
            if delay:
                loop.call_later(delay, task.cancel)
            else:
                task.cancel()  # before it ever ran
            with pytest.raises(asyncio.CancelledError):
                await task
            outcomes["in-block" if entered else "before-grant"] += 1
            # Nothing held once the task has ended: not on a quorum at once, on no node
            # within moments; the next acquisition (wait_ms=0) would fail otherwise too.
            assert await off_loop(cluster.present, key) < 2
            await off_loop(lambda: wait_until(lambda: cluster.present(key) == 0, timeout=5))
            n += 1
        return n

    n = asyncio.run(main())
    print(f"\n{n} cancelled acquisitions: {outcomes}; granted {granted(m)}, "
          f"unlocked {unlocked(m)}, cancelled {cancelled(m)}")  # fmt: skip
    assert n >= 10
    # Every grant was unlocked (5 of them by the timing loop above). Unlocks may outnumber
    # grants: a cancel that reaches the library after a quorum granted is counted as a
    # cancelled acquisition, whose keys the library releases itself.
    assert unlocked(m) >= granted(m) >= 5
    m2 = new_manager(cluster.urls, retry_count=0)
    m2.try_lock(resource, 5_000).unlock()


def test_a_cancellation_during_the_unlock_waits_for_it(
    cluster, new_manager, resource, monkeypatch
):
    # The block ended and its unlock is in flight on a helper thread when the task is
    # cancelled: the unlock completes, then the CancelledError is raised.
    m = new_manager(cluster.urls)
    to_cancel: List[asyncio.Task] = []
    loop_box: List[asyncio.AbstractEventLoop] = []
    unlock_returned: List[float] = []

    class CancelDuringUnlock(_FakeLib):
        def redlock_unlock(self, *args: Any) -> int:
            delivered = threading.Event()

            def cancel() -> None:
                to_cancel[0].cancel()
                delivered.set()

            loop_box[0].call_soon_threadsafe(cancel)
            delivered.wait(30)
            time.sleep(0.1)  # the task sees its cancellation while the unlock goes on
            st = self._real.redlock_unlock(*args)
            unlock_returned.append(time.monotonic())
            return st

    async def take() -> None:
        async with m.alock(resource, 60_000):
            _core._c = CancelDuringUnlock(real)  # for the unlock only

    async def main() -> float:
        loop_box.append(asyncio.get_running_loop())
        task = asyncio.ensure_future(take())
        to_cancel.append(task)
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic()

    real = _core._c
    monkeypatch.setattr(_core, "_c", real)  # restored by monkeypatch whatever happens
    ended = asyncio.run(main())
    _core._c = real
    assert len(unlock_returned) == 1 and unlock_returned[0] <= ended
    assert unlocked(m) == 1
    none_left(cluster, resource)


def test_a_helper_thread_that_cannot_start_leaves_nothing_held(
    cluster, new_manager, resource, monkeypatch
):
    m = new_manager(cluster.urls)

    class NoThread:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    async def main() -> None:
        with pytest.raises(RuntimeError, match="start new thread"):
            async with m.alock(resource, 5_000, wait_ms=5_000, cancel=c):
                raise AssertionError("entered")

    monkeypatch.setattr(_threads, "_idle_helpers", [])  # no helper thread to reuse
    with redlock.Cancel() as c:
        monkeypatch.setattr(_core.threading, "Thread", NoThread)
        try:
            asyncio.run(main())
        finally:
            monkeypatch.undo()
        assert not c.fired and c._handle._users == 0
    nothing_reached_the_library(m)
    m.close()
    assert m._handle.freed  # the call's hold on the manager was released


def test_synchronous_use_never_imports_asyncio(cluster, resource):
    code = (
        "import sys, redlock\n"
        f"with redlock.Redlock({cluster.urls!r}) as m:\n"
        f"    m.lock({resource!r}, 5_000, wait_ms=1_000).unlock()\n"
        "print('asyncio' in sys.modules, 'redlock._aio' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=60)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False"]


# ---- contention ----


def test_coroutines_contending_on_one_resource_take_turns(cluster, new_manager, resource):
    m = new_manager(cluster.urls)
    other = new_manager(cluster.urls)  # a second manager: as another process would
    inside: List[Optional[str]] = [None]
    turns: List[str] = []

    async def worker(name: str, mgr: redlock.Redlock) -> None:
        for _ in range(2):
            async with mgr.alock(resource, 10_000, wait_ms=60_000) as lk:
                assert inside[0] is None, f"{name} entered while {inside[0]} held the lock"
                inside[0] = name
                turns.append(name)
                assert await off_loop(cluster.holding, key_of(resource), lk.value) >= 2
                await asyncio.sleep(0.05)
                inside[0] = None

    async def main() -> None:
        await asyncio.wait_for(
            asyncio.gather(worker("a", m), worker("b", m), worker("c", other)), 120
        )

    asyncio.run(main())
    assert sorted(turns) == ["a", "a", "b", "b", "c", "c"], turns
    print(f"\nturns: {turns}")
    none_left(cluster, resource)
