"""Restart quarantine (on by default), against real redis-server processes each test starts.

A node holds a marker key, ``redlock-marker``, with its ``run_id``, written by the library only
while it trusts the node. A brand-new cluster (no node has a marker, every node younger than
the maximum TTL, every node answered) counts at once; a node that restarted (its ``run_id``
changed, its marker is stale or gone) or lost its keyspace (``FLUSHALL``) does not count for
the maximum TTL, and the manager says why (:class:`redlock.QuarantineReason`).

Timing: the tests never rely on winning a race. Waits for something to happen (a handshake
read, a quarantine's end) are polls bounded generously above. What safety requires is checked
from below: a node that lost its keys at ``t_loss`` (taken before the kill or the flush) must
not count before ``t_loss + max_ttl``; a time read right after a call returned is not earlier
than the library's decision. ``remaining_ms`` is at most ``max_ttl`` (+ 1 s for a restart, whose
start Redis reports in whole seconds) and never ends the quarantine before ``t_loss + max_ttl``
(1 ms of slack: the library rounds down). A node's outcome in an acquisition is only
meaningful once its handshake has been read, so probes repeat until it is not ``PENDING``,
``TIMEOUT``, ``UNREACHABLE`` or ``BACKOFF``. ``time.monotonic`` is ``CLOCK_MONOTONIC``, shared
by the processes of one machine and by the library.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from typing import List, Optional, Tuple

import pytest

import redlock
from redlock import NodeOutcome, NodeState, QuarantineReason

from conftest import CONNECT_TIMEOUT_MS, NODE_TIMEOUT_MS, PACKAGE_ROOT
from redis_nodes import MARKER_KEY, Cluster, key_of, wait_until

#: A short maximum TTL, so that quarantines end within the test, yet long enough that a running
#: manager sees a restart before that restart's quarantine is over, even on a loaded machine.
SHORT_MAX_TTL_MS = 3_000
#: The library's default maximum TTL.
DEFAULT_MAX_TTL_MS = 60_000
#: A probe's TTL: within every maximum TTL used here.
PROBE_TTL_MS = 1_000

#: Outcomes that say nothing of the node's standing: its handshake may not have been read.
UNSETTLED = (
    NodeOutcome.PENDING,
    NodeOutcome.TIMEOUT,
    NodeOutcome.UNREACHABLE,
    NodeOutcome.BACKOFF,
)

_probes = itertools.count()


def _manager(urls: List[str], **kwargs) -> redlock.Redlock:
    """The default configuration but for the tests' generous timeouts, and one attempt per
    call (so that an outcome is one attempt's)."""
    kwargs.setdefault("node_timeout_ms", NODE_TIMEOUT_MS)
    kwargs.setdefault("connect_timeout_ms", CONNECT_TIMEOUT_MS)
    kwargs.setdefault("retry_count", 0)
    return redlock.Redlock(urls, **kwargs)


def _probe(m: redlock.Redlock, resource: str) -> redlock.Lease:
    """One attempt on a resource name of its own; the lease is closed without unlocking (its
    key expires after a second), so that no probe ever meets another's key."""
    lk = m.try_lock(f"{resource}:probe:{next(_probes)}", ttl_ms=PROBE_TTL_MS)
    lk.close()
    return lk


def _settled(lk: redlock.Lease, nodes) -> bool:
    return all(lk.node_outcomes[i] not in UNSETTLED for i in nodes)


def _probe_until_settled(
    m: redlock.Redlock,
    resource: str,
    nodes,
    timeout: float = 15.0,
    must_not_count: Optional[Tuple[int, float]] = None,
) -> Tuple[redlock.Lease, float]:
    """Probes every 50 ms until an acquisition is granted in which every node of ``nodes`` was
    heard from; returns it and the time read right after it. ``must_not_count=(i, until)``:
    node ``i`` must never count before ``until`` (checked on every grant)."""
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        try:
            lk = _probe(m, resource)
        except (redlock.Unavailable, redlock.NotAcquired) as e:
            seen.append(repr(e))
        else:
            t = time.monotonic()
            seen.append(lk.node_outcomes)
            if must_not_count is not None:
                i, until = must_not_count
                assert not (lk.node_outcomes[i] == NodeOutcome.SUCCESS and t < until), seen
            if _settled(lk, nodes):
                return lk, t
        assert time.monotonic() < deadline, f"not settled within {timeout} s: {seen[-5:]}"
        time.sleep(0.05)


def _probe_until_counted(
    m: redlock.Redlock, resource: str, index: int, timeout: float
) -> Tuple[redlock.Lease, float]:
    """Probes every 50 ms until node ``index`` grants and counts; returns the lease and the
    time read right after it (not earlier than the library's decision)."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            lk = _probe(m, resource)
        except (redlock.Unavailable, redlock.NotAcquired) as e:
            last = e
        else:
            t = time.monotonic()
            last = lk.node_outcomes
            if last[index] == NodeOutcome.SUCCESS:
                return lk, t
        assert time.monotonic() < deadline, f"node {index} never counted; last: {last!r}"
        time.sleep(0.05)


def _in_use(c: Cluster, m: redlock.Redlock, resource: str) -> None:
    """Probes until ``m`` trusts every node and every node holds its marker (which the library
    writes only for a node it trusts). With a short maximum TTL, nodes that took long to start
    are no longer brand-new: the young ones then wait out their youth."""
    deadline = time.monotonic() + 15.0
    while True:
        try:
            _probe(m, resource)
        except (redlock.Unavailable, redlock.NotAcquired):
            pass
        if all(s.marked() for s in c.servers):
            break
        assert time.monotonic() < deadline, (m.node_states(), c.markers())
        time.sleep(0.05)
    assert m.node_states() == [NodeState(i, False, 0, QuarantineReason.NONE) for i in range(3)]


def _quarantine_texts(message: str, c: Cluster) -> dict:
    """``{index: (seconds, reason text)}`` for each node the message says is in quarantine."""
    found = {}
    for i, s in enumerate(c.servers):
        m = re.search(
            rf"node {i} \(127\.0\.0\.1:{s.port}\): in restart quarantine for another "
            r"(\d+(?:\.\d+)?) s \(([^()]*)\)",
            message,
        )
        if m:
            found[i] = (float(m.group(1)), m.group(2))
    return found


def _run_child(code: str, timeout: float = 120.0) -> dict:
    """Runs ``code`` in a new Python process (the package from this tree, the same library);
    returns the JSON object it printed last."""
    env = dict(os.environ)
    env["PYTHONPATH"] = PACKAGE_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---- a brand-new cluster ----


def test_fresh_cluster_counts_at_once_and_gets_markers(make_cluster, resource):
    c = make_cluster(3)
    assert c.markers() == [None, None, None]
    # Every option but the timeouts at the library's default: quarantine on, max TTL 60 s.
    with redlock.Redlock(
        c.urls, node_timeout_ms=NODE_TIMEOUT_MS, connect_timeout_ms=CONNECT_TIMEOUT_MS
    ) as m:
        # Nothing is known before the first connection.
        assert m.node_states() == [NodeState(i, False, 0, QuarantineReason.NONE) for i in range(3)]
        lk = m.try_lock(resource, ttl_ms=10_000)  # the very first attempt succeeds
        assert lk.granted >= m.quorum
        assert NodeOutcome.QUARANTINED not in lk.node_outcomes, lk.node_outcomes
        assert c.holding(key_of(resource), lk.value) >= m.quorum
        assert m.node_states() == [NodeState(i, False, 0, QuarantineReason.NONE) for i in range(3)]
        for s in m.node_states():
            assert type(s.reason) is QuarantineReason
        # Every node's marker holds its run_id (written right after the nodes were trusted).
        c.wait_marked()
        for s in c.servers:
            assert s.marker_run_id() == s.run_id()
            assert s.command("PTTL", MARKER_KEY) == -1  # no TTL
        lines = m.metrics().splitlines()
        assert "redlock_nodes_quarantined 0" in lines
        assert 'redlock_acquire_total{result="granted"} 1' in lines
        assert 'redlock_acquire_total{result="unavailable"} 0' in lines
        lk.unlock()
        lk.close()

    # A manager arriving later (another process would do the same) finds the markers: every
    # node is trusted from its handshake, so one attempt does it.
    with _manager(c.urls) as m2:
        lk = m2.try_lock(f"{resource}:2", ttl_ms=10_000)
        assert lk.granted >= m2.quorum
        assert NodeOutcome.QUARANTINED not in lk.node_outcomes
        assert "redlock_acquire_attempts_total 1" in m2.metrics().splitlines()
        lk.unlock()
        lk.close()


def test_fresh_cluster_with_a_node_down_waits_for_it(make_cluster, resource):
    c = make_cluster(3)
    c.servers[1].kill()
    with _manager(c.urls) as m:
        # Nodes 0 and 2 cannot tell a brand-new cluster from one whose node 1 holds the only
        # markers: undecided, and not counted (for at most the maximum TTL).
        deadline = time.monotonic() + 15.0
        while True:
            with pytest.raises(redlock.Unavailable) as ei:
                _probe(m, resource)
            states = m.node_states()
            if states[0].quarantined and states[2].quarantined:
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.05)
        for i in (0, 2):
            assert states[i].reason == QuarantineReason.UNDECIDED, states
            assert 0 < states[i].remaining_ms <= DEFAULT_MAX_TTL_MS, states
        assert states[1] == NodeState(1, False, 0, QuarantineReason.NONE)  # never heard from
        assert "not every node has answered" in ei.value.message
        assert c.markers() == [None, None, None]

        # Node 1 comes up (empty): every node has answered, none has a marker, all are young.
        c.servers[1].restart()
        _probe_until_counted(m, resource, 1, timeout=15.0)
        assert [s.reason for s in m.node_states()] == [QuarantineReason.NONE] * 3
        c.wait_marked()


# ---- a node that lost its keys ----


def test_restarted_node_is_quarantined_for_the_max_ttl(make_cluster, resource):
    c = make_cluster(3)
    m = _manager(c.urls, max_ttl_ms=SHORT_MAX_TTL_MS)
    try:
        _in_use(c, m, resource)
        old_run_id = c.servers[1].run_id()

        # kill -9 and start again on the same port, without persistence: back empty.
        t_kill = time.monotonic()
        c.servers[1].restart()
        assert c.servers[1].run_id() != old_run_id
        assert c.servers[1].marker() is None
        safe_from = t_kill + SHORT_MAX_TTL_MS / 1000

        # The running manager reconnects and sees the run_id change.
        lk, t = _probe_until_settled(m, resource, [1], must_not_count=(1, safe_from))
        assert lk.node_outcomes[1] == NodeOutcome.QUARANTINED, lk.node_outcomes
        assert lk.granted == 2
        st = m.node_states()[1]
        t = time.monotonic()
        assert st.quarantined and st.reason == QuarantineReason.RESTART_SEEN, st
        assert (safe_from - t) * 1000 - 1 <= st.remaining_ms <= SHORT_MAX_TTL_MS + 1_000, st
        assert m.node_states()[0].reason == m.node_states()[2].reason == QuarantineReason.NONE
        port = c.servers[1].port
        assert f'redlock_node_quarantined{{node="1",addr="127.0.0.1:{port}"}} 1' in (
            m.metrics().splitlines()
        )

        # A manager created after the restart, in a new process: node 1 has no marker while
        # the others have theirs, so it lost its keyspace. It counts there only once its
        # quarantine is over (then that process writes its marker).
        child = _run_child(
            f"""
            import json, time
            import redlock
            from redlock import NodeOutcome
            UNSETTLED = {[int(o) for o in UNSETTLED]!r}
            out = {{"early": []}}
            with redlock.Redlock({c.urls!r}, max_ttl_ms={SHORT_MAX_TTL_MS}, retry_count=0,
                                 node_timeout_ms={NODE_TIMEOUT_MS},
                                 connect_timeout_ms={CONNECT_TIMEOUT_MS}) as m:
                n = 0
                def probe():
                    global n
                    n += 1
                    try:
                        lk = m.try_lock("{resource}:child:%d" % n, ttl_ms={PROBE_TTL_MS})
                    except (redlock.Unavailable, redlock.NotAcquired):
                        return None
                    lk.close()
                    return [int(o) for o in lk.node_outcomes], lk.granted
                deadline = time.monotonic() + 15
                while "seen" not in out:
                    assert time.monotonic() < deadline, out
                    r = probe()
                    states = m.node_states()
                    t = time.monotonic()
                    if r is not None:
                        out["early"].append([r[0][1], t])
                        if not any(o in UNSETTLED for o in r[0]):
                            out["seen"] = dict(outcomes=r[0], granted=r[1], t=t,
                                               states=[list(s) for s in states])
                    time.sleep(0.05)
                deadline = time.monotonic() + 15
                while "counted_at" not in out:
                    assert time.monotonic() < deadline, out
                    r = probe()
                    t = time.monotonic()
                    if r is not None:
                        out["early"].append([r[0][1], t])
                        if r[0][1] == NodeOutcome.SUCCESS:
                            out["counted_at"] = t
                    time.sleep(0.05)
                out["final"] = [list(s) for s in m.node_states()]
            print(json.dumps(out))
            """
        )
        seen = child["seen"]
        assert seen["outcomes"][1] == NodeOutcome.QUARANTINED, child
        assert seen["outcomes"][0] == seen["outcomes"][2] == NodeOutcome.SUCCESS, child
        assert seen["granted"] == 2, child
        index, quarantined, remaining, reason = seen["states"][1]
        assert index == 1 and quarantined and reason == QuarantineReason.NO_MARKER, child
        assert (safe_from - seen["t"]) * 1000 - 1 <= remaining <= SHORT_MAX_TTL_MS, child
        assert [s[3] for s in seen["states"]] == [0, 1, 0], child
        # Never counted before the maximum TTL after the restart, and counted in time.
        for outcome, t in child["early"]:
            assert outcome != NodeOutcome.SUCCESS or t >= safe_from, child
        assert child["counted_at"] >= safe_from, child
        assert [s[1:] for s in child["final"]] == [[False, 0, 0]] * 3, child
        assert c.servers[1].marked()  # rewritten, with the new run_id

        # The running manager counts it again too, never before the maximum TTL.
        lk, t_ok = _probe_until_counted(m, resource, 1, timeout=SHORT_MAX_TTL_MS / 1000 + 15)
        assert t_ok >= safe_from
        assert lk.granted >= m.quorum
        assert [s.reason for s in m.node_states()] == [QuarantineReason.NONE] * 3
        assert m.node_states()[1] == NodeState(1, False, 0, QuarantineReason.NONE)
    finally:
        m.close()


def test_flushed_node_is_quarantined_for_the_max_ttl(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(c.urls, max_ttl_ms=SHORT_MAX_TTL_MS, retry_count=0)
    _in_use(c, m, resource)
    run_id = c.servers[1].run_id()

    # FLUSHALL: the keyspace and the marker are gone, the process (and its run_id) stays.
    t_flush = time.monotonic()
    c.servers[1].flushall()
    safe_from = t_flush + SHORT_MAX_TTL_MS / 1000
    assert c.servers[1].marker() is None

    # The next grant on node 1 finds no marker (checked in the grant script): it lost its
    # keyspace, and is quarantined from the moment that was seen.
    lk, _ = _probe_until_settled(m, resource, [1], must_not_count=(1, safe_from))
    assert lk.node_outcomes[1] == NodeOutcome.QUARANTINED, lk.node_outcomes
    assert lk.granted == 2
    st = m.node_states()[1]
    t = time.monotonic()
    assert st.quarantined and st.reason == QuarantineReason.NO_MARKER, st
    assert (safe_from - t) * 1000 - 1 <= st.remaining_ms <= SHORT_MAX_TTL_MS, st
    assert c.servers[1].run_id() == run_id  # no restart

    # A manager created now sees the same: no marker on node 1, markers on the others.
    m2 = new_manager(c.urls, max_ttl_ms=SHORT_MAX_TTL_MS, retry_count=0)
    lk, _ = _probe_until_settled(m2, resource, [0, 1, 2], must_not_count=(1, safe_from))
    assert lk.node_outcomes[1] == NodeOutcome.QUARANTINED, lk.node_outcomes
    states = m2.node_states()
    t = time.monotonic()
    assert [s.reason for s in states] == [
        QuarantineReason.NONE,
        QuarantineReason.NO_MARKER,
        QuarantineReason.NONE,
    ], states
    assert (safe_from - t) * 1000 - 1 <= states[1].remaining_ms <= SHORT_MAX_TTL_MS, states

    # Counted again once the maximum TTL has passed since the flush, never before; the marker
    # is written again (same run_id).
    lk, t_ok = _probe_until_counted(m, resource, 1, timeout=SHORT_MAX_TTL_MS / 1000 + 15)
    assert t_ok >= safe_from
    wait_until(c.servers[1].marked, timeout=10, what="node 1's marker written again")
    assert c.servers[1].marker_run_id() == run_id
    # The second manager reads the marker again (or ends its own quarantine) and counts it.
    _, t_ok2 = _probe_until_counted(m2, resource, 1, timeout=SHORT_MAX_TTL_MS / 1000 + 15)
    assert t_ok2 >= safe_from
    for mgr in (m, m2):
        assert [s.reason for s in mgr.node_states()] == [QuarantineReason.NONE] * 3


def test_restarted_majority_is_unavailable_and_says_why(make_cluster, new_manager, resource):
    c = make_cluster(3)
    m = new_manager(c.urls, retry_count=0)  # the default maximum TTL: 60 s
    _in_use(c, m, resource)
    for s in c.servers[:2]:
        s.restart()

    def unavailable_until_both_seen(mgr: redlock.Redlock) -> redlock.Unavailable:
        deadline = time.monotonic() + 15.0
        while True:
            with pytest.raises(redlock.Unavailable) as ei:  # never a lock from node 2 alone
                _probe(mgr, resource)
            if set(_quarantine_texts(ei.value.message, c)) == {0, 1}:
                return ei.value
            assert time.monotonic() < deadline, ei.value.message
            time.sleep(0.05)

    # The running manager saw both run_ids change.
    e = unavailable_until_both_seen(m)
    assert e.status == redlock.Status.UNAVAILABLE
    # Node 2 alone granted (or had not answered yet when the outcome was decided).
    assert re.match(r"unavailable: [01]/3 granted \(quorum 2\); ", e.message), e.message
    found = _quarantine_texts(e.message, c)
    for i in (0, 1):
        seconds, why = found[i]
        assert 50 <= seconds <= 61, e.message
        assert why == "restart seen: its run_id changed", e.message
    states = m.node_states()
    assert [s.reason for s in states] == [
        QuarantineReason.RESTART_SEEN,
        QuarantineReason.RESTART_SEEN,
        QuarantineReason.NONE,
    ], states
    for s in states[:2]:
        assert s.quarantined and 50_000 <= s.remaining_ms <= 61_000, s

    # A manager created after the restarts: nodes 0 and 1 have no marker, node 2 has one.
    m2 = new_manager(c.urls, retry_count=0)
    e = unavailable_until_both_seen(m2)
    for i, (seconds, why) in _quarantine_texts(e.message, c).items():
        assert 50 <= seconds <= 60, e.message
        assert why.startswith("no marker: it restarted empty or its data was flushed, or it is new"), e.message
    assert [s.reason for s in m2.node_states()] == [
        QuarantineReason.NO_MARKER,
        QuarantineReason.NO_MARKER,
        QuarantineReason.NONE,
    ]
    # lock() retries, and fails the same way.
    with pytest.raises(redlock.Unavailable, match="in restart quarantine"):
        new_manager(c.urls, retry_count=2, retry_delay_ms=20).lock(resource, ttl_ms=5_000)
    # Nodes 0 and 1 refused the grants (no marker); node 2's were taken back.
    wait_until(lambda: c.present(key_of(resource)) == 0, what="no key left")
    assert c.markers()[:2] == [None, None]  # nobody marks a node in quarantine


# ---- the switch ----


def test_quarantine_off_counts_a_restarted_node_at_once(make_cluster, new_manager, resource):
    # Only for nodes that persist every write (appendfsync always): no marker is read or
    # written, and a restarted node counts as soon as it answers.
    c = make_cluster(3)
    m = new_manager(c.urls, restart_quarantine=False, retry_count=0)
    lk = m.try_lock(resource, ttl_ms=5_000)
    assert lk.granted >= m.quorum
    lk.unlock()
    lk.close()
    c.servers[1].restart()
    _probe_until_counted(m, resource, 1, timeout=15.0)
    assert m.node_states() == [NodeState(i, False, 0, QuarantineReason.NONE) for i in range(3)]
    assert c.markers() == [None, None, None]


# ---- the maximum TTL ----


def test_ttl_above_the_maximum_is_invalid(cluster, new_manager, resource):
    maximum = 5_000
    m = new_manager(cluster.urls, max_ttl_ms=maximum)
    over = maximum + 1
    for attempt in (
        lambda: m.try_lock(resource, ttl_ms=over),
        lambda: m.lock(resource, ttl_ms=over),
        lambda: m.lock(resource, ttl_ms=over, wait_ms=10),
        lambda: m.try_lock(resource, ttl_ms=over, fenced=True),
    ):
        with pytest.raises(redlock.InvalidArgument) as ei:
            attempt()
        assert ei.value.status == redlock.Status.INVALID_ARGUMENT
        assert "maximum TTL" in ei.value.message
    assert cluster.present(key_of(resource)) == 0  # nothing was sent
    with m.try_lock(resource, ttl_ms=maximum) as lk:  # the maximum itself is fine
        with pytest.raises(redlock.InvalidArgument, match="maximum TTL"):
            lk.extend(over)
        assert lk.valid  # nothing was sent
        lk.extend(maximum)

    # The default maximum is 60 s.
    d = new_manager(cluster.urls)
    with pytest.raises(redlock.InvalidArgument, match="maximum TTL"):
        d.try_lock(resource, ttl_ms=60_001)
    with d.try_lock(resource, ttl_ms=60_000):
        pass


def test_new_nodes_beside_a_used_one_are_admitted(make_cluster, resource):
    """Nodes added beside a used one have no marker, like nodes that restarted empty: the
    operator who knows they are new admits them, and they count at once."""
    c = make_cluster(3)
    with _manager(c.urls[:1]) as first:
        first.try_lock(resource, ttl_ms=1_000).unlock()
    with _manager(c.urls) as m:
        with pytest.raises(redlock.Unavailable, match="or it is new: admit a node"):
            m.try_lock(resource, ttl_ms=1_000)
        with pytest.raises(redlock.InvalidArgument, match="node 3: there are 3 nodes"):
            m.admit_new_nodes([3])
        with pytest.raises(redlock.InvalidArgument, match="not a node index"):
            m.admit_new_nodes([-1])
        m.admit_new_nodes([1, 2])
        assert [s.quarantined for s in m.node_states()] == [False, False, False]
        lk = m.try_lock(resource, ttl_ms=1_000)
        assert NodeOutcome.QUARANTINED not in lk.node_outcomes, lk.node_outcomes
        lk.unlock()
