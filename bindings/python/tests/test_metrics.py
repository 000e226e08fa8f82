"""Redlock.metrics(): the manager's counters in the Prometheus text exposition format
(redlock_manager_metrics, snprintf-style)."""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

import pytest

import redlock

from conftest import first_contact

#: A sample line: a metric name, optional labels, a value.
SAMPLE = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? -?[0-9.e+-]+(Inf)?$")
#: ``# HELP name text`` and ``# TYPE name kind``.
COMMENT = re.compile(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$")
KINDS = {"counter", "gauge", "histogram", "summary", "untyped"}


def check_exposition(text: str) -> Dict[str, str]:
    """Checks the text format; returns ``{family: type}``. Every sample must match
    :data:`SAMPLE` and belong to a family whose ``# TYPE`` line came before it (a histogram's
    ``_bucket``, ``_sum`` and ``_count`` samples belong to the histogram)."""
    assert text.endswith("\n") and "\0" not in text
    types: Dict[str, str] = {}
    buckets: Dict[Tuple[str, str], List[float]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            m = COMMENT.match(line)
            assert m, f"malformed comment line: {line!r}"
            if m.group(1) == "TYPE":
                assert m.group(3) in KINDS, line
                assert m.group(2) not in types, f"family typed twice: {line!r}"
                types[m.group(2)] = m.group(3)
            continue
        assert SAMPLE.match(line), f"malformed sample line: {line!r}"
        name = re.match(r"[a-zA-Z0-9_:]+", line).group(0)
        assert name.startswith("redlock_"), line
        family = name
        if family not in types:
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            assert types.get(base) in ("histogram", "summary"), f"no # TYPE before {line!r}"
            family = base
        if types[family] == "histogram" and name.endswith("_bucket"):
            labels = re.search(r"\{(.*)\}", line).group(1)
            assert 'le="' in labels, line
            series = re.sub(r',?le="[^"]*"', "", labels)
            buckets.setdefault((family, series), []).append(float(line.rsplit(" ", 1)[1]))
    for (family, series), counts in buckets.items():
        assert counts == sorted(counts), f"{family}{{{series}}} buckets not cumulative"
    return types


def samples(text: str) -> Dict[str, float]:
    """``{name{labels}: value}`` for every sample line."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def test_metrics_count_known_operations(cluster, new_manager, resource):
    # Not this manager's first lock on a brand-new cluster, which would count one attempt more
    # (the attempt that makes the nodes trusted is followed by another at once).
    first_contact(cluster)
    m = new_manager(cluster.urls, retry_count=0)
    before = m.metrics()
    check_exposition(before)
    assert samples(before)['redlock_acquire_total{result="granted"}'] == 0

    leases = []
    for i in range(3):
        lk = m.lock(f"{resource}:{i}", ttl_ms=5_000)
        lk.unlock()
        leases.append(lk)
    with pytest.raises(redlock.NotHeld):
        leases[0].unlock()  # a double unlock
    holder = new_manager(cluster.urls).try_lock(resource, ttl_ms=5_000)  # another manager
    with pytest.raises(redlock.NotAcquired):
        m.try_lock(resource, ttl_ms=1_000)
    holder.unlock()
    for lk in leases + [holder]:
        lk.close()

    text = m.metrics()
    types = check_exposition(text)
    lines = text.splitlines()
    for expected in (
        'redlock_acquire_total{result="granted"} 3',
        'redlock_acquire_total{result="not_acquired"} 1',
        'redlock_acquire_total{result="unavailable"} 0',
        'redlock_unlock_total{result="ok"} 3',
        'redlock_unlock_total{result="not_held"} 1',
        "redlock_acquire_attempts_total 4",  # retry_count=0: one attempt per call
        "redlock_acquire_retries_total 0",
        "redlock_nodes_quarantined 0",
    ):
        assert expected in lines, expected
    assert types["redlock_acquire_total"] == "counter"
    assert types["redlock_unlock_total"] == "counter"
    values = samples(text)
    for i, server in enumerate(cluster.servers):  # in the manager's node order
        key = f'redlock_node_requests_total{{node="{i}",addr="127.0.0.1:{server.port}"}}'
        assert values[key] >= 1, key


def test_metrics_text_is_whole_whatever_the_first_buffer(cluster, new_manager, resource):
    from redlock import _ffi

    m = new_manager(cluster.urls)
    with m.try_lock(resource, ttl_ms=2_000):
        pass
    text = m.metrics()
    c = _ffi.lib()
    p = m._handle.acquire()
    try:
        full = c.redlock_manager_metrics(p, None, 0)  # snprintf-style sizing
    finally:
        m._handle.release()
    assert len(text.encode()) == full > 2_000
    # A first buffer far too small: the binding sizes it from the returned length.
    m._metrics_len = 16
    assert m.metrics() == text
    assert m._metrics_len > full
    # Counted since the manager was created, per manager.
    fresh = new_manager(cluster.urls)
    assert 'redlock_acquire_total{result="granted"} 0' in fresh.metrics().splitlines()
    assert 'redlock_acquire_total{result="granted"} 1' in text.splitlines()


def test_node_states_and_metrics_need_an_open_manager(cluster, new_manager):
    m = new_manager(cluster.urls)
    none = redlock.QuarantineReason.NONE
    assert [tuple(s) for s in m.node_states()] == [(i, False, 0, none) for i in range(3)]
    m.close()
    for call in (m.node_states, m.metrics):
        with pytest.raises(redlock.HandleClosed, match="manager is closed"):
            call()
