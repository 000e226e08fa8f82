"""TLS (``rediss://``) through the binding: nodes that serve TLS only (``--port 0 --tls-port``),
with certificates made for this run by the Rust side (``conftest.tls_certs``). Every check of
what the nodes hold goes through a TLS inspection client of the tests' own."""

from __future__ import annotations

import dataclasses
import os
import pathlib

import pytest

import redlock
from redlock import NodeOutcome

from redis_nodes import Cluster, RedisServer, key_of, wait_until


def _tls_manager(new_manager, urls, certs, **kwargs):
    kwargs.setdefault("tls_ca_file", certs.ca)
    return new_manager(urls, **kwargs)


def test_lock_extend_unlock_over_mutual_tls(make_cluster, new_manager, tls_certs, resource):
    certs = dataclasses.replace(tls_certs, auth_clients=True)
    c = make_cluster(3, certs)
    assert all(u.startswith("rediss://127.0.0.1:") for u in c.urls)
    m = _tls_manager(
        new_manager,
        c.urls,
        certs,
        tls_client_cert=certs.client_cert,
        tls_client_key=pathlib.Path(certs.client_key),  # any os.PathLike
    )
    lk = m.try_lock(resource, ttl_ms=10_000)
    key = key_of(resource)
    assert lk.granted >= 2
    assert set(lk.node_outcomes) <= {NodeOutcome.SUCCESS, NodeOutcome.PENDING}
    wait_until(lambda: c.holding(key, lk.value) == 3, what="the key on every TLS node")
    lk.extend(20_000)
    wait_until(lambda: all(s.pttl(key) > 10_000 for s in c.servers), what="the extension")
    lk.unlock()
    c.released(key)
    # Without a client certificate these nodes refuse the session: the error names each node
    # and says why.
    bare = _tls_manager(new_manager, c.urls, certs)
    with pytest.raises(redlock.Unavailable) as ei:
        bare.try_lock(resource, ttl_ms=10_000)
    msg = ei.value.message
    assert msg.count("TLS failed") == 3 and "client certificate" in msg, msg
    assert "rediss://127.0.0.1:" in msg and "-----BEGIN" not in msg


def test_a_mixed_cluster_and_a_node_with_an_untrusted_certificate(
    make_cluster, new_manager, tls_certs, resource
):
    tls = make_cluster(2, tls_certs)
    plain = make_cluster(1)
    urls = tls.urls + plain.urls
    m = _tls_manager(new_manager, urls, tls_certs)
    lk = m.try_lock(resource, ttl_ms=10_000)
    assert lk.granted >= 2
    lk.unlock()
    # Trusting another CA: both TLS nodes refuse to count, the plain one alone is no quorum.
    other_ca = os.path.join(os.path.dirname(tls_certs.ca), "other-ca.pem")
    m = _tls_manager(new_manager, urls, tls_certs, tls_ca_file=other_ca)
    with pytest.raises(redlock.Unavailable) as ei:
        m.try_lock(resource, ttl_ms=10_000)
    assert ei.value.message.count("not signed by a trusted CA") == 2, ei.value.message


def test_skipping_verification_is_explicit(make_cluster, new_manager, tls_certs, resource):
    c = make_cluster(3, tls_certs)
    m = new_manager(c.urls, tls_insecure_skip_verify=True)
    with m.lock(resource, ttl_ms=5_000) as lk:
        assert lk.granted >= 2


def test_a_server_name_override(make_cluster, new_manager, tls_certs, resource):
    c = make_cluster(3, tls_certs)
    # The node certificate names 127.0.0.1, ::1 and localhost: "localhost" verifies,
    # another name does not.
    m = _tls_manager(new_manager, c.urls, tls_certs, tls_server_name="localhost")
    m.try_lock(resource, ttl_ms=5_000).unlock()
    m = _tls_manager(new_manager, c.urls, tls_certs, tls_server_name="redis.example")
    with pytest.raises(redlock.Unavailable) as ei:
        m.try_lock(resource, ttl_ms=5_000)
    assert "redis.example" in ei.value.message


def test_tls_options_are_checked_when_the_manager_is_made(tls_certs, tmp_path):
    node = ["rediss://127.0.0.1:1"]
    missing = str(tmp_path / "missing.pem")
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(node, tls_ca_file=missing)
    assert missing in ei.value.message
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(node, tls_ca_file=tls_certs.client_key)
    assert tls_certs.client_key in ei.value.message and "PRIVATE KEY-----" not in ei.value.message
    with pytest.raises(redlock.InvalidArgument):
        redlock.Redlock(node, tls_client_cert=tls_certs.client_cert)  # without its key
    with pytest.raises(redlock.InvalidArgument) as ei:
        redlock.Redlock(
            node, tls_client_cert=tls_certs.client_cert, tls_client_key=tls_certs.server_key
        )
    assert "does not belong" in ei.value.message
    with pytest.raises(redlock.InvalidArgument):
        redlock.Redlock(node, tls_server_name="not a name!")
    with pytest.raises(TypeError):
        redlock.Redlock(node, tls_ca_file=3)
    with pytest.raises(TypeError):
        redlock.Redlock(node, tls_insecure_skip_verify="yes")
    assert NodeOutcome.TLS == 10
    with redlock.Redlock(node, tls_ca_file=tls_certs.ca, tls_server_name="localhost"):
        pass  # valid: nothing is connected yet


def test_restart_of_a_tls_node(new_manager, tls_certs, resource):
    s = RedisServer(tls_certs)
    try:
        c = Cluster.__new__(Cluster)
        c.servers = [s]
        m = _tls_manager(new_manager, c.urls, tls_certs, max_ttl_ms=1_000)
        m.try_lock(resource, ttl_ms=500).unlock()
        s.restart()

        def counts_again() -> bool:
            try:
                m.try_lock(resource, ttl_ms=500).unlock()
                return True
            except (redlock.Unavailable, redlock.NotAcquired):
                return False

        # Reconnected over TLS, quarantined for the maximum TTL, then counted again.
        wait_until(counts_again, timeout=15, interval=0.05, what="the restarted node to count")
    finally:
        s.stop()
