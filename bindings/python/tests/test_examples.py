"""The examples in ``examples/``, run as their users would: as child processes against real
redis-server nodes (the module's three).

``metrics_server.py`` listens on a free loopback port of its own choosing (``--listen
127.0.0.1:0``; the port comes from its first line of output, so no port is probed and then
lost to another process), is scraped once over HTTP, and must stop by itself when its bound is
reached; it is killed by PID if it does not. Every wait is bounded."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import List

from conftest import PACKAGE_ROOT
from redis_nodes import key_of
from test_metrics import check_exposition, samples

EXAMPLES = os.path.join(PACKAGE_ROOT, "examples")


def _lines(proc: subprocess.Popen) -> "queue.Queue[str]":
    """The child's stdout, line by line, read on a thread (so that a wait for a line is
    bounded); ``""`` once it is closed."""
    out: "queue.Queue[str]" = queue.Queue()

    def read() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            out.put(line)
        out.put("")

    threading.Thread(target=read, daemon=True).start()
    return out


def test_metrics_server_serves_the_metrics_text(cluster, resource):
    env = dict(os.environ)
    # Run from outside the checkout's package directory: the example finds the package
    # beside it by itself; the library is found as the tests' is (REDLOCK_LIB, if set).
    env.pop("PYTHONPATH", None)
    args = [
        sys.executable, os.path.join(EXAMPLES, "metrics_server.py"),
        "--nodes", ",".join(cluster.urls),
        "--listen", "127.0.0.1:0",
        "--resource", resource,
        "--requests", "3",
        "--serve-for", "120",  # a safety net: the three requests below end it
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/"
    )
    try:
        lines = _lines(proc)
        first = lines.get(timeout=60)
        assert first.startswith("serving http://127.0.0.1:"), (first, proc.stderr.read())
        url = first.split()[1]
        assert url.endswith("/metrics")

        with urllib.request.urlopen(url, timeout=30) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode("utf-8")
        types = check_exposition(text)
        assert types["redlock_acquire_total"] == "counter"
        s = samples(text)
        assert s['redlock_acquire_total{result="granted"}'] == 1  # the example's one lock
        assert s['redlock_unlock_total{result="ok"}'] == 1
        assert sum(v for k, v in s.items() if k.startswith("redlock_node_requests_total{")) > 0
        # Scrapes count nothing: the second one reads the same acquisitions.
        with urllib.request.urlopen(url, timeout=30) as r:
            again = samples(r.read().decode("utf-8"))
        assert again['redlock_acquire_total{result="granted"}'] == 1
        try:
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=30)
            raise AssertionError("/other was served")
        except urllib.error.HTTPError as e:
            assert e.code == 404

        # The third request was its bound: it stops by itself, with status 0.
        rc = proc.wait(timeout=60)
        rest: List[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            line = lines.get(timeout=10)
            if not line:
                break
            rest.append(line)
        assert rc == 0, proc.stderr.read()
        assert rest == ["stopped after 3 requests\n"], rest
        assert cluster.present(key_of(resource)) == 0  # its lock was released
    finally:
        if proc.poll() is None:
            proc.kill()  # by PID (Popen.kill)
            proc.wait(timeout=30)
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()


def test_metrics_server_stops_after_serve_for(cluster, resource):
    args = [
        sys.executable, os.path.join(EXAMPLES, "metrics_server.py"),
        "--nodes", ",".join(cluster.urls),
        "--listen", "127.0.0.1:0",
        "--resource", resource,
        "--serve-for", "0.5",
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert out.splitlines()[0].startswith("serving http://127.0.0.1:")
        assert out.splitlines()[-1] == "stopped after 0 requests"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
