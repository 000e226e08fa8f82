//! Test support: real `redis-server` processes on free loopback ports, started per test and
//! killed (by PID) when dropped, plus a listener that accepts and never answers.
//!
//! Shared by the integration tests and the examples (`#[path]`-included), so not every item is
//! used by every includer.
#![allow(dead_code)] // each test binary and example uses a different subset

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

pub mod proxy;
pub mod redis_cluster;
pub mod sentinel;
pub mod tls;

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// The redis-server program: `$REDIS_SERVER`, or `redis-server` on the PATH.
pub fn redis_server_binary_name() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// Fails loudly (never skips) when `redis-server` is not installed.
pub fn redis_server_binary() -> String {
    let bin = redis_server_binary_name();
    match Command::new(&bin)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => bin,
        _ => panic!(
            "`{bin}` not found: these tests need a real redis-server \
             (apt-get install redis-server, or run .ci/run which installs it)"
        ),
    }
}

/// The `redlock` command-line tool (the `redlock-cli` package's binary, beside this test's
/// in the same target directory and profile), built first if needed: the library's own tests
/// that run it cannot name it with `CARGO_BIN_EXE_redlock`, which only that package's tests
/// have.
pub fn redlock_cli() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().expect("test executable");
            // target/<profile>/deps/<test> -> target/<profile>
            let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
            let release = dir.file_name().is_some_and(|n| n == "release");
            let status = Command::new(env!("CARGO"))
                .args(["build", "--quiet", "-p", "redlock-cli", "--bin", "redlock"])
                .args(release.then_some("--release"))
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo");
            assert!(status.success(), "cargo build -p redlock-cli failed");
            dir.join("redlock")
        })
        .clone()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// One `redis-server` process in its own temporary directory.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    args: Vec<String>,
    /// TLS only, on `port` (`--port 0 --tls-port port`).
    tls: Option<tls::TlsServe>,
}

impl RedisServer {
    /// A server with no persistence.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `["--requirepass", "pw"]`).
    pub fn start_with(args: &[&str]) -> RedisServer {
        RedisServer::start_full(args, None)
    }

    /// A server that serves TLS only (`--port 0 --tls-port P`), as `tls` says.
    pub fn start_tls(tls: &tls::TlsServe) -> RedisServer {
        RedisServer::start_full(&[], Some(tls.clone()))
    }

    /// The same with extra `redis-server` arguments.
    pub fn start_tls_with(tls: &tls::TlsServe, args: &[&str]) -> RedisServer {
        RedisServer::start_full(args, Some(tls.clone()))
    }

    /// A server in cluster mode (`--cluster-enabled yes`) with its cluster bus on a port of
    /// its own, found afresh at each try (a port taken meanwhile fails only that try), and
    /// extra arguments; returns it and its bus port.
    pub fn start_cluster_node(args: &[&str]) -> (RedisServer, u16) {
        for _ in 0..20 {
            let bus = free_port();
            let bus_s = bus.to_string();
            let mut all = vec!["--cluster-enabled", "yes", "--cluster-port", &bus_s];
            all.extend_from_slice(args);
            if let Some(s) = RedisServer::try_start(&all, None, 3) {
                return (s, bus);
            }
        }
        panic!("could not start a cluster node on free ports after 20 tries");
    }

    /// The same, serving TLS only (`tls`).
    pub fn start_cluster_node_tls(tls: &tls::TlsServe, args: &[&str]) -> (RedisServer, u16) {
        for _ in 0..20 {
            let bus = free_port();
            let bus_s = bus.to_string();
            let mut all = vec!["--cluster-enabled", "yes", "--cluster-port", &bus_s];
            all.extend_from_slice(args);
            if let Some(s) = RedisServer::try_start(&all, Some(tls.clone()), 3) {
                return (s, bus);
            }
        }
        panic!("could not start a TLS cluster node on free ports after 20 tries");
    }

    fn start_full(args: &[&str], tls: Option<tls::TlsServe>) -> RedisServer {
        RedisServer::try_start(args, tls, 20)
            .unwrap_or_else(|| panic!("could not start redis-server on a free port after 20 tries"))
    }

    /// Starts a server on a free port, trying `tries` ports; `None` if none worked.
    fn try_start(args: &[&str], tls: Option<tls::TlsServe>, tries: usize) -> Option<RedisServer> {
        let bin = redis_server_binary();
        for _ in 0..tries {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "redlock-test-{}-{}-{port}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).expect("create temp dir");
            let mut s = RedisServer {
                port,
                child: None,
                dir,
                args: args.iter().map(|a| a.to_string()).collect(),
                tls: tls.clone(),
            };
            if s.spawn(&bin) {
                return Some(s);
            }
        }
        None
    }

    fn spawn(&mut self, bin: &str) -> bool {
        let mut cmd = Command::new(bin);
        match &self.tls {
            Some(t) => cmd.args(t.args(self.port)),
            None => cmd.arg("--port").arg(self.port.to_string()),
        };
        cmd.arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(&self.dir)
            .arg("--save")
            .arg("")
            .arg("--daemonize")
            .arg("no")
            .arg("--loglevel")
            .arg("warning")
            .arg("--logfile")
            .arg(self.dir.join("redis.log"));
        if !self.args.iter().any(|a| a == "--appendonly") {
            cmd.arg("--appendonly").arg("no");
        }
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false; // exited: most likely the port was taken meanwhile
            }
            // Our server must answer, not another one that took the port first.
            let up = match &self.tls {
                Some(t) => serves_tls(t, self.port, child.id()),
                None => serves(self.port, child.id()),
            };
            if up {
                self.child = Some(child);
                return true;
            }
            thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// `redis://127.0.0.1:P`, or `rediss://…` for a TLS node.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// How the node serves TLS, if it does.
    pub fn tls(&self) -> Option<&tls::TlsServe> {
        self.tls.as_ref()
    }

    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    fn signal(&self, sig: i32) {
        if let Some(pid) = self.pid() {
            // SAFETY: kill(2) on the PID of a child this helper spawned and has not reaped.
            let rc = unsafe { libc::kill(pid, sig) };
            assert_eq!(rc, 0, "kill({pid}, {sig})");
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same port and directory (what it persisted, if anything, is kept).
    pub fn restart(&mut self) {
        self.kill();
        let bin = redis_server_binary();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn(&bin) {
            assert!(Instant::now() < deadline, "restart on port {}", self.port);
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGSTOP: the kernel still accepts connections, the process answers nothing.
    pub fn pause(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT.
    pub fn resume(&self) {
        self.signal(libc::SIGCONT);
    }

    /// A plain blocking connection for inspecting the node.
    pub fn client(&self) -> redis::Connection {
        self.client_url(&self.url())
    }

    pub fn client_url(&self, url: &str) -> redis::Connection {
        let client = match &self.tls {
            Some(t) => t.client(url),
            None => redis::Client::open(url),
        };
        client
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
            .expect("connect inspection client")
    }

    /// `GET key` as raw bytes.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        redis::cmd("GET")
            .arg(key)
            .query(&mut self.client())
            .expect("GET")
    }

    /// `PTTL key` (-2 absent, -1 no TTL).
    pub fn pttl(&self, key: &[u8]) -> i64 {
        redis::cmd("PTTL")
            .arg(key)
            .query(&mut self.client())
            .expect("PTTL")
    }

    /// `DBSIZE`.
    pub fn dbsize(&self) -> i64 {
        redis::cmd("DBSIZE")
            .query(&mut self.client())
            .expect("DBSIZE")
    }

    /// How many keys the node holds besides restart quarantine's marker.
    pub fn lock_keys(&self) -> i64 {
        let marker: i64 = redis::cmd("EXISTS")
            .arg(redlock::MARKER_KEY)
            .query(&mut self.client())
            .expect("EXISTS");
        self.dbsize() - marker
    }

    /// The server's `run_id`.
    pub fn run_id(&self) -> String {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.client())
            .expect("INFO");
        info.lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .expect("run_id in INFO")
            .trim()
            .to_string()
    }

    /// Writes restart quarantine's marker as a manager that trusts this node would: the node
    /// looks as if the cluster had been in use.
    pub fn mark(&self) {
        redis::cmd("SET")
            .arg(redlock::MARKER_KEY)
            .arg(self.run_id())
            .exec(&mut self.client())
            .expect("SET marker");
    }

    /// The marker's value, if any: the `run_id` of the server it was written to, and its
    /// replication id after a space.
    pub fn marker(&self) -> Option<String> {
        redis::cmd("GET")
            .arg(redlock::MARKER_KEY)
            .query(&mut self.client())
            .expect("GET marker")
    }

    /// The `run_id` the marker names, if there is a marker.
    pub fn marker_run_id(&self) -> Option<String> {
        self.marker()
            .map(|m| m.split(' ').next().unwrap_or_default().to_string())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if self.pid().is_some() {
            // A paused server would not die of SIGKILL before it is continued on some
            // kernels' accounting; continue it first so that wait() returns promptly.
            self.signal(libc::SIGCONT);
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// True when the server answering on `port` is process `pid` (its `INFO` says so) and has
/// finished loading its data (an AOF or RDB file: until then it answers most commands with
/// `LOADING`), or when it requires a password (then it cannot be asked; the caller's
/// `try_wait` has ruled out that our process exited).
fn serves(port: u16, pid: u32) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    // The default sections include both `server` (process_id) and `persistence` (loading).
    if s.write_all(b"INFO\r\n").is_err() {
        return false;
    }
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        if buf.starts_with(b"-NOAUTH") {
            return true;
        }
        // A server started with INFO renamed away (only tests of that do it) cannot show its
        // process id; it answers, and its process is alive.
        if buf.starts_with(b"-ERR unknown command 'INFO'") {
            return true;
        }
        // A bulk string: `$<len>\r\n<len bytes>\r\n`.
        let Some(header_end) = buf.windows(2).position(|w| w == b"\r\n") else {
            continue;
        };
        let Some(len) = std::str::from_utf8(&buf[1..header_end])
            .ok()
            .and_then(|l| l.parse::<usize>().ok())
        else {
            return false; // not a bulk reply (an error, say)
        };
        let body_start = header_end + 2;
        if buf.len() < body_start + len {
            continue;
        }
        let text = String::from_utf8_lossy(&buf[body_start..body_start + len]);
        let has = |line: &str| text.lines().any(|l| l.trim() == line);
        return has(&format!("process_id:{pid}")) && has("loading:0");
    }
    false
}

/// [`serves`] over TLS: the server answering on `port` over TLS is process `pid` and has
/// loaded its data, or requires a password.
fn serves_tls(t: &tls::TlsServe, port: u16, pid: u32) -> bool {
    let Ok(client) = t.client(&format!("rediss://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
    match redis::cmd("INFO").query::<String>(&mut c) {
        Ok(text) => {
            let has = |line: &str| text.lines().any(|l| l.trim() == line);
            has(&format!("process_id:{pid}")) && has("loading:0")
        }
        Err(e) => e.code() == Some("NOAUTH"),
    }
}

/// N servers.
pub struct Cluster {
    pub servers: Vec<RedisServer>,
}

impl Cluster {
    pub fn start(n: usize) -> Cluster {
        let handles: Vec<_> = (0..n).map(|_| thread::spawn(RedisServer::start)).collect();
        Cluster {
            servers: handles.into_iter().map(|h| h.join().unwrap()).collect(),
        }
    }

    /// N servers that serve TLS only, as `tls` says.
    pub fn start_tls(n: usize, tls: &tls::TlsServe) -> Cluster {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let t = tls.clone();
                thread::spawn(move || RedisServer::start_tls(&t))
            })
            .collect();
        Cluster {
            servers: handles.into_iter().map(|h| h.join().unwrap()).collect(),
        }
    }

    /// [`RedisServer::mark`] on every node.
    pub fn mark(&self) {
        for s in &self.servers {
            s.mark();
        }
    }

    pub fn urls(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.url()).collect()
    }

    /// How many nodes hold `key` with exactly `value`.
    pub fn holding(&self, key: &[u8], value: &[u8]) -> usize {
        self.servers
            .iter()
            .filter(|s| s.pid().is_some())
            .filter(|s| s.get(key).as_deref() == Some(value))
            .count()
    }

    /// How many live nodes hold `key` at all.
    pub fn present(&self, key: &[u8]) -> usize {
        self.servers
            .iter()
            .filter(|s| s.pid().is_some())
            .filter(|s| s.get(key).is_some())
            .count()
    }
}

/// A TCP listener that accepts connections and never answers (keeps them open).
pub struct SilentListener {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SilentListener {
    pub fn start() -> SilentListener {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut held = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        SilentListener {
            port,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for SilentListener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Polls `cond` until it holds or `timeout` passes; returns whether it held. Nodes decided
/// after a quorum apply their commands a little later, so assertions about every node wait.
pub fn eventually(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// The default configuration for these nodes: restart quarantine on, as for every user (a
/// cluster the tests have just started is brand-new, so it is trusted at once).
pub fn config<I, S>(nodes: I) -> redlock::Config
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    redlock::Config::new(nodes)
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so timestamps
/// from worker processes and the test can be merged.
pub fn mono_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

/// The most intervals that overlap at one instant.
pub fn most_overlapping(intervals: &[(Instant, Instant)]) -> usize {
    let mut edges: Vec<(Instant, i32)> = Vec::new();
    for (a, b) in intervals {
        if a < b {
            edges.push((*a, 1));
            edges.push((*b, -1));
        }
    }
    // At one instant, ends before starts: touching intervals do not overlap.
    edges.sort();
    let (mut n, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        n += d;
        most = most.max(n);
    }
    most as usize
}

/// A node's own counters, from `INFO everything`: every `field:value` line whose value is a
/// number, and for each `cmdstat_<command>` line (Redis 7 writes `cmdstat_script|load` for a
/// subcommand) its `calls`, under the line's name. Missing counters read as 0.
pub fn info_counters(conn: &mut redis::Connection) -> InfoCounters {
    let info: String = redis::cmd("INFO")
        .arg("everything")
        .query(conn)
        .expect("INFO");
    let mut m = std::collections::HashMap::new();
    for line in info.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = if k.starts_with("cmdstat_") {
            v.split(',').find_map(|f| f.strip_prefix("calls="))
        } else {
            Some(v.trim())
        };
        if let Some(n) = v.and_then(|v| v.parse::<f64>().ok()) {
            m.insert(k.to_string(), n);
        }
    }
    InfoCounters(m)
}

/// See [`info_counters`].
pub struct InfoCounters(std::collections::HashMap<String, f64>);

impl InfoCounters {
    /// The counter `name`, 0 when the node does not report it.
    pub fn get(&self, name: &str) -> f64 {
        self.0.get(name).copied().unwrap_or(0.0)
    }
}
