//! Who holds a resource (`Redlock::holders`), holder labels, and the key prefix (the empty one
//! included, for sharing locks with redsync and node-redlock during a migration), against real
//! `redis-server` processes started by the tests.

mod support;

use std::thread;
use std::time::Duration;

use redlock::{Config, Error, HolderKind, LockOptions, NodeHold, Redlock};
use support::{Cluster, eventually};

const SETTLE: Duration = Duration::from_secs(3);

fn manager(cfg: Config) -> Redlock {
    Redlock::new(
        cfg.retry_delay(Duration::from_millis(20))
            .node_timeout(Duration::from_millis(500)),
    )
    .unwrap()
}

#[test]
fn a_labelled_plain_lock_is_reported_with_its_label_age_and_ttl_then_free() {
    let cluster = Cluster::start(3);
    let mgr = manager(support::config(cluster.urls()).label("billing-7:4242"));
    let watcher = manager(support::config(cluster.urls()));
    let free = watcher.holders("invoices").unwrap();
    assert!(!free.is_locked());
    assert_eq!(free.held_on(), 0);
    assert!(free.nodes.iter().all(|n| *n == NodeHold::Free));

    let lease = mgr.try_lock("invoices", Duration::from_secs(10)).unwrap();
    assert!(
        lease.value().ends_with(" billing-7:4242"),
        "{}",
        lease.value()
    );
    assert!(eventually(SETTLE, || cluster
        .holding(lease.key(), lease.value().as_bytes())
        == 3));
    thread::sleep(Duration::from_millis(300));
    let seen = watcher.holders("invoices").unwrap();
    assert_eq!(seen.key, b"redlock:invoices");
    assert_eq!(seen.quorum, 2);
    assert!(seen.is_locked());
    let h = seen.holder().unwrap();
    assert_eq!(h.kind, HolderKind::Lock);
    assert_eq!(h.id, lease.value().as_bytes());
    assert_eq!(h.label.as_deref(), Some("billing-7:4242"));
    // Held for at least the 300 ms slept (the same machine's clock on both sides here).
    let held = h.held_for.unwrap();
    assert!(
        held >= Duration::from_millis(250) && held < Duration::from_secs(60),
        "{held:?}"
    );
    let ttl = h.ttl.unwrap();
    assert!(
        ttl <= Duration::from_secs(10) && ttl > Duration::from_secs(1),
        "{ttl:?}"
    );
    for n in &seen.nodes {
        let NodeHold::Held(on) = n else {
            panic!("not held on every node: {n:?}")
        };
        assert_eq!(on.id, h.id);
    }

    lease.unlock().unwrap();
    assert!(eventually(SETTLE, || {
        let after = watcher.holders("invoices").unwrap();
        !after.is_locked() && after.held_on() == 0
    }));
}

#[test]
fn a_reentrant_lock_is_reported_by_its_owner_with_the_tenures_start() {
    let cluster = Cluster::start(3);
    let mgr = manager(support::config(cluster.urls()));
    let opts = LockOptions::new().owner("job-17");
    let first = mgr
        .acquire("report", Duration::from_secs(10), &opts)
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    // A re-entry does not restart the tenure: held_for counts from the first hold.
    let second = mgr
        .acquire("report", Duration::from_secs(10), &opts)
        .unwrap();
    let h = mgr.holders("report").unwrap().holder().unwrap();
    assert_eq!(h.kind, HolderKind::Reentrant);
    assert_eq!(h.id, b"job-17");
    assert_eq!(h.label.as_deref(), Some("job-17"));
    assert!(h.held_for.unwrap() >= Duration::from_millis(250), "{h:?}");
    second.unlock().unwrap();
    first.unlock().unwrap();
    assert!(eventually(SETTLE, || !mgr
        .holders("report")
        .unwrap()
        .is_locked()));
}

#[test]
fn a_dead_node_is_reported_failed_and_the_quorum_still_names_the_holder() {
    let mut cluster = Cluster::start(3);
    let mgr = manager(support::config(cluster.urls()).label("a"));
    let lease = mgr.try_lock("r", Duration::from_secs(10)).unwrap();
    assert!(eventually(SETTLE, || cluster
        .holding(lease.key(), lease.value().as_bytes())
        == 3));
    cluster.servers[2].kill();
    let seen = mgr.holders("r").unwrap();
    assert_eq!(seen.failed(), 1);
    assert!(matches!(seen.nodes[2], NodeHold::Failed(_)), "{seen:?}");
    assert_eq!(seen.holder().unwrap().label.as_deref(), Some("a"));
    cluster.servers[1].kill();
    // One node of three: no quorum agrees on anything, so not reported as locked.
    let seen = mgr.holders("r").unwrap();
    assert!(!seen.is_locked());
    assert_eq!(seen.held_on(), 1);
}

#[test]
fn bad_labels_prefixes_and_resources_are_invalid_input() {
    let urls = ["127.0.0.1:1"];
    for cfg in [
        Config::new(urls).label("a\nb"),
        Config::new(urls).label("x".repeat(redlock::MAX_LABEL_LEN + 1)),
        Config::new(urls).key_prefix(vec![b'p'; redlock::MAX_KEY_PREFIX_LEN + 1]),
    ] {
        assert!(matches!(Redlock::new(cfg), Err(Error::InvalidInput(_))));
    }
    // Allowed: the longest label and prefix, an empty label (no label).
    Redlock::new(Config::new(urls).label("x".repeat(redlock::MAX_LABEL_LEN))).unwrap();
    Redlock::new(Config::new(urls).key_prefix(vec![b'p'; redlock::MAX_KEY_PREFIX_LEN])).unwrap();
    assert_eq!(Config::new(urls).label("").label_str(), None);
    let bare = Redlock::new(Config::new(urls).key_prefix("")).unwrap();
    for resource in [&b"redlock-fence:x"[..], b"redlock-marker", b""] {
        let e = bare.try_lock(resource, Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)), "{e:?}");
        assert!(matches!(
            bare.holders(resource),
            Err(Error::InvalidInput(_))
        ));
    }
}

#[test]
fn a_key_prefix_names_the_keys_and_separates_namespaces() {
    let cluster = Cluster::start(3);
    let app = manager(support::config(cluster.urls()).key_prefix("app:locks:"));
    let default = manager(support::config(cluster.urls()));
    let a = app.try_lock("r", Duration::from_secs(10)).unwrap();
    assert_eq!(a.key(), b"app:locks:r");
    assert!(eventually(SETTLE, || cluster
        .holding(b"app:locks:r", a.value().as_bytes())
        == 3));
    // Another prefix is another namespace: the same resource name is another lock.
    let b = default.try_lock("r", Duration::from_secs(10)).unwrap();
    assert_eq!(b.key(), b"redlock:r");
    assert!(app.try_lock("r", Duration::from_secs(1)).is_err());
    let scan = app.scan(redlock::KeyKind::Lock, "").unwrap();
    assert!(
        scan.keys.iter().all(|k| k.key == b"app:locks:r"),
        "{scan:?}"
    );
    assert_eq!(scan.keys.len(), 3);
    a.unlock().unwrap();
    b.unlock().unwrap();
}

/// node-redlock (v5) and redsync name a lock's key after the resource itself, store a random
/// value with `SET … PX` (after checking that no key exists, or with `NX`), and release with a
/// compare-and-delete. These scripts write and delete keys exactly that way.
const PEER_ACQUIRE: &str = "for _, k in ipairs(KEYS) do \
if redis.call('exists', k) == 1 then return 0 end end \
for _, k in ipairs(KEYS) do redis.call('set', k, ARGV[1], 'PX', ARGV[2]) end \
return #KEYS";
const PEER_RELEASE: &str = "local n = 0 for _, k in ipairs(KEYS) do \
if redis.call('get', k) == ARGV[1] then redis.pcall('del', k) n = n + 1 end end return n";

fn peer(cluster: &Cluster, script: &str, key: &str, value: &str, ttl_ms: u64) -> usize {
    cluster
        .servers
        .iter()
        .map(|s| {
            let n: i64 = redis::cmd("EVAL")
                .arg(script)
                .arg(1)
                .arg(key)
                .arg(value)
                .arg(ttl_ms)
                .query(&mut s.client())
                .unwrap();
            n as usize
        })
        .sum()
}

#[test]
fn with_the_empty_prefix_locks_exclude_node_redlocks_and_redsyncs_on_the_same_key() {
    let cluster = Cluster::start(3);
    let mgr = manager(
        support::config(cluster.urls())
            .key_prefix("")
            .label("new-svc"),
    );
    let ttl = Duration::from_secs(10);

    // The old service holds "orders:9" the node-redlock way: we are refused, and see a
    // holder we do not own.
    let theirs = "8f14e45fceea167a5a36dedd4bea2543";
    assert_eq!(peer(&cluster, PEER_ACQUIRE, "orders:9", theirs, 10_000), 3);
    let e = mgr.try_lock("orders:9", ttl).unwrap_err();
    assert!(matches!(e, Error::NotAcquired(_)), "{e:?}");
    let h = mgr.holders("orders:9").unwrap().holder().unwrap();
    assert_eq!(h.kind, HolderKind::Other);
    assert_eq!(h.id, theirs.as_bytes());
    // Their release frees it for us; ours never touched their key.
    assert_eq!(cluster.holding(b"orders:9", theirs.as_bytes()), 3);
    assert_eq!(peer(&cluster, PEER_RELEASE, "orders:9", theirs, 0), 3);

    // Now we hold it: their acquisition is refused, their release (of their own value)
    // deletes nothing of ours, and our release frees it for them.
    let lease = mgr.try_lock("orders:9", ttl).unwrap();
    assert_eq!(lease.key(), b"orders:9");
    assert!(eventually(SETTLE, || cluster
        .holding(b"orders:9", lease.value().as_bytes())
        == 3));
    assert_eq!(peer(&cluster, PEER_ACQUIRE, "orders:9", theirs, 10_000), 0);
    assert_eq!(peer(&cluster, PEER_RELEASE, "orders:9", theirs, 0), 0);
    assert_eq!(cluster.holding(b"orders:9", lease.value().as_bytes()), 3);
    // redsync's acquisition is a plain SET NX PX: refused too.
    for s in &cluster.servers {
        let set: Option<String> = redis::cmd("SET")
            .arg("orders:9")
            .arg("cmVkc3luYw==")
            .arg("NX")
            .arg("PX")
            .arg(10_000)
            .query(&mut s.client())
            .unwrap();
        assert_eq!(set, None);
    }
    lease.unlock().unwrap();
    assert!(eventually(SETTLE, || cluster.present(b"orders:9") == 0));
    assert_eq!(peer(&cluster, PEER_ACQUIRE, "orders:9", theirs, 10_000), 3);
}
