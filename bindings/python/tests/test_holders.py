"""Who holds a resource (``Redlock.holders``), holder labels (``label=``), ``Lease.value`` and
the key prefix (``key_prefix=``, the empty one included, for sharing keys with node-redlock
and redsync), against real redis-server nodes.

Nothing here races: the key is waited for on every node (bounded) before a snapshot that
expects it everywhere, durations are checked from below against sleeps (they only grow on a
slow machine) and from above with a wide margin, and releases are waited for (bounded)."""

from __future__ import annotations

import secrets
import time

import pytest

import redlock
from redlock import HolderKind, HoldState

from redis_nodes import key_of, wait_until

TTL_MS = 10_000


def on_every_node(c, key: bytes, value: str) -> None:
    """Waits (bounded) until every live node holds ``key`` with ``value``: the library returns
    as soon as a quorum granted, so the last node's write may land just after."""
    n = sum(1 for s in c.servers if s.proc is not None)
    wait_until(lambda: c.holding(key, value) == n, what=f"{key!r} on every node")


def free_everywhere(mgr: redlock.Redlock, resource) -> None:
    wait_until(
        lambda: (lambda h: not h.is_locked and h.held_on == 0)(mgr.holders(resource)),
        what=f"{resource!r} free on every node",
    )


# ---- a plain lock: free, held with a label, free again ----


def test_free_then_held_with_its_label_age_and_ttl_then_free(cluster, new_manager, resource):
    watcher = new_manager(cluster.urls)  # no label: reading needs none
    m = new_manager(cluster.urls, label="billing-7:4242")

    free = watcher.holders(resource)
    assert isinstance(free, redlock.Holders)
    assert free.resource == resource.encode() and free.quorum == 2
    assert not free.is_locked and free.holder is None
    assert (free.held_on, free.failed) == (0, 0)
    assert [n.index for n in free.nodes] == [0, 1, 2]
    for n in free.nodes:
        assert n == redlock.NodeHold(n.index, HoldState.FREE, HolderKind.NONE, b"", None, None,
                                     None)  # fmt: skip
        assert n.holder is None

    lk = m.try_lock(resource, ttl_ms=TTL_MS)
    # <40 hex token>.<unix ms> <label>
    token, _, rest = lk.value.partition(".")
    started_ms, _, label = rest.partition(" ")
    assert token == lk.token and len(token) == 40 and label == "billing-7:4242"
    assert abs(int(started_ms) - time.time() * 1000) < 60_000, lk.value
    on_every_node(cluster, key_of(resource), lk.value)

    time.sleep(0.3)
    seen = watcher.holders(resource)
    assert seen.is_locked and seen.held_on == 3 and seen.failed == 0
    h = seen.holder
    assert h is not None and h.kind == HolderKind.LOCK
    assert h.id == lk.value.encode() and h.label == "billing-7:4242"
    # Held for at least the 300 ms slept (one machine's clock on both sides here).
    assert 250 <= h.held_for_ms < 60_000, h
    assert 1_000 < h.ttl_ms <= TTL_MS, h
    for n in seen.nodes:
        assert n.state == HoldState.HELD and n.holder is not None, n
        assert (n.kind, n.id, n.label) == (h.kind, h.id, h.label), n
        assert n.held_for_ms >= 250 and 1_000 < n.ttl_ms <= TTL_MS, n

    lk.unlock()
    free_everywhere(watcher, resource)
    lk.close()
    assert lk.value.endswith(" billing-7:4242")  # a fact recorded at acquisition


def test_labels_are_per_manager_and_the_empty_label_is_none(cluster, new_manager, resource):
    # Three managers in one process, each with its own label (or none), lock through the same
    # kind of cached options: each lock carries its own manager's label, never another's.
    a = new_manager(cluster.urls, label="a:1")
    b = new_manager(cluster.urls, label="b:2")
    bare = new_manager(cluster.urls, label="")
    for _ in range(2):  # the second round goes through the options caches
        for m, want in ((a, "a:1"), (b, "b:2"), (bare, None)):
            with m.try_lock(resource, ttl_ms=TTL_MS) as lk:
                got = lk.value.partition(" ")[2] or None
                assert got == want, lk.value
                on_every_node(cluster, key_of(resource), lk.value)
                assert a.holders(resource).holder.label == want
            # The unlock returned once a quorum confirmed: wait for the last node too, or
            # the next lock could miss it.
            free_everywhere(a, resource)


def test_a_reentrant_lock_is_reported_by_its_owner(cluster, new_manager, resource):
    m = new_manager(cluster.urls, label="not-used-for-reentrant")
    first = m.acquire(resource, TTL_MS, owner="job-17")
    assert first.value == first.token  # a reentrant lease stores its owner, not this
    time.sleep(0.3)
    # A re-entry does not restart the tenure: held_for counts from the first hold.
    second = m.acquire(resource, TTL_MS, owner="job-17")
    wait_until(lambda: m.holders(resource).held_on == 3, what="the owner's key on every node")
    h = m.holders(resource).holder
    assert h is not None and h.kind == HolderKind.REENTRANT
    assert (h.id, h.label) == (b"job-17", "job-17")
    assert 250 <= h.held_for_ms < 60_000 and 1_000 < h.ttl_ms <= TTL_MS, h
    second.unlock()
    assert m.holders(resource).holder.id == b"job-17"  # still held: the first lease
    first.unlock()
    free_everywhere(m, resource)
    first.close()
    second.close()


# ---- a failed node ----


def test_a_killed_node_is_failed_while_the_quorum_still_names_the_holder(
    make_cluster, new_manager, resource
):
    c = make_cluster(3)
    m = new_manager(c.urls, label="a")
    lk = m.try_lock(resource, ttl_ms=TTL_MS)  # a brand-new cluster counts at once
    on_every_node(c, key_of(resource), lk.value)
    c.servers[2].kill()
    seen = m.holders(resource)
    assert [n.state for n in seen.nodes] == [HoldState.HELD, HoldState.HELD, HoldState.FAILED]
    assert seen.nodes[2] == redlock.NodeHold(2, HoldState.FAILED, HolderKind.NONE, b"", None,
                                             None, None)  # fmt: skip
    assert (seen.held_on, seen.failed) == (2, 1)
    assert seen.is_locked
    assert (seen.holder.label, seen.holder.id) == ("a", lk.value.encode())
    c.servers[1].kill()
    # One node of three: no quorum agrees on anything, so not reported as locked.
    seen = m.holders(resource)
    assert not seen.is_locked and seen.holder is None
    assert (seen.held_on, seen.failed) == (1, 2)
    lk.close()


def test_no_node_answering_is_all_failed_not_an_error(new_manager):
    m = new_manager(["redis://127.0.0.1:1"], connect_timeout_ms=200)  # nothing listens there
    seen = m.holders("anything")
    assert [n.state for n in seen.nodes] == [HoldState.FAILED]
    assert not seen.is_locked and seen.failed == 1


# ---- key prefixes ----


def test_a_key_prefix_names_the_keys_and_is_another_namespace(cluster, new_manager, resource):
    app = new_manager(cluster.urls, key_prefix=b"app:locks:")
    default = new_manager(cluster.urls)
    a = app.try_lock(resource, ttl_ms=TTL_MS)
    on_every_node(cluster, b"app:locks:" + resource.encode(), a.value)
    assert cluster.present(key_of(resource)) == 0
    # Another prefix is another namespace: the same resource name is another lock.
    b = default.try_lock(resource, ttl_ms=TTL_MS)
    assert app.holders(resource).holder.id == a.value.encode()
    assert default.holders(resource).holder.id == b.value.encode()
    with pytest.raises(redlock.NotAcquired):
        app.try_lock(resource, ttl_ms=TTL_MS)
    a.unlock()
    b.unlock()
    free_everywhere(app, resource)
    free_everywhere(default, resource)


# node-redlock (v5) and redsync name a lock's key after the resource itself, store a random
# value with ``SET … PX`` (after checking that no key exists, or with ``NX``), and release
# with a compare-and-delete. These scripts write and delete keys exactly that way (the same
# as tests/holders.rs in the Rust crate).
PEER_ACQUIRE = (
    "for _, k in ipairs(KEYS) do if redis.call('exists', k) == 1 then return 0 end end "
    "for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'PX', ARGV[2]) end "
    "return #KEYS"
)
PEER_RELEASE = (
    "local n = 0 for _, k in ipairs(KEYS) do "
    "if redis.call('get', k) == ARGV[1] then redis.pcall('del', k) n = n + 1 end end return n"
)


def peer(cluster, script: str, key: str, value: str, ttl_ms: int = TTL_MS) -> int:
    """Runs a node-redlock-style acquisition or release on every node; how many did it."""
    return sum(s.command("EVAL", script, 1, key, value, ttl_ms) for s in cluster.servers)


def test_the_empty_prefix_excludes_node_redlock_locks_both_ways(cluster, new_manager, resource):
    m = new_manager(cluster.urls, key_prefix="", label="new-svc")
    key = resource.encode()  # the key is the resource name itself

    # The old service holds the resource the node-redlock way: we are refused, and see a
    # holder that is not ours.
    theirs = secrets.token_hex(16)
    assert peer(cluster, PEER_ACQUIRE, resource, theirs) == 3
    with pytest.raises(redlock.NotAcquired):
        m.try_lock(resource, ttl_ms=TTL_MS)
    h = m.holders(resource).holder
    assert h == redlock.Holder(HolderKind.OTHER, theirs.encode(), None, h.ttl_ms, None), h
    assert 1_000 < h.ttl_ms <= TTL_MS
    # Our refused attempt never touched their key; their release frees it.
    assert cluster.holding(key, theirs) == 3
    assert peer(cluster, PEER_RELEASE, resource, theirs) == 3

    # Now we hold it: their acquisition is refused, their release (of their own value)
    # deletes nothing of ours, and redsync's SET NX PX is refused too.
    lk = m.try_lock(resource, ttl_ms=TTL_MS)
    on_every_node(cluster, key, lk.value)
    assert lk.value.endswith(" new-svc")
    assert peer(cluster, PEER_ACQUIRE, resource, theirs) == 0
    assert peer(cluster, PEER_RELEASE, resource, theirs) == 0
    for s in cluster.servers:
        assert s.command("SET", key, "cmVkc3luYw==", "NX", "PX", TTL_MS) is None
    assert cluster.holding(key, lk.value) == 3
    # Our release frees it for them.
    lk.unlock()
    wait_until(lambda: cluster.present(key) == 0, what="our key released everywhere")
    assert peer(cluster, PEER_ACQUIRE, resource, theirs) == 3
    assert peer(cluster, PEER_RELEASE, resource, theirs) == 3
    lk.close()


# ---- bad input: typed errors, nothing sent, nothing crashes ----

NOWHERE = ["redis://127.0.0.1:1"]  # never contacted: every check below comes first


@pytest.mark.parametrize("bad", [b"web-1", 42, ["a"], object()])
def test_a_label_of_the_wrong_type_is_type_error(bad):
    with pytest.raises(TypeError, match="label must be a str"):
        redlock.Redlock(NOWHERE, label=bad)


@pytest.mark.parametrize(
    "bad",
    ["x" * (redlock.MAX_LABEL_LEN + 1), "é" * 129, "a\nb", "tab\there", "nul\0", "del\x7f",
     "\ud800"],
)  # fmt: skip
def test_a_bad_label_is_invalid_argument(bad):
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(NOWHERE, label=bad)
    assert isinstance(ei.value, ValueError) and ei.value.status == 10
    assert "label" in ei.value.message


def test_the_longest_label_and_prefix_are_accepted():
    assert redlock.MAX_LABEL_LEN == redlock.MAX_KEY_PREFIX_LEN == 256
    for kwargs in (
        {"label": "x" * 256},
        {"label": "é" * 128},  # 256 bytes
        {"label": ""},
        {"key_prefix": "p" * 256},
        {"key_prefix": bytearray(b"\xff" * 256)},  # any bytes
        {"key_prefix": ""},
        {"key_prefix": b""},
    ):
        redlock.Redlock(NOWHERE, **kwargs).close()


@pytest.mark.parametrize("bad", [42, ["a"], 1.5])
def test_a_key_prefix_of_the_wrong_type_is_type_error(bad):
    with pytest.raises(TypeError, match="key_prefix must be str or bytes"):
        redlock.Redlock(NOWHERE, key_prefix=bad)


@pytest.mark.parametrize("bad", [b"p" * 257, "é" * 129, "\udcff"])
def test_a_bad_key_prefix_is_invalid_argument(bad):
    with pytest.raises(redlock.InvalidArgument, match="key.prefix"):
        redlock.Redlock(NOWHERE, key_prefix=bad)


def test_holders_checks_its_resource():
    with redlock.Redlock(NOWHERE) as m:
        for bad in ("", b"", b"x" * (redlock.MAX_RESOURCE_LEN + 1), "\ud800"):
            with pytest.raises(redlock.InvalidArgument):
                m.holders(bad)
        for bad in (None, 42, ["r"]):
            with pytest.raises(TypeError, match="resource must be str or bytes"):
                m.holders(bad)
    with pytest.raises(redlock.HandleClosed):
        m.holders("r")


def test_with_the_empty_prefix_the_librarys_own_keys_are_refused():
    with redlock.Redlock(NOWHERE, key_prefix="") as m:
        for bad in ("redlock-marker", b"redlock-fence:x"):
            with pytest.raises(redlock.InvalidArgument):
                m.holders(bad)
            with pytest.raises(redlock.InvalidArgument):
                m.try_lock(bad, ttl_ms=1_000)
