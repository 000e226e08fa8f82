//! The fair lock against real redis-server processes: grants in queue order across processes,
//! a killed waiter dropping out within the drop-out time, a release waking the next waiter
//! only, no deadlock and no overlap with a node restarted empty or paused, fair and plain
//! locks of one resource together, and bad input refused.

mod support;

use std::io::{BufRead, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LockOptions, Redlock, Wait};
use support::{Cluster, RedisServer, eventually};

const QUEUE: &[u8] = b"redlock-fair:redlock:hot";
const KEY: &[u8] = b"redlock:hot";
const TICKETS: &[u8] = b"redlock-fair-tickets:redlock:hot";

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(20))
            .node_timeout(Duration::from_millis(300))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn fair(secs: u64) -> LockOptions {
    LockOptions::new()
        .fair(true)
        .wait(Wait::For(Duration::from_secs(secs)))
}

/// How many waiters the queue on `s` holds.
fn queued(s: &RedisServer) -> i64 {
    redis::cmd("HLEN")
        .arg(QUEUE)
        .query(&mut s.client())
        .unwrap_or(0)
}

/// Waits until at least `n` waiters are queued on a majority of the cluster's nodes: the last
/// of them has finished queueing, so whoever starts now gets a larger ticket.
fn wait_queued(cluster: &Cluster, n: i64) {
    let majority = cluster.servers.len() / 2 + 1;
    assert!(
        eventually(Duration::from_secs(20), || {
            cluster.servers.iter().filter(|s| queued(s) >= n).count() >= majority
        }),
        "{n} waiters never queued on a majority"
    );
}

/// A worker process of `sixteen_waiters_in_four_processes_are_served_in_queue_order` and of
/// `a_killed_waiter_holds_up_the_next_for_at_most_the_drop_out_time` (run by those tests with
/// their environment; on its own it does nothing). For each line `go <i>` on its input it
/// starts a fair waiter `i`, which records its grant in the store (`RPUSH order <i>`), holds
/// the lock briefly and releases it; at the end of its input it waits for its waiters.
#[test]
#[ignore = "a worker process of other tests"]
fn worker_process() {
    let Ok(urls) = std::env::var("FAIR_WORKER_NODES") else {
        return;
    };
    let store = std::env::var("FAIR_WORKER_STORE").unwrap();
    let drop_out: u64 = std::env::var("FAIR_WORKER_DROP_OUT_MS")
        .unwrap()
        .parse()
        .unwrap();
    let mgr = manager(urls.split(',').map(String::from).collect());
    let mut waiters = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        let Some(i) = line.strip_prefix("go ") else {
            continue;
        };
        let (mgr, store, i) = (mgr.clone(), store.clone(), i.to_string());
        waiters.push(thread::spawn(move || {
            let opts = fair(60).drop_out(Duration::from_millis(drop_out));
            let lease = mgr.acquire("hot", Duration::from_secs(10), &opts).unwrap();
            let mut c = redis::Client::open(store.as_str())
                .unwrap()
                .get_connection()
                .unwrap();
            let _: i64 = redis::cmd("RPUSH")
                .arg("order")
                .arg(&i)
                .query(&mut c)
                .unwrap();
            println!("granted {i} ticket {:?}", lease.ticket());
            thread::sleep(Duration::from_millis(5));
            lease.unlock().unwrap();
        }));
    }
    for w in waiters {
        w.join().unwrap();
    }
}

fn worker(urls: &[String], store: &str, drop_out_ms: u64) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "worker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("FAIR_WORKER_NODES", urls.join(","))
        .env("FAIR_WORKER_STORE", store)
        .env("FAIR_WORKER_DROP_OUT_MS", drop_out_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn go(child: &mut Child, i: usize) {
    let stdin = child.stdin.as_mut().unwrap();
    writeln!(stdin, "go {i}").unwrap();
    stdin.flush().unwrap();
}

fn order(store: &RedisServer) -> Vec<usize> {
    redis::cmd("LRANGE")
        .arg("order")
        .arg(0)
        .arg(-1)
        .query(&mut store.client())
        .unwrap()
}

#[test]
fn sixteen_waiters_in_four_processes_are_served_in_queue_order() {
    let cluster = Cluster::start(3);
    let store = RedisServer::start();
    let mgr = manager(cluster.urls());
    let holder = mgr
        .acquire("hot", Duration::from_secs(30), &fair(5))
        .unwrap();
    let mut workers: Vec<Child> = (0..4)
        .map(|_| worker(&cluster.urls(), &store.url(), 5000))
        .collect();
    // One after another: each starts once the one before has queued, 3 ms later.
    for i in 0..16 {
        go(&mut workers[i % 4], i);
        wait_queued(&cluster, i as i64 + 1);
        thread::sleep(Duration::from_millis(3));
    }
    holder.unlock().unwrap();
    for mut w in workers {
        drop(w.stdin.take());
        assert!(w.wait().unwrap().success(), "a worker process failed");
    }
    let got = order(&store);
    let in_place = got.iter().enumerate().filter(|(i, w)| i == *w).count();
    println!("grant order {got:?}: {in_place} of 16 in arrival order");
    assert_eq!(got, (0..16).collect::<Vec<_>>());
    // Every entry left the queues with its waiter.
    assert!(eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| queued(s) == 0)
    }));
}

#[test]
fn a_killed_waiter_holds_up_the_next_for_at_most_the_drop_out_time() {
    let drop_out = Duration::from_millis(1000);
    let cluster = Cluster::start(3);
    let store = RedisServer::start();
    let mgr = manager(cluster.urls());
    let opts = fair(30).drop_out(drop_out);
    let ttl = Duration::from_secs(10);
    let holder = mgr.acquire("hot", ttl, &opts).unwrap();
    // A, then B (in a process of its own, to be killed), then C queue.
    let a = {
        let (mgr, opts) = (mgr.clone(), opts.clone());
        thread::spawn(move || {
            let lease = mgr.acquire("hot", ttl, &opts).unwrap();
            thread::sleep(Duration::from_millis(20));
            let released = Instant::now();
            lease.unlock().unwrap();
            released
        })
    };
    wait_queued(&cluster, 1);
    let mut b = worker(&cluster.urls(), &store.url(), drop_out.as_millis() as u64);
    go(&mut b, 1);
    wait_queued(&cluster, 2);
    let c = {
        let (mgr, opts) = (mgr.clone(), opts.clone());
        thread::spawn(move || {
            let lease = mgr.acquire("hot", ttl, &opts).unwrap();
            let granted = Instant::now();
            lease.unlock().unwrap();
            granted
        })
    };
    wait_queued(&cluster, 3);
    b.kill().unwrap();
    b.wait().unwrap();
    holder.unlock().unwrap();
    let released = a.join().unwrap();
    let granted = c.join().unwrap();
    let gap = granted.saturating_duration_since(released);
    println!(
        "a waiter killed in the middle of the queue delayed the next by {} ms (drop-out time {} ms)",
        gap.as_millis(),
        drop_out.as_millis()
    );
    // B never got the lock; C waited for B's entry to drop out. The bound is the drop-out
    // time plus scheduling slack for a busy machine (C's refreshes and the nodes' expiry of
    // B's entry both run late there). An entry that never dropped out would hold C up for
    // its whole 30 s wait.
    assert!(order(&store).is_empty(), "the killed waiter was granted");
    assert!(
        gap <= drop_out + Duration::from_secs(2),
        "{} ms",
        gap.as_millis()
    );
}

#[test]
fn a_release_wakes_the_next_ticket_s_waiter_only() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // A long drop-out time: no waiter refreshes during the test, so any attempt after the
    // release is a wake-up. Each waiter has a manager of its own (as separate processes
    // would), so that each one's attempts are counted apart.
    let opts = fair(30).drop_out(Duration::from_secs(60));
    let ttl = Duration::from_secs(30);
    let holder = mgr.acquire("hot", ttl, &opts).unwrap();
    let granted: Arc<std::sync::Mutex<Vec<usize>>> = Arc::default();
    let release = Arc::new(AtomicBool::new(false));
    let managers: Vec<Redlock> = (0..3).map(|_| manager(cluster.urls())).collect();
    let attempts = || -> Vec<u64> {
        managers
            .iter()
            .map(|m| m.metrics().acquire_attempts)
            .collect()
    };
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (mgr, opts) = (managers[i].clone(), opts.clone());
            let (granted, release) = (granted.clone(), release.clone());
            let w = thread::spawn(move || {
                let lease = mgr.acquire("hot", ttl, &opts).unwrap();
                granted.lock().unwrap().push(i);
                while !release.load(Ordering::Acquire) {
                    thread::sleep(Duration::from_millis(5));
                }
                lease.unlock().unwrap();
            });
            wait_queued(&cluster, i as i64 + 1);
            w
        })
        .collect();
    // Every waiter asleep: the attempt counts settle.
    let mut before = attempts();
    assert!(eventually(Duration::from_secs(10), || {
        thread::sleep(Duration::from_millis(300));
        let now = attempts();
        std::mem::replace(&mut before, now.clone()) == now
    }));
    holder.unlock().unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        !granted.lock().unwrap().is_empty()
    }));
    thread::sleep(Duration::from_millis(300));
    let after = attempts();
    let made: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    println!("attempts after the release, waiter by waiter: {made:?}");
    assert_eq!(*granted.lock().unwrap(), vec![0]);
    // The next waiter attempted (once, or twice if it woke before a quorum had applied the
    // release); the others did not wake at all.
    assert!((1..=2).contains(&made[0]), "{made:?}");
    assert_eq!(
        &made[1..],
        [0, 0],
        "a waiter other than the next one attempted"
    );
    release.store(true, Ordering::Release);
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*granted.lock().unwrap(), vec![0, 1, 2]);
}

#[test]
fn eight_waiters_are_all_served_without_overlap_with_a_node_restarted_empty_and_one_paused() {
    let mut cluster = Cluster::start(5);
    let mgr = manager(cluster.urls());
    let opts = fair(30).drop_out(Duration::from_millis(500));
    let rounds = 6;
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (mgr, opts) = (mgr.clone(), opts.clone());
            thread::spawn(move || {
                let mut held = Vec::new();
                for _ in 0..rounds {
                    let lease = mgr.acquire("hot", Duration::from_secs(2), &opts).unwrap();
                    let from = Instant::now();
                    let valid_until = lease.expires_at().unwrap();
                    thread::sleep(Duration::from_millis(30));
                    let to = Instant::now().min(valid_until);
                    let _ = lease.unlock();
                    held.push((from, to));
                }
                held
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));
    cluster.servers[0].restart(); // kill -9 and back at once, empty
    cluster.servers[1].pause();
    thread::sleep(Duration::from_millis(1500));
    cluster.servers[1].resume();
    let intervals: Vec<(Instant, Instant)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let most = support::most_overlapping(&intervals);
    println!(
        "{} grants to 8 fair waiters under faults; at most {most} valid at once",
        intervals.len()
    );
    assert_eq!(intervals.len(), 8 * rounds, "a waiter was not served");
    assert_eq!(most, 1, "{most} valid leases at once");
}

#[test]
fn fair_and_plain_locks_of_one_resource_exclude_each_other() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    // Nobody queued: granted at once, with no ticket.
    let lease = mgr
        .acquire("hot", ttl, &LockOptions::new().fair(true).wait(Wait::No))
        .unwrap();
    assert!(lease.is_fair());
    assert_eq!(lease.ticket(), None);
    assert_eq!(cluster.holding(KEY, lease.value().as_bytes()), 3);
    // A plain lock of the same resource is refused, and a fair try queues nothing.
    assert!(matches!(
        mgr.try_lock("hot", ttl),
        Err(Error::NotAcquired(_))
    ));
    assert!(matches!(
        mgr.acquire("hot", ttl, &LockOptions::new().fair(true).wait(Wait::No)),
        Err(Error::NotAcquired(_))
    ));
    assert!(cluster.servers.iter().all(|s| queued(s) == 0));
    lease.unlock().unwrap();
    // A plain holder refuses a fair waiter until it releases.
    let plain = mgr.try_lock("hot", ttl).unwrap();
    let waiter = {
        let mgr = mgr.clone();
        thread::spawn(move || mgr.acquire("hot", ttl, &fair(20)).unwrap())
    };
    wait_queued(&cluster, 1);
    thread::sleep(Duration::from_millis(100));
    assert!(!waiter.is_finished());
    plain.unlock().unwrap();
    let lease = waiter.join().unwrap();
    assert!(lease.ticket().is_some());
    assert_eq!(cluster.holding(KEY, lease.value().as_bytes()), 3);
    // Extension and fencing work on a fair lease.
    lease.extend(Duration::from_secs(20)).unwrap();
    assert!(cluster.servers[0].pttl(KEY) > 10_000);
    lease.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || {
        cluster.present(KEY) == 0 && cluster.servers.iter().all(|s| queued(s) == 0)
    }));
    let a = mgr.acquire("hot", ttl, &fair(5).fenced(true)).unwrap();
    let t1 = a.fencing_token().unwrap();
    a.unlock().unwrap();
    let b = mgr.acquire("hot", ttl, &fair(5).fenced(true)).unwrap();
    assert!(b.fencing_token().unwrap() > t1);
    b.unlock().unwrap();
}

#[test]
fn a_waiter_that_gives_up_leaves_the_queue_at_once() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(10);
    let holder = mgr.acquire("hot", ttl, &fair(5)).unwrap();
    let r = mgr.acquire(
        "hot",
        ttl,
        &LockOptions::new()
            .fair(true)
            .drop_out(Duration::from_secs(60))
            .wait(Wait::For(Duration::from_millis(300))),
    );
    assert!(matches!(r, Err(Error::NotAcquired(_))), "{r:?}");
    // Its entry and, with nobody else queued, the ticket counter are gone while the holder
    // still holds (the counter would otherwise live 0.8 × the drop-out time, 48 s here).
    assert!(eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| queued(s) == 0) && cluster.present(TICKETS) == 0
    }));
    // A cancelled waiter too.
    let cancel = redlock::Cancel::new();
    let waiter = {
        let (mgr, cancel) = (mgr.clone(), cancel.clone());
        let opts = fair(20).drop_out(Duration::from_secs(60)).cancel(cancel);
        thread::spawn(move || mgr.acquire("hot", ttl, &opts))
    };
    wait_queued(&cluster, 1);
    cancel.fire();
    assert!(matches!(waiter.join().unwrap(), Err(Error::Cancelled)));
    assert!(eventually(Duration::from_secs(5), || {
        cluster.servers.iter().all(|s| queued(s) == 0) && cluster.present(TICKETS) == 0
    }));
    assert!(holder.is_valid());
    holder.unlock().unwrap();
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(1);
    let fair = LockOptions::new().fair(true);
    let bad = [
        fair.clone().owner("me"),
        fair.clone().shared(true),
        LockOptions::new().drop_out(Duration::from_secs(1)),
        fair.clone().drop_out(Duration::from_millis(5)),
        fair.clone().drop_out(Duration::from_secs(7200)),
    ];
    for opts in &bad {
        let r = mgr.acquire("hot", ttl, opts);
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{opts:?}: {r:?}");
    }
    let r = mgr.acquire_many(&["a", "b"], ttl, &fair);
    assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    let r = mgr.semaphore_acquire("pool", 2, ttl, &fair);
    assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    // The queue's namespace is the library's own.
    let bare = Redlock::new(support::config(cluster.urls()).key_prefix("")).unwrap();
    let r = bare.try_lock("redlock-fair:x", ttl);
    assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    assert!(cluster.servers.iter().all(|s| s.lock_keys() == 0));
}
