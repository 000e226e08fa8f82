//! Waiting by notification: waiters woken by the release, against real `redis-server`
//! processes. Every manager here has a retry delay of 30 s, so a waiter that got the lock
//! within a few seconds was woken, not lucky in its polling.
//!
//! The bounds on how soon something happens are fractions of what the alternative would
//! take (a poller's pause of up to the retry delay, a wait of 20 s, a holder's TTL of 30 s),
//! never a few milliseconds: a busy machine may take a second or two to schedule a wake-up,
//! and these tests must not fail for that. The figures are printed.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Cancel, Error, LockOptions, Redlock, Wait};
use support::{Cluster, eventually};

/// Far above every wake-up these tests expect: a waiter that polled would pause up to this
/// long (a uniformly random pause: a tenth of the time under a tenth of it).
const RETRY_DELAY: Duration = Duration::from_secs(30);
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
    // Woken at the holder's expiry, not after a poller's pause nor at the end of the wait.
    assert!(waited < ttl + RETRY_DELAY / 10, "{waited:?}");
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

/// 32 waiters of one manager queue behind a holder of another; its release starts a chain of
/// hand-overs, each waiter releasing to the next.
///
/// What "no herd" means here is counted after every waiter is asleep, so that the count does
/// not depend on how the machine schedules the 32 arrivals: a waiter's first attempt and the
/// one after its subscription come before the release (they are the same with or without a
/// herd), and with a busy machine the arrivals also collide with each other, which costs
/// retries in any number. Once every waiter sleeps, only a wake-up makes an attempt. Waking
/// the first waiter alone, each release causes one attempt, a few more at most (a wake-up it
/// hands on, a late message from a node, a split vote with the release still under way), and
/// none of these grow with the number of waiters. A herd wakes every waiter at each release:
/// 31 + 30 + ... + 1, about WAITERS² / 2 attempts (496 here), whatever the load.
#[test]
fn thirty_two_waiters_in_one_process_each_get_it_once_without_overlap_or_herd() {
    const WAITERS: usize = 32;
    let c = Cluster::start(3);
    let holder = manager(c.urls());
    let mgr = Arc::new(manager(c.urls()));
    // The manager knows and trusts every node before anything is counted, so that no first
    // attempt is repeated at once when the nodes become trusted during it.
    mgr.try_lock("warm", LONG_TTL).unwrap().unlock().unwrap();
    let lease = holder.try_lock("herd", LONG_TTL).unwrap();
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
                let lease = mgr.acquire("herd", LONG_TTL, &waiting(Duration::from_secs(120)))?;
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(2));
                inside.store(false, Ordering::SeqCst);
                lease.unlock()
            })
        })
        .collect();
    // Every waiter refused twice (before and after subscribing), then no attempt for a while:
    // all asleep. (The retry delay is 10 s: a waiter whose subscription took longer than that
    // attempts once more, which the settling also waits for.)
    let attempts = || mgr.metrics().acquire_attempts;
    assert!(
        eventually(Duration::from_secs(60), || attempts() >= 2 * WAITERS as u64),
        "the waiters never all waited: {} attempts",
        attempts()
    );
    let mut before = attempts();
    assert!(
        eventually(Duration::from_secs(60), || {
            thread::sleep(Duration::from_millis(300));
            let now = attempts();
            std::mem::replace(&mut before, now) == now
        }),
        "the waiters' attempts never settled"
    );
    assert_eq!(mgr.metrics().grants, 1, "granted while the holder held it");
    lease.unlock().unwrap();
    for t in threads {
        t.join().unwrap().expect("every waiter gets the lock");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    let m = mgr.metrics();
    let after = m.acquire_attempts - before;
    eprintln!(
        "{} grants, {} attempts ({before} before the release, {after} after it), {} retries",
        m.grants, m.acquire_attempts, m.retries
    );
    // The warm-up's grant and one per waiter.
    assert_eq!(m.grants, 1 + WAITERS as u64);
    // One release, one attempt, a few more at most: 4 per grant is far above what waking the
    // first waiter costs and far below a herd (see above).
    assert!(
        after <= 4 * WAITERS as u64,
        "{after} attempts after the release for {WAITERS} grants: a herd"
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
    // Without the cancel the wait would last 20 s (the holder keeps the lock for 30 s).
    assert!(took < RETRY_DELAY / 10, "{took:?}");
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
        eprintln!("cancelled wait returned {took:?} after fire");
        // Without the cancel the pause would last up to the retry delay (30 s), the wait 20 s.
        assert!(took < RETRY_DELAY / 10, "{took:?}");
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
