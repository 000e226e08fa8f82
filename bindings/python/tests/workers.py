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
