//! The lease: the handle every primitive returns for what it holds, with its validity,
//! release, extension, and the renewal state the renewal thread works on. Also the manager's
//! shared core, which a lease keeps alive so that it may outlive its manager.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{Error, NodeOutcome, Op, Report};
use crate::notify::Listener;
use crate::quorum::{Cluster, Cmd, Limits, Part, Request, Split, every};
use crate::resp::Reply;
use crate::timing::{Budget, Epoch, remaining, work_allowance};
use crate::ttl::Ttl;

mod kind;
mod renewal;

pub(crate) use kind::{Calls, Kind, Renewing, Restore, owned_calls};
pub use renewal::{LostCallback, LostReason, RenewOptions};
pub(crate) use renewal::{Renewal, Renewals};

/// Everything a manager and its leases share.
pub(crate) struct Shared {
    pub(crate) cluster: Cluster,
    pub(crate) cfg: Config,
    pub(crate) budget: Budget,
    epoch: Epoch,
    /// The leases the renewal thread keeps alive (the thread itself is in renew.rs, and holds
    /// this but not the manager).
    pub(crate) renewals: Arc<Renewals>,
    /// Wakes the waiters of this manager when a lock they wait for is released.
    pub(crate) listener: Listener,
}

impl Shared {
    pub(crate) fn new(cluster: Cluster, cfg: Config, listener: Listener) -> Shared {
        Shared {
            epoch: Epoch::new(cluster.now()),
            budget: cfg.budget(),
            cluster,
            cfg,
            renewals: Arc::default(),
            listener,
        }
    }

    pub(crate) fn now(&self) -> Instant {
        self.cluster.now()
    }

    /// A report decided locally, with no node contacted.
    pub(crate) fn no_io(&self, op: Op, detail: &str) -> Report {
        self.cluster
            .report(op, Vec::new(), Some(detail.to_string()))
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.renewals.shut_down();
    }
}

pub(crate) struct LeaseState {
    pub(crate) released: bool,
    pub(crate) ttl: Ttl,
    /// Set once the lease is known lost (renewal failed or reached its bound); never cleared.
    pub(crate) lost: Option<LostReason>,
    /// Present while auto-renewal is on.
    pub(crate) renewal: Option<Renewal>,
}

/// What a primitive hands over when it has acquired something.
pub(crate) struct Granted {
    pub resource: Vec<u8>,
    pub key: Vec<u8>,
    pub token: String,
    /// What kind of lease it is: how it is released, extended and renewed.
    pub kind: Box<dyn Kind>,
    pub fencing_token: Option<u64>,
    pub ttl: Ttl,
    /// When the acquiring step started: validity and hold time count from here.
    pub start: Instant,
    pub expires: Instant,
    pub acquisition: Report,
}

pub(crate) struct LeaseInner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) resource: Vec<u8>,
    pub(crate) key: Vec<u8>,
    pub(crate) token: String,
    /// What kind of lease it is (see `lease::kind`).
    pub(crate) kind: Box<dyn Kind>,
    fencing_token: Option<u64>,
    /// When the validity ends, as an epoch offset (see `timing::Epoch`); 0 once released or
    /// lost. Read without locking.
    expires: AtomicU64,
    /// Serialises unlock, extend and renewal of one lease.
    pub(crate) state: Mutex<LeaseState>,
    /// Notified when the lease is marked lost or its renewal ends.
    lost_cv: Condvar,
    /// When the acquiring step started (hold time counts from here).
    pub(crate) acquired_at: Instant,
    acquisition: Report,
    /// Mirrors of `state.renewal.is_some()` and `state.lost.is_some()`, readable without
    /// waiting for the state lock (which unlock and extend hold during their round trip).
    renewing: AtomicBool,
    lost_flag: AtomicBool,
}

impl LeaseInner {
    pub(crate) fn expires_at(&self) -> Option<Instant> {
        self.shared
            .epoch
            .instant(self.expires.load(Ordering::Acquire))
    }

    pub(crate) fn set_expires(&self, t: Option<Instant>) {
        let v = t.map_or(0, |t| self.shared.epoch.offset(t));
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
    ) -> Option<LostCallback> {
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

    /// The refusal for an operation on a lease that is no longer held, decided locally, or
    /// `None` if the lease is still held at `now`.
    pub(crate) fn not_held_locally(&self, st: &LeaseState, op: Op, now: Instant) -> Option<Error> {
        let detail = if st.released {
            "already unlocked; nothing sent"
        } else if st.lost.is_some() {
            "the lease was lost; nothing sent"
        } else if self.expires_at().is_none_or(|t| t <= now) {
            "the lock's validity had ended; nothing sent"
        } else {
            return None;
        };
        Some(Error::NotHeld(self.shared.no_io(op, detail)))
    }

    /// The request of an owner-checked script call on this lease (a release, an extension):
    /// its `EVALSHA` form, the `EVAL` form for a node that answers `NOSCRIPT`, and the work;
    /// on cluster nodes, `parts` (one call per slot) instead, when there are any.
    fn request<'a>(&self, calls: &'a Calls, parts: &'a [Part]) -> Request<'a> {
        Request {
            cmd: Cmd::Same(&calls.0),
            fallback: Some(&calls.1),
            combine: None,
            slot: crate::slot::common_slot(self.keys()),
            slots: None,
            split: (!parts.is_empty()).then_some(Split {
                parts,
                combine: every,
            }),
            grants: false,
            work: self.work(),
        }
    }

    /// The work a release or an extension of this lease asks of each node, in keys or slots
    /// (see `timing::WORK_ALLOWANCE`).
    pub(crate) fn work(&self) -> usize {
        self.kind.work()
    }

    /// Every lock key of this lease: one, or each resource's for a lease over several.
    pub(crate) fn keys(&self) -> Vec<&[u8]> {
        self.kind.keys(self)
    }
}

/// A held lock.
///
/// Dropping a `Lease` does **not** unlock it (the key then expires after its TTL); call
/// [`unlock`](Self::unlock), or use [`into_guard`](Self::into_guard) for unlock-on-drop. A lease
/// keeps the manager's connections alive, so it may outlive the manager that made it.
pub struct Lease {
    pub(crate) inner: Arc<LeaseInner>,
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
    /// A lease for what a primitive acquired.
    pub(crate) fn new(shared: &Arc<Shared>, g: Granted) -> Lease {
        let inner = LeaseInner {
            shared: Arc::clone(shared),
            resource: g.resource,
            key: g.key,
            token: g.token,
            kind: g.kind,
            fencing_token: g.fencing_token,
            expires: AtomicU64::new(shared.epoch.offset(g.expires)),
            state: Mutex::new(LeaseState {
                released: false,
                ttl: g.ttl,
                lost: None,
                renewal: None,
            }),
            lost_cv: Condvar::new(),
            acquired_at: g.start,
            acquisition: g.acquisition,
            renewing: AtomicBool::new(false),
            lost_flag: AtomicBool::new(false),
        };
        Lease {
            inner: Arc::new(inner),
        }
    }

    /// The resource name, as given (the first one, for a lease from
    /// [`Redlock::acquire_many`](crate::Redlock::acquire_many)).
    pub fn resource(&self) -> &[u8] {
        &self.inner.resource
    }

    /// Every resource this lease holds, in the caller's order: one, or all of those given to
    /// [`Redlock::acquire_many`](crate::Redlock::acquire_many).
    pub fn resources(&self) -> Vec<&[u8]> {
        self.inner.kind.resources(&self.inner)
    }

    /// The Redis key that holds the lock on every node: the key prefix (`redlock:` by
    /// default) followed by the resource (the first one's, for a lease over several).
    pub fn key(&self) -> &[u8] {
        &self.inner.key
    }

    /// True for a shared lease ([`LockOptions::shared`](crate::LockOptions::shared)): others
    /// may hold shared leases on the resource at the same time, nobody an exclusive one.
    pub fn is_shared(&self) -> bool {
        self.inner.kind.is_shared()
    }

    /// For a permit of a semaphore ([`Redlock::semaphore`](crate::Redlock::semaphore)): which
    /// of its P slots (0 to P − 1) this permit holds, and the semaphore's permit count P, in
    /// that order. No two valid permits hold the same slot. `None` for a lock.
    pub fn permit(&self) -> Option<(u32, u32)> {
        self.inner.kind.permit()
    }

    /// The random token (40 hex characters) that makes this lease unique. A plain lock stores
    /// it at the start of its [`value`](Self::value); for a reentrant lock
    /// ([`LockOptions::owner`](crate::LockOptions::owner)) it names this lease's hold (the
    /// key's field `hold:<token>`), and the owner is the proof.
    pub fn token(&self) -> &str {
        &self.inner.token[..crate::token::TOKEN_BYTES * 2]
    }

    /// What this lease stores on the nodes, the proof of ownership every release and
    /// extension compares: for a plain lock, the [`token`](Self::token), then `.` and the
    /// wall-clock milliseconds at which the attempt started, then a space and the manager's
    /// [`label`](crate::Config::label) if it has one (`<token>.<unix ms>[ <label>]`, read back
    /// by [`Redlock::holders`](crate::Redlock::holders)); for a reentrant lock, the token.
    pub fn value(&self) -> &str {
        &self.inner.token
    }

    /// The fencing token of a fenced lease: strictly greater than that of every earlier fenced
    /// grant of the resource. `None` for a plain lock. Exact over the whole `u64` range (the
    /// scripts never hold a counter in a Lua number); a counter at `u64::MAX` refuses the next
    /// fenced grant with [`Error::Internal`](crate::Error::Internal) ("… exhausted") rather than
    /// repeat a token.
    pub fn fencing_token(&self) -> Option<u64> {
        self.inner.fencing_token
    }

    /// For a fair lock ([`LockOptions::fair`](crate::LockOptions::fair)): the ticket it
    /// queued with, which orders it among the resource's waiters (lower first; tickets of
    /// waiters that queued at the same time may be equal, and are then ordered by their
    /// values). `None` for a fair lock granted at once, with nobody queued, and for every
    /// other lease.
    pub fn ticket(&self) -> Option<u64> {
        self.inner.kind.fair_ticket().flatten()
    }

    /// Whether this is a fair lock's lease ([`LockOptions::fair`](crate::LockOptions::fair)).
    pub fn is_fair(&self) -> bool {
        self.inner.kind.fair_ticket().is_some()
    }

    /// The TTL of the last successful acquisition or extension.
    pub fn ttl(&self) -> Duration {
        self.inner.lock_state().ttl.duration()
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
    ///
    /// A lease that reached its own renewal bound ([`RenewOptions::max_hold`],
    /// [`RenewOptions::max_extensions`]) is lost like one whose renewal failed, and its unlock
    /// is `NotHeld` too, whatever is still on the nodes: the work done after the loss was not
    /// protected by the lock, and the caller should know. The report's detail names the
    /// bound ("the lease had been lost before unlock (maximum hold time reached after …)");
    /// [`lost_reason`](Self::lost_reason) gives it as a value. The keys that are left are
    /// deleted all the same, so nobody waits for them to expire.
    pub fn unlock(&self) -> Result<(), Error> {
        let r = self.unlock_inner();
        let sh = &self.inner.shared;
        let m = &sh.cluster.metrics;
        m.unlocks.record(&r);
        if r.is_ok() {
            m.hold
                .observe(sh.now().saturating_duration_since(self.inner.acquired_at));
        }
        r
    }

    fn unlock_inner(&self) -> Result<(), Error> {
        let inner = &self.inner;
        let sh = &inner.shared;
        // The renewal thread holds the state lock while this lease's renewal is in flight, so
        // taking it waits for that renewal to finish.
        let mut st = inner.lock_state();
        if st.released {
            return Err(Error::NotHeld(
                sh.no_io(Op::Release, "already unlocked; nothing sent"),
            ));
        }
        st.released = true;
        if st.renewal.take().is_some() {
            inner.lost_cv.notify_all(); // wait_lost returns: renewal is over
        }
        inner.sync_flags(&st);
        let start = sh.now();
        let was_valid = inner.expires_at().is_some_and(|t| t > start);
        // A bound of the lease's own (max_hold, max_extensions) loses it like a failure
        // does; the message says which, so that a caller can tell an expected end apart.
        let lost = st.lost.as_ref().map(|r| match r {
            LostReason::RenewalFailed(_) => "its renewal failed".to_string(),
            other => other.to_string(),
        });
        inner.set_expires(None);
        // Every command to a node goes over the node's one connection, in order, so the
        // release runs after the acquisition's SET and after any renewal on every node, even
        // one that had not answered them yet. A NOSCRIPT reply is answered with the EVAL form
        // by whoever reads it, even after this call has returned.
        let calls = inner.kind.release(inner);
        let parts = inner.kind.release_parts(inner);
        let req = inner.request(&calls, &parts);
        // A release has no validity to protect: it waits the release bound (see
        // timing::Budget), and replies that come later are still applied on the nodes.
        let wait = sh.budget.release_bound() + work_allowance(req.work);
        let limits = Limits::quorum(sh.budget.release_bound());
        let round = sh
            .cluster
            .round(&req, &|_, r| confirmed(Op::Release, r), limits);
        drop(st);
        let round = round?;
        let successes = round.successes();
        // A reentrant release frees the resource only where no other hold is left.
        let freed = inner.kind.frees(&round.replies);
        if successes >= sh.cluster.quorum() && freed {
            // The nodes announce the release too; this wakes a waiter of this manager without
            // waiting for their message.
            for key in inner.keys() {
                sh.listener.released(key, inner.token.as_bytes());
            }
        }
        if !was_valid {
            let why = match lost {
                Some(reason) => format!("the lease had been lost before unlock ({reason})"),
                None => "the lock's validity had ended before unlock".to_string(),
            };
            let report = sh.cluster.report(Op::Release, round.outcomes, Some(why));
            return Err(Error::NotHeld(report));
        }
        if successes >= sh.cluster.quorum() {
            return Ok(());
        }
        let detail = not_confirmed(&round.outcomes, wait);
        let report = sh.cluster.report(Op::Release, round.outcomes, detail);
        Err(sh.cluster.failure(report, Error::NotHeld))
    }

    /// Extends the lock to `ttl` from now: the owner-checked `PEXPIRE` script on every node.
    /// It succeeds only if a quorum confirms before the current validity ends; the validity is
    /// then recomputed as `ttl − elapsed − drift`. It never recreates a key that expired.
    ///
    /// Errors: [`Error::InvalidInput`] (TTL out of range; nothing sent), [`Error::NotHeld`]
    /// (already expired locally, lost, unlocked, or not confirmed by a quorum in time),
    /// [`Error::Unavailable`]. After a failed extension the validity is never longer than
    /// before it (it is shortened if the new TTL was shorter, since some nodes may have
    /// applied it), and it is zero when so many nodes answered that the key is not ours that
    /// no quorum can hold it.
    pub fn extend(&self, ttl: Duration) -> Result<(), Error> {
        let r = self.extend_inner(ttl);
        self.inner.shared.cluster.metrics.extensions.record(&r);
        r
    }

    fn extend_inner(&self, ttl: Duration) -> Result<(), Error> {
        let inner = &self.inner;
        let sh = &inner.shared;
        let ttl = Ttl::new(ttl, &sh.cfg)?;
        let mut st = inner.lock_state();
        let start = sh.now();
        if let Some(e) = inner.not_held_locally(&st, Op::Extend, start) {
            if !st.released && st.lost.is_none() {
                inner.set_expires(None);
            }
            return Err(e);
        }
        let old = inner.expires_at().expect("checked above");
        let calls = inner.kind.extend(inner, &ttl.px());
        let parts = inner.kind.extend_parts(inner, &ttl.px());
        let req = inner.request(&calls, &parts);
        // An extension counts only if a quorum confirms before the current validity ends:
        // that is its bound, not a round-trip estimate.
        let validity = old.saturating_duration_since(start);
        let limits = Limits {
            cap: Some(old),
            ..Limits::quorum(sh.budget.extend_bound(validity))
        };
        let round = sh
            .cluster
            .round(&req, &|_, r| confirmed(Op::Extend, r), limits)?;
        let now = sh.now();
        let new = sh.budget.expiry(round.start, ttl.duration());
        let successes = round.successes();
        let q = sh.cluster.quorum();
        if successes >= q && now < old && now < new {
            inner.set_expires(Some(new));
            st.ttl = ttl;
            if let Some(r) = st.renewal.as_mut() {
                r.renewed(round.start, ttl.duration());
            }
            return Ok(());
        }
        // Some nodes may have applied a shorter TTL: never keep a validity longer than either.
        // And where so many nodes answered that the key is not ours that no quorum can hold it
        // (gone, or another owner's), the lock is known lost: the lease says so at once.
        let refused = round
            .outcomes
            .iter()
            .filter(|o| **o == NodeOutcome::Rejected)
            .count();
        let keep = old.min(new);
        let lost = sh.cluster.lost_for_sure(refused);
        inner.set_expires((keep > now && !lost).then_some(keep));
        let detail = (successes >= q)
            .then(|| "the quorum confirmed only after the validity had ended".to_string());
        let report = sh.cluster.report(Op::Extend, round.outcomes, detail);
        if successes >= q {
            return Err(Error::NotHeld(report));
        }
        Err(sh.cluster.failure(report, Error::NotHeld))
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
        let sh = &self.inner.shared;
        let deadline = crate::timing::after(sh.now(), timeout);
        let mut st = self.inner.lock_state();
        while st.lost.is_none() {
            let now = sh.now();
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

/// The detail of a release a quorum did not confirm, when nodes did not answer within `wait`:
/// they were sent the release all the same, so they are not counted as refusals.
fn not_confirmed(outcomes: &[NodeOutcome], wait: Duration) -> Option<String> {
    let unanswered = outcomes
        .iter()
        .filter(|o| matches!(o, NodeOutcome::Timeout | NodeOutcome::Pending))
        .count();
    (unanswered > 0).then(|| {
        format!(
            "release not confirmed: sent to every node, but {unanswered} did not answer within \
             {} ms; each one runs it when it reads it, or the key expires by its TTL",
            wait.as_millis()
        )
    })
}

/// What a reply to an owner-checked script (release, extend, fence) means.
pub(crate) fn confirmed(op: Op, reply: &Reply) -> NodeOutcome {
    match reply {
        // 2: a reentrant release that left no hold on the node.
        Reply::Int(1) => NodeOutcome::Success,
        Reply::Int(2) if op == Op::Release => NodeOutcome::Success,
        Reply::Int(0) => NodeOutcome::Rejected,
        Reply::Error { text, .. } => NodeOutcome::ServerError(text.clone()),
        other => NodeOutcome::Protocol(format!("unexpected reply to {op:?}: {}", other.describe())),
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
