//! A first look at redlock: several threads contend for one lock that guards a deliberately
//! non-atomic counter, and halfway through one node is killed.
//!
//!     cargo run --release --example demo                       # starts 5 local redis-servers
//!     cargo run --release --example demo -- --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003
//!
//! Options: `--threads N` (default 4), `--increments N` per thread (default 50).
//! With `--nodes`, the demo does not kill anything.

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Config, Error, NodeOutcome, Redlock};

/// Prints the library's warnings (a node becoming unreachable) as they happen.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Info && m.target().starts_with("redlock")
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("  [{}] {}", r.level(), r.args());
        }
    }
    fn flush(&self) {}
}

struct Args {
    nodes: Option<Vec<String>>,
    threads: usize,
    increments: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        nodes: None,
        threads: 4,
        increments: 50,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--nodes" => a.nodes = Some(value("--nodes")?.split(',').map(str::to_string).collect()),
            "--threads" => {
                a.threads = value("--threads")?
                    .parse()
                    .map_err(|e| format!("--threads: {e}"))?
            }
            "--increments" => {
                a.increments = value("--increments")?
                    .parse()
                    .map_err(|e| format!("--increments: {e}"))?
            }
            "-h" | "--help" => {
                println!(
                    "usage: demo [--nodes URL,URL,...] [--threads N] [--increments N]\n\
                     Without --nodes, starts 5 local redis-servers and kills one halfway."
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.threads == 0 || a.increments == 0 {
        return Err("--threads and --increments must be at least 1".into());
    }
    Ok(a)
}

#[derive(Default)]
struct Stats {
    grants: AtomicU64,
    refused: AtomicU64,
    unavailable: AtomicU64,
    grants_after_kill: AtomicU64,
    min_granted_after_kill: AtomicU64,
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("demo: {e}");
            return ExitCode::from(2);
        }
    };
    let _ = log::set_logger(&StderrLogger).map(|()| log::set_max_level(log::LevelFilter::Info));

    let mut cluster = None;
    let urls = match &args.nodes {
        Some(n) => n.clone(),
        None => {
            println!("starting 5 local redis-server nodes (no persistence)...");
            let c = support::Cluster::start(5);
            let urls = c.urls();
            cluster = Some(Mutex::new(c));
            urls
        }
    };
    println!("nodes: {}", urls.join(" "));
    // Nodes this demo just started hold nothing, so restart quarantine (which keeps a node
    // that restarted less than the maximum TTL ago out of the quorum) is off for them; for
    // your own nodes (--nodes) it stays on, as by default.
    let config = if cluster.is_some() {
        support::config(urls.clone())
    } else {
        Config::new(urls.clone())
    };
    let mgr = match Redlock::new(config.retry_count(0)) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("demo: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "{} threads × {} increments of a non-atomic counter, one lock, quorum {}/{}",
        args.threads,
        args.increments,
        mgr.quorum(),
        mgr.node_count()
    );

    let counter = Arc::new(AtomicU64::new(0)); // read and written non-atomically on purpose
    let stats = Arc::new(Stats {
        min_granted_after_kill: AtomicU64::new(u64::MAX),
        ..Stats::default()
    });
    let killed = Arc::new(AtomicBool::new(false));
    let total = args.threads as u64 * args.increments;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(120);

    let workers: Vec<_> = (0..args.threads)
        .map(|_| {
            let (mgr, counter, stats, killed) = (
                mgr.clone(),
                Arc::clone(&counter),
                Arc::clone(&stats),
                Arc::clone(&killed),
            );
            let n = args.increments;
            thread::spawn(move || -> Result<(), String> {
                let mut done = 0;
                while done < n {
                    if Instant::now() > deadline {
                        return Err("gave up after 120 s".into());
                    }
                    match mgr.try_lock("demo:counter", Duration::from_secs(5)) {
                        Ok(lease) => {
                            stats.grants.fetch_add(1, Ordering::Relaxed);
                            if killed.load(Ordering::Relaxed) {
                                stats.grants_after_kill.fetch_add(1, Ordering::Relaxed);
                                let granted = lease.acquisition().successes as u64;
                                stats
                                    .min_granted_after_kill
                                    .fetch_min(granted, Ordering::Relaxed);
                            }
                            let v = counter.load(Ordering::SeqCst);
                            thread::sleep(Duration::from_millis(1));
                            if !lease.is_valid() {
                                return Err("critical section outlived its lease".into());
                            }
                            counter.store(v + 1, Ordering::SeqCst);
                            done += 1;
                            if let Err(e) = lease.unlock() {
                                eprintln!("  unlock: {e}");
                            }
                        }
                        Err(Error::NotAcquired(_)) => {
                            stats.refused.fetch_add(1, Ordering::Relaxed);
                            thread::sleep(Duration::from_micros(500 + fastrand_micros()));
                        }
                        Err(Error::Unavailable(r)) => {
                            stats.unavailable.fetch_add(1, Ordering::Relaxed);
                            eprintln!("  unavailable: {r}");
                            thread::sleep(Duration::from_millis(10));
                        }
                        Err(e) => return Err(e.to_string()),
                    }
                }
                Ok(())
            })
        })
        .collect();

    // Halfway through, kill one node (only nodes this demo started).
    if let Some(c) = &cluster {
        while counter.load(Ordering::SeqCst) < total / 2 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
        let mut c = c.lock().unwrap();
        let port = c.servers[2].port;
        c.servers[2].kill();
        killed.store(true, Ordering::Relaxed);
        println!(
            "-- killed node 2 (127.0.0.1:{port}) with SIGKILL after {} increments",
            counter.load(Ordering::SeqCst)
        );
    }

    let mut failed = false;
    for w in workers {
        if let Err(e) = w.join().expect("worker panicked") {
            eprintln!("demo: worker failed: {e}");
            failed = true;
        }
    }
    let elapsed = start.elapsed();
    let final_value = counter.load(Ordering::SeqCst);
    let grants = stats.grants.load(Ordering::Relaxed);
    println!("\nsummary after {:.2} s:", elapsed.as_secs_f64());
    println!("  locks granted:            {grants}");
    println!(
        "  attempts refused (held):  {} (contention)",
        stats.refused.load(Ordering::Relaxed)
    );
    println!(
        "  attempts unavailable:     {}",
        stats.unavailable.load(Ordering::Relaxed)
    );
    if cluster.is_some() {
        let min = stats.min_granted_after_kill.load(Ordering::Relaxed);
        println!(
            "  grants after the kill:    {} (each by at least {} of 5 nodes; quorum {})",
            stats.grants_after_kill.load(Ordering::Relaxed),
            if min == u64::MAX { 0 } else { min },
            mgr.quorum()
        );
        // What the manager now sees on the dead node.
        if let Ok(l) = mgr.try_lock("demo:probe", Duration::from_secs(1)) {
            let o = &l.acquisition().nodes[2].outcome;
            let what = match o {
                NodeOutcome::Unreachable(s) | NodeOutcome::Backoff(s) => s.clone(),
                other => format!("{other:?}"),
            };
            println!("  node 2 now:               {what}");
            let _ = l.unlock();
        }
    }
    println!("  counter:                  {final_value} (expected {total})");
    if failed || final_value != total {
        println!("FAILED: mutual exclusion or progress was lost");
        return ExitCode::FAILURE;
    }
    println!("OK: every increment happened under the lock; no update was lost");
    ExitCode::SUCCESS
}

/// A little jitter without another dependency: std's randomly seeded hasher.
fn fastrand_micros() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % 1500
}
