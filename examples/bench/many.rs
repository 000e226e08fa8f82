//! `--many`: the latency of one all-or-nothing lock+unlock cycle of k resources
//! (`Redlock::acquire_many`) beside a plain lock of one resource, one client, N = 5, measured
//! in the same run in interleaved rounds.

use std::time::{Duration, Instant};

use redlock::{LockOptions, Redlock, Wait};

use super::support::proxy::DelayProxy;
use super::{endpoints, percentile, us};

/// One variant's cycles for `secs`: `k` resources at once, or (k = 0) a plain `try_lock`.
fn cycles(mgr: &Redlock, k: usize, secs: f64, lat: &mut Vec<Duration>) {
    let names: Vec<String> = (0..k.max(1)).map(|i| format!("bench:many:{i}")).collect();
    let opts = LockOptions::new().wait(Wait::No);
    let ttl = Duration::from_secs(10);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    while Instant::now() < end && lat.len() < 200_000 {
        let t0 = Instant::now();
        let lease = if k == 0 {
            mgr.try_lock(&names[0], ttl)
        } else {
            mgr.acquire_many(&names, ttl, &opts)
        };
        lease.expect("uncontended").unlock().expect("unlock");
        lat.push(t0.elapsed());
    }
}

pub fn run(servers: &[u16], secs: f64, rounds: usize, delays: &[String], ks: &[usize]) {
    println!(
        "\none client, N = 5, lock+unlock cycles of k resources (acquire_many) beside a plain \
         try_lock, {secs:.1} s per variant in {rounds} interleaved rounds"
    );
    println!("\n| delay | variant | cycles | p50 µs | p99 µs | p50 vs plain |");
    println!("|---|---|---:|---:|---:|---:|");
    for delay in delays {
        let mut proxies: Vec<DelayProxy> = Vec::new();
        let ports = endpoints(servers, 5, delay, &mut proxies);
        let urls: Vec<String> = ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        let mgr =
            Redlock::new(super::support::config(urls).node_timeout(Duration::from_millis(200)))
                .expect("manager");
        let variants: Vec<usize> = std::iter::once(0).chain(ks.iter().copied()).collect();
        let mut lat: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
        for _ in 0..rounds {
            for (v, &k) in variants.iter().enumerate() {
                cycles(&mgr, k, secs / rounds as f64, &mut lat[v]);
            }
        }
        let mut plain = Duration::ZERO;
        for (v, &k) in variants.iter().enumerate() {
            let l = &mut lat[v];
            l.sort();
            let p50 = percentile(l, 0.5);
            if k == 0 {
                plain = p50;
            }
            let name = if k == 0 {
                "plain try_lock".to_string()
            } else {
                format!("acquire_many, k = {k}")
            };
            println!(
                "| {delay} | {name} | {} | {} | {} | {:.2}× |",
                l.len(),
                us(p50),
                us(percentile(l, 0.99)),
                p50.as_secs_f64() / plain.as_secs_f64()
            );
        }
    }
}
