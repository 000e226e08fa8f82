//! Leader election against real redis-server processes: one leader at a time (overlapping
//! validity intervals), terms strictly increasing across leaders, proclaim and resign, waiting
//! candidates woken by the resignation, observers that see every term in order, a leader told
//! it lost leadership before its validity ends, and a deposed leader's writes refused by a
//! fenced store.

mod support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LockOptions, Redlock, Wait};
use support::Cluster;

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(20))
            .node_timeout(Duration::from_millis(300))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn within(secs: u64) -> LockOptions {
    LockOptions::new().wait(Wait::For(Duration::from_secs(secs)))
}

#[test]
fn a_leader_is_read_from_a_quorum_proclaims_and_resigns() {
    let nodes = Cluster::start(3);
    let mgr = manager(nodes.urls());
    let e = mgr.election("scheduler");
    assert_eq!(e.leader().unwrap(), None, "no leader before any campaign");
    let ttl = Duration::from_secs(20);
    let first = e.campaign("10.0.0.1:80", ttl, &within(10)).unwrap();
    assert!(first.term() >= 1);
    let l = e.leader().unwrap().expect("a leader");
    assert_eq!(
        (l.term, l.value.as_slice()),
        (first.term(), &b"10.0.0.1:80"[..])
    );
    assert!(l.validity > Duration::ZERO && l.validity <= ttl, "{l:?}");
    // A second candidate is refused while the first leads.
    let refused = e.campaign("10.0.0.2:80", ttl, &LockOptions::new().wait(Wait::No));
    assert!(matches!(refused, Err(Error::NotAcquired(_))), "{refused:?}");
    // Proclaim: a new value, the same term.
    first.proclaim("10.0.0.1:81").unwrap();
    assert_eq!(first.value(), b"10.0.0.1:81");
    let l = e.leader().unwrap().expect("a leader");
    assert_eq!(
        (l.term, l.value.as_slice()),
        (first.term(), &b"10.0.0.1:81"[..])
    );
    // Resign: no leader, and the next one has a higher term.
    first.resign().unwrap();
    assert!(first.lost());
    assert_eq!(e.leader().unwrap(), None);
    assert!(matches!(first.proclaim("late"), Err(Error::NotHeld(_))));
    let second = e.campaign("10.0.0.2:80", ttl, &within(10)).unwrap();
    assert!(
        second.term() > first.term(),
        "{} then {}",
        first.term(),
        second.term()
    );
    second.resign().unwrap();
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let nodes = Cluster::start(3);
    let mgr = manager(nodes.urls());
    let e = mgr.election("jobs");
    let ttl = Duration::from_secs(5);
    let big = vec![b'x'; redlock::MAX_LEADER_VALUE + 1];
    for (r, what) in [
        (
            e.campaign(&big, ttl, &within(1)).map(|_| ()),
            "value too long",
        ),
        (
            e.campaign("v", ttl, &within(1).owner("me")).map(|_| ()),
            "owner",
        ),
        (
            e.campaign("v", ttl, &within(1).shared(true)).map(|_| ()),
            "shared",
        ),
        (
            e.campaign("v", Duration::ZERO, &within(1)).map(|_| ()),
            "TTL 0",
        ),
        (mgr.election("").leader().map(|_| ()), "empty name"),
    ] {
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{what}: {r:?}");
    }
    assert_eq!(nodes.servers[0].dbsize(), 0, "nothing was written");
    let l = e.campaign("v", ttl, &within(5)).unwrap();
    let r = l.proclaim(&big);
    assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    l.resign().unwrap();
}

/// One leadership as its holder saw it: its term and when it was valid.
#[derive(Debug, Clone, Copy)]
struct Tenure {
    term: u64,
    from: Instant,
    to: Instant,
}

#[test]
fn candidates_lead_one_at_a_time_in_increasing_terms_and_observers_see_each() {
    const CANDIDATES: usize = 4;
    const TURNS: usize = 3;
    let nodes = Cluster::start(3);
    let urls = nodes.urls();
    let tenures: Arc<Mutex<Vec<Tenure>>> = Arc::default();
    // Observers in their own managers, started before any campaign.
    let observers: Vec<_> = (0..2)
        .map(|_| {
            let mgr = manager(urls.clone());
            thread::spawn(move || {
                let mut seen = Vec::new();
                let mut obs = mgr.election("queue").observe();
                let deadline = Instant::now() + Duration::from_secs(60);
                while seen.len() < CANDIDATES * TURNS && Instant::now() < deadline {
                    if let Some(l) = obs.next_within(Duration::from_secs(5)).unwrap() {
                        seen.push(l.term);
                    }
                }
                seen
            })
        })
        .collect();
    let candidates: Vec<_> = (0..CANDIDATES)
        .map(|c| {
            let (mgr, tenures) = (manager(urls.clone()), Arc::clone(&tenures));
            thread::spawn(move || {
                let e = mgr.election("queue");
                for _ in 0..TURNS {
                    let l = e
                        .campaign(
                            format!("candidate-{c}"),
                            Duration::from_secs(10),
                            &within(60),
                        )
                        .unwrap();
                    let from = Instant::now();
                    let valid_until = from + l.validity();
                    // Lead long enough for the observers to read this term.
                    thread::sleep(Duration::from_millis(150));
                    assert!(!l.lost());
                    let term = l.term();
                    l.resign().unwrap();
                    let to = Instant::now().min(valid_until);
                    tenures.lock().unwrap().push(Tenure { term, from, to });
                }
            })
        })
        .collect();
    for c in candidates {
        c.join().unwrap();
    }
    let mut tenures = tenures.lock().unwrap().clone();
    tenures.sort_by_key(|t| t.term);
    let intervals: Vec<(Instant, Instant)> = tenures.iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(
        support::most_overlapping(&intervals),
        1,
        "two leaders at once: {tenures:?}"
    );
    // Terms strictly increase in the order leaders took office.
    for w in tenures.windows(2) {
        assert!(w[0].term < w[1].term && w[0].from < w[1].from, "{w:?}");
    }
    let terms: Vec<u64> = tenures.iter().map(|t| t.term).collect();
    for o in observers {
        let seen = o.join().unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "out of order or repeated: {seen:?}"
        );
        assert!(
            seen.iter().all(|t| terms.contains(t)),
            "{seen:?} not in {terms:?}"
        );
        assert_eq!(
            seen.last(),
            terms.last(),
            "the latest term is always seen: {seen:?}"
        );
    }
}

#[test]
fn a_waiting_candidate_is_woken_by_the_resignation_and_takes_over() {
    let nodes = Cluster::start(3);
    let (a, b) = (manager(nodes.urls()), manager(nodes.urls()));
    // A long TTL: only the resignation can let the second candidate in before the test's
    // bound.
    let ttl = Duration::from_secs(60);
    let first = a.election("svc").campaign("a", ttl, &within(10)).unwrap();
    let waiter = thread::spawn(move || {
        let l = b.election("svc").campaign("b", ttl, &within(30)).unwrap();
        let term = l.term();
        l.resign().unwrap();
        term
    });
    thread::sleep(Duration::from_millis(300));
    let t1 = first.term();
    first.resign().unwrap();
    let t2 = waiter.join().unwrap();
    assert!(t2 > t1, "{t1} then {t2}");
}

#[test]
fn a_leader_cut_off_from_its_nodes_is_told_before_its_validity_ends() {
    let nodes = Cluster::start(3);
    let mgr = manager(nodes.urls());
    let ttl = Duration::from_secs(6);
    let l = Arc::new(
        mgr.election("cut")
            .campaign("me", ttl, &within(10))
            .unwrap(),
    );
    assert!(!l.lost());
    // The validity the leader last knew, sampled until it is told (renewals move it on).
    let sampler = {
        let l = Arc::clone(&l);
        thread::spawn(move || {
            let mut last = None;
            let give_up = Instant::now() + Duration::from_secs(60);
            while let Some(t) = l.lease().expires_at() {
                last = Some(t);
                if Instant::now() > give_up {
                    break;
                }
                thread::sleep(Duration::from_millis(2));
            }
            last
        })
    };
    nodes.servers[0].pause();
    nodes.servers[1].pause();
    let lost = l.wait_lost(Duration::from_secs(30));
    let told = Instant::now();
    nodes.servers[0].resume();
    nodes.servers[1].resume();
    assert!(lost, "never told");
    assert!(l.lost());
    let valid_until = sampler.join().unwrap().expect("valid once");
    assert!(
        told < valid_until,
        "told {:?} after the validity it had ended",
        told - valid_until
    );
    println!(
        "told {} ms before the validity ended (TTL {} ms)",
        (valid_until - told).as_millis(),
        ttl.as_millis()
    );
}

#[test]
fn a_deposed_leaders_writes_are_refused_by_a_fenced_store() {
    let nodes = Cluster::start(3);
    let store = support::RedisServer::start();
    let mut conn = store.client();
    let write = |conn: &mut redis::Connection, term: u64, v: &str| -> i64 {
        redis::cmd("EVAL")
            .arg(redlock::scripts::FENCED_STORE_WRITE)
            .arg(1)
            .arg("data")
            .arg(term.to_string())
            .arg(v)
            .query(conn)
            .unwrap()
    };
    let mgr = manager(nodes.urls());
    let e = mgr.election("writer");
    let old = e
        .campaign("old", Duration::from_secs(2), &within(10))
        .unwrap();
    let old_term = old.term();
    assert_eq!(write(&mut conn, old_term, "a"), 1);
    // The old leader stops renewing (as a paused process would) and its lease runs out; a new
    // one is elected.
    old.lease().stop_renewal();
    let new = e
        .campaign("new", Duration::from_secs(10), &within(30))
        .unwrap();
    assert!(new.term() > old_term);
    assert_eq!(write(&mut conn, new.term(), "b"), 1);
    for _ in 0..10 {
        assert_eq!(
            write(&mut conn, old_term, "stale"),
            0,
            "a deposed leader's write"
        );
    }
    new.resign().unwrap();
}
