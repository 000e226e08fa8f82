//! Redis Cluster nodes (issue #36), against real clusters: `redis-server --cluster-enabled yes`
//! processes joined by `redis-cli --cluster create` (or by hand, below three primaries): the
//! key slot and companion key names against the servers' own, routing by slot, every
//! primitive, `acquire_many` across slots, `MOVED`/`ASK` and resharding under load, the scan
//! and `redlock inspect`, per-shard restart quarantine and failover, one cluster named twice,
//! and clusters that speak only TLS.

mod support;

use redlock::slot::{SLOTS, companion_key, key_slot, slot_tag};
use support::redis_cluster::RedisCluster;

/// Keys that exercise the hash-tag rule: braces in every position, empty tags, nested and
/// repeated ones, bytes that are not UTF-8. Deterministic (a linear congruential generator).
fn keys(n: usize) -> Vec<Vec<u8>> {
    const ALPHABET: &[u8] = b"{}{}ab:-\x00\xff";
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (x >> 33) as usize
    };
    (0..n)
        .map(|_| {
            let len = 1 + next() % 12;
            (0..len)
                .map(|_| ALPHABET[next() % ALPHABET.len()])
                .collect()
        })
        .collect()
}

#[test]
fn key_slots_and_companion_keys_agree_with_the_servers() {
    let c = RedisCluster::start(3, 0);

    // The cluster the later tests build on: three primaries that split every slot.
    let mut ranges = c.slot_ranges();
    ranges.sort();
    let mut next = 0u32;
    for (from, to, _) in &ranges {
        assert_eq!(u32::from(*from), next, "slots {ranges:?}");
        next = u32::from(*to) + 1;
    }
    assert_eq!(next, u32::from(SLOTS), "slots {ranges:?}");
    let mut owners: Vec<u16> = ranges.iter().map(|r| r.2).collect();
    owners.sort();
    owners.dedup();
    let mut ports: Vec<u16> = c.servers.iter().map(|s| s.port).collect();
    ports.sort();
    assert_eq!(owners, ports);

    let mut refused = 0;
    for key in keys(2_000) {
        assert_eq!(key_slot(&key), c.keyslot(&key), "key {key:?}");
        let lock_key = [&b"redlock:"[..], &key].concat();
        match companion_key(b"redlock-fence:", &lock_key) {
            Some(companion) => assert_eq!(
                c.keyslot(&companion),
                c.keyslot(&lock_key),
                "{companion:?} beside {lock_key:?}"
            ),
            None => refused += 1,
        }
    }
    // The generator makes both kinds; most keys have a companion.
    assert!(refused > 0 && refused < 1_000, "{refused} of 2000 refused");

    for slot in (0..SLOTS).step_by(37) {
        let marker = format!("redlock-marker:{{{}}}", slot_tag(slot));
        assert_eq!(c.keyslot(marker.as_bytes()), slot);
    }
}

/// N independent clusters of `primaries` primaries each, started at once.
fn clusters(n: usize, primaries: usize) -> Vec<RedisCluster> {
    let handles: Vec<_> = (0..n)
        .map(|_| std::thread::spawn(move || RedisCluster::start(primaries, 0)))
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// `redis+cluster://` URLs naming each cluster's first two servers (or only one) as seeds.
fn urls(cs: &[RedisCluster]) -> Vec<String> {
    cs.iter()
        .map(|c| {
            let seeds: Vec<String> = (c.servers.iter().take(2))
                .map(|s| format!("127.0.0.1:{}", s.port))
                .collect();
            format!("redis+cluster://{}", seeds.join(","))
        })
        .collect()
}

/// A manager over the clusters, restart quarantine on (per shard), as by default.
fn manager(cs: &[RedisCluster]) -> redlock::Redlock {
    redlock::Redlock::new(support::config(urls(cs))).unwrap()
}

/// How many clusters hold `key` with a value that starts with `token`, on the server `at`
/// names. A step returns at quorum, so the last cluster may not have run it yet (and a
/// redirect it answered after the step was decided is not followed): a grant is on at least a
/// quorum of them, and after a release at most a minority still holds the key.
fn holding(
    cs: &[RedisCluster],
    token: &str,
    at: impl Fn(&RedisCluster) -> Option<Vec<u8>>,
) -> usize {
    cs.iter()
        .filter(|c| at(c).is_some_and(|v| v.starts_with(token.as_bytes())))
        .count()
}

/// The server of `c` that owns `key`'s slot, by the cluster's own map.
fn owner<'a>(c: &'a RedisCluster, key: &[u8]) -> &'a support::RedisServer {
    let slot = key_slot(key);
    let port = c
        .slot_ranges()
        .into_iter()
        .find(|(from, to, _)| (*from..=*to).contains(&slot))
        .expect("every slot is served")
        .2;
    c.servers.iter().find(|s| s.port == port).unwrap()
}

#[test]
fn a_cluster_is_one_node_and_each_key_lives_on_its_slots_shard() {
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    assert_eq!((mgr.node_count(), mgr.quorum()), (3, 2));
    let ttl = std::time::Duration::from_secs(10);
    let mut shards_used = std::collections::HashSet::new();
    for i in 0..30 {
        let resource = format!("res-{i}");
        let lease = mgr.try_lock(&resource, ttl).unwrap();
        let key = lease.key().to_vec();
        let token = lease.token().to_string();
        for c in &cs {
            shards_used.insert(owner(c, &key).port);
        }
        let on_owner = |c: &RedisCluster| owner(c, &key).get(&key);
        assert!(holding(&cs, &token, on_owner) >= 2);
        // Held: a second caller is refused.
        assert!(mgr.try_lock(&resource, ttl).is_err());
        lease.extend(std::time::Duration::from_secs(20)).unwrap();
        let extended = cs.iter().filter(|c| owner(c, &key).pttl(&key) > 10_000);
        assert!(extended.count() >= 2);
        lease.unlock().unwrap();
        assert!(holding(&cs, &token, on_owner) <= 1);
    }
    // 30 keys over 3 shards of each of 3 clusters: every shard served some.
    assert_eq!(shards_used.len(), 9, "{shards_used:?}");
}

#[test]
fn a_fenced_lock_keeps_its_counter_in_its_keys_slot() {
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    let ttl = std::time::Duration::from_secs(10);
    let opts = redlock::LockOptions::new().fenced(true);
    let mut last = 0;
    for _ in 0..3 {
        let lease = mgr.acquire("fenced", ttl, &opts).unwrap();
        let token = lease.fencing_token().unwrap();
        assert!(token > last);
        last = token;
        let key = lease.key().to_vec();
        let counter = companion_key(b"redlock-fence:", &key).unwrap();
        for c in &cs {
            assert_eq!(owner(c, &counter).port, owner(c, &key).port);
        }
        // The counter is written back on a quorum, on the key's own shard.
        let on_owner = |c: &RedisCluster| owner(c, &key).get(&counter);
        let written = holding(&cs, &token.to_string(), on_owner);
        assert!(written >= 2, "{written}");
        lease.unlock().unwrap();
    }
}

#[test]
fn every_primitive_keeps_its_keys_in_one_slot() {
    use redlock::{LockOptions, Wait};
    use std::time::Duration;
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    let ttl = Duration::from_secs(10);
    let no_wait = || LockOptions::new().wait(Wait::No);

    // Reentrant and fenced: one owner's holds nest; another owner is refused.
    let mine = no_wait().owner("me").fenced(true);
    let a = mgr.acquire("re", ttl, &mine).unwrap();
    let b = mgr.acquire("re", ttl, &mine).unwrap();
    assert_eq!(a.fencing_token(), b.fencing_token());
    assert!(mgr.acquire("re", ttl, &no_wait().owner("you")).is_err());
    b.unlock().unwrap();
    a.unlock().unwrap();

    // Shared holds, then an exclusive lock refused until they are gone.
    let shared = no_wait().shared(true);
    let s1 = mgr.acquire("sh", ttl, &shared).unwrap();
    let s2 = mgr.acquire("sh", ttl, &shared).unwrap();
    assert!(mgr.acquire("sh", ttl, &no_wait()).is_err());
    s1.unlock().unwrap();
    s2.unlock().unwrap();
    mgr.acquire("sh", ttl, &no_wait())
        .unwrap()
        .unlock()
        .unwrap();

    // Fair: a holder, a queued waiter refused, then granted after the release.
    let fair = LockOptions::new().fair(true);
    let first = mgr.acquire("fair", ttl, &fair).unwrap();
    let waiter = {
        let (mgr, fair) = (mgr.clone(), fair.clone());
        std::thread::spawn(move || mgr.acquire("fair", ttl, &fair.wait(Wait::For(ttl))))
    };
    std::thread::sleep(Duration::from_millis(200));
    first.unlock().unwrap();
    waiter.join().unwrap().unwrap().unlock().unwrap();

    // A semaphore of two permits.
    let sem = mgr.semaphore("sem", 2).unwrap();
    let p1 = sem.try_acquire(ttl).unwrap();
    let p2 = sem.try_acquire(ttl).unwrap();
    assert!(sem.try_acquire(ttl).is_err());
    p1.unlock().unwrap();
    p2.unlock().unwrap();

    // Several resources in one slot (one hash tag): one script per node, as on a standalone
    // node (across slots: the next test).
    let many = mgr
        .acquire_many(&["{order}:a", "{order}:b"], ttl, &no_wait())
        .unwrap();
    many.unlock().unwrap();

    // Keys whose companions could not share their slot are refused up front.
    let err = mgr
        .acquire("a}b", ttl, &no_wait().fenced(true))
        .unwrap_err();
    assert!(matches!(err, redlock::Error::InvalidInput(_)), "{err}");
}

/// How many clusters hold resource `name`'s lock key with a value that starts with `token`.
fn holding_resource(cs: &[RedisCluster], token: &str, name: &str) -> usize {
    let key = format!("redlock:{name}");
    holding(cs, token, |c| owner(c, key.as_bytes()).get(key.as_bytes()))
}

#[test]
fn several_resources_across_slots_are_all_or_none_on_each_cluster() {
    use redlock::{LockOptions, Wait};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    let ttl = Duration::from_secs(10);
    let no_wait = || LockOptions::new().wait(Wait::No);
    let names: Vec<String> = (0..6).map(|i| format!("multi-{i}")).collect();
    let shards: std::collections::HashSet<u16> = (names.iter())
        .map(|n| owner(&cs[0], format!("redlock:{n}").as_bytes()).port)
        .collect();
    assert!(shards.len() > 1, "the keys must span shards: {shards:?}");

    // Granted: every key, on its own shard, on a quorum of the clusters.
    let lease = mgr.acquire_many(&names, ttl, &no_wait()).unwrap();
    for n in &names {
        assert!(holding_resource(&cs, lease.token(), n) >= 2, "{n}");
    }
    assert!(mgr.acquire(&names[3], ttl, &no_wait()).is_err());
    lease.extend(ttl).unwrap();
    lease.unlock().unwrap();
    for n in &names {
        assert!(holding_resource(&cs, lease.token(), n) <= 1, "{n}");
    }

    // All or none on each cluster: one resource held elsewhere refuses the set, and the slots
    // that did grant are taken back.
    let blocker = mgr.acquire(&names[4], ttl, &no_wait()).unwrap();
    let err = mgr.acquire_many(&names, ttl, &no_wait()).unwrap_err();
    assert!(matches!(err, redlock::Error::NotAcquired(_)), "{err}");
    let others: Vec<&String> = names.iter().filter(|n| **n != names[4]).collect();
    let freed = support::eventually(Duration::from_secs(10), || {
        (others.iter()).all(|n| holding_resource(&cs, "", n) == 0)
    });
    assert!(freed, "a cluster kept a part of a refused set");
    blocker.unlock().unwrap();

    // Opposite orders, both waiting: each caller gets the set in turn, never both at once,
    // and neither waits forever for the other's part.
    let inside = std::sync::Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = [false, true]
        .into_iter()
        .map(|reversed| {
            let (mgr, inside) = (mgr.clone(), inside.clone());
            let mut set: Vec<String> = (0..4).map(|i| format!("multi-{i}")).collect();
            if reversed {
                set.reverse();
            }
            std::thread::spawn(move || {
                let wait = LockOptions::new().wait(Wait::For(Duration::from_secs(60)));
                for _ in 0..10 {
                    let l = mgr
                        .acquire_many(&set, Duration::from_secs(10), &wait)
                        .unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    std::thread::sleep(Duration::from_millis(5));
                    inside.store(false, Ordering::SeqCst);
                    l.unlock().unwrap();
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }

    // Renewed across slots: one renewal command per slot, the lease kept alive past its TTL.
    // (2 s: a renewal late by a second on a busy machine is not a loss, and the acquisition's
    // bound, a tenth of the TTL, is not a few dozen milliseconds.)
    let short = Duration::from_secs(2);
    let renewed = LockOptions::new()
        .wait(Wait::No)
        .auto_renew(redlock::RenewOptions::new());
    let lease = mgr.acquire_many(&names, short, &renewed).unwrap();
    let kept = support::eventually(Duration::from_secs(60), || {
        mgr.renewal_stats().renewed >= 3 || lease.is_lost()
    });
    assert!(kept && !lease.is_lost(), "{:?}", lease.lost_reason());
    for n in &names {
        assert!(holding_resource(&cs, lease.token(), n) >= 2, "{n}");
    }
    lease.unlock().unwrap();
}

#[test]
fn one_cluster_through_two_urls_never_counts_twice() {
    use redlock::{Error, NodeOutcome};
    use std::time::Duration;
    let cs = clusters(2, 2);
    // Cluster A twice (different seeds), then B: A would be 2 votes of 3.
    let a = &cs[0];
    let seed = |s: &support::RedisServer| format!("redis+cluster://127.0.0.1:{}", s.port);
    let urls = vec![
        seed(&a.servers[0]),
        seed(&a.servers[1]),
        urls(&cs[1..])[0].clone(),
    ];
    let mgr = redlock::Redlock::new(support::config(urls)).unwrap();
    let lease = mgr.try_lock("dup", Duration::from_secs(10)).unwrap();
    let second = lease.acquisition().nodes[1].outcome.clone();
    assert!(
        matches!(
            second,
            NodeOutcome::Duplicate { of: 0 } | NodeOutcome::Pending
        ),
        "{second:?}"
    );
    // The key vanishes on B: A alone must not keep the holder holding.
    let b = owner(&cs[1], lease.key());
    redis::cmd("DEL")
        .arg(lease.key())
        .exec(&mut b.client())
        .unwrap();
    match lease.extend(Duration::from_secs(10)) {
        Err(Error::NotHeld(r)) | Err(Error::Unavailable(r)) => {
            assert!(r.successes <= 1, "{r}");
            assert!(r.to_string().contains("the same server as node 0"), "{r}");
        }
        other => panic!("extended with one cluster counted twice: {other:?}"),
    }
}

#[test]
fn clusters_that_speak_only_tls_are_nodes_over_rediss_cluster() {
    use std::time::Duration;
    let pki = support::tls::Pki::new();
    let serve = pki.serve();
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let serve = serve.clone();
            std::thread::spawn(move || RedisCluster::start_tls(2, &serve))
        })
        .collect();
    let cs: Vec<RedisCluster> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let urls: Vec<String> = (cs.iter())
        .map(|c| format!("rediss+cluster://127.0.0.1:{}", c.servers[0].port))
        .collect();
    let mgr = redlock::Redlock::new(support::config(urls).tls(pki.options())).unwrap();
    // Keys on both shards of each cluster: the slot map names the shards' TLS ports.
    let mut shards = std::collections::HashSet::new();
    for i in 0..12 {
        let lease = mgr
            .try_lock(format!("tls-{i}"), Duration::from_secs(10))
            .unwrap();
        let key = lease.key().to_vec();
        let held = holding(&cs, lease.token(), |c| owner(c, &key).get(&key));
        assert!(held >= 2, "{held}");
        shards.insert(owner(&cs[0], &key).port);
        lease.unlock().unwrap();
    }
    assert_eq!(shards.len(), 2, "{shards:?}");
}

/// The server of `c` that owns `key`'s slot now, and another primary.
fn owner_and_other<'a>(
    c: &'a RedisCluster,
    key: &[u8],
) -> (&'a support::RedisServer, &'a support::RedisServer) {
    let from = owner(c, key);
    let to = c.servers.iter().find(|s| s.port != from.port).unwrap();
    (from, to)
}

#[test]
fn moved_and_ask_are_followed_within_the_step() {
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    let ttl = std::time::Duration::from_secs(10);
    // The manager learns each cluster's slot map.
    mgr.try_lock("warm-up", ttl).unwrap().unlock().unwrap();

    // MOVED: the slot of "moved" changes owner behind the manager's back (its marker moves
    // with it, and vouches on the new owner: no quarantine).
    let key = b"redlock:moved";
    let mut new_owners = Vec::new();
    for c in &cs {
        // With its keys: the slot's restart-quarantine marker among them.
        let (from, to) = owner_and_other(c, key);
        let m = c.migrate(key_slot(key), from, to);
        m.move_keys();
        m.finish();
        new_owners.push(to.port);
    }
    let lease = mgr.try_lock("moved", ttl).unwrap();
    let token = lease.token().to_string();
    let on_new_owner = |c: &RedisCluster| {
        let i = cs.iter().position(|x| std::ptr::eq(x, c)).unwrap();
        c.at(new_owners[i]).get(key)
    };
    assert!(holding(&cs, &token, on_new_owner) >= 2);
    lease.unlock().unwrap();
    assert!(holding(&cs, &token, on_new_owner) <= 1);
    // A release whose redirect came after the step was decided is written again by the next
    // step (any round): then no cluster holds the key.
    mgr.holders("moved").unwrap();
    assert!(support::eventually(
        std::time::Duration::from_secs(5),
        || { holding(&cs, &token, on_new_owner) == 0 }
    ));

    // ASK: the slot of "asked" is being migrated; the key is not on the source, so the
    // target serves it after ASKING (the acquisition pipeline and the release script alike).
    // While the slot's restart-quarantine marker is still on the source, a grant on the
    // target does not count, and says why; once the slot's keys (the marker among them) have
    // moved, it does.
    let key = b"redlock:asked";
    let mut targets = Vec::new();
    let mut moves = Vec::new();
    for c in &cs {
        let (from, to) = owner_and_other(c, key);
        moves.push(c.migrate(key_slot(key), from, to));
        targets.push(to.port);
    }
    let err = mgr.try_lock("asked", ttl).unwrap_err();
    assert!(err.to_string().contains("the slot is moving"), "{err}");
    for m in &moves {
        m.move_keys();
    }
    // The refused attempt's grants on the targets are taken back by the steps that follow
    // (its releases met ASK with nobody waiting): bounded retries.
    let lease = (0..50)
        .find_map(|_| {
            let l = mgr.try_lock("asked", ttl).ok();
            if l.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            l
        })
        .expect("granted once the slot's marker is on the target");
    let token = lease.token().to_string();
    let on_target = |c: &RedisCluster| {
        let i = cs.iter().position(|x| std::ptr::eq(x, c)).unwrap();
        c.get_asking(c.at(targets[i]), key)
    };
    assert!(holding(&cs, &token, on_target) >= 2);
    assert!(mgr.try_lock("asked", ttl).is_err(), "held, through ASK too");
    lease.unlock().unwrap();
    assert!(holding(&cs, &token, on_target) <= 1);

    let m = mgr.metrics();
    let (moved, asked): (u64, u64) = m
        .nodes
        .iter()
        .fold((0, 0), |(a, b), n| (a + n.moved, b + n.asked));
    // At least a quorum of clusters followed each (the lock, then the release).
    assert!(moved >= 2, "{moved} MOVED followed");
    assert!(asked >= 2, "{asked} ASK followed");
}

#[test]
fn renewal_and_waiting_work_across_shards() {
    use std::time::{Duration, Instant};
    let cs = clusters(3, 2);
    let mgr = manager(&cs);
    // 2 s: a renewal late by a second on a busy machine is not a loss (600 ms left under
    // 400 ms), and each acquisition's bound, a tenth of the TTL, is 200 ms, not 60.
    let ttl = Duration::from_secs(2);
    // Leases in different slots: the renewal thread renews them one slot per command.
    let leases: Vec<_> = (0..6)
        .map(|i| {
            let l = mgr.try_lock(format!("renewed-{i}"), ttl).unwrap();
            l.auto_renew(redlock::RenewOptions::new()).unwrap();
            l
        })
        .collect();
    let slots: std::collections::HashSet<u16> = leases.iter().map(|l| key_slot(l.key())).collect();
    assert!(slots.len() > 1);
    // Five TTLs, and at least three renewals of each lease, however slow the machine.
    let start = Instant::now();
    while start.elapsed() < ttl * 5 || mgr.renewal_stats().renewed < 18 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "renewals stalled"
        );
        for l in &leases {
            assert!(!l.is_lost(), "lost: {:?}", l.lost_reason());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A waiter on one of them is woken by its release (notifications cross the cluster). It
    // waits by deadline, not by retry count: however late the release comes, it is granted.
    let waiter = {
        let mgr = mgr.clone();
        std::thread::spawn(move || {
            mgr.lock_timeout("renewed-0", Duration::from_secs(5), Duration::from_secs(60))
        })
    };
    std::thread::sleep(Duration::from_millis(100));
    let mut leases = leases.into_iter();
    leases.next().unwrap().unlock().unwrap();
    let got = waiter.join().unwrap().unwrap();
    got.unlock().unwrap();
    for l in leases {
        l.unlock().unwrap();
    }
}

#[test]
fn resharding_under_load_grants_no_lock_twice() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    const RESOURCES: [&str; 4] = ["hot-0", "hot-1", "hot-2", "hot-3"];
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    type Holds = Vec<Vec<(Instant, Instant)>>;
    let held: Arc<Mutex<Holds>> = Arc::new(Mutex::new(vec![Vec::new(); RESOURCES.len()]));
    let slowest = Arc::new(Mutex::new(Duration::ZERO));
    // Per resource, the last refusal, for the message if one is never granted.
    let refused: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(vec![String::new(); 4]));
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let (mgr, stop, ops, held, slowest) = (
                mgr.clone(),
                Arc::clone(&stop),
                Arc::clone(&ops),
                Arc::clone(&held),
                Arc::clone(&slowest),
            );
            let refused = Arc::clone(&refused);
            std::thread::spawn(move || {
                // Bounded: stops when told, or after 20,000 steps.
                for n in 0..20_000usize {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = (t + n) % RESOURCES.len();
                    let began = Instant::now();
                    let got = mgr.try_lock(RESOURCES[r], Duration::from_secs(5));
                    let took = began.elapsed();
                    let mut s = slowest.lock().unwrap();
                    *s = (*s).max(took);
                    drop(s);
                    if let Err(e) = &got {
                        refused.lock().unwrap()[r] = e.to_string();
                    }
                    if let Ok(lease) = got {
                        let from = Instant::now();
                        std::thread::sleep(Duration::from_micros(500));
                        held.lock().unwrap()[r].push((from, Instant::now()));
                        let began = Instant::now();
                        let _ = lease.unlock();
                        let mut s = slowest.lock().unwrap();
                        *s = (*s).max(began.elapsed());
                    }
                    ops.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Lets the workers take `n` more steps (bounded in time: they may be starved).
    let progress = |n: u64| {
        let target = ops.load(Ordering::Relaxed) + n;
        let until = Instant::now() + Duration::from_secs(30);
        while ops.load(Ordering::Relaxed) < target && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    progress(50);
    // Every resource granted once before the slots move (bounded): on a loaded machine a
    // fresh manager's first steps (meeting every shard) may time out, and the moves below
    // wait for only a few steps each.
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until && held.lock().unwrap().iter().any(Vec::is_empty) {
        progress(8);
    }
    // Each hot resource's slot moves to another primary in every cluster, with its keys,
    // while the workers lock and unlock; then once more, back to where it was.
    for _round in 0..2 {
        for res in RESOURCES {
            let key = format!("redlock:{res}");
            let slot = key_slot(key.as_bytes());
            let moves: Vec<_> = cs
                .iter()
                .map(|c| {
                    let (from, to) = owner_and_other(c, key.as_bytes());
                    c.migrate(slot, from, to)
                })
                .collect();
            progress(20); // ASK: the slot is migrating, its key still on the source
            for m in &moves {
                m.move_keys();
            }
            progress(20); // ASK: the key is on the target now
            for m in moves {
                m.finish();
            }
            progress(20); // MOVED: the manager's map is stale
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let held = held.lock().unwrap();
    for (r, intervals) in held.iter().enumerate() {
        assert!(
            !intervals.is_empty(),
            "{} was never granted; last refusal: {}",
            RESOURCES[r],
            refused.lock().unwrap()[r]
        );
        assert_eq!(
            support::most_overlapping(intervals),
            1,
            "{} was held twice at once",
            RESOURCES[r]
        );
    }
    let m = mgr.metrics();
    let (moved, asked) = m
        .nodes
        .iter()
        .fold((0, 0), |(a, b), n| (a + n.moved, b + n.asked));
    let slowest = *slowest.lock().unwrap();
    eprintln!(
        "resharding under load: {} steps, {} grants, {moved} MOVED and {asked} ASK followed, \
         slowest step {slowest:?}",
        ops.load(Ordering::Relaxed),
        held.iter().map(Vec::len).sum::<usize>()
    );
    assert!(moved > 0 && asked > 0, "MOVED {moved}, ASK {asked}");
    // Every step returns within its bound (the acquire bound plus a connect, for a new
    // primary's link): far under this, unless a redirect were chased without end.
    assert!(slowest < Duration::from_secs(10), "a step took {slowest:?}");
}

#[test]
fn the_scan_reads_every_shard_and_names_it() {
    use std::time::Duration;
    let cs = clusters(3, 3);
    let mgr = manager(&cs);
    let ttl = Duration::from_secs(30);
    let leases: Vec<_> = (0..20)
        .map(|i| mgr.try_lock(format!("scan-{i}"), ttl).unwrap())
        .collect();
    // A step returns at quorum: wait (bounded) until every cluster holds every key.
    let all_held = support::eventually(Duration::from_secs(10), || {
        leases
            .iter()
            .all(|l| cs.iter().all(|c| owner(c, l.key()).get(l.key()).is_some()))
    });
    assert!(all_held);
    let scan = mgr.scan(redlock::KeyKind::Lock, "scan-").unwrap();
    assert!(scan.failed.is_empty(), "{:?}", scan.failed);
    assert_eq!(scan.keys.len(), 3 * 20);
    for k in &scan.keys {
        let at = owner(&cs[k.node], &k.key);
        assert_eq!(
            k.shard.as_deref(),
            Some(format!("127.0.0.1:{}", at.port).as_str())
        );
        assert!(k.value.is_some() && k.ttl.is_some());
    }
    let shards: std::collections::HashSet<_> = scan.keys.iter().map(|k| &k.shard).collect();
    assert_eq!(
        shards.len(),
        9,
        "every shard of every cluster holds some of the keys"
    );
    for l in leases {
        l.unlock().unwrap();
    }
}

#[test]
fn redlock_inspect_lists_a_clusters_keys_by_shard() {
    // Built (if need be) before the lease is taken, not while it runs out.
    let cli = support::redlock_cli();
    let cs = clusters(3, 2);
    let mgr = manager(&cs);
    let lease = mgr
        .try_lock("orders:7", std::time::Duration::from_secs(30))
        .unwrap();
    let key = lease.key().to_vec();
    assert!(support::eventually(
        std::time::Duration::from_secs(10),
        || { cs.iter().all(|c| owner(c, &key).get(&key).is_some()) }
    ));
    // The clusters' seeds in one --nodes list (a seed without a scheme follows its cluster).
    let nodes = cs
        .iter()
        .map(|c| {
            format!(
                "redis+cluster://127.0.0.1:{},127.0.0.1:{}",
                c.servers[0].port, c.servers[1].port
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let out = std::process::Command::new(cli)
        .args(["inspect", "--no-quarantine", "--nodes", &nodes])
        .env_remove("REDLOCK_NODES")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("on 3 node(s)"), "{stdout}");
    for c in &cs {
        let shard = format!("(shard 127.0.0.1:{})", owner(c, &key).port);
        assert!(
            stdout.contains(&shard),
            "{shard} in {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    lease.unlock().unwrap();
}

/// Until its outcome on node 0 is known (a step returns at quorum, node 0 may be pending):
/// locks `resource` and unlocks it; node 0's outcome.
fn outcome_on_first(mgr: &redlock::Redlock, resource: &str) -> redlock::NodeOutcome {
    let ttl = std::time::Duration::from_secs(5);
    for _ in 0..50 {
        let lease = mgr.try_lock(resource, ttl).expect("two clusters grant");
        let o = lease.acquisition().nodes[0].outcome.clone();
        lease.unlock().unwrap();
        if o != redlock::NodeOutcome::Pending {
            return o;
        }
    }
    panic!("node 0 stayed pending");
}

/// A manager over `cs`, the port of the shard of cluster 0 that owns `victim`'s key, and a
/// resource whose key lives on another shard of cluster 0; both granted by cluster 0 first.
fn victim_and_other(cs: &[RedisCluster], victim: &str) -> (redlock::Redlock, u16, String) {
    let port = owner(&cs[0], format!("redlock:{victim}").as_bytes()).port;
    let other = (0..1000)
        .map(|i| format!("other-{i}"))
        .find(|r| owner(&cs[0], format!("redlock:{r}").as_bytes()).port != port)
        .unwrap();
    let mgr = manager(cs);
    for r in [victim, other.as_str()] {
        assert_eq!(outcome_on_first(&mgr, r), redlock::NodeOutcome::Success);
    }
    (mgr, port, other)
}

#[test]
fn a_restarted_shard_is_quarantined_and_the_others_are_not() {
    let mut cs = clusters(3, 3);
    let (mgr, port, other) = victim_and_other(&cs, "victim");

    // The shard primary restarts without its data (no persistence); it keeps its slots.
    let server = cs[0].servers.iter_mut().find(|s| s.port == port).unwrap();
    server.restart();
    let c0 = &cs[0];
    assert!(support::eventually(
        std::time::Duration::from_secs(30),
        || {
            c0.servers.iter().all(|s| {
                redis::cmd("CLUSTER")
                    .arg("INFO")
                    .query::<String>(&mut s.client())
                    .is_ok_and(|i| i.contains("cluster_state:ok"))
            })
        }
    ));
    match outcome_on_first(&mgr, "victim") {
        redlock::NodeOutcome::Quarantined { reason, .. } => assert!(
            matches!(
                reason,
                redlock::QuarantineReason::RestartSeen | redlock::QuarantineReason::NoMarker
            ),
            "{reason:?}"
        ),
        o => panic!("the restarted shard's key: {o:?}"),
    }
    // The cluster's other shards still count.
    assert_eq!(
        outcome_on_first(&mgr, &other),
        redlock::NodeOutcome::Success
    );
}

#[test]
fn a_shard_failed_over_to_its_replica_is_quarantined_alone() {
    use std::time::Duration;
    // Three clusters of three primaries with a replica each (the first has them; the other
    // two only need to grant).
    let with_replicas = std::thread::spawn(|| RedisCluster::start(3, 1));
    let mut cs = clusters(2, 3);
    cs.insert(0, with_replicas.join().unwrap());
    let (mgr, port, other) = victim_and_other(&cs, "promoted");

    // The shard's replica takes over (CLUSTER FAILOVER TAKEOVER): a new replication history
    // on a server whose markers were replicated from the old primary.
    let c0 = &cs[0];
    let primary_id = c0.id(c0.at(port));
    let replica = c0
        .servers
        .iter()
        .find(|s| {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut s.client())
                .unwrap();
            info.contains("role:slave") && {
                let nodes: String = redis::cmd("CLUSTER")
                    .arg("NODES")
                    .query(&mut s.client())
                    .unwrap();
                nodes
                    .lines()
                    .any(|l| l.contains("myself") && l.contains(&primary_id))
            }
        })
        .expect("the shard's replica");
    // The replica has the primary's keyspace, markers included (replication caught up).
    let dbsize = |s: &support::RedisServer| -> i64 {
        redis::cmd("DBSIZE").query(&mut s.client()).unwrap_or(-1)
    };
    assert!(support::eventually(Duration::from_secs(30), || {
        dbsize(replica) == dbsize(c0.at(port)) && dbsize(replica) > 0
    }));
    let _: () = redis::cmd("CLUSTER")
        .arg("FAILOVER")
        .arg("TAKEOVER")
        .query(&mut replica.client())
        .unwrap();
    let new_primary = replica.port;
    assert!(support::eventually(Duration::from_secs(30), || {
        c0.slot_ranges().iter().any(|r| r.2 == new_primary)
    }));
    // Until its keys' owner is the promoted replica as the manager sees it, node 0 may also
    // fail (READONLY, MOVED): look for the quarantine, bounded.
    let quarantined = (0..100).any(|_| {
        let r = mgr.try_lock("promoted", Duration::from_secs(5));
        let o = r.as_ref().map_or_else(
            |e| e.report().map(|rep| rep.nodes[0].outcome.clone()),
            |l| Some(l.acquisition().nodes[0].outcome.clone()),
        );
        if let Ok(l) = r {
            l.unlock().unwrap();
        }
        if let Some(redlock::NodeOutcome::Quarantined { reason, .. }) = o {
            // A history it continued (Promoted), or the old primary's marker (StaleMarker).
            assert!(
                matches!(
                    reason,
                    redlock::QuarantineReason::Promoted | redlock::QuarantineReason::StaleMarker
                ),
                "{reason:?}"
            );
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
        false
    });
    assert!(quarantined, "the promoted shard is quarantined");
    // The cluster's other shards still count.
    assert_eq!(
        outcome_on_first(&mgr, &other),
        redlock::NodeOutcome::Success
    );
}

/// A cluster whose nodes announce a host name (`cluster-preferred-endpoint-type hostname`):
/// its slot map, its redirects and the URL name `localhost`, which the manager resolves on a
/// look-up thread, by each round's deadline (src/config/lookup.rs). Every shard is reached
/// through its name, and the scan names the shards as the cluster does.
#[test]
fn a_cluster_that_announces_host_names_is_reached_through_them() {
    use std::net::ToSocketAddrs;
    use std::time::Duration;
    // The servers listen on 127.0.0.1: the name must lead there.
    let first = ("localhost", 1).to_socket_addrs().unwrap().next().unwrap();
    assert_eq!(
        first.ip().to_string(),
        "127.0.0.1",
        "this test needs localhost to be 127.0.0.1"
    );
    let named = [
        "--cluster-announce-hostname",
        "localhost",
        "--cluster-preferred-endpoint-type",
        "hostname",
    ];
    let c = RedisCluster::start_with(3, 0, &named);
    let shards: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SHARDS")
        .query(&mut c.servers[0].client())
        .unwrap();
    let text = format!("{shards:?}");
    assert!(
        text.contains("localhost"),
        "the cluster announces no name: {text}"
    );
    let url = format!("redis+cluster://localhost:{}", c.servers[0].port);
    let mgr = redlock::Redlock::new(support::config(vec![url])).unwrap();
    let ttl = Duration::from_secs(30);
    let leases: Vec<_> = (0..20)
        .map(|i| mgr.try_lock(format!("named-{i}"), ttl).unwrap())
        .collect();
    for l in &leases {
        let v = owner(&c, l.key()).get(l.key());
        assert!(v.is_some_and(|v| v.starts_with(l.token().as_bytes())));
    }
    let scan = mgr.scan(redlock::KeyKind::Lock, "named-").unwrap();
    assert!(scan.failed.is_empty(), "{:?}", scan.failed);
    assert_eq!(scan.keys.len(), 20);
    for k in &scan.keys {
        let at = owner(&c, &k.key);
        let want = format!("localhost:{}", at.port);
        assert_eq!(k.shard.as_deref(), Some(want.as_str()));
    }
    let used: std::collections::HashSet<_> = scan.keys.iter().map(|k| &k.shard).collect();
    assert_eq!(used.len(), 3, "every shard holds some of the keys");
    for l in leases {
        let key = l.key().to_vec();
        l.unlock().unwrap();
        // One node, so its reply decided the release: the key is gone.
        assert!(owner(&c, &key).get(&key).is_none());
    }
}

#[test]
fn leader_election_works_on_cluster_nodes() {
    use redlock::{LockOptions, Wait};
    use std::time::Duration;
    let cs = clusters(3, 2);
    let mgr = manager(&cs);
    let e = mgr.election("cl-sched");
    let ttl = Duration::from_secs(20);
    let within = LockOptions::new().wait(Wait::For(Duration::from_secs(15)));
    assert_eq!(e.leader().unwrap(), None, "no leader before any campaign");
    let mut observer = e.observe();
    let first = e.campaign("a:1", ttl, &within).unwrap();
    // The key, its fencing counter and the leader record share one slot, and a quorum of
    // the clusters holds the leader there (the record names its term).
    let key = e.key().unwrap().to_vec();
    let record = companion_key(redlock::LEADER_PREFIX, &key).unwrap();
    let counter = companion_key(redlock::FENCE_PREFIX, &key).unwrap();
    assert_eq!(key_slot(&record), key_slot(&key));
    assert_eq!(key_slot(&counter), key_slot(&key));
    let term_on = |c: &RedisCluster| -> Option<Vec<u8>> {
        let mut conn = owner(c, &record).client();
        redis::cmd("HGET")
            .arg(&record)
            .arg("term")
            .query::<Option<Vec<u8>>>(&mut conn)
            .unwrap()
    };
    let term = first.term().to_string();
    assert!(holding(&cs, &term, term_on) >= 2, "the record on a quorum");
    assert!(
        holding(&cs, "", |c| owner(c, &key).get(&key)) >= 2,
        "the key on a quorum"
    );
    // The observer is told, through the record's channel on the clusters.
    let seen = observer.next_within(Duration::from_secs(15)).unwrap();
    assert_eq!(
        seen.map(|l| (l.term, l.value)),
        Some((first.term(), b"a:1".to_vec()))
    );
    first.proclaim("a:2").unwrap();
    assert_eq!(e.leader().unwrap().unwrap().value, b"a:2");
    // A second candidate waits, and takes over once the first resigns.
    let second = {
        let (mgr, within) = (mgr.clone(), within.clone());
        std::thread::spawn(move || mgr.election("cl-sched").campaign("b:1", ttl, &within))
    };
    first.resign().unwrap();
    let second = second.join().unwrap().unwrap();
    assert!(second.term() > first.term());
    let seen = observer.next_within(Duration::from_secs(15)).unwrap();
    assert_eq!(
        seen.map(|l| (l.term, l.value)),
        Some((second.term(), b"b:1".to_vec()))
    );
    second.resign().unwrap();
    assert_eq!(e.leader().unwrap(), None);
}
