//! Failover groups: a node that is a Sentinel-managed master and its replica
//! (`redis+sentinel://`), with real `redis-server --sentinel` processes. The master is found
//! through the sentinels, a promotion is a restart for restart quarantine, and the sentinels'
//! failures are typed errors that name the node.

#[path = "support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use redlock::{Config, NodeOutcome, QuarantineReason, Redlock, RenewOptions};
use support::sentinel::{Group, Sentinel};
use support::{Cluster, RedisServer, eventually};

fn manager(urls: Vec<String>, max_ttl: Duration) -> Redlock {
    Redlock::new(
        Config::new(urls)
            .max_ttl(max_ttl)
            .node_timeout(Duration::from_millis(300))
            .retry_delay(Duration::from_millis(20))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50)),
    )
    .unwrap()
}

/// Node 0 a failover group, nodes 1 and 2 plain masters; a manager that has met them (markers
/// written everywhere, and copied to the replica).
fn setup(service: &str, max_ttl: Duration) -> (Group, Cluster, Vec<String>, Redlock) {
    let g = Group::start(service);
    let others = Cluster::start(2);
    let urls = vec![g.url(), others.urls()[0].clone(), others.urls()[1].clone()];
    let x = manager(urls.clone(), max_ttl);
    let all = all_grant(&x, "first-contact");
    assert!(all, "{:?}", x.node_states()[0]);
    let state = &x.node_states()[0];
    assert_eq!(
        state.master.as_deref(),
        Some(format!("127.0.0.1:{}", g.master.port).as_str())
    );
    assert!(
        state.addr.starts_with("redis+sentinel://"),
        "{}",
        state.addr
    );
    let id = g.master.run_id();
    assert!(
        eventually(Duration::from_secs(20), || g
            .replica
            .marker()
            .is_some_and(|m| m.starts_with(&id))),
        "the replica never copied the marker"
    );
    (g, others, urls, x)
}

/// Locks `resource` until every node (three) granted it (bounded): the first locks may return
/// at quorum before a node still connecting (a group's sentinels first, then its master)
/// answered. True once one did.
fn all_grant(mgr: &Redlock, resource: &str) -> bool {
    eventually(Duration::from_secs(10), || {
        mgr.try_lock(resource, Duration::from_secs(1))
            .map(|l| {
                let n = l.acquisition().successes;
                l.unlock().unwrap();
                n == 3
            })
            .unwrap_or(false)
    })
}

fn key_of(urls: &[String], resource: &str) -> Vec<u8> {
    Config::new(urls.to_vec())
        .lock_key(resource.as_bytes())
        .unwrap()
}

/// The double grant of issue 35 with a Sentinel group: X holds `r` on nodes 0 and 1 (node 2
/// held a foreign key meanwhile); replication lags, so the replica lacks X's key; the master
/// dies and the sentinels promote the replica. A new manager must not be granted `r` while X's
/// lease is valid: the promoted replica holds its old master's marker, so it is quarantined
/// from when the new manager first sees it.
#[test]
fn a_promoted_replica_found_by_the_sentinels_grants_nothing_while_the_lock_is_held() {
    let max_ttl = Duration::from_secs(6);
    let (mut g, others, urls, x) = setup("double", max_ttl);
    let resource = "failover";
    let key = key_of(&urls, resource);
    let foreign = |cmd: &str| {
        let mut c = redis::cmd(cmd);
        c.arg(&key);
        if cmd == "SET" {
            c.arg("someone-else").arg("PX").arg(60_000);
        }
        c.exec(&mut others.servers[1].client()).unwrap();
    };
    foreign("SET");
    g.hold_replication();
    let lease = x.try_lock(resource, max_ttl).unwrap();
    foreign("DEL");
    assert!(
        g.replica.get(&key).is_none(),
        "replication was not held back"
    );
    g.master.kill();
    assert!(g.wait_master(g.replica.port), "no failover");
    let y = manager(urls, max_ttl);
    let mut tries = 0;
    while lease.expires_at().is_some_and(|e| e > Instant::now()) && tries < 200 {
        tries += 1;
        let r = y.try_lock(resource, max_ttl);
        let at = Instant::now();
        if let Ok(l) = r {
            let valid = lease.expires_at().is_some_and(|e| e > at);
            assert!(!valid, "granted while X held it: {:?}", l.acquisition());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let s = &y.node_states()[0];
    assert_eq!(
        s.master.as_deref(),
        Some(format!("127.0.0.1:{}", g.replica.port).as_str())
    );
    assert!(
        matches!(
            s.quarantine_reason,
            Some(QuarantineReason::StaleMarker) | None
        ),
        "{s:?}"
    );
}

/// N = 3, node 0 a group of one master, one replica and three sentinels. The master is killed
/// while X holds an auto-renewed lock: the sentinels promote the replica; X's renewals and
/// unlock go on through the other nodes; nobody else is granted while X holds; and once the
/// quarantine is over, the group counts again.
#[test]
fn a_sentinel_failover_while_holding_keeps_the_lock_and_the_group_counts_again() {
    // Built (if need be) before anything below starts its clock.
    let cli = support::redlock_cli();
    let max_ttl = Duration::from_secs(3);
    let (mut g, mut others, urls, x) = setup("holding", max_ttl);
    let ttl = Duration::from_secs(1);
    let lease = x.try_lock("held", ttl).unwrap();
    lease.auto_renew(RenewOptions::default()).unwrap();
    g.hold_replication();
    g.master.kill();
    assert!(g.wait_master(g.replica.port), "no failover");
    let y = manager(urls, max_ttl);
    // Several TTLs pass: X's lease is renewed through nodes 1 and 2, and Y is never granted.
    let until = Instant::now() + 3 * ttl;
    while Instant::now() < until {
        assert!(y.try_lock("held", ttl).is_err());
        assert!(!lease.is_lost(), "{:?}", lease.lost_reason());
        std::thread::sleep(Duration::from_millis(50));
    }
    lease.unlock().unwrap();
    // The group counts again once its quarantine is over: with node 2 gone, a lock needs it.
    others.servers[1].kill();
    let granted = eventually(Duration::from_secs(30), || {
        y.try_lock("after", ttl).map(|l| l.unlock()).is_ok()
    });
    assert!(granted, "{:?}", y.node_states()[0]);
    let s = &y.node_states()[0];
    assert!(s.trusted, "{s:?}");
    let promoted = format!("127.0.0.1:{}", g.replica.port);
    assert_eq!(s.master.as_deref(), Some(promoted.as_str()));
    // Metrics and `redlock inspect` name the group and its current master.
    let text = y.metrics().to_prometheus();
    let line = format!("master=\"{promoted}\"}} 1");
    assert!(
        text.lines()
            .any(|l| l.starts_with("redlock_node_master{node=\"0\"") && l.ends_with(&line)),
        "{text}"
    );
    let out = std::process::Command::new(cli)
        .args(["inspect", "--nodes", &y.config().node_urls().join(",")])
        .args(["--resource", "after"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "{} (master {promoted}, 0 promotions seen)",
            g.url()
        )),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Node 0's outcome in one acquisition through a manager over `url` and two plain nodes.
fn group_outcome(url: String, others: &Cluster) -> (NodeOutcome, Duration) {
    let mgr = Redlock::new(
        Config::new([url, others.urls()[0].clone(), others.urls()[1].clone()])
            .connect_timeout(Duration::from_millis(200))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(20)),
    )
    .unwrap();
    let start = Instant::now();
    let r = mgr.try_lock("probe", Duration::from_secs(1));
    let took = start.elapsed();
    let report = match &r {
        Ok(l) => l.acquisition().clone(),
        Err(e) => e.report().expect("a report").clone(),
    };
    (report.nodes[0].outcome.clone(), took)
}

/// Every way the sentinels can fail gives a `Sentinel` outcome that says what happened, for
/// node 0 only, within the step (not a hang: a step here is well under a second; the bound is
/// generous for a busy machine).
#[test]
fn sentinel_failures_are_typed_and_name_what_happened() {
    let others = Cluster::start(2);
    let check = |url: String, says: &str| {
        let (o, took) = group_outcome(url.clone(), &others);
        match &o {
            NodeOutcome::Sentinel(m) => assert!(m.contains(says), "{url}: {m}"),
            other => panic!("{url}: expected a sentinel failure, got {other:?}"),
        }
        assert!(took < Duration::from_secs(5), "{url}: took {took:?}");
    };
    // No sentinel listening.
    let dead: Vec<String> = (0..2)
        .map(|_| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        })
        .collect();
    check(
        format!("redis+sentinel://{}/svc", dead.join(",")),
        "connection refused",
    );
    // A service the sentinels do not know.
    let master = RedisServer::start();
    let s = Sentinel::start("svc", master.port, 1);
    check(
        format!("redis+sentinel://{}/nosuch", s.host_port()),
        "no sentinel knows a master named \"nosuch\"",
    );
    // Two sentinels that name different masters for the same service.
    let other_master = RedisServer::start();
    let s2 = Sentinel::start("svc", other_master.port, 1);
    check(
        format!("redis+sentinel://{},{}/svc", s.host_port(), s2.host_port()),
        "disagree",
    );
    // A sentinel that names a server that is a replica.
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let s3 = Sentinel::start("svc", replica.port, 1);
    check(
        format!("redis+sentinel://{}/svc", s3.host_port()),
        "role:slave",
    );
    // And the group that works, for contrast (alone, so that its answer decides).
    let alone = Redlock::new(Config::new([format!(
        "redis+sentinel://{}/svc",
        s.host_port()
    )]))
    .unwrap();
    let lease = alone.try_lock("probe", Duration::from_secs(1)).unwrap();
    assert_eq!(lease.acquisition().nodes[0].outcome, NodeOutcome::Success);
}

/// Sentinels that announce host names name the master `localhost`: the group reaches it
/// through that name, and its metrics give the address the name resolved to.
#[test]
fn sentinels_that_announce_host_names_are_followed_to_the_master() {
    let master = RedisServer::start();
    let s = Sentinel::start_named("svc", master.port);
    let said: Vec<String> = s
        .query(
            redis::cmd("SENTINEL")
                .arg("get-master-addr-by-name")
                .arg("svc"),
        )
        .unwrap();
    assert_eq!(said, ["localhost".to_string(), master.port.to_string()]);
    let url = format!("redis+sentinel://{}/svc", s.host_port());
    let mgr = Redlock::new(Config::new([url])).unwrap();
    let lease = mgr.try_lock("named", Duration::from_secs(10)).unwrap();
    assert_eq!(lease.acquisition().nodes[0].outcome, NodeOutcome::Success);
    let held = master.get(lease.key());
    assert!(held.is_some_and(|v| v.starts_with(lease.token().as_bytes())));
    let m = mgr.metrics();
    let want = format!("127.0.0.1:{}", master.port);
    assert_eq!(m.nodes[0].master.as_deref(), Some(want.as_str()));
    lease.unlock().unwrap();
    assert_eq!(master.get(lease.key()), None);
}

/// A host name that a test moves: the manager's `Config::resolver` answers 127.0.0.1 and the
/// port last set, and records every look-up.
struct MovingName {
    port: std::sync::Arc<std::sync::atomic::AtomicU16>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<(String, u16)>>>,
}

impl MovingName {
    /// A manager of the one node `url` (restart quarantine off, quick reconnects) whose names
    /// lead to `port` until [`move_to`](Self::move_to).
    fn manager(url: &str, port: u16) -> (Redlock, MovingName) {
        use std::sync::{Arc, Mutex, atomic::AtomicU16, atomic::Ordering::SeqCst};
        let name = MovingName {
            port: Arc::new(AtomicU16::new(port)),
            asked: Arc::new(Mutex::new(Vec::new())),
        };
        let (t, a) = (Arc::clone(&name.port), Arc::clone(&name.asked));
        let mgr = Redlock::new(
            Config::new([url])
                .restart_quarantine(false)
                .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50))
                .resolver(move |host, port| {
                    a.lock().unwrap().push((host.to_string(), port));
                    let to = std::net::SocketAddr::from(([127, 0, 0, 1], t.load(SeqCst)));
                    Ok(vec![to])
                }),
        )
        .unwrap();
        (mgr, name)
    }

    fn move_to(&self, port: u16) {
        self.port.store(port, std::sync::atomic::Ordering::SeqCst);
    }

    /// The name was looked up again after the manager was made, and only `host:port` was.
    fn looked_up_again(&self, host: &str, port: u16) {
        let asked = self.asked.lock().unwrap();
        assert!(asked.len() >= 2, "{asked:?}");
        assert!(
            asked.iter().all(|(h, p)| h == host && *p == port),
            "{asked:?}"
        );
    }
}

/// Whether `resource` is locked and unlocked again within 20 s (bounded: calls that fail are
/// retried).
fn locks_again(mgr: &Redlock, resource: &str) -> bool {
    eventually(Duration::from_secs(20), || {
        mgr.try_lock(resource, Duration::from_secs(10))
            .map(|l| l.unlock().unwrap())
            .is_ok()
    })
}

/// A managed endpoint is a host name that a failover moves to the promoted server. A node
/// named by it looks the name up again at each reconnection and follows it; every look-up
/// goes through `Config::resolver`, which stands in for DNS here.
#[test]
fn a_node_named_by_a_host_name_follows_the_name_when_it_moves() {
    let mut old = RedisServer::start();
    let new = RedisServer::start();
    let (mgr, name) = MovingName::manager("redis://primary.cache.test:6379", old.port);
    let lease = mgr.try_lock("moving", Duration::from_secs(10)).unwrap();
    assert!(old.get(lease.key()).is_some());
    lease.unlock().unwrap();
    // The failover: the name leads to the other server, and the old one is gone.
    name.move_to(new.port);
    old.kill();
    let on_new = eventually(Duration::from_secs(20), || {
        match mgr.try_lock("moving", Duration::from_secs(10)) {
            Ok(l) => {
                let there = new.get(l.key()).is_some();
                l.unlock().unwrap();
                there
            }
            Err(_) => false,
        }
    });
    assert!(on_new, "the node never followed its name to the new server");
    name.looked_up_again("primary.cache.test", 6379);
}

/// A resolver that never answers does not hold a call past its deadline: the node keeps the
/// address it had, and once the name is resolved again the node follows it.
#[test]
fn a_look_up_that_hangs_holds_no_call() {
    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Condvar, Mutex};
    let mut server = RedisServer::start();
    let port = server.port;
    // After the first look-up (when the manager is made), every look-up waits for `gate`.
    let gate = Arc::new((Mutex::new(false), Condvar::new()));
    let first = Arc::new(AtomicBool::new(true));
    let (g, f) = (Arc::clone(&gate), Arc::clone(&first));
    let mgr = Redlock::new(
        Config::new(["redis://slow-dns.test:6379"])
            .restart_quarantine(false)
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50))
            .resolver(move |_, _| {
                if !f.swap(false, SeqCst) {
                    let (open, cv) = &*g;
                    let mut o = open.lock().unwrap();
                    while !*o {
                        o = cv.wait(o).unwrap();
                    }
                }
                Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
            }),
    )
    .unwrap();
    mgr.try_lock("dns", Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    // The server restarts: the node reconnects, and its look-up hangs. Calls still return,
    // and reach the server at the address known.
    server.restart();
    let (done, calls) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(locks_again(&mgr, "dns"));
    });
    // Bounded: a call held by the look-up would never end (until the gate opens, below).
    let back = calls.recv_timeout(Duration::from_secs(60));
    let (open, cv) = &*gate;
    *open.lock().unwrap() = true;
    cv.notify_all();
    assert_eq!(back, Ok(true), "no call got through while the look-up hung");
}

/// Sentinels named by host names are looked up again before they are asked again: a sentinel
/// that comes back at another address (a rescheduled pod) is still found.
#[test]
fn sentinels_named_by_host_names_are_found_where_they_move() {
    let master = RedisServer::start();
    let mut first = Sentinel::start("svc", master.port, 1);
    let url = "redis+sentinel://sentinel.test:26379/svc";
    let (mgr, name) = MovingName::manager(url, first.port);
    assert!(locks_again(&mgr, "sentinel-moves"));
    // The sentinel moves: it is gone, and another at another port watches the same master.
    first.kill();
    let second = Sentinel::start("svc", master.port, 1);
    name.move_to(second.port);
    // The group's connections are closed: the next one asks the sentinel again.
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query(&mut master.client())
        .unwrap();
    assert!(
        locks_again(&mgr, "sentinel-moves"),
        "the group never found its sentinel at its new address"
    );
    name.looked_up_again("sentinel.test", 26379);
}

/// `?durable=true` turns restart quarantine off for that node alone: after both restart
/// empty, the durable node's grants count at once, the other's do not.
#[test]
fn a_durable_node_is_not_quarantined_and_the_others_still_are() {
    let mut cluster = Cluster::start(3);
    cluster.mark();
    let mut urls = cluster.urls();
    urls[0] = format!("{}?durable=true", urls[0]);
    let mgr = manager(urls, Duration::from_secs(30));
    let ttl = Duration::from_secs(1);
    assert_eq!(
        mgr.node_states()[0].addr,
        format!("127.0.0.1:{}?durable=true", cluster.servers[0].port)
    );
    let all = all_grant(&mgr, "warm");
    assert!(all);
    cluster.servers[0].restart();
    cluster.servers[1].restart();
    // Once the manager has reconnected to both (each outcome says so), node 0 grants and
    // node 1 is quarantined.
    let mut last = None;
    let seen = eventually(Duration::from_secs(20), || {
        let report = match mgr.try_lock("after", ttl) {
            Ok(l) => {
                let r = l.acquisition().clone();
                l.unlock().unwrap();
                r
            }
            Err(e) => e.report().expect("a report").clone(),
        };
        let done = report.nodes[0].outcome == NodeOutcome::Success
            && matches!(report.nodes[1].outcome, NodeOutcome::Quarantined { .. });
        last = Some(report);
        done
    });
    assert!(seen, "{last:?}");
    assert!(mgr.node_states()[0].trusted);
    assert!(!mgr.node_states()[1].trusted);
}

/// `Config::replica_acks`: a grant counts on the group only once its replica acknowledged it
/// (`WAIT`, written behind the grant). With replication held back, the group's grant does not
/// count and is released; the lock is still granted by the two plain nodes.
#[test]
fn a_grant_its_replicas_did_not_acknowledge_does_not_count_and_is_released() {
    let g = Group::start("acks");
    let others = Cluster::start(2);
    let urls = vec![g.url(), others.urls()[0].clone(), others.urls()[1].clone()];
    let mgr = Redlock::new(
        Config::new(urls.clone())
            .replica_acks(1, Duration::from_millis(300))
            .node_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let ttl = Duration::from_secs(5);
    // Replicating: node 0's grant is acknowledged and counts.
    let all = all_grant(&mgr, "acked");
    assert!(all, "{:?}", mgr.node_states()[0]);
    // Replication held back, and node 2 holds a foreign key: the lock needs node 0's grant,
    // whose WAIT counts no replica, so it does not count, and is undone.
    g.hold_replication();
    let key = key_of(&urls, "unacked");
    redis::cmd("SET")
        .arg(&key)
        .arg("someone-else")
        .arg("PX")
        .arg(60_000)
        .exec(&mut others.servers[1].client())
        .unwrap();
    let e = mgr.try_lock("unacked", ttl).unwrap_err();
    let r = e.report().expect("a report");
    assert_eq!(
        r.nodes[0].outcome,
        NodeOutcome::Unacknowledged {
            acknowledged: 0,
            wanted: 1
        },
        "{r:?}"
    );
    assert!(
        eventually(Duration::from_secs(5), || g.master.get(&key).is_none()),
        "the unacknowledged grant was not released"
    );
    // Refused at construction: no replica, or no timeout.
    for (n, t) in [(0, 100), (1, 0)] {
        let e = Redlock::new(Config::new(urls.clone()).replica_acks(n, Duration::from_millis(t)))
            .unwrap_err();
        assert!(matches!(e, redlock::Error::InvalidInput(_)), "{e}");
    }
}

/// `rediss+sentinel://`: TLS to the sentinels and to the master they name (verified against
/// the run's CA, the master by the IP address the sentinel gives). A plain sentinel URL for
/// the same TLS sentinel is refused, typed.
#[test]
fn a_failover_group_over_tls() {
    let pki = support::tls::Pki::new();
    let serve = pki.serve();
    let master = RedisServer::start_tls(&serve);
    let s = Sentinel::start_tls("svc", master.port, &serve);
    let url = format!("rediss+sentinel://{}/svc", s.host_port());
    let mgr = Redlock::new(Config::new([url]).tls(pki.options())).unwrap();
    let lease = mgr.try_lock("over-tls", Duration::from_secs(5)).unwrap();
    assert_eq!(lease.acquisition().nodes[0].outcome, NodeOutcome::Success);
    lease.unlock().unwrap();
    let plain = Redlock::new(Config::new([format!(
        "redis+sentinel://{}/svc",
        s.host_port()
    )]))
    .unwrap();
    let e = plain
        .try_lock("over-tls", Duration::from_secs(5))
        .unwrap_err();
    let o = &e.report().expect("a report").nodes[0].outcome;
    assert!(matches!(o, NodeOutcome::Sentinel(_)), "{o:?}");
}
