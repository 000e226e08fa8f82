"""Reentrant locks (``owner=``) through the Python binding, against real nodes: re-entry by
the same owner, from another thread and another process; another owner refused until the
last lease is released; one fencing token per tenure; bad owners refused."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

import redlock

from conftest import PACKAGE_ROOT
from redis_nodes import key_of


def holds(cluster, resource: str):
    """Each node's hold fields of the resource's key."""
    out = []
    for s in cluster.servers:
        fields = s.command("HKEYS", key_of(resource)) or []
        out.append(sorted(f for f in fields if f.startswith(b"hold:")))
    return out


def test_the_same_owner_reenters_and_holds_until_the_last_release(cluster, mgr, new_manager, resource):
    other = new_manager(cluster.urls)
    leases = [mgr.try_lock(resource, 10_000, owner="job-1") for _ in range(20)]
    assert len({l.token for l in leases}) == 20
    assert all(len(h) == 20 for h in holds(cluster, resource))
    # Another owner, from another thread, is refused; so is a plain lock.
    result = []
    t = threading.Thread(target=lambda: result.append(_try(other, resource, "job-2")))
    t.start()
    t.join()
    assert result == ["refused"]
    with pytest.raises(redlock.NotAcquired):
        other.try_lock(resource, 10_000)
    for lease in leases[5:] + leases[:4]:
        lease.unlock()
    assert all(len(h) == 1 for h in holds(cluster, resource))
    assert _try(other, resource, "job-2") == "refused"
    # The same owner from another thread is the same owner.
    got = []
    t = threading.Thread(target=lambda: got.append(other.try_lock(resource, 10_000, owner=b"job-1")))
    t.start()
    t.join()
    got[0].unlock()
    leases[4].unlock()
    cluster.released(key_of(resource))
    assert _try(other, resource, "job-2") == "granted"


def _try(m: redlock.Redlock, resource: str, owner: str) -> str:
    try:
        m.try_lock(resource, 10_000, owner=owner).unlock()
        return "granted"
    except redlock.NotAcquired:
        return "refused"


CHILD = """
import sys, redlock
m = redlock.Redlock(sys.argv[1].split(","), node_timeout_ms=500)
try:
    lease = m.try_lock(sys.argv[2], 10_000, owner=sys.argv[3])
    print("granted", lease.token)
except redlock.NotAcquired:
    print("refused")
"""


def test_another_process_with_the_same_owner_reenters_and_another_owner_is_refused(
    cluster, mgr, resource
):
    lease = mgr.acquire(resource, 10_000, owner="job-7", fenced=True, wait_ms=0)

    def child(owner: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, ",".join(cluster.urls), resource, owner],
            capture_output=True, text=True, timeout=60, cwd=PACKAGE_ROOT, check=True,
        )  # fmt: skip
        return out.stdout.split()[0]

    assert child("job-8") == "refused"
    assert child("job-7") == "granted"  # a restarted worker reclaims at once
    # The child's hold stays until its TTL: the resource is still held by job-7.
    lease.unlock()
    assert _try(mgr, resource, "job-8") == "refused"
    assert all(len(h) == 1 for h in holds(cluster, resource))


def test_fenced_reentry_keeps_the_tenure_token(mgr, resource):
    outer = mgr.acquire(resource, 10_000, owner="job-1", fenced=True, wait_ms=0)
    inner = mgr.acquire(resource, 10_000, owner="job-1", fenced=True, wait_ms=0)
    assert outer.fencing_token is not None and inner.fencing_token == outer.fencing_token
    inner.unlock()
    outer.unlock()
    nxt = mgr.try_lock(resource, 10_000, fenced=True)
    assert nxt.fencing_token > outer.fencing_token
    nxt.unlock()


def test_bad_owners_are_refused(mgr, resource):
    # The message names the argument and its limit, not only "invalid argument".
    for owner, n in (("", 0), ("x" * 513, 513)):
        says = rf"^owner id is {n} bytes; it must be 1 to 512 bytes$"
        with pytest.raises(redlock.InvalidArgument, match=says):
            mgr.try_lock(resource, 1_000, owner=owner)
    with pytest.raises(TypeError):
        mgr.try_lock(resource, 1_000, owner=7)
    # Any bytes are fine, and the lock, context manager included, works as usual.
    with mgr.lock(resource, 1_000, owner=b"\0\xff") as lease:
        assert lease.valid
