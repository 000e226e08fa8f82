"""The latency benchmark script runs, and nodes 16-40 ms away count with default timeouts."""

from __future__ import annotations

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "bench_latency.py")


def test_far_nodes_count_and_no_sections_overlap():
    out = subprocess.run(
        [sys.executable, SCRIPT, "--secs", "3", "--workers", "2", "--clients", "redlock"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    row = re.search(r"^\| redlock \| (\d+) \| (\d+) \| [\d.]+ \| .* \| (\d+) \|$", out, re.M)
    assert row, out
    attempts, grants, overlaps = (int(g) for g in row.groups())
    # Every quorum needs a node 16 ms or more away: with the old TTL / 200 timeouts (10 ms
    # for a 1 s TTL) no attempt was ever granted.
    assert grants > 0, out
    assert attempts >= grants
    assert overlaps == 0, out
