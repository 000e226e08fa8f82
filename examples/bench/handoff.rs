//! The hot-resource rows (`--handoff`): C clients contend for one resource on N = 5 nodes, each
//! locking it, holding it, unlocking it and locking it again, for S seconds. Every client is
//! separate (its own manager, connections and subscriber connections, as separate processes
//! would be). Drivers:
//!
//! With `--think MS`, a client that released does something else for that long before it
//! asks again (0: it asks again at once, and so usually takes the lock back itself before a
//! waiter can: the handoff then goes to the same client, whatever the driver).
//!
//! * `notify`: this library, waiting by notification (`Wait::Until` the end of the run);
//! * `retry`: this library with the retry loop it had before (`LockOptions::notify(false)`:
//!   random pauses of up to the default retry delay, 200 ms);
//! * `notify, 1 manager` and `retry, 1 manager`: the same, every client a thread of one
//!   manager (one process);
//! * `fair` and `fair, 1 manager`: the fair lock (`LockOptions::fair`), waiting by
//!   notification: grants in ticket order, a release waking the next ticket's waiter only;
//! * `floor+retry`: the ideal client of floor.rs with the same retry loop;
//! * `node-redlock`: node-redlock 4.x with its defaults (200 ms delay, 200 ms jitter), one Node
//!   process per client, when `node` finds `redlock` and `ioredis` (NODE_PATH).
//!
//! Separate managers each get the release message: every release wakes the first waiter of
//! each of them (as every process subscribed is told), who attempt at once. In one manager a
//! release wakes one waiter.
//!
//! Measured: the handoff gap (from a release's return to the next grant, by anyone; 0 when the
//! next grant came before the release returned), throughput, and fairness (the grants of the
//! client with the most over those of the client with the fewest).

use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{LockOptions, Redlock, Wait};

use crate::support::mono_ns;
use crate::{endpoints, floor, percentile, support};

const TTL_MS: u64 = 10_000;
/// The library's default retry delay: what the retry-loop drivers pause, at most.
const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Driver {
    Notify,
    Retry,
    /// As `Notify`, every client a thread of one shared manager.
    NotifyShared,
    /// As `Retry`, every client a thread of one shared manager.
    RetryShared,
    /// The fair lock, waiting by notification.
    Fair,
    /// As `Fair`, every client a thread of one shared manager.
    FairShared,
    FloorRetry,
    Node,
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Notify => "notify",
            Driver::Retry => "retry",
            Driver::NotifyShared => "notify, 1 manager",
            Driver::RetryShared => "retry, 1 manager",
            Driver::Fair => "fair",
            Driver::FairShared => "fair, 1 manager",
            Driver::FloorRetry => "floor+retry",
            Driver::Node => "node-redlock",
        }
    }
}

/// One client's grants and releases (CLOCK_MONOTONIC ns).
#[derive(Default)]
struct Trace {
    grants: Vec<u128>,
    releases: Vec<u128>,
}

struct Result {
    grants: usize,
    per_sec: f64,
    gap_p50: Duration,
    gap_p99: Duration,
    /// Handoffs to another client than the one that released: their gap p50, and their share.
    other_p50: Duration,
    other_share: f64,
    fairness: f64,
}

fn summarize(traces: &[Trace], secs: f64) -> Result {
    // Every event in time order: (t, is_grant, client).
    let mut events: Vec<(u128, bool, usize)> = traces
        .iter()
        .enumerate()
        .flat_map(|(c, t)| {
            t.grants
                .iter()
                .map(move |g| (*g, true, c))
                .chain(t.releases.iter().map(move |r| (*r, false, c)))
        })
        .collect();
    events.sort_unstable();
    let mut gaps = Vec::new();
    let mut other = Vec::new();
    let mut last: Option<(u128, bool, usize)> = None;
    for &(t, grant, c) in &events {
        if grant {
            let gap = match last {
                Some((r, false, by)) => Some((Duration::from_nanos((t - r) as u64), by)),
                // Granted before the previous holder's release had returned to it.
                Some((_, true, by)) => Some((Duration::ZERO, by)),
                None => None,
            };
            if let Some((gap, by)) = gap {
                gaps.push(gap);
                if by != c {
                    other.push(gap);
                }
            }
        }
        last = Some((t, grant, c));
    }
    other.sort();
    let other_share = other.len() as f64 / gaps.len().max(1) as f64;
    gaps.sort();
    let counts: Vec<usize> = traces.iter().map(|t| t.grants.len()).collect();
    let grants: usize = counts.iter().sum();
    let max = counts.iter().copied().max().unwrap_or(0) as f64;
    let min = counts.iter().copied().min().unwrap_or(0) as f64;
    Result {
        grants,
        per_sec: grants as f64 / secs,
        gap_p50: percentile(&gaps, 0.5),
        gap_p99: percentile(&gaps, 0.99),
        other_p50: percentile(&other, 0.5),
        other_share,
        fairness: if min > 0.0 { max / min } else { f64::INFINITY },
    }
}

/// One client of a Rust driver, from `start` to `end`.
#[allow(clippy::too_many_arguments)]
fn rust_client(
    driver: Driver,
    urls: &[String],
    ports: &[u16],
    resource: &str,
    hold: Duration,
    think: Duration,
    seed: u64,
    start: Instant,
    end: Instant,
    shared: Option<Redlock>,
) -> Trace {
    let mut trace = Trace::default();
    let ttl = Duration::from_millis(TTL_MS);
    let mut rng = seed | 1;
    let mut pause = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        Duration::from_micros(rng % (DEFAULT_RETRY_DELAY.as_micros() as u64 + 1))
    };
    match driver {
        Driver::Notify
        | Driver::Retry
        | Driver::NotifyShared
        | Driver::RetryShared
        | Driver::Fair
        | Driver::FairShared => {
            let mgr = shared.unwrap_or_else(|| manager(urls));
            let opts = LockOptions::new()
                .wait(Wait::Until(end))
                .notify(!matches!(driver, Driver::Retry | Driver::RetryShared))
                .fair(matches!(driver, Driver::Fair | Driver::FairShared));
            // Connect (and subscribe once) before the start.
            // (Waiting: clients that start together race to write a fresh cluster's markers.)
            let warm = LockOptions::new().wait(Wait::For(Duration::from_secs(5)));
            mgr.acquire(format!("{resource}:warm:{seed}"), ttl, &warm)
                .and_then(|l| l.unlock())
                .expect("warm-up lock");
            thread::sleep(start.saturating_duration_since(Instant::now()));
            while Instant::now() < end {
                let Ok(lease) = mgr.acquire(resource, ttl, &opts) else {
                    continue;
                };
                let t = mono_ns();
                thread::sleep(hold);
                let _ = lease.unlock();
                trace.grants.push(t);
                trace.releases.push(mono_ns());
                thread::sleep(think);
            }
        }
        Driver::FloorRetry => {
            let mut f = floor::Floor::connect(ports, seed);
            let key = format!("redlock:{resource}");
            thread::sleep(start.saturating_duration_since(Instant::now()));
            while Instant::now() < end {
                let Some(token) = f.acquire(&key, TTL_MS) else {
                    thread::sleep(pause());
                    continue;
                };
                let t = mono_ns();
                thread::sleep(hold);
                f.release(&key, &token);
                trace.grants.push(t);
                trace.releases.push(mono_ns());
                thread::sleep(think);
            }
        }
        Driver::Node => unreachable!("node-redlock runs in its own processes"),
    }
    trace
}

fn manager(urls: &[String]) -> Redlock {
    Redlock::new(support::config(urls.to_vec()).node_timeout(Duration::from_millis(200)))
        .expect("manager")
}

/// Whether node-redlock can run here.
fn node_available(root: &str) -> bool {
    Command::new("node")
        .args(["-e", "require('redlock'); require('ioredis')"])
        .current_dir(format!("{root}/examples/bench"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn node_clients(
    clients: usize,
    urls: &[String],
    resource: &str,
    hold: Duration,
    think: Duration,
    secs: f64,
) -> Vec<Trace> {
    let root = env!("CARGO_MANIFEST_DIR");
    let start = mono_ns() + 2_000_000_000; // time for Node to start and connect
    let end = start + (secs * 1e9) as u128;
    let children: Vec<_> = (0..clients)
        .map(|_| {
            Command::new("node")
                .arg(format!("{root}/examples/bench/handoff_node.js"))
                .arg(urls.join(","))
                .arg(resource)
                .arg(start.to_string())
                .arg(end.to_string())
                .arg(hold.as_millis().to_string())
                .arg(TTL_MS.to_string())
                .arg(think.as_millis().to_string())
                .stdout(Stdio::piped())
                .spawn()
                .expect("node")
        })
        .collect();
    let nums =
        |v: &serde_like::Value| -> Vec<u128> { v.iter().filter_map(|s| s.parse().ok()).collect() };
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("node client");
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text.lines().last().unwrap_or("");
            Trace {
                grants: nums(&serde_like::field(line, "grants")),
                releases: nums(&serde_like::field(line, "releases")),
            }
        })
        .collect()
}

/// Just enough JSON for `{"grants":["1","2"],"releases":["3"]}`.
mod serde_like {
    pub type Value = Vec<String>;

    pub fn field(line: &str, name: &str) -> Value {
        let Some(at) = line.find(&format!("\"{name}\":[")) else {
            return Vec::new();
        };
        let rest = &line[at + name.len() + 4..];
        let body = &rest[..rest.find(']').unwrap_or(0)];
        body.split(',')
            .map(|s| s.trim().trim_matches('"').to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// Runs the hot-resource rows and prints their table.
pub fn run(servers: &[u16], secs: f64, clients: &[usize], delays: &[String], thinks: &[u64]) {
    let root = env!("CARGO_MANIFEST_DIR");
    let node = node_available(root);
    println!(
        "\nHot resource, N = 5, TTL {TTL_MS} ms, {secs:.0} s per driver and row; gap = release \
         return to next grant; fairness = most grants / fewest grants of one client{}",
        if node {
            ""
        } else {
            "; node-redlock not found (npm install redlock@4 ioredis@4 in examples/bench)"
        }
    );
    println!(
        "\n| clients | hold | think | delay | driver | grants | grants/s | gap p50 µs | gap p99 µs | gap p50 / RTT | to another client: share, gap p50 µs | fairness | tput / retry |"
    );
    println!("|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut row = 0;
    for &n_clients in clients {
        for (hold_ms, &think_ms) in [0u64, 1]
            .into_iter()
            .flat_map(|h| thinks.iter().map(move |t| (h, t)))
        {
            let think = Duration::from_millis(think_ms);
            for delay in delays {
                let mut proxies = Vec::new();
                let ports = endpoints(servers, 5, delay, &mut proxies);
                let urls: Vec<String> = ports
                    .iter()
                    .map(|p| format!("redis://127.0.0.1:{p}"))
                    .collect();
                let rtt = match delay.as_str() {
                    "1ms" => Some(Duration::from_millis(2)),
                    _ => None,
                };
                let hold = Duration::from_millis(hold_ms);
                let mut drivers = vec![
                    Driver::Notify,
                    Driver::Retry,
                    Driver::NotifyShared,
                    Driver::RetryShared,
                    Driver::Fair,
                    Driver::FairShared,
                    Driver::FloorRetry,
                ];
                if node {
                    drivers.push(Driver::Node);
                }
                let mut results = Vec::new();
                for &driver in &drivers {
                    row += 1;
                    let resource = format!("bench:hot:{row}");
                    let traces = if driver == Driver::Node {
                        node_clients(n_clients, &urls, &resource, hold, think, secs)
                    } else {
                        let start = Instant::now() + Duration::from_millis(500);
                        let end = start + Duration::from_secs_f64(secs);
                        let barrier = Arc::new(Barrier::new(n_clients));
                        let shared = matches!(
                            driver,
                            Driver::NotifyShared | Driver::RetryShared | Driver::FairShared
                        )
                        .then(|| manager(&urls));
                        let out = Arc::new(Mutex::new(Vec::new()));
                        let handles: Vec<_> = (0..n_clients)
                            .map(|c| {
                                let (urls, ports, resource) =
                                    (urls.clone(), ports.clone(), resource.clone());
                                let (barrier, out) = (Arc::clone(&barrier), Arc::clone(&out));
                                let shared = shared.clone();
                                thread::spawn(move || {
                                    barrier.wait();
                                    let t = rust_client(
                                        driver,
                                        &urls,
                                        &ports,
                                        &resource,
                                        hold,
                                        think,
                                        0x9e37_79b9 ^ ((c as u64 + 1) * 7919),
                                        start,
                                        end,
                                        shared,
                                    );
                                    out.lock().unwrap().push(t);
                                })
                            })
                            .collect();
                        for h in handles {
                            h.join().expect("client");
                        }
                        Arc::try_unwrap(out)
                            .ok()
                            .expect("clients done")
                            .into_inner()
                            .unwrap()
                    };
                    results.push((driver, summarize(&traces, secs)));
                }
                let retry_tput = results
                    .iter()
                    .find(|(d, _)| *d == Driver::Retry)
                    .map_or(0.0, |(_, r)| r.per_sec);
                for (driver, r) in results {
                    let in_rtt = rtt.map_or("—".to_string(), |rtt| {
                        format!("{:.2}", r.gap_p50.as_secs_f64() / rtt.as_secs_f64())
                    });
                    let vs = if retry_tput > 0.0 {
                        format!("{:.1}×", r.per_sec / retry_tput)
                    } else {
                        "—".into()
                    };
                    println!(
                        "| {n_clients} | {hold_ms} ms | {think_ms} ms | {delay} | {} | {} | {:.0} | {:.0} | {:.0} | {in_rtt} | {:.0}%, {:.0} | {:.2} | {vs} |",
                        driver.name(),
                        r.grants,
                        r.per_sec,
                        r.gap_p50.as_secs_f64() * 1e6,
                        r.gap_p99.as_secs_f64() * 1e6,
                        r.other_share * 100.0,
                        r.other_p50.as_secs_f64() * 1e6,
                        r.fairness,
                    );
                }
            }
        }
    }
}
