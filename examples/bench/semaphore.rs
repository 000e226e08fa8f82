//! `--semaphore`: the latency of one semaphore acquisition (and its release) with P permits
//! and 0, P − 1 or P of them held by others, beside a plain lock, one client, N = 5, in
//! interleaved rounds; and the round trips each acquisition took (the rounds node 0 took
//! part in, from the manager's metrics, less the releases).

use std::time::{Duration, Instant};

use redlock::{Error, Lease, Redlock};

use super::support::proxy::DelayProxy;
use super::{endpoints, percentile, us};

/// One variant: a plain lock (`permits` 0), or a semaphore of `permits` with `held` taken.
struct Variant {
    permits: u32,
    held: u32,
    lat: Vec<Duration>,
    cycles: u64,
    rounds: u64,
}

fn node0_rounds(mgr: &Redlock) -> u64 {
    mgr.metrics().nodes[0].requests
}

/// `secs` of cycles of one variant: acquire, then release when granted.
fn cycles(mgr: &Redlock, v: &mut Variant, secs: f64) {
    let ttl = Duration::from_secs(30);
    let sem = (v.permits > 0).then(|| mgr.semaphore(format!("bench:sem:{}", v.permits), v.permits));
    let sem = sem.map(|s| s.expect("semaphore"));
    let before = node0_rounds(mgr);
    let mut released = 0;
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0;
    while Instant::now() < end && v.lat.len() < 200_000 {
        let t0 = Instant::now();
        let r: Result<Lease, Error> = match &sem {
            Some(s) => s.try_acquire(ttl),
            None => mgr.try_lock("bench:sem:plain", ttl),
        };
        match (r, v.held < v.permits || v.permits == 0) {
            (Ok(lease), true) => {
                lease.unlock().expect("unlock");
                released += 1;
            }
            (Err(Error::NotAcquired(_)), false) => {}
            (other, _) => panic!("unexpected: {other:?}"),
        }
        v.lat.push(t0.elapsed());
        n += 1;
    }
    v.cycles += n;
    v.rounds += node0_rounds(mgr) - before - released;
}

pub fn run(servers: &[u16], secs: f64, rounds: usize, delays: &[String], ps: &[u32]) {
    println!(
        "\none client, N = 5, semaphore acquisitions (try_acquire, then unlock when granted) \
         with P permits and some held by another manager, beside a plain try_lock; {secs:.1} s \
         per variant in {rounds} interleaved rounds"
    );
    println!(
        "\n| delay | variant | held by others | cycles | p50 µs (acquire + release) | p99 µs | \
         p50 vs plain | round trips per acquisition |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for delay in delays {
        let mut proxies: Vec<DelayProxy> = Vec::new();
        let ports = endpoints(servers, 5, delay, &mut proxies);
        let urls: Vec<String> = ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        let config =
            || super::support::config(urls.clone()).node_timeout(Duration::from_millis(200));
        let mgr = Redlock::new(config()).expect("manager");
        let others = Redlock::new(config()).expect("manager");
        let mut variants = vec![Variant {
            permits: 0,
            held: 0,
            lat: Vec::new(),
            cycles: 0,
            rounds: 0,
        }];
        for &p in ps {
            for held in [0, p - 1, p] {
                if variants.iter().any(|v| v.permits == p && v.held == held) {
                    continue;
                }
                variants.push(Variant {
                    permits: p,
                    held,
                    lat: Vec::new(),
                    cycles: 0,
                    rounds: 0,
                });
            }
        }
        for _ in 0..rounds {
            for v in variants.iter_mut() {
                // The others' permits, held for this variant's cycles only.
                let mut held = Vec::new();
                if v.permits > 0 {
                    let s = others
                        .semaphore(format!("bench:sem:{}", v.permits), v.permits)
                        .expect("semaphore");
                    for _ in 0..v.held {
                        held.push(s.try_acquire(Duration::from_secs(60)).expect("held"));
                    }
                }
                cycles(&mgr, v, secs / rounds as f64);
                for l in held {
                    l.unlock().expect("unlock");
                }
            }
        }
        let plain = {
            let l = &mut variants[0].lat;
            l.sort();
            percentile(l, 0.5)
        };
        for v in variants.iter_mut() {
            v.lat.sort();
            let p50 = percentile(&v.lat, 0.5);
            let name = if v.permits == 0 {
                "plain try_lock".to_string()
            } else {
                format!("semaphore, P = {}", v.permits)
            };
            println!(
                "| {delay} | {name} | {} | {} | {} | {} | {:.2}× | {:.3} |",
                v.held,
                v.lat.len(),
                us(p50),
                us(percentile(&v.lat, 0.99)),
                p50.as_secs_f64() / plain.as_secs_f64(),
                v.rounds as f64 / v.cycles.max(1) as f64
            );
        }
        contended(&mgr, delay, secs);
    }
}

/// 8 threads of one manager taking permits of one semaphore of P = 4 (try_acquire, unlock
/// when granted) for `secs`: how often the nodes split, as round trips per attempt.
fn contended(mgr: &Redlock, delay: &str, secs: f64) {
    let sem = mgr.semaphore("bench:sem:contended", 4).expect("semaphore");
    let before = node0_rounds(mgr);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let sem = sem.clone();
            std::thread::spawn(move || {
                let (mut granted, mut refused) = (0u64, 0u64);
                while Instant::now() < end && granted + refused < 200_000 {
                    match sem.try_acquire(Duration::from_secs(30)) {
                        Ok(l) => {
                            l.unlock().expect("unlock");
                            granted += 1;
                        }
                        Err(Error::NotAcquired(_)) => refused += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
                (granted, refused)
            })
        })
        .collect();
    let (granted, refused) = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let rounds = node0_rounds(mgr) - before - granted;
    println!(
        "\n{delay}: 8 threads on P = 4 for {secs:.1} s: {granted} granted, {refused} refused, \
         {:.3} round trips per attempt ({:.0} grants/s)\n",
        rounds as f64 / (granted + refused).max(1) as f64,
        granted as f64 / secs
    );
}
