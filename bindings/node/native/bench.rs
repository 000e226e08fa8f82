//! The C figure in the benchmark's harness: the same lock+unlock cycle as the JavaScript
//! drivers, looped on `clients` threads through the library's C ABI (`redlock_try_lock`,
//! `redlock_unlock`, `redlock_lease_free`: what a C program runs), so every driver meets the
//! same servers and proxies in one run.

use std::ffi::CString;
use std::ptr;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use napi::{Env, JsObject, Result};
use napi_derive::napi;
use redlock::ffi;

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

/// A manager made through the C ABI (retry delay 1 ms, node timeout 200 ms, as the
/// JavaScript drivers), or `None`.
fn c_manager(nodes: &[String]) -> Option<*mut ffi::redlock_manager> {
    let mut err = [0 as std::ffi::c_char; 256];
    unsafe {
        let cfg = ffi::redlock_config_new();
        let mut ok = !cfg.is_null();
        for n in nodes {
            let url = CString::new(n.as_str()).ok()?;
            ok &= ffi::redlock_config_add_node(cfg, url.as_ptr(), err.as_mut_ptr(), err.len())
                == ffi::redlock_status::REDLOCK_STATUS_OK;
        }
        ok &= ffi::redlock_config_set_retry(cfg, 3, 1, err.as_mut_ptr(), err.len())
            == ffi::redlock_status::REDLOCK_STATUS_OK;
        ok &= ffi::redlock_config_set_timeouts(cfg, 250, 200, err.as_mut_ptr(), err.len())
            == ffi::redlock_status::REDLOCK_STATUS_OK;
        let mut mgr = ptr::null_mut();
        ok &= ffi::redlock_manager_new(cfg, &mut mgr, err.as_mut_ptr(), err.len())
            == ffi::redlock_status::REDLOCK_STATUS_OK;
        ffi::redlock_config_free(cfg);
        ok.then_some(mgr)
    }
}

struct Mgr(*mut ffi::redlock_manager);
// SAFETY: a redlock_manager may be used from any number of threads at once.
unsafe impl Send for Mgr {}
unsafe impl Sync for Mgr {}

/// One try_lock + unlock + free through the C ABI.
fn c_cycle(mgr: &Mgr, res: &[u8]) -> bool {
    let mut err = [0 as std::ffi::c_char; 256];
    let mut lease = ptr::null_mut();
    unsafe {
        let st = ffi::redlock_try_lock(
            mgr.0,
            res.as_ptr(),
            res.len(),
            10_000,
            &mut lease,
            err.as_mut_ptr(),
            err.len(),
        );
        if st != ffi::redlock_status::REDLOCK_STATUS_OK {
            return false;
        }
        let ok = ffi::redlock_unlock(lease, err.as_mut_ptr(), err.len())
            == ffi::redlock_status::REDLOCK_STATUS_OK;
        ffi::redlock_lease_free(lease);
        ok
    }
}

fn run(nodes: Vec<String>, secs: f64, clients: u32, tag: String) -> BenchResult {
    let Some(mgr) = c_manager(&nodes) else {
        return BenchResult {
            cycles: 0,
            failures: 1,
            p50_us: 0.0,
            p99_us: 0.0,
            per_sec: 0.0,
        };
    };
    let mgr = Arc::new(Mgr(mgr));
    let barrier = Arc::new(Barrier::new(clients as usize));
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (mgr, barrier, tag) = (mgr.clone(), barrier.clone(), tag.clone());
            std::thread::spawn(move || {
                let res = format!("{tag}:{i}").into_bytes();
                let mut lat = Vec::new();
                let mut fail = 0u32;
                barrier.wait();
                let end = Instant::now() + Duration::from_secs_f64(secs);
                while Instant::now() < end {
                    let t = Instant::now();
                    if c_cycle(&mgr, &res) {
                        lat.push(t.elapsed());
                    } else {
                        fail += 1;
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
    unsafe { ffi::redlock_manager_free(mgr.0) };
    lat.sort();
    BenchResult {
        cycles: lat.len() as u32,
        failures,
        p50_us: pct(&lat, 0.5),
        p99_us: pct(&lat, 0.99),
        per_sec: lat.len() as f64 / wall,
    }
}

/// Runs the C ABI's cycle for `secs` on `clients` threads (resources `tag:0`, `tag:1`, …).
#[napi(ts_return_type = "Promise<BenchResult>")]
pub fn bench_engine(
    env: Env,
    nodes: Vec<String>,
    secs: f64,
    clients: u32,
    tag: String,
) -> Result<JsObject> {
    crate::looped::use_threads(true);
    let p = crate::spawn(&env, move || run(nodes, secs, clients, tag));
    crate::looped::use_threads(false);
    p
}

/// Runs this JavaScript thread's calls on the binding's threads (`true`) rather than on the
/// event loop: the benchmark's `redlock-quorum (threads)` row.
#[napi]
pub fn bench_use_threads(on: bool) {
    crate::looped::use_threads(on);
}

/// A call that does nothing, on the event loop: the cost of a call's coroutine and its
/// settlement (the benchmark's `hop` line).
#[napi(ts_return_type = "Promise<number>")]
pub fn hop(env: Env) -> Result<JsObject> {
    crate::spawn(&env, || 0u32)
}
