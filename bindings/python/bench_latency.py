#!/usr/bin/env python3
"""Grant rate on nodes at different distances: this library against pottery, one schedule.

    python3 bindings/python/bench_latency.py --secs 20 --workers 4

Starts five local redis-server nodes, four of them behind delay proxies (3, 8, 15 and 20 ms
each way, the fault suite's ``latency`` schedule: every quorum needs a node 16 ms or more
away), then, for each client in turn, ``--workers`` processes that take turns on one lock for
``--secs`` seconds: an attempt that may wait up to 300 ms, a critical section of 20–200 ms,
a release. TTL 1 s. Each client gets its own default per-node timeouts (this library: derived
from each node's round trips; pottery: none, it waits for every node).

Prints a Markdown table: attempts, grants, grants per second, the median hand-over (from one
worker's release to the next grant), the longest stretch without a grant, and overlaps (two workers' critical sections overlapping in time, on one machine
clock; a mutual-exclusion violation). pottery (``pip install pottery``) is skipped with a
note when it is not installed. The library is found as the tests find it (``REDLOCK_LIB`` or
the repository's ``target/release``).

A script, not part of the package; pytest does not collect it (it lies outside ``tests/``).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "tests"))

#: One-way delay per node, in milliseconds (node 0 is reached directly).
DELAYS_MS = [0, 3, 8, 15, 20]
TTL_MS = 1000
WAIT_MS = 300
HOLD_MS = (20, 200)


# ---- the delay proxy (its own process, one asyncio loop for every proxied node) ----


async def _pump(reader, writer, delay: float) -> None:
    """Delivers every chunk `delay` seconds after it arrived, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    async def deliver() -> None:
        while True:
            at, data = await queue.get()
            if data is None:
                writer.close()
                return
            pause = at - loop.time()
            if pause > 0:
                await asyncio.sleep(pause)
            writer.write(data)
            await writer.drain()

    task = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((loop.time() + delay, data))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((loop.time() + delay, None))
    try:
        await task
    except (ConnectionError, OSError):
        pass


async def _serve(pairs, ready) -> None:
    servers = []
    ports = []
    for upstream, delay_ms in pairs:
        delay = delay_ms / 1000.0

        async def handle(cr, cw, upstream=upstream, delay=delay):
            try:
                sr, sw = await asyncio.open_connection("127.0.0.1", upstream)
            except OSError:
                cw.close()
                return
            await asyncio.gather(_pump(cr, sw, delay), _pump(sr, cw, delay))

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(srv)
        ports.append(srv.sockets[0].getsockname()[1])
    ready.send(ports)
    await asyncio.Event().wait()


def _proxy_main(pairs, ready) -> None:
    asyncio.run(_serve(pairs, ready))


# ---- the workers ----


def _redlock_worker(urls, end: float, seed: int, out) -> None:
    import redlock

    mgr = redlock.Redlock(urls, retry_delay_ms=10, max_ttl_ms=TTL_MS)
    rng = random.Random(seed)
    records = []
    while time.monotonic() < end:
        t0 = time.monotonic_ns()
        try:
            lease = mgr.acquire("shared", TTL_MS, wait_ms=WAIT_MS)
        except (redlock.NotAcquired, redlock.Unavailable):
            records.append(("E", t0, 0, 0))
            time.sleep(0.005)
            continue
        t1 = time.monotonic_ns()
        time.sleep(rng.uniform(*HOLD_MS) / 1000.0)
        t2 = time.monotonic_ns()
        try:
            lease.unlock()
        except redlock.RedlockError:
            pass
        lease.close()
        records.append(("G", t0, t1, t2))
    mgr.close()
    out.put(records)


def _pottery_worker(ports, end: float, seed: int, out) -> None:
    import redis
    from pottery import Redlock

    masters = {redis.Redis(host="127.0.0.1", port=p) for p in ports}
    lk = Redlock(key="shared", masters=masters, auto_release_time=TTL_MS / 1000.0)
    rng = random.Random(seed)
    records = []
    while time.monotonic() < end:
        t0 = time.monotonic_ns()
        try:
            ok = lk.acquire(timeout=WAIT_MS / 1000.0)
        except Exception:  # noqa: BLE001 - pottery raises its own errors for node failures
            ok = False
        if not ok:
            records.append(("E", t0, 0, 0))
            time.sleep(0.005)
            continue
        t1 = time.monotonic_ns()
        time.sleep(rng.uniform(*HOLD_MS) / 1000.0)
        t2 = time.monotonic_ns()
        try:
            lk.release()
        except Exception:  # noqa: BLE001 - an expired lock cannot be released
            pass
        records.append(("G", t0, t1, t2))
    out.put(records)


def _overlaps(grants) -> int:
    """Pairs of critical sections [grant, release] that overlap (sorted sweep)."""
    spans = sorted((g[2], g[3]) for g in grants)
    n = 0
    latest_end = 0
    for start, end in spans:
        if start < latest_end:
            n += 1
        latest_end = max(latest_end, end)
    return n


def run(client: str, urls, ports, secs: float, workers: int):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    start_ns = time.monotonic_ns()
    end = time.monotonic() + secs
    target = _redlock_worker if client == "redlock" else _pottery_worker
    arg = urls if client == "redlock" else ports
    procs = [ctx.Process(target=target, args=(arg, end, i + 1, out)) for i in range(workers)]
    for p in procs:
        p.start()
    records = []
    for _ in procs:
        records.extend(out.get(timeout=secs + 60))
    for p in procs:
        p.join(timeout=30)
    grants = sorted((r for r in records if r[0] == "G"), key=lambda g: g[2])
    # From one release to the next grant (the lock's hand-over), and the longest stretch with
    # no grant at all.
    handoffs = sorted(
        (b[2] - a[3]) / 1e6 for a, b in zip(grants, grants[1:]) if b[2] >= a[3]
    )
    handoff = handoffs[len(handoffs) // 2] if handoffs else float("nan")
    marks = [start_ns] + [g[2] for g in grants] + [start_ns + int(secs * 1e9)]
    longest = max(b - a for a, b in zip(marks, marks[1:])) / 1e9
    return len(records), len(grants), handoff, longest, _overlaps(grants)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--secs", type=float, default=20.0)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--clients", default="redlock,pottery")
    a = ap.parse_args()
    if not 0 < a.secs <= 600 or not 1 <= a.workers <= 32:
        ap.error("--secs in (0, 600], --workers in [1, 32]")

    from redis_nodes import RedisServer, resp

    servers = [RedisServer() for _ in DELAYS_MS]
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    pairs = [(s.port, d) for s, d in zip(servers, DELAYS_MS) if d]
    proxy = ctx.Process(target=_proxy_main, args=(pairs, send), daemon=True)
    proxy.start()
    proxied = iter(recv.recv())
    ports = [s.port if d == 0 else next(proxied) for s, d in zip(servers, DELAYS_MS)]
    urls = [f"redis://127.0.0.1:{p}" for p in ports]
    print(
        f"5 nodes, one-way delays {DELAYS_MS} ms, {a.workers} worker processes, {a.secs:g} s "
        f"per client, TTL {TTL_MS} ms, waits up to {WAIT_MS} ms, critical sections "
        f"{HOLD_MS[0]}-{HOLD_MS[1]} ms\n"
    )
    print(
        "| client | attempts | grants | grants/s | median hand-over (release to next grant) "
        "| longest stretch without a grant | overlaps |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    try:
        for client in a.clients.split(","):
            if client == "pottery":
                try:
                    import pottery  # noqa: F401
                except ImportError:
                    print("| pottery | not installed (pip install pottery) | | | | | |")
                    continue
            elif client != "redlock":
                ap.error(f"unknown client {client!r}")
            for s in servers:
                resp(s.port, "FLUSHALL")
            attempts, grants, handoff, longest, overlaps = run(
                client, urls, ports, a.secs, a.workers
            )
            print(
                f"| {client} | {attempts} | {grants} | {grants / a.secs:.1f} | "
                f"{handoff:.1f} ms | {longest:.2f} s | {overlaps} |",
                flush=True,
            )
    finally:
        proxy.terminate()
        proxy.join(timeout=10)
        for s in servers:
            s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
