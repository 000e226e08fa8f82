//! Reentrant locks (an owner id) against real redis-server processes: re-entry 100 deep,
//! other owners refused from other threads and processes, a restarted process reclaiming its
//! owner's lock, and the lost-reply hazard that breaks a hold count.

mod support;

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, Lease, LockOptions, Redlock, RenewOptions, Wait, scripts};
use support::{Cluster, RedisServer, eventually};

const KEY: &[u8] = b"redlock:job";

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(
        support::config(urls)
            .retry_delay(Duration::from_millis(5))
            // Most steps here take no retry (`Wait::No`) and must be granted: a healthy node's
            // answer must come within this, however busy the machine.
            .node_timeout(Duration::from_secs(1))
            .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100)),
    )
    .unwrap()
}

fn owned(owner: &str) -> LockOptions {
    LockOptions::new().wait(Wait::No).owner(owner)
}

/// The hold ids of `key` on one node (empty when the key is missing).
fn holds(s: &RedisServer, key: &[u8]) -> Vec<String> {
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(key)
        .query(&mut s.client())
        .unwrap_or_default();
    let mut h: Vec<String> = fields
        .into_iter()
        .filter_map(|f| f.strip_prefix("hold:").map(str::to_string))
        .collect();
    h.sort();
    h
}

/// How many nodes hold `lease`'s hold on its key.
fn nodes_with_hold(c: &Cluster, lease: &Lease) -> usize {
    c.servers
        .iter()
        .filter(|s| holds(s, lease.key()).contains(&lease.token().to_string()))
        .count()
}

fn present(c: &Cluster, key: &[u8]) -> usize {
    c.servers.iter().filter(|s| s.pttl(key) != -2).count()
}

/// A small xorshift, seeded, for release orders that are random but repeatable.
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, seed as usize % (i + 1));
    }
}

#[test]
fn reentry_100_deep_holds_until_the_last_release_in_any_order() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    let other = manager(c.urls());
    let ttl = Duration::from_secs(30);
    let mut leases: Vec<Lease> = (0..100)
        .map(|i| {
            mgr.acquire("job", ttl, &owned("job-1"))
                .unwrap_or_else(|e| panic!("re-entry {i}: {e}"))
        })
        .collect();
    // Each acquisition is its own lease, with its own hold on every node.
    let mut ids: Vec<String> = leases.iter().map(|l| l.token().to_string()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100);
    assert!(eventually(Duration::from_secs(5), || {
        c.servers.iter().all(|s| holds(s, KEY) == ids)
    }));
    shuffle(&mut leases, 0x9e37_79b9_7f4a_7c15);
    let last = leases.pop().unwrap();
    for (i, lease) in leases.into_iter().enumerate() {
        lease.unlock().unwrap();
        if i % 11 == 0 {
            // Still held: another owner (another thread), and a plain lock, are refused.
            assert_eq!(present(&c, KEY), 3, "after {} releases", i + 1);
            let r = thread::scope(|s| {
                s.spawn(|| other.acquire("job", ttl, &owned("job-2")).map(|_| ()))
                    .join()
                    .unwrap()
            });
            assert!(matches!(r, Err(Error::NotAcquired(_))), "{r:?}");
            assert!(matches!(
                other.try_lock("job", ttl),
                Err(Error::NotAcquired(_))
            ));
        }
    }
    assert!(c.servers.iter().all(|s| holds(s, KEY).len() == 1));
    last.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || present(&c, KEY) == 0));
    // Now free for anyone.
    other
        .acquire("job", ttl, &owned("job-2"))
        .unwrap()
        .unlock()
        .unwrap();
}

/// Not a test of its own: a child process of the tests below. Acquires `job` with the owner in
/// REDLOCK_REENTRANT_OWNER and prints "granted <ms>" or "refused", then sleeps for
/// REDLOCK_REENTRANT_HOLD_MS (to be killed) and exits without unlocking.
#[test]
fn child_acquirer() {
    let Ok(nodes) = std::env::var("REDLOCK_REENTRANT_NODES") else {
        return;
    };
    let owner = std::env::var("REDLOCK_REENTRANT_OWNER").unwrap();
    let hold: u64 = std::env::var("REDLOCK_REENTRANT_HOLD_MS")
        .unwrap()
        .parse()
        .unwrap();
    let mgr = manager(nodes.split(',').map(str::to_string).collect());
    let t = Instant::now();
    match mgr.acquire("job", Duration::from_secs(20), &owned(&owner)) {
        Ok(lease) => {
            println!("granted {} {}", t.elapsed().as_millis(), lease.token());
            thread::sleep(Duration::from_millis(hold));
        }
        Err(e) => println!("refused {e}"),
    }
}

fn child(c: &Cluster, owner: &str, hold_ms: u64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_acquirer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("REDLOCK_REENTRANT_NODES", c.urls().join(","))
        .env("REDLOCK_REENTRANT_OWNER", owner)
        .env("REDLOCK_REENTRANT_HOLD_MS", hold_ms.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The verdict in a line of the child's output ("granted …" or "refused …"; the test
/// harness may print its own text before it on the same line).
fn verdict_in(line: &str) -> Option<String> {
    ["granted ", "refused "]
        .iter()
        .filter_map(|w| line.find(w))
        .min()
        .map(|i| line[i..].to_string())
}

/// The child's verdict.
fn verdict(out: &[u8]) -> String {
    String::from_utf8_lossy(out)
        .lines()
        .find_map(verdict_in)
        .unwrap_or_else(|| "no verdict".to_string())
}

#[test]
fn other_processes_another_owner_is_refused_and_a_restarted_one_reclaims_at_once() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    // A worker process takes its job's lock, and dies without releasing it.
    let mut first = child(&c, "job-7", 60_000);
    let stdout = first.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
    let line = lines
        .find_map(|l| l.ok().as_deref().and_then(verdict_in))
        .expect("the child's verdict");
    assert!(line.starts_with("granted"), "{line}");
    let dead_hold = line.split_whitespace().nth(2).unwrap().to_string();
    first.kill().unwrap();
    first.wait().unwrap();
    // Another owner, in this process and in another one, is refused.
    let ttl = Duration::from_secs(5);
    assert!(matches!(
        mgr.acquire("job", ttl, &owned("job-8")),
        Err(Error::NotAcquired(_))
    ));
    let out = child(&c, "job-8", 0).wait_with_output().unwrap();
    assert!(verdict(&out.stdout).starts_with("refused"), "{out:?}");
    // The restarted worker presents the same owner: granted on its first attempt, without
    // waiting out the 20 s TTL of the dead one's hold.
    let out = child(&c, "job-7", 0).wait_with_output().unwrap();
    let v = verdict(&out.stdout);
    assert!(v.starts_with("granted"), "{v}");
    // And so does this process, with the same owner: the owner is the identity.
    let mine = mgr.acquire("job", ttl, &owned("job-7")).unwrap();
    mine.unlock().unwrap();
    // The dead process's hold is still there (until its TTL): the resource stays held.
    assert!(c.servers.iter().all(|s| holds(s, KEY).contains(&dead_hold)));
    assert!(matches!(
        mgr.acquire("job", ttl, &owned("job-8")),
        Err(Error::NotAcquired(_))
    ));
}

#[test]
fn lost_replies_never_leave_the_holder_a_minority() {
    // Five nodes. The outer lease everywhere; a re-entry while two nodes are paused, another
    // while two others are paused. A hold count would now be 2 on some nodes and 3 on others
    // where the increments landed, and releasing the two re-entries would delete the key on
    // four nodes while the outer lease still believes it holds the lock.
    let c = Cluster::start(5);
    let mgr = manager(c.urls());
    let ttl = Duration::from_secs(30);
    let outer = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    assert!(eventually(Duration::from_secs(5), || nodes_with_hold(
        &c, &outer
    ) == 5));
    let reenter_with_paused = |paused: [usize; 2]| {
        for &i in &paused {
            c.servers[i].pause();
        }
        let r = mgr.acquire("job", ttl, &owned("job-1"));
        for &i in &paused {
            c.servers[i].resume();
        }
        r.unwrap()
    };
    let second = reenter_with_paused([3, 4]);
    let third = reenter_with_paused([0, 1]);
    // Whether the paused nodes applied the re-entries once resumed or not, every node keeps
    // the outer hold through both releases, in the order that breaks a count.
    for lease in [second, third] {
        let _ = lease.unlock();
        assert_eq!(nodes_with_hold(&c, &outer), 5);
        assert_eq!(present(&c, KEY), 5);
        outer.extend(ttl).expect("the outer lease is still held");
    }
    // Now the lost messages themselves: a re-entry whose hold never landed on two nodes (its
    // hold removed there by hand), and a release delivered twice.
    let fourth = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    assert!(eventually(Duration::from_secs(5), || nodes_with_hold(
        &c, &fourth
    ) == 5));
    for s in &c.servers[..2] {
        let _: i64 = redis::cmd("HDEL")
            .arg(KEY)
            .arg(format!("hold:{}", fourth.token()))
            .query(&mut s.client())
            .unwrap();
    }
    fourth.unlock().unwrap();
    for s in &c.servers {
        let again: i64 = redis::cmd("EVAL")
            .arg(scripts::REENTRANT_RELEASE)
            .arg(1)
            .arg(KEY)
            .arg(fourth.token())
            .arg("1")
            .arg("job-1")
            .query(&mut s.client())
            .unwrap();
        assert_eq!(again, 0, "a repeated release removes nothing");
    }
    assert_eq!(nodes_with_hold(&c, &outer), 5);
    outer.extend(ttl).unwrap();
    outer.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || present(&c, KEY) == 0));
}

#[test]
fn the_key_lives_as_long_as_its_longest_hold_and_each_lease_renews_its_own() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    let other = manager(c.urls());
    let long = mgr
        .acquire("job", Duration::from_secs(20), &owned("job-1"))
        .unwrap();
    let short = mgr
        .acquire("job", Duration::from_millis(400), &owned("job-1"))
        .unwrap();
    // The short hold does not shorten the key.
    assert!(c.servers.iter().all(|s| s.pttl(KEY) > 15_000));
    long.unlock().unwrap();
    // Now only the short hold keeps it: the key's TTL follows it, and it expires with it.
    assert!(c.servers.iter().all(|s| s.pttl(KEY) <= 400));
    assert!(eventually(Duration::from_secs(3), || present(&c, KEY) == 0));
    assert!(!short.is_valid());
    // Auto-renewal acts per lease: a renewed lease keeps the lock after an unrenewed one
    // with the same owner has expired.
    let renewed = mgr
        .acquire(
            "job",
            Duration::from_secs(1),
            &owned("job-1").auto_renew(RenewOptions::new()),
        )
        .unwrap();
    let plain = mgr
        .acquire("job", Duration::from_secs(1), &owned("job-1"))
        .unwrap();
    thread::sleep(Duration::from_millis(2500));
    assert!(!plain.is_valid());
    assert!(renewed.is_valid() && !renewed.is_lost());
    assert!(matches!(
        other.acquire("job", Duration::from_secs(1), &owned("job-2")),
        Err(Error::NotAcquired(_))
    ));
    assert!(
        c.servers
            .iter()
            .all(|s| holds(s, KEY) == vec![renewed.token().to_string()])
    );
    // Extend, too, acts on its own lease's hold.
    renewed.stop_renewal();
    renewed.extend(Duration::from_secs(10)).unwrap();
    assert!(c.servers.iter().all(|s| s.pttl(KEY) > 9_000));
    renewed.unlock().unwrap();
    assert!(eventually(Duration::from_secs(5), || present(&c, KEY) == 0));
}

#[test]
fn fenced_reentry_keeps_the_tenure_token_and_the_next_tenure_goes_above() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    let ttl = Duration::from_secs(10);
    let fenced = |owner: &str| owned(owner).fenced(true);
    let plain = mgr.try_lock_fenced("job", ttl).unwrap();
    let t0 = plain.fencing_token().unwrap();
    plain.unlock().unwrap();
    let outer = mgr.acquire("job", ttl, &fenced("job-1")).unwrap();
    let t1 = outer.fencing_token().unwrap();
    assert!(t1 > t0);
    let inner = mgr.acquire("job", ttl, &fenced("job-1")).unwrap();
    assert_eq!(
        inner.fencing_token(),
        Some(t1),
        "a re-entry keeps the tenure's token"
    );
    // A re-entry without fencing carries none, and changes nothing.
    let unfenced = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    assert_eq!(unfenced.fencing_token(), None);
    for l in [inner, unfenced, outer] {
        l.unlock().unwrap();
    }
    // The next tenure, this owner's again or another's, takes a larger token.
    let next = mgr.acquire("job", ttl, &fenced("job-1")).unwrap();
    let t2 = next.fencing_token().unwrap();
    assert!(t2 > t1);
    next.unlock().unwrap();
    let theirs = mgr.acquire("job", ttl, &fenced("job-2")).unwrap();
    assert!(theirs.fencing_token().unwrap() > t2);
    theirs.unlock().unwrap();
    assert!(
        mgr.try_lock_fenced("job", ttl)
            .unwrap()
            .fencing_token()
            .unwrap()
            > t2 + 1
    );
}

#[test]
fn plain_and_reentrant_locks_exclude_each_other() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    let ttl = Duration::from_secs(5);
    let plain = mgr.try_lock("job", ttl).unwrap();
    assert!(matches!(
        mgr.acquire("job", ttl, &owned("job-1")),
        Err(Error::NotAcquired(_))
    ));
    plain.unlock().unwrap();
    let reentrant = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    assert!(matches!(
        mgr.try_lock("job", ttl),
        Err(Error::NotAcquired(_))
    ));
    // Without an owner the lock is not reentrant: the same manager is refused like anyone.
    reentrant.unlock().unwrap();
    let first = mgr.try_lock("job", ttl).unwrap();
    assert!(matches!(
        mgr.try_lock("job", ttl),
        Err(Error::NotAcquired(_))
    ));
    first.unlock().unwrap();
}

#[test]
fn a_waiting_owner_is_woken_when_the_last_hold_is_released() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    let waiter = manager(c.urls());
    let ttl = Duration::from_secs(20);
    let a = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    let b = mgr.acquire("job", ttl, &owned("job-1")).unwrap();
    thread::scope(|s| {
        let h = s.spawn(|| {
            let t = Instant::now();
            let opts = owned("job-2").wait(Wait::For(Duration::from_secs(15)));
            let l = waiter.acquire("job", ttl, &opts);
            (l.map(|l| l.unlock()), t.elapsed())
        });
        thread::sleep(Duration::from_millis(300));
        a.unlock().unwrap();
        thread::sleep(Duration::from_millis(300));
        assert!(!h.is_finished(), "one hold is still there");
        b.unlock().unwrap();
        let (r, waited) = h.join().unwrap();
        r.expect("granted").expect("unlocked");
        // Woken by the release, far before the 20 s TTL.
        assert!(waited < Duration::from_secs(10), "{waited:?}");
    });
}

/// The example of docs/primitives.md, verbatim between the markers (checked below), run against
/// real nodes.
fn readme_example(mgr: &Redlock) -> Result<(), redlock::Error> {
    // README:begin
    use redlock::LockOptions;
    let opts = LockOptions::new().owner("job:42"); // a job id, a request id, host:pid:thread
    let outer = mgr.acquire("report:7", Duration::from_secs(30), &opts)?;
    // ...deeper down, code that locks the same resource for the same owner:
    let inner = mgr.acquire("report:7", Duration::from_secs(30), &opts)?; // granted at once
    inner.unlock()?; // still held: the outer lease's hold remains
    outer.unlock()?; // released now, and waiters are woken
    // README:end
    Ok(())
}

#[test]
fn the_readme_example_runs_and_is_the_readmes() {
    let c = Cluster::start(3);
    let mgr = manager(c.urls());
    readme_example(&mgr).unwrap();
    assert_eq!(present(&c, b"redlock:report:7"), 0);
    let this = include_str!("reentrant.rs");
    let between = |text: &str, begin: &str, end: &str| -> Vec<String> {
        let start = text.find(begin).unwrap() + begin.len();
        let stop = start + text[start..].find(end).unwrap();
        text[start..stop]
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    let ours = between(this, "// README:begin\n", "    // README:end");
    let readme = include_str!("../docs/primitives.md");
    let section = &readme[readme.find("## Reentrant locks").expect("docs section")..];
    let block = between(section, "```rust\n", "```");
    assert_eq!(
        ours, block,
        "docs/primitives.md's reentrant example differs from the one this test runs"
    );
}

#[test]
fn bad_owner_ids_are_refused_before_anything_is_sent() {
    let c = Cluster::start(1);
    let mgr = manager(c.urls());
    let ttl = Duration::from_secs(1);
    for bad in [Vec::new(), vec![b'x'; redlock::MAX_OWNER_LEN + 1]] {
        let r = mgr.acquire("job", ttl, &LockOptions::new().owner(&bad));
        assert!(matches!(r, Err(Error::InvalidInput(_))), "{r:?}");
    }
    assert_eq!(c.servers[0].lock_keys(), 0);
    // Any bytes are a valid owner.
    let l = mgr
        .acquire("job", ttl, &owned("host:1").owner(b"\0\xff\r\n"))
        .unwrap();
    l.unlock().unwrap();
}
