//! Auto-renewal against real redis-server processes.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, LostReason, Redlock, RenewOptions};
use support::{Cluster, eventually};

fn key(resource: &[u8]) -> Vec<u8> {
    let mut k = b"redlock:".to_vec();
    k.extend_from_slice(resource);
    k
}

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .node_timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(20)),
    )
    .unwrap()
}

#[test]
fn a_one_second_lock_held_for_ten_seconds_is_never_lost_nor_taken() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let other = manager(cluster.urls());
    let lease = mgr.try_lock("long", Duration::from_secs(1)).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    let start = Instant::now();
    let mut min_validity = Duration::MAX;
    let mut attempts = 0;
    // Ten seconds and 50 checks at least: a busy machine stretches the loop, not the test's
    // verdict.
    while start.elapsed() < Duration::from_secs(10) || attempts < 50 {
        assert!(!lease.is_lost(), "lost: {:?}", lease.lost_reason());
        let v = lease.validity();
        assert!(
            v > Duration::ZERO,
            "validity ran out at {:?}",
            start.elapsed()
        );
        min_validity = min_validity.min(v);
        assert!(matches!(
            other.try_lock("long", Duration::from_secs(1)),
            Err(Error::NotAcquired(_))
        ));
        attempts += 1;
        thread::sleep(Duration::from_millis(100));
    }
    let elapsed = start.elapsed();
    let stats = mgr.renewal_stats();
    eprintln!(
        "{attempts} checks in {elapsed:?}: lowest validity {min_validity:?}, {} renewals",
        stats.renewed
    );
    // Renewed every third of the TTL (1 s), so the validity stays near two thirds of it, less
    // a renewal's round trip. A renewal late by a quarter of a second on a busy machine is
    // no loss (the validity never reached zero, above); a renewal only near the end of the
    // validity would be.
    assert!(
        min_validity > Duration::from_millis(150),
        "{min_validity:?}"
    );
    // About one renewal per third of a TTL: more than one per half TTL, whatever the load
    // added to each one's round trip (up to a sixth of a TTL on average).
    let half_ttls = (elapsed.as_millis() / 500) as u64;
    assert!(
        stats.renewed >= half_ttls,
        "{} renewals in {elapsed:?}: {stats:?}",
        stats.renewed
    );
    assert_eq!(stats.lost, 0);
    lease.unlock().unwrap();
    assert!(!lease.is_renewing());
    other
        .try_lock("long", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn killing_a_majority_reports_the_loss_before_the_validity_ends() {
    let mut cluster = Cluster::start(5);
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .node_timeout(Duration::from_millis(100))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(20)),
    )
    .unwrap();
    // A 5 s TTL: the loss is reported a twentieth of the TTL (250 ms, the most) before the
    // validity ends, a margin that a busy machine's scheduling does not eat up, as it could
    // a 1 s TTL's 50 ms.
    let lease = mgr.try_lock("doomed", Duration::from_secs(5)).unwrap();
    let lost_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let seen = Arc::clone(&lost_at);
    lease
        .auto_renew(RenewOptions::new().on_lost(move |l| {
            assert!(l.is_lost());
            assert_eq!(l.validity(), Duration::ZERO);
            *seen.lock().unwrap() = Some(Instant::now());
        }))
        .unwrap();
    // Let a renewal succeed, then kill three of five.
    assert!(eventually(Duration::from_secs(10), || mgr
        .renewal_stats()
        .renewed
        >= 1));
    let last_granted = lease.expires_at().expect("still valid");
    for i in [0, 1, 2] {
        cluster.servers[i].kill();
    }
    // A renewal may have been confirmed just before the kill: track the last expiry granted.
    let mut last_expiry = last_granted;
    let deadline = Instant::now() + Duration::from_secs(15);
    while !lease.is_lost() {
        if let Some(e) = lease.expires_at() {
            last_expiry = last_expiry.max(e);
        }
        assert!(Instant::now() < deadline, "loss never reported");
        thread::sleep(Duration::from_millis(1));
    }
    assert!(lease.wait_lost(Duration::ZERO));
    assert_eq!(lease.validity(), Duration::ZERO);
    assert!(matches!(
        lease.lost_reason(),
        Some(LostReason::RenewalFailed(_))
    ));
    assert!(eventually(Duration::from_secs(2), || lost_at
        .lock()
        .unwrap()
        .is_some()));
    let notified = lost_at.lock().unwrap().unwrap();
    eprintln!(
        "loss reported {:?} before the validity ended",
        last_expiry.saturating_duration_since(notified)
    );
    assert!(
        notified < last_expiry,
        "notified {:?} after the validity ended",
        notified - last_expiry
    );
    // Fail closed: never valid again, and extend/unlock say so.
    assert!(matches!(
        lease.extend(Duration::from_secs(1)),
        Err(Error::NotHeld(_))
    ));
    assert!(lease.unlock().is_err());
    assert_eq!(lease.validity(), Duration::ZERO);
}

#[test]
fn a_thousand_cycles_with_renewals_in_flight_at_unlock_leave_no_key() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    for i in 0..1000u32 {
        let res = format!("cycle{}", i % 7);
        let lease = mgr
            .lock_timeout(&res, Duration::from_secs(3), Duration::from_secs(10))
            .unwrap();
        // Renew every 15 ms, so a renewal is often in flight when unlock comes.
        lease
            .auto_renew(RenewOptions::new().renew_after(0.005))
            .unwrap();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        thread::sleep(Duration::from_micros(rng % 25_000));
        lease.unlock().unwrap();
    }
    let stats = mgr.renewal_stats();
    assert!(stats.renewed > 100, "few renewals happened: {stats:?}");
    // A renewal that ran after an unlock would have extended or restored a key (3 s TTL):
    // 2 s for the node that was not needed for the last unlock's quorum to apply it.
    assert!(eventually(Duration::from_secs(2), || cluster
        .servers
        .iter()
        .all(|s| s.lock_keys() == 0)));
}

#[test]
fn a_restarted_empty_node_gets_the_key_back_within_a_renewal_period() {
    let mut cluster = Cluster::start(3);
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .node_timeout(Duration::from_millis(200))
            .reconnect_backoff(Duration::from_millis(5), Duration::from_millis(50)),
    )
    .unwrap();
    let ttl = Duration::from_secs(3);
    let lease = mgr.try_lock("restore", ttl).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    let k = key(b"restore");
    assert!(eventually(Duration::from_secs(2), || cluster
        .holding(&k, lease.value().as_bytes())
        == 3));
    cluster.servers[0].restart(); // no persistence: it comes back empty
    assert_eq!(cluster.servers[0].get(&k), None);
    let restarted = Instant::now();
    // One renewal period is a third of the TTL (1 s); allow for a failed attempt's retry and
    // a busy machine, and still well before the TTL ends: a key never restored fails here.
    assert!(
        eventually(ttl / 3 + Duration::from_millis(1500), || cluster.servers[0]
            .get(&k)
            .as_deref()
            == Some(lease.value().as_bytes())),
        "key not restored"
    );
    eprintln!("restored after {:?}", restarted.elapsed());
    // The node may run the restoring script a moment before the renewal thread reads its
    // reply and counts it.
    assert!(eventually(Duration::from_secs(5), || mgr
        .renewal_stats()
        .restored
        >= 1));
    assert!(cluster.servers[0].pttl(&k) > 0);
    lease.unlock().unwrap();
    let gone = eventually(Duration::from_secs(1), || cluster.present(&k) == 0);
    let left: Vec<i64> = cluster.servers.iter().map(|s| s.pttl(&k)).collect();
    assert!(gone, "key left after unlock; PTTL per node: {left:?}");
}

#[test]
fn the_hold_bound_stops_renewal_and_tells_the_holder() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // Before the acquisition, from which the bound counts: the lease is lost no sooner than
    // 3 s after this, however long the acquisition took.
    let start = Instant::now();
    let lease = mgr.try_lock("bounded", Duration::from_secs(1)).unwrap();
    lease
        .auto_renew(RenewOptions::new().max_hold(Duration::from_secs(3)))
        .unwrap();
    assert!(lease.wait_lost(Duration::from_secs(10)));
    let at = start.elapsed();
    eprintln!("lost at the bound {at:?} after the acquisition began");
    // At the bound, not at some renewal after it (every third of a second) nor never (the
    // wait above); the slack is for a busy machine's scheduling.
    assert!(
        at >= Duration::from_secs(3) && at < Duration::from_millis(4500),
        "{at:?}"
    );
    assert!(matches!(
        lease.lost_reason(),
        Some(LostReason::MaxHoldReached { .. })
    ));
    assert_eq!(lease.validity(), Duration::ZERO);
    assert!(!lease.is_renewing());
    // The key was not renewed past the bound: it expires within one TTL (renewed, it would
    // never expire while the lease lives).
    let other = manager(cluster.urls());
    other
        .lock_timeout("bounded", Duration::from_secs(1), Duration::from_secs(5))
        .unwrap()
        .unlock()
        .unwrap();
}

/// The decision of docs/primitives.md ("Auto-renewal"): reaching the lease's own bound loses
/// it like a failure, so unlock says `NotHeld` (naming the bound), and still frees the keys at
/// once rather than leaving them to expire.
#[test]
fn unlock_after_the_hold_bound_is_not_held_names_the_bound_and_frees_the_keys() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let lease = mgr
        .try_lock("bounded-unlock", Duration::from_secs(30))
        .unwrap();
    lease
        .auto_renew(RenewOptions::new().max_hold(Duration::from_millis(300)))
        .unwrap();
    assert!(lease.wait_lost(Duration::from_secs(10)));
    assert_eq!(cluster.present(&key(b"bounded-unlock")), 3);
    let Err(Error::NotHeld(report)) = lease.unlock() else {
        panic!("unlock after the bound must be NotHeld")
    };
    let text = report.to_string();
    assert!(text.contains("maximum hold time reached"), "{text}");
    // Freed now, not in 30 s.
    assert!(eventually(Duration::from_secs(5), || cluster
        .present(&key(b"bounded-unlock"))
        == 0));
    let other = manager(cluster.urls());
    other
        .try_lock("bounded-unlock", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();
}

#[test]
fn the_extension_bound_stops_renewal_after_n_extensions() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // A TTL of 1.5 s: a renewal late by most of a second on a busy machine is not a loss.
    let lease = mgr
        .try_lock("counted", Duration::from_millis(1500))
        .unwrap();
    lease
        .auto_renew(RenewOptions::new().max_extensions(2))
        .unwrap();
    assert!(lease.wait_lost(Duration::from_secs(15)));
    assert_eq!(
        lease.lost_reason(),
        Some(LostReason::MaxExtensionsReached { extensions: 2 })
    );
    assert_eq!(mgr.renewal_stats().renewed, 2);
}

#[test]
fn bad_renewal_options_are_rejected() {
    let cluster = Cluster::start(1);
    let mgr = manager(cluster.urls());
    let lease = mgr.try_lock("opts", Duration::from_secs(1)).unwrap();
    for o in [
        RenewOptions::new().max_hold(Duration::ZERO),
        RenewOptions::new().renew_after(0.0),
        RenewOptions::new().renew_after(0.9),
        RenewOptions::new().renew_after(f64::NAN),
    ] {
        assert!(matches!(lease.auto_renew(o), Err(Error::InvalidInput(_))));
    }
    lease.unlock().unwrap();
    assert!(matches!(
        lease.auto_renew(RenewOptions::new()),
        Err(Error::NotHeld(_))
    ));
}

#[test]
fn dropping_a_lease_stops_its_renewal() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let lease = mgr.try_lock("dropped", Duration::from_millis(600)).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    thread::sleep(Duration::from_millis(300));
    drop(lease);
    // Not renewed any more: another client gets it within one TTL (600 ms). Renewed, it would
    // never be free, and the 10 s wait would fail; the bound leaves a busy machine slack.
    let start = Instant::now();
    mgr.lock_timeout("dropped", Duration::from_secs(1), Duration::from_secs(10))
        .unwrap()
        .unlock()
        .unwrap();
    let took = start.elapsed();
    eprintln!("free {took:?} after the lease was dropped");
    assert!(took < Duration::from_millis(2500), "{took:?}");
}

/// Not a test of its own: the child process of the next test. It holds an auto-renewed lock
/// on the nodes given in REDLOCK_CHILD_NODES and waits to be killed.
#[test]
fn child_holder() {
    let Ok(nodes) = std::env::var("REDLOCK_CHILD_NODES") else {
        return;
    };
    let mgr = manager(nodes.split(',').map(str::to_string).collect());
    let lease = mgr.try_lock("child", Duration::from_secs(1)).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    println!("LOCKED");
    thread::sleep(Duration::from_secs(60));
    panic!("the parent should have killed this process");
}

#[test]
fn a_killed_holder_process_releases_within_one_ttl() {
    let cluster = Cluster::start(3);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_holder", "--nocapture", "--test-threads=1"])
        .env("REDLOCK_CHILD_NODES", cluster.urls().join(","))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let locked = lines.any(|l| l.is_ok_and(|l| l.contains("LOCKED")));
    assert!(locked, "the child did not take the lock");
    let mgr = manager(cluster.urls());
    // Held and renewed by the child: not available for a couple of TTLs.
    thread::sleep(Duration::from_millis(1500));
    assert!(mgr.try_lock("child", Duration::from_secs(1)).is_err());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let killed = Instant::now();
    let lease = mgr
        .lock_timeout("child", Duration::from_secs(1), Duration::from_secs(5))
        .unwrap();
    let took = killed.elapsed();
    eprintln!("free {took:?} after the holder was killed");
    // The key outlives its killed holder by one TTL (1 s) at most; the waiter is woken at its
    // expiry. Without the expiry (a renewal that went on), the 5 s wait would fail; the
    // bound leaves a busy machine a second.
    assert!(took < Duration::from_secs(2), "{took:?}");
    lease.unlock().unwrap();
}

#[test]
fn a_thousand_auto_renewed_locks_for_thirty_seconds() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let ttl = Duration::from_secs(3);
    let lost = Arc::new(AtomicU64::new(0));
    let mut leases = Vec::new();
    for i in 0..1000 {
        let lease = mgr.try_lock(format!("many{i}"), ttl).unwrap();
        let lost = Arc::clone(&lost);
        lease
            .auto_renew(RenewOptions::new().on_lost(move |_| {
                lost.fetch_add(1, Ordering::Relaxed);
            }))
            .unwrap();
        leases.push(lease);
    }
    let start = Instant::now();
    let before = mgr.renewal_stats();
    while start.elapsed() < Duration::from_secs(30) {
        thread::sleep(Duration::from_millis(500));
        for l in &leases {
            assert!(l.is_valid(), "a lease lapsed: {:?}", l.lost_reason());
        }
    }
    let after = mgr.renewal_stats();
    let elapsed = start.elapsed();
    assert_eq!(lost.load(Ordering::Relaxed), 0);
    assert_eq!(after.lost, 0);
    let renewed = after.renewed - before.renewed;
    let ticks = after.ticks - before.ticks;
    // Every lease renewed about every second (a third of the TTL): about 30 000 renewals in
    // 30 s on an idle machine. A busy one adds its delays to each renewal's period; more
    // than one renewal per lease every two seconds (two thirds of the TTL) holds however
    // busy, and fails if leases were renewed only near the end of their validity.
    let floor = 1000 * elapsed.as_millis() as u64 / 2000;
    assert!(
        renewed >= floor,
        "{renewed} renewals, want {floor}: {after:?}"
    );
    println!(
        "1000 leases for 30 s: {renewed} renewals in {ticks} ticks, {:.1} leases per tick, \
         {} commands per node ({:.1} writes per node per second), largest batch {}",
        renewed as f64 / ticks as f64,
        after.commands_per_node - before.commands_per_node,
        (after.commands_per_node - before.commands_per_node) as f64 / 30.0,
        after.max_batch
    );
    // Batching: far fewer commands than renewals.
    assert!(ticks * 5 < renewed, "renewals were not batched: {after:?}");
    for l in leases {
        l.unlock().unwrap();
    }
}

fn delete(cluster: &Cluster, nodes: &[usize], k: &[u8]) {
    for &i in nodes {
        redis::cmd("DEL")
            .arg(k)
            .exec(&mut cluster.servers[i].client())
            .unwrap();
    }
}

#[test]
fn renewal_never_recreates_a_lock_a_majority_has_lost() {
    let cluster = Cluster::start(5);
    let mgr = manager(cluster.urls());
    let lease = mgr
        .try_lock("majority", Duration::from_millis(900))
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    lease
        .auto_renew(RenewOptions::new().on_lost(move |l| {
            let _ = tx.send(l.lost_reason());
        }))
        .unwrap();
    let k = key(b"majority");
    assert!(eventually(Duration::from_secs(2), || cluster.present(&k) == 5));
    // Three of five lose the key: the next renewal cannot be confirmed by a quorum, and it
    // must not write the key back on them.
    delete(&cluster, &[0, 1, 2], &k);
    let reason = rx
        .recv_timeout(Duration::from_secs(3))
        .expect("reported lost");
    assert!(
        matches!(reason, Some(LostReason::RenewalFailed(_))),
        "{reason:?}"
    );
    assert!(lease.is_lost() && !lease.is_valid());
    for i in [0, 1, 2] {
        assert_eq!(
            cluster.servers[i].get(&k),
            None,
            "node {i}: the key came back"
        );
    }
    assert_eq!(mgr.renewal_stats().restored, 0);
}

#[test]
fn a_lock_taken_and_released_in_the_gap_is_reported_lost_to_the_first_holder() {
    let cluster = Cluster::start(5);
    let mgr = manager(cluster.urls());
    let other = manager(cluster.urls());
    let ttl = Duration::from_millis(900);
    let lease = mgr.try_lock("gap", ttl).unwrap();
    lease.auto_renew(RenewOptions::new()).unwrap();
    let k = key(b"gap");
    assert!(eventually(Duration::from_secs(2), || cluster.present(&k) == 5));
    // The key vanishes on a majority; another client takes the lock there and lets it go.
    delete(&cluster, &[0, 1, 2], &k);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match other.try_lock("gap", ttl) {
            Ok(l) => {
                l.unlock().unwrap();
                break;
            }
            // The holder's renewal may have run in between: that also ends in a loss.
            Err(_) if lease.is_lost() => break,
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
    }
    assert!(
        lease.wait_lost(Duration::from_secs(3)),
        "never reported lost"
    );
    assert!(!lease.is_valid());
    // The holder never wrote the key back on the majority.
    for i in [0, 1, 2] {
        assert_eq!(cluster.servers[i].get(&k), None, "node {i}");
    }
}

/// A hold bound too large for the clock to add (`Duration::MAX`: "never") leaves renewal
/// unbounded; it never stops the renewal thread.
#[test]
fn a_hold_bound_past_the_clocks_range_renews_without_end() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    // A 2 s TTL: a renewal late by a second on a busy machine is not a loss (a 300 ms one
    // left it under 200 ms, and a loss here fails the test).
    let ttl = Duration::from_secs(2);
    let unbounded = mgr.try_lock("unbounded", ttl).unwrap();
    unbounded
        .auto_renew(RenewOptions::new().max_hold(Duration::MAX))
        .unwrap();
    // Three renewals of it, however slow the machine (bounded: a stalled thread fails).
    let start = Instant::now();
    while mgr.renewal_stats().renewed < 3 {
        assert!(!unbounded.is_lost(), "{:?}", unbounded.lost_reason());
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "renewals stalled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(unbounded.is_renewing());
    // The renewal thread still serves a lease made after them.
    let other = mgr.try_lock("unbounded-2", ttl).unwrap();
    other.auto_renew(RenewOptions::new()).unwrap();
    let renewed = mgr.renewal_stats().renewed;
    while mgr.renewal_stats().renewed < renewed + 4 {
        assert!(!other.is_lost(), "{:?}", other.lost_reason());
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "renewals stalled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    unbounded.unlock().unwrap();
    other.unlock().unwrap();
}
