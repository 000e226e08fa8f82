"""Bad inputs raise the right exceptions before anything wraps around or is sent; closed
handles raise HandleClosed; the exception classes behave."""

from __future__ import annotations

import pickle

import pytest

import redlock
from redlock import _args

from redis_nodes import key_of

BAD_TTLS_INVALID = [-1, -(2**40), 0, 2**32, 2**64 + 5]
BAD_TTLS_TYPE = [1.5, 1000.0, "1000", None, True, b"10"]


@pytest.mark.parametrize("ttl", BAD_TTLS_INVALID)
def test_ttl_out_of_range_is_invalid_argument(cluster, mgr, resource, ttl):
    for call in (
        lambda: mgr.lock(resource, ttl_ms=ttl),
        lambda: mgr.try_lock(resource, ttl_ms=ttl),
        lambda: mgr.lock(resource, ttl_ms=ttl, wait_ms=10),
    ):
        with pytest.raises(redlock.InvalidArgument) as ei:
            call()
        assert isinstance(ei.value, ValueError)
        assert ei.value.status == redlock.Status.INVALID_ARGUMENT == 10
        assert "ttl_ms" in ei.value.message
    # Nothing wrapped around into a real lock.
    assert cluster.present(key_of(resource)) == 0


@pytest.mark.parametrize("ttl", [1, 2])
def test_ttl_within_drift_allowance_is_rejected_by_the_library(cluster, mgr, resource, ttl):
    with pytest.raises(redlock.InvalidArgument) as ei:
        mgr.try_lock(resource, ttl_ms=ttl)
    assert "TTL" in ei.value.message
    assert cluster.present(key_of(resource)) == 0


@pytest.mark.parametrize("ttl", BAD_TTLS_TYPE)
def test_ttl_of_wrong_type_is_type_error(mgr, resource, ttl):
    with pytest.raises(TypeError):
        mgr.lock(resource, ttl_ms=ttl)
    with pytest.raises(TypeError):
        mgr.try_lock(resource, ttl_ms=ttl)


def test_extend_checks_its_ttl(mgr, resource):
    with mgr.lock(resource, ttl_ms=5_000) as lk:
        for bad in (-1, 0, 2**32):
            with pytest.raises(redlock.InvalidArgument):
                lk.extend(bad)
        with pytest.raises(TypeError):
            lk.extend(2.5)
        assert lk.validity_ms > 3_000  # still held: nothing was sent


def test_wait_ms_is_checked(mgr, resource):
    with pytest.raises(redlock.InvalidArgument):
        mgr.lock(resource, ttl_ms=1_000, wait_ms=-1)
    with pytest.raises(redlock.InvalidArgument):
        mgr.lock(resource, ttl_ms=1_000, wait_ms=2**32)
    with pytest.raises(TypeError):
        mgr.lock(resource, ttl_ms=1_000, wait_ms=0.5)


@pytest.mark.parametrize("bad", [123, None, 4.5, ["a"], object()])
def test_resource_of_wrong_type_is_type_error(mgr, bad):
    with pytest.raises(TypeError, match="resource must be str or bytes"):
        mgr.try_lock(bad, ttl_ms=1_000)
    with pytest.raises(TypeError):
        mgr.lock(bad, ttl_ms=1_000)


def test_empty_oversized_and_unencodable_resources(mgr):
    for bad in ("", b"", b"x" * 1025, "é" * 513):
        with pytest.raises(redlock.InvalidArgument):
            mgr.try_lock(bad, ttl_ms=1_000)
    with pytest.raises(redlock.InvalidArgument, match="UTF-8"):
        mgr.try_lock("\ud800", ttl_ms=1_000)


def test_empty_node_list():
    with pytest.raises(redlock.InvalidArgument, match="at least one node"):
        redlock.Redlock([])
    with pytest.raises(redlock.InvalidArgument):
        redlock.Redlock(iter(()))


@pytest.mark.parametrize(
    "url",
    [
        "",
        "not a url",
        "127.0.0.1",
        "redis://127.0.0.1:99999",
        "rediss://127.0.0.1:0",
        "http://127.0.0.1:6379",
        "redis://127.0.0.1:1/x",
        # Beyond what SELECT accepts (a C int): refused now, not at the first connect.
        "redis://127.0.0.1:1/99999999999",
        "redis://127.0.0.1:0",
        "redis://127.0.0.1:1\0trailing",
    ],
)
def test_malformed_url(url):
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(["redis://127.0.0.1:1", url])
    assert isinstance(ei.value, ValueError) and ei.value.status == 10


def test_node_listed_twice(cluster):
    with pytest.raises(redlock.InvalidArgument, match="twice"):
        redlock.Redlock([cluster.urls[0], cluster.urls[0]])


@pytest.mark.parametrize("nodes", ["redis://127.0.0.1:1", b"redis://127.0.0.1:1", 5, None])
def test_nodes_not_a_list_is_type_error(nodes):
    with pytest.raises(TypeError):
        redlock.Redlock(nodes)


@pytest.mark.parametrize("node", [b"redis://127.0.0.1:1", 6379, None])
def test_node_not_a_str_is_type_error(node):
    with pytest.raises(TypeError, match="str URL"):
        redlock.Redlock([node])


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"retry_count": -1}, redlock.InvalidArgument),
        ({"retry_count": 2**32}, redlock.InvalidArgument),
        ({"retry_count": 1.0}, TypeError),
        ({"retry_delay_ms": -5}, redlock.InvalidArgument),
        ({"retry_delay_ms": "200"}, TypeError),
        ({"drift_factor": 1.0}, redlock.InvalidArgument),
        ({"drift_factor": -0.5}, redlock.InvalidArgument),
        ({"drift_factor": float("nan")}, redlock.InvalidArgument),
        ({"drift_factor": float("inf")}, redlock.InvalidArgument),
        ({"drift_factor": "0.01"}, TypeError),
        ({"drift_factor": True}, TypeError),
        ({"connect_timeout_ms": 0}, redlock.InvalidArgument),
        ({"connect_timeout_ms": -1}, redlock.InvalidArgument),
        ({"connect_timeout_ms": 2**32}, redlock.InvalidArgument),
        ({"node_timeout_ms": -1}, redlock.InvalidArgument),
        ({"node_timeout_ms": 0.5}, TypeError),
        ({"max_ttl_ms": 0}, redlock.InvalidArgument),  # the library: 3 ms at least
        ({"max_ttl_ms": 2}, redlock.InvalidArgument),
        ({"max_ttl_ms": -1}, redlock.InvalidArgument),
        ({"max_ttl_ms": 2**32}, redlock.InvalidArgument),
        ({"max_ttl_ms": 1000.0}, TypeError),
        ({"max_ttl_ms": True}, TypeError),
        ({"restart_quarantine": 0}, TypeError),
        ({"restart_quarantine": None}, TypeError),
        ({"restart_quarantine": "false"}, TypeError),
    ],
)
def test_bad_options(kwargs, exc):
    with pytest.raises(exc):
        redlock.Redlock(["redis://127.0.0.1:1"], **kwargs)


def test_good_options_are_accepted():
    m = redlock.Redlock(
        ["redis://127.0.0.1:1", "127.0.0.1:2", "redis://user:pw@127.0.0.1:3/2"],
        retry_count=0,
        retry_delay_ms=0,
        drift_factor=0,
        connect_timeout_ms=1,
        node_timeout_ms=0,
    )
    assert (m.node_count, m.quorum) == (3, 2)
    m.close()
    for kwargs in (
        {"retry_count": 7},
        {"retry_delay_ms": 7},
        {"node_timeout_ms": 9},
        {"connect_timeout_ms": 9},
        {"drift_factor": 0.5},
        {"max_ttl_ms": 3},
        {"max_ttl_ms": 2**32 - 1},
        {"restart_quarantine": False},
        {"restart_quarantine": True},
    ):
        redlock.Redlock(["127.0.0.1:1"], **kwargs).close()


def test_closed_manager_raises_and_close_is_idempotent(cluster, resource):
    m = redlock.Redlock(cluster.urls, node_timeout_ms=500)
    with m:
        assert not m.closed
    assert m.closed
    m.close()
    m.close()
    for call in (
        lambda: m.lock(resource, ttl_ms=1_000),
        lambda: m.lock(resource, ttl_ms=1_000, wait_ms=5),
        lambda: m.try_lock(resource, ttl_ms=1_000),
    ):
        with pytest.raises(redlock.HandleClosed, match="manager is closed") as ei:
            call()
        assert isinstance(ei.value, redlock.RedlockError)
        assert ei.value.status == redlock.Status.NULL_ARGUMENT
    assert (m.node_count, m.quorum) == (3, 2)  # recorded facts stay readable
    assert "closed" in repr(m)
    assert m._handle.freed


def test_closed_lease_raises(cluster, mgr, resource):
    lk = mgr.try_lock(resource, ttl_ms=5_000)
    token, value = lk.token, lk.value
    lk.close()
    lk.close()
    assert lk._handle.freed
    # A closed lease's state is read, never raised (issue #39) ...
    assert (lk.validity_ms, lk.valid, lk.lost, lk.renewing) == (0, False, False, False)
    # ... while its operations raise.
    for call in (
        lambda: lk.extend(1_000),
        lambda: lk.unlock(),
        lambda: lk.auto_renew(),
        lambda: lk.stop_renewal(),
        lambda: lk.wait_lost(1),
    ):
        with pytest.raises(redlock.HandleClosed, match="lease is closed"):
            call()
    assert (lk.token, lk.value) == (token, value) and lk.resource == resource.encode()
    assert lk.granted >= 2 and len(lk.node_outcomes) == 3
    # Closing never unlocks: the lock is still on the nodes.
    assert cluster.holding(key_of(resource), value) >= 2
    with pytest.raises(redlock.NotAcquired):
        mgr.try_lock(resource, ttl_ms=1_000)


def test_exceptions_hierarchy_and_pickling():
    for cls in (
        redlock.NotAcquired,
        redlock.NotHeld,
        redlock.Unavailable,
        redlock.InvalidArgument,
        redlock.NullArgument,
        redlock.HandleClosed,
        redlock.Internal,
        redlock.Panic,
    ):
        assert issubclass(cls, redlock.RedlockError)
    assert issubclass(redlock.InvalidArgument, ValueError)
    assert not issubclass(redlock.NotAcquired, ValueError)
    assert issubclass(redlock.HandleClosed, redlock.NullArgument)
    assert issubclass(redlock.LibraryNotFoundError, OSError)
    e = redlock.NotHeld("not held: 1/3 confirmed", 2)
    assert str(e) == "not held: 1/3 confirmed"
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is redlock.NotHeld and e2.status == 2 and e2.message == e.message
    assert redlock.RedlockError("x").status is None
    assert redlock.STATUS_EXCEPTIONS[1] is redlock.NotAcquired


def test_internal_u32_helper_bounds():
    assert _args._u32("x", 0) == 0
    assert _args._u32("x", 2**32 - 1) == 2**32 - 1
    with pytest.raises(redlock.InvalidArgument):
        _args._u32("x", 2**32)
    with pytest.raises(TypeError):
        _args._u32("x", False)


def test_handles_cannot_be_pickled(mgr, resource):
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(mgr)
    with mgr.try_lock(resource, ttl_ms=2_000) as lk:
        with pytest.raises(TypeError, match="cannot be pickled"):
            pickle.dumps(lk)


def test_forked_child_cannot_use_the_parents_handles(cluster, mgr, resource):
    import os

    lk = mgr.try_lock(resource, ttl_ms=10_000)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        code = 1
        try:
            os.close(r)
            msgs = []
            for call in (lambda: mgr.try_lock(resource + ":c", ttl_ms=1_000), lambda: lk.unlock()):
                try:
                    call()
                    msgs.append("no error")
                except redlock.RedlockError as e:
                    msgs.append(type(e).__name__ + ":" + ("forked child" in e.message) * "fork")
            lk.close()
            mgr.close()  # neither frees the parent's copies
            os.write(w, "|".join(msgs).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        report = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert report == "RedlockError:fork|RedlockError:fork"
    # The parent's handles are intact and the lock is still held.
    assert not mgr.closed and not lk.closed
    assert lk.validity_ms > 0
    lk.unlock()
    cluster.released(key_of(resource))
    lk.close()
