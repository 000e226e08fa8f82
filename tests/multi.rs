//! Several resources at once, against real redis-server processes: overlapping sets in
//! opposite orders without deadlock or overlap, a partial failure that leaves nothing behind,
//! the lease acting on the whole set, and the limits.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LockOptions, Redlock, RenewOptions, Wait};
use support::{Cluster, eventually};

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(2))
            .node_timeout(Duration::from_millis(300))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn key(r: &str) -> Vec<u8> {
    format!("redlock:{r}").into_bytes()
}

/// How many nodes have `key` at all.
fn present(c: &Cluster, key: &[u8]) -> usize {
    c.servers.iter().filter(|s| s.pttl(key) != -2).count()
}

/// Enters a section guarded by `busy`: panics if someone else is in it.
fn enter(busy: &AtomicBool) {
    assert!(
        busy.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok(),
        "two holders of b at once"
    );
}

#[test]
fn overlapping_sets_in_opposite_orders_neither_deadlock_nor_overlap_a_plain_locker() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let wait = LockOptions::new().wait(Wait::For(Duration::from_secs(30)));
    let busy = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let begun = Instant::now();
    let sets: [&[&str]; 2] = [&["a", "b", "c"], &["c", "b", "a"]];
    let many: Vec<_> = sets
        .into_iter()
        .map(|set| {
            let (m, busy, done, wait) = (
                mgr.clone(),
                Arc::clone(&busy),
                Arc::clone(&done),
                wait.clone(),
            );
            thread::spawn(move || {
                for _ in 0..1000 {
                    let l = m.acquire_many(set, ttl, &wait).unwrap();
                    assert_eq!(l.resources().len(), 3);
                    enter(&busy);
                    busy.store(false, Ordering::SeqCst);
                    l.unlock().unwrap();
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    // A plain locker of b meanwhile, until both have finished.
    let plain = {
        let (m, busy, done) = (mgr.clone(), Arc::clone(&busy), Arc::clone(&done));
        thread::spawn(move || {
            let mut held = 0;
            while done.load(Ordering::SeqCst) < 2 && begun.elapsed() < Duration::from_secs(120) {
                if let Ok(l) = m.acquire("b", ttl, &wait) {
                    enter(&busy);
                    busy.store(false, Ordering::SeqCst);
                    l.unlock().unwrap();
                    held += 1;
                }
            }
            held
        })
    };
    for t in many {
        t.join().unwrap();
    }
    let held = plain.join().unwrap();
    println!(
        "2 x 1000 multi-resource cycles and {held} plain ones in {} ms",
        begun.elapsed().as_millis()
    );
    assert!(held > 0);
    for r in ["a", "b", "c"] {
        assert_eq!(present(&cluster, &key(r)), 0);
    }
}

#[test]
fn a_partial_failure_takes_everything_back() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let foreign = |i: usize| {
        redis::cmd("SET")
            .arg(key("b"))
            .arg("someone-else")
            .arg("PX")
            .arg(60_000)
            .exec(&mut cluster.servers[i].client())
            .unwrap();
    };
    // One node holds b for someone else: the other two grant all three, a quorum; that node
    // granted none of them (all or none on each node).
    foreign(0);
    let l = mgr.try_lock("x", ttl).unwrap(); // connects every node first
    l.unlock().unwrap();
    // For the paused step below: a node timeout far above a healthy node's answer however
    // loaded the machine is (the file's 300 ms is not), connected first too.
    let patient =
        Redlock::new(support::config(cluster.urls()).node_timeout(Duration::from_secs(2))).unwrap();
    patient.try_lock("x", ttl).unwrap().unlock().unwrap();
    let l = mgr
        .acquire_many(&["a", "b", "c"], ttl, &LockOptions::new().wait(Wait::No))
        .unwrap();
    assert_eq!(l.acquisition().successes, 2);
    assert_eq!(cluster.servers[0].get(&key("a")), None);
    assert_eq!(cluster.servers[0].get(&key("c")), None);
    l.unlock().unwrap();
    // Two of three: no quorum. Node 2 granted all three, and must give them back. The two
    // refusals alone decide the outcome, so without a pause node 2's grant could arrive after
    // it (0 successes reported, the same cleanup owed). Pausing nodes 0 and 1 for longer than
    // the step's 2 s node timeout makes node 2 answer first however loaded the machine is (a
    // pause as short as a 300 ms timeout could end before the step began, or time node 2 out
    // too); the paused nodes then count as timeouts (Unavailable), or as refusals.
    foreign(1);
    for i in [0, 1] {
        redis::cmd("CLIENT")
            .arg("PAUSE")
            .arg(3000)
            .arg("ALL")
            .exec(&mut cluster.servers[i].client())
            .unwrap();
    }
    match patient.acquire_many(&["a", "b", "c"], ttl, &LockOptions::new().wait(Wait::No)) {
        Err(Error::NotAcquired(r) | Error::Unavailable(r)) => assert_eq!(r.successes, 1, "{r}"),
        other => panic!("{other:?}"),
    }
    // (Nodes 0 and 1 answer these checks once their pause is over.)
    assert!(eventually(Duration::from_secs(10), || {
        present(&cluster, &key("a")) == 0 && present(&cluster, &key("c")) == 0
    }));
    assert_eq!(cluster.holding(&key("b"), b"someone-else"), 2);
    assert_eq!(present(&cluster, &key("b")), 2);
}

#[test]
fn the_lease_extends_renews_and_releases_the_whole_set() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let set = ["p", "q", "r", "s"];
    let l = mgr
        .acquire_many(&set, Duration::from_secs(2), &LockOptions::new())
        .unwrap();
    let names: Vec<&[u8]> = l.resources();
    assert_eq!(names, set.iter().map(|s| s.as_bytes()).collect::<Vec<_>>());
    assert_eq!(l.resource(), b"p");
    // Each resource is held: a plain lock of any of them is refused.
    for r in set {
        assert!(matches!(
            mgr.try_lock(r, Duration::from_secs(1)),
            Err(Error::NotAcquired(_))
        ));
    }
    l.extend(Duration::from_secs(30)).unwrap();
    for r in set {
        for s in &cluster.servers {
            assert!(s.pttl(&key(r)) > 10_000, "{r}");
        }
    }
    l.unlock().unwrap();
    for r in set {
        assert_eq!(present(&cluster, &key(r)), 0);
    }
    // Auto-renewal keeps a 1 s set alive for 2.5 s, every key of it. (Renewed every third of
    // the TTL: a renewal late by most of a second on a busy machine is not a loss.)
    let l = mgr
        .acquire_many(
            &set,
            Duration::from_secs(1),
            &LockOptions::new().auto_renew(RenewOptions::new()),
        )
        .unwrap();
    thread::sleep(Duration::from_millis(2500));
    assert!(l.is_valid() && !l.is_lost());
    for r in set {
        assert!(present(&cluster, &key(r)) >= 2, "{r}");
    }
    // A key lost on every node is noticed: the lease is lost, not kept alive.
    for s in &cluster.servers {
        redis::cmd("DEL")
            .arg(key("r"))
            .exec(&mut s.client())
            .unwrap();
    }
    assert!(l.wait_lost(Duration::from_secs(5)));
    assert!(matches!(l.unlock(), Err(Error::NotHeld(_))));
    for r in set {
        assert_eq!(present(&cluster, &key(r)), 0, "{r}");
    }
}

#[test]
fn a_set_and_a_shared_holder_of_one_of_its_resources_exclude_each_other() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let shared = LockOptions::new().wait(Wait::No).shared(true);
    let s = mgr.acquire("b", ttl, &shared).unwrap();
    assert!(matches!(
        mgr.acquire_many(&["a", "b"], ttl, &LockOptions::new().wait(Wait::No)),
        Err(Error::NotAcquired(_))
    ));
    s.unlock().unwrap();
    let l = mgr
        .acquire_many(&["a", "b"], ttl, &LockOptions::new().wait(Wait::No))
        .unwrap();
    assert!(matches!(
        mgr.acquire("b", ttl, &shared),
        Err(Error::NotAcquired(_))
    ));
    l.unlock().unwrap();
    assert_eq!(present(&cluster, &key("a")), 0);
}

#[test]
fn bad_sets_are_invalid_input_and_nothing_is_sent() {
    let mgr = Redlock::new(support::config(["127.0.0.1:1"])).unwrap();
    let ttl = Duration::from_secs(1);
    let opts = LockOptions::new();
    let none: [&str; 0] = [];
    let many: Vec<String> = (0..=redlock::MAX_RESOURCES)
        .map(|i| i.to_string())
        .collect();
    let cases: Vec<(Vec<String>, LockOptions, &str)> = vec![
        (vec![], opts.clone(), "no resources"),
        (
            vec!["a".into(), "b".into(), "a".into()],
            opts.clone(),
            "resource 2",
        ),
        (many, opts.clone(), "the limit is 1000"),
        (vec!["a".into(), String::new()], opts.clone(), "resource 1"),
        (vec!["a".into()], opts.clone().shared(true), "shared"),
        (vec!["a".into()], opts.clone().owner("o"), "owner"),
        (vec!["a".into()], opts.clone().fenced(true), "fenced"),
    ];
    for (set, o, says) in cases {
        match mgr.acquire_many(&set, ttl, &o) {
            Err(Error::InvalidInput(m)) => assert!(m.contains(says), "{m}"),
            other => panic!("{set:?}: {other:?}"),
        }
    }
    assert!(matches!(
        mgr.acquire_many(&none, ttl, &opts),
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        mgr.acquire_many(&["a"], Duration::ZERO, &opts),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(mgr.metrics().acquire_attempts, 0);
}
