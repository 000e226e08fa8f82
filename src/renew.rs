//! Auto-renewal: one background thread per manager keeps auto-renewed leases alive, bounded,
//! and tells the holder when a lease is lost.
//!
//! Each lease falls due when `renew_after × TTL` has passed since its last confirmed renewal.
//! Leases that fall due together (within a thirtieth of their TTL) are renewed by one command
//! per node: a script that, for each key, extends it if it holds our token, restores it if it
//! is missing (the node lost it, say by restarting empty), and leaves it alone otherwise. A
//! lease counts as renewed when a quorum confirmed it before its validity ended; it is marked
//! lost shortly *before* the validity ends if no renewal was confirmed by then, at once if a
//! quorum reports another owner, and when it reaches its bound (hold time or extensions).
//!
//! Renewal steps wait for every node (no early return: this thread is off the caller's path),
//! over connections of their own. A lease's unlock takes the lease's state lock, which this
//! thread holds while the lease's renewal is in flight, so unlock waits for it; unlock then
//! releases over these same connections when a node still owes a renewal reply, so that no
//! renewal can extend or restore the key after the release.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::error::{Error, NodeOutcome, Op, Report};
use crate::lock::{Lease, LeaseInner, LeaseState, Shared, expiry, script_calls};
use crate::node::{Command, ConnSet, NodeResult, StepLimits, Ticket};
use crate::resp::{self, Reply};
use crate::scripts;

/// The id of the renewal thread's connection set (pooled sets start at 1).
pub(crate) const RENEWER_SET_ID: u64 = 0;

/// The most keys one renewal command carries; more are split over several commands.
const MAX_KEYS_PER_COMMAND: usize = 1000;

/// Called once, on the renewal thread, when an auto-renewed lease is lost. It may use the
/// lease (`is_lost`, `lost_reason`, `resource`, even `unlock`), but should return quickly:
/// other leases wait for it.
pub type LostCallback = Arc<dyn Fn(&Lease) + Send + Sync>;

/// Options for [`Lease::auto_renew`].
#[derive(Clone)]
pub struct RenewOptions {
    pub(crate) max_hold: Duration,
    pub(crate) max_extensions: Option<u32>,
    pub(crate) renew_after: f64,
    pub(crate) on_lost: Option<LostCallback>,
}

impl Default for RenewOptions {
    fn default() -> Self {
        RenewOptions {
            max_hold: Duration::from_secs(3600),
            max_extensions: None,
            renew_after: 1.0 / 3.0,
            on_lost: None,
        }
    }
}

impl fmt::Debug for RenewOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenewOptions")
            .field("max_hold", &self.max_hold)
            .field("max_extensions", &self.max_extensions)
            .field("renew_after", &self.renew_after)
            .field("on_lost", &self.on_lost.is_some())
            .finish()
    }
}

impl RenewOptions {
    /// The defaults: renew after a third of the TTL, for at most one hour, no callback.
    pub fn new() -> RenewOptions {
        RenewOptions::default()
    }

    /// The longest time the lease is held, counted from its acquisition; renewal stops and
    /// the lease is reported lost when it is reached. Must be > 0. Defaults to 1 hour.
    pub fn max_hold(mut self, d: Duration) -> RenewOptions {
        self.max_hold = d;
        self
    }

    /// The most automatic extensions; when the next one would be due after that many, the
    /// lease is reported lost. Defaults to no limit other than `max_hold`.
    pub fn max_extensions(mut self, n: u32) -> RenewOptions {
        self.max_extensions = Some(n);
        self
    }

    /// The fraction of the TTL after which a renewal falls due, in `(0, 0.75]`. Defaults to
    /// 1/3.
    pub fn renew_after(mut self, fraction: f64) -> RenewOptions {
        self.renew_after = fraction;
        self
    }

    /// A callback run once, on the renewal thread, when the lease is lost.
    pub fn on_lost(mut self, f: impl Fn(&Lease) + Send + Sync + 'static) -> RenewOptions {
        self.on_lost = Some(Arc::new(f));
        self
    }

    pub(crate) fn validate(&self) -> Result<(), Error> {
        if self.max_hold.is_zero() {
            return Err(Error::invalid("max hold time must be > 0"));
        }
        if !(self.renew_after.is_finite() && self.renew_after > 0.0 && self.renew_after <= 0.75) {
            return Err(Error::invalid(format!(
                "renew_after must be in (0, 0.75], got {}",
                self.renew_after
            )));
        }
        Ok(())
    }
}

/// Why an auto-renewed lease was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// No renewal was confirmed by a quorum before the validity ran out, or a quorum reported
    /// another owner. The report is the last renewal attempt's.
    RenewalFailed(Report),
    /// The maximum hold time was reached.
    MaxHoldReached {
        /// How long the lease had been held.
        held: Duration,
    },
    /// The maximum number of automatic extensions was reached.
    MaxExtensionsReached {
        /// How many extensions were made.
        extensions: u32,
    },
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LostReason::RenewalFailed(r) => write!(f, "renewal failed: {r}"),
            LostReason::MaxHoldReached { held } => {
                write!(f, "maximum hold time reached after {} ms", held.as_millis())
            }
            LostReason::MaxExtensionsReached { extensions } => {
                write!(f, "maximum of {extensions} extensions reached")
            }
        }
    }
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

/// Per-lease renewal state, kept in the lease's state (under its lock).
pub(crate) struct RenewalState {
    max_hold: Duration,
    max_extensions: Option<u32>,
    renew_after: f64,
    pub(crate) on_lost: Option<LostCallback>,
    extensions: u32,
    next_due: Instant,
    last_failure: Option<Report>,
}

impl RenewalState {
    /// Renewal state for a lease last confirmed at `last` with `ttl`.
    pub(crate) fn new(opts: RenewOptions, last: Instant, ttl: Duration) -> RenewalState {
        RenewalState {
            max_hold: opts.max_hold,
            max_extensions: opts.max_extensions,
            renew_after: opts.renew_after,
            on_lost: opts.on_lost,
            extensions: 0,
            next_due: last + ttl.mul_f64(opts.renew_after),
            last_failure: None,
        }
    }

    /// The lease was extended (by hand) from `start` with `ttl`: renew relative to that.
    pub(crate) fn renewed(&mut self, start: Instant, ttl: Duration) {
        self.next_due = start + ttl.mul_f64(self.renew_after);
        self.last_failure = None;
    }
}

/// Lost before the validity ends by this much: room for the thread to wake up late.
fn lost_margin(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(2), Duration::from_millis(250))
}

/// How soon a failed renewal is tried again.
fn retry_interval(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_millis(5), Duration::from_secs(1))
}

enum Verdict {
    Due,
    Later(Instant),
    Done,
    Lost(LostReason),
}

fn examine(inner: &LeaseInner, st: &LeaseState, now: Instant) -> Verdict {
    if st.released || st.lost.is_some() {
        return Verdict::Done;
    }
    let Some(rs) = st.renewal.as_ref() else {
        return Verdict::Done;
    };
    let Some(exp) = inner.expires_at() else {
        return Verdict::Done;
    };
    let hold_end = inner.acquired_at + rs.max_hold;
    if now >= hold_end {
        return Verdict::Lost(LostReason::MaxHoldReached {
            held: now.duration_since(inner.acquired_at),
        });
    }
    let lost_at = exp.checked_sub(lost_margin(st.ttl)).unwrap_or(exp);
    if now >= lost_at {
        let report = rs.last_failure.clone().unwrap_or_else(|| {
            inner.shared.report(
                Op::Extend,
                Vec::new(),
                Some("no renewal was confirmed by a quorum before the validity ran out".into()),
            )
        });
        return Verdict::Lost(LostReason::RenewalFailed(report));
    }
    if let Some(max) = rs.max_extensions
        && rs.extensions >= max
    {
        if now >= rs.next_due {
            return Verdict::Lost(LostReason::MaxExtensionsReached {
                extensions: rs.extensions,
            });
        }
        return Verdict::Later(rs.next_due.min(lost_at).min(hold_end));
    }
    let slack = st.ttl / 30;
    if now + slack >= rs.next_due {
        return Verdict::Due;
    }
    Verdict::Later((rs.next_due - slack).min(lost_at).min(hold_end))
}

#[derive(Default)]
struct Stats {
    ticks: AtomicU64,
    commands: AtomicU64,
    attempts: AtomicU64,
    renewed: AtomicU64,
    restored: AtomicU64,
    lost: AtomicU64,
    max_batch: AtomicU64,
}

struct Registry {
    leases: Vec<Weak<LeaseInner>>,
    /// Something changed since the thread last looked.
    dirty: bool,
    shutdown: bool,
}

/// The renewal thread's shared half.
pub(crate) struct Renewer {
    reg: Mutex<Registry>,
    wake: Condvar,
    conns: Mutex<ConnSet>,
    stats: Stats,
}

type Fired = Vec<(LostCallback, Arc<LeaseInner>)>;

impl Renewer {
    /// Starts the renewal thread of `shared`'s manager. It holds only a weak reference, so it
    /// never keeps a manager alive, and exits when the manager and its last lease are gone.
    pub(crate) fn start(shared: &Arc<Shared>) -> Result<Arc<Renewer>, Error> {
        let r = Arc::new(Renewer {
            reg: Mutex::new(Registry {
                leases: Vec::new(),
                dirty: false,
                shutdown: false,
            }),
            wake: Condvar::new(),
            conns: Mutex::new(ConnSet::new(shared.nodes.len(), RENEWER_SET_ID)),
            stats: Stats::default(),
        });
        let weak = Arc::downgrade(shared);
        let thread_side = Arc::clone(&r);
        std::thread::Builder::new()
            .name("redlock-renewal".into())
            .spawn(move || run(weak, thread_side))
            .map_err(|e| Error::Internal(format!("cannot start the renewal thread: {e}")))?;
        Ok(r)
    }

    fn lock_reg(&self) -> MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn register(&self, lease: &Arc<LeaseInner>) {
        let mut reg = self.lock_reg();
        let w = Arc::downgrade(lease);
        if !reg.leases.iter().any(|l| l.ptr_eq(&w)) {
            reg.leases.push(w);
        }
        reg.dirty = true;
        drop(reg);
        self.wake.notify_all();
    }

    pub(crate) fn shutdown(&self) {
        self.lock_reg().shutdown = true;
        self.wake.notify_all();
    }

    /// Runs `f` on the renewal connections (waiting for a renewal round in flight).
    pub(crate) fn with_conns<T>(&self, f: impl FnOnce(&mut ConnSet) -> T) -> T {
        let mut set = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut set)
    }

    pub(crate) fn stats(&self) -> RenewalStats {
        let s = &self.stats;
        RenewalStats {
            ticks: s.ticks.load(Ordering::Relaxed),
            commands_per_node: s.commands.load(Ordering::Relaxed),
            attempts: s.attempts.load(Ordering::Relaxed),
            renewed: s.renewed.load(Ordering::Relaxed),
            restored: s.restored.load(Ordering::Relaxed),
            lost: s.lost.load(Ordering::Relaxed),
            max_batch: s.max_batch.load(Ordering::Relaxed),
        }
    }

    /// Looks at every registered lease: drops the finished ones, marks the lost ones, and
    /// returns those due now and the time the next one falls due.
    fn collect(&self, now: Instant, fired: &mut Fired) -> (Vec<Arc<LeaseInner>>, Option<Instant>) {
        let leases: Vec<Arc<LeaseInner>> = {
            let mut reg = self.lock_reg();
            reg.dirty = false;
            reg.leases.retain(|w| w.strong_count() > 0);
            reg.leases.iter().filter_map(Weak::upgrade).collect()
        };
        let mut due = Vec::new();
        let mut next: Option<Instant> = None;
        let mut done: Vec<*const LeaseInner> = Vec::new();
        for l in leases {
            // Never wait on a lease's lock here: its holder may be unlocking it and waiting
            // for the renewal connections. Look again shortly instead.
            let Ok(mut st) = l.state.try_lock() else {
                let soon = now + Duration::from_millis(1);
                next = Some(next.map_or(soon, |n| n.min(soon)));
                continue;
            };
            match examine(&l, &st, now) {
                Verdict::Due => {
                    drop(st);
                    due.push(l);
                }
                Verdict::Later(t) => next = Some(next.map_or(t, |n| n.min(t))),
                Verdict::Done => done.push(Arc::as_ptr(&l)),
                Verdict::Lost(reason) => {
                    self.stats.lost.fetch_add(1, Ordering::Relaxed);
                    if let Some(cb) = l.mark_lost(&mut st, reason) {
                        drop(st);
                        fired.push((cb, Arc::clone(&l)));
                    }
                    done.push(Arc::as_ptr(&l));
                }
            }
        }
        if !done.is_empty() {
            self.lock_reg()
                .leases
                .retain(|w| !done.contains(&w.as_ptr()));
        }
        (due, next)
    }

    /// Renews `due` leases with one command per node (per 1000 keys).
    fn renew(&self, sh: &Shared, due: &[Arc<LeaseInner>], fired: &mut Fired) {
        let now = sh.now();
        let mut held: Vec<(&Arc<LeaseInner>, MutexGuard<'_, LeaseState>)> = Vec::new();
        for l in due {
            // Held for the whole round: an unlock of this lease waits for it.
            if let Ok(st) = l.state.try_lock()
                && matches!(examine(l, &st, now), Verdict::Due)
            {
                held.push((l, st));
            }
        }
        for chunk in held.chunks_mut(MAX_KEYS_PER_COMMAND) {
            self.renew_chunk(sh, chunk, fired);
        }
    }

    fn renew_chunk(
        &self,
        sh: &Shared,
        chunk: &mut [(&Arc<LeaseInner>, MutexGuard<'_, LeaseState>)],
        fired: &mut Fired,
    ) {
        let n = chunk.len();
        let sha = resp::script_sha(scripts::RENEW);
        let ttls: Vec<String> = chunk
            .iter()
            .map(|(_, st)| st.ttl.as_millis().to_string())
            .collect();
        let keys: Vec<&[u8]> = chunk.iter().map(|(l, _)| &l.key[..]).collect();
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 * n);
        for ((l, _), ttl) in chunk.iter().zip(&ttls) {
            args.push(l.token.as_bytes());
            args.push(ttl.as_bytes());
        }
        let (sha_cmd, eval_cmd) = script_calls(&sha, scripts::RENEW, &keys, &args);

        let node_timeout = chunk
            .iter()
            .map(|(_, st)| sh.cfg.node_timeout_for(st.ttl))
            .min()
            .unwrap_or(Duration::from_millis(50));
        // Stop waiting in time to report a lease lost before its validity ends.
        let cap = chunk
            .iter()
            .filter_map(|(l, st)| {
                l.expires_at()
                    .and_then(|e| e.checked_sub(lost_margin(st.ttl) / 2))
            })
            .min();
        let cmd = Command {
            bytes: &sha_cmd,
            noscript_fallback: Some(&eval_cmd),
            skip: &[],
        };
        let start = sh.now();
        let clock = || sh.now();
        let mut tickets: Vec<(u64, Ticket)> = Vec::new();
        let results = self.with_conns(|set| {
            let r = set.step(
                &sh.nodes,
                &sh.settings,
                &cmd,
                StepLimits { node_timeout, cap },
                &clock,
                |_| false,
            );
            if let Ok(results) = &r {
                for (i, res) in results.iter().enumerate() {
                    if matches!(
                        res,
                        NodeResult::Failed(NodeOutcome::Timeout | NodeOutcome::Pending)
                    ) && let Some(t) = set.ticket(i)
                    {
                        tickets.push((RENEWER_SET_ID, t));
                    }
                }
            }
            r
        });
        let s = &self.stats;
        s.ticks.fetch_add(1, Ordering::Relaxed);
        s.commands.fetch_add(1, Ordering::Relaxed);
        s.attempts.fetch_add(n as u64, Ordering::Relaxed);
        s.max_batch.fetch_max(n as u64, Ordering::Relaxed);
        let results = match results {
            Ok(r) => r,
            Err(e) => {
                log::warn!("renewal round failed: poll(2): {e}");
                return;
            }
        };
        let latencies = self.with_conns(|set| set.latencies().to_vec());
        for (i, r) in results.iter().enumerate() {
            sh.metrics
                .node(i, &outcome_of(r, 0), latencies.get(i).copied().flatten());
        }
        let now = sh.now();
        for (j, (l, st)) in chunk.iter_mut().enumerate() {
            l.add_tickets(tickets.clone());
            let outcomes: Vec<NodeOutcome> = results.iter().map(|r| outcome_of(r, j)).collect();
            let restored = results
                .iter()
                .filter(|r| matches!(r, NodeResult::Reply(Reply::Array(a)) if a.get(j) == Some(&Reply::Int(2))))
                .count();
            let successes = outcomes.iter().filter(|o| o.is_success()).count();
            let old = l.expires_at();
            let ttl = st.ttl;
            if successes >= sh.quorum && old.is_some_and(|o| now < o) {
                l.set_expires(Some(expiry(start, ttl, sh.cfg.drift_factor)));
                s.renewed.fetch_add(1, Ordering::Relaxed);
                if restored > 0 {
                    s.restored.fetch_add(restored as u64, Ordering::Relaxed);
                    log::info!(
                        "renewal restored the lock key on {restored} node(s) that had lost it"
                    );
                }
                if let Some(rs) = st.renewal.as_mut() {
                    rs.extensions += 1;
                    rs.renewed(start, ttl);
                }
                continue;
            }
            let rejected = outcomes
                .iter()
                .filter(|o| **o == NodeOutcome::Rejected)
                .count();
            let report = sh.report(
                Op::Extend,
                outcomes,
                Some("automatic renewal not confirmed by a quorum".into()),
            );
            if sh.nodes.len() - rejected < sh.quorum {
                // Another owner holds the key on so many nodes that no renewal can succeed.
                s.lost.fetch_add(1, Ordering::Relaxed);
                if let Some(cb) = l.mark_lost(st, LostReason::RenewalFailed(report)) {
                    fired.push((cb, Arc::clone(l)));
                }
                continue;
            }
            log::debug!("renewal failed, retrying: {report}");
            if let Some(rs) = st.renewal.as_mut() {
                rs.last_failure = Some(report);
                rs.next_due = now + retry_interval(ttl);
            }
        }
    }
}

/// Lease `j`'s outcome on one node, from that node's reply to a renewal command.
fn outcome_of(r: &NodeResult, j: usize) -> NodeOutcome {
    match r {
        NodeResult::Reply(Reply::Array(items)) => match items.get(j) {
            Some(Reply::Int(1 | 2)) => NodeOutcome::Success,
            Some(Reply::Int(0)) => NodeOutcome::Rejected,
            Some(Reply::Int(-1)) => {
                NodeOutcome::ServerError("the key holds a value of another type".into())
            }
            other => NodeOutcome::Protocol(format!("unexpected renewal reply item {other:?}")),
        },
        NodeResult::Reply(Reply::Error { text, .. }) => NodeOutcome::ServerError(text.clone()),
        NodeResult::Reply(other) => {
            NodeOutcome::Protocol(format!("unexpected reply: {}", other.describe()))
        }
        NodeResult::Failed(o) => o.clone(),
        NodeResult::Waiting => NodeOutcome::Pending,
    }
}

fn fire(fired: Fired) {
    for (cb, inner) in fired {
        let lease = Lease::from_inner(inner);
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(&lease))).is_err() {
            log::error!("an on_lost callback panicked; the renewal thread carries on");
        }
    }
}

fn run(weak: Weak<Shared>, r: Arc<Renewer>) {
    loop {
        let next = {
            let Some(sh) = weak.upgrade() else { return };
            let mut fired = Vec::new();
            let (due, next) = r.collect(sh.now(), &mut fired);
            let again = !due.is_empty();
            if again {
                r.renew(&sh, &due, &mut fired);
            }
            // Callbacks run with no lock held, and without keeping the manager alive.
            drop(due);
            drop(sh);
            let again = again || !fired.is_empty();
            fire(fired);
            if again {
                // Renewed leases have new due times: look again before sleeping.
                continue;
            }
            next
        };
        let reg = r.lock_reg();
        if reg.shutdown {
            return;
        }
        if reg.dirty {
            continue;
        }
        let wait = match next {
            Some(t) => t.saturating_duration_since(Instant::now()),
            // Nothing registered: sleep until a registration or shutdown wakes us.
            None => Duration::from_secs(3600),
        };
        if wait.is_zero() {
            continue;
        }
        drop(
            r.wake
                .wait_timeout(reg, wait)
                .unwrap_or_else(|p| p.into_inner()),
        );
    }
}
