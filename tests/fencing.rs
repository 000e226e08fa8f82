//! Fencing tokens against real redis-server processes: strictly increasing over grants from
//! many threads and processes while persistent nodes are killed and restarted, and a stale
//! writer (a holder paused past its TTL) turned away by the fenced store every time.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, Redlock, scripts};
use support::{Cluster, RedisServer, mono_ns};

fn manager(urls: Vec<String>) -> Redlock {
    Redlock::new(config(urls)).unwrap()
}

fn config(urls: Vec<String>) -> redlock::Config {
    support::config(urls)
        .retry_delay(Duration::from_millis(5))
        .node_timeout(Duration::from_millis(300))
        .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(100))
}

/// For nodes that persist every write (`appendfsync always`), the case restart quarantine may
/// be turned off for: a restart loses none of their keys, so they may count at once.
fn persistent_manager(urls: Vec<String>) -> Redlock {
    Redlock::new(config(urls).restart_quarantine(false)).unwrap()
}

/// Takes `n` fenced grants of `resource`, returning (time granted, token) for each.
fn grants(mgr: &Redlock, resource: &str, n: usize) -> Vec<(u128, u64)> {
    let mut out = Vec::with_capacity(n);
    let deadline = Instant::now() + Duration::from_secs(120);
    while out.len() < n && Instant::now() < deadline {
        match mgr.lock_fenced_until(resource, Duration::from_secs(5), deadline) {
            Ok(l) => {
                let t = l.fencing_token().expect("a fenced lease has a token");
                out.push((mono_ns(), t));
                // Unlock may fail while a node is being killed; the lock then expires.
                let _ = l.unlock();
            }
            Err(Error::NotAcquired(_) | Error::Unavailable(_)) => {}
            Err(e) => panic!("{e}"),
        }
    }
    out
}

/// Not a test of its own: a child process of `tokens_strictly_increase_…`. Takes fenced
/// grants on the nodes in REDLOCK_FENCE_NODES and prints "G <ns> <token>" for each.
#[test]
fn child_granter() {
    let Ok(nodes) = std::env::var("REDLOCK_FENCE_NODES") else {
        return;
    };
    let n: usize = std::env::var("REDLOCK_FENCE_GRANTS")
        .unwrap()
        .parse()
        .unwrap();
    let mgr = persistent_manager(nodes.split(',').map(str::to_string).collect());
    for (ns, t) in grants(&mgr, "fenced", n) {
        println!("G {ns} {t}");
    }
}

#[test]
fn tokens_strictly_increase_across_threads_processes_and_restarts() {
    // Persistent nodes: every write fsynced, so a restarted node keeps its counters.
    let persist = ["--appendonly", "yes", "--appendfsync", "always"];
    let handles: Vec<_> = (0..5)
        .map(|_| thread::spawn(move || RedisServer::start_with(&persist)))
        .collect();
    let cluster = Arc::new(Mutex::new(Cluster {
        servers: handles.into_iter().map(|h| h.join().unwrap()).collect(),
    }));
    let urls = cluster.lock().unwrap().urls();
    let mgr = persistent_manager(urls.clone());

    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "child_granter",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("REDLOCK_FENCE_NODES", urls.join(","))
                .env("REDLOCK_FENCE_GRANTS", "250")
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let threads: Vec<_> = (0..6)
        .map(|_| {
            let mgr = mgr.clone();
            thread::spawn(move || grants(&mgr, "fenced", 250))
        })
        .collect();
    // Meanwhile, kill -9 one node at a time and bring it back from its append-only file.
    let chaos = {
        let cluster = Arc::clone(&cluster);
        thread::spawn(move || {
            for i in [1, 3, 0] {
                thread::sleep(Duration::from_millis(700));
                let mut c = cluster.lock().unwrap();
                c.servers[i].kill();
                drop(c);
                thread::sleep(Duration::from_millis(300));
                cluster.lock().unwrap().servers[i].restart();
            }
        })
    };
    let mut all: Vec<(u128, u64)> = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // libtest may print "test child_granter ... " before the first line.
            let line = line.rsplit("... ").next().unwrap_or(line);
            let mut f = line.split_whitespace();
            if f.next() == Some("G") {
                let ns = f.next().unwrap().parse().unwrap();
                let t = f.next().unwrap().parse().unwrap();
                all.push((ns, t));
            }
        }
    }
    chaos.join().unwrap();
    assert_eq!(all.len(), 6 * 250 + 2 * 250, "every grant was recorded");
    all.sort();
    for w in all.windows(2) {
        assert!(
            w[1].1 > w[0].1,
            "token {} granted after token {}",
            w[1].1,
            w[0].1
        );
    }
    println!(
        "{} fenced grants from 6 threads and 2 processes, tokens {}..={}, strictly increasing",
        all.len(),
        all[0].1,
        all[all.len() - 1].1
    );
    // The counters never expire and live under their own prefix.
    let c = cluster.lock().unwrap();
    for s in &c.servers {
        assert_eq!(s.pttl(b"redlock-fence:fenced"), -1);
    }
}

/// Not a test of its own: the paused holder of `a_paused_holders_late_write_is_rejected`.
/// Takes a fenced lock, prints "TOKEN t", waits for a line on stdin, then tries the fenced
/// store write and prints "WRITE 1" (accepted) or "WRITE 0" (rejected).
#[test]
fn child_paused_holder() {
    let Ok(nodes) = std::env::var("REDLOCK_PAUSE_NODES") else {
        return;
    };
    let store = std::env::var("REDLOCK_PAUSE_STORE").unwrap();
    let mgr = manager(nodes.split(',').map(str::to_string).collect());
    let lease = mgr
        .lock_fenced("account:7", Duration::from_millis(500))
        .unwrap();
    let token = lease.fencing_token().unwrap();
    println!("TOKEN {token}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    // It believes it still holds the lock (it was paused and does not check the validity).
    let accepted = store_write(&store, token, "from the paused holder");
    println!("WRITE {accepted}");
}

fn store_write(url: &str, token: u64, value: &str) -> i64 {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    redis::cmd("EVAL")
        .arg(scripts::FENCED_STORE_WRITE)
        .arg(1)
        .arg("account:7:data")
        .arg(token)
        .arg(value)
        .query(&mut c)
        .unwrap()
}

#[test]
fn a_paused_holders_late_write_is_rejected_every_time() {
    let cluster = Cluster::start(3);
    let store = RedisServer::start();
    let other = manager(cluster.urls());
    for round in 0..5 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_paused_holder",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("REDLOCK_PAUSE_NODES", cluster.urls().join(","))
            .env("REDLOCK_PAUSE_STORE", store.url())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first: u64 = lines
            .by_ref()
            .map_while(Result::ok)
            // libtest may print "test child_paused_holder ... " on the same line.
            .find_map(|l| l.split("TOKEN ").nth(1).map(|t| t.trim().parse().unwrap()))
            .expect("the child took the lock");
        // The "GC pause": stop the holder for longer than its 500 ms TTL.
        // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
        let lease = other
            .lock_fenced_until(
                "account:7",
                Duration::from_secs(5),
                Instant::now() + Duration::from_secs(5),
            )
            .unwrap();
        let second = lease.fencing_token().unwrap();
        assert!(second > first, "round {round}: {second} <= {first}");
        assert_eq!(store_write(&store.url(), second, "from the new holder"), 1);
        lease.unlock().unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGCONT) }, 0);
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        let verdict = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| l.split("WRITE ").nth(1).map(|v| v.trim().to_string()))
            .expect("the child tried its write");
        assert_eq!(verdict, "0", "round {round}: the stale write was accepted");
        // Read the child's output to the end, so that it never writes to a closed pipe.
        lines.for_each(drop);
        assert!(child.wait().unwrap().success());
        let value: String = redis::cmd("HGET")
            .arg("account:7:data")
            .arg("value")
            .query(&mut store.client())
            .unwrap();
        assert_eq!(value, "from the new holder");
    }
}

#[test]
fn plain_leases_have_no_token_and_fenced_ones_count_up() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let plain = mgr.try_lock("p", Duration::from_secs(5)).unwrap();
    assert_eq!(plain.fencing_token(), None);
    plain.unlock().unwrap();
    let mut last = 0;
    for _ in 0..20 {
        let l = mgr.try_lock_fenced("p", Duration::from_secs(5)).unwrap();
        let t = l.fencing_token().unwrap();
        assert!(t > last);
        last = t;
        l.unlock().unwrap();
    }
    assert_eq!(last, 20);
    // A fenced attempt on a held lock is refused like a plain one, and takes no token.
    let held = mgr.try_lock_fenced("p", Duration::from_secs(5)).unwrap();
    assert!(matches!(
        mgr.try_lock_fenced("p", Duration::from_secs(5)),
        Err(Error::NotAcquired(_))
    ));
    assert_eq!(held.fencing_token(), Some(21));
    held.unlock().unwrap();
    assert_eq!(
        mgr.try_lock_fenced("p", Duration::from_secs(5))
            .unwrap()
            .fencing_token(),
        Some(22)
    );
}

#[test]
fn tokens_stay_exact_beyond_2_pow_53_and_the_counter_ends_with_an_error_not_a_repeat() {
    let cluster = Cluster::start(3);
    let mgr = manager(cluster.urls());
    let set_counter = |v: &str| {
        for s in &cluster.servers {
            redis::cmd("SET")
                .arg("redlock-fence:big")
                .arg(v)
                .exec(&mut s.client())
                .unwrap();
        }
    };
    // Lua numbers are doubles: 2^53 + 1 is the first integer they cannot hold.
    set_counter("9007199254740993");
    let mut last = 9_007_199_254_740_993;
    for _ in 0..4 {
        let l = mgr.try_lock_fenced("big", Duration::from_secs(5)).unwrap();
        let t = l.fencing_token().unwrap();
        assert_eq!(
            t,
            last + 1,
            "each grant the next integer, none skipped or repeated"
        );
        last = t;
        l.unlock().unwrap();
    }
    for s in &cluster.servers {
        assert_eq!(
            s.get(b"redlock-fence:big").as_deref(),
            Some(last.to_string().as_bytes())
        );
    }
    // One node behind the others: the largest counter wins, exactly.
    redis::cmd("SET")
        .arg("redlock-fence:big")
        .arg("9007199254740992")
        .exec(&mut cluster.servers[0].client())
        .unwrap();
    let l = mgr.try_lock_fenced("big", Duration::from_secs(5)).unwrap();
    assert_eq!(l.fencing_token(), Some(last + 1));
    l.unlock().unwrap();

    // The last token below 2^64 is handed out once; after it the grant is refused.
    set_counter(&(u64::MAX - 1).to_string());
    let l = mgr.try_lock_fenced("big", Duration::from_secs(5)).unwrap();
    assert_eq!(l.fencing_token(), Some(u64::MAX));
    l.unlock().unwrap();
    match mgr.try_lock_fenced("big", Duration::from_secs(5)) {
        Err(Error::Internal(m)) => assert!(m.contains("exhausted"), "{m}"),
        other => panic!("expected the counter to be exhausted, got {other:?}"),
    }
    // Nothing is left held: a plain lock of the resource is granted at once (the release
    // of the refused grant runs first, on the same connections).
    mgr.try_lock("big", Duration::from_secs(5))
        .unwrap()
        .unlock()
        .unwrap();
}
