//! A manager in steady state, as the nodes see it: once warm, a hot lock contended by many
//! threads of one manager opens no connection, loads no script and sends every script by its
//! hash (`EVALSHA`), never its text. Read from the nodes' own counters (`INFO`), so a pool
//! that dropped connections under contention, or a release sent as `EVAL`, fails here.

mod support;

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redlock::Redlock;
use support::{Cluster, eventually};

/// What one node has served, from `INFO everything`.
#[derive(Debug, Default, Clone, Copy)]
struct Served {
    connections: u64,
    connected: u64,
    script_loads: u64,
    eval: u64,
    evalsha: u64,
}

fn served(conn: &mut redis::Connection) -> Served {
    let c = support::info_counters(conn);
    let n = |k: &str| c.get(k) as u64;
    Served {
        connections: n("total_connections_received"),
        connected: n("connected_clients"),
        script_loads: n("cmdstat_script|load") + n("cmdstat_script"),
        eval: n("cmdstat_eval"),
        evalsha: n("cmdstat_evalsha"),
    }
}

const THREADS: usize = 16;
const RESOURCE: &str = "steady";

/// `THREADS` threads of `mgr`, each taking and releasing the one resource `cycles` times:
/// even cycles wait by notification (`lock_timeout`), odd ones retry `try_lock` after a short
/// pause. Returns the grants.
fn hammer(mgr: &Redlock, cycles: usize) -> usize {
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let mgr = mgr.clone();
            thread::spawn(move || {
                let ttl = Duration::from_secs(10);
                let deadline = Instant::now() + Duration::from_secs(60);
                let mut grants = 0;
                for i in 0..cycles {
                    let lease = if (i + t) % 2 == 0 {
                        mgr.lock_timeout(RESOURCE, ttl, Duration::from_secs(30))
                            .ok()
                    } else {
                        let mut got = None;
                        while got.is_none() && Instant::now() < deadline {
                            got = mgr.try_lock(RESOURCE, ttl).ok();
                            if got.is_none() {
                                thread::sleep(Duration::from_micros(500 + 97 * t as u64));
                            }
                        }
                        got
                    };
                    if let Some(lease) = lease {
                        lease.unlock().expect("unlock");
                        grants += 1;
                    }
                }
                grants
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

#[test]
fn a_hot_lock_in_steady_state_opens_no_connection_and_sends_no_script_text() {
    let cluster = Cluster::start(3);
    // The counters' own connections, opened before anything is measured.
    let mut info: Vec<redis::Connection> = cluster.servers.iter().map(|s| s.client()).collect();
    let mgr = Arc::new(
        Redlock::new(
            support::config(cluster.urls())
                .retry_delay(Duration::from_millis(5))
                // Generous, so that a busy machine never times a node out or declares its
                // connection stale: either would reconnect, which is what this test counts.
                .node_timeout(Duration::from_secs(2))
                .stale_limit(Duration::from_secs(30)),
        )
        .unwrap(),
    );
    // Warm-up: the shared connections and their handshakes (which load the scripts), and the
    // listener's subscriber connections, opened by the first wait.
    let held = mgr.try_lock(RESOURCE, Duration::from_secs(10)).unwrap();
    let waiter = {
        let mgr = Arc::clone(&mgr);
        thread::spawn(move || {
            mgr.lock_timeout(RESOURCE, Duration::from_secs(10), Duration::from_secs(30))
        })
    };
    // Every node: this test's connection, the manager's shared one and its subscriber.
    assert!(
        eventually(Duration::from_secs(20), || info.iter_mut().all(|c| served(
            c
        )
        .connected
            == 3)),
        "clients per node: {:?}",
        info.iter_mut().map(served).collect::<Vec<_>>()
    );
    held.unlock().unwrap();
    waiter.join().unwrap().unwrap().unlock().unwrap();
    assert_eq!(hammer(&mgr, 2), THREADS * 2);

    let before: Vec<Served> = info.iter_mut().map(served).collect();
    let cycles = 15;
    assert_eq!(hammer(&mgr, cycles), THREADS * cycles);
    let after: Vec<Served> = info.iter_mut().map(served).collect();

    // The manager counts the same: one connection per node, opened during warm-up.
    let m = mgr.metrics();
    assert!(
        m.nodes.iter().all(|n| n.connections == 1),
        "connections per node: {:?}",
        m.nodes.iter().map(|n| n.connections).collect::<Vec<_>>()
    );
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert_eq!(
            a.connections, b.connections,
            "node {i} accepted connections"
        );
        assert_eq!(
            a.script_loads, b.script_loads,
            "node {i} served SCRIPT LOAD"
        );
        assert_eq!(a.eval, b.eval, "node {i} was sent a script's text (EVAL)");
        // Each release went to every node by its hash (and so did every acquisition).
        assert!(
            a.evalsha - b.evalsha >= (THREADS * cycles) as u64,
            "node {i}: {} EVALSHA for {} cycles",
            a.evalsha - b.evalsha,
            THREADS * cycles
        );
    }
}

#[test]
fn a_restarted_node_counts_one_more_connection() {
    let mut cluster = Cluster::start(3);
    let mgr = Redlock::new(support::config(cluster.urls())).unwrap();
    let cycle = |mgr: &Redlock| {
        mgr.try_lock("restarted", Duration::from_secs(10))
            .unwrap()
            .unlock()
            .unwrap()
    };
    cycle(&mgr);
    cluster.servers[0].restart();
    // The other two still make a quorum; node 0's connection is found closed and replaced.
    assert!(eventually(Duration::from_secs(20), || {
        cycle(&mgr);
        mgr.metrics().nodes[0].connections == 2
    }));
    let m = mgr.metrics();
    assert_eq!(
        m.nodes.iter().map(|n| n.connections).collect::<Vec<_>>(),
        [2, 1, 1]
    );
}
