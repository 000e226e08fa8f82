//! The counting semaphore against real redis-server processes: never more than P holders
//! (threads in several processes counting themselves in a store), a killed holder's permit
//! back within the TTL, faults (a node restarted empty, one paused), the permit count checked,
//! one waiter woken per release, and the lease's extend, renewal and fencing.

mod support;

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LockOptions, Redlock, RenewOptions, Wait};
use support::{Cluster, RedisServer, eventually};

const KEY: &[u8] = b"redlock-sem:redlock:pool";

/// The TTL of the permit the worker holds until killed: long enough that the test's check
/// that it is held comes well within it on a busy machine.
const HOLD_TTL: Duration = Duration::from_secs(3);

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(20))
            .node_timeout(Duration::from_millis(300))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn waiting(secs: u64) -> LockOptions {
    LockOptions::new().wait(Wait::For(Duration::from_secs(secs)))
}

/// The highest count of holders seen inside at once, from a store every holder counts itself
/// in (`INCR` on entry, `DECR` on leaving).
struct Inside {
    store: redis::Connection,
}

impl Inside {
    fn enter(&mut self) -> i64 {
        let n: i64 = redis::cmd("INCR")
            .arg("inside")
            .query(&mut self.store)
            .unwrap();
        let _: i64 = redis::cmd("EVAL")
            .arg("local m = tonumber(redis.call('get', 'max') or '0') if tonumber(ARGV[1]) > m then redis.call('set', 'max', ARGV[1]) end return 0")
            .arg(0)
            .arg(n)
            .query(&mut self.store)
            .unwrap();
        n
    }

    fn leave(&mut self) {
        let _: i64 = redis::cmd("DECR")
            .arg("inside")
            .query(&mut self.store)
            .unwrap();
    }
}

fn max_inside(store: &RedisServer) -> i64 {
    let v: Option<i64> = redis::cmd("GET")
        .arg("max")
        .query(&mut store.client())
        .unwrap();
    v.unwrap_or(0)
}

/// `threads` threads each taking a permit of "pool" (of `permits`) `cycles` times, counting
/// themselves in the store while inside; returns each thread's count of grants. A thread that
/// finds more than `permits` inside fails the test.
fn run_threads(urls: Vec<String>, store: String, permits: u32, threads: usize, cycles: usize) {
    let mgr = manager(urls);
    let sem = mgr.semaphore("pool", permits).unwrap();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let sem = sem.clone();
            let store = store.clone();
            thread::spawn(move || {
                let client = redis::Client::open(store).unwrap();
                let mut inside = Inside {
                    store: client.get_connection().unwrap(),
                };
                let mut got = 0;
                for _ in 0..cycles {
                    let lease = sem.acquire(Duration::from_secs(10), &waiting(60)).unwrap();
                    let n = inside.enter();
                    assert!(n <= i64::from(permits), "{n} holders inside");
                    thread::sleep(Duration::from_micros(200));
                    inside.leave();
                    assert!(lease.is_valid());
                    lease.unlock().unwrap();
                    got += 1;
                }
                got
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), cycles, "a thread was not served");
    }
}

/// A worker process of `twelve_threads_in_three_processes_never_exceed_three_inside` (run by
/// that test with its environment; on its own it does nothing).
#[test]
#[ignore = "a worker process of another test"]
fn worker_process() {
    let Ok(urls) = std::env::var("SEM_WORKER_NODES") else {
        return;
    };
    let store = std::env::var("SEM_WORKER_STORE").unwrap();
    let cycles: usize = std::env::var("SEM_WORKER_CYCLES").unwrap().parse().unwrap();
    match std::env::var("SEM_WORKER_MODE").as_deref() {
        Ok("hold") => {
            // Take one permit and hold it until killed.
            let mgr = manager(urls.split(',').map(String::from).collect());
            let lease = mgr
                .semaphore_acquire("pool", 1, HOLD_TTL, &waiting(10))
                .unwrap();
            println!("held");
            thread::sleep(Duration::from_secs(60));
            drop(lease);
        }
        _ => run_threads(
            urls.split(',').map(String::from).collect(),
            store,
            3,
            4,
            cycles,
        ),
    }
}

fn worker(urls: &[String], store: &str, mode: &str, cycles: usize) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "worker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SEM_WORKER_NODES", urls.join(","))
        .env("SEM_WORKER_STORE", store)
        .env("SEM_WORKER_CYCLES", cycles.to_string())
        .env("SEM_WORKER_MODE", mode)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn twelve_threads_in_three_processes_never_exceed_three_inside() {
    let cluster = Cluster::start(3);
    let store = RedisServer::start();
    let begun = Instant::now();
    // 3 processes x 4 threads x 167 cycles: 2,004 acquisitions.
    let children: Vec<_> = (0..3)
        .map(|_| worker(&cluster.urls(), &store.url(), "threads", 167))
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "a worker process failed");
    }
    let max = max_inside(&store);
    println!(
        "2,004 acquisitions by 12 threads in 3 processes in {} ms; at most {max} inside",
        begun.elapsed().as_millis()
    );
    assert!((1..=3).contains(&max), "{max} inside at once");
    // Every permit was given back.
    assert!(eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| s.pttl(KEY) == -2)
    }));
}

#[test]
fn a_killed_holder_frees_its_permit_within_the_ttl() {
    let cluster = Cluster::start(3);
    let store = RedisServer::start();
    let mut child = worker(&cluster.urls(), &store.url(), "hold", 0);
    // The harness prints its own lines first; the worker says "held" once it holds.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.trim().ends_with("held") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "no permit"
        );
    }
    let mgr = manager(cluster.urls());
    assert!(matches!(
        mgr.semaphore_acquire(
            "pool",
            1,
            Duration::from_secs(5),
            &LockOptions::new().wait(Wait::No)
        ),
        Err(Error::NotAcquired(_))
    ));
    // SIGKILL: no release is ever sent.
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    let lease = mgr
        .semaphore_acquire("pool", 1, Duration::from_secs(5), &waiting(20))
        .unwrap();
    let waited = killed.elapsed();
    println!(
        "permit back {} ms after the SIGKILL (TTL {} ms)",
        waited.as_millis(),
        HOLD_TTL.as_millis()
    );
    // Within the TTL (counted from before the kill), and a busy machine's slack; a permit
    // that outlived its TTL would fail the 20 s wait.
    assert!(
        waited <= HOLD_TTL + Duration::from_millis(1500),
        "{waited:?}"
    );
    assert_eq!(lease.permit(), Some((0, 1)));
    lease.unlock().unwrap();
}

#[test]
fn p_permits_are_granted_on_distinct_slots_and_no_more() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let sem = mgr.semaphore("pool", 3).unwrap();
    assert_eq!(
        (sem.name(), sem.permits(), sem.key()),
        (&b"pool"[..], 3, KEY)
    );
    let ttl = Duration::from_secs(10);
    let held: Vec<_> = (0..3).map(|_| sem.try_acquire(ttl).unwrap()).collect();
    let slots: HashSet<u32> = held.iter().map(|l| l.permit().unwrap().0).collect();
    assert_eq!(slots, HashSet::from([0, 1, 2]));
    for l in &held {
        assert_eq!(l.resource(), b"pool");
        assert_eq!(l.key(), KEY);
        assert!(!l.is_shared());
        assert!(l.acquisition().successes >= 2);
    }
    // Full: refused, with how long until a permit's TTL runs out.
    match sem.try_acquire(ttl) {
        Err(Error::NotAcquired(r)) => {
            assert_eq!(r.successes, 0, "{r}");
            assert!(r.expires_in.is_some_and(|d| d <= ttl), "{r}");
        }
        other => panic!("{other:?}"),
    }
    // A lock of the same name is another thing.
    mgr.try_lock("pool", ttl).unwrap().unlock().unwrap();
    // One back: its slot is taken again.
    let (freed, _) = held[1].permit().unwrap();
    held[1].unlock().unwrap();
    let again = sem.try_acquire(ttl).unwrap();
    assert_eq!(again.permit(), Some((freed, 3)));
    assert!(matches!(held[1].unlock(), Err(Error::NotHeld(_))));
    for l in [&held[0], &held[2], &again] {
        l.unlock().unwrap();
    }
    assert!(eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| s.pttl(KEY) == -2)
    }));
}

#[test]
fn callers_that_name_another_count_are_refused_until_none_is_held() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let held = mgr.semaphore("pool", 3).unwrap().try_acquire(ttl).unwrap();
    for wait in [Wait::No, Wait::For(Duration::from_secs(5))] {
        let begun = Instant::now();
        match mgr.semaphore_acquire("pool", 4, ttl, &LockOptions::new().wait(wait)) {
            Err(Error::InvalidInput(m)) => {
                assert!(m.contains("has 3 permits") && m.contains("named 4"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        // Not retried: the error ends a wait at once.
        assert!(begun.elapsed() < Duration::from_secs(2));
    }
    // Nothing was left behind by the refused calls: the one permit is all there is.
    let two = mgr.semaphore("pool", 3).unwrap();
    let a = two.try_acquire(ttl).unwrap();
    let b = two.try_acquire(ttl).unwrap();
    assert!(matches!(two.try_acquire(ttl), Err(Error::NotAcquired(_))));
    for l in [held, a, b] {
        l.unlock().unwrap();
    }
    // None held: the new count applies.
    let four = mgr.semaphore("pool", 4).unwrap();
    let all: Vec<_> = (0..4).map(|_| four.try_acquire(ttl).unwrap()).collect();
    assert!(matches!(four.try_acquire(ttl), Err(Error::NotAcquired(_))));
    for l in all {
        l.unlock().unwrap();
    }
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let cluster = Cluster::start(1);
    let mgr = manager(cluster.urls());
    for p in [0, redlock::MAX_PERMITS + 1] {
        assert!(
            matches!(mgr.semaphore("pool", p), Err(Error::InvalidInput(_))),
            "{p}"
        );
    }
    assert!(matches!(mgr.semaphore("", 3), Err(Error::InvalidInput(_))));
    let sem = mgr.semaphore("pool", 3).unwrap();
    for opts in [
        LockOptions::new().owner("me"),
        LockOptions::new().shared(true),
    ] {
        assert!(matches!(
            sem.acquire(Duration::from_secs(1), &opts),
            Err(Error::InvalidInput(_))
        ));
    }
    assert!(matches!(
        sem.acquire(Duration::ZERO, &LockOptions::new()),
        Err(Error::InvalidInput(_))
    ));
    // Semaphore keys are the library's own: no lock key may be one.
    let bare = Redlock::new(support::config(cluster.urls()).key_prefix("")).unwrap();
    assert!(matches!(
        bare.try_lock("redlock-sem:x", Duration::from_secs(1)),
        Err(Error::InvalidInput(_))
    ));
    assert_eq!(cluster.servers[0].dbsize(), 0);
}

#[test]
fn a_release_wakes_one_waiter() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let sem = mgr.semaphore("pool", 1).unwrap();
    let ttl = Duration::from_secs(30);
    let held = sem.try_acquire(ttl).unwrap();
    let granted = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (sem, granted, stop) = (sem.clone(), granted.clone(), stop.clone());
            thread::spawn(move || {
                let cancel = redlock::Cancel::new();
                let opts = waiting(30).cancel(cancel.clone());
                let watcher = {
                    let (stop, cancel) = (stop.clone(), cancel.clone());
                    thread::spawn(move || {
                        while !stop.load(Ordering::Acquire) {
                            thread::sleep(Duration::from_millis(5));
                        }
                        cancel.fire();
                    })
                };
                // The winner keeps its permit (returned) until every other waiter is done.
                let r = sem.acquire(ttl, &opts);
                if r.is_ok() {
                    granted.fetch_add(1, Ordering::AcqRel);
                }
                watcher.join().unwrap();
                r
            })
        })
        .collect();
    // Every waiter has made its attempts and sleeps (the holder's one, then for each waiter a
    // refusal and one more after subscribing: 1 + 4 x 2).
    assert!(eventually(Duration::from_secs(10), || {
        mgr.metrics().acquire_attempts >= 9
    }));
    // And no attempt for 500 ms (a waiter whose subscription came late retries once more).
    let mut before = mgr.metrics().acquire_attempts;
    assert!(eventually(Duration::from_secs(10), || {
        thread::sleep(Duration::from_millis(500));
        let now = mgr.metrics().acquire_attempts;
        std::mem::replace(&mut before, now) == now
    }));
    let released = Instant::now();
    held.unlock().unwrap();
    assert!(eventually(Duration::from_secs(10), || granted
        .load(Ordering::Acquire)
        == 1));
    let woke_in = released.elapsed();
    thread::sleep(Duration::from_millis(300));
    let after = mgr.metrics().acquire_attempts;
    println!(
        "granted {} ms after the release; {} attempts after it",
        woke_in.as_millis(),
        after - before
    );
    assert_eq!(granted.load(Ordering::Acquire), 1);
    // How many attempts the release caused is printed above, not asserted: on a quiet machine
    // it is 1 (one waiter woke), but a count of attempts fails on a busy one (CI once saw 26
    // while its 2 cores ran a busy loop), which says nothing about correctness. What must hold
    // whatever the load: one grant, and the other three still waiting (below).
    stop.store(true, Ordering::Release);
    let got: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
    assert_eq!(got.iter().filter(|g| g.is_ok()).count(), 1);
    assert_eq!(
        got.iter()
            .filter(|g| matches!(g, Err(Error::Cancelled)))
            .count(),
        3
    );
    for l in got.into_iter().flatten() {
        l.unlock().unwrap();
    }
}

#[test]
fn a_permit_extends_renews_and_carries_a_fencing_token_per_slot() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let sem = mgr.semaphore("pool", 2).unwrap();
    let fenced = LockOptions::new().wait(Wait::No).fenced(true);
    let a = sem.acquire(Duration::from_secs(2), &fenced).unwrap();
    let b = sem.acquire(Duration::from_secs(2), &fenced).unwrap();
    let (ta, tb) = (a.fencing_token().unwrap(), b.fencing_token().unwrap());
    assert!(ta >= 1 && tb > ta, "{ta} {tb}");
    // Extend to 20 s: the hold lives on, past its first TTL.
    a.extend(Duration::from_secs(20)).unwrap();
    assert!(a.validity() > Duration::from_secs(15));
    // Renewal keeps b past its 2 s TTL.
    b.auto_renew(RenewOptions::new()).unwrap();
    thread::sleep(Duration::from_millis(2500));
    assert!(a.is_valid() && b.is_valid() && b.is_renewing());
    assert!(matches!(
        sem.try_acquire(Duration::from_secs(1)),
        Err(Error::NotAcquired(_))
    ));
    // b's slot, taken again, gets a larger token.
    let (slot, _) = b.permit().unwrap();
    b.unlock().unwrap();
    let c = sem.acquire(Duration::from_secs(2), &fenced).unwrap();
    assert_eq!(c.permit().unwrap().0, slot);
    assert!(c.fencing_token().unwrap() > tb);
    a.unlock().unwrap();
    c.unlock().unwrap();
}

#[test]
fn never_more_than_p_with_a_node_restarted_empty_and_one_paused() {
    let mut cluster = Cluster::start(5);
    let mgr = manager(cluster.urls());
    let sem = mgr.semaphore("pool", 2).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    // Each grant's valid interval: from when it was granted to the earlier of its release
    // and the end of its validity.
    let handles: Vec<_> = (0..6)
        .map(|_| {
            let (sem, done) = (sem.clone(), done.clone());
            thread::spawn(move || {
                let mut held = Vec::new();
                while !done.load(Ordering::Acquire) {
                    let Ok(lease) = sem.acquire(Duration::from_secs(2), &waiting(1)) else {
                        continue;
                    };
                    let from = Instant::now();
                    let valid_until = lease.expires_at().unwrap();
                    thread::sleep(Duration::from_millis(2));
                    let to = Instant::now().min(valid_until);
                    let _ = lease.unlock();
                    held.push((from, to));
                }
                held
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    cluster.servers[0].restart(); // kill -9 and back at once, empty
    cluster.servers[1].pause();
    thread::sleep(Duration::from_millis(1500));
    cluster.servers[1].resume();
    thread::sleep(Duration::from_millis(500));
    done.store(true, Ordering::Release);
    let intervals: Vec<(Instant, Instant)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let most = support::most_overlapping(&intervals);
    println!(
        "{} grants under faults; at most {most} valid at once",
        intervals.len()
    );
    assert!(!intervals.is_empty());
    assert!(most <= 2, "{most} valid permits at once");
}

fn hget(s: &RedisServer, field: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(KEY)
        .arg(field)
        .query(&mut s.client())
        .unwrap()
}

#[test]
fn renewal_gives_a_node_restarted_empty_the_permit_back_in_its_slot() {
    let mut cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let sem = mgr.semaphore("pool", 2).unwrap();
    let ttl = Duration::from_secs(3);
    let lease = sem.try_acquire(ttl).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    let (slot, _) = lease.permit().unwrap();
    let field = format!("slot:{slot}");
    assert!(eventually(Duration::from_secs(2), || {
        cluster
            .servers
            .iter()
            .all(|s| hget(s, &field).as_deref() == Some(lease.token()))
    }));
    cluster.servers[0].restart(); // no persistence: back empty
    assert_eq!(hget(&cluster.servers[0], &field), None);
    // Within a renewal period or two: the hold back in its own slot, with the count.
    assert!(
        eventually(ttl, || hget(&cluster.servers[0], &field).as_deref()
            == Some(lease.token())),
        "not restored"
    );
    assert_eq!(hget(&cluster.servers[0], "permits").as_deref(), Some("2"));
    assert!(cluster.servers[0].pttl(KEY) > 0);
    // The restored node counts the permit: with the other slot taken, it is full.
    let other = sem.try_acquire(ttl).unwrap();
    assert!(matches!(sem.try_acquire(ttl), Err(Error::NotAcquired(_))));
    other.unlock().unwrap();
    lease.unlock().unwrap();
    assert!(eventually(Duration::from_secs(2), || {
        cluster.servers.iter().all(|s| s.pttl(KEY) == -2)
    }));
}
