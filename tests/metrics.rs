//! Metrics: the Prometheus text parses, and its counters match what the test did; the Rust and
//! C example servers (examples/metrics_server.rs, bindings/c/metrics_server.c) serve it over
//! HTTP at /metrics.

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Error, Redlock, RenewOptions};
use support::Cluster;

/// A strict reader of the Prometheus text exposition format (0.0.4): every line is a
/// `# HELP`, a `# TYPE` (counter, gauge or histogram) or a sample of a declared family, with
/// well-formed labels and a float value. Returns samples keyed by `name{labels}`.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line:?}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(valid_name(name), "{}", at("bad HELP name"));
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut f = rest.split(' ');
            let (name, kind) = (f.next().unwrap(), f.next().expect("a type"));
            assert!(valid_name(name), "{}", at("bad TYPE name"));
            assert!(
                ["counter", "gauge", "histogram"].contains(&kind),
                "{}",
                at("bad type")
            );
            assert!(
                types.insert(name.into(), kind.into()).is_none(),
                "{}",
                at("TYPE twice")
            );
            continue;
        }
        assert!(!line.starts_with('#'), "{}", at("unknown comment"));
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let v: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("{}", at("bad value")));
        let name = series.split('{').next().unwrap();
        assert!(valid_name(name), "{}", at("bad sample name"));
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(
            types.contains_key(family),
            "{}",
            at("sample before its TYPE")
        );
        if let Some(labels) = series.strip_prefix(name)
            && !labels.is_empty()
        {
            let inner = labels
                .strip_prefix('{')
                .and_then(|l| l.strip_suffix('}'))
                .unwrap_or_else(|| panic!("{}", at("bad label braces")));
            check_labels(inner, &at("bad labels"));
        }
        assert!(
            samples.insert(series.to_string(), v).is_none(),
            "{}",
            at("duplicate")
        );
    }
    samples
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
        && !n.starts_with(|c: char| c.is_ascii_digit())
}

fn check_labels(mut s: &str, err: &str) {
    while !s.is_empty() {
        let (k, rest) = s.split_once("=\"").unwrap_or_else(|| panic!("{err}"));
        assert!(valid_name(k), "{err}");
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.char_indices() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end.unwrap_or_else(|| panic!("{err}"));
        s = rest[end + 1..]
            .strip_prefix(',')
            .unwrap_or(&rest[end + 1..]);
    }
}

#[test]
fn the_prometheus_text_parses_and_counts_what_happened() {
    let mut cluster = Cluster::start(3);
    let mgr = Redlock::new(
        support::config(cluster.urls())
            .retry_count(2)
            .retry_delay(Duration::from_millis(5))
            // Generous, so that a busy machine never times a healthy node out nor declares
            // its connection stale: the counts below (attempts, one connection per node)
            // would change.
            .node_timeout(Duration::from_secs(2))
            .stale_limit(Duration::from_secs(30)),
    )
    .unwrap();
    // 5 grants, unlocked; 1 extension.
    for i in 0..5 {
        let l = mgr
            .try_lock(format!("m{i}"), Duration::from_secs(5))
            .unwrap();
        if i == 0 {
            l.extend(Duration::from_secs(5)).unwrap();
        }
        l.unlock().unwrap();
    }
    // Held elsewhere: one lock call with 2 retries (3 attempts) ends not acquired.
    let held = mgr.try_lock("busy", Duration::from_secs(5)).unwrap();
    assert!(matches!(
        mgr.lock("busy", Duration::from_secs(5)),
        Err(Error::NotAcquired(_))
    ));
    // A double unlock counts as not held; bad input is counted too.
    held.unlock().unwrap();
    assert!(held.unlock().is_err());
    assert!(mgr.try_lock("", Duration::from_secs(1)).is_err());
    // A renewed lease (1 s: a renewal late by most of a second on a busy machine is not a
    // loss), until it has been renewed.
    let r = mgr.try_lock("renewed", Duration::from_secs(1)).unwrap();
    r.auto_renew(RenewOptions::new()).unwrap();
    let renewed = std::time::Instant::now();
    while mgr.renewal_stats().renewed == 0 {
        assert!(renewed.elapsed() < Duration::from_secs(10), "never renewed");
        std::thread::sleep(Duration::from_millis(20));
    }
    r.unlock().unwrap();
    // One node down for one attempt.
    cluster.servers[2].kill();
    mgr.try_lock("down", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();

    let m = mgr.metrics();
    let text = m.to_prometheus();
    let s = parse(&text);
    let get = |k: &str| {
        *s.get(k)
            .unwrap_or_else(|| panic!("{k} missing from\n{text}"))
    };
    assert_eq!(get(r#"redlock_acquire_total{result="granted"}"#), 8.0);
    assert_eq!(get(r#"redlock_acquire_total{result="not_acquired"}"#), 1.0);
    assert_eq!(get(r#"redlock_acquire_total{result="invalid_input"}"#), 1.0);
    // 5 + 1 + 3 + 1 + 1, and one more: the very first attempt on this brand-new cluster waits
    // for every node, which trusts them all, and the attempt is made again at once.
    assert_eq!(get("redlock_acquire_attempts_total"), 12.0);
    assert_eq!(get("redlock_acquire_retries_total"), 2.0);
    assert_eq!(get(r#"redlock_unlock_total{result="ok"}"#), 8.0);
    assert_eq!(get(r#"redlock_unlock_total{result="not_held"}"#), 1.0);
    assert_eq!(get(r#"redlock_extend_total{result="ok"}"#), 1.0);
    assert!(get("redlock_renewals_total") >= 1.0);
    assert_eq!(get("redlock_acquire_wait_seconds_count"), 8.0);
    assert_eq!(
        get(r#"redlock_acquire_wait_seconds_bucket{le="+Inf"}"#),
        8.0
    );
    assert_eq!(get("redlock_hold_seconds_count"), 8.0);
    assert_eq!(get("redlock_nodes_quarantined"), 0.0);
    let node2 = format!("node=\"2\",addr=\"127.0.0.1:{}\"", cluster.servers[2].port);
    assert!(
        get(&format!(
            "redlock_node_errors_total{{{node2},kind=\"unreachable\"}}"
        )) >= 1.0
    );
    let node0 = format!("node=\"0\",addr=\"127.0.0.1:{}\"", cluster.servers[0].port);
    assert!(get(&format!("redlock_node_requests_total{{{node0}}}")) >= 20.0);
    // One shared connection per node, never lost; node 2's, gone with its server, was not
    // replaced (every reconnect was refused).
    assert_eq!(
        get(&format!("redlock_node_connections_total{{{node0}}}")),
        1.0
    );
    assert_eq!(
        get(&format!("redlock_node_connections_total{{{node2}}}")),
        1.0
    );
    // Buckets are cumulative and end at the count.
    let mut last = 0.0;
    for b in redlock::BUCKETS {
        let v = get(&format!(
            "redlock_node_latency_seconds_bucket{{{node0},le=\"{b}\"}}"
        ));
        assert!(v >= last);
        last = v;
    }
    assert!(last <= get(&format!("redlock_node_latency_seconds_count{{{node0}}}")));
    assert!(get(&format!("redlock_node_latency_seconds_count{{{node0}}}")) > 0.0);
    // The snapshot agrees with the text.
    assert_eq!(m.grants, 8);
    assert_eq!(m.unlocks.not_held, 1);
}

#[test]
fn passwords_never_reach_the_metrics() {
    let s = support::RedisServer::start_with(&["--requirepass", "sekrit-pw"]);
    let mgr = Redlock::new(support::config(vec![format!(
        "redis://:sekrit-pw@127.0.0.1:{}",
        s.port
    )]))
    .unwrap();
    mgr.try_lock("p", Duration::from_secs(1))
        .unwrap()
        .unlock()
        .unwrap();
    let text = mgr.metrics().to_prometheus();
    assert!(!text.contains("sekrit-pw"));
    parse(&text);
}

/// A child process killed (by PID) and reaped when dropped, so that a failed assertion does
/// not leave an example server running.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One HTTP/1.1 GET on a fresh connection: the status line and the body. Every step has a
/// timeout, so a server that never answers fails the test instead of hanging it.
fn http_get(addr: &str, path: &str) -> (String, String, String) {
    let sock: std::net::SocketAddr = addr.parse().expect("a socket address");
    let mut s = TcpStream::connect_timeout(&sock, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read the reply");
    let (head, body) = reply.split_once("\r\n\r\n").expect("headers and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_string(), body.to_string())
}

/// Runs an example metrics server (`cmd`, to which this adds `--nodes`, `--listen
/// 127.0.0.1:0`, `--serve-for 60` and `--requests 1`) against three real nodes: waits for its
/// `serving http://ADDR/metrics` line, checks that another path is a 404, scrapes /metrics,
/// and checks that the server then exits 0 on its own. Returns the scraped text.
fn scrape_example(mut cmd: Command) -> String {
    let cluster = Cluster::start(3);
    cmd.arg("--nodes")
        .arg(cluster.urls().join(","))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--serve-for",
            "60",
            "--requests",
            "1",
        ])
        .stdout(Stdio::piped());
    let mut child = Reaped(cmd.spawn().expect("start the example"));
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the example's `serving` line within 30 s");
    let addr = first
        .strip_prefix("serving http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();

    let (status, _, _) = http_get(&addr, "/elsewhere");
    assert!(status.starts_with("HTTP/1.1 404"), "{status}");
    let (status, headers, body) = http_get(&addr, "/metrics");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        headers
            .to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );

    // --requests 1: the scrape was its last request.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("wait for the example") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "the example still runs after its last request"
        );
        thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "the example exited with {status:?}");
    let last = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("a last line");
    assert_eq!(last, "served 1 /metrics requests");
    body
}

/// What every example's scrape must show: the strict reader accepts it, the one lock it took
/// was granted and released, and each node saw requests.
fn check_scraped(text: &str) {
    let m = parse(text);
    let get = |k: &str| *m.get(k).unwrap_or_else(|| panic!("no {k} in:\n{text}"));
    assert!(
        get(r#"redlock_acquire_total{result="granted"}"#) >= 1.0,
        "{text}"
    );
    assert!(get(r#"redlock_unlock_total{result="ok"}"#) >= 1.0, "{text}");
    assert!(get("redlock_acquire_wait_seconds_count") >= 1.0, "{text}");
    for node in 0..3 {
        let requests = m
            .iter()
            .find(|(k, _)| k.starts_with(&format!("redlock_node_requests_total{{node=\"{node}\",")))
            .map(|(_, v)| *v);
        assert!(requests.is_some_and(|v| v >= 1.0), "node {node}: {text}");
    }
}

/// The directory cargo puts this profile's examples in: the test binary is
/// `<target>/<profile>/deps/metrics-<hash>`.
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>")
        .join("examples")
}

/// The Rust example, built once per test binary with this test's profile.
fn rust_example() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let mut build = Command::new(env!("CARGO"));
            build.current_dir(env!("CARGO_MANIFEST_DIR")).args([
                "build",
                "--quiet",
                "--example",
                "metrics_server",
            ]);
            if !cfg!(debug_assertions) {
                build.arg("--release");
            }
            let out = build.output().expect("run cargo build");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            examples_dir().join("metrics_server")
        })
        .clone()
}

/// The C example, built once per test binary (with the release library, as `make` does) into
/// this profile's examples directory.
fn c_example() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let build = examples_dir().join("c");
            let out = Command::new("make")
                .arg("-C")
                .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("bindings/c"))
                .arg(format!("BUILD={}", build.display()))
                .arg(build.join("metrics_server"))
                .output()
                .expect("run make");
            assert!(
                out.status.success(),
                "{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            build.join("metrics_server")
        })
        .clone()
}

#[test]
fn the_rust_metrics_server_example_serves_metrics() {
    check_scraped(&scrape_example(Command::new(rust_example())));
}

#[test]
fn the_c_metrics_server_example_serves_metrics() {
    check_scraped(&scrape_example(Command::new(c_example())));
}

/// Runs `program args`, killing it if it has not exited within 30 s; the exit code and stderr.
fn run_bounded(program: &Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Reaped(
        Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the example"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "{args:?}: still running after 30 s"
        );
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status.code(), stderr)
}

/// Bad arguments get a message naming the problem and a non-zero exit, before any node is
/// contacted or anything served.
#[test]
fn the_metrics_server_examples_reject_bad_arguments() {
    let unreachable = "redis://127.0.0.1:1";
    let cases: [(&[&str], i32, &str); 6] = [
        (&[], 2, "--nodes is required"),
        (&["--nodes"], 2, "--nodes needs a value"),
        (&["--nodes", "ftp://x:1"], 2, "ftp"),
        (
            &["--nodes", unreachable, "--requests", "0"],
            2,
            "--requests",
        ),
        (
            &["--nodes", unreachable, "--serve-for", "soon"],
            2,
            "--serve-for",
        ),
        (
            &["--nodes", unreachable, "--listen", "nowhere"],
            1,
            "nowhere",
        ),
    ];
    for program in [rust_example(), c_example()] {
        for (args, code, says) in cases {
            let (got, stderr) = run_bounded(&program, args);
            assert_eq!(got, Some(code), "{} {args:?}: {stderr}", program.display());
            assert!(
                stderr.contains(says),
                "{} {args:?}: want {says:?} in {stderr:?}",
                program.display()
            );
        }
    }
}
