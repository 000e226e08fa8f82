//! Integration tests against real `redis-server` processes started by the tests.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, KeyKind, NodeOutcome, Redlock};
use support::{Cluster, RedisServer, SilentListener, eventually};

/// How long nodes decided after the quorum get to apply a command before a test complains.
/// Shorter than every TTL these tests leave behind, so a key that is only gone because it
/// expired still fails the test.
const SETTLE: Duration = Duration::from_secs(3);

fn key(resource: &[u8]) -> Vec<u8> {
    let mut k = b"redlock:".to_vec();
    k.extend_from_slice(resource);
    k
}

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(20))
            // Generous: CI machines are small and busy. Early return at quorum means a
            // timeout only costs time when a node's answer is really needed.
            .node_timeout(Duration::from_millis(500)),
    )
    .unwrap()
}

fn lock_unlock_extend(n: usize) {
    let cluster = Cluster::start(n);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let lease = mgr.try_lock("orders:42", ttl).unwrap();
    let k = key(b"orders:42");
    assert_eq!(lease.key(), &k[..]);
    assert_eq!(lease.token().len(), 40);
    // `<token>.<unix ms>`: no label configured.
    let (random, since) = lease.value().split_once('.').unwrap();
    assert_eq!(random, lease.token());
    assert!(since.parse::<u64>().unwrap() > 1_700_000_000_000);
    assert!(lease.is_valid());
    assert!(lease.validity() <= ttl && lease.validity() > Duration::from_secs(9));
    assert!(lease.acquisition().successes >= mgr.quorum());
    // Give the nodes decided after the quorum a moment to apply the SET.
    assert!(eventually(SETTLE, || cluster
        .holding(&k, lease.value().as_bytes())
        == n));
    for s in &cluster.servers {
        let pttl = s.pttl(&k);
        assert!(pttl > 9_000 && pttl <= 10_000, "pttl {pttl}");
    }

    // Held: a second attempt (another token) is refused, and says so per node.
    match mgr.try_lock("orders:42", ttl) {
        Err(Error::NotAcquired(r)) => {
            assert!(r.successes < r.quorum);
            assert!(r.nodes.iter().any(|n| n.outcome == NodeOutcome::Rejected));
        }
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    // The refused attempt released only its own token: ours is intact everywhere.
    assert!(eventually(SETTLE, || cluster
        .holding(&k, lease.value().as_bytes())
        == n));

    lease.extend(Duration::from_secs(30)).unwrap();
    assert!(lease.validity() > Duration::from_secs(29));
    assert_eq!(lease.ttl(), Duration::from_secs(30));
    assert!(eventually(SETTLE, || cluster
        .servers
        .iter()
        .all(|s| s.pttl(&k) > 29_000)));

    lease.unlock().unwrap();
    assert_eq!(lease.validity(), Duration::ZERO);
    assert!(eventually(SETTLE, || cluster.present(&k) == 0));
    // Double unlock: a typed "not held", without contacting anyone.
    match lease.unlock() {
        Err(Error::NotHeld(r)) => assert!(r.nodes.is_empty()),
        other => panic!("expected NotHeld, got {other:?}"),
    }
    assert!(matches!(
        lease.extend(Duration::from_secs(1)),
        Err(Error::NotHeld(_))
    ));
    // Free again.
    mgr.try_lock("orders:42", ttl).unwrap().unlock().unwrap();
}

#[test]
fn lock_unlock_extend_one_node() {
    lock_unlock_extend(1);
}

#[test]
fn lock_unlock_extend_three_nodes() {
    lock_unlock_extend(3);
}

#[test]
fn lock_unlock_extend_five_nodes() {
    lock_unlock_extend(5);
}

#[test]
fn eight_threads_keep_mutual_exclusion_on_a_non_atomic_counter() {
    let cluster = Cluster::start(5);
    let mgr = manager(cluster.urls());
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let per_thread = 25;
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (mgr, counter, inside, overlaps) = (
                mgr.clone(),
                Arc::clone(&counter),
                Arc::clone(&inside),
                Arc::clone(&overlaps),
            );
            thread::spawn(move || {
                for _ in 0..per_thread {
                    let lease = mgr
                        .lock_timeout("counter", Duration::from_secs(30), Duration::from_secs(60))
                        .expect("acquire within 60 s");
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    // Deliberately non-atomic read-modify-write with a pause in between.
                    let v = counter.load(Ordering::SeqCst);
                    thread::sleep(Duration::from_micros(200));
                    counter.store(v + 1, Ordering::SeqCst);
                    assert!(lease.is_valid(), "critical section outlived the validity");
                    inside.store(false, Ordering::SeqCst);
                    lease.unlock().expect("unlock");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert_eq!(counter.load(Ordering::SeqCst), 8 * per_thread);
    // Every unlock reached every node, after that node's SET: nothing is left behind.
    assert!(eventually(SETTLE, || cluster.present(&key(b"counter")) == 0));
    assert_eq!(cluster.present(&key(b"counter")), 0);
}

#[test]
fn separate_managers_exclude_each_other() {
    let cluster = Cluster::start(3);
    let a = manager(cluster.urls());
    let b = manager(cluster.urls());
    let la = a.try_lock("shared", Duration::from_secs(5)).unwrap();
    assert!(matches!(
        b.try_lock("shared", Duration::from_secs(5)),
        Err(Error::NotAcquired(_))
    ));
    la.unlock().unwrap();
    b.try_lock("shared", Duration::from_secs(5))
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn one_of_five_killed_locking_still_works_and_the_node_comes_back() {
    let mut cluster = Cluster::start(5);
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .node_timeout(Duration::from_millis(500))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(50))
            .max_ttl(Duration::from_secs(2)),
    )
    .unwrap();
    let ttl = Duration::from_secs(1);
    mgr.try_lock("r", ttl).unwrap().unlock().unwrap();
    cluster.servers[2].kill();
    for _ in 0..20 {
        let lease = mgr.try_lock("r", ttl).unwrap();
        // The step returns at the quorum of 3; the fourth live node may still be pending.
        assert!(lease.acquisition().successes >= 3);
        assert!(matches!(
            lease.acquisition().nodes[2].outcome,
            NodeOutcome::Unreachable(_) | NodeOutcome::Backoff(_)
        ));
        lease.unlock().unwrap();
    }
    cluster.servers[2].restart();
    // After its backoff the node is reconnected; it restarted empty, so it is in restart
    // quarantine (the maximum TTL, 2 s here) and then grants again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut quarantined = false;
    loop {
        let lease = mgr.try_lock("r", ttl).unwrap();
        let outcome = lease.acquisition().nodes[2].outcome.clone();
        lease.unlock().unwrap();
        if outcome == NodeOutcome::Success {
            break;
        }
        if let NodeOutcome::Quarantined { reason, .. } = outcome {
            assert_eq!(reason, redlock::QuarantineReason::RestartSeen);
            quarantined = true;
        }
        assert!(Instant::now() < deadline, "node 2 never came back");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(
        quarantined,
        "the restarted node counted without a quarantine"
    );
}

#[test]
fn two_of_five_paused_locking_decided_by_the_live_three() {
    let cluster = Cluster::start(5);
    // A long per-node timeout: if a step waited for the paused nodes, each would take 3 s.
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .node_timeout(Duration::from_secs(3))
            .stale_limit(Duration::from_secs(30)),
    )
    .unwrap();
    // Warm the connections so the paused nodes hold live connections with owed replies.
    mgr.try_lock("p", Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    cluster.servers[1].pause();
    cluster.servers[3].pause();
    let start = Instant::now();
    let cycles = 20;
    let mut slowest = Duration::ZERO;
    for i in 0..cycles {
        let cycle = Instant::now();
        let lease = mgr
            .try_lock(format!("p{i}"), Duration::from_secs(10))
            .unwrap();
        assert_eq!(lease.acquisition().successes, 3);
        assert_eq!(
            lease.acquisition().nodes[1].outcome,
            NodeOutcome::Pending,
            "{}",
            lease.acquisition()
        );
        lease.unlock().unwrap();
        slowest = slowest.max(cycle.elapsed());
    }
    eprintln!(
        "{cycles} cycles in {:?}, the slowest {slowest:?}",
        start.elapsed()
    );
    // A step that waited for a paused node takes its 3 s timeout: every cycle took less, so
    // none waited. (Per cycle, not for all 20 together: a busy machine may stretch 40 steps
    // past 3 s without any of them waiting.)
    assert!(
        slowest < Duration::from_secs(3),
        "a step waited for the paused nodes: a cycle took {slowest:?}"
    );
    cluster.servers[1].resume();
    cluster.servers[3].resume();
    // The resumed nodes now answer a backlog of 40 commands; every late reply must be
    // discarded, never taken for a later command's reply.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all_five = 0;
    while all_five < 10 {
        let lease = mgr.try_lock("after", Duration::from_secs(10)).unwrap();
        let acq = lease.acquisition().clone();
        for n in &acq.nodes {
            assert!(
                !matches!(n.outcome, NodeOutcome::Protocol(_)),
                "misattributed reply: {acq}"
            );
        }
        lease.unlock().unwrap();
        if acq.successes == 5 {
            all_five += 1;
        }
        assert!(Instant::now() < deadline, "paused nodes never caught up");
    }
    // The backlog on the resumed nodes executed SET then release for each key: nothing left.
    assert!(eventually(SETTLE, || cluster
        .servers
        .iter()
        .all(|s| s.lock_keys() == 0)));
}

#[test]
fn three_of_five_down_fails_fast_with_unavailable() {
    let mut cluster = Cluster::start(5);
    for i in [0, 2, 4] {
        cluster.servers[i].kill();
    }
    // A long per-node timeout: one waited out would take 10 s.
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .retry_count(2)
            .retry_delay(Duration::from_millis(10))
            .node_timeout(Duration::from_secs(10)),
    )
    .unwrap();
    let start = Instant::now();
    match mgr.lock("x", Duration::from_secs(5)) {
        Err(Error::Unavailable(r)) => {
            let msg = Error::Unavailable(r.clone()).to_string();
            assert!(msg.starts_with("unavailable: "), "{msg}");
            assert!(r.successes < r.quorum);
            for i in [0, 2, 4] {
                assert!(
                    matches!(
                        r.nodes[i].outcome,
                        NodeOutcome::Unreachable(_) | NodeOutcome::Backoff(_)
                    ),
                    "{msg}"
                );
            }
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // Refused connections decide at once: no per-node timeout (10 s) was waited out.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    // Nothing was left behind on the live minority.
    assert!(eventually(SETTLE, || cluster.present(&key(b"x")) == 0));
}

#[test]
fn a_listener_that_never_answers_is_outvoted_and_then_times_out() {
    let cluster = Cluster::start(2);
    // The cluster has been in use (its nodes hold their markers): the two live nodes are
    // trusted without waiting for the silent one, which a brand-new cluster would.
    cluster.mark();
    let silent = SilentListener::start();
    let mut urls = cluster.urls();
    urls.insert(1, silent.url());
    // A node timeout a busy machine's live nodes meet: the first lock needs both of them.
    let mgr = Redlock::new(support::config(urls).node_timeout(Duration::from_secs(1))).unwrap();
    let lease = mgr.try_lock("s", Duration::from_secs(5)).unwrap();
    assert_eq!(lease.acquisition().successes, 2);
    assert!(matches!(
        lease.acquisition().nodes[1].outcome,
        NodeOutcome::Pending | NodeOutcome::Timeout
    ));
    // With the lock held elsewhere, the silent node's answer is needed: the step waits for
    // its timeout and then reports it.
    let start = Instant::now();
    match mgr.try_lock("s", Duration::from_secs(5)) {
        Err(Error::NotAcquired(r)) | Err(Error::Unavailable(r)) => {
            assert_eq!(r.successes, 0);
        }
        other => panic!("{other:?}"),
    }
    // Its 1 s timeout, and not much more.
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    lease.unlock().unwrap();
}

#[test]
fn a_key_of_the_wrong_type_on_one_node() {
    let cluster = Cluster::start(5);
    let k = key(b"typed");
    redis::cmd("HSET")
        .arg(&k)
        .arg("f")
        .arg("v")
        .exec(&mut cluster.servers[0].client())
        .unwrap();
    let mgr = manager(cluster.urls());
    let lease = mgr.try_lock("typed", Duration::from_secs(5)).unwrap();
    assert!(lease.acquisition().successes >= 3);
    // SET NX does not overwrite an existing key of any type: a refusal on that node (unless
    // the quorum was reached before it answered).
    assert!(matches!(
        lease.acquisition().nodes[0].outcome,
        NodeOutcome::Rejected | NodeOutcome::Pending
    ));
    lease.extend(Duration::from_secs(5)).unwrap();
    lease.unlock().unwrap();
    // The hash is untouched.
    let t: String = redis::cmd("TYPE")
        .arg(&k)
        .query(&mut cluster.servers[0].client())
        .unwrap();
    assert_eq!(t, "hash");
    // The release script's GET fails with WRONGTYPE there; a lock held through a 4/5 quorum
    // reports it per node.
    let lease = mgr.try_lock("typed", Duration::from_secs(5)).unwrap();
    let mgr1 = Redlock::new(support::config(vec![cluster.servers[0].url()])).unwrap();
    match mgr1.try_lock("typed", Duration::from_secs(5)) {
        Err(Error::NotAcquired(r)) => assert_eq!(r.nodes[0].outcome, NodeOutcome::Rejected),
        other => panic!("{other:?}"),
    }
    lease.unlock().unwrap();
}

#[test]
fn wrong_type_key_makes_scripts_report_server_errors() {
    let server = RedisServer::start();
    let mgr = Redlock::new(support::config(vec![server.url()])).unwrap();
    let lease = mgr.try_lock("w", Duration::from_secs(5)).unwrap();
    // Someone replaces our key by a list behind our back.
    let mut c = server.client();
    redis::cmd("DEL").arg(key(b"w")).exec(&mut c).unwrap();
    redis::cmd("LPUSH")
        .arg(key(b"w"))
        .arg("x")
        .exec(&mut c)
        .unwrap();
    match lease.extend(Duration::from_secs(5)) {
        Err(Error::Unavailable(r)) => match &r.nodes[0].outcome {
            NodeOutcome::ServerError(s) => assert!(s.contains("WRONGTYPE"), "{s}"),
            o => panic!("{o:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn passwords_and_acl_users() {
    let plain = RedisServer::start();
    let pw = RedisServer::start_with(&["--requirepass", "s3cret-pw"]);
    let acl = RedisServer::start_with(&["--user", "alice", "on", ">alice-pw", "~*", "&*", "+@all"]);
    let urls = vec![
        plain.url(),
        format!("redis://:s3cret-pw@127.0.0.1:{}", pw.port),
        format!("redis://alice:alice-pw@127.0.0.1:{}/3", acl.port),
    ];
    let mgr = manager(urls);
    let lease = mgr.try_lock("auth", Duration::from_secs(5)).unwrap();
    // The step returned at quorum: the node decided after it applies the SET a moment later.
    let mut on_pw = pw.client_url(&format!("redis://:s3cret-pw@127.0.0.1:{}", pw.port));
    let mut db3 = acl.client_url(&format!("redis://alice:alice-pw@127.0.0.1:{}/3", acl.port));
    let holds = |c: &mut redis::Connection| {
        let v: Option<Vec<u8>> = redis::cmd("GET").arg(key(b"auth")).query(c).unwrap();
        v.as_deref() == Some(lease.value().as_bytes())
    };
    assert!(eventually(SETTLE, || holds(&mut on_pw)));
    assert!(eventually(SETTLE, || holds(&mut db3)), "the key is in db 3");
    lease.unlock().unwrap();
    assert!(!format!("{:?}", mgr).contains("s3cret-pw"));
    assert!(!mgr.node_addrs().concat().contains("alice-pw"));
}

#[test]
fn a_wrong_password_on_one_node_is_reported_without_the_password() {
    let a = RedisServer::start();
    let b = RedisServer::start_with(&["--requirepass", "right-pw"]);
    let c = RedisServer::start();
    // In use before (see the silent-listener test): trusted without b's answer.
    a.mark();
    c.mark();
    let urls = vec![
        a.url(),
        format!("redis://:wrong-pw@127.0.0.1:{}", b.port),
        c.url(),
    ];
    let mgr = manager(urls.clone());
    let lease = mgr.try_lock("pw", Duration::from_secs(5)).unwrap();
    match &lease.acquisition().nodes[1].outcome {
        NodeOutcome::AuthFailed(s) => assert!(s.contains("WRONGPASS"), "{s}"),
        // The two good nodes may have decided before the bad one answered.
        NodeOutcome::Pending => {}
        o => panic!("{o:?}"),
    }
    lease.unlock().unwrap();
    // With two of three wrong, the failure message names the node, not the password.
    let urls = vec![
        a.url(),
        format!("redis://:wrong-pw@127.0.0.1:{}", b.port),
        format!("redis://user:wrong-too@127.0.0.1:{}", c.port),
    ];
    let mgr = Redlock::new(support::config(urls).retry_count(0)).unwrap();
    let err = mgr.lock("pw", Duration::from_secs(5)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Auth(_)), "{msg}");
    assert!(msg.contains("WRONGPASS"), "{msg}");
    assert!(
        !msg.contains("wrong-pw") && !msg.contains("wrong-too"),
        "{msg}"
    );
    assert!(msg.contains(":***@127.0.0.1"), "{msg}");
}

#[test]
fn expiry_then_another_client_acquires_and_the_first_is_not_held() {
    let cluster = Cluster::start(3);
    let a = manager(cluster.urls());
    let b = manager(cluster.urls());
    // A TTL the acquisition itself cannot use up on a busy machine.
    let ttl = Duration::from_secs(1);
    let lease = a.try_lock("exp", ttl).unwrap();
    assert!(lease.validity() <= ttl);
    thread::sleep(ttl + Duration::from_millis(100));
    assert_eq!(lease.validity(), Duration::ZERO);
    assert!(!lease.is_valid());
    let lb = b.try_lock("exp", Duration::from_secs(5)).unwrap();
    // The expired holder can neither extend nor unlock, and does not disturb the new one.
    match lease.extend(Duration::from_secs(5)) {
        Err(Error::NotHeld(_)) => {}
        other => panic!("{other:?}"),
    }
    let start = Instant::now();
    match lease.unlock() {
        Err(Error::NotHeld(_)) => {}
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(eventually(SETTLE, || cluster
        .holding(&key(b"exp"), lb.value().as_bytes())
        == 3));
    lb.unlock().unwrap();
}

#[test]
fn unlock_after_expiry_with_keys_gone_is_not_held() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // A TTL the acquisition itself cannot use up on a busy machine.
    let ttl = Duration::from_secs(1);
    let lease = mgr.try_lock("gone", ttl).unwrap();
    thread::sleep(ttl + Duration::from_millis(150));
    assert!(eventually(SETTLE, || cluster.present(&key(b"gone")) == 0));
    match lease.unlock() {
        Err(Error::NotHeld(r)) => {
            assert_eq!(r.successes, 0);
            assert!(
                r.nodes
                    .iter()
                    .all(|n| matches!(n.outcome, NodeOutcome::Rejected | NodeOutcome::Pending))
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn binary_resource_names() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    for name in [
        &b"\0"[..],
        b"a\r\nb",
        b"\xff\xfe",
        b"*1\r\n$4\r\nPING\r\n",
        &[b'z'; 1024],
    ] {
        let lease = mgr.try_lock(name, Duration::from_secs(5)).unwrap();
        assert_eq!(lease.resource(), name);
        assert!(eventually(SETTLE, || cluster
            .holding(&key(name), lease.value().as_bytes())
            == 3));
        lease.unlock().unwrap();
        assert!(eventually(SETTLE, || cluster.present(&key(name)) == 0));
    }
    assert!(matches!(
        mgr.try_lock([b'z'; 1025], Duration::from_secs(5)),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn lock_until_gives_up_at_the_deadline() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let held = mgr.try_lock("busy", Duration::from_secs(10)).unwrap();
    let start = Instant::now();
    let err = mgr
        .lock_timeout("busy", Duration::from_secs(5), Duration::from_millis(300))
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, Error::NotAcquired(_)), "{err}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    // lock() with the default retry count also gives up.
    let err = mgr.lock("busy", Duration::from_secs(5)).unwrap_err();
    assert!(matches!(err, Error::NotAcquired(_)));
    // And once released, a waiter gets it.
    let waiter = {
        let mgr = mgr.clone();
        thread::spawn(move || {
            mgr.lock_timeout("busy", Duration::from_secs(5), Duration::from_secs(10))
        })
    };
    thread::sleep(Duration::from_millis(100));
    held.unlock().unwrap();
    waiter.join().unwrap().unwrap().unlock().unwrap();
}

#[test]
fn noscript_falls_back_to_eval() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    mgr.try_lock("ns", Duration::from_secs(5))
        .unwrap()
        .unlock()
        .unwrap();
    for s in &cluster.servers {
        redis::cmd("SCRIPT")
            .arg("FLUSH")
            .exec(&mut s.client())
            .unwrap();
    }
    let lease = mgr.try_lock("ns", Duration::from_secs(5)).unwrap();
    lease.extend(Duration::from_secs(5)).unwrap();
    lease.unlock().unwrap();
    // Each step returned at quorum. A node that had not answered yet owes `NOSCRIPT` replies,
    // and its `EVAL` fallbacks go out when the manager next reads that connection (the
    // caretaker only drives connections with output or a handshake pending): here, a scan,
    // which waits for every node. Under load that node may be the slow one.
    assert!(eventually(SETTLE, || {
        let _ = mgr.scan(KeyKind::Lock, "ns");
        cluster.present(&key(b"ns")) == 0
    }));
}

#[test]
fn guard_unlocks_on_drop() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    {
        let g = mgr
            .try_lock("g", Duration::from_secs(5))
            .unwrap()
            .into_guard();
        assert!(g.is_valid());
        assert!(mgr.try_lock("g", Duration::from_secs(5)).is_err());
    }
    mgr.try_lock("g", Duration::from_secs(5))
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn a_lease_outlives_its_manager() {
    let cluster = Cluster::start(3);
    let lease = {
        let mgr = manager(cluster.urls());
        mgr.try_lock("orphan", Duration::from_secs(5)).unwrap()
    };
    lease.extend(Duration::from_secs(5)).unwrap();
    lease.unlock().unwrap();
}

#[test]
fn construction_rejects_bad_configurations() {
    let s = RedisServer::start();
    let same_node_twice = support::config(vec![
        format!("127.0.0.1:{}", s.port),
        format!("localhost:{}", s.port),
    ]);
    match Redlock::new(same_node_twice) {
        Err(Error::InvalidInput(m)) => assert!(m.contains("same as node 0"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Redlock::new(support::config(Vec::<String>::new())),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        Redlock::new(support::config(["redis://127.0.0.1:notaport"])),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        Redlock::new(support::config(vec![s.url()]).drift_factor(1.5)),
        Err(Error::InvalidInput(_))
    ));
}

#[test]
fn a_slow_node_neither_slows_the_cycle_nor_keeps_a_released_key() {
    use support::proxy::DelayProxy;
    let cluster = Cluster::start(5);
    // First, node 4 answers 2 s late (1 s each way), through a proxy of its own: a cycle that
    // waited for it would take seconds, which no busy machine takes for a cycle decided by
    // the four others.
    let slowest = DelayProxy::start(cluster.servers[4].port, Duration::from_secs(1));
    let mut urls = cluster.urls();
    urls[4] = slowest.url();
    let mgr = Redlock::new(support::config(urls).node_timeout(Duration::from_secs(5))).unwrap();
    // Warm the connections (the first step also connects through the proxy).
    mgr.try_lock("warm", Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    for i in 0..10 {
        let start = Instant::now();
        let lease = mgr
            .try_lock(format!("fast{i}"), Duration::from_secs(10))
            .unwrap();
        assert_eq!(lease.acquisition().nodes[4].outcome, NodeOutcome::Pending);
        lease.unlock().unwrap();
        let took = start.elapsed();
        eprintln!("cycle {i}: {took:?}");
        // Decided by the four fast nodes: far less than the slow node's 2 s round trip.
        assert!(took < Duration::from_secs(1), "{took:?}");
    }
    // Node 4 answers 400 ms late (200 ms each way) for what follows.
    let slow = DelayProxy::start(cluster.servers[4].port, Duration::from_millis(200));
    // Now node 4 is paused, so every command to it queues in its socket buffers until
    // SIGCONT. Lock "a": its SET to node 4 waits in node 4's connection. Then another thread
    // starts an acquisition that stays undecided for 4 s (nodes 0 and 1 hold the key for
    // someone else, 2 and 3 grant, 4 is silent, its node timeout 4 s). An unlock of "a" that reached node 4
    // on another connection could run before the SET, leaving the key for its 10 s TTL. The
    // manager has one connection per node, shared by every thread, so the release queues
    // behind the SET there; and since it does not wait for the other thread's acquisition,
    // it is decided by the four live nodes at once.
    cluster.servers[4].pause();
    for round in 0..2 {
        for s in &cluster.servers[..2] {
            redis::cmd("SET")
                .arg(key(format!("blocked{round}").as_bytes()))
                .arg("someone-else")
                .exec(&mut s.client())
                .unwrap();
        }
    }
    let mut urls = cluster.urls();
    urls[4] = slow.url();
    let slow_mgr = Redlock::new(
        support::config(urls)
            .node_timeout(Duration::from_secs(4))
            .stale_limit(Duration::from_secs(30)),
    )
    .unwrap();
    for round in 0..2 {
        let a = slow_mgr.try_lock("a", Duration::from_secs(10)).unwrap();
        assert_eq!(a.acquisition().nodes[4].outcome, NodeOutcome::Pending);
        let blocker = {
            let m = slow_mgr.clone();
            thread::spawn(move || {
                let r = m.try_lock(format!("blocked{round}"), Duration::from_secs(10));
                assert!(r.is_err());
            })
        };
        thread::sleep(Duration::from_millis(100)); // the blocker's round is under way now
        let start = Instant::now();
        a.unlock().unwrap();
        let took = start.elapsed();
        eprintln!("round {round}: unlock took {took:?}");
        // It did not wait for the blocker's round (4 s on node 4) to end: half of that is
        // far more than a busy machine takes for a step decided by four nodes.
        assert!(took < Duration::from_secs(2), "{took:?}");
        blocker.join().unwrap();
    }
    cluster.servers[4].resume();
    // Node 4 received each release after its SET (same connection), so once its backlog
    // drains it holds nothing. A read on that connection is answered after the backlog.
    assert!(eventually(SETTLE, || slow_mgr.holders("a").is_ok_and(
        |h| !matches!(h.nodes[4], redlock::NodeHold::Failed(_))
    )));
    assert_eq!(cluster.servers[4].lock_keys(), 0);
    for s in &cluster.servers[..2] {
        assert_eq!(s.lock_keys(), 2, "only the planted keys remain");
    }
}

#[test]
fn one_server_through_several_addresses_never_counts_twice() {
    // Server A listens on 127.0.0.1, .2 and .3: listed three times, it would be 3 votes of 5.
    let a = RedisServer::start_with(&["--bind", "127.0.0.1 127.0.0.2 127.0.0.3"]);
    let others = Cluster::start(2);
    let mut urls: Vec<String> = (1..=3)
        .map(|h| format!("redis://127.0.0.{h}:{}", a.port))
        .collect();
    urls.extend(others.urls());
    let mgr = manager(urls);
    let lease = mgr.try_lock("dup", Duration::from_secs(10)).unwrap();
    // A counts once: with B and C that is the quorum of 3.
    let outcomes: Vec<NodeOutcome> = lease
        .acquisition()
        .nodes
        .iter()
        .map(|n| n.outcome.clone())
        .collect();
    assert!(
        outcomes[1..3]
            .iter()
            .all(|o| matches!(o, NodeOutcome::Duplicate { of: 0 } | NodeOutcome::Pending)),
        "{outcomes:?}"
    );
    // The key vanishes on B and C: A alone must not keep the holder holding.
    let k = key(b"dup");
    for s in &others.servers {
        redis::cmd("DEL").arg(&k).exec(&mut s.client()).unwrap();
    }
    match lease.extend(Duration::from_secs(10)) {
        Err(Error::NotHeld(r)) | Err(Error::Unavailable(r)) => {
            assert!(r.successes <= 1, "{r}");
            assert!(r.to_string().contains("the same server as node 0"), "{r}");
        }
        other => panic!("extended with one server counted thrice: {other:?}"),
    }
    // A client with the honest node list takes the lock; the first holder no longer holds it.
    let honest = manager(vec![
        a.url(),
        others.urls()[0].clone(),
        others.urls()[1].clone(),
    ]);
    honest
        .try_lock("dup", Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    assert!(!lease.is_valid());
}

#[test]
fn a_quorum_lost_to_refused_credentials_is_an_auth_error() {
    let good = RedisServer::start();
    let pw = [
        RedisServer::start_with(&["--requirepass", "right-pw"]),
        RedisServer::start_with(&["--requirepass", "right-pw"]),
    ];
    // An ACL user who may not load scripts: NOPERM in the handshake.
    let acl =
        RedisServer::start_with(&["--user", "bob", "on", ">bob-pw", "~*", "+@all", "-script"]);
    let mut down = [
        RedisServer::start(),
        RedisServer::start(),
        RedisServer::start(),
    ];
    for d in &mut down {
        d.kill(); // connection refused from now on
    }
    // In use before (see the silent-listener test): trusted without the others' answers.
    good.mark();
    let wrong = |s: &RedisServer| format!("redis://:wrong-pw@127.0.0.1:{}", s.port);
    let attempt = |urls: Vec<String>| {
        // Retries: the later attempts find the refused nodes in reconnect backoff, which must
        // still tell an authentication failure from a dead node.
        let cfg = support::config(urls)
            .retry_count(3)
            .retry_delay(Duration::from_millis(5));
        let err = Redlock::new(cfg)
            .unwrap()
            .lock("creds", Duration::from_secs(5))
            .unwrap_err();
        assert!(
            !err.to_string().contains("wrong-pw") && !err.to_string().contains("bob-pw"),
            "{err}"
        );
        err
    };
    let auth = |err: Error, code: &str| {
        let msg = err.to_string();
        assert!(matches!(err, Error::Auth(_)), "{msg}");
        assert!(msg.starts_with("authentication failed: "), "{msg}");
        assert!(
            msg.contains(&format!("authentication failed: {code}")),
            "{msg}"
        );
    };
    // Wrong passwords (WRONGPASS) on two of three.
    auth(
        attempt(vec![good.url(), wrong(&pw[0]), wrong(&pw[1])]),
        "WRONGPASS",
    );
    // No password for nodes that require one (NOAUTH).
    auth(
        attempt(vec![good.url(), pw[0].url(), pw[1].url()]),
        "NOAUTH",
    );
    // A user without the permissions the handshake needs (NOPERM).
    let bob = format!("redis://bob:bob-pw@127.0.0.1:{}", acl.port);
    auth(
        attempt(vec![good.url(), bob.clone(), wrong(&pw[1])]),
        "NOPERM",
    );
    // One refused, one down, of three: with the credentials fixed there would be a quorum.
    auth(
        attempt(vec![good.url(), wrong(&pw[0]), down[0].url()]),
        "WRONGPASS",
    );
    // One refused, three down, of five: no quorum even with the credentials fixed.
    let err = attempt(vec![
        good.url(),
        wrong(&pw[0]),
        down[0].url(),
        down[1].url(),
        down[2].url(),
    ]);
    assert!(matches!(err, Error::Unavailable(_)), "{err}");
    assert!(err.to_string().contains("WRONGPASS"), "{err}");
}

#[test]
fn a_node_in_cluster_mode_is_refused_with_a_message_that_says_so() {
    // Cluster mode on, no slots assigned: every key command would answer CLUSTERDOWN, and
    // SELECT is refused; neither says why.
    let (c, _) = RedisServer::start_cluster_node(&[]);
    let (a, b) = (RedisServer::start(), RedisServer::start());
    // In use before (see the silent-listener test): trusted without c's answer.
    a.mark();
    b.mark();
    for url in [c.url(), format!("{}/3", c.url())] {
        let mgr = Redlock::new(support::config(vec![url]).retry_count(0)).unwrap();
        let err = mgr.try_lock("cl", Duration::from_secs(5)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::Unavailable(_)), "{msg}");
        assert!(
            msg.contains("name the cluster as one node, redis+cluster://"),
            "{msg}"
        );
    }
    // Beside two plain nodes: they grant the lock; the cluster node says why it did not.
    let mgr = manager(vec![a.url(), b.url(), c.url()]);
    let mut seen = None;
    for i in 0..50 {
        let lease = mgr
            .try_lock(format!("cl{i}"), Duration::from_secs(5))
            .unwrap();
        let outcome = lease.acquisition().nodes[2].outcome.clone();
        lease.unlock().unwrap();
        // Pending: decided before c answered; try again.
        if outcome != NodeOutcome::Pending {
            seen = Some(outcome);
            break;
        }
    }
    match seen {
        Some(NodeOutcome::ServerError(s)) | Some(NodeOutcome::Backoff(s)) => {
            assert!(s.contains("redis+cluster://host:port"), "{s}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn nothing_runs_behind_a_failed_select_or_auth() {
    // Node 0 has no database 16 (a default server has 0-15); node 1 has no password, so AUTH
    // fails there. Their commands must never run (in database 0, unauthenticated).
    let a = RedisServer::start();
    let b = RedisServer::start();
    let others = Cluster::start(3);
    // In use before (see the silent-listener test): trusted without a's and b's answers.
    others.mark();
    let mut urls = vec![
        format!("redis://127.0.0.1:{}/16", a.port),
        format!("redis://:not-set@127.0.0.1:{}", b.port),
    ];
    urls.extend(others.urls());
    let mgr = manager(urls);
    for i in 0..20 {
        let lease = mgr
            .try_lock(format!("stray{i}"), Duration::from_secs(10))
            .unwrap();
        for n in [0, 1] {
            assert!(
                !lease.acquisition().nodes[n].outcome.is_success(),
                "{}",
                lease.acquisition()
            );
        }
        // Not unlocked: whatever reached nodes a and b would stay for 10 s.
        drop(lease);
    }
    thread::sleep(Duration::from_millis(200));
    for s in [&a, &b] {
        let info: String = redis::cmd("INFO")
            .arg("keyspace")
            .query(&mut s.client())
            .unwrap();
        assert!(!info.contains("keys="), "a stray key: {info}");
    }
}

#[test]
fn nodes_60_ms_away_count_with_the_default_timeouts() {
    use support::proxy::DelayProxy;
    // Three nodes, two of them 60 ms away (30 ms each way): every quorum needs a far node.
    let cluster = Cluster::start(3);
    let far: Vec<DelayProxy> = (1..3)
        .map(|i| DelayProxy::start(cluster.servers[i].port, Duration::from_millis(30)))
        .collect();
    let mut urls = cluster.urls();
    urls[1] = far[0].url();
    urls[2] = far[1].url();
    // The default per-node timeouts: derived from each node's round trips, at most a tenth of
    // the TTL. (They were TTL / 200 within 10–50 ms: a far node never counted.)
    let mgr = Redlock::new(support::config(urls)).unwrap();
    for ttl in [Duration::from_secs(10), Duration::from_secs(1)] {
        for i in 0..5 {
            // Waiting allowed (a loaded machine may delay a reply past one step's timeout);
            // every grant here needs a far node's vote.
            let lease = mgr
                .lock_until(
                    format!("far{i}"),
                    ttl,
                    Instant::now() + Duration::from_secs(20),
                )
                .unwrap_or_else(|e| panic!("TTL {ttl:?}, lock {i}: {e}"));
            let far_votes = lease.acquisition().nodes[1..]
                .iter()
                .filter(|n| n.outcome == NodeOutcome::Success)
                .count();
            assert!(far_votes >= 1, "{:?}", lease.acquisition());
            lease.unlock().unwrap();
        }
    }
    // Each far reply took at least the proxies' 60 ms, so their estimates do too.
    for st in &mgr.node_states()[1..] {
        let rtt = st.rtt.expect("measured");
        assert!(rtt >= Duration::from_millis(60), "{st:?}");
        assert!(st.rto.unwrap() > rtt, "{st:?}");
    }
}

#[test]
fn a_node_that_becomes_slow_is_measured_again_and_counts() {
    use support::proxy::DelayProxy;
    let cluster = Cluster::start(3);
    let proxies: Vec<DelayProxy> = (1..3)
        .map(|i| DelayProxy::start(cluster.servers[i].port, Duration::ZERO))
        .collect();
    let mut urls = cluster.urls();
    urls[1] = proxies[0].url();
    urls[2] = proxies[1].url();
    let mgr = Redlock::new(support::config(urls)).unwrap();
    // Measured near: their timeouts sink to the 10 ms floor.
    for i in 0..20 {
        mgr.lock_until(
            format!("near{i}"),
            Duration::from_secs(1),
            Instant::now() + Duration::from_secs(20),
        )
        .unwrap()
        .unlock()
        .unwrap();
    }
    // Now 50 ms away. The first steps time out, and each timeout doubles the node's timeout
    // until a reply comes back in time and measures it again.
    for p in &proxies {
        p.set_delay(Duration::from_millis(25));
    }
    let lease = mgr
        .lock_until(
            "after",
            Duration::from_secs(1),
            Instant::now() + Duration::from_secs(20),
        )
        .unwrap();
    assert!(
        lease.acquisition().nodes[1..]
            .iter()
            .any(|n| n.outcome == NodeOutcome::Success),
        "{:?}",
        lease.acquisition()
    );
    lease.unlock().unwrap();
}

/// A server whose `EVAL` and `EVALSHA` are renamed away (as some managed services restrict
/// scripts) passed the handshake, and a fresh cluster of them granted the plain lock's
/// `SET` and then could not take it back: the caller was told "held by another owner" about
/// its own key, left for the TTL. Such a node is refused at the handshake, naming the
/// command, and nothing is left behind.
#[test]
fn a_node_that_cannot_run_scripts_is_refused_and_nothing_is_left() {
    for disabled in ["EVAL", "EVALSHA"] {
        let servers: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_with(&["--rename-command", disabled, ""]))
            .collect();
        let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
        let mgr = Redlock::new(support::config(urls)).unwrap();
        let err = mgr
            .try_lock("scripts", Duration::from_secs(30))
            .unwrap_err();
        assert!(matches!(err, Error::Unavailable(_)), "{err}");
        let report = err.report().unwrap();
        for n in &report.nodes {
            match &n.outcome {
                NodeOutcome::ServerError(text) => {
                    assert!(
                        text.starts_with("scripting unavailable on this server")
                            && text
                                .to_lowercase()
                                .contains(&format!("'{}'", disabled.to_lowercase())),
                        "{disabled}: node {}: {text}",
                        n.index
                    );
                }
                other => panic!("{disabled}: node {}: {other:?}", n.index),
            }
        }
        for s in &servers {
            assert_eq!(
                s.lock_keys(),
                0,
                "{disabled}: a key was left on {}",
                s.url()
            );
        }
    }
}

/// A server whose `INFO` is renamed away cannot be told apart from itself under another
/// address: it was counted once per address, so one server reached as 127.0.0.1:P and
/// 127.0.0.2:P, with two other nodes, gave a quorum to two holders at once. A node whose
/// identity cannot be read is refused, saying why. (An ACL user without `INFO` is refused at
/// `INFO cluster`'s `NOPERM`, as an authentication failure.)
#[test]
fn a_server_without_info_is_refused_rather_than_counted_twice() {
    let a = RedisServer::start_with(&[
        "--bind",
        "127.0.0.1 127.0.0.2",
        "--rename-command",
        "INFO",
        "",
    ]);
    let others = Cluster::start(2);
    let mut urls: Vec<String> = (1..=2)
        .map(|h| format!("redis://127.0.0.{h}:{}", a.port))
        .collect();
    urls.extend(others.urls());
    let mgr = Redlock::new(support::config(urls).restart_quarantine(false)).unwrap();
    let err = mgr
        .try_lock("no-info", Duration::from_secs(10))
        .unwrap_err();
    let report = err.report().expect("a report");
    for n in &report.nodes[..2] {
        assert!(
            matches!(&n.outcome, NodeOutcome::ServerError(s) if s.starts_with("identity unknown")),
            "node {}: {:?}",
            n.index,
            n.outcome
        );
    }
    assert_eq!(a.lock_keys(), 0);
}

/// `Duration::MAX` as a wait means "no limit": a waiter gets the lock once it is released,
/// and `wait_lost` returns as it would for any timeout; neither overflows the clock.
#[test]
fn a_wait_of_duration_max_is_no_limit_and_never_panics() {
    use redlock::{LockOptions, Wait};
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let forever = LockOptions::new().wait(Wait::For(Duration::MAX));
    let ttl = Duration::from_secs(10);
    let held = mgr.acquire("forever", ttl, &forever).unwrap();
    // Renewal off: wait_lost returns false at once, whatever the timeout.
    assert!(!held.wait_lost(Duration::MAX));
    let waiter = {
        let (mgr, forever) = (mgr.clone(), forever.clone());
        thread::spawn(move || mgr.acquire("forever", ttl, &forever))
    };
    held.unlock().unwrap();
    waiter.join().unwrap().unwrap().unlock().unwrap();
}

/// The program drops the manager as soon as an unlock returns at quorum, while the slower
/// node still owes the unlock's reply; that node has lost its scripts (`SCRIPT FLUSH`) and
/// pauses its clients' writes (`CLIENT PAUSE … WRITE`, as a failover does), so the reply,
/// when it comes, is `NOSCRIPT`. The connection is read to the end after the manager is gone
/// (the caretaker drains it), so the `EVAL` form still follows and the key goes; closed at
/// once, the node would never get the `EVAL` and keep the key for its TTL.
#[test]
fn an_unlock_answered_late_is_completed_after_the_manager_is_dropped() {
    let cluster = Cluster::start(3);
    let k = key(b"late-unlock");
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .node_timeout(Duration::from_millis(500))
            // Longer than the pause, on a busy machine too.
            .stale_limit(Duration::from_secs(10)),
    )
    .unwrap();
    let lease = mgr
        .try_lock("late-unlock", Duration::from_secs(60))
        .unwrap();
    assert!(eventually(SETTLE, || cluster
        .holding(&k, lease.value().as_bytes())
        == 3));
    let mut slow = cluster.servers[2].client();
    let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut slow).unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(500)
        .arg("WRITE")
        .query(&mut slow)
        .unwrap();
    lease.unlock().unwrap();
    drop(lease);
    drop(mgr);
    // Gone from the two nodes that confirmed, and from the paused one after its pause and the
    // EVAL (bounded: far under the TTL).
    assert!(
        eventually(Duration::from_secs(20), || cluster.present(&k) == 0),
        "the key is still held: PTTL {:?}",
        cluster
            .servers
            .iter()
            .map(|s| s.pttl(&k))
            .collect::<Vec<_>>()
    );
}
