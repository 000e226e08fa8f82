//! The Redlock algorithm: quorum, validity, retries, release and extend.
//!
//! This module never sees a socket: it builds commands, hands them to a connection set for one
//! step, and judges the per-node results.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::{self, Config, KEY_PREFIX};
use crate::error::{Error, NodeOutcome, NodeReport, Op, Report};
use crate::metrics::{Metrics, Registry};
use crate::node::{Command, ConnSet, ConnSettings, Node, NodeResult, StepLimits, Ticket};
use crate::pool::Pool;
use crate::renew::{LostReason, RenewOptions, RenewalState, RenewalStats, Renewer};
use crate::resp::{self, Reply};
use crate::scripts;
use crate::token;

/// A monotonic time source. Production code uses [`Instant::now`]; unit tests inject a manual
/// clock so that validity arithmetic is tested without sleeping.
pub(crate) trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The number of nodes that must agree: `n / 2 + 1`.
pub fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The instant a lock acquired by a step that started at `start` stops being valid:
/// `start + TTL − drift`. Each node set the key at or after `start`, so each holds it until at
/// least `start + TTL` by its own clock; the drift allowance covers clocks that run at
/// different rates. The lock is granted only if this instant is still in the future when the
/// step ends, so an acquisition that took longer than the TTL can never yield a validity.
pub(crate) fn expiry(start: Instant, ttl: Duration, drift_factor: f64) -> Instant {
    start + ttl.saturating_sub(config::drift(ttl, drift_factor))
}

/// The remaining validity at `now` of a lock that expires at `expires`: zero once passed.
pub(crate) fn remaining(expires: Instant, now: Instant) -> Duration {
    expires.saturating_duration_since(now)
}

/// Everything the manager and its leases share.
pub(crate) struct Shared {
    pub(crate) nodes: Vec<Node>,
    pub(crate) cfg: Config,
    pub(crate) settings: ConnSettings,
    pub(crate) quorum: usize,
    pool: Pool,
    clock: Arc<dyn Clock>,
    epoch: Instant,
    release_sha: String,
    extend_sha: String,
    fenced_acquire_sha: String,
    fence_write_sha: String,
    /// The renewal thread, started by the first auto-renewed lease.
    renewer: Mutex<Option<Arc<Renewer>>>,
    pub(crate) metrics: Registry,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(r) = self.renewer() {
            r.shutdown();
        }
    }
}

impl Shared {
    pub(crate) fn renewer(&self) -> Option<Arc<Renewer>> {
        self.renewer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn renewer_or_start(self: &Arc<Self>) -> Result<Arc<Renewer>, Error> {
        let mut r = self.renewer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = r.as_ref() {
            return Ok(Arc::clone(r));
        }
        let started = Renewer::start(self)?;
        *r = Some(Arc::clone(&started));
        Ok(started)
    }

    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// How much longer node `i` stays in restart quarantine, if it is in it at `now`.
    ///
    /// Redis computes `uptime_in_seconds` as the difference of two whole wall-clock seconds
    /// (now and its start, each truncated), so it can read up to a second more than the
    /// node's real age (started at 10.9 s, asked at 11.1 s: uptime 1, age 0.2 s). The reply
    /// was read at `seen_at`, after it was produced, so the node started no later than
    /// `seen_at − uptime + 1 s`, and it leaves quarantine a maximum TTL after that:
    /// `seen_at − uptime + max_ttl + 1 s`. Every uncertainty rounds toward a longer
    /// quarantine. (A node whose wall clock jumps defeats any uptime-based rule.)
    pub(crate) fn quarantine(&self, i: usize, now: Instant) -> Option<Duration> {
        if !self.cfg.restart_quarantine {
            return None;
        }
        let id = self.nodes.get(i)?.identity()?;
        let span = (self.cfg.max_ttl + Duration::from_secs(1)).checked_sub(id.uptime)?;
        let until = id.seen_at + span;
        (until > now).then(|| until - now)
    }

    fn checkout(&self) -> ConnSet {
        self.pool.checkout()
    }

    fn checkin(&self, set: ConnSet) {
        self.pool.checkin(set);
    }

    /// Runs one step on a connection set, deciding as soon as a quorum of successes is
    /// reached or no longer possible.
    pub(crate) fn step(
        &self,
        set: &mut ConnSet,
        op: Op,
        cmd: &Command<'_>,
        node_timeout: Duration,
        cap: Option<Instant>,
    ) -> Result<Vec<NodeOutcome>, Error> {
        self.step_with(set, &|_, r| classify(op, r), cmd, node_timeout, cap)
            .map(|(o, _)| o)
    }

    /// [`step`](Self::step) with a custom reading of replies; also returns each node's reply.
    pub(crate) fn step_with(
        &self,
        set: &mut ConnSet,
        judge: &dyn Fn(usize, &Reply) -> NodeOutcome,
        cmd: &Command<'_>,
        node_timeout: Duration,
        cap: Option<Instant>,
    ) -> Result<(Vec<NodeOutcome>, Vec<Option<Reply>>), Error> {
        let q = self.quorum;
        let now = || self.clock.now();
        let results = set
            .step(
                &self.nodes,
                &self.settings,
                cmd,
                StepLimits { node_timeout, cap },
                &now,
                |results| {
                    let mut ok = 0;
                    let mut waiting = 0;
                    for (i, r) in results.iter().enumerate() {
                        match r {
                            NodeResult::Waiting => waiting += 1,
                            NodeResult::Reply(reply) if judge(i, reply).is_success() => ok += 1,
                            _ => {}
                        }
                    }
                    ok >= q || ok + waiting < q
                },
            )
            .map_err(|e| Error::Internal(format!("poll(2) failed: {e}")))?;
        let latencies = set.latencies().to_vec();
        let mut outcomes = Vec::with_capacity(results.len());
        let mut replies = Vec::with_capacity(results.len());
        for (i, r) in results.into_iter().enumerate() {
            match r {
                NodeResult::Reply(reply) => {
                    outcomes.push(judge(i, &reply));
                    replies.push(Some(reply));
                }
                NodeResult::Failed(o) => {
                    outcomes.push(o);
                    replies.push(None);
                }
                NodeResult::Waiting => {
                    outcomes.push(NodeOutcome::Pending);
                    replies.push(None);
                }
            }
        }
        for (i, o) in outcomes.iter().enumerate() {
            self.metrics.node(i, o, latencies.get(i).copied().flatten());
        }
        Ok((outcomes, replies))
    }

    pub(crate) fn report(
        &self,
        op: Op,
        outcomes: Vec<NodeOutcome>,
        detail: Option<String>,
    ) -> Report {
        let successes = outcomes.iter().filter(|o| o.is_success()).count();
        for (node, o) in self.nodes.iter().zip(outcomes.iter()) {
            if !o.is_answer() && *o != NodeOutcome::Pending {
                log::debug!("{op:?} on node {} ({}): {o:?}", node.index, node.addr);
            }
        }
        Report {
            op,
            successes,
            quorum: self.quorum,
            nodes: self
                .nodes
                .iter()
                .zip(outcomes)
                .map(|(n, outcome)| NodeReport {
                    index: n.index,
                    addr: n.addr_text.clone(),
                    outcome,
                })
                .collect(),
            detail,
        }
    }

    /// Sorts a failed step into "unavailable" (so many nodes failed — timeouts, errors,
    /// unreachable — that a quorum was impossible whatever the others said) or the refusal
    /// `refused` (enough nodes answered or were still answering; too few said yes). Nodes
    /// still pending when the step was decided did not fail.
    fn failure(&self, report: Report, refused: fn(Report) -> Error) -> Error {
        let failed = report
            .nodes
            .iter()
            .filter(|n| !n.outcome.is_answer() && n.outcome != NodeOutcome::Pending)
            .count();
        if report.nodes.len() - failed < self.quorum {
            Error::Unavailable(report)
        } else {
            refused(report)
        }
    }

    /// The `EVALSHA` and `EVAL` forms of a script call on one key.
    pub(crate) fn script_cmds(
        &self,
        sha: &str,
        src: &str,
        key: &[u8],
        args: &[&[u8]],
    ) -> (Vec<u8>, Vec<u8>) {
        script_calls(sha, src, &[key], args)
    }
}

/// The `EVALSHA` and `EVAL` forms of a script call.
pub(crate) fn script_calls(
    sha: &str,
    src: &str,
    keys: &[&[u8]],
    args: &[&[u8]],
) -> (Vec<u8>, Vec<u8>) {
    let mut digits = [0u8; 20];
    let nkeys = resp::decimal(keys.len() as u64, &mut digits);
    let mut a: Vec<&[u8]> = Vec::with_capacity(3 + keys.len() + args.len());
    a.extend_from_slice(&[b"EVALSHA", sha.as_bytes(), nkeys]);
    a.extend_from_slice(keys);
    a.extend_from_slice(args);
    let mut sha_cmd = Vec::new();
    resp::pack(&a, &mut sha_cmd);
    a[0] = b"EVAL";
    a[1] = src.as_bytes();
    let mut eval_cmd = Vec::new();
    resp::pack(&a, &mut eval_cmd);
    (sha_cmd, eval_cmd)
}

/// Tickets for the nodes of a step that were sent the command but had not answered: a later
/// command about the same key must not overtake them (see pool.rs).
pub(crate) fn unanswered(set: &ConnSet, outcomes: &[NodeOutcome]) -> Vec<(u64, Ticket)> {
    outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, NodeOutcome::Pending | NodeOutcome::Timeout))
        .filter_map(|(i, _)| set.ticket(i))
        .filter(|t| !t.done())
        .map(|t| (set.id, t))
        .collect()
}

/// What a reply means for a step.
pub(crate) fn classify(op: Op, reply: &Reply) -> NodeOutcome {
    match (op, reply) {
        (Op::Acquire, Reply::Ok) => NodeOutcome::Success,
        (Op::Acquire, Reply::Nil) => NodeOutcome::Rejected,
        (Op::Release | Op::Extend | Op::Fence, Reply::Int(1)) => NodeOutcome::Success,
        (Op::Release | Op::Extend | Op::Fence, Reply::Int(0)) => NodeOutcome::Rejected,
        (_, Reply::Error { text, .. }) => NodeOutcome::ServerError(text.clone()),
        (_, other) => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

/// What a reply to the fenced acquisition script means: the counter (>= 0) when granted.
fn classify_fenced(reply: &Reply) -> NodeOutcome {
    match reply {
        Reply::Int(n) if *n >= 0 => NodeOutcome::Success,
        Reply::Int(-1) => NodeOutcome::Rejected,
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        other => NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe())),
    }
}

fn fence_key_for(resource: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(config::FENCE_PREFIX.len() + resource.len());
    k.extend_from_slice(config::FENCE_PREFIX);
    k.extend_from_slice(resource);
    k
}

fn key_for(resource: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_PREFIX.len() + resource.len());
    k.extend_from_slice(KEY_PREFIX);
    k.extend_from_slice(resource);
    k
}

/// What a manager knows of one node (see [`Redlock::node_states`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// The node's position in the configured node list, from 0.
    pub index: usize,
    /// The node's address, password redacted.
    pub addr: String,
    /// The server's `run_id` as of the last connection (`None` before the first, or if the
    /// node does not answer `INFO`).
    pub run_id: Option<String>,
    /// How long the server has been up (its last reported uptime, advanced by the client's
    /// clock since).
    pub uptime: Option<Duration>,
    /// Restarts seen: reconnections that found a new `run_id`.
    pub restarts_seen: u64,
    /// `Some(remaining)` while the node is in restart quarantine.
    pub quarantined_for: Option<Duration>,
}

/// How long an acquisition keeps trying.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    Once,
    Retries,
    Until(Instant),
}

/// A lock manager over N independent Redis masters.
///
/// Cheap to clone (the clones share connections), `Send + Sync`: many threads may lock at once;
/// each operation borrows one pooled connection set (one connection per node) and returns it.
#[derive(Clone)]
pub struct Redlock {
    shared: Arc<Shared>,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock")
            .field(
                "nodes",
                &self
                    .shared
                    .nodes
                    .iter()
                    .map(|n| n.addr.to_string())
                    .collect::<Vec<_>>(),
            )
            .field("quorum", &self.shared.quorum)
            .finish()
    }
}

impl Redlock {
    /// Validates `config`, parses and resolves every node, and builds a manager. No connection
    /// is made until the first operation.
    ///
    /// Fails with [`Error::InvalidInput`] for no nodes, a malformed URL, a node listed twice
    /// (also when two names resolve to the same address and port), a drift factor outside
    /// `[0, 1)` or a zero timeout.
    pub fn new(config: Config) -> Result<Redlock, Error> {
        Self::with_clock(config, Arc::new(SystemClock))
    }

    pub(crate) fn with_clock(config: Config, clock: Arc<dyn Clock>) -> Result<Redlock, Error> {
        let addrs = config.validate()?;
        let mut nodes = Vec::with_capacity(addrs.len());
        let mut seen: Vec<(usize, std::net::SocketAddr)> = Vec::new();
        for (i, addr) in addrs.into_iter().enumerate() {
            let resolved = addr
                .resolve()
                .map_err(|m| Error::InvalidInput(format!("node {i}: {m}")))?;
            for sa in &resolved {
                if let Some((j, _)) = seen.iter().find(|(_, s)| s == sa) {
                    return Err(Error::InvalidInput(format!(
                        "node {i} ({addr}) resolves to {sa}, the same as node {j}; the nodes \
                         must be distinct servers"
                    )));
                }
            }
            seen.extend(resolved.iter().map(|sa| (i, *sa)));
            nodes.push(Node::new(
                i,
                addr,
                resolved.first().copied(),
                &scripts::ALL,
                !config.restart_quarantine,
            ));
        }
        let settings = ConnSettings {
            connect_timeout: config.connect_timeout,
            stale_limit: config.stale_limit,
            backoff_min: config.reconnect_backoff_min,
            backoff_max: config.reconnect_backoff_max,
        };
        let n = nodes.len();
        let epoch = clock.now();
        Ok(Redlock {
            shared: Arc::new(Shared {
                nodes,
                settings,
                quorum: quorum(n),
                pool: Pool::new(n, config.max_idle_connection_sets),
                clock,
                epoch,
                release_sha: resp::script_sha(scripts::RELEASE),
                extend_sha: resp::script_sha(scripts::EXTEND),
                fenced_acquire_sha: resp::script_sha(scripts::FENCED_ACQUIRE),
                fence_write_sha: resp::script_sha(scripts::FENCE_WRITE),
                renewer: Mutex::new(None),
                metrics: Registry::new(n),
                cfg: config,
            }),
        })
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.shared.nodes.len()
    }

    /// The number of nodes that must agree: `N / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.shared.quorum
    }

    /// The node addresses, passwords redacted, in configuration order.
    pub fn node_addrs(&self) -> Vec<String> {
        self.shared
            .nodes
            .iter()
            .map(|n| n.addr.to_string())
            .collect()
    }

    /// The configuration this manager was built from.
    pub fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// What the manager knows of each node, in configuration order: its identity and age as
    /// of the last connection, restarts seen, and whether it is in restart quarantine.
    pub fn node_states(&self) -> Vec<NodeState> {
        let sh = &self.shared;
        let now = sh.now();
        sh.nodes
            .iter()
            .map(|n| {
                let id = n.identity();
                NodeState {
                    index: n.index,
                    addr: n.addr.to_string(),
                    run_id: id.as_ref().map(|i| i.run_id.clone()),
                    uptime: id
                        .as_ref()
                        .map(|i| i.uptime + now.saturating_duration_since(i.seen_at)),
                    restarts_seen: n.restarts(),
                    quarantined_for: sh.quarantine(n.index, now),
                }
            })
            .collect()
    }

    /// A snapshot of this manager's metrics: acquisitions by result, retries, wait and hold
    /// times, unlock and extend outcomes, renewal counters, and per-node requests, errors,
    /// latency and quarantine. [`Metrics::to_prometheus`] renders them for scraping.
    pub fn metrics(&self) -> Metrics {
        let sh = &self.shared;
        let mut m = sh.metrics.snapshot();
        m.renewal = self.renewal_stats();
        let now = sh.now();
        for (n, node) in m.nodes.iter_mut().zip(&sh.nodes) {
            n.addr = node.addr.to_string();
            n.quarantined = sh.quarantine(node.index, now).is_some();
        }
        m
    }

    /// Counters of the renewal thread (all zero until a lease is auto-renewed).
    pub fn renewal_stats(&self) -> RenewalStats {
        self.shared.renewer().map(|r| r.stats()).unwrap_or_default()
    }

    fn check(&self, resource: &[u8], ttl: Duration) -> Result<(), Error> {
        config::check_resource(resource)?;
        config::check_ttl_for(ttl, &self.shared.cfg)
    }

    /// One attempt to acquire `resource` for `ttl`, with no retry.
    ///
    /// Sends `SET key token NX PX ttl` to every node at once and returns as soon as a quorum
    /// has granted it (or can no longer grant it). The lock is granted only with a quorum and
    /// a positive remaining validity (`TTL − elapsed − drift`). On failure the key is released
    /// on every node, including those that did not seem to grant it.
    ///
    /// Errors: [`Error::InvalidInput`] (empty or oversized resource, TTL out of range; nothing
    /// is sent), [`Error::NotAcquired`], [`Error::Unavailable`].
    pub fn try_lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Once, false)
    }

    /// Acquires `resource` for `ttl`, retrying up to the configured retry count (3 by default)
    /// after a random pause of up to the retry delay (200 ms by default). Returns the last
    /// attempt's error when every attempt failed. Never waits forever.
    pub fn lock(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Retries, false)
    }

    /// Acquires `resource` for `ttl`, retrying after random pauses (up to the retry delay)
    /// until `deadline`; no attempt starts after it. The retry count does not apply.
    pub fn lock_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Until(deadline), false)
    }

    /// [`lock_until`](Self::lock_until) with a deadline `wait` from now.
    pub fn lock_timeout(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lease, Error> {
        let deadline = self.shared.now() + wait;
        self.acquire(resource.as_ref(), ttl, Wait::Until(deadline), false)
    }

    /// Like [`try_lock`](Self::try_lock), and the lease carries a **fencing token**
    /// ([`Lease::fencing_token`]): a number strictly greater than the token of every earlier
    /// fenced grant of the same resource, as long as a majority of the nodes keeps its data.
    /// Storage that accepts writes only with a token larger than any it has seen turns away a
    /// holder that was paused past its lease (see [`scripts::FENCED_STORE_WRITE`]).
    ///
    /// It costs a second round trip. Step one is `SET NX PX` plus a read of the resource's
    /// counter `redlock-fence:<resource>` on each node; the token is `T = max + 1` over the
    /// granting quorum. Step two writes `T` back to the counters, only where the key still
    /// holds our token, and the lock is granted only if a quorum confirms that within the
    /// validity. Any later grant's quorum intersects that quorum, so it reads at least `T`.
    ///
    /// The counters never expire. A node restarted without persistence loses them; once a
    /// majority has lost the latest one, a later token can be smaller than an earlier one.
    /// Restart quarantine does not prevent that: run the nodes with `appendfsync always` when
    /// fencing must survive restarts.
    pub fn try_lock_fenced(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
    ) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Once, true)
    }

    /// [`lock`](Self::lock) with a fencing token (see [`try_lock_fenced`](Self::try_lock_fenced)).
    pub fn lock_fenced(&self, resource: impl AsRef<[u8]>, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Retries, true)
    }

    /// [`lock_until`](Self::lock_until) with a fencing token (see
    /// [`try_lock_fenced`](Self::try_lock_fenced)).
    pub fn lock_fenced_until(
        &self,
        resource: impl AsRef<[u8]>,
        ttl: Duration,
        deadline: Instant,
    ) -> Result<Lease, Error> {
        self.acquire(resource.as_ref(), ttl, Wait::Until(deadline), true)
    }

    pub(crate) fn acquire(
        &self,
        resource: &[u8],
        ttl: Duration,
        wait: Wait,
        fenced: bool,
    ) -> Result<Lease, Error> {
        let called = self.shared.now();
        let r = self.acquire_inner(resource, ttl, wait, fenced);
        self.shared
            .metrics
            .acquisition(&r, self.shared.now().saturating_duration_since(called));
        r
    }

    fn acquire_inner(
        &self,
        resource: &[u8],
        ttl: Duration,
        wait: Wait,
        fenced: bool,
    ) -> Result<Lease, Error> {
        self.check(resource, ttl)?;
        let m = &self.shared.metrics;
        let mut retries = 0;
        loop {
            m.attempts.fetch_add(1, Ordering::Relaxed);
            let e = match self.attempt(resource, ttl, fenced) {
                Err(e @ (Error::NotAcquired(_) | Error::Unavailable(_))) => e,
                other => return other,
            };
            match wait {
                Wait::Once => return Err(e),
                Wait::Retries => {
                    if retries >= self.shared.cfg.retry_count {
                        return Err(e);
                    }
                    log::debug!("attempt {} failed: {e}", retries + 1);
                    retries += 1;
                    self.pause(None)?;
                }
                Wait::Until(deadline) => {
                    if self.shared.now() >= deadline {
                        return Err(e);
                    }
                    self.pause(Some(deadline))?;
                    if self.shared.now() >= deadline {
                        return Err(e);
                    }
                }
            }
            m.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn pause(&self, deadline: Option<Instant>) -> Result<(), Error> {
        let max = self
            .shared
            .cfg
            .retry_delay
            .as_micros()
            .min(u64::MAX as u128) as u64;
        let mut d = Duration::from_micros(token::uniform_inclusive(max)?);
        if let Some(deadline) = deadline {
            d = d.min(deadline.saturating_duration_since(self.shared.now()));
        }
        std::thread::sleep(d);
        Ok(())
    }

    fn attempt(&self, resource: &[u8], ttl: Duration, fenced: bool) -> Result<Lease, Error> {
        let sh = &self.shared;
        let token = token::new_token()?;
        let key = key_for(resource);
        let fence_key = fence_key_for(resource);
        let mut digits = [0u8; 20];
        let ttl_ms = resp::decimal(ttl.as_millis() as u64, &mut digits);
        let (first, first_fallback) = if fenced {
            let (sha_cmd, eval_cmd) = script_calls(
                &sh.fenced_acquire_sha,
                scripts::FENCED_ACQUIRE,
                &[&key, &fence_key],
                &[token.as_bytes(), ttl_ms],
            );
            (sha_cmd, Some(eval_cmd))
        } else {
            let mut set_cmd = Vec::with_capacity(64 + key.len());
            resp::pack(
                &[b"SET", &key, token.as_bytes(), b"NX", b"PX", ttl_ms],
                &mut set_cmd,
            );
            (set_cmd, None)
        };
        // Restart quarantine: a node that restarted less than the maximum TTL ago is not
        // asked at all, and a grant from one found quarantined during this very step (its
        // handshake comes first on a new connection) does not count and is released.
        let skip: Vec<Option<NodeOutcome>> = (0..sh.nodes.len())
            .map(|i| {
                sh.quarantine(i, sh.now())
                    .map(|remaining| NodeOutcome::Quarantined { remaining })
            })
            .collect();
        let judge = |i: usize, r: &Reply| {
            let o = if fenced {
                classify_fenced(r)
            } else {
                classify(Op::Acquire, r)
            };
            match sh.quarantine(i, sh.now()) {
                Some(remaining) if o.is_success() => NodeOutcome::Quarantined { remaining },
                _ => o,
            }
        };
        let node_timeout = sh.cfg.node_timeout_for(ttl);
        let mut set = sh.checkout();
        let start = sh.now();
        let stepped = sh.step_with(
            &mut set,
            &judge,
            &Command {
                bytes: &first,
                noscript_fallback: first_fallback.as_deref(),
                skip: &skip,
            },
            node_timeout,
            None,
        );
        let (outcomes, replies) = match stepped {
            Ok(o) => o,
            Err(e) => {
                sh.checkin(set);
                return Err(e);
            }
        };
        let expires = expiry(start, ttl, sh.cfg.drift_factor);
        let granted = outcomes.iter().filter(|o| o.is_success()).count();
        let mut now = sh.now();
        let mut failure: Option<Error> = None;
        let mut fencing_token = None;
        let mut fence_outcomes = None;
        if granted >= sh.quorum && expires > now && fenced {
            // The token: one more than the largest counter over the granting quorum.
            let max = replies
                .iter()
                .zip(&outcomes)
                .filter(|(_, o)| o.is_success())
                .filter_map(|(r, _)| match r {
                    Some(Reply::Int(n)) => Some(*n),
                    _ => None,
                })
                .max()
                .unwrap_or(0);
            let t = (max as u64).saturating_add(1);
            let t_str = t.to_string();
            let (sha_cmd, eval_cmd) = script_calls(
                &sh.fence_write_sha,
                scripts::FENCE_WRITE,
                &[&key, &fence_key],
                &[token.as_bytes(), t_str.as_bytes()],
            );
            let step2 = sh.step(
                &mut set,
                Op::Fence,
                &Command {
                    bytes: &sha_cmd,
                    noscript_fallback: Some(&eval_cmd),
                    skip: &[],
                },
                node_timeout,
                Some(expires),
            );
            now = sh.now();
            match step2 {
                Ok(o2) => {
                    let confirmed = o2.iter().filter(|o| o.is_success()).count();
                    if confirmed >= sh.quorum && expires > now {
                        fencing_token = Some(t);
                        fence_outcomes = Some(o2);
                    } else {
                        let detail = format!(
                            "granted by {granted}, but the fencing token {t} was confirmed by \
                             only {confirmed} before the validity ran out"
                        );
                        let r = sh.report(Op::Fence, o2, Some(detail));
                        failure = Some(if confirmed >= sh.quorum {
                            Error::NotAcquired(r)
                        } else {
                            sh.failure(r, Error::NotAcquired)
                        });
                    }
                }
                Err(e) => {
                    let (_, eval_cmd) = sh.script_cmds(
                        &sh.release_sha,
                        scripts::RELEASE,
                        &key,
                        &[token.as_bytes()],
                    );
                    sh.send_detached(&mut set, &eval_cmd, now);
                    sh.checkin(set);
                    return Err(e);
                }
            }
        }
        let ok = granted >= sh.quorum && expires > now && failure.is_none();
        if ok {
            // Nodes that had not answered when the quorum was reached may not have run the
            // SET yet; remember how to tell, so that unlock can keep the order (see pool.rs).
            let mut tickets = unanswered(&set, &outcomes);
            if let Some(o2) = &fence_outcomes {
                tickets.extend(unanswered(&set, o2));
            }
            // Grants from quarantined nodes did not count: take them back at once.
            let quarantined_grants: Vec<bool> = outcomes
                .iter()
                .zip(&replies)
                .map(|(o, r)| {
                    matches!(o, NodeOutcome::Quarantined { .. })
                        && r.as_ref().is_some_and(|r| {
                            classify_fenced(r).is_success() || classify(Op::Acquire, r).is_success()
                        })
                })
                .collect();
            if quarantined_grants.iter().any(|q| *q) {
                let (_, eval_cmd) =
                    sh.script_cmds(&sh.release_sha, scripts::RELEASE, &key, &[token.as_bytes()]);
                set.send_detached_to(&sh.nodes, &sh.settings, &eval_cmd, now, &|i| {
                    quarantined_grants[i]
                });
            }
            sh.checkin(set);
            let report = sh.report(Op::Acquire, outcomes, None);
            return Ok(Lease {
                inner: Arc::new(LeaseInner {
                    shared: Arc::clone(&self.shared),
                    resource: resource.to_vec(),
                    key,
                    token,
                    fencing_token,
                    expires: AtomicU64::new(sh.offset(expires)),
                    state: Mutex::new(LeaseState {
                        released: false,
                        ttl,
                        lost: None,
                        renewal: None,
                    }),
                    lost_cv: Condvar::new(),
                    acquired_at: start,
                    acquisition: report,
                    tickets: Mutex::new(tickets),
                    ever_renewed: AtomicBool::new(false),
                    renewing: AtomicBool::new(false),
                    lost_flag: AtomicBool::new(false),
                }),
            });
        }
        // Not granted: release everywhere at once, including on nodes that did not seem to
        // grant (a timed-out SET may still have been applied). The replies are discarded
        // later, so a failed attempt costs no extra round trip. The EVAL form is used because
        // a NOSCRIPT reply would not be seen.
        let (_, eval_cmd) =
            sh.script_cmds(&sh.release_sha, scripts::RELEASE, &key, &[token.as_bytes()]);
        sh.send_detached(&mut set, &eval_cmd, now);
        sh.checkin(set);
        if let Some(e) = failure {
            return Err(e);
        }
        let detail = (granted >= sh.quorum).then(|| {
            format!(
                "validity exhausted: the quorum answered after {} ms of a {} ms TTL",
                now.duration_since(start).as_millis(),
                ttl.as_millis()
            )
        });
        let report = sh.report(Op::Acquire, outcomes, detail);
        if granted >= sh.quorum {
            return Err(Error::NotAcquired(report));
        }
        Err(sh.failure(report, Error::NotAcquired))
    }
}

impl Shared {
    pub(crate) fn send_detached(&self, set: &mut ConnSet, bytes: &[u8], now: Instant) {
        set.send_detached(&self.nodes, &self.settings, bytes, now);
    }

    /// Nanoseconds from the epoch to `t`, plus one so that 0 can mean "not valid".
    fn offset(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch)
            .as_nanos()
            .min(u64::MAX as u128 - 1) as u64
            + 1
    }

    fn instant(&self, offset: u64) -> Option<Instant> {
        (offset != 0).then(|| self.epoch + Duration::from_nanos(offset - 1))
    }
}

pub(crate) struct LeaseState {
    pub(crate) released: bool,
    pub(crate) ttl: Duration,
    /// Set once the lease is known lost (renewal failed or reached its bound); never cleared.
    pub(crate) lost: Option<LostReason>,
    /// Present while auto-renewal is on.
    pub(crate) renewal: Option<RenewalState>,
}

pub(crate) struct LeaseInner {
    pub(crate) shared: Arc<Shared>,
    resource: Vec<u8>,
    pub(crate) key: Vec<u8>,
    pub(crate) token: String,
    /// The fencing token of a fenced grant.
    fencing_token: Option<u64>,
    /// When the validity ends, as an offset from the manager's epoch (see `Shared::offset`);
    /// 0 once released or lost. Read without locking.
    expires: AtomicU64,
    /// Serialises unlock, extend and renewal of one lease.
    pub(crate) state: Mutex<LeaseState>,
    /// Notified when the lease is marked lost.
    lost_cv: Condvar,
    /// When the acquiring step started (hold time counts from here).
    pub(crate) acquired_at: Instant,
    acquisition: Report,
    /// Commands about this key that some node had not answered yet, with the connection set
    /// that carried each: unlock must not overtake them (see pool.rs).
    pub(crate) tickets: Mutex<Vec<(u64, Ticket)>>,
    /// Auto-renewal was on at some point (its commands went over the renewal connections).
    ever_renewed: AtomicBool,
    /// Mirrors of `state.renewal.is_some()` and `state.lost.is_some()`, readable without
    /// waiting for the state lock (which unlock and extend hold during their round trip).
    renewing: AtomicBool,
    lost_flag: AtomicBool,
}

impl LeaseInner {
    pub(crate) fn expires_at(&self) -> Option<Instant> {
        self.shared.instant(self.expires.load(Ordering::Acquire))
    }

    pub(crate) fn set_expires(&self, t: Option<Instant>) {
        let v = t.map_or(0, |t| self.shared.offset(t));
        self.expires.store(v, Ordering::Release);
    }

    pub(crate) fn lock_state(&self) -> MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks the lease lost (validity 0 from now on, for good), wakes `wait_lost` callers and
    /// returns the holder's callback, to be called once no lock is held.
    pub(crate) fn mark_lost(
        &self,
        st: &mut LeaseState,
        reason: LostReason,
    ) -> Option<crate::renew::LostCallback> {
        log::warn!(
            "lease on {:?} lost: {reason}",
            String::from_utf8_lossy(&self.resource)
        );
        self.set_expires(None);
        st.lost = Some(reason);
        let cb = st.renewal.take().and_then(|r| r.on_lost);
        self.sync_flags(st);
        self.lost_cv.notify_all();
        cb
    }

    /// Updates the lock-free mirrors of the renewal and lost state.
    pub(crate) fn sync_flags(&self, st: &LeaseState) {
        self.renewing.store(st.renewal.is_some(), Ordering::Release);
        self.lost_flag.store(st.lost.is_some(), Ordering::Release);
    }

    fn had_renewal(&self) -> bool {
        self.ever_renewed.load(Ordering::Acquire)
    }

    fn set_had_renewal(&self) {
        self.ever_renewed.store(true, Ordering::Release);
    }

    pub(crate) fn add_tickets(&self, t: Vec<(u64, Ticket)>) {
        if t.is_empty() {
            return;
        }
        let mut all = self.tickets.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|(_, t)| !t.done());
        all.extend(t);
    }
}

/// A held lock.
///
/// Dropping a `Lease` does **not** unlock it (the key then expires after its TTL); call
/// [`unlock`](Self::unlock), or use [`into_guard`](Self::into_guard) for unlock-on-drop. A lease
/// keeps the manager's connections alive, so it may outlive the [`Redlock`] that made it.
pub struct Lease {
    inner: Arc<LeaseInner>,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("resource", &String::from_utf8_lossy(&self.inner.resource))
            .field("token", &format_args!("{}…", &self.inner.token[..8]))
            .field("fencing_token", &self.inner.fencing_token)
            .field("validity", &self.validity())
            .finish()
    }
}

impl Lease {
    /// The resource name, as given.
    pub fn resource(&self) -> &[u8] {
        &self.inner.resource
    }

    /// The Redis key that holds the lock on every node: `redlock:` followed by the resource.
    pub fn key(&self) -> &[u8] {
        &self.inner.key
    }

    /// The random token (40 hex characters) stored under the key: the proof of ownership.
    pub fn token(&self) -> &str {
        &self.inner.token
    }

    /// The fencing token of a lease from [`Redlock::try_lock_fenced`] and friends: strictly
    /// greater than that of every earlier fenced grant of the resource. `None` for a plain
    /// lock. Exact up to 2^53 (the nodes' Lua numbers are doubles).
    pub fn fencing_token(&self) -> Option<u64> {
        self.inner.fencing_token
    }

    /// The TTL of the last successful acquisition or extension.
    pub fn ttl(&self) -> Duration {
        self.inner
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ttl
    }

    /// The remaining validity: how much longer the holder may assume it holds the lock. Zero
    /// once expired, released or lost; never anything else after that.
    pub fn validity(&self) -> Duration {
        match self.inner.expires_at() {
            Some(t) => remaining(t, self.inner.shared.now()),
            None => Duration::ZERO,
        }
    }

    /// True while the remaining validity is positive.
    pub fn is_valid(&self) -> bool {
        !self.validity().is_zero()
    }

    /// The instant the validity ends, or `None` once released or lost.
    pub fn expires_at(&self) -> Option<Instant> {
        self.inner.expires_at()
    }

    /// The per-node outcome of the acquisition that granted this lease: how many nodes granted
    /// it and what happened on the others.
    pub fn acquisition(&self) -> &Report {
        &self.inner.acquisition
    }

    /// Releases the lock: the owner-checked delete script on every node at once, returning as
    /// soon as a quorum has confirmed (or can no longer confirm).
    ///
    /// Auto-renewal stops first, and an in-flight renewal is waited for: no renewal extends or
    /// restores the key after this returns. The lease reads as invalid from the moment this is
    /// called, whatever the outcome.
    ///
    /// Errors: [`Error::NotHeld`] if the lock had already expired or been lost, was already
    /// unlocked, or a quorum did not hold our token (the keys are still deleted wherever they
    /// are ours); [`Error::Unavailable`] if too many nodes failed to tell.
    pub fn unlock(&self) -> Result<(), Error> {
        let r = self.unlock_inner();
        let sh = &self.inner.shared;
        sh.metrics.unlocks.record(&r);
        if r.is_ok() {
            sh.metrics
                .hold
                .observe(sh.now().saturating_duration_since(self.inner.acquired_at));
        }
        r
    }

    fn unlock_inner(&self) -> Result<(), Error> {
        let inner = &self.inner;
        let sh = &inner.shared;
        // Holding the state lock: the renewal thread holds it while this lease's renewal is
        // in flight, so taking it waits for that renewal to finish.
        let mut st = inner.lock_state();
        if st.released {
            return Err(Error::NotHeld(sh.report(
                Op::Release,
                Vec::new(),
                Some("already unlocked; nothing sent".into()),
            )));
        }
        st.released = true;
        let was_renewing = st.renewal.take().is_some();
        let renewed = was_renewing || inner.had_renewal();
        inner.sync_flags(&st);
        if was_renewing {
            inner.lost_cv.notify_all(); // wait_lost returns: renewal is over
        }
        let start = sh.now();
        let was_valid = inner.expires_at().is_some_and(|t| t > start);
        let was_lost = st.lost.is_some();
        inner.set_expires(None);
        // Plain EVAL, not EVALSHA: the step returns at quorum, and a node still pending
        // then could answer NOSCRIPT (after a SCRIPT FLUSH) when nobody is left to send the
        // fallback, keeping the key until its TTL. The script is under 100 bytes, and a node
        // hashes it in well under a microsecond.
        let (_, eval_cmd) = sh.script_cmds(
            &sh.release_sha,
            scripts::RELEASE,
            &inner.key,
            &[inner.token.as_bytes()],
        );
        let node_timeout = sh.cfg.node_timeout_for(st.ttl);
        let cmd = Command {
            bytes: &eval_cmd,
            noscript_fallback: None,
            skip: &[],
        };

        // A node may not yet have run an earlier command about this key (the SET, or an
        // extension) sent over another connection. Release over the connection set that
        // carried it, so that each node runs the release after it, never before.
        let pending = |set: u64| {
            let t = inner.tickets.lock().unwrap_or_else(|p| p.into_inner());
            t.iter().any(|(s, t)| *s == set && !t.done())
        };
        let (pooled, via_renewer) = {
            let mut t = inner.tickets.lock().unwrap_or_else(|p| p.into_inner());
            t.retain(|(_, t)| !t.done());
            let renewer_id = crate::renew::RENEWER_SET_ID;
            (
                t.iter().map(|(s, _)| *s).find(|s| *s != renewer_id),
                renewed && t.iter().any(|(s, _)| *s == renewer_id),
            )
        };
        let renewer = sh.renewer().filter(|_| via_renewer);
        let outcomes = if pooled.is_none()
            && let Some(r) = &renewer
        {
            r.with_conns(|set| sh.step(set, Op::Release, &cmd, node_timeout, None))
        } else {
            let mut set = match pooled {
                Some(id) => sh
                    .pool
                    .checkout_preferring(id, start + node_timeout, || pending(id)),
                None => sh.checkout(),
            };
            let outcomes = sh.step(&mut set, Op::Release, &cmd, node_timeout, None);
            sh.checkin(set);
            // Renewals still owed on the renewal connections: queue a release behind them
            // too (owner-checked, so running it twice is harmless).
            if let Some(r) = &renewer {
                r.with_conns(|set| sh.send_detached(set, &eval_cmd, sh.now()));
            }
            outcomes
        };
        drop(st);
        let outcomes = outcomes?;
        let successes = outcomes.iter().filter(|o| o.is_success()).count();
        if !was_valid {
            let why = if was_lost {
                "the lease had been lost before unlock"
            } else {
                "the lock's validity had ended before unlock"
            };
            let report = sh.report(Op::Release, outcomes, Some(why.into()));
            return Err(Error::NotHeld(report));
        }
        if successes >= sh.quorum {
            return Ok(());
        }
        let report = sh.report(Op::Release, outcomes, None);
        Err(sh.failure(report, Error::NotHeld))
    }

    /// Extends the lock to `ttl` from now: the owner-checked `PEXPIRE` script on every node.
    /// It succeeds only if a quorum confirms before the current validity ends; the validity is
    /// then recomputed as `ttl − elapsed − drift`. It never recreates a key that expired.
    ///
    /// Errors: [`Error::InvalidInput`] (TTL out of range; nothing sent), [`Error::NotHeld`]
    /// (already expired locally, lost, unlocked, or not confirmed by a quorum in time),
    /// [`Error::Unavailable`]. After a failed extension the validity is never longer than
    /// before it (it is shortened if the new TTL was shorter, since some nodes may have
    /// applied it).
    pub fn extend(&self, ttl: Duration) -> Result<(), Error> {
        let r = self.extend_inner(ttl);
        self.inner.shared.metrics.extensions.record(&r);
        r
    }

    fn extend_inner(&self, ttl: Duration) -> Result<(), Error> {
        let inner = &self.inner;
        let sh = &inner.shared;
        config::check_ttl_for(ttl, &sh.cfg)?;
        let mut st = inner.lock_state();
        let no_io = |detail: &str| {
            Err(Error::NotHeld(sh.report(
                Op::Extend,
                Vec::new(),
                Some(detail.to_string()),
            )))
        };
        if st.released {
            return no_io("already unlocked; nothing sent");
        }
        if st.lost.is_some() {
            return no_io("the lease was lost; nothing sent");
        }
        let start = sh.now();
        let old = match inner.expires_at() {
            Some(t) if t > start => t,
            _ => {
                inner.set_expires(None);
                return no_io("the lock's validity had ended; nothing sent");
            }
        };
        let mut digits = [0u8; 20];
        let ttl_ms = resp::decimal(ttl.as_millis() as u64, &mut digits);
        let (sha_cmd, eval_cmd) = sh.script_cmds(
            &sh.extend_sha,
            scripts::EXTEND,
            &inner.key,
            &[inner.token.as_bytes(), ttl_ms],
        );
        let mut set = sh.checkout();
        let outcomes = sh.step(
            &mut set,
            Op::Extend,
            &Command {
                bytes: &sha_cmd,
                noscript_fallback: Some(&eval_cmd),
                skip: &[],
            },
            sh.cfg.node_timeout_for(ttl),
            Some(old),
        );
        if let Ok(o) = &outcomes {
            inner.add_tickets(unanswered(&set, o));
        }
        sh.checkin(set);
        let outcomes = outcomes?;
        let now = sh.now();
        let new = expiry(start, ttl, sh.cfg.drift_factor);
        let successes = outcomes.iter().filter(|o| o.is_success()).count();
        if successes >= sh.quorum && now < old && now < new {
            inner.set_expires(Some(new));
            st.ttl = ttl;
            if let Some(r) = st.renewal.as_mut() {
                r.renewed(start, ttl);
            }
            return Ok(());
        }
        // Some nodes may have applied a shorter TTL: never keep a validity longer than either.
        let keep = old.min(new);
        inner.set_expires((keep > now).then_some(keep));
        let detail = (successes >= sh.quorum)
            .then(|| "the quorum confirmed only after the validity had ended".to_string());
        let report = sh.report(Op::Extend, outcomes, detail);
        if successes >= sh.quorum {
            return Err(Error::NotHeld(report));
        }
        Err(sh.failure(report, Error::NotHeld))
    }

    /// Turns on auto-renewal: the manager's renewal thread (one per manager, started on first
    /// use) extends this lock to its TTL each time `renew_after × TTL` has passed since the
    /// last success (a third by default), batching renewals that fall due together into one
    /// command per node. A renewal also restores the key on a node that lost it (a node
    /// restarted empty) while the lease is valid; it never recreates an expired or released
    /// lock.
    ///
    /// Renewal is bounded by `max_hold` (1 hour by default) and optionally a number of
    /// extensions. When a renewal cannot confirm a quorum before the validity runs out, or the
    /// bound is reached, the lease is marked **lost** shortly *before* its validity ends: from
    /// then on [`validity`](Self::validity) reads 0, [`is_lost`](Self::is_lost) is true,
    /// [`wait_lost`](Self::wait_lost) returns, and the `on_lost` callback runs once on the
    /// renewal thread. Dropping the lease (or [`stop_renewal`](Self::stop_renewal)) stops
    /// renewal; unlocking stops it and waits for any renewal in flight.
    ///
    /// Calling it again replaces the options. Errors: [`Error::NotHeld`] (unlocked, lost or
    /// expired), [`Error::InvalidInput`] (bad options).
    pub fn auto_renew(&self, opts: RenewOptions) -> Result<(), Error> {
        opts.validate()?;
        let inner = &self.inner;
        let sh = &inner.shared;
        let mut st = inner.lock_state();
        let detail = if st.released {
            Some("already unlocked")
        } else if st.lost.is_some() {
            Some("the lease was lost")
        } else if inner.expires_at().is_none_or(|t| t <= sh.now()) {
            Some("the lock's validity had ended")
        } else {
            None
        };
        if let Some(d) = detail {
            return Err(Error::NotHeld(sh.report(
                Op::Extend,
                Vec::new(),
                Some(d.into()),
            )));
        }
        let last = inner
            .expires_at()
            .map(|e| {
                e - st
                    .ttl
                    .saturating_sub(config::drift(st.ttl, sh.cfg.drift_factor))
            })
            .unwrap_or_else(|| sh.now());
        let r = sh.renewer_or_start()?;
        st.renewal = Some(RenewalState::new(opts, last, st.ttl));
        inner.sync_flags(&st);
        inner.set_had_renewal();
        drop(st);
        r.register(&self.inner);
        Ok(())
    }

    /// Stops auto-renewal without unlocking, waiting for a renewal in flight. The lock then
    /// expires at the end of its current validity unless extended or unlocked. No effect if
    /// renewal is off.
    pub fn stop_renewal(&self) {
        let mut st = self.inner.lock_state();
        if st.renewal.take().is_some() {
            self.inner.sync_flags(&st);
            self.inner.lost_cv.notify_all();
        }
    }

    /// True while auto-renewal is on (not stopped, unlocked, lost or bound-reached).
    pub fn is_renewing(&self) -> bool {
        self.inner.renewing.load(Ordering::Acquire)
    }

    /// True once the lease is known lost: auto-renewal could not confirm a quorum in time, or
    /// reached its bound. A lost lease never becomes valid again.
    pub fn is_lost(&self) -> bool {
        self.inner.lost_flag.load(Ordering::Acquire)
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.inner.lock_state().lost.clone()
    }

    /// Blocks while auto-renewal is on, until the lease is marked lost or `timeout` passes.
    /// Returns true if the lease is lost; false on timeout, and at once (or as soon as it
    /// happens) when renewal is off: never started, stopped, or ended by unlock.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.inner.lock_state();
        while st.lost.is_none() {
            let now = Instant::now();
            if now >= deadline || st.renewal.is_none() {
                return false;
            }
            st = self
                .inner
                .lost_cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }

    /// Wraps a shared lease handle (the renewal thread hands one to `on_lost` callbacks).
    pub(crate) fn from_inner(inner: Arc<LeaseInner>) -> Lease {
        Lease { inner }
    }

    /// Wraps the lease in a guard that unlocks it when dropped.
    pub fn into_guard(self) -> LeaseGuard {
        LeaseGuard { lease: Some(self) }
    }
}

/// A [`Lease`] that is unlocked when the guard is dropped. A failed unlock on drop is logged
/// at warning level, never a panic. Dereferences to the lease.
#[derive(Debug)]
pub struct LeaseGuard {
    lease: Option<Lease>,
}

impl LeaseGuard {
    /// Unlocks now and reports the outcome (instead of only logging it on drop).
    pub fn unlock(mut self) -> Result<(), Error> {
        match self.lease.take() {
            Some(l) => l.unlock(),
            None => Ok(()),
        }
    }

    /// Gives the lease back without unlocking it.
    pub fn into_inner(mut self) -> Lease {
        self.lease
            .take()
            .expect("a guard always holds its lease until dropped")
    }
}

impl std::ops::Deref for LeaseGuard {
    type Target = Lease;
    fn deref(&self) -> &Lease {
        self.lease
            .as_ref()
            .expect("a guard always holds its lease until dropped")
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(l) = self.lease.take()
            && let Err(e) = l.unlock()
        {
            log::warn!(
                "unlock of {:?} on drop failed: {e}",
                String::from_utf8_lossy(l.resource())
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    /// A clock that moves only when told to.
    struct ManualClock(StdMutex<Instant>);

    impl ManualClock {
        fn advance(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Instant {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn quorum_edges() {
        let expected = [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)];
        for (n, q) in expected {
            assert_eq!(quorum(n), q, "n = {n}");
            // A majority: two quorums always intersect, and a minority can fail.
            assert!(2 * q > n);
            assert!(n - q < q);
        }
    }

    #[test]
    fn validity_arithmetic() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(10);
        // drift = 10 s × 0.01 + 2 ms = 102 ms
        let e = expiry(t0, ttl, 0.01);
        assert_eq!(e - t0, Duration::from_millis(9898));
        // After 1 s elapsed, 8.898 s remain: TTL − elapsed − drift.
        assert_eq!(
            remaining(e, t0 + Duration::from_secs(1)),
            Duration::from_millis(8898)
        );
        // Elapsed beyond the TTL: zero, never a huge value from an underflow.
        assert_eq!(remaining(e, t0 + Duration::from_secs(11)), Duration::ZERO);
        assert_eq!(remaining(e, t0 + Duration::from_secs(3600)), Duration::ZERO);
        // Exactly at the boundary: zero.
        assert_eq!(remaining(e, e), Duration::ZERO);
        // A TTL shorter than its drift cannot produce a later expiry than its start.
        assert_eq!(expiry(t0, Duration::from_millis(1), 0.01), t0);
    }

    #[test]
    fn lease_validity_follows_an_injected_clock() {
        let clock = Arc::new(ManualClock(StdMutex::new(Instant::now())));
        let mgr = Redlock::with_clock(Config::new(["127.0.0.1:1"]), clock.clone()).unwrap();
        let sh = &mgr.shared;
        let start = clock.now();
        let ttl = Duration::from_millis(1000);
        let inner = LeaseInner {
            shared: Arc::clone(sh),
            resource: b"r".to_vec(),
            key: key_for(b"r"),
            token: "0".repeat(40),
            fencing_token: None,
            expires: AtomicU64::new(sh.offset(expiry(start, ttl, 0.01))),
            state: Mutex::new(LeaseState {
                released: false,
                ttl,
                lost: None,
                renewal: None,
            }),
            lost_cv: Condvar::new(),
            acquired_at: start,
            acquisition: sh.report(Op::Acquire, vec![NodeOutcome::Success], None),
            tickets: Mutex::new(Vec::new()),
            ever_renewed: AtomicBool::new(false),
            renewing: AtomicBool::new(false),
            lost_flag: AtomicBool::new(false),
        };
        let lease = Lease {
            inner: Arc::new(inner),
        };
        // drift = 10 ms + 2 ms
        assert_eq!(lease.validity(), Duration::from_millis(988));
        clock.advance(Duration::from_millis(500));
        assert_eq!(lease.validity(), Duration::from_millis(488));
        assert!(lease.is_valid());
        clock.advance(Duration::from_millis(488));
        assert_eq!(lease.validity(), Duration::ZERO);
        assert!(!lease.is_valid());
        clock.advance(Duration::from_secs(10));
        assert_eq!(lease.validity(), Duration::ZERO);
        // Extend refuses an expired lease without any I/O (node 127.0.0.1:1 is never
        // contacted: the report has no node lines).
        match lease.extend(Duration::from_secs(1)) {
            Err(Error::NotHeld(r)) => assert!(r.nodes.is_empty(), "{r}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn classify_replies() {
        assert!(classify(Op::Acquire, &Reply::Ok).is_success());
        assert_eq!(classify(Op::Acquire, &Reply::Nil), NodeOutcome::Rejected);
        assert_eq!(classify(Op::Release, &Reply::Int(0)), NodeOutcome::Rejected);
        assert!(classify(Op::Extend, &Reply::Int(1)).is_success());
        assert!(matches!(
            classify(Op::Release, &Reply::Ok),
            NodeOutcome::Protocol(_)
        ));
        assert!(matches!(
            classify(Op::Acquire, &Reply::Int(1)),
            NodeOutcome::Protocol(_)
        ));
        assert!(matches!(
            classify(
                Op::Release,
                &Reply::Error {
                    code: "WRONGTYPE".into(),
                    text: "WRONGTYPE x".into()
                }
            ),
            NodeOutcome::ServerError(_)
        ));
    }

    #[test]
    fn bad_input_is_rejected_before_any_io() {
        let mgr = Redlock::new(Config::new(["127.0.0.1:1"])).unwrap();
        for (res, ttl) in [
            (&b""[..], Duration::from_secs(1)),
            (&[b'x'; 1025][..], Duration::from_secs(1)),
            (&b"r"[..], Duration::ZERO),
            (&b"r"[..], Duration::from_millis(2)),
            (&b"r"[..], config::MAX_TTL + Duration::from_millis(1)),
        ] {
            assert!(matches!(
                mgr.try_lock(res, ttl),
                Err(Error::InvalidInput(_))
            ));
            assert!(matches!(mgr.lock(res, ttl), Err(Error::InvalidInput(_))));
        }
    }
}
