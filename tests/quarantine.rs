//! Restart quarantine against real redis-server processes: a node that restarted less than the
//! maximum TTL ago does not count toward a quorum until its uptime passes it.

mod support;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlock::{Config, Error, NodeOutcome, Redlock};
use support::{Cluster, RedisServer, eventually};

/// Captures the library's log lines, so tests can check its warnings.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        if r.target().starts_with("redlock") {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", r.level(), r.args()));
        }
    }
    fn flush(&self) {}
}

static LOG: Capture = Capture(Mutex::new(Vec::new()));

fn logs_mentioning(what: &str) -> Vec<String> {
    let _ = log::set_logger(&LOG).map(|()| log::set_max_level(log::LevelFilter::Info));
    LOG.0
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(what))
        .cloned()
        .collect()
}

fn quarantined(urls: Vec<String>, max_ttl: Duration) -> Redlock {
    logs_mentioning(""); // installs the logger
    Redlock::new(
        Config::new(urls)
            .max_ttl(max_ttl)
            .node_timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(20))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50)),
    )
    .unwrap()
}

#[test]
fn a_restarted_node_counts_again_only_after_the_maximum_ttl() {
    let max_ttl = Duration::from_secs(3);
    let mut cluster = Cluster::start(3);
    let mgr = quarantined(cluster.urls(), max_ttl);
    // Just started: nobody counts until the nodes have been up for the maximum TTL.
    let start = Instant::now();
    let lease = mgr
        .lock_timeout("q", Duration::from_secs(2), Duration::from_secs(10))
        .unwrap();
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    lease.unlock().unwrap();
    // Steps decided early may not have read node 0's handshake yet: make sure its identity
    // (run_id) is known, so that the restart shows as a new run_id.
    assert!(eventually(Duration::from_secs(5), || {
        if let Ok(l) = mgr.try_lock("warm", Duration::from_secs(1)) {
            let _ = l.unlock();
        }
        mgr.node_states()[0].run_id.is_some()
    }));

    cluster.servers[0].restart(); // no persistence: back empty
    let restarted = Instant::now();
    let port = cluster.servers[0].port;
    // The next acquisitions reconnect, read the new run_id and uptime, and do not count
    // node 0's grant (the first may be decided by nodes 1 and 2 before node 0 answers).
    let mut quarantined_lease = None;
    let deadline = Instant::now() + Duration::from_secs(5);
    while quarantined_lease.is_none() {
        assert!(Instant::now() < deadline, "node 0's restart was never seen");
        let lease = mgr.try_lock("q", Duration::from_secs(2)).unwrap();
        match lease.acquisition().nodes[0].outcome {
            NodeOutcome::Quarantined { .. } => quarantined_lease = Some(lease),
            // Before the reconnect reads the new identity, the old connection may still be
            // found dead (unreachable, then backoff), or the step decided without node 0.
            NodeOutcome::Success => panic!("node 0 counted right after its restart"),
            _ => lease.unlock().unwrap(),
        }
    }
    let lease = quarantined_lease.unwrap();
    let state = &mgr.node_states()[0];
    assert_eq!(state.restarts_seen, 1);
    let left = state.quarantined_for.expect("node 0 is quarantined");
    assert!(
        left > Duration::from_secs(2) && left <= Duration::from_secs(4),
        "{left:?}"
    );
    assert!(mgr.node_states()[1].quarantined_for.is_none());
    assert!(!logs_mentioning(&format!("{port}) restarted")).is_empty());
    // Its grant was taken back at once: the lock is held on nodes 1 and 2 only.
    assert!(eventually(Duration::from_secs(2), || cluster.servers[0]
        .get(lease.key())
        .is_none()));
    assert_eq!(
        cluster.servers[1].get(lease.key()).as_deref(),
        Some(lease.token().as_bytes())
    );
    lease.unlock().unwrap();

    // It counts again once its uptime passes the maximum TTL (rounded up by a second).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lease = mgr.try_lock("q", Duration::from_secs(2)).unwrap();
        let counted = lease.acquisition().nodes[0].outcome == NodeOutcome::Success;
        lease.unlock().unwrap();
        if counted {
            break;
        }
        assert!(Instant::now() < deadline, "node 0 never left quarantine");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = restarted.elapsed();
    assert!(
        out >= max_ttl && out < max_ttl + Duration::from_secs(3),
        "left quarantine after {out:?}"
    );
    assert!(mgr.node_states()[0].quarantined_for.is_none());
}

#[test]
fn quarantine_plus_a_dead_minority_is_unavailable_and_names_the_node() {
    let mut cluster = Cluster::start(3);
    // Up long enough for a 1 s maximum TTL.
    std::thread::sleep(Duration::from_millis(2100));
    let mgr = Redlock::new(
        Config::new(cluster.urls())
            .max_ttl(Duration::from_secs(30))
            .retry_count(0)
            .node_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    // With a 30 s maximum TTL, 2 s of uptime is not enough: everything is quarantined.
    match mgr.try_lock("u", Duration::from_secs(1)) {
        Err(Error::Unavailable(r)) => assert!(r.to_string().contains("restart quarantine")),
        other => panic!("{other:?}"),
    }
    let mgr = quarantined(cluster.urls(), Duration::from_secs(1));
    mgr.try_lock("u", Duration::from_millis(900))
        .unwrap()
        .unlock()
        .unwrap();
    cluster.servers[0].restart();
    cluster.servers[2].kill();
    let err = mgr.lock("u", Duration::from_millis(900)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Unavailable(_)), "{msg}");
    let node0 = format!("node 0 (127.0.0.1:{})", cluster.servers[0].port);
    assert!(
        msg.contains(&format!("{node0}: in restart quarantine")),
        "{msg}"
    );
    // Never unsafe: the lock was not granted on the strength of the restarted node.
    let r = err.report().unwrap();
    assert!(r.successes < r.quorum);
}

#[test]
fn a_ttl_beyond_the_maximum_is_invalid_input() {
    let cluster = Cluster::start(1);
    let mgr = quarantined(cluster.urls(), Duration::from_secs(5));
    match mgr.try_lock("x", Duration::from_millis(5001)) {
        Err(Error::InvalidInput(m)) => assert!(m.contains("maximum TTL"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Redlock::new(Config::new(cluster.urls()).max_ttl(Duration::ZERO)),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn with_quarantine_off_nodes_that_do_not_persist_every_write_get_one_warning() {
    let plain = RedisServer::start();
    let safe = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    logs_mentioning("");
    let mgr = Redlock::new(support::fresh(vec![plain.url(), safe.url()])).unwrap();
    for _ in 0..3 {
        let l = mgr.lock("w", Duration::from_secs(1)).unwrap();
        l.unlock().unwrap();
    }
    // A second connection set reconnects: still one warning per node.
    let m2 = mgr.clone();
    let t = std::thread::spawn(move || m2.try_lock("w2", Duration::from_secs(1)));
    let _ = mgr.try_lock("w3", Duration::from_secs(1));
    let _ = t.join();
    let about_plain = logs_mentioning(&format!("127.0.0.1:{}) does not persist", plain.port));
    assert_eq!(about_plain.len(), 1, "{about_plain:?}");
    assert!(about_plain[0].contains("appendonly no"), "{about_plain:?}");
    assert!(logs_mentioning(&format!("127.0.0.1:{}) does not persist", safe.port)).is_empty());
    // With quarantine on, nothing is said (the node is protected anyway).
    assert!(
        mgr.node_states()
            .iter()
            .all(|s| s.quarantined_for.is_none())
    );
}
