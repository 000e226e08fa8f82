//! `--tls`: the library over `rediss://` beside itself over plain TCP, in the same run.
//!
//! The TLS nodes are as many redis-server processes again, serving TLS only, with a CA and a
//! node certificate made for the run (tests/support/tls.rs). The `redlock+tls` driver takes
//! its turn in the same interleaved rounds as the others, through delay proxies of its own
//! (the proxies forward bytes, TLS records as well as RESP), so each TLS row and its plain
//! twin share the machine's state. Each manager is new per round: its first cycle pays the TLS
//! handshakes, which the medians do not see.

use std::sync::OnceLock;

use crate::support::Cluster;
use crate::support::tls::Pki;
use crate::{Row, us};

static PKI: OnceLock<Pki> = OnceLock::new();

/// Starts `n` nodes that serve TLS only, with the run's certificates.
pub fn start(n: usize) -> Cluster {
    let pki = PKI.get_or_init(Pki::new);
    Cluster::start_tls(n, &pki.serve())
}

/// The options that trust the run's CA (the defaults when no TLS node was started: plain
/// nodes ignore them).
pub fn options() -> redlock::TlsOptions {
    PKI.get()
        .map_or_else(redlock::TlsOptions::new, Pki::options)
}

/// One row measured both ways.
pub struct Compared {
    n: usize,
    delay: String,
    scenario: &'static str,
    plain: (std::time::Duration, f64, std::time::Duration),
    tls: (std::time::Duration, f64, std::time::Duration),
}

impl Compared {
    pub fn new(n: usize, delay: &str, scenario: &'static str, plain: &Row, tls: &Row) -> Self {
        let t = |r: &Row| (r.p50, r.per_sec, r.cpu_per_cycle);
        Compared {
            n,
            delay: delay.to_string(),
            scenario,
            plain: t(plain),
            tls: t(tls),
        }
    }
}

/// The TLS/plain table: medians (p50) and throughput of the same run, and the client CPU time
/// each cycle costs.
pub fn summary(rows: &[Compared]) {
    println!("\nTLS against plain TCP, the same run (redlock+tls / redlock):");
    println!(
        "| N | delay | scenario | plain p50 µs | TLS p50 µs | TLS/plain p50 | TLS/plain cycles/s | \
         client CPU µs/cycle plain → TLS |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|");
    for r in rows {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.1} → {:.1} |",
            r.n,
            r.delay,
            r.scenario,
            us(r.plain.0),
            us(r.tls.0),
            ratio(r.tls.0.as_secs_f64(), r.plain.0.as_secs_f64()),
            ratio(r.tls.1, r.plain.1),
            r.plain.2.as_secs_f64() * 1e6,
            r.tls.2.as_secs_f64() * 1e6
        );
    }
}
