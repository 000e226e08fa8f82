"""Fixtures: the package from this source tree, and redis-server nodes started per module or per
test (never shared with another test run, so runs may proceed in parallel)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Callable, Iterator, List, Optional

import pytest

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(TESTS_DIR)  # bindings/python
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_ROOT))

# Test this source tree (not an installed copy), and let the helper modules (and the
# multiprocessing children, which inherit sys.path) import each other.
for path in (TESTS_DIR, PACKAGE_ROOT):
    if path not in sys.path:
        sys.path.insert(0, path)

import redlock  # noqa: E402
from redis_nodes import Cluster, TlsFiles, redis_server_binary  # noqa: E402

# Generous timeouts: CI machines have 2 busy cores.
NODE_TIMEOUT_MS = 500
CONNECT_TIMEOUT_MS = 1000


def _start_cluster(n: int, tls: Optional[TlsFiles] = None) -> Cluster:
    try:
        redis_server_binary()
    except AssertionError as e:
        pytest.fail(str(e), pytrace=False)
    return Cluster(n, tls)


def _tls_certs_program() -> str:
    """The Rust example that writes the TLS test certificates (``examples/tls_certs.rs``),
    built by ``cargo test`` (which .ci/run runs first) or, when missing, here."""
    path = os.environ.get("REDLOCK_TLS_CERTS") or os.path.join(
        REPO_ROOT, "target", "release", "examples", "tls_certs"
    )
    if not os.path.exists(path):
        subprocess.run(
            ["cargo", "build", "--release", "--example", "tls_certs"],
            cwd=REPO_ROOT,
            check=True,
            timeout=600,
        )
    return path


@pytest.fixture(scope="session")
def tls_certs(tmp_path_factory) -> TlsFiles:
    """A test CA, a node certificate (127.0.0.1) and a client certificate, PEM, made for this
    run (no committed keys); ``other_ca`` beside them is a CA that signed none of them."""
    d = str(tmp_path_factory.mktemp("tls"))
    subprocess.run([_tls_certs_program(), d], check=True, timeout=120, stdout=subprocess.DEVNULL)
    j = lambda name: os.path.join(d, name)  # noqa: E731
    return TlsFiles(
        ca=j("ca.pem"),
        server_cert=j("server.pem"),
        server_key=j("server.key"),
        client_cert=j("client.pem"),
        client_key=j("client.key"),
    )


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Three nodes shared by the tests of one module (each test uses its own resources)."""
    c = _start_cluster(3)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def make_cluster() -> Iterator[Callable[[int], Cluster]]:
    """A factory of clusters owned by one test (for tests that kill or pause nodes)."""
    made: List[Cluster] = []

    def make(n: int, tls: Optional[TlsFiles] = None) -> Cluster:
        c = _start_cluster(n, tls)
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.stop()


def make_manager(urls: List[str], **kwargs) -> redlock.Redlock:
    """A manager with the tests' generous timeouts and a short retry delay (overridable); every
    other option, restart quarantine included, at the library's default. Nodes just started
    are a brand-new cluster, which counts at once."""
    kwargs.setdefault("node_timeout_ms", NODE_TIMEOUT_MS)
    kwargs.setdefault("connect_timeout_ms", CONNECT_TIMEOUT_MS)
    kwargs.setdefault("retry_count", 3)
    kwargs.setdefault("retry_delay_ms", 50)
    return redlock.Redlock(urls, **kwargs)


def first_contact(c: Cluster) -> None:
    """Puts a cluster in use as a first client would: a manager with the default
    configuration takes and releases one lock (a brand-new cluster counts at once) and every
    node gets its restart-quarantine marker. For tests that take nodes down before their own
    first lock: a brand-new cluster is trusted only once every node has answered (or a
    maximum TTL after the others were first seen), so a node down from the very start keeps a
    fresh cluster waiting."""
    with make_manager(c.urls) as m:
        with m.lock(f"py-test:first-contact:{uuid.uuid4().hex}", ttl_ms=5_000):
            pass
    c.wait_marked()


@pytest.fixture
def new_manager() -> Iterator[Callable[..., redlock.Redlock]]:
    """A factory of managers (``new_manager(urls, **options)``) closed at teardown."""
    made: List[redlock.Redlock] = []

    def new(urls: List[str], **kwargs) -> redlock.Redlock:
        m = make_manager(urls, **kwargs)
        made.append(m)
        return m

    try:
        yield new
    finally:
        for m in made:
            m.close()


@pytest.fixture
def mgr(cluster: Cluster, new_manager) -> redlock.Redlock:
    """A manager over the module's three nodes."""
    return new_manager(cluster.urls)


@pytest.fixture
def resource(request: pytest.FixtureRequest) -> str:
    """A resource name unique to this test and this run."""
    return f"py-test:{request.node.name}:{uuid.uuid4().hex}"
