//! Restart quarantine against real redis-server processes: a node counts only while it cannot
//! have lost a lock key someone relies on, which its marker (`redlock-marker`, holding its
//! `run_id`) tells. A brand-new cluster is trusted at once; a node that restarted, or lost its
//! keyspace, waits out the maximum TTL.
//!
//! Every wait here is bounded below by what safety requires and bounded above generously, so
//! that a loaded machine cannot make a test fail.

mod support;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redlock::{Config, Error, KeyKind, Lease, NodeOutcome, QuarantineReason, Redlock};
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

/// The default configuration, with a short maximum TTL (and so a short quarantine), and a
/// node timeout a busy machine's live nodes meet: many steps here need every node that is not
/// quarantined (no node is ever silent here: a killed one refuses at once).
fn manager(urls: Vec<String>, max_ttl: Duration) -> Redlock {
    logs_mentioning(""); // installs the logger
    Redlock::new(
        Config::new(urls)
            .max_ttl(max_ttl)
            .node_timeout(Duration::from_secs(2))
            .retry_delay(Duration::from_millis(20))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50)),
    )
    .unwrap()
}

/// Node `i`'s outcome in one acquisition, granted (the lease is then released) or not (read
/// from the error's report).
fn outcome_of(mgr: &Redlock, i: usize, ttl: Duration) -> Result<NodeOutcome, Error> {
    match mgr.try_lock("probe", ttl) {
        Ok(lease) => {
            let o = lease.acquisition().nodes[i].outcome.clone();
            lease.unlock()?;
            Ok(o)
        }
        Err(e) => match e.report() {
            Some(r) => Ok(r.nodes[i].outcome.clone()),
            None => Err(e),
        },
    }
}

/// Tries until node `i`'s outcome is not what a lost connection gives (unreachable, backoff,
/// pending): the manager has reconnected and read the node's handshake.
fn seen_outcome(mgr: &Redlock, i: usize, ttl: Duration) -> NodeOutcome {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let last = outcome_of(mgr, i, ttl);
        if let Ok(o) = &last
            && !matches!(
                o,
                NodeOutcome::Unreachable(_) | NodeOutcome::Backoff(_) | NodeOutcome::Pending
            )
        {
            return o.clone();
        }
        assert!(
            Instant::now() < deadline,
            "node {i} never answered; last: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reason(o: &NodeOutcome) -> Option<QuarantineReason> {
    match o {
        NodeOutcome::Quarantined { reason, .. } => Some(*reason),
        _ => None,
    }
}

/// Waits until node `i` counts again; returns how long that took from `since`.
fn counts_again(mgr: &Redlock, i: usize, ttl: Duration, since: Instant) -> Duration {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(NodeOutcome::Success) = outcome_of(mgr, i, ttl) {
            return since.elapsed();
        }
        assert!(Instant::now() < deadline, "node {i} never left quarantine");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_brand_new_cluster_is_trusted_at_once_and_marked() {
    let cluster = Cluster::start(5);
    // The default configuration: quarantine on, a 60 s maximum TTL.
    let mgr = Redlock::new(Config::new(cluster.urls())).unwrap();
    let lease = mgr.try_lock("first", Duration::from_secs(10)).unwrap();
    assert!(
        lease.acquisition().successes >= 3,
        "{:?}",
        lease.acquisition()
    );
    lease.unlock().unwrap();
    // Every node holds its own run_id as its marker, and is trusted.
    for s in &cluster.servers {
        let run_id = s.run_id();
        assert!(eventually(Duration::from_secs(2), || s
            .marker_run_id()
            .as_deref()
            == Some(run_id.as_str())));
        // ... and the replication id it was written under (see node/health/quarantine.rs).
        let replid = s.marker().unwrap_or_default();
        assert_eq!(replid.split(' ').nth(1).map(str::len), Some(40), "{replid}");
    }
    assert!(mgr.node_states().iter().all(|s| s.trusted));
    // A manager that knows nothing trusts them from their markers, in its first attempt.
    let other = Redlock::new(Config::new(cluster.urls())).unwrap();
    other
        .try_lock("second", Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(other.metrics().acquire_attempts, 1);
}

/// Not a test of its own: the child process of the minority-restart test, a manager in a
/// process that never saw the nodes before. It prints node 0's outcome in one acquisition.
#[test]
fn child_new_manager() {
    let (Ok(nodes), Ok(max_ttl)) = (
        std::env::var("REDLOCK_CHILD_NODES"),
        std::env::var("REDLOCK_CHILD_MAX_TTL_MS"),
    ) else {
        return;
    };
    let max_ttl = Duration::from_millis(max_ttl.parse().unwrap());
    let mgr = manager(nodes.split(',').map(str::to_string).collect(), max_ttl);
    let o = seen_outcome(&mgr, 0, Duration::from_secs(1));
    println!(
        "NODE0 {:?} {:?}",
        reason(&o),
        mgr.node_states()[0].quarantined_for
    );
}

#[test]
fn a_minority_restart_is_quarantined_for_running_and_new_managers() {
    let max_ttl = Duration::from_secs(3);
    let ttl = Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    let mgr = manager(cluster.urls(), max_ttl);
    assert_eq!(seen_outcome(&mgr, 0, ttl), NodeOutcome::Success);
    let old_run_id = cluster.servers[0].run_id();

    cluster.servers[0].restart(); // no persistence: back empty
    let restarted = Instant::now();
    // The running manager sees the new run_id on reconnect.
    let o = seen_outcome(&mgr, 0, ttl);
    assert_eq!(reason(&o), Some(QuarantineReason::RestartSeen), "{o:?}");
    assert_eq!(mgr.node_states()[0].restarts_seen, 1);
    assert_ne!(cluster.servers[0].run_id(), old_run_id);
    // Its grant never counted: the lock was held on nodes 1 and 2.
    let lease = mgr.try_lock("held", ttl).unwrap();
    assert!(!lease.acquisition().nodes[0].outcome.is_success());
    assert_eq!(cluster.servers[0].get(lease.key()), None);
    lease.unlock().unwrap();

    // A manager in a new process, which never saw the old run_id: node 0 has no marker while
    // the others do, so it lost its keyspace: quarantined too.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_new_manager",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REDLOCK_CHILD_NODES", cluster.urls().join(","))
        .env("REDLOCK_CHILD_MAX_TTL_MS", max_ttl.as_millis().to_string())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find(|l| l.contains("NODE0")).unwrap_or("");
    assert!(line.contains("Some(NoMarker)"), "{stdout}");

    // The running manager counts it again only once its uptime has passed the maximum TTL.
    let out = counts_again(&mgr, 0, ttl, restarted);
    assert!(out >= max_ttl, "left quarantine after {out:?}");
    // And its marker holds its new run_id now.
    let run_id = cluster.servers[0].run_id();
    assert!(eventually(Duration::from_secs(2), || cluster.servers[0]
        .marker_run_id()
        .as_deref()
        == Some(run_id.as_str())));
    assert!(!logs_mentioning(&format!("{}) restarted", cluster.servers[0].port)).is_empty());
}

#[test]
fn a_majority_restart_is_unavailable_and_says_why() {
    let max_ttl = Duration::from_secs(3);
    let ttl = Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    let mgr = manager(cluster.urls(), max_ttl);
    mgr.try_lock("m", ttl).unwrap().unlock().unwrap();
    cluster.servers[0].restart();
    cluster.servers[1].restart();
    let restarted = Instant::now();
    let fresh = manager(cluster.urls(), max_ttl);
    for (who, m, why) in [
        ("running", &mgr, "restart seen"),
        ("new", &fresh, "no marker"),
    ] {
        let deadline = Instant::now() + Duration::from_secs(10);
        let msg = loop {
            match m.try_lock("m", ttl) {
                Err(e @ Error::Unavailable(_)) => {
                    let msg = e.to_string();
                    if msg.contains(why) {
                        break msg;
                    }
                }
                Err(_) => {}
                Ok(l) => panic!(
                    "{who}: granted with a restarted majority: {:?}",
                    l.acquisition()
                ),
            }
            assert!(Instant::now() < deadline, "{who}: never told why");
            std::thread::sleep(Duration::from_millis(20));
        };
        for i in [0, 1] {
            let node = format!("node {i} (127.0.0.1:{})", cluster.servers[i].port);
            assert!(
                msg.contains(&format!("{node}: in restart quarantine")),
                "{who}: {msg}"
            );
        }
    }
    // Available again once the maximum TTL has passed.
    let lease = mgr.lock_timeout("m", ttl, Duration::from_secs(15)).unwrap();
    assert!(restarted.elapsed() >= max_ttl);
    lease.unlock().unwrap();
}

#[test]
fn flushall_takes_a_node_out_for_managers_that_knew_it_and_new_ones() {
    let max_ttl = Duration::from_secs(3);
    let ttl = Duration::from_secs(1);
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls(), max_ttl);
    assert_eq!(seen_outcome(&mgr, 1, ttl), NodeOutcome::Success);
    redis::cmd("FLUSHALL")
        .exec(&mut cluster.servers[1].client())
        .unwrap();
    let flushed = Instant::now();
    // No restart, same connection: the grant script finds the marker gone.
    let o = seen_outcome(&mgr, 1, ttl);
    assert_eq!(reason(&o), Some(QuarantineReason::NoMarker), "{o:?}");
    let left = mgr.node_states()[1].quarantined_for.unwrap();
    assert!(left > max_ttl / 2 && left <= max_ttl, "{left:?}");
    // A new manager tells the same from the markers on the other nodes.
    let fresh = manager(cluster.urls(), max_ttl);
    let o = seen_outcome(&fresh, 1, ttl);
    assert_eq!(reason(&o), Some(QuarantineReason::NoMarker), "{o:?}");
    // Both count it again after the maximum TTL, not before.
    for m in [&mgr, &fresh] {
        let out = counts_again(m, 1, ttl, flushed);
        assert!(out >= max_ttl, "{out:?}");
    }
}

#[test]
fn a_marker_deleted_under_a_trusted_node_takes_back_what_it_set_there() {
    // The plain acquisition sets the key and then checks the marker (SET NX PX, PTTL, EXISTS
    // in one write): a node whose marker is gone may have set the key. Its grant must not
    // count, and the key must not stay there, whether the acquisition succeeds or fails.
    let max_ttl = Duration::from_secs(3);
    let ttl = Duration::from_secs(2);
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls(), max_ttl);
    for i in 0..3 {
        assert_eq!(seen_outcome(&mgr, i, ttl), NodeOutcome::Success);
    }
    let key = b"redlock:unmarked";
    let del_marker = |i: usize| {
        let n: i64 = redis::cmd("DEL")
            .arg(redlock::MARKER_KEY)
            .query(&mut cluster.servers[i].client())
            .unwrap();
        assert_eq!(n, 1);
    };
    let marker = cluster.servers[1].get(redlock::MARKER_KEY).unwrap();
    // Node 1 loses its marker; nodes 0 and 2 still grant.
    del_marker(1);
    // Node 1 may not have answered yet when the quorum of nodes 0 and 2 decided (a busy
    // machine): then its NOMARKER is read later, and its key goes with the unlock.
    let mut taken_back_checked = 0;
    for _ in 0..20 {
        let lease = mgr.try_lock("unmarked", ttl).unwrap();
        let acq = lease.acquisition();
        assert_eq!(acq.successes, 2, "{acq:?}");
        let o = &acq.nodes[1].outcome;
        let answered = *o != NodeOutcome::Pending;
        if answered {
            assert_eq!(reason(o), Some(QuarantineReason::NoMarker), "{o:?}");
        }
        // Quarantined once its reply is read (a scan waits for every node).
        assert!(eventually(Duration::from_secs(5), || {
            let _ = mgr.scan(KeyKind::Lock, "unmarked");
            mgr.node_states()[1].quarantined_for.is_some()
        }));
        let left = mgr.node_states()[1].quarantined_for.unwrap();
        assert!(left > max_ttl / 2 && left <= max_ttl, "{left:?}");
        let token = cluster.servers[0].get(key).unwrap();
        assert_eq!(cluster.servers[2].get(key), Some(token.clone()));
        if answered {
            // The key is taken back on node 1 while the lease holds it on the others.
            assert!(eventually(Duration::from_secs(5), || cluster.servers[1]
                .get(key)
                .is_none()));
            assert_eq!(cluster.holding(key, &token), 2);
            taken_back_checked += 1;
        }
        lease.unlock().unwrap();
        assert!(eventually(Duration::from_secs(5), || cluster.present(key) == 0));
        if taken_back_checked > 0 {
            break;
        }
        // Node 1 is quarantined now and no longer asked: put its marker back as it was (as
        // another process ending its quarantine would), then lose it again.
        redis::cmd("SET")
            .arg(redlock::MARKER_KEY)
            .arg(&marker)
            .exec(&mut cluster.servers[1].client())
            .unwrap();
        // (The manager re-reads a quarantined node's marker when it uses the node.)
        assert!(eventually(Duration::from_secs(10), || {
            if let Ok(l) = mgr.try_lock("unmarked:other", ttl) {
                let _ = l.unlock();
            }
            mgr.node_states()[1].quarantined_for.is_none()
        }));
        del_marker(1);
    }
    assert_eq!(
        taken_back_checked, 1,
        "node 1 answered after the quorum every time"
    );
    // Node 2 loses its marker too (node 1 is quarantined, not asked): only node 0 grants, the
    // attempt fails, and neither node 0 nor node 2 keeps the key.
    del_marker(2);
    let err = mgr.try_lock("unmarked", ttl).unwrap_err();
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    let report = err.report().unwrap();
    let o = &report.nodes[2].outcome;
    assert_eq!(reason(o), Some(QuarantineReason::NoMarker), "{o:?}");
    assert_eq!(
        reason(&report.nodes[1].outcome),
        Some(QuarantineReason::NoMarker)
    );
    // Node 0 granted, or had not answered when no quorum was left.
    let o = &report.nodes[0].outcome;
    assert!(
        matches!(o, NodeOutcome::Success | NodeOutcome::Pending),
        "{o:?}"
    );
    assert!(eventually(Duration::from_secs(5), || cluster.present(key) == 0));
}

#[test]
fn an_aof_restart_is_quarantined_whatever_the_fsync_policy() {
    let max_ttl = Duration::from_secs(3);
    let ttl = Duration::from_secs(1);
    for fsync in ["everysec", "always"] {
        let mut aof = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", fsync]);
        let others = Cluster::start(2);
        let mut urls = vec![aof.url()];
        urls.extend(others.urls());
        let mgr = manager(urls.clone(), max_ttl);
        // Someone else holds the probe on node 2, so no round is decided before node 0 has
        // answered: fsyncing, it is often the slowest, and would otherwise stay `Pending`.
        let key = Config::new(urls.clone()).lock_key(b"probe").unwrap();
        redis::cmd("SET")
            .arg(&key)
            .arg("someone-else")
            .arg("PX")
            .arg(600_000)
            .exec(&mut others.servers[1].client())
            .unwrap();
        assert_eq!(seen_outcome(&mgr, 0, ttl), NodeOutcome::Success);
        let old = aof.run_id();
        aof.restart(); // same directory: it reloads its AOF, marker included
        assert_eq!(aof.marker_run_id().as_deref(), Some(old.as_str()));
        // A new manager finds a stale marker (the earlier run_id); the running one saw the
        // restart itself.
        let fresh = manager(urls, max_ttl);
        let o = seen_outcome(&fresh, 0, ttl);
        assert_eq!(
            reason(&o),
            Some(QuarantineReason::StaleMarker),
            "{fsync}: {o:?}"
        );
        let o = seen_outcome(&mgr, 0, ttl);
        assert_eq!(
            reason(&o),
            Some(QuarantineReason::RestartSeen),
            "{fsync}: {o:?}"
        );
    }
}

#[test]
fn a_cluster_meeting_the_library_for_the_first_time_trusts_its_old_nodes() {
    let max_ttl = Duration::from_secs(2);
    let ttl = Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    // Up longer than the maximum TTL, no markers: a long-running cluster, new to this
    // library. Node 2 restarted a moment ago.
    std::thread::sleep(max_ttl + Duration::from_millis(1200));
    cluster.servers[2].restart();
    let restarted = Instant::now();
    let mgr = manager(cluster.urls(), max_ttl);
    let lease = mgr.try_lock("old", ttl).unwrap();
    let nodes = &lease.acquisition().nodes;
    assert_eq!(nodes[0].outcome, NodeOutcome::Success);
    assert_eq!(nodes[1].outcome, NodeOutcome::Success);
    assert_eq!(reason(&nodes[2].outcome), Some(QuarantineReason::Young));
    lease.unlock().unwrap();
    let out = counts_again(&mgr, 2, ttl, restarted);
    assert!(out >= max_ttl, "{out:?}");
}

#[test]
fn a_fresh_cluster_with_a_node_down_waits_for_it_or_the_maximum_ttl() {
    let max_ttl = Duration::from_secs(2);
    let ttl = Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    cluster.servers[2].kill();
    let mgr = manager(cluster.urls(), max_ttl);
    let first = Instant::now();
    // No marker anywhere, and not every node answered: not a brand-new cluster yet.
    match mgr.try_lock("down", ttl) {
        Err(Error::Unavailable(r)) => {
            let msg = r.to_string();
            assert!(msg.contains("not every node has answered"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // The live nodes count once a maximum TTL has passed since they were first seen.
    let lease = mgr
        .lock_timeout("down", ttl, Duration::from_secs(15))
        .unwrap();
    assert!(first.elapsed() >= max_ttl - Duration::from_millis(50));
    lease.unlock().unwrap();
}

#[test]
fn a_quarantined_node_counts_as_soon_as_another_process_has_marked_it() {
    // The benign race: a second process arrives while the first is still writing a fresh
    // cluster's markers. It sees marked nodes and an unmarked one, so it quarantines that one
    // for the maximum TTL (60 s here), but re-reads its marker with backoff.
    let cluster = Cluster::start(3);
    cluster.servers[0].mark();
    cluster.servers[1].mark();
    let mgr = Redlock::new(Config::new(cluster.urls())).unwrap();
    let o = seen_outcome(&mgr, 2, Duration::from_secs(1));
    assert_eq!(reason(&o), Some(QuarantineReason::NoMarker), "{o:?}");
    // The first process finishes: node 2's marker is written.
    cluster.servers[2].mark();
    let marked = Instant::now();
    let took = counts_again(&mgr, 2, Duration::from_secs(1), marked);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn quarantine_plus_a_dead_minority_is_unavailable_and_names_the_node() {
    let mut cluster = Cluster::start(3);
    let mgr = manager(cluster.urls(), Duration::from_secs(30));
    let lease: Lease = mgr.try_lock("u", Duration::from_secs(1)).unwrap();
    lease.unlock().unwrap();
    cluster.servers[0].restart();
    cluster.servers[2].kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    let msg = loop {
        let err = mgr.try_lock("u", Duration::from_secs(1)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Unavailable(_)), "{msg}");
        // Never unsafe: the lock was not granted on the strength of the restarted node.
        let r = err.report().unwrap();
        assert!(r.successes < r.quorum);
        if msg.contains("restart quarantine") {
            break msg;
        }
        assert!(Instant::now() < deadline, "{msg}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let node0 = format!("node 0 (127.0.0.1:{})", cluster.servers[0].port);
    assert!(
        msg.contains(&format!("{node0}: in restart quarantine for another")),
        "{msg}"
    );
    assert!(msg.contains("restart seen"), "{msg}");
}

#[test]
fn a_ttl_beyond_the_maximum_is_invalid_input() {
    let cluster = Cluster::start(1);
    let mgr = manager(cluster.urls(), Duration::from_secs(5));
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
    let off = Config::new(vec![plain.url(), safe.url()]).restart_quarantine(false);
    let mgr = Redlock::new(off).unwrap();
    for _ in 0..3 {
        // Both nodes needed, one fsyncing every write: wait by deadline, not a retry count.
        let l = mgr
            .lock_timeout("w", Duration::from_secs(1), Duration::from_secs(60))
            .unwrap();
        l.unlock().unwrap();
    }
    // Concurrent callers: still one warning per node.
    let m2 = mgr.clone();
    let t = std::thread::spawn(move || m2.try_lock("w2", Duration::from_secs(1)));
    let _ = mgr.try_lock("w3", Duration::from_secs(1));
    let _ = t.join();
    let about_plain = logs_mentioning(&format!("127.0.0.1:{}) does not persist", plain.port));
    assert_eq!(about_plain.len(), 1, "{about_plain:?}");
    assert!(about_plain[0].contains("appendonly no"), "{about_plain:?}");
    assert!(logs_mentioning(&format!("127.0.0.1:{}) does not persist", safe.port)).is_empty());
    // Nobody is quarantined, and no marker is written.
    assert!(
        mgr.node_states()
            .iter()
            .all(|s| s.quarantined_for.is_none() && s.trusted)
    );
    assert_eq!(plain.marker(), None);
    assert_eq!(safe.marker(), None);
}

/// The server's `uptime_in_seconds`.
fn uptime(s: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut s.client())
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("uptime_in_seconds:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

/// A failover behind one address (a managed service's primary endpoint): node 0's address now
/// leads to a promoted replica that lacks X's key and holds its old master's marker, and that
/// has been up for longer than the maximum TTL. Quarantined "until the maximum TTL after its
/// start", it would count at once for a new manager, which would be granted the lock while X
/// still holds it. It must be quarantined from when it is first seen.
#[test]
fn a_promoted_replica_behind_the_same_address_is_quarantined_from_when_it_is_seen() {
    use support::proxy::DelayProxy;
    let max_ttl = Duration::from_secs(4);
    let ttl = max_ttl;
    let mut master = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let others = Cluster::start(2);
    let proxy = DelayProxy::start(master.port, Duration::ZERO);
    let urls = vec![
        proxy.url(),
        others.urls()[0].clone(),
        others.urls()[1].clone(),
    ];
    // A cluster that has met the library: every node holds its marker, and the replica has
    // copied its master's.
    master.mark();
    others.mark();
    let master_id = master.run_id();
    assert!(eventually(Duration::from_secs(20), || replica
        .marker()
        .as_deref()
        == Some(master_id.as_str())));
    // The replica has been up for longer than the maximum TTL (its uptime reads up to 1 s
    // more than its age).
    assert!(eventually(Duration::from_secs(30), || uptime(&replica)
        > max_ttl.as_secs() + 2));
    // Replication stops: the replica will not see X's key.
    redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .exec(&mut replica.client())
        .unwrap();
    // X locks r on nodes 0 and 1: node 2 holds a foreign key meanwhile.
    let resource = "failover";
    let key = Config::new(urls.clone())
        .lock_key(resource.as_bytes())
        .unwrap();
    redis::cmd("SET")
        .arg(&key)
        .arg("someone-else")
        .arg("PX")
        .arg(60_000)
        .exec(&mut others.servers[1].client())
        .unwrap();
    let x = manager(urls.clone(), max_ttl);
    let lease = x.try_lock(resource, ttl).unwrap();
    redis::cmd("DEL")
        .arg(&key)
        .exec(&mut others.servers[1].client())
        .unwrap();
    // The master dies; its address now leads to the promoted replica.
    master.kill();
    proxy.move_to(replica.port);
    // A new manager with the same addresses: no grant while X's lease is valid.
    let y = manager(urls, max_ttl);
    let r = y.try_lock(resource, ttl);
    let granted_at = Instant::now();
    let x_valid = lease.expires_at().is_some_and(|e| e > granted_at);
    match r {
        Ok(l) => assert!(
            !x_valid,
            "granted to Y while X holds it (Y's outcomes: {:?})",
            l.acquisition().nodes
        ),
        Err(e) => {
            let report = e.report().expect("a refusal has a report");
            let o = &report.nodes[0].outcome;
            assert!(
                matches!(o, NodeOutcome::Pending)
                    || reason(o) == Some(QuarantineReason::StaleMarker),
                "node 0: {o:?}"
            );
        }
    }
    // Y keeps node 0 in quarantine for the maximum TTL from when it first saw it.
    let o = seen_outcome(&y, 0, Duration::from_secs(1));
    assert_eq!(reason(&o), Some(QuarantineReason::StaleMarker), "{o:?}");
}

/// Eight managers (as eight processes would) meet five brand-new nodes at the same moment,
/// each taking one lock with a single attempt. Each may see the markers another one is
/// writing on some nodes and not yet on others: "the cluster has met the library, these
/// nodes lost their marker". That race must cost a moment, not the maximum TTL (60 s). A
/// first attempt re-reads such markers for a second; on a loaded machine the writer can take
/// longer than that, and the attempt is refused, but the manager's probes then find the
/// markers: a later attempt of the same manager is granted well within the maximum TTL. (An
/// attempt that fails for another reason on a loaded machine, a timeout, is not what this
/// checks.)
#[test]
fn managers_meeting_a_brand_new_cluster_together_are_not_quarantined() {
    let managers = 8;
    let mut refused_at_first = 0;
    for round in 0..6 {
        let cluster = Cluster::start(5);
        let urls = cluster.urls();
        let start = std::sync::Arc::new(std::sync::Barrier::new(managers));
        let workers: Vec<_> = (0..managers)
            .map(|i| {
                let (urls, start) = (urls.clone(), start.clone());
                std::thread::spawn(move || {
                    let mgr = Redlock::new(Config::new(urls)).unwrap();
                    start.wait();
                    let first = mgr
                        .try_lock(format!("first-{i}"), Duration::from_secs(5))
                        .map(|l| l.unlock());
                    (mgr, first)
                })
            })
            .collect();
        for (i, w) in workers.into_iter().enumerate() {
            let (mgr, first) = w.join().unwrap();
            let Err(e) = first else { continue };
            let quarantined = e.report().is_some_and(|r| {
                r.nodes
                    .iter()
                    .any(|n| matches!(n.outcome, NodeOutcome::Quarantined { .. }))
            });
            if !quarantined {
                continue;
            }
            refused_at_first += 1;
            // A moment, not the maximum TTL: granted again within a third of it.
            let again = eventually(Duration::from_secs(20), || {
                mgr.try_lock(format!("again-{i}"), Duration::from_secs(5))
                    .map(|l| l.unlock())
                    .is_ok()
            });
            assert!(
                again,
                "round {round}, manager {i}: still refused after 20 s: {e}"
            );
        }
    }
    println!(
        "first attempts refused for quarantine (then granted): {refused_at_first} of {}",
        managers * 6
    );
}

#[test]
fn only_nodes_that_may_be_new_are_admitted() {
    let max_ttl = Duration::from_secs(60);
    let ttl = Duration::from_secs(1);
    let mut cluster = Cluster::start(3);
    // Node 0 alone meets the library: nodes 1 and 2 are new beside it.
    let first = manager(vec![cluster.urls()[0].clone()], max_ttl);
    first.try_lock("grow", ttl).unwrap().unlock().unwrap();
    let mgr = manager(cluster.urls(), max_ttl);
    let o = seen_outcome(&mgr, 1, ttl);
    assert_eq!(reason(&o), Some(QuarantineReason::NoMarker), "{o:?}");
    // Admitted: they count at once, and their markers are there for every later manager.
    mgr.admit_new_nodes(&[1, 2]).unwrap();
    let lease = mgr.try_lock("grow", ttl).unwrap();
    assert!(
        lease
            .acquisition()
            .nodes
            .iter()
            .all(|n| n.outcome.is_success() || n.outcome == NodeOutcome::Pending)
    );
    lease.unlock().unwrap();
    for s in &cluster.servers[1..] {
        assert_eq!(s.marker_run_id().as_deref(), Some(s.run_id().as_str()));
    }
    // A restart this manager saw is a fact, not a doubt: refused, and still quarantined.
    cluster.servers[0].restart();
    let o = seen_outcome(&mgr, 0, ttl);
    assert_eq!(reason(&o), Some(QuarantineReason::RestartSeen), "{o:?}");
    match mgr.admit_new_nodes(&[0]) {
        Err(Error::InvalidInput(m)) => {
            assert!(
                m.contains("node 0") && m.contains("is not new: restart seen"),
                "{m}"
            )
        }
        other => panic!("a restarted node was admitted: {other:?}"),
    }
    assert_eq!(
        reason(&seen_outcome(&mgr, 0, ttl)),
        Some(QuarantineReason::RestartSeen)
    );
    // Bad indexes are refused before anything is sent.
    assert!(matches!(
        mgr.admit_new_nodes(&[3]),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn a_rolling_restart_of_every_node_is_not_mistaken_for_a_brand_new_cluster() {
    // Long enough that the steps below (each bounded at 10 s) cannot outlast the lease on a
    // loaded machine: they take well under a second here.
    let max_ttl = Duration::from_secs(60);
    let ttl = Duration::from_secs(50);
    let mut cluster = Cluster::start(3);
    let holder = manager(cluster.urls(), max_ttl);
    let lease = holder.try_lock("rolling", ttl).unwrap();
    // Every node restarts empty in turn, well within the lease; a running manager sees each
    // restart and notes it on the node.
    let watcher = manager(cluster.urls(), max_ttl);
    assert_eq!(seen_outcome(&watcher, 0, ttl), NodeOutcome::Success);
    for i in 0..3 {
        cluster.servers[i].restart();
        let o = seen_outcome(&watcher, i, ttl);
        assert_eq!(reason(&o), Some(QuarantineReason::RestartSeen), "{o:?}");
        assert!(
            eventually(Duration::from_secs(10), || {
                let _ = outcome_of(&watcher, i, ttl);
                cluster.servers[i].get(redlock::LOSS_NOTE_KEY).is_some()
            }),
            "no loss note on node {i}"
        );
    }
    // No node has a marker left, and every one is young: what a brand-new cluster looks like.
    assert!(cluster.servers.iter().all(|s| s.marker().is_none()));
    assert!(
        lease.validity() > Duration::ZERO,
        "the test ran past its lease"
    );
    // A manager meeting the cluster now reads the notes: every node lost its keyspace, none
    // counts, and the lock is not granted a second time.
    let late = manager(cluster.urls(), max_ttl);
    match late.try_lock("rolling", ttl) {
        Ok(second) => panic!(
            "granted again while the first lease is valid for {:?}: {:?}",
            lease.validity(),
            second.acquisition()
        ),
        Err(e) => {
            let r = e.report().expect("a report");
            let noted = (r.nodes.iter())
                .filter(|n| reason(&n.outcome) == Some(QuarantineReason::NoMarker))
                .count();
            // Once a quorum is impossible, the rest are not waited for.
            let pending = (r.nodes.iter())
                .filter(|n| n.outcome == NodeOutcome::Pending)
                .count();
            assert!(noted >= 2 && noted + pending == 3, "{e}");
        }
    }
    // Nor may an operator admit them as new.
    match late.admit_new_nodes(&[0]) {
        Err(Error::InvalidInput(m)) => assert!(m.contains("is not new"), "{m}"),
        other => panic!("a node noted as lost was admitted: {other:?}"),
    }
    // Its keys went with the restarts: nothing to release.
    assert!(lease.unlock().is_err());
}
