//! The engine's own figure in the benchmark's harness: the same lock+unlock cycle as the
//! JavaScript drivers, looped in Rust on `clients` threads (what a C program over the C ABI
//! does, minus nothing), so every driver meets the same servers and proxies in one run.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use napi::{Env, JsObject, Result};
use napi_derive::napi;
use redlock::{Config, Redlock};

#[napi(object)]
pub struct BenchResult {
    pub cycles: u32,
    pub failures: u32,
    pub p50_us: f64,
    pub p99_us: f64,
    pub per_sec: f64,
}

fn pct(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e6
}

fn run(nodes: Vec<String>, secs: f64, clients: u32, tag: String) -> BenchResult {
    let mgr = match Redlock::new(
        Config::new(nodes)
            .retry_delay(Duration::from_millis(1))
            .node_timeout(Duration::from_millis(200)),
    ) {
        Ok(m) => m,
        Err(_) => {
            return BenchResult {
                cycles: 0,
                failures: 1,
                p50_us: 0.0,
                p99_us: 0.0,
                per_sec: 0.0,
            }
        }
    };
    let barrier = Arc::new(Barrier::new(clients as usize));
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (mgr, barrier, tag) = (mgr.clone(), barrier.clone(), tag.clone());
            std::thread::spawn(move || {
                let res = format!("{tag}:{i}");
                let mut lat = Vec::new();
                let mut fail = 0u32;
                barrier.wait();
                let end = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < end {
                    let t = Instant::now();
                    match mgr.try_lock(&res, Duration::from_secs(10)) {
                        Ok(l) => {
                            let _ = l.unlock();
                            lat.push(t.elapsed());
                        }
                        Err(_) => fail += 1,
                    }
                }
                (lat, fail)
            })
        })
        .collect();
    let mut lat = Vec::new();
    let mut failures = 0;
    for t in threads {
        let (l, f) = t.join().unwrap_or_default();
        lat.extend(l);
        failures += f;
    }
    let wall = start.elapsed().as_secs_f64();
    lat.sort();
    BenchResult {
        cycles: lat.len() as u32,
        failures,
        p50_us: pct(&lat, 0.5),
        p99_us: pct(&lat, 0.99),
        per_sec: lat.len() as f64 / wall,
    }
}

/// Runs the engine's cycle for `secs` on `clients` threads (resources `tag:0`, `tag:1`, …).
#[napi(ts_return_type = "Promise<BenchResult>")]
pub fn bench_engine(
    env: Env,
    nodes: Vec<String>,
    secs: f64,
    clients: u32,
    tag: String,
) -> Result<JsObject> {
    crate::spawn(&env, move || run(nodes, secs, clients, tag))
}

/// A call that does nothing on one of the binding's threads: the cost of the hop there and
/// back (the benchmark's `hop` line).
#[napi(ts_return_type = "Promise<number>")]
pub fn hop(env: Env) -> Result<JsObject> {
    crate::spawn(&env, || 0u32)
}
