#!/usr/bin/env python3
"""Serves a Redlock manager's metrics over HTTP for Prometheus to scrape.

    python3 bindings/python/examples/metrics_server.py \\
        --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \\
        --listen 127.0.0.1:9108 --serve-for 600

Creates a manager over ``--nodes``, takes and releases one lock on ``--resource`` (so that the
counters have moved when the first scrape comes), then answers ``GET /metrics`` with
``mgr.metrics()`` (the Prometheus text exposition format, ``text/plain; version=0.0.4``) and
anything else with 404. Standard library only (:mod:`http.server`); each request runs on a
thread of its own, and ``metrics()`` does no network I/O, so a scrape never waits for the
nodes. In a program of your own, serve the manager your code locks through.

It serves until ``--serve-for`` seconds have passed, ``--requests`` requests have been
answered, or Ctrl-C (SIGINT) or SIGTERM, whichever comes first, then closes the manager and
exits 0. The first line on stdout is ``serving http://HOST:PORT/metrics``, with the port
actually bound (``--listen 127.0.0.1:0`` picks a free one). A Prometheus job for it::

    scrape_configs:
      - job_name: redlock
        static_configs:
          - targets: ["127.0.0.1:9108"]

Run from a checkout, it imports the package beside it (``bindings/python``) when ``redlock``
is not installed; the shared library is found as usual (``REDLOCK_LIB``, ...).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Optional, Tuple

try:
    import redlock
except ImportError:  # run from a checkout: the package lies one directory up
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import redlock

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def parse_listen(text: str) -> Tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as ``(host, port)``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


class MetricsServer(ThreadingHTTPServer):
    """An HTTP server that answers ``GET /metrics`` with ``mgr.metrics()`` and stops itself
    after ``max_requests`` answers (``None``: no limit)."""

    daemon_threads = True

    def __init__(
        self, address: Tuple[str, int], mgr: redlock.Redlock, max_requests: Optional[int]
    ) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, MetricsHandler)
        self.mgr = mgr
        self.max_requests = max_requests
        self.answered = 0
        self.count_lock = threading.Lock()

    def count_answer(self) -> None:
        with self.count_lock:
            self.answered += 1
            done = self.max_requests is not None and self.answered >= self.max_requests
        if done:
            # shutdown() waits for serve_forever() to return: not from its own thread.
            threading.Thread(target=self.shutdown, daemon=True).start()


class MetricsHandler(BaseHTTPRequestHandler):
    server: MetricsServer

    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        try:
            if self.path.split("?", 1)[0] == "/metrics":
                body = self.server.mgr.metrics().encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
            else:
                body = b"not found: try /metrics\n"
                self.send_response(404)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        finally:
            self.server.count_answer()

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", required=True, help="comma-separated node URLs")
    ap.add_argument(
        "--listen",
        type=parse_listen,
        default=("127.0.0.1", 9108),
        help="HOST:PORT to serve on (default 127.0.0.1:9108; port 0 picks a free one)",
    )
    ap.add_argument(
        "--resource", default="redlock-metrics-example", help="the resource locked once"
    )
    ap.add_argument("--serve-for", type=float, default=None, metavar="SECONDS",
                    help="stop after this many seconds (default: until Ctrl-C)")  # fmt: skip
    ap.add_argument("--requests", type=int, default=None, metavar="N",
                    help="stop after answering N requests")  # fmt: skip
    args = ap.parse_args(argv)

    nodes = [u.strip() for u in args.nodes.split(",") if u.strip()]
    with redlock.Redlock(nodes) as mgr:
        # One lock so that the counters have moved (acquire, unlock, per-node requests).
        with mgr.lock(args.resource, ttl_ms=5_000):
            pass
        server = MetricsServer(args.listen, mgr, args.requests)
        with server:
            host, port = server.server_address[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"serving http://{shown}:{port}/metrics", flush=True)
            timer = None
            if args.serve_for is not None:
                # shutdown() waits for serve_forever() to return: called from the timer's
                # thread.
                timer = threading.Timer(args.serve_for, server.shutdown)
                timer.daemon = True
                timer.start()
            # SIGTERM ends it as Ctrl-C does (shutdown() from another thread).
            signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
                target=server.shutdown, daemon=True).start())  # fmt: skip
            try:
                server.serve_forever(poll_interval=0.2)
            except KeyboardInterrupt:
                pass
            finally:
                if timer is not None:
                    timer.cancel()
        print(f"stopped after {server.answered} requests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
