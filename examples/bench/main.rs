//! Benchmarks redlock beside the one-round-trip floor and a peer, in one run, on local
//! redis-server nodes with injected network delay.
//!
//!     cargo run --release --example bench                 # the full table (about 5 minutes)
//!     cargo run --release --example bench -- --secs 1 --nodes 5 --delays 1ms
//!     cargo run --release --example bench -- --long 1000000   # memory over a long run
//!     cargo run --release --example bench -- --handoff --secs 10   # hot resource (handoff.rs)
//!     cargo run --release --example bench -- --many 1,10,100   # several resources (many.rs)
//!     cargo run --release --example bench -- --semaphore 1,4,64   # semaphores (semaphore.rs)
//!     cargo run --release --example bench -- --scale 1,8,32,64   # scaling, N = 5 (scale.rs)
//!     cargo run --release --example bench -- --cluster 1,2,3   # cluster nodes (cluster.rs)
//!     cargo run --release --example bench -- --tls --nodes 5 --delays none,1ms \
//!         --scenarios uncontended,distinct --drivers floor,redlock   # the same over TLS (tls.rs)
//!
//! Rows: N = 1, 3, 5 nodes × delay (none; 1 ms one-way on every node; mixed 0.5/1/1/2/5 ms,
//! the first N of them) × scenario (one client uncontended; 8 threads contending for one
//! resource; 8 threads on distinct resources) × driver:
//!
//! * `floor`: raw `SET NX PX` to all nodes over non-blocking sockets, returning at quorum,
//!   then the raw release script the same way (see floor.rs) — the physical limit;
//! * `redlock`: this library;
//! * `peer`: the `redlock` crate 2.0.0 from crates.io (sequential, a new connection per
//!   command);
//! * `redlock+tls` (with `--tls`): this library over `rediss://` to nodes that serve TLS only,
//!   beside the plain nodes in the same interleaved rounds, through the same delay proxies; a
//!   last table gives TLS against plain per row (medians of the same run).
//!
//! Every row reports p50 and p99 of one lock+unlock cycle, throughput, the ratio to the floor
//! measured in the same run (p50 for one client, throughput for 8 threads), and client CPU
//! time per cycle (`getrusage(RUSAGE_THREAD)` of the client threads only). Latency is
//! injected by a loopback TCP proxy per node (tests/support/proxy.rs); "none" connects
//! directly.

#[path = "../../tests/support/mod.rs"]
mod support;

mod cluster;
mod floor;
mod handoff;
mod many;
mod scale;
mod semaphore;
mod tls;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use redlock::Redlock;
use support::proxy::DelayProxy;

const MIXED_MS: [f64; 5] = [0.5, 1.0, 1.0, 2.0, 5.0];
const TTL_MS: u64 = 10_000;
const THREADS: usize = 8;
const RETRY_DELAY: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Scenario {
    Uncontended,
    Contended,
    Distinct,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Uncontended => "1 client",
            Scenario::Contended => "8 thr, 1 resource",
            Scenario::Distinct => "8 thr, distinct",
        }
    }
    fn threads(self) -> usize {
        if self == Scenario::Uncontended {
            1
        } else {
            THREADS
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Driver {
    Floor,
    Ours,
    Peer,
    OursTls,
    /// The library with node 0 a failover group (`redis+sentinel://`, one sentinel watching
    /// the same server through the same delay): `--sentinel`.
    OursSentinel,
    /// The same, each grant on the group acknowledged by its replica (`WAIT 1 100`, see
    /// `Config::replica_acks`): `--sentinel` too.
    OursSentinelWait,
}

impl Driver {
    fn name(self) -> &'static str {
        match self {
            Driver::Floor => "floor",
            Driver::Ours => "redlock",
            Driver::Peer => "peer",
            Driver::OursTls => "redlock+tls",
            Driver::OursSentinel => "redlock+sentinel",
            Driver::OursSentinelWait => "redlock+sentinel+wait",
        }
    }
}

/// Raw measurements of one driver in one row, accumulated over interleaved rounds.
#[derive(Default)]
struct Raw {
    lat: Vec<Duration>,
    failures: usize,
    wall: Duration,
    cpu: Duration,
}

struct Row {
    cycles: usize,
    failures: usize,
    p50: Duration,
    p99: Duration,
    per_sec: f64,
    cpu_per_cycle: Duration,
}

impl Raw {
    fn add(&mut self, other: Raw) {
        self.lat.extend(other.lat);
        self.failures += other.failures;
        self.wall += other.wall;
        self.cpu += other.cpu;
    }

    fn row(mut self) -> Row {
        self.lat.sort();
        let cycles = self.lat.len();
        Row {
            cycles,
            failures: self.failures,
            p50: percentile(&self.lat, 0.50),
            p99: percentile(&self.lat, 0.99),
            per_sec: cycles as f64 / self.wall.as_secs_f64().max(1e-9),
            cpu_per_cycle: self.cpu / cycles.max(1) as u32,
        }
    }
}

struct Opts {
    secs: f64,
    nodes: Vec<usize>,
    delays: Vec<String>,
    scenarios: Vec<Scenario>,
    drivers: Vec<Driver>,
    long: Option<u64>,
    bindings: bool,
    rounds: usize,
    handoff: bool,
    clients: Vec<usize>,
    thinks: Vec<u64>,
    delays_given: bool,
    /// `--many`: resource counts for acquire_many rows.
    many: Vec<usize>,
    /// `--semaphore`: permit counts for semaphore rows.
    semaphore: Vec<u32>,
    /// `--tls`: the `redlock+tls` driver beside the others, and the TLS/plain table.
    tls: bool,
    /// `--sentinel`: the `redlock+sentinel` driver beside the others.
    sentinel: bool,
    /// `--scale`: thread counts for the scaling rows (scale.rs).
    scale: Vec<usize>,
    /// `--cluster`: primaries per cluster node for the cluster rows (cluster.rs), and
    /// `--threads` for them.
    cluster: Vec<usize>,
    threads: usize,
}

fn parse() -> Opts {
    let mut o = Opts {
        secs: 2.0,
        nodes: vec![1, 3, 5],
        delays: vec!["none".into(), "1ms".into(), "mixed".into()],
        scenarios: vec![
            Scenario::Uncontended,
            Scenario::Contended,
            Scenario::Distinct,
        ],
        drivers: vec![Driver::Floor, Driver::Ours, Driver::Peer],
        long: None,
        bindings: false,
        rounds: 4,
        handoff: false,
        clients: vec![8, 32],
        thinks: vec![0, 10],
        delays_given: false,
        many: Vec::new(),
        semaphore: Vec::new(),
        tls: false,
        sentinel: false,
        scale: Vec::new(),
        cluster: Vec::new(),
        threads: 32,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut v = || it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--secs" => o.secs = v().parse().expect("--secs"),
            "--nodes" => {
                o.nodes = v()
                    .split(',')
                    .map(|n| n.parse().expect("--nodes"))
                    .collect()
            }
            "--delays" => {
                o.delays = v().split(',').map(str::to_string).collect();
                o.delays_given = true;
            }
            "--handoff" => o.handoff = true,
            "--tls" => o.tls = true,
            "--sentinel" => o.sentinel = true,
            "--scale" => {
                o.scale = v()
                    .split(',')
                    .map(|n| n.parse().expect("--scale"))
                    .collect()
            }
            "--cluster" => {
                o.cluster = v()
                    .split(',')
                    .map(|n| n.parse().expect("--cluster"))
                    .collect()
            }
            "--threads" => o.threads = v().parse().expect("--threads"),
            "--many" => o.many = v().split(',').map(|n| n.parse().expect("--many")).collect(),
            "--semaphore" => {
                o.semaphore = v()
                    .split(',')
                    .map(|n| n.parse().expect("--semaphore"))
                    .collect()
            }
            "--think" => {
                o.thinks = v()
                    .split(',')
                    .map(|n| n.parse().expect("--think"))
                    .collect()
            }
            "--clients" => {
                o.clients = v()
                    .split(',')
                    .map(|n| n.parse().expect("--clients"))
                    .collect()
            }
            "--scenarios" => {
                o.scenarios = v()
                    .split(',')
                    .map(|s| match s {
                        "uncontended" => Scenario::Uncontended,
                        "contended" => Scenario::Contended,
                        "distinct" => Scenario::Distinct,
                        _ => panic!("unknown scenario {s}"),
                    })
                    .collect()
            }
            "--drivers" => {
                o.drivers = v()
                    .split(',')
                    .map(|s| match s {
                        "floor" => Driver::Floor,
                        "redlock" | "ours" => Driver::Ours,
                        "peer" => Driver::Peer,
                        "redlock+tls" => Driver::OursTls,
                        "redlock+sentinel" => Driver::OursSentinel,
                        "redlock+sentinel+wait" => Driver::OursSentinelWait,
                        _ => panic!("unknown driver {s}"),
                    })
                    .collect()
            }
            "--long" => o.long = Some(v().parse().expect("--long")),
            "--rounds" => o.rounds = v().parse::<usize>().expect("--rounds").max(1),
            "--bindings" => o.bindings = true,
            "-h" | "--help" => {
                println!(
                    "options: --secs S --nodes 1,3,5 --delays none,1ms,mixed \
                     --scenarios uncontended,contended,distinct --drivers floor,redlock,peer \
                     --rounds R --long CYCLES --bindings --handoff [--clients 8,32 --think 0,10] \
                     --many 1,10,100 --semaphore 1,4,64 --tls --sentinel --scale 1,8,32,64 \
                     --cluster 1,2,3 [--threads 32]"
                );
                std::process::exit(0);
            }
            _ => panic!("unknown option {a}"),
        }
    }
    o
}

/// This thread's CPU time: (user, system).
fn thread_cpu() -> (Duration, Duration) {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the rusage struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// The ports a driver connects to for N nodes and a delay profile, keeping the proxies alive.
fn endpoints(servers: &[u16], n: usize, delay: &str, proxies: &mut Vec<DelayProxy>) -> Vec<u16> {
    let delays: Vec<f64> = match delay {
        "none" => return servers[..n].to_vec(),
        "1ms" => vec![1.0; n],
        "mixed" => MIXED_MS[..n].to_vec(),
        other => panic!("unknown delay profile {other}"),
    };
    servers[..n]
        .iter()
        .zip(delays)
        .map(|(&port, ms)| {
            let p = DelayProxy::start(port, Duration::from_secs_f64(ms / 1000.0));
            let port = p.port;
            proxies.push(p);
            port
        })
        .collect()
}

/// Runs one driver for `secs`: `threads` client threads, each doing cycles until the time is
/// up.
fn run_row(driver: Driver, scenario: Scenario, ports: &[u16], secs: f64, tag: &str) -> Raw {
    run_row_with(driver, scenario, ports, secs, tag, None)
}

/// [`run_row`], with node 0's URL replaced by `first` (a failover group's) when given.
fn run_row_with(
    driver: Driver,
    scenario: Scenario,
    ports: &[u16],
    secs: f64,
    tag: &str,
    first: Option<&str>,
) -> Raw {
    let scheme = if driver == Driver::OursTls {
        "rediss"
    } else {
        "redis"
    };
    let mut urls: Vec<String> = ports
        .iter()
        .map(|p| format!("{scheme}://127.0.0.1:{p}"))
        .collect();
    if let Some(f) = first {
        urls[0] = f.to_string();
    }
    let ours = matches!(
        driver,
        Driver::Ours | Driver::OursTls | Driver::OursSentinel | Driver::OursSentinelWait
    )
    .then(|| {
        let mut c = support::config(urls.clone())
            .tls(tls::options())
            .retry_delay(RETRY_DELAY)
            // Long enough that a 5 ms node is never timed out by a slow machine.
            .node_timeout(Duration::from_millis(200));
        if driver == Driver::OursSentinelWait {
            c = c.replica_acks(1, Duration::from_millis(100));
        }
        Redlock::new(c).expect("manager")
    });
    let threads = scenario.threads();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let urls = urls.clone();
            let ports = ports.to_vec();
            let ours = ours.clone();
            let barrier = Arc::clone(&barrier);
            let tag = tag.to_string();
            thread::Builder::new()
                .name(format!("client{t}"))
                .spawn(move || {
                    let resource = match scenario {
                        Scenario::Contended => format!("bench:{tag}"),
                        _ => format!("bench:{tag}:{t}"),
                    };
                    let mut floor = (driver == Driver::Floor)
                        .then(|| floor::Floor::connect(&ports, 0x9e37_79b9 ^ t as u64));
                    let mut peer = (driver == Driver::Peer).then(|| {
                        let mut p = redlock_peer::RedLock::new(urls.clone());
                        p.set_retry(1, 1);
                        p
                    });
                    let mut rng = 0x1234_5678_u64 + t as u64;
                    let mut jitter = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        Duration::from_micros(rng % (RETRY_DELAY.as_micros() as u64 + 1))
                    };
                    let contended = scenario == Scenario::Contended;
                    let mut lat = Vec::new();
                    let mut failures = 0;
                    barrier.wait();
                    let cpu0 = thread_cpu();
                    let start = Instant::now();
                    let end = start + Duration::from_secs_f64(secs);
                    while Instant::now() < end && lat.len() < 200_000 {
                        let t0 = Instant::now();
                        let ok = loop {
                            let got = match driver {
                                Driver::Floor => floor.as_mut().unwrap().cycle(&resource, TTL_MS),
                                Driver::Ours
                                | Driver::OursTls
                                | Driver::OursSentinel
                                | Driver::OursSentinelWait => match ours
                                    .as_ref()
                                    .unwrap()
                                    .try_lock(&resource, Duration::from_millis(TTL_MS))
                                {
                                    Ok(l) => l.unlock().is_ok(),
                                    Err(_) => false,
                                },
                                Driver::Peer => {
                                    let p = peer.as_mut().unwrap();
                                    match p.lock(resource.as_bytes(), TTL_MS as usize) {
                                        Ok(Some(l)) => {
                                            p.unlock(&l);
                                            true
                                        }
                                        _ => false,
                                    }
                                }
                            };
                            if got || !contended || Instant::now() > end {
                                break got;
                            }
                            thread::sleep(jitter());
                        };
                        if ok {
                            lat.push(t0.elapsed());
                        } else {
                            failures += 1;
                        }
                    }
                    let wall = start.elapsed();
                    let cpu1 = thread_cpu();
                    (lat, failures, wall, (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1))
                })
                .expect("spawn client thread")
        })
        .collect();
    let mut raw = Raw::default();
    for h in handles {
        let (l, f, w, c) = h.join().expect("client thread");
        raw.lat.extend(l);
        raw.failures += f;
        raw.wall = raw.wall.max(w);
        // user/system split from getrusage is tick-sampled; only the sum is accurate.
        raw.cpu += c.0 + c.1;
    }
    raw
}

fn us(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let redis = Command::new(support::redis_server_binary())
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .nth(2)
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default();
    format!("{cores} cores ({cpu}), Linux {kernel}, redis-server {redis}")
}

/// The p50 and p99 of one plain `SET` round trip to one node over a blocking connection: the
/// unit every lock+unlock cycle is made of (two such round trips, done on N nodes at once).
fn set_rtt(port: u16, n: usize) -> (Duration, Duration) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_nodelay(true).unwrap();
    let cmd = b"*3\r\n$3\r\nSET\r\n$9\r\nbench:rtt\r\n$1\r\nx\r\n";
    let mut buf = [0u8; 64];
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        s.write_all(cmd).unwrap();
        let mut got = 0;
        while !buf[..got].ends_with(b"\r\n") {
            got += s.read(&mut buf[got..]).unwrap();
        }
        lat.push(t.elapsed());
    }
    lat.sort();
    (percentile(&lat, 0.5), percentile(&lat, 0.99))
}

fn rss_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn long_run(servers: &[u16], cycles: u64) {
    let mgr = Redlock::new(support::config([format!(
        "redis://127.0.0.1:{}",
        servers[0]
    )]))
    .unwrap();
    println!("\nMemory over {cycles} uncontended cycles, N = 1, no delay:");
    println!("| cycles | VmRSS (KiB) | VmHWM (KiB) |\n|---:|---:|---:|");
    let start = Instant::now();
    let mut next = 1_000;
    for i in 1..=cycles {
        mgr.try_lock("bench:long", Duration::from_secs(10))
            .expect("lock")
            .unlock()
            .expect("unlock");
        if i == next || i == cycles {
            println!("| {i} | {} | {} |", rss_kib("VmRSS:"), rss_kib("VmHWM:"));
            next *= 10;
        }
    }
    println!(
        "({:.1} s, {:.0} cycles/s)",
        start.elapsed().as_secs_f64(),
        cycles as f64 / start.elapsed().as_secs_f64()
    );
}

/// The Node binding's addon for its cycle program (`bindings/node/bench/cycle.mjs`), or why
/// the Node row is skipped: `node` must run, and the addon must be built (`npm install` in
/// `bindings/node`, or `cargo build --release` there; `$REDLOCK_NODE_ADDON` names another).
fn node_addon(root: &str) -> Result<String, String> {
    match Command::new("node").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => return Err("`node` is not on PATH".into()),
    }
    let built = [
        format!("{root}/bindings/node/redlock.node"),
        format!("{root}/bindings/node/target/release/libredlock_node.so"),
        format!("{root}/target/release/libredlock_node.so"),
    ];
    std::env::var("REDLOCK_NODE_ADDON")
        .ok()
        .into_iter()
        .chain(built)
        .find(|p| std::path::Path::new(p).is_file())
        .ok_or_else(|| "its addon is not built (`npm install` in bindings/node builds it)".into())
}

/// Runs an external binding benchmark (Python, Go or Node) that prints one JSON line with
/// `cycles`, `p50_us` and `p99_us`.
fn binding_row(cmd: &mut Command) -> Option<(usize, f64, f64)> {
    let out = cmd.output().ok()?;
    if !out.status.success() {
        eprintln!(
            "binding benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    let line = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()?
        .to_string();
    let field = |k: &str| -> Option<f64> {
        let at = line.find(&format!("\"{k}\""))?;
        let rest = &line[at + k.len() + 3..];
        rest.trim_start_matches([':', ' '])
            .split([',', '}'])
            .next()?
            .trim()
            .parse()
            .ok()
    };
    Some((
        field("cycles")? as usize,
        field("p50_us")?,
        field("p99_us")?,
    ))
}

fn bindings(servers: &[u16], secs: f64) {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut proxies = Vec::new();
    let ports = endpoints(servers, 5, "1ms", &mut proxies);
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("redis://127.0.0.1:{p}"))
        .collect();
    let rust = run_row(
        Driver::Ours,
        Scenario::Uncontended,
        &ports,
        secs,
        "bind-rust",
    )
    .row();
    println!("\nBinding overhead, one client, N = 5, 1 ms one-way delay:");
    println!("| binding | cycles | p50 µs | p99 µs | p50 / Rust |\n|---|---:|---:|---:|---:|");
    println!(
        "| Rust | {} | {} | {} | 1.00 |",
        rust.cycles,
        us(rust.p50),
        us(rust.p99)
    );
    let lib = format!("{root}/target/release/libredlock.so");
    let py = binding_row(
        Command::new("python3")
            .arg(format!("{root}/bindings/python/bench_cycle.py"))
            .args(["--secs", &secs.to_string(), "--nodes", &urls.join(",")])
            .env("REDLOCK_LIB", &lib)
            .env("PYTHONPATH", format!("{root}/bindings/python")),
    );
    let go = binding_row(
        Command::new("go")
            .current_dir(format!("{root}/bindings/go"))
            .args(["run", "./cmd/bench-cycle", "--secs", &secs.to_string()])
            .args(["--nodes", &urls.join(",")]),
    );
    let mut rows = vec![("Python", py), ("Go", go)];
    let mut notes = Vec::new();
    match node_addon(root) {
        Ok(addon) => rows.push((
            "Node",
            binding_row(
                Command::new("node")
                    .arg(format!("{root}/bindings/node/bench/cycle.mjs"))
                    .args(["--secs", &secs.to_string(), "--nodes", &urls.join(",")])
                    .env("REDLOCK_NODE_ADDON", addon),
            ),
        )),
        Err(why) => notes.push(format!("Node: skipped, {why}.")),
    }
    for (name, r) in rows {
        match r {
            Some((cycles, p50, p99)) => println!(
                "| {name} | {cycles} | {p50:.0} | {p99:.0} | {:.2} |",
                p50 / (rust.p50.as_secs_f64() * 1e6)
            ),
            None => println!("| {name} | — | — | — | (benchmark program missing or failed) |"),
        }
    }
    for n in notes {
        println!("{n}");
    }
}

fn main() {
    let o = parse();
    println!("machine: {}", machine());
    if !o.cluster.is_empty() {
        cluster::run(o.secs, o.rounds, &o.cluster, o.threads);
        return;
    }
    let max_n = o.nodes.iter().copied().max().unwrap_or(5).max(5);
    let cluster = support::Cluster::start(max_n);
    let servers: Vec<u16> = cluster.servers.iter().map(|s| s.port).collect();
    let mut drivers = o.drivers.clone();
    // With --tls: as many nodes again, serving TLS only, for the redlock+tls driver.
    let tls_cluster = o.tls.then(|| {
        if !drivers.contains(&Driver::OursTls) {
            drivers.push(Driver::OursTls);
        }
        tls::start(max_n)
    });
    // With --sentinel: node 0's server gets a replica (for the WAIT driver), and both
    // failover-group drivers run beside the others.
    let _replica = o.sentinel.then(|| {
        for d in [Driver::OursSentinel, Driver::OursSentinelWait] {
            if !drivers.contains(&d) {
                drivers.push(d);
            }
        }
        let port = servers[0].to_string();
        support::RedisServer::start_with(&["--replicaof", "127.0.0.1", &port])
    });
    let tls_servers: Vec<u16> = tls_cluster
        .iter()
        .flat_map(|c| c.servers.iter().map(|s| s.port))
        .collect();
    let mut tls_rows = Vec::new();
    if let Some(cycles) = o.long {
        long_run(&servers, cycles);
        return;
    }
    if o.bindings {
        bindings(&servers, o.secs);
        return;
    }
    if !o.many.is_empty() {
        let delays = if o.delays_given {
            o.delays.clone()
        } else {
            vec!["none".into(), "1ms".into()]
        };
        many::run(&servers, o.secs, o.rounds, &delays, &o.many);
        return;
    }
    if !o.semaphore.is_empty() {
        let delays = if o.delays_given {
            o.delays.clone()
        } else {
            vec!["none".into(), "1ms".into()]
        };
        semaphore::run(&servers, o.secs, o.rounds, &delays, &o.semaphore);
        return;
    }
    if !o.scale.is_empty() {
        scale::run(&servers, o.secs, o.rounds, &o.scale);
        return;
    }
    if o.handoff {
        let delays = if o.delays_given {
            o.delays.clone()
        } else {
            vec!["none".into(), "1ms".into()]
        };
        handoff::run(&servers, o.secs, &o.clients, &delays, &o.thinks);
        return;
    }
    let (rtt50, rtt99) = set_rtt(servers[0], 5000);
    println!(
        "one plain SET round trip (blocking, one node, no delay): p50 {} µs, p99 {} µs",
        us(rtt50),
        us(rtt99)
    );
    println!(
        "each row: {:.1} s per driver in {} interleaved rounds; TTL {TTL_MS} ms; retry delay \
         for contention {} ms (all drivers); p50/p99 of one lock+unlock cycle",
        o.secs,
        o.rounds,
        RETRY_DELAY.as_millis()
    );
    println!(
        "\n| N | delay | scenario | driver | cycles | p50 µs | p99 µs | cycles/s | vs floor | client CPU µs/cycle |"
    );
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|");
    let mut row_id = 0;
    for &n in &o.nodes {
        for delay in &o.delays {
            let mut proxies = Vec::new();
            let ports = endpoints(&servers, n, delay, &mut proxies);
            let tls_ports = if o.tls {
                endpoints(&tls_servers, n, delay, &mut proxies)
            } else {
                Vec::new()
            };
            // A sentinel that names node 0's endpoint (through its delay) as its master.
            let sentinel = o
                .sentinel
                .then(|| support::sentinel::Sentinel::start("bench", ports[0], 1));
            let group = sentinel
                .as_ref()
                .map(|s| format!("redis+sentinel://{}/bench", s.host_port()));
            for &scenario in &o.scenarios {
                // Drivers take turns in short rounds, so that drift on a busy machine (other
                // processes, thermal state) hits them alike.
                let mut raws: BTreeMap<Driver, Raw> = BTreeMap::new();
                for round in 0..o.rounds {
                    for &driver in &drivers {
                        row_id += 1;
                        let tag = format!("r{row_id}");
                        let chunk = o.secs / o.rounds as f64;
                        let p = if driver == Driver::OursTls {
                            &tls_ports
                        } else {
                            &ports
                        };
                        let first = group.as_deref().filter(|_| {
                            matches!(driver, Driver::OursSentinel | Driver::OursSentinelWait)
                        });
                        let r = run_row_with(driver, scenario, p, chunk, &tag, first);
                        raws.entry(driver).or_default().add(r);
                        let _ = round;
                    }
                }
                let results: BTreeMap<Driver, Row> =
                    raws.into_iter().map(|(d, r)| (d, r.row())).collect();
                if let (Some(plain), Some(over)) =
                    (results.get(&Driver::Ours), results.get(&Driver::OursTls))
                {
                    tls_rows.push(tls::Compared::new(n, delay, scenario.name(), plain, over));
                }
                let floor_ref = results.get(&Driver::Floor).map(|r| (r.p50, r.per_sec));
                for (driver, r) in results {
                    let ratio = match (floor_ref, scenario) {
                        (Some((p50, _)), Scenario::Uncontended) if !p50.is_zero() => {
                            format!("{:.2}× p50", r.p50.as_secs_f64() / p50.as_secs_f64())
                        }
                        (Some((_, tput)), _) if tput > 0.0 => {
                            format!("{:.2}× tput", r.per_sec / tput)
                        }
                        _ => "—".into(),
                    };
                    let fails = if r.failures > 0 {
                        format!(" ({} failed)", r.failures)
                    } else {
                        String::new()
                    };
                    println!(
                        "| {n} | {delay} | {} | {} | {}{fails} | {} | {} | {:.0} | {ratio} | {:.1} |",
                        scenario.name(),
                        driver.name(),
                        r.cycles,
                        us(r.p50),
                        us(r.p99),
                        r.per_sec,
                        r.cpu_per_cycle.as_secs_f64() * 1e6
                    );
                }
            }
        }
    }
    if o.tls {
        tls::summary(&tls_rows);
    }
}
