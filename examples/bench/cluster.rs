//! The cluster rows (`--cluster 1,2,3`): N = 3 nodes, each a Redis Cluster of S primaries
//! (`redis+cluster://`), beside N = 3 standalone nodes, T threads of one process on distinct
//! resources, no injected delay, interleaved in short rounds of one run. Restart quarantine is
//! off for every row (the rows compare routing, not quarantine). Each row reads the servers' own
//! counters (`INFO`) before and after its measured part:
//!
//! * server CPU per cycle: every server's `used_cpu_user + used_cpu_sys`, summed, per cycle;
//! * each primary's share of its cluster's commands (`SET`, `PTTL`, `EVALSHA`, `EVAL`), the
//!   spread the slot map gives distinct resources: the smallest and largest share over the
//!   three clusters' primaries (an even spread is 1/S each).
//!
//! On 2 cores the servers and the client share the CPUs, so throughput cannot grow with S
//! there; on a many-core machine it should, up to the client's own limit.
//!
//! `BENCH_CLUSTER_DEBUG=1` prints each node's per-primary command counts of every round.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock::Redlock;

use crate::{percentile, support, us};

/// At most this many cycles per thread and round (a bound on every loop).
const MAX_CYCLES: usize = 10_000_000;
const TTL: Duration = Duration::from_secs(10);

/// One row's configuration: standalone nodes, or clusters of `s` primaries.
struct Setup {
    label: String,
    mgr: Redlock,
    /// Per node (cluster), its primaries' ports.
    primaries: Vec<Vec<u16>>,
    stats: Vec<Vec<redis::Connection>>,
}

#[derive(Default)]
struct Raw {
    lat: Vec<Duration>,
    elapsed: Duration,
    server_cpu: f64,
    /// Per node, per primary: commands served.
    commands: Vec<Vec<u64>>,
}

fn counters(c: &mut redis::Connection) -> (f64, u64) {
    let i = support::info_counters(c);
    let cmds = ["set", "pttl", "evalsha", "eval"]
        .iter()
        .map(|k| i.get(&format!("cmdstat_{k}")) as u64)
        .sum();
    (i.get("used_cpu_user") + i.get("used_cpu_sys"), cmds)
}

fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .and_then(|c| c.get_connection())
        .expect("stats connection")
}

fn setup(label: String, urls: Vec<String>, primaries: Vec<Vec<u16>>) -> Setup {
    let cfg = redlock::Config::new(urls)
        .restart_quarantine(false)
        .retry_count(0);
    let stats = (primaries.iter())
        .map(|ps| ps.iter().map(|p| connect(*p)).collect())
        .collect();
    Setup {
        label,
        mgr: Redlock::new(cfg).expect("manager"),
        primaries,
        stats,
    }
}

/// `threads` threads lock and unlock distinct resources for `secs`.
fn run_once(s: &mut Setup, threads: usize, secs: f64, tag: &str) -> Raw {
    let before: Vec<Vec<(f64, u64)>> = (s.stats.iter_mut())
        .map(|n| n.iter_mut().map(counters).collect())
        .collect();
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (mgr, barrier, tag) = (s.mgr.clone(), Arc::clone(&barrier), tag.to_string());
            thread::spawn(move || {
                barrier.wait();
                let end = Instant::now() + Duration::from_secs_f64(secs);
                let mut lat = Vec::new();
                for n in 0..MAX_CYCLES {
                    if Instant::now() >= end {
                        break;
                    }
                    let t0 = Instant::now();
                    let l = mgr.try_lock(format!("{tag}-{t}-{n}"), TTL).expect("lock");
                    l.unlock().expect("unlock");
                    lat.push(t0.elapsed());
                }
                lat
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let mut raw = Raw::default();
    for h in handles {
        raw.lat.extend(h.join().expect("bench thread"));
    }
    raw.elapsed = t0.elapsed();
    for (n, conns) in s.stats.iter_mut().enumerate() {
        let mut per = Vec::new();
        for (p, c) in conns.iter_mut().enumerate() {
            let (cpu, cmds) = counters(c);
            raw.server_cpu += cpu - before[n][p].0;
            per.push(cmds - before[n][p].1);
        }
        if std::env::var("BENCH_CLUSTER_DEBUG").is_ok() {
            eprintln!("{tag} node {n}: {per:?}");
        }
        raw.commands.push(per);
    }
    raw
}

fn add(total: &mut Raw, r: Raw) {
    total.lat.extend(r.lat);
    total.elapsed += r.elapsed;
    total.server_cpu += r.server_cpu;
    if total.commands.is_empty() {
        total.commands = r.commands;
    } else {
        for (t, n) in total.commands.iter_mut().zip(r.commands) {
            for (a, b) in t.iter_mut().zip(n) {
                *a += b;
            }
        }
    }
}

pub fn run(secs: f64, rounds: usize, shards: &[usize], threads: usize) {
    let plain = support::Cluster::start(3);
    let clusters: Vec<(usize, Vec<support::redis_cluster::RedisCluster>)> = (shards.iter())
        .map(|&s| {
            let cs = (0..3)
                .map(|_| thread::spawn(move || support::redis_cluster::RedisCluster::start(s, 0)))
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| h.join().expect("cluster"))
                .collect();
            (s, cs)
        })
        .collect();
    let mut setups = vec![setup(
        "standalone".into(),
        plain.urls(),
        plain.servers.iter().map(|s| vec![s.port]).collect(),
    )];
    for (s, cs) in &clusters {
        let urls = (cs.iter())
            .map(|c| format!("redis+cluster://127.0.0.1:{}", c.servers[0].port))
            .collect();
        let primaries = (cs.iter())
            .map(|c| c.servers.iter().map(|x| x.port).collect())
            .collect();
        setups.push(setup(format!("cluster, S = {s}"), urls, primaries));
    }
    println!(
        "\nCluster nodes: N = 3, each node standalone or a Redis Cluster of S primaries; \
         {threads} threads on distinct resources, no injected delay, restart quarantine off; \
         {secs:.1} s per row in {rounds} interleaved rounds. Server figures are the servers' \
         own counters (INFO), during the measured part only."
    );
    // Warm-up: every shard's connection and slot map.
    for s in &mut setups {
        run_once(s, threads, 0.2, "warm");
    }
    let mut totals: Vec<Raw> = setups.iter().map(|_| Raw::default()).collect();
    for round in 0..rounds {
        for (i, s) in setups.iter_mut().enumerate() {
            let r = run_once(s, threads, secs / rounds as f64, &format!("r{round}s{i}"));
            add(&mut totals[i], r);
        }
    }
    println!(
        "\n| nodes | cycles/s | vs standalone | p50 µs | p99 µs | server CPU µs/cycle \
         | primary's share of its cluster's commands (min–max) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let base = totals[0].lat.len() as f64 / totals[0].elapsed.as_secs_f64().max(1e-9);
    for (s, t) in setups.iter().zip(&mut totals) {
        t.lat.sort();
        let cycles = t.lat.len().max(1) as f64;
        let tput = t.lat.len() as f64 / t.elapsed.as_secs_f64().max(1e-9);
        let shares: Vec<f64> = (t.commands.iter())
            .flat_map(|n| {
                let sum = n.iter().sum::<u64>().max(1) as f64;
                n.iter().map(move |c| *c as f64 / sum)
            })
            .collect();
        let lo = shares.iter().copied().fold(f64::MAX, f64::min);
        let hi = shares.iter().copied().fold(0.0, f64::max);
        println!(
            "| {} | {tput:.0} | {:.2}× | {} | {} | {:.1} | {:.2}–{:.2} % (even: {:.2} %) |",
            s.label,
            tput / base.max(1e-9),
            us(percentile(&t.lat, 0.5)),
            us(percentile(&t.lat, 0.99)),
            t.server_cpu * 1e6 / cycles,
            lo * 100.0,
            hi * 100.0,
            100.0 / s.primaries[0].len() as f64,
        );
    }
}
