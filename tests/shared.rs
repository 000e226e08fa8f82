//! Shared (read) locks against real redis-server processes: many shared holders together, an
//! exclusive locker waiting for the last of them, writer preference against readers that
//! overlap without end, an intent that goes away with its writer, and extension, renewal and
//! fencing in shared mode.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, HolderKind, LockOptions, Redlock, RenewOptions, Wait};
use support::{Cluster, eventually};

const KEY: &[u8] = b"redlock:doc";
const INTENT: &[u8] = b"redlock-intent:redlock:doc";

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(20))
            .node_timeout(Duration::from_millis(300))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn shared() -> LockOptions {
    LockOptions::new().wait(Wait::No).shared(true)
}

/// How many nodes have `key` at all.
fn present(c: &Cluster, key: &[u8]) -> usize {
    c.servers.iter().filter(|s| s.pttl(key) != -2).count()
}

fn key_type(c: &Cluster, i: usize, key: &[u8]) -> String {
    redis::cmd("TYPE")
        .arg(key)
        .query(&mut c.servers[i].client())
        .unwrap()
}

#[test]
fn eight_shared_holders_hold_together_and_an_exclusive_locker_waits_for_the_last() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(30);
    // Eight shared holders, from eight threads, at once.
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let m = mgr.clone();
            thread::spawn(move || m.acquire("doc", ttl, &shared()).unwrap())
        })
        .map(|h| h.join().unwrap())
        .collect();
    for r in &readers {
        assert!(r.is_shared() && r.is_valid());
        assert!(r.acquisition().successes >= 2, "{:?}", r.acquisition());
    }
    assert_eq!(key_type(&cluster, 0, KEY), "hash");
    let h = mgr.holders("doc").unwrap();
    assert_eq!(h.holder().unwrap().kind, HolderKind::Shared);
    // An exclusive locker is refused, and one that waits waits.
    assert!(matches!(
        mgr.acquire("doc", ttl, &LockOptions::new().wait(Wait::No)),
        Err(Error::NotAcquired(_))
    ));
    let (tx, rx) = mpsc::channel();
    let writer = {
        let m = mgr.clone();
        thread::spawn(move || {
            let r = m.acquire("doc", ttl, &LockOptions::new().wait(Wait::For(ttl)));
            tx.send(Instant::now()).unwrap();
            r
        })
    };
    // Its intent appears, and holds new shared lockers back.
    assert!(eventually(Duration::from_secs(5), || present(
        &cluster, INTENT
    ) >= 2));
    assert!(matches!(
        mgr.acquire("doc", ttl, &shared()),
        Err(Error::NotAcquired(_))
    ));
    // Seven of the eight release: the writer still waits (one shared hold is left on every
    // node, so it cannot have the lock).
    let mut readers = readers;
    let last = readers.pop().unwrap();
    for r in readers {
        r.unlock().unwrap();
    }
    thread::sleep(Duration::from_millis(200));
    assert!(rx.try_recv().is_err(), "the writer got in beside a reader");
    let released = Instant::now();
    last.unlock().unwrap();
    let got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let w = writer.join().unwrap().unwrap();
    assert!(got >= released);
    assert!(!w.is_shared());
    assert_eq!(key_type(&cluster, 0, KEY), "string");
    // The writer's intent is gone, and the writer excludes new shared lockers.
    assert!(eventually(Duration::from_secs(5), || present(
        &cluster, INTENT
    ) == 0));
    assert!(matches!(
        mgr.acquire("doc", ttl, &shared()),
        Err(Error::NotAcquired(_))
    ));
    w.unlock().unwrap();
    mgr.acquire("doc", ttl, &shared())
        .unwrap()
        .unlock()
        .unwrap();
    assert_eq!(present(&cluster, KEY), 0);
}

/// One holder's section, as the client saw it: reader or writer, from the grant's return to
/// the unlock call.
type Section = (bool, Instant, Instant);

/// A reader that never lets go before it holds again: it takes its next shared lease before it
/// releases the current one (hand over hand), so that without writer preference the key would
/// never go away while it runs. When the next lease is refused (a writer's intent), it
/// releases the current one, then waits for a new one.
fn hand_over_hand(m: Redlock, stop: Arc<AtomicBool>, sections: Arc<Mutex<Vec<Section>>>) -> usize {
    let ttl = Duration::from_secs(5);
    let wait = shared().wait(Wait::For(Duration::from_secs(20)));
    let begun = Instant::now();
    let running = || !stop.load(Ordering::SeqCst) && begun.elapsed() < Duration::from_secs(30);
    let mut refused = 0;
    let Ok(mut cur) = m.acquire("doc", ttl, &wait) else {
        return 0;
    };
    let mut from = Instant::now();
    while running() {
        thread::sleep(Duration::from_millis(40));
        let next = m.acquire("doc", ttl, &shared());
        sections.lock().unwrap().push((true, from, Instant::now()));
        match next {
            Ok(n) => {
                let _ = cur.unlock();
                cur = n;
            }
            Err(_) => {
                refused += 1;
                let _ = cur.unlock();
                cur = loop {
                    if !running() {
                        return refused;
                    }
                    if let Ok(n) = m.acquire("doc", ttl, &wait) {
                        break n;
                    }
                };
            }
        }
        from = Instant::now();
    }
    sections.lock().unwrap().push((true, from, Instant::now()));
    let _ = cur.unlock();
    refused
}

#[test]
fn readers_that_overlap_without_end_do_not_starve_a_waiting_writer() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let stop = Arc::new(AtomicBool::new(false));
    let sections: Arc<Mutex<Vec<Section>>> = Arc::default();
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let (m, stop, sections) = (mgr.clone(), Arc::clone(&stop), Arc::clone(&sections));
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(10 * i));
                hand_over_hand(m, stop, sections)
            })
        })
        .collect();
    assert!(eventually(Duration::from_secs(10), || sections
        .lock()
        .unwrap()
        .len()
        >= 20));
    let asked = Instant::now();
    // Without writer preference this wait runs out: the readers never all let go.
    let w = mgr
        .acquire(
            "doc",
            Duration::from_secs(5),
            &LockOptions::new().wait(Wait::For(Duration::from_secs(10))),
        )
        .unwrap();
    let waited = asked.elapsed();
    let from = Instant::now();
    let during = sections.lock().unwrap().len();
    thread::sleep(Duration::from_millis(100));
    sections.lock().unwrap().push((false, from, Instant::now()));
    w.unlock().unwrap();
    // The readers carry on after the writer.
    assert!(eventually(Duration::from_secs(10), || sections
        .lock()
        .unwrap()
        .len()
        > during + 8));
    stop.store(true, Ordering::SeqCst);
    let refused: usize = readers.into_iter().map(|r| r.join().unwrap()).sum();
    println!(
        "the writer waited {} ms; the readers were held back {refused} times",
        waited.as_millis()
    );
    assert!(refused > 0);
    // No reader's section overlaps the writer's.
    let s = sections.lock().unwrap();
    let (_, wf, wt) = *s.iter().find(|x| !x.0).unwrap();
    for (_, f, t) in s.iter().filter(|x| x.0) {
        assert!(*t <= wf || *f >= wt, "a reader overlapped the writer");
    }
}

#[test]
fn a_writer_that_gives_up_takes_its_intent_away_and_readers_go_on() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(30);
    let reader = mgr.acquire("doc", ttl, &shared()).unwrap();
    // A writer whose deadline passes: refused, and its intent is gone with it.
    let short = LockOptions::new().wait(Wait::For(Duration::from_millis(300)));
    assert!(matches!(
        mgr.acquire("doc", ttl, &short),
        Err(Error::NotAcquired(_))
    ));
    assert!(eventually(Duration::from_secs(5), || present(
        &cluster, INTENT
    ) == 0));
    mgr.acquire("doc", ttl, &shared())
        .unwrap()
        .unlock()
        .unwrap();
    // A writer that is cancelled, while a shared waiter stands behind its intent. It waits
    // until cancelled, so nothing here depends on how fast this machine is.
    let cancel = redlock::Cancel::new();
    let w = {
        let (m, cancel) = (mgr.clone(), cancel.clone());
        thread::spawn(move || {
            let opts = LockOptions::new()
                .wait(Wait::For(Duration::from_secs(60)))
                .cancel(cancel);
            m.acquire("doc", ttl, &opts)
        })
    };
    assert!(eventually(Duration::from_secs(20), || present(
        &cluster, INTENT
    ) >= 2));
    assert!(matches!(
        mgr.acquire("doc", ttl, &shared()),
        Err(Error::NotAcquired(_))
    ));
    let (tx, rx) = mpsc::channel();
    let second = {
        let m = mgr.clone();
        thread::spawn(move || {
            tx.send(()).unwrap();
            m.acquire(
                "doc",
                ttl,
                &shared().wait(Wait::For(Duration::from_secs(20))),
            )
        })
    };
    rx.recv().unwrap();
    cancel.fire();
    assert!(matches!(w.join().unwrap(), Err(Error::Cancelled)));
    let gave_up = Instant::now();
    // The writer's intent is gone, and the reader that waited behind it is in at once (its
    // 30 s TTLs are far from over: only the announcement can have woken it).
    let s = second.join().unwrap().unwrap();
    assert!(gave_up.elapsed() < Duration::from_secs(10));
    assert_eq!(present(&cluster, INTENT), 0);
    assert!(s.is_shared());
    s.unlock().unwrap();
    reader.unlock().unwrap();
    assert_eq!(present(&cluster, KEY), 0);
}

#[test]
fn shared_leases_extend_renew_and_carry_fencing_tokens() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // Extend.
    let a = mgr
        .acquire("doc", Duration::from_secs(2), &shared())
        .unwrap();
    a.extend(Duration::from_secs(20)).unwrap();
    assert!(a.validity() > Duration::from_secs(10));
    // Auto-renewal keeps a short shared lease past its TTL: 1 s, renewed every third of it,
    // so that a renewal late by most of a second on a busy machine is not a loss.
    let b = mgr
        .acquire(
            "doc",
            Duration::from_secs(1),
            &shared().auto_renew(RenewOptions::new()),
        )
        .unwrap();
    thread::sleep(Duration::from_millis(2500));
    assert!(b.is_valid() && !b.is_lost());
    b.unlock().unwrap();
    a.unlock().unwrap();
    // Fencing: overlapping shared holders share their tenure's token; the writer after them
    // gets a larger one, and the readers after it a larger one again.
    let ttl = Duration::from_secs(10);
    let fenced = shared().fenced(true);
    let r1 = mgr.acquire("doc", ttl, &fenced).unwrap();
    let r2 = mgr.acquire("doc", ttl, &fenced).unwrap();
    let t1 = r1.fencing_token().unwrap();
    assert_eq!(r2.fencing_token(), Some(t1));
    r1.unlock().unwrap();
    r2.unlock().unwrap();
    let w = mgr.try_lock_fenced("doc", ttl).unwrap();
    let tw = w.fencing_token().unwrap();
    assert!(tw > t1);
    w.unlock().unwrap();
    let r3 = mgr.acquire("doc", ttl, &fenced).unwrap();
    assert!(r3.fencing_token().unwrap() > tw);
    r3.unlock().unwrap();
}

#[test]
fn shared_and_reentrant_locks_exclude_each_other_and_a_shared_lock_has_no_owner() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    assert!(matches!(
        mgr.acquire("doc", ttl, &shared().owner("job-1")),
        Err(Error::InvalidInput(_))
    ));
    let owned = LockOptions::new().wait(Wait::No).owner("job-1");
    let r = mgr.acquire("doc", ttl, &owned).unwrap();
    assert!(matches!(
        mgr.acquire("doc", ttl, &shared()),
        Err(Error::NotAcquired(_))
    ));
    r.unlock().unwrap();
    let s = mgr.acquire("doc", ttl, &shared()).unwrap();
    assert!(matches!(
        mgr.acquire("doc", ttl, &owned),
        Err(Error::NotAcquired(_))
    ));
    // A try (no wait) queues no intent.
    assert_eq!(present(&cluster, INTENT), 0);
    s.unlock().unwrap();
}
