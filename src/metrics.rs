//! Per-manager metrics: counters and histograms updated with relaxed atomics on the hot path,
//! a snapshot for Rust, and the Prometheus text exposition format for everyone else.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{Error, NodeOutcome};

/// Upper bounds of the histogram buckets, in seconds (the last bucket, `+Inf`, is implicit).
pub const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

#[derive(Default)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns
            .fetch_add(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(BUCKETS.len());
        let mut running = 0;
        for b in &self.buckets {
            running += b.load(Ordering::Relaxed);
            cumulative.push(running);
        }
        HistogramSnapshot {
            cumulative,
            count: self.count.load(Ordering::Relaxed),
            sum: Duration::from_nanos(self.sum_ns.load(Ordering::Relaxed)),
        }
    }
}

/// A histogram at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HistogramSnapshot {
    /// Cumulative counts per bucket of [`BUCKETS`]: observations of at most that many seconds.
    pub cumulative: Vec<u64>,
    /// All observations (the `+Inf` bucket).
    pub count: u64,
    /// Their sum.
    pub sum: Duration,
}

/// The kinds of per-node failure counted, in the order of [`NodeMetrics::errors`].
pub const NODE_ERROR_KINDS: [&str; 10] = [
    "timeout",
    "unreachable",
    "backoff",
    "server_error",
    "protocol",
    "quarantined",
    "duplicate",
    "tls",
    "sentinel",
    "unacknowledged",
];

fn error_kind(o: &NodeOutcome) -> Option<usize> {
    Some(match o {
        NodeOutcome::Timeout => 0,
        NodeOutcome::Unreachable(_) => 1,
        NodeOutcome::Backoff(_) => 2,
        // The node answered with an error: a refusal of our credentials is one.
        NodeOutcome::ServerError(_) | NodeOutcome::AuthFailed(_) => 3,
        NodeOutcome::Protocol(_) => 4,
        NodeOutcome::Quarantined { .. } => 5,
        NodeOutcome::Duplicate { .. } => 6,
        NodeOutcome::Tls(_) => 7,
        NodeOutcome::Sentinel(_) => 8,
        NodeOutcome::Unacknowledged { .. } => 9,
        NodeOutcome::Success | NodeOutcome::Rejected | NodeOutcome::Pending => return None,
    })
}

#[derive(Default)]
pub(crate) struct NodeCounters {
    requests: AtomicU64,
    errors: [AtomicU64; NODE_ERROR_KINDS.len()],
    latency: Histogram,
}

/// Outcomes counted for unlock and extend.
#[derive(Default)]
pub(crate) struct Outcomes {
    ok: AtomicU64,
    not_held: AtomicU64,
    unavailable: AtomicU64,
    other: AtomicU64,
}

impl Outcomes {
    pub(crate) fn record<T>(&self, r: &Result<T, Error>) {
        let c = match r {
            Ok(_) => &self.ok,
            Err(Error::NotHeld(_)) => &self.not_held,
            Err(Error::Unavailable(_) | Error::Auth(_)) => &self.unavailable,
            Err(_) => &self.other,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn snapshot(&self) -> OutcomeCounts {
        OutcomeCounts {
            ok: self.ok.load(Ordering::Relaxed),
            not_held: self.not_held.load(Ordering::Relaxed),
            unavailable: self.unavailable.load(Ordering::Relaxed),
            other: self.other.load(Ordering::Relaxed),
        }
    }
}

/// Counts of unlock or extend outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutcomeCounts {
    /// Succeeded.
    pub ok: u64,
    /// [`Error::NotHeld`].
    pub not_held: u64,
    /// [`Error::Unavailable`] or [`Error::Auth`].
    pub unavailable: u64,
    /// Any other error (invalid input, internal).
    pub other: u64,
}

/// Counters of a manager's renewal thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenewalStats {
    /// Renewal rounds (each sends one command per node per 1000 keys).
    pub ticks: u64,
    /// Commands written to each node in all (the writes per node).
    pub commands_per_node: u64,
    /// Lease renewals attempted.
    pub attempts: u64,
    /// Lease renewals confirmed by a quorum.
    pub renewed: u64,
    /// Keys restored on a node that had lost them.
    pub restored: u64,
    /// Leases reported lost (failures and bounds).
    pub lost: u64,
    /// The most leases renewed in one round.
    pub max_batch: u64,
}

/// The live counters behind [`RenewalStats`].
#[derive(Default)]
pub(crate) struct RenewalCounters {
    pub(crate) ticks: AtomicU64,
    pub(crate) commands: AtomicU64,
    pub(crate) attempts: AtomicU64,
    pub(crate) renewed: AtomicU64,
    pub(crate) restored: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) max_batch: AtomicU64,
}

impl RenewalCounters {
    pub(crate) fn snapshot(&self) -> RenewalStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RenewalStats {
            ticks: l(&self.ticks),
            commands_per_node: l(&self.commands),
            attempts: l(&self.attempts),
            renewed: l(&self.renewed),
            restored: l(&self.restored),
            lost: l(&self.lost),
            max_batch: l(&self.max_batch),
        }
    }
}

/// The live counters of one manager.
pub(crate) struct Registry {
    pub(crate) attempts: AtomicU64,
    pub(crate) grants: AtomicU64,
    not_acquired: AtomicU64,
    unavailable: AtomicU64,
    invalid: AtomicU64,
    internal: AtomicU64,
    cancelled: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) wait: Histogram,
    pub(crate) hold: Histogram,
    pub(crate) unlocks: Outcomes,
    pub(crate) extensions: Outcomes,
    pub(crate) renewal: RenewalCounters,
    nodes: Vec<NodeCounters>,
}

impl Registry {
    pub(crate) fn new(nodes: usize) -> Registry {
        Registry {
            attempts: AtomicU64::new(0),
            grants: AtomicU64::new(0),
            not_acquired: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            internal: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            wait: Histogram::default(),
            hold: Histogram::default(),
            unlocks: Outcomes::default(),
            extensions: Outcomes::default(),
            renewal: RenewalCounters::default(),
            nodes: (0..nodes).map(|_| NodeCounters::default()).collect(),
        }
    }

    /// Counts the final outcome of one `lock`/`try_lock`/`lock_until` call.
    pub(crate) fn acquisition<T>(&self, r: &Result<T, Error>, waited: Duration) {
        let c = match r {
            Ok(_) => &self.grants,
            Err(Error::NotAcquired(_)) => &self.not_acquired,
            Err(Error::Unavailable(_) | Error::Auth(_)) => &self.unavailable,
            Err(Error::InvalidInput(_)) => &self.invalid,
            Err(Error::Internal(_) | Error::NotHeld(_)) => &self.internal,
            Err(Error::Cancelled) => &self.cancelled,
        };
        c.fetch_add(1, Ordering::Relaxed);
        if r.is_ok() {
            self.wait.observe(waited);
        }
    }

    /// Counts one node's part in one step: a request, its latency when it answered, and its
    /// failure kind when it failed.
    pub(crate) fn node(&self, i: usize, outcome: &NodeOutcome, latency: Option<Duration>) {
        let Some(n) = self.nodes.get(i) else { return };
        if matches!(
            outcome,
            NodeOutcome::Backoff(_)
                | NodeOutcome::Quarantined { .. }
                | NodeOutcome::Duplicate { .. }
        ) {
            // Not contacted.
        } else {
            n.requests.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(l) = latency {
            n.latency.observe(l);
        }
        if let Some(k) = error_kind(outcome) {
            n.errors[k].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> Metrics {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Metrics {
            acquire_attempts: l(&self.attempts),
            grants: l(&self.grants),
            not_acquired: l(&self.not_acquired),
            unavailable: l(&self.unavailable),
            invalid_input: l(&self.invalid),
            internal_errors: l(&self.internal),
            cancelled: l(&self.cancelled),
            retries: l(&self.retries),
            wait: self.wait.snapshot(),
            hold: self.hold.snapshot(),
            unlocks: self.unlocks.snapshot(),
            extensions: self.extensions.snapshot(),
            renewal: self.renewal.snapshot(),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| NodeMetrics {
                    index: i,
                    addr: String::new(),
                    requests: l(&n.requests),
                    errors: n.errors.iter().map(l).collect(),
                    latency: n.latency.snapshot(),
                    quarantined: false,
                    connections: 0,
                    promotions: 0,
                    master: None,
                    moved: 0,
                    asked: 0,
                })
                .collect(),
        }
    }
}

/// One node's metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMetrics {
    /// The node's position in the configuration.
    pub index: usize,
    /// Its address, password redacted.
    pub addr: String,
    /// Commands sent to it (steps it took part in).
    pub requests: u64,
    /// Failures by kind, in the order of [`NODE_ERROR_KINDS`].
    pub errors: Vec<u64>,
    /// How long it took to answer, when it answered within the step.
    pub latency: HistogramSnapshot,
    /// Whether it is in restart quarantine now.
    pub quarantined: bool,
    /// Connections opened to it: the manager's shared connection, the first and every
    /// reconnect (after the node closed it, a restart, a failure, or a reply owed for longer
    /// than the stale limit). Flat once warm; growth means connections are being lost. The
    /// subscriber connection used for waiting is not counted.
    pub connections: u64,
    /// Promotions seen: the server became master of another replication history (see
    /// [`QuarantineReason::Promoted`](crate::QuarantineReason::Promoted)).
    pub promotions: u64,
    /// For a failover group: the master its sentinels named last (`None` for a plain node,
    /// and before the first answer).
    pub master: Option<String>,
    /// For a cluster node: `MOVED` redirects followed (a slot had a new owner).
    pub moved: u64,
    /// For a cluster node: `ASK` redirects followed (a slot was being migrated).
    pub asked: u64,
}

/// A snapshot of a manager's metrics (see [`crate::Redlock::metrics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    /// Acquisition attempts: each try and each retry of every lock call.
    pub acquire_attempts: u64,
    /// Lock calls that returned a lease.
    pub grants: u64,
    /// Lock calls that ended in [`Error::NotAcquired`].
    pub not_acquired: u64,
    /// Lock calls that ended in [`Error::Unavailable`] or [`Error::Auth`] (a quorum out of
    /// reach, because of credentials or not).
    pub unavailable: u64,
    /// Lock calls rejected as invalid input.
    pub invalid_input: u64,
    /// Lock calls that ended in an internal error.
    pub internal_errors: u64,
    /// Lock calls cancelled through their [`crate::Cancel`] handle.
    pub cancelled: u64,
    /// Retries (attempts after a lock call's first).
    pub retries: u64,
    /// Time from a lock call to its grant, retries included.
    pub wait: HistogramSnapshot,
    /// Time from a grant to its unlock.
    pub hold: HistogramSnapshot,
    /// Unlock outcomes.
    pub unlocks: OutcomeCounts,
    /// Extension outcomes (explicit `extend` calls; automatic ones are in `renewal`).
    pub extensions: OutcomeCounts,
    /// The renewal thread's counters (renewals, keys restored, lost leases).
    pub renewal: RenewalStats,
    /// One entry per node.
    pub nodes: Vec<NodeMetrics>,
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn secs(d: Duration) -> String {
    format!("{}", d.as_secs_f64())
}

/// The Prometheus text being written.
struct Prom(String);

impl Prom {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP redlock_{name} {help}");
        let _ = writeln!(self.0, "# TYPE redlock_{name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &str, v: u64) {
        let _ = writeln!(self.0, "redlock_{name}{labels} {v}");
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, v: u64) {
        self.head(name, kind, help);
        self.sample(name, "", v);
    }

    /// A counter family with one sample per `result` label.
    fn results(&mut self, name: &str, help: &str, by_result: &[(&str, u64)]) {
        self.head(name, "counter", help);
        for (r, v) in by_result {
            self.sample(name, &format!("{{result=\"{r}\"}}"), *v);
        }
    }

    fn hist(&mut self, name: &str, labels: &[(&str, String)], h: &HistogramSnapshot) {
        let base: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        for (b, c) in BUCKETS.iter().zip(&h.cumulative) {
            let mut l = base.clone();
            l.push(format!("le=\"{b}\""));
            let _ = writeln!(self.0, "redlock_{name}_bucket{{{}}} {c}", l.join(","));
        }
        let mut l = base.clone();
        l.push("le=\"+Inf\"".into());
        let _ = writeln!(
            self.0,
            "redlock_{name}_bucket{{{}}} {}",
            l.join(","),
            h.count
        );
        let braces = if base.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", base.join(","))
        };
        let _ = writeln!(self.0, "redlock_{name}_sum{braces} {}", secs(h.sum));
        let _ = writeln!(self.0, "redlock_{name}_count{braces} {}", h.count);
    }
}

fn node_labels(n: &NodeMetrics) -> String {
    format!("node=\"{}\",addr=\"{}\"", n.index, escape(&n.addr))
}

impl Metrics {
    /// The metrics in the Prometheus text exposition format (version 0.0.4), every name
    /// prefixed `redlock_`.
    pub fn to_prometheus(&self) -> String {
        let mut p = Prom(String::with_capacity(8192));
        self.write_calls(&mut p);
        self.write_renewal(&mut p);
        self.write_nodes(&mut p);
        p.0
    }

    /// Acquisitions, unlocks and extensions.
    fn write_calls(&self, p: &mut Prom) {
        p.single(
            "acquire_attempts_total",
            "counter",
            "Acquisition attempts, each retry included.",
            self.acquire_attempts,
        );
        p.single(
            "acquire_retries_total",
            "counter",
            "Attempts after a lock call's first.",
            self.retries,
        );
        p.results(
            "acquire_total",
            "Lock calls by final result.",
            &[
                ("granted", self.grants),
                ("not_acquired", self.not_acquired),
                ("unavailable", self.unavailable),
                ("invalid_input", self.invalid_input),
                ("internal", self.internal_errors),
                ("cancelled", self.cancelled),
            ],
        );
        p.head(
            "acquire_wait_seconds",
            "histogram",
            "Time from a lock call to its grant, retries included.",
        );
        p.hist("acquire_wait_seconds", &[], &self.wait);
        p.head(
            "hold_seconds",
            "histogram",
            "Time from a grant to its unlock.",
        );
        p.hist("hold_seconds", &[], &self.hold);
        for (name, help, c) in [
            ("unlock_total", "Unlock calls by result.", self.unlocks),
            (
                "extend_total",
                "Explicit extend calls by result.",
                self.extensions,
            ),
        ] {
            p.results(
                name,
                help,
                &[
                    ("ok", c.ok),
                    ("not_held", c.not_held),
                    ("unavailable", c.unavailable),
                    ("other", c.other),
                ],
            );
        }
    }

    fn write_renewal(&self, p: &mut Prom) {
        let r = &self.renewal;
        for (name, help, v) in [
            (
                "renewal_rounds_total",
                "Renewal rounds (one command per node per 1000 keys).",
                r.ticks,
            ),
            (
                "renewal_attempts_total",
                "Automatic renewals attempted.",
                r.attempts,
            ),
            (
                "renewals_total",
                "Automatic renewals confirmed by a quorum.",
                r.renewed,
            ),
            (
                "keys_restored_total",
                "Lock keys restored on a node that had lost them.",
                r.restored,
            ),
            (
                "leases_lost_total",
                "Auto-renewed leases reported lost (failures and bounds).",
                r.lost,
            ),
        ] {
            p.single(name, "counter", help, v);
        }
    }

    fn write_nodes(&self, p: &mut Prom) {
        let quarantined = self.nodes.iter().filter(|n| n.quarantined).count();
        p.single(
            "nodes_quarantined",
            "gauge",
            "Nodes in restart quarantine now.",
            quarantined as u64,
        );
        type Of = fn(&NodeMetrics) -> u64;
        let per_node: [(&str, &str, &str, Of); 4] = [
            (
                "node_quarantined",
                "gauge",
                "1 while the node is in restart quarantine.",
                |n| n.quarantined as u64,
            ),
            (
                "node_requests_total",
                "counter",
                "Commands sent to the node.",
                |n| n.requests,
            ),
            (
                "node_connections_total",
                "counter",
                "Connections opened to the node (the first and every reconnect).",
                |n| n.connections,
            ),
            (
                "node_promotions_total",
                "counter",
                "Promotions seen (the server became master of another replication history).",
                |n| n.promotions,
            ),
        ];
        for (name, kind, help, of) in per_node {
            p.head(name, kind, help);
            for n in &self.nodes {
                let labels = format!("{{{}}}", node_labels(n));
                p.sample(name, &labels, of(n));
            }
        }
        self.write_node_routes(p);
        p.head("node_errors_total", "counter", "Node failures by kind.");
        for n in &self.nodes {
            for (k, v) in NODE_ERROR_KINDS.iter().zip(&n.errors) {
                let labels = format!("{{{},kind=\"{k}\"}}", node_labels(n));
                p.sample("node_errors_total", &labels, *v);
            }
        }
        p.head(
            "node_latency_seconds",
            "histogram",
            "Time for the node to answer a command.",
        );
        for n in &self.nodes {
            let labels = [("node", n.index.to_string()), ("addr", n.addr.clone())];
            p.hist("node_latency_seconds", &labels, &n.latency);
        }
    }

    /// Where the nodes' commands went: a cluster node's redirects, a failover group's master.
    fn write_node_routes(&self, p: &mut Prom) {
        p.head(
            "node_redirects_total",
            "counter",
            "Redirects a cluster node's shards answered and the library followed, by kind.",
        );
        for n in &self.nodes {
            for (kind, v) in [("moved", n.moved), ("ask", n.asked)] {
                let labels = format!("{{{},kind=\"{kind}\"}}", node_labels(n));
                p.sample("node_redirects_total", &labels, v);
            }
        }
        if self.nodes.iter().any(|n| n.master.is_some()) {
            p.head(
                "node_master",
                "gauge",
                "A failover group's master, as its sentinels named it last (always 1).",
            );
            for n in &self.nodes {
                if let Some(m) = &n.master {
                    let labels = format!("{{{},master=\"{}\"}}", node_labels(n), escape(m));
                    p.sample("node_master", &labels, 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_micros(700));
        h.observe(Duration::from_secs(100));
        let s = h.snapshot();
        assert_eq!(s.count, 3);
        assert_eq!(s.cumulative[0], 1); // <= 100 µs
        assert_eq!(s.cumulative[3], 2); // <= 1 ms
        assert_eq!(*s.cumulative.last().unwrap(), 2); // 100 s is only in +Inf
        assert!(s.sum > Duration::from_secs(100));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
