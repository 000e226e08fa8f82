//! Serves a manager's metrics in the Prometheus text format at `/metrics`, for a scraper to
//! read, with nothing but the standard library's `TcpListener`: the library itself has no HTTP
//! server, and a metrics endpoint needs no more than this.
//!
//!     cargo run --release --example metrics_server -- \
//!         --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003 \
//!         --listen 127.0.0.1:9464 --serve-for 60
//!     curl http://127.0.0.1:9464/metrics
//!
//! It takes and releases one lock first, so that the counters have moved, prints
//! `serving http://ADDR/metrics` (with the port the kernel chose for `--listen …:0`), and then
//! answers requests one at a time until `--serve-for` seconds have passed (default 60) or,
//! with `--requests N`, after the Nth `/metrics` request, whichever comes first. Every
//! request gets a fresh snapshot (`Redlock::metrics`); any other path is a 404.
//!
//! A real program would run this loop on a thread of its own beside its work, or hand the
//! text of `mgr.metrics().to_prometheus()` to the HTTP server it already has.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::thread;
use std::time::{Duration, Instant};

use redlock::{Config, Redlock};

const USAGE: &str = "usage: metrics_server --nodes URL[,URL...] [--listen HOST:PORT] \
                     [--serve-for SECS] [--requests N]";

/// How long one client may take to send its request line and headers.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// The most bytes of request read: a scraper's GET is far shorter.
const MAX_REQUEST: usize = 8192;

struct Args {
    nodes: Vec<String>,
    listen: String,
    serve_for: Duration,
    requests: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut nodes = None;
    let mut a = Args {
        nodes: Vec::new(),
        listen: "127.0.0.1:9464".to_string(),
        serve_for: Duration::from_secs(60),
        requests: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--nodes" => nodes = Some(value("--nodes")?),
            "--listen" => a.listen = value("--listen")?,
            "--serve-for" => {
                let v = value("--serve-for")?;
                let secs: f64 = v.parse().map_err(|e| format!("--serve-for {v:?}: {e}"))?;
                a.serve_for = Duration::try_from_secs_f64(secs)
                    .map_err(|_| format!("--serve-for {v:?}: not a duration in seconds"))?;
            }
            "--requests" => {
                let v = value("--requests")?;
                let n: u64 = v.parse().map_err(|e| format!("--requests {v:?}: {e}"))?;
                if n == 0 {
                    return Err("--requests must be at least 1".into());
                }
                a.requests = Some(n);
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let nodes = nodes.ok_or("--nodes is required")?;
    a.nodes = nodes.split(',').map(str::to_string).collect();
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("metrics_server: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mgr = match Redlock::new(Config::new(args.nodes.iter())) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("metrics_server: {e}");
            return ExitCode::from(2);
        }
    };

    let listener = match TcpListener::bind(&args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("metrics_server: listen on {}: {e}", args.listen);
            return ExitCode::FAILURE;
        }
    };
    // One lock and unlock, so that the acquire, hold, unlock and per-node series are not all 0.
    match mgr.lock("metrics_server:example", Duration::from_secs(10)) {
        Ok(lease) => {
            if let Err(e) = lease.unlock() {
                eprintln!("metrics_server: unlock: {e}");
            }
        }
        Err(e) => eprintln!("metrics_server: lock: {e}"), // counted too: serve anyway
    }

    match serve(&listener, &mgr, &args) {
        Ok(n) => {
            println!("served {n} /metrics requests");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("metrics_server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Answers requests until the deadline or the request budget; returns how many `/metrics`
/// requests were served.
fn serve(listener: &TcpListener, mgr: &Redlock, args: &Args) -> io::Result<u64> {
    // std has no accept with a timeout: a non-blocking listener polled every 10 ms lets the
    // loop notice its deadline. (A server with more traffic would use poll(2) or a thread.)
    listener.set_nonblocking(true)?;
    println!("serving http://{}/metrics", listener.local_addr()?);
    io::stdout().flush()?;
    let deadline = Instant::now() + args.serve_for;
    let mut served = 0;
    while Instant::now() < deadline && args.requests.is_none_or(|n| served < n) {
        match listener.accept() {
            Ok((stream, _)) => match answer(stream, mgr) {
                Ok(true) => served += 1,
                Ok(false) => {}
                // One client's failure (it hung up, it was too slow) is not the server's.
                Err(e) => eprintln!("metrics_server: a request: {e}"),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10))
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(served)
}

/// Reads one request and answers it; true when it was a `GET /metrics`.
fn answer(mut stream: TcpStream, mgr: &Redlock) -> io::Result<bool> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        if req.len() >= MAX_REQUEST {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "too long\n",
            )
            .map(|_| false);
        }
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the end of the headers",
            ));
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&req);
    let mut words = line.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    match (method, path) {
        ("GET", "/metrics") => {
            respond(&mut stream, "200 OK", &mgr.metrics().to_prometheus())?;
            Ok(true)
        }
        ("GET", _) => respond(&mut stream, "404 Not Found", "try /metrics\n").map(|_| false),
        _ => respond(&mut stream, "405 Method Not Allowed", "GET only\n").map(|_| false),
    }
}

fn respond(stream: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    // version=0.0.4 is the Prometheus text format's content type; one response per connection.
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
