//! Waiting by notification: waiters woken by the release, against real `redis-server`
//! processes. Every manager here has a retry delay of seconds, so a waiter that got the lock
//! quickly was woken, not lucky in its polling.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Cancel, Error, LockOptions, Redlock, Wait};
use support::{Cluster, eventually};

/// Far above every wake-up these tests expect: a waiter that polled would take this long.
const RETRY_DELAY: Duration = Duration::from_secs(10);
/// The holder's TTL, where the holder is meant to release: far above every expected wait.
const LONG_TTL: Duration = Duration::from_secs(30);

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(RETRY_DELAY)
            .node_timeout(Duration::from_millis(500)),
    )
    .expect("manager")
}

fn key(resource: &str) -> Vec<u8> {
    format!("redlock:{resource}").into_bytes()
}

fn waiting(d: Duration) -> LockOptions {
    LockOptions::new().wait(Wait::For(d))
}

/// How many subscriber connections `cluster` has (`CLIENT LIST TYPE pubsub`), node by node.
fn subscribers(cluster: &Cluster) -> Vec<usize> {
    cluster
        .servers
        .iter()
        .map(|s| {
            let list: String = redis::cmd("CLIENT")
                .arg("LIST")
                .arg("TYPE")
                .arg("pubsub")
                .query(&mut s.client())
                .unwrap();
            list.lines().filter(|l| !l.is_empty()).count()
        })
        .collect()
}

/// Waits until `mgr` has a confirmed-looking subscriber on `n` nodes of `cluster`.
fn until_subscribed(cluster: &Cluster, n: usize) {
    assert!(
        eventually(Duration::from_secs(10), || {
            subscribers(cluster).iter().filter(|c| **c > 0).count() >= n
        }),
        "no subscriber connections: {:?}",
        subscribers(cluster)
    );
}

/// Starts a thread that waits for `resource` with `opts` and returns when it was granted
/// (or the error) and how many attempts its manager made.
fn waiter(
    mgr: Arc<Redlock>,
    resource: &'static str,
    opts: LockOptions,
) -> thread::JoinHandle<(Result<redlock::Lease, Error>, Instant)> {
    thread::spawn(move || {
        let r = mgr.acquire(resource, LONG_TTL, &opts);
        (r, Instant::now())
    })
}

/// Waits until the waiter is subscribed on `nodes` nodes of `cluster`, and a little longer, so
/// that it has settled into its sleep (if it has not, it is granted at its next attempt, which
/// comes at once after the subscription: the assertions hold either way).
fn settled(cluster: &Cluster, nodes: usize) {
    until_subscribed(cluster, nodes);
    thread::sleep(Duration::from_millis(50));
}

/// Releases `lease`, joins the waiter `w`, unlocks what it was granted, and returns how long
/// after the release it was granted (`what` names the case in a failure).
fn hand_over(
    lease: redlock::Lease,
    w: thread::JoinHandle<(Result<redlock::Lease, Error>, Instant)>,
    what: &str,
) -> Duration {
    let released = Instant::now();
    lease.unlock().unwrap();
    let (r, granted) = w.join().unwrap();
    r.unwrap_or_else(|e| panic!("{what}: not granted after the release: {e}"))
        .unlock()
        .unwrap();
    granted.saturating_duration_since(released)
}

#[test]
fn a_waiter_is_granted_within_milliseconds_of_the_release() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    let lease = holder.try_lock("wake", LONG_TTL).unwrap();
    let w = waiter(Arc::clone(&mgr), "wake", waiting(Duration::from_secs(20)));
    settled(&c, 3);
    let gap = hand_over(lease, w, "wake");
    eprintln!("handoff gap {gap:?}");
    assert!(gap < RETRY_DELAY / 10, "woken {gap:?} after the release");
    assert!(
        mgr.metrics().acquire_attempts <= 4,
        "{:?}",
        mgr.metrics().acquire_attempts
    );
}

#[test]
fn a_release_of_this_manager_wakes_its_own_waiter() {
    let c = Cluster::start(3);
    let mgr = Arc::new(manager(c.urls()));
    let lease = mgr.try_lock("local", LONG_TTL).unwrap();
    let w = waiter(Arc::clone(&mgr), "local", waiting(Duration::from_secs(20)));
    settled(&c, 3);
    let gap = hand_over(lease, w, "local");
    assert!(gap < RETRY_DELAY / 10, "woken {gap:?} after the release");
}

/// A release at every offset from 0 to 24 ms after the waiter starts: before its first
/// attempt, between its refusal and its subscription, between its subscription and its
/// sleep, and during it. A wake-up lost in any of those windows leaves the waiter asleep
/// until the holder's 30 s TTL, far past the bound.
#[test]
fn a_release_in_any_window_of_the_wait_still_wakes_the_waiter() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    for offset_ms in 0..25u64 {
        let lease = holder.try_lock("window", LONG_TTL).unwrap();
        let w = waiter(Arc::clone(&mgr), "window", waiting(Duration::from_secs(20)));
        thread::sleep(Duration::from_millis(offset_ms));
        let gap = hand_over(lease, w, &format!("offset {offset_ms} ms"));
        assert!(
            gap < RETRY_DELAY / 5,
            "offset {offset_ms} ms: granted {gap:?} after the release"
        );
    }
}

#[test]
fn a_holder_that_dies_is_outwaited_by_its_ttl_without_polling() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    let ttl = Duration::from_millis(1500);
    let acquired = Instant::now();
    let lease = holder.try_lock("dead", ttl).unwrap();
    // The holder dies: nothing is released, and its key expires on every node.
    drop(holder);
    std::mem::forget(lease);
    let (r, granted) = waiter(Arc::clone(&mgr), "dead", waiting(Duration::from_secs(20)))
        .join()
        .unwrap();
    r.expect("granted once the TTL ran out").unlock().unwrap();
    let waited = granted.duration_since(acquired);
    let attempts = mgr.metrics().acquire_attempts;
    eprintln!("granted {waited:?} after the dead holder's grant, {attempts} attempts");
    assert!(waited >= ttl - Duration::from_millis(100), "{waited:?}");
    assert!(waited < ttl + Duration::from_secs(1), "{waited:?}");
    // First attempt, again once subscribed, once at the holder's expiry, maybe once more.
    assert!(attempts <= 5, "{attempts} attempts: it polled");
}

#[test]
fn two_of_five_paused_wake_ups_still_arrive() {
    let c = Cluster::start(5);
    c.mark();
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    // Both managers know every node before two stop answering.
    holder.try_lock("warm", LONG_TTL).unwrap().unlock().unwrap();
    mgr.try_lock("warm", LONG_TTL).unwrap().unlock().unwrap();
    c.servers[3].pause();
    c.servers[4].pause();
    let lease = holder.try_lock("paused", LONG_TTL).unwrap();
    let w = waiter(Arc::clone(&mgr), "paused", waiting(Duration::from_secs(20)));
    // (Not `settled`: the paused nodes cannot be asked who subscribed.)
    thread::sleep(Duration::from_millis(300));
    let gap = hand_over(lease, w, "two paused");
    c.servers[3].resume();
    c.servers[4].resume();
    assert!(gap < RETRY_DELAY / 5, "woken {gap:?} after the release");
}

#[test]
fn a_subscriber_connection_killed_mid_wait_does_not_strand_the_waiter() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    let lease = holder.try_lock("killed", LONG_TTL).unwrap();
    let w = waiter(Arc::clone(&mgr), "killed", waiting(Duration::from_secs(25)));
    settled(&c, 3);
    for s in &c.servers {
        let _: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut s.client())
            .unwrap();
    }
    // Released at once, while no subscriber connection is up: its message is lost.
    let gap = hand_over(lease, w, "subscribers killed");
    assert!(gap < RETRY_DELAY / 2, "granted {gap:?} after the release");
    // And the subscriptions come back for the next waiter.
    let lease = holder.try_lock("killed", LONG_TTL).unwrap();
    let w = waiter(Arc::clone(&mgr), "killed", waiting(Duration::from_secs(25)));
    settled(&c, 3);
    let gap = hand_over(lease, w, "subscribers back");
    assert!(gap < RETRY_DELAY / 10, "woken {gap:?} after the release");
}

#[test]
fn thirty_two_waiters_in_one_process_each_get_it_once_without_overlap_or_herd() {
    const WAITERS: usize = 32;
    let c = Cluster::start(3);
    let mgr = Arc::new(manager(c.urls()));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(WAITERS));
    let threads: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (mgr, inside, overlaps, start) = (
                Arc::clone(&mgr),
                Arc::clone(&inside),
                Arc::clone(&overlaps),
                Arc::clone(&start),
            );
            thread::spawn(move || {
                start.wait();
                let lease = mgr.acquire("herd", LONG_TTL, &waiting(Duration::from_secs(60)))?;
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(2));
                inside.store(false, Ordering::SeqCst);
                lease.unlock()
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap().expect("every waiter gets the lock");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let m = mgr.metrics();
    eprintln!(
        "{} grants, {} attempts, {} retries",
        m.grants, m.acquire_attempts, m.retries
    );
    assert_eq!(m.grants, WAITERS as u64);
    // A release that woke every waiter would cost about WAITERS / 2 attempts per grant (over
    // 500 here). Waking one, and the next when it leaves, costs a few per grant (122 to 177
    // in 55 runs under load).
    assert!(
        m.acquire_attempts <= 8 * WAITERS as u64,
        "{} attempts for {WAITERS} grants: a herd",
        m.acquire_attempts
    );
    assert!(eventually(Duration::from_secs(3), || c
        .present(&key("herd"))
        == 0));
}

#[test]
fn cancel_from_another_thread_ends_the_wait_at_once_and_leaves_no_key() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    let lease = holder.try_lock("cancel", LONG_TTL).unwrap();
    let cancel = Cancel::new();
    let w = waiter(
        Arc::clone(&mgr),
        "cancel",
        waiting(Duration::from_secs(20)).cancel(cancel.clone()),
    );
    settled(&c, 3);
    let fired = Instant::now();
    cancel.fire();
    let (r, returned) = w.join().unwrap();
    let took = returned.duration_since(fired);
    eprintln!("cancelled wait returned {took:?} after fire");
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(took < Duration::from_millis(500), "{took:?}");
    assert_eq!(mgr.metrics().cancelled, 1);
    lease.unlock().unwrap();
    assert!(eventually(Duration::from_secs(3), || c
        .present(&key("cancel"))
        == 0));
}

#[test]
fn cancel_ends_the_retry_loop_pauses_too_and_a_fired_handle_sends_nothing() {
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    let lease = holder.try_lock("cancel2", LONG_TTL).unwrap();
    for opts in [
        LockOptions::new().wait(Wait::Retries),
        waiting(Duration::from_secs(20)).notify(false),
    ] {
        let cancel = Cancel::new();
        let w = waiter(Arc::clone(&mgr), "cancel2", opts.cancel(cancel.clone()));
        thread::sleep(Duration::from_millis(100));
        let fired = Instant::now();
        cancel.fire();
        cancel.fire(); // idempotent
        let (r, returned) = w.join().unwrap();
        assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
        let took = returned.duration_since(fired);
        assert!(took < Duration::from_millis(500), "{took:?}");
    }
    lease.unlock().unwrap();
    // A handle that has fired: not even one attempt.
    let cancel = Cancel::new();
    cancel.fire();
    let before = mgr.metrics().acquire_attempts;
    let r = mgr.acquire("cancel2", LONG_TTL, &LockOptions::new().cancel(cancel));
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert_eq!(mgr.metrics().acquire_attempts, before);
    assert_eq!(c.present(&key("cancel2")), 0);
}
