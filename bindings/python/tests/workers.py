"""Code run in child processes (multiprocessing, spawn) by test_concurrency.py.

The critical section checks mutual exclusion without trusting the lock: a marker file created
with O_EXCL (a second holder fails to create it) and a read-sleep-write counter file (a lost
update shows in the total).
"""

from __future__ import annotations

import os
import time
from typing import List


def critical_section(marker: str, counter: str) -> bool:
    """Returns False if another holder was inside at the same time."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    try:
        with open(counter) as f:
            n = int(f.read() or "0")
        time.sleep(0.003)
        with open(counter, "w") as f:
            f.write(str(n + 1))
    finally:
        os.close(fd)
        os.unlink(marker)
    return True


def contend(urls: List[str], resource: str, rounds: int, marker: str, counter: str, start=None):
    """Takes the lock ``rounds`` times; returns ``(violations, first attempt, last unlock)``
    (monotonic times). ``start``, a Barrier, lines the contenders up before the first attempt.
    Raises (so the process exits non-zero) if a lock cannot be had within its bounded wait."""
    import redlock

    violations = 0
    with redlock.Redlock(
        urls, retry_delay_ms=20, node_timeout_ms=500, connect_timeout_ms=1000
    ) as mgr:
        if start is not None:
            start.wait(30)  # raises BrokenBarrierError on timeout
        first = time.monotonic()
        for _ in range(rounds):
            with mgr.lock(resource, ttl_ms=10_000, wait_ms=20_000) as lk:
                if not critical_section(marker, counter):
                    violations += 1
                assert lk.validity_ms > 0
            time.sleep(0.002)  # give the others a chance between rounds
        last = time.monotonic()
    return violations, first, last


def process_main(urls, resource, rounds, marker, counter, start, results) -> None:
    results.put(contend(urls, resource, rounds, marker, counter, start))


# ---- fencing tokens (test_fencing.py) ----

#: ``redlock::scripts::FENCED_STORE_WRITE``: writes ``ARGV[2]`` to the hash ``KEYS[1]`` only if
#: the token ``ARGV[1]`` is larger than every token the record has seen; 1 if written, else 0.
FENCED_STORE_WRITE = (
    "local last = tonumber(redis.call('hget', KEYS[1], 'fence') or '0') or 0 "
    "if tonumber(ARGV[1]) > last then "
    "redis.call('hset', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2]) return 1 end "
    "return 0"
)


def fenced_write(store_port: int, record: str, token: int, value: str) -> int:
    """The fenced store write, on the store node: 1 if accepted, 0 if refused."""
    from redis_nodes import resp

    reply = resp(store_port, "EVAL", FENCED_STORE_WRITE, 1, record, token, value)
    if not isinstance(reply, int):
        raise RuntimeError(f"store write failed: {reply!r}")
    return reply


def fenced_grants(urls: List[str], resource: str, n_threads: int, per_thread: int, start=None):
    """``per_thread`` fenced grants in each of ``n_threads`` threads; returns every
    ``(time.monotonic_ns() right after the grant, token, "pid:thread")``. Each lock is released
    only after its time was taken, so the times are in grant order (the lock is held
    meanwhile)."""
    import threading

    import redlock

    records: list = []
    errors: list = []
    lock = threading.Lock()
    with redlock.Redlock(
        urls, retry_delay_ms=10, node_timeout_ms=500, connect_timeout_ms=1000
    ) as mgr:

        def work() -> None:
            mine = []
            me = f"{os.getpid()}:{threading.get_ident()}"
            try:
                for _ in range(per_thread):
                    lk = mgr.lock(resource, ttl_ms=10_000, wait_ms=30_000, fenced=True)
                    mine.append((time.monotonic_ns(), lk.fencing_token, me))
                    lk.unlock()
                    lk.close()
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                errors.append(repr(e))
            with lock:
                records.extend(mine)

        if start is not None:
            start.wait(30)
        threads = [threading.Thread(target=work) for _ in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    if errors:
        raise RuntimeError(f"fenced grants failed: {errors}")
    return records


def fenced_grants_main(urls, resource, n_threads, per_thread, start, results) -> None:
    try:
        results.put(("ok", fenced_grants(urls, resource, n_threads, per_thread, start)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        results.put(("error", repr(e)))


def paused_writer_main() -> None:
    """A subprocess (``tests/test_fencing.py``): for each round, takes a fenced lock with a
    short TTL, prints ``token <n>``, waits for a line on stdin (the parent SIGSTOPs it meanwhile,
    past its TTL), then performs its fenced store write with that token anyway, as a client
    that paused between its check and its write would, and prints ``write <0|1>``."""
    import json
    import sys

    import redlock

    args = json.loads(sys.argv[1])
    with redlock.Redlock(
        args["urls"], retry_delay_ms=10, node_timeout_ms=500, connect_timeout_ms=1000
    ) as mgr:
        for i in range(args["rounds"]):
            lk = mgr.lock(args["resource"], ttl_ms=args["ttl_ms"], wait_ms=10_000, fenced=True)
            print(f"token {lk.fencing_token} {lk.validity_ms}", flush=True)
            if sys.stdin.readline().strip() != "go":
                return
            token = lk.fencing_token
            written = fenced_write(args["store_port"], args["record"], token, f"child {i}")
            print(f"write {written}", flush=True)
            lk.close()  # its lock expired long ago; nothing to unlock
