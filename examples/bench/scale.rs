//! The scaling rows (`--scale`): T client threads of one process on N = 5 nodes with no
//! injected delay, on distinct resources and on one resource, this library beside the ideal
//! client of floor.rs (one connection per thread per node, one command per connection per
//! round trip), interleaved in short rounds of one run. Besides throughput and latency, each
//! row reads the nodes' own counters (`INFO`) before and after, so that what the servers did
//! shows next to what the clients saw:
//!
//! * server CPU per cycle: the nodes' `used_cpu_user + used_cpu_sys`, summed, per cycle;
//! * commands per server read: the clients' commands (`SET`, `PTTL`, `EXISTS`, `EVAL`,
//!   `EVALSHA` in `INFO commandstats`; these rows run no script that calls them) over
//!   `total_reads_processed`, the
//!   batching the server sees: 1.0 when every command arrives in a read of its own;
//! * connections the nodes accepted, and `SCRIPT LOAD`s they served, during the measured part
//!   (after every client's warm-up cycles): both 0 for a client that keeps its connections;
//! * attempts per cycle on one resource: every attempt, granted or not, over the cycles.
//!
//! Drivers: `floor` (the ideal client; on one resource it retries after a random pause of up
//! to 1 ms), `redlock` (this library, one manager shared by every thread; on one resource
//! `try_lock` with the same pauses) and, on one resource only, `redlock notify` (waiting by
//! notification: `Wait::Until` the end of the run).

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{LockOptions, Redlock, Wait};

use crate::{floor, percentile, support, thread_cpu, us};

const TTL_MS: u64 = 10_000;
const RETRY_DELAY: Duration = Duration::from_millis(1);
/// Cycles every client does before the measured part: connections and scripts are set up.
const WARMUP_CYCLES: usize = 20;
/// At most this many cycles per client and round (a bound on every loop).
const MAX_CYCLES: usize = 1_000_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Driver {
    Floor,
    Ours,
    OursNotify,
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Floor => "floor",
            Driver::Ours => "redlock",
            Driver::OursNotify => "redlock notify",
        }
    }
}

/// The counters read from one node's `INFO`.
#[derive(Clone, Copy, Default, Debug)]
struct NodeStats {
    cpu: f64,
    commands: u64,
    reads: u64,
    connections: u64,
    script_calls: u64,
}

fn node_stats(conn: &mut redis::Connection) -> NodeStats {
    let c = support::info_counters(conn);
    let n = |k: &str| c.get(k) as u64;
    NodeStats {
        cpu: c.get("used_cpu_user") + c.get("used_cpu_sys"),
        // The commands a client sends in these rows (a script's own redis.call()s count in
        // total_commands_processed and in their own cmdstat lines: not here).
        commands: ["set", "pttl", "exists", "eval", "evalsha"]
            .iter()
            .map(|c| n(&format!("cmdstat_{c}")))
            .sum(),
        reads: n("total_reads_processed"),
        connections: n("total_connections_received"),
        // Redis 7 counts each SCRIPT subcommand on a line of its own; older servers count
        // every SCRIPT command on one.
        script_calls: n("cmdstat_script|load") + n("cmdstat_script"),
    }
}

/// The nodes' counters summed.
fn cluster_stats(conns: &mut [redis::Connection]) -> NodeStats {
    let mut t = NodeStats::default();
    for c in conns {
        let s = node_stats(c);
        t.cpu += s.cpu;
        t.commands += s.commands;
        t.reads += s.reads;
        t.connections += s.connections;
        t.script_calls += s.script_calls;
    }
    t
}

#[derive(Default)]
struct Raw {
    lat: Vec<Duration>,
    attempts: u64,
    wall: Duration,
    client_cpu: Duration,
    server_cpu: f64,
    commands: u64,
    reads: u64,
    connections: u64,
    script_calls: u64,
}

impl Raw {
    fn add(&mut self, o: Raw) {
        self.lat.extend(o.lat);
        self.attempts += o.attempts;
        self.wall += o.wall;
        self.client_cpu += o.client_cpu;
        self.server_cpu += o.server_cpu;
        self.commands += o.commands;
        self.reads += o.reads;
        self.connections += o.connections;
        self.script_calls += o.script_calls;
    }
    fn per_sec(&self) -> f64 {
        self.lat.len() as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// One client thread's loop: warm-up, the barrier, then cycles until `end`.
#[allow(clippy::too_many_arguments)] // one bench loop's knobs
fn client(
    driver: Driver,
    t: usize,
    one: bool,
    tag: &str,
    ports: &[u16],
    ours: Option<Redlock>,
    start: &Barrier,
    secs: f64,
) -> (Vec<Duration>, u64, Duration, Duration) {
    let resource = if one {
        format!("scale:{tag}")
    } else {
        format!("scale:{tag}:{t}")
    };
    let mut floor =
        (driver == Driver::Floor).then(|| floor::Floor::connect(ports, 0x9e37 ^ t as u64));
    let mut rng = 0x2545_f491_u64 + t as u64;
    let mut pause = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        thread::sleep(Duration::from_micros(
            rng % (RETRY_DELAY.as_micros() as u64 + 1),
        ));
    };
    let notify_opts = |end: Instant| LockOptions::new().wait(Wait::Until(end));
    // One attempt (or, waiting by notification, one acquisition): granted and released?
    let mut attempt = |end: Instant| -> bool {
        match driver {
            Driver::Floor => floor.as_mut().expect("floor").cycle(&resource, TTL_MS),
            Driver::Ours => match ours
                .as_ref()
                .expect("manager")
                .try_lock(&resource, Duration::from_millis(TTL_MS))
            {
                Ok(l) => l.unlock().is_ok(),
                Err(_) => false,
            },
            Driver::OursNotify => match ours.as_ref().expect("manager").acquire(
                &resource,
                Duration::from_millis(TTL_MS),
                &notify_opts(end),
            ) {
                Ok(l) => l.unlock().is_ok(),
                Err(_) => false,
            },
        }
    };
    // Warm-up: connections, handshakes and scripts, before anything is counted.
    let warm_end = Instant::now() + Duration::from_secs(10);
    let mut warm = 0;
    while warm < WARMUP_CYCLES && Instant::now() < warm_end {
        if attempt(warm_end) {
            warm += 1;
        } else {
            pause();
        }
    }
    start.wait(); // every client warm: the counters are read now
    start.wait(); // …and read: go
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut lat = Vec::new();
    let mut attempts = 0u64;
    while Instant::now() < end && lat.len() < MAX_CYCLES {
        let c0 = Instant::now();
        loop {
            attempts += 1;
            if attempt(end) {
                lat.push(c0.elapsed());
                break;
            }
            if Instant::now() >= end {
                break;
            }
            if driver != Driver::OursNotify {
                pause();
            }
        }
    }
    let wall = t0.elapsed();
    let cpu1 = thread_cpu();
    (lat, attempts, wall, (cpu1.0 - cpu0.0) + (cpu1.1 - cpu0.1))
}

/// One driver, one row, one round.
fn run_once(
    driver: Driver,
    threads: usize,
    one: bool,
    tag: &str,
    ports: &[u16],
    stats: &mut [redis::Connection],
    secs: f64,
) -> Raw {
    let ours = (driver != Driver::Floor).then(|| {
        let urls = ports.iter().map(|p| format!("redis://127.0.0.1:{p}"));
        Redlock::new(
            support::config(urls)
                .retry_delay(RETRY_DELAY)
                .node_timeout(Duration::from_millis(200)),
        )
        .expect("manager")
    });
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (ours, barrier, ports, tag) = (
                ours.clone(),
                Arc::clone(&barrier),
                ports.to_vec(),
                tag.to_string(),
            );
            thread::Builder::new()
                .name(format!("scale{t}"))
                .spawn(move || client(driver, t, one, &tag, &ports, ours, &barrier, secs))
                .expect("spawn")
        })
        .collect();
    barrier.wait();
    let before = cluster_stats(stats);
    barrier.wait();
    let mut raw = Raw::default();
    for h in handles {
        let (lat, attempts, wall, cpu) = h.join().expect("client thread");
        raw.lat.extend(lat);
        raw.attempts += attempts;
        raw.wall = raw.wall.max(wall);
        raw.client_cpu += cpu;
    }
    let after = cluster_stats(stats);
    raw.server_cpu = after.cpu - before.cpu;
    raw.commands = after.commands - before.commands;
    raw.reads = after.reads - before.reads;
    // The stats connections' own INFO is one command and one read per node per reading.
    raw.connections = after.connections - before.connections;
    raw.script_calls = after.script_calls - before.script_calls;
    raw
}

/// `--scale 1,8,32,64`: the rows for each thread count, distinct resources then one resource.
pub fn run(servers: &[u16], secs: f64, rounds: usize, threads: &[usize]) {
    let ports = &servers[..5];
    let mut stats: Vec<redis::Connection> = ports
        .iter()
        .map(|p| {
            redis::Client::open(format!("redis://127.0.0.1:{p}"))
                .and_then(|c| c.get_connection())
                .expect("stats connection")
        })
        .collect();
    println!(
        "\nScaling: N = 5, no injected delay, T threads of one process; {secs:.1} s per driver \
         and row in {rounds} interleaved rounds; on one resource a refused attempt pauses up to \
         {} ms (floor, redlock). Server figures are the nodes' own counters (INFO), summed \
         over the 5 nodes, during the measured part only.",
        RETRY_DELAY.as_millis()
    );
    println!(
        "\n| threads | resources | driver | cycles/s | tput vs floor | p50 µs | p50 vs floor | p99 µs | attempts/cycle \
         | client CPU µs/cycle | server CPU µs/cycle | commands/server read | connections opened \
         | SCRIPT LOADs |"
    );
    println!("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut id = 0;
    for one in [false, true] {
        for &t in threads {
            if one && t < 2 {
                continue;
            }
            let drivers: &[Driver] = if one {
                &[Driver::Floor, Driver::Ours, Driver::OursNotify]
            } else {
                &[Driver::Floor, Driver::Ours]
            };
            // BENCH_SCALE_ONLY=redlock (or floor): that driver alone, for a profiler or strace
            // (its "vs floor" columns then compare it with itself).
            let only = std::env::var("BENCH_SCALE_ONLY").ok();
            let drivers: Vec<Driver> = drivers
                .iter()
                .copied()
                .filter(|d| only.as_deref().is_none_or(|o| o == d.name()))
                .collect();
            if drivers.is_empty() {
                continue;
            }
            let mut raws: Vec<Raw> = drivers.iter().map(|_| Raw::default()).collect();
            for _ in 0..rounds {
                for (d, raw) in drivers.iter().zip(raws.iter_mut()) {
                    id += 1;
                    let tag = format!("s{id}");
                    raw.add(run_once(
                        *d,
                        t,
                        one,
                        &tag,
                        ports,
                        &mut stats,
                        secs / rounds as f64,
                    ));
                }
            }
            let floor_tput = raws[0].per_sec();
            for r in &mut raws {
                r.lat.sort();
            }
            let floor_p50 = percentile(&raws[0].lat, 0.5).as_secs_f64();
            for (d, r) in drivers.iter().zip(raws) {
                let cycles = r.lat.len().max(1) as f64;
                println!(
                    "| {t} | {} | {} | {:.0} | {:.2}× | {} | {:.2}× | {} | {:.2} | {:.1} | {:.1} | {:.2} | {} | {} |",
                    if one { "one" } else { "distinct" },
                    d.name(),
                    r.per_sec(),
                    r.per_sec() / floor_tput.max(1e-9),
                    us(percentile(&r.lat, 0.5)),
                    percentile(&r.lat, 0.5).as_secs_f64() / floor_p50.max(1e-12),
                    us(percentile(&r.lat, 0.99)),
                    r.attempts as f64 / cycles,
                    r.client_cpu.as_secs_f64() * 1e6 / cycles,
                    r.server_cpu * 1e6 / cycles,
                    r.commands as f64 / r.reads.max(1) as f64,
                    r.connections,
                    r.script_calls,
                );
            }
        }
    }
}
