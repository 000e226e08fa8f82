#!/usr/bin/env python3
"""Latency of one uncontended lock+unlock cycle through the Python binding.

    python3 bindings/python/bench_cycle.py --nodes redis://127.0.0.1:7001,... --secs 3

Runs ``try_lock`` / ``unlock`` / ``close`` cycles on one resource for ``--secs`` seconds, after a
short warm-up (connections opened, code paths warm), and prints ONE JSON line to stdout::

    {"cycles": N, "p50_us": X, "p99_us": Y}

(``time.perf_counter_ns`` around each whole cycle; percentiles as the Rust benchmark computes
them: the sample at index ``round((n - 1) * p)`` of the sorted latencies; failed cycles are
not counted, and their number goes to stderr.) The Rust benchmark
(``examples/bench/main.rs``, ``bindings``) runs it with ``REDLOCK_LIB`` and
``PYTHONPATH=bindings/python`` set, over five nodes behind 1 ms delay proxies, and compares it
with its own uncontended row (TTL 10 s, 200 ms node timeout, one client thread).

The manager has the library's default configuration but for the node timeout, restart
quarantine included (as in the Rust rows): fresh nodes count at once (a brand-new cluster), and
nodes that another client has used already carry their markers. ``--no-restart-quarantine``
turns it off (only for nodes that persist every write; ``--restart-quarantine``, the default,
is still accepted).

A script, not part of the package; pytest does not collect it (it lies outside ``tests/``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def percentile(sorted_ns, p: float) -> float:
    if not sorted_ns:
        return 0.0
    return sorted_ns[int(round((len(sorted_ns) - 1) * p))] / 1000.0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", required=True, help="comma-separated node URLs")
    ap.add_argument("--secs", type=float, default=3.0, help="measured seconds (default 3)")
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds (default 0.5)")
    ap.add_argument("--ttl-ms", type=int, default=10_000, help="lock TTL (default 10000)")
    ap.add_argument("--node-timeout-ms", type=int, default=200, help="per-node timeout (200)")
    ap.add_argument("--max-cycles", type=int, default=200_000, help="stop after this many")
    ap.add_argument(
        "--restart-quarantine",
        dest="restart_quarantine",
        action="store_true",
        default=True,
        help="keep restart quarantine on (the default)",
    )
    ap.add_argument(
        "--no-restart-quarantine",
        dest="restart_quarantine",
        action="store_false",
        help="turn restart quarantine off (only for nodes that persist every write)",
    )
    args = ap.parse_args(argv)

    import redlock

    nodes = [u.strip() for u in args.nodes.split(",") if u.strip()]
    resource = f"bench:bind-python:{os.getpid()}".encode()
    ttl = args.ttl_ms
    failures = 0
    lat = []
    with redlock.Redlock(
        nodes,
        node_timeout_ms=args.node_timeout_ms,
        restart_quarantine=args.restart_quarantine,
    ) as mgr:
        try_lock = mgr.try_lock
        clock = time.perf_counter_ns
        RedlockError = redlock.RedlockError
        record = lat.append
        cap = args.max_cycles

        # Warm-up: connect to every node, fill caches; not measured.
        end = clock() + int(args.warmup * 1e9)
        while clock() < end:
            try:
                lk = try_lock(resource, ttl)
                lk.unlock()
                lk.close()
            except RedlockError:
                pass

        end = clock() + int(args.secs * 1e9)
        while True:
            t0 = clock()
            if t0 >= end or len(lat) >= cap:
                break
            try:
                lk = try_lock(resource, ttl)
                lk.unlock()
                lk.close()
            except RedlockError:
                failures += 1
                continue
            record(clock() - t0)

    lat.sort()
    if failures:
        print(f"bench_cycle: {failures} cycles failed (not counted)", file=sys.stderr)
    print(
        json.dumps(
            {
                "cycles": len(lat),
                "p50_us": round(percentile(lat, 0.50), 1),
                "p99_us": round(percentile(lat, 0.99), 1),
            }
        )
    )
    sys.stdout.flush()
    return 0 if lat else 1


if __name__ == "__main__":
    sys.exit(main())
