//! The acquisition driver: the options of an acquisition, and the loop that makes attempts
//! until one succeeds or the wait is over, the same for every primitive.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::{Error, NodeOutcome, Report};
use crate::lease::{Lease, RenewOptions, Shared};
use crate::mux::{self, Waker};
use crate::node::call::thread_waker;
use crate::notify::{Cancel, Registration, Woke};
use crate::token;

/// How an acquisition waits while the resource is held elsewhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Wait {
    /// One attempt, no retry.
    No,
    /// The manager's retry policy: up to [`Config::retry_count`](crate::Config::retry_count)
    /// retries, each after a random pause of up to the retry delay. The default.
    #[default]
    Retries,
    /// Waits until this long after the call, attempting again whenever the holder releases the
    /// resource or its TTL runs out (see [`LockOptions::notify`]); no attempt starts after
    /// that. The retry count does not apply.
    For(Duration),
    /// As `For`, until this instant.
    Until(Instant),
}

/// Options of one acquisition ([`Redlock::acquire`](crate::Redlock::acquire)).
///
/// ```
/// use std::time::Duration;
/// use redlock::{Cancel, LockOptions, RenewOptions, Wait};
/// let cancel = Cancel::new();
/// let opts = LockOptions::new()
///     .wait(Wait::For(Duration::from_secs(5)))
///     .fenced(true)
///     .cancel(cancel.clone())
///     .auto_renew(RenewOptions::new().max_hold(Duration::from_secs(600)));
/// # let _ = opts;
/// ```
#[derive(Clone, Debug, Default)]
pub struct LockOptions {
    pub(crate) wait: Wait,
    pub(crate) fenced: bool,
    pub(crate) auto_renew: Option<RenewOptions>,
    pub(crate) cancel: Option<Cancel>,
    /// Waits of `Wait::For`/`Until` poll with random pauses instead of waiting for a release.
    pub(crate) poll: bool,
    /// The owner of a reentrant acquisition.
    pub(crate) owner: Option<Vec<u8>>,
    /// A shared (read) acquisition.
    pub(crate) shared: bool,
    /// A fair (first-come, first-served) acquisition.
    pub(crate) fair: bool,
    /// A fair waiter's drop-out time, if set.
    pub(crate) drop_out: Option<Duration>,
    /// The longest sleep between two attempts (a fair waiter refreshes its queue entry).
    pub(crate) refresh: Option<Duration>,
}

impl LockOptions {
    /// The defaults: wait as the manager's retry policy says, no fencing token, no
    /// auto-renewal, no cancel handle, and waits for a release by notification.
    pub fn new() -> LockOptions {
        LockOptions::default()
    }

    /// How to wait while the resource is held elsewhere. Defaults to [`Wait::Retries`].
    pub fn wait(mut self, wait: Wait) -> LockOptions {
        self.wait = wait;
        self
    }

    /// Whether the lease carries a fencing token ([`Lease::fencing_token`]): a number strictly
    /// greater than that of every earlier fenced grant of the resource, while a majority of
    /// the nodes keeps its data. It costs a second round trip. Defaults to false.
    pub fn fenced(mut self, fenced: bool) -> LockOptions {
        self.fenced = fenced;
        self
    }

    /// Turns on auto-renewal for the lease as soon as it is granted (see
    /// [`Lease::auto_renew`]). Defaults to none.
    pub fn auto_renew(mut self, opts: RenewOptions) -> LockOptions {
        self.auto_renew = Some(opts);
        self
    }

    /// A handle that cancels the acquisition from another thread: [`Cancel::fire`] ends it
    /// with [`Error::Cancelled`] within one round trip (at once while it waits), leaving no
    /// key behind. Works with every [`Wait`].
    pub fn cancel(mut self, cancel: Cancel) -> LockOptions {
        self.cancel = Some(cancel);
        self
    }

    /// Makes the lock **reentrant** for `owner`, a caller-chosen id (a job id, a request id,
    /// `host:pid:thread`; 1 to 512 bytes, any bytes): an acquisition by the same owner while it
    /// holds the lock succeeds at once, and the resource stays held until every lease of that
    /// owner has been released or has expired. Each acquisition returns its own lease, with its
    /// own TTL, renewal and release; the key lives as long as the longest of them. Another
    /// owner, or a plain acquisition, is refused meanwhile.
    ///
    /// The owner *is* the identity: a lease from another thread or process that presents the
    /// same owner is the same owner. That is how a restarted worker reclaims its job's lock
    /// without waiting out the TTL; it is also why two workers must never share an owner id.
    /// The holds of a worker that died stay until their TTL, so the resource is free only then.
    ///
    /// Each node records one hold per lease (not a count), so a lost or repeated message never
    /// frees a node early; see [`scripts::REENTRANT_ACQUIRE`](crate::scripts::REENTRANT_ACQUIRE).
    /// With [`fenced`](Self::fenced), every lease of one tenure of the owner carries the same
    /// fencing token. Without an owner (the default) the lock is not reentrant: a second
    /// acquisition waits like anybody else's.
    pub fn owner(mut self, owner: impl AsRef<[u8]>) -> LockOptions {
        self.owner = Some(owner.as_ref().to_vec());
        self
    }

    /// Whether the lock is **shared** (a read lock, as `flock(LOCK_SH)`) rather than
    /// exclusive (the default, as `flock(LOCK_EX)`). Any number of shared holders may hold a
    /// resource together; an exclusive holder (a plain, fenced or reentrant lock of the same
    /// resource name) excludes them all, and they exclude it. Extension, auto-renewal, fencing
    /// tokens and waiting for a release work as for an exclusive lock. A shared lock has no
    /// [`owner`](Self::owner): asking for both is [`Error::InvalidInput`].
    ///
    /// **A waiting writer is not starved.** Once an exclusive acquisition that waits
    /// ([`Wait::Retries`], [`Wait::For`], [`Wait::Until`]) has been refused by shared holders,
    /// it queues an *intent* on those nodes, and new shared acquisitions wait behind it while
    /// the holders already in finish; the last one's release wakes the writer. The intent
    /// lives at most the remaining TTL of the shared holds it found plus the writer's own
    /// TTL; each refused attempt of the writer renews it, and it is removed as soon as the
    /// writer gets the lock or gives up (a deadline, a cancel), which wakes the shared waiters
    /// at once. A writer that dies leaves it to expire. [`Wait::No`] queues nothing.
    ///
    /// Why the two modes exclude each other on a quorum of independent nodes: see
    /// [`scripts::SHARED_ACQUIRE`](crate::scripts::SHARED_ACQUIRE).
    pub fn shared(mut self, shared: bool) -> LockOptions {
        self.shared = shared;
        self
    }

    /// Whether the lock is **fair**: granted in the order the waiters asked for it (first
    /// come, first served), across every process and node, rather than to whichever attempt
    /// lands first. Defaults to false.
    ///
    /// A fair acquisition that is refused takes a *ticket*, one more than the largest ticket
    /// counter a quorum of nodes reports (a counter of the queue's own, not the fencing one), and queues it on every node at once; a waiter that
    /// queues after another has finished queueing always gets a larger ticket. Each node grants
    /// the lock only to the lowest live ticket in its queue, when the key is free. A release
    /// wakes the next ticket's waiter alone, on a channel of its own (no other waiter wakes).
    /// The first attempt costs one round trip, as a plain lock's; a refused one costs a second,
    /// which queues the ticket. See [`Lease::ticket`](crate::Lease::ticket).
    ///
    /// **Waiters that die drop out.** A waiter refreshes its queue entry with an attempt at
    /// least every fifth of its [`drop_out`](Self::drop_out) time, and a node drops an entry
    /// not refreshed for four fifths of it: a waiter that dies or is paused holds up the ones
    /// behind it for at most the drop-out time. A waiter that gives up (deadline, cancel)
    /// leaves the queue at once. Nodes that disagree about the head (one missed a ticket,
    /// one restarted empty) cost a retry, never a deadlock: a node learns a missing ticket
    /// from that waiter's next attempt.
    ///
    /// **With other locks of the same resource.** Fair and plain (or fenced) acquisitions of a
    /// resource work together: they use the same key, so they exclude each other as any two
    /// locks do. A plain acquisition does not queue: it may take the lock ahead of the fair
    /// waiters whenever the key is free, and a plain holder's release wakes fair waiters only
    /// at their next refresh. Fair cannot be combined with [`owner`](Self::owner) (reentrant)
    /// or [`shared`](Self::shared), nor used with `acquire_many` or a semaphore:
    /// [`Error::InvalidInput`](crate::Error::InvalidInput).
    ///
    /// With [`Wait::No`] a fair acquisition is one attempt that takes the lock only when it is
    /// free and nobody is queued; it queues nothing.
    pub fn fair(mut self, fair: bool) -> LockOptions {
        self.fair = fair;
        self
    }

    /// A fair waiter's **drop-out time** ([`fair`](Self::fair)): the longest a waiter that
    /// stops refreshing its queue entry (it died, or is paused) holds up the waiters behind
    /// it. Defaults to the lock's TTL or [`DEFAULT_DROP_OUT`](crate::DEFAULT_DROP_OUT) (5 s),
    /// whichever is shorter, but at least [`MIN_DROP_OUT`](crate::MIN_DROP_OUT); it takes
    /// [`MIN_DROP_OUT`](crate::MIN_DROP_OUT) to
    /// [`MAX_DROP_OUT`](crate::MAX_DROP_OUT). A shorter time costs more refreshes: each waiter
    /// makes an attempt at least every fifth of it.
    pub fn drop_out(mut self, d: Duration) -> LockOptions {
        self.drop_out = Some(d);
        self
    }

    /// Removes the drop-out time, if any: a fair waiter uses the default.
    pub fn no_drop_out(mut self) -> LockOptions {
        self.drop_out = None;
        self
    }

    /// Removes the owner, if any: the lock is not reentrant.
    pub fn no_owner(mut self) -> LockOptions {
        self.owner = None;
        self
    }

    /// Removes the cancel handle, if any.
    pub fn no_cancel(mut self) -> LockOptions {
        self.cancel = None;
        self
    }

    /// Whether a wait of [`Wait::For`] or [`Wait::Until`] sleeps until the holder releases
    /// the resource (true, the default) or retries after random pauses of up to the retry
    /// delay (false, the older behaviour; [`Wait::Retries`] always does this).
    ///
    /// Waiting by notification: after a refused attempt the caller subscribes to the
    /// resource's release channel on every node (one subscriber connection per node, shared
    /// by the whole manager), attempts once more, then sleeps until a node announces a
    /// release, until the holder's remaining TTL (learned from the refusal) has run out, or
    /// until the wait is over. Of several waiters in one manager, a release wakes the first
    /// only; the next is woken when the first leaves. Without a quorum of confirmed
    /// subscriptions (nodes down), or after a split vote, it falls back to short random
    /// pauses.
    pub fn notify(mut self, notify: bool) -> LockOptions {
        self.poll = !notify;
        self
    }
}

/// Runs `attempt` until it grants a lease or `opts.wait` is over, then applies the options
/// that act on a granted lease. Refusals (`NotAcquired`, `Unavailable`, `Auth`) are retried;
/// every other error ends the call at once. `channel` is where the nodes announce a release of
/// what `attempt` asks for. The caller has validated its input and `opts`.
pub(crate) fn acquire(
    sh: &Arc<Shared>,
    opts: &LockOptions,
    channel: &[u8],
    attempt: impl FnMut() -> Result<Lease, Error>,
) -> Result<Lease, Error> {
    let called = sh.now();
    let r = Waiting::new(sh, opts, channel, called).run(attempt);
    let m = &sh.cluster.metrics;
    m.acquisition(&r, sh.now().saturating_duration_since(called));
    let lease = r?;
    if let Some(renew) = &opts.auto_renew
        && let Err(e) = lease.auto_renew(renew.clone())
    {
        let _ = lease.unlock();
        return Err(e);
    }
    Ok(lease)
}

/// The most attempts made at once, without a pause, after nodes became trusted.
const MAX_AT_ONCE: u32 = 2;

/// The nodes that refused in `r`, and how many of them must let go before a quorum can grant
/// (the quorum less the voting nodes that did not refuse). None when the refusals alone do not
/// explain the failure.
fn blocking(r: &Report) -> Option<(Vec<bool>, usize)> {
    let refused: Vec<bool> = r
        .nodes
        .iter()
        .map(|n| n.outcome == NodeOutcome::Rejected)
        .collect();
    let voters = r
        .nodes
        .iter()
        .filter(|n| {
            !matches!(
                n.outcome,
                NodeOutcome::Quarantined { .. } | NodeOutcome::Duplicate { .. }
            )
        })
        .count();
    let n_refused = refused.iter().filter(|b| **b).count();
    let need = r.quorum.checked_sub(voters.saturating_sub(n_refused))?;
    (need > 0).then_some((refused, need))
}

/// One acquisition's wait.
struct Waiting<'a> {
    sh: &'a Arc<Shared>,
    opts: &'a LockOptions,
    channel: &'a [u8],
    deadline: Option<Instant>,
    /// This thread's place among the manager's waiters for `channel`, once it has one.
    reg: Option<Registration>,
    /// Registering failed: poll with random pauses.
    no_listener: bool,
    /// Split votes in a row.
    collisions: u32,
    waker: Option<Arc<Waker>>,
}

impl<'a> Waiting<'a> {
    fn new(
        sh: &'a Arc<Shared>,
        opts: &'a LockOptions,
        channel: &'a [u8],
        called: Instant,
    ) -> Waiting<'a> {
        let deadline = match opts.wait {
            Wait::For(d) => Some(crate::timing::after(called, d)),
            Wait::Until(t) => Some(t),
            Wait::No | Wait::Retries => None,
        };
        Waiting {
            sh,
            opts,
            channel,
            deadline,
            reg: None,
            no_listener: false,
            collisions: 0,
            waker: None,
        }
    }

    fn cancelled(&self) -> bool {
        self.opts.cancel.as_ref().is_some_and(Cancel::is_fired)
    }

    fn by_notification(&self) -> bool {
        !self.opts.poll && matches!(self.opts.wait, Wait::For(_) | Wait::Until(_))
    }

    fn run(mut self, mut attempt: impl FnMut() -> Result<Lease, Error>) -> Result<Lease, Error> {
        let sh = self.sh;
        let m = &sh.cluster.metrics;
        let mut retries = 0;
        let mut at_once = 0;
        loop {
            if self.cancelled() {
                return Err(Error::Cancelled);
            }
            // Notifications count from here on only if a quorum confirmed the subscription
            // before this attempt: then a release after the attempt's refusal is announced.
            let relied = self.reg.as_ref().is_some_and(|r| {
                r.take_notified();
                r.subscribed()
            });
            m.attempts.fetch_add(1, Ordering::Relaxed);
            let epoch = sh.cluster.trust_epoch();
            let started = sh.now();
            let e = match attempt() {
                Ok(lease) if self.cancelled() => {
                    // Fired while the attempt was under way: leave no key behind.
                    let _ = lease.unlock();
                    return Err(Error::Cancelled);
                }
                Ok(lease) => {
                    if let Some(reg) = &self.reg {
                        // For the waiter after this one: how long the lock is held at most,
                        // unless released.
                        reg.set_hint(sh.now() + lease.validity());
                    }
                    return Ok(lease);
                }
                // Auth too: a node that refused our credentials may be one of several missing.
                Err(e @ (Error::NotAcquired(_) | Error::Unavailable(_) | Error::Auth(_))) => e,
                other => return other,
            };
            // Nodes became trusted during this attempt (a brand-new cluster is trusted once
            // every node has answered, which a first attempt waits for): try again at once,
            // without counting it as a retry. Bounded, so that nodes flapping in and out
            // cannot loop.
            // Or nodes were quarantined during it only for lacking a marker that another
            // manager, meeting a brand-new cluster at the same moment, is writing: re-read
            // those markers once before giving up (see Cluster::reread_fresh_markers).
            if at_once < MAX_AT_ONCE
                && (sh.cluster.trust_epoch() != epoch
                    || sh.cluster.reread_fresh_markers(
                        sh.budget.release_bound(),
                        self.deadline,
                        &|| self.cancelled(),
                    ))
            {
                at_once += 1;
                continue;
            }
            let go_on = match self.opts.wait {
                Wait::No => false,
                Wait::Retries => retries < sh.cfg.retry_count,
                Wait::For(_) | Wait::Until(_) => self.deadline.is_some_and(|d| sh.now() < d),
            };
            if !go_on {
                return Err(e);
            }
            log::debug!("attempt {} failed: {e}", retries + 1);
            if self.by_notification() {
                self.wait_for_release(&e, relied, started)?;
            } else {
                self.pause(sh.cfg.retry_delay)?;
            }
            if self.deadline.is_some_and(|d| sh.now() >= d) {
                return Err(e);
            }
            retries += 1;
            m.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// This thread's waker, for cancellable sleeps.
    fn waker(&mut self) -> Result<Arc<Waker>, Error> {
        if self.waker.is_none() {
            let w = thread_waker()
                .map_err(|e| Error::Internal(format!("cannot create a wake-up: {e}")))?;
            self.waker = Some(w);
        }
        Ok(Arc::clone(self.waker.as_ref().expect("just set")))
    }

    /// Sleeps a random pause of up to `max` ("full jitter", so that contending clients spread
    /// out), never past the deadline; a cancel handle that fires ends it at once.
    fn pause(&mut self, max: Duration) -> Result<(), Error> {
        let sh = self.sh;
        let max = self.refreshed(max).as_micros().min(u64::MAX as u128) as u64;
        let d = Duration::from_micros(token::uniform_inclusive(max)?);
        let mut until = sh.now() + d;
        if let Some(deadline) = self.deadline {
            until = until.min(deadline);
        }
        let Some(cancel) = self.opts.cancel.clone() else {
            crate::park::pause(until.saturating_duration_since(sh.now()));
            return Ok(());
        };
        let waker = self.waker()?;
        let _watch = cancel.watch(Arc::clone(&waker));
        loop {
            if cancel.is_fired() {
                return Err(Error::Cancelled);
            }
            let now = sh.now();
            if now >= until {
                return Ok(());
            }
            mux::sleep(&waker, Some(until - now))
                .map_err(|e| Error::Internal(format!("poll failed: {e}")))?;
        }
    }

    /// After a refusal `e` of an attempt that started at `started`, waits for a reason to
    /// attempt again: a release, the holder's TTL running out, or this waiter's turn. `relied`:
    /// a quorum had confirmed the subscription before that attempt.
    fn wait_for_release(&mut self, e: &Error, relied: bool, started: Instant) -> Result<(), Error> {
        let sh = self.sh;
        let attempt_took = sh.now().saturating_duration_since(started);
        // A short pause: after a split vote (nobody may hold the lock, so nobody will
        // release it), or while notifications cannot be relied on.
        let short = sh
            .cfg
            .retry_delay
            .min(attempt_took * 2 + Duration::from_millis(1));
        if self.no_listener {
            return self.pause(sh.cfg.retry_delay);
        }
        if self.reg.is_none() {
            let waker = self.waker()?;
            match sh.listener.register(self.channel, waker) {
                Ok(r) => self.reg = Some(r),
                Err(err) => {
                    log::warn!("redlock: cannot start the listener ({err}); polling instead");
                    self.no_listener = true;
                    return self.pause(sh.cfg.retry_delay);
                }
            }
            // Wait (a little) for the subscription, then attempt once more: from then on a
            // release is announced to this waiter.
            let until = self.bounded(sh.now() + sh.cfg.retry_delay);
            return self.sleep_until(until, |r| r.subscribed());
        }
        // Until this refusal says otherwise, any node's message wakes this waiter.
        self.registration().clear_blocked();
        let report = e.report();
        if !matches!(e, Error::NotAcquired(_)) {
            // Nodes are failing: the retry policy's random pauses.
            return self.pause(sh.cfg.retry_delay);
        }
        if report.is_some_and(|r| r.nodes.iter().any(|n| n.outcome.is_success())) {
            // A split vote: nobody may hold the lock, so nobody may release it. Contenders
            // that collide again back off exponentially, as on a shared Ethernet segment, so
            // that many processes woken by one release sort themselves out in a few rounds.
            let backoff = short.saturating_mul(1 << self.collisions.min(8));
            self.collisions += 1;
            return self.pause(backoff.min(sh.cfg.retry_delay));
        }
        self.collisions = 0;
        if !relied {
            // No quorum of subscriptions before that attempt (a subscriber connection was
            // lost): a random pause, or less if the subscriptions come back first.
            let max = self.refreshed(sh.cfg.retry_delay);
            let max = max.as_micros().min(u64::MAX as u128) as u64;
            let d = Duration::from_micros(token::uniform_inclusive(max)?);
            let until = self.bounded(sh.now() + d);
            return self.sleep_until(until, |r| r.subscribed());
        }
        // Only the nodes that refused can free the lock, and only once enough of them have:
        // with many processes waiting, every other message would cost each of them an attempt.
        if let Some((refused, need)) = report.and_then(blocking) {
            self.registration().set_blocked(refused, need, started);
        }
        // The first waiter attempts when the holder's TTL has run out, if no release came;
        // the others wait for their turn.
        let expires = report
            .and_then(|r| r.expires_in)
            .map_or(sh.cfg.retry_delay, |d| d + Duration::from_millis(1));
        let fallback = self.bounded(sh.now() + self.refreshed(expires));
        self.sleep_in_turn(fallback)
    }

    /// Sleeps until a release wakes this waiter, or, once it is the first waiter, until
    /// `fallback` (when the holder's TTL has run out); a promotion to first recomputes it from
    /// what the waiter before saw.
    fn sleep_in_turn(&mut self, mut fallback: Instant) -> Result<(), Error> {
        let sh = self.sh;
        let mut was_first = self.registration().is_first();
        if was_first {
            self.registration().set_hint(fallback);
        }
        loop {
            let reg = self.registration();
            if !was_first && reg.is_first() {
                // Promoted: the waiter before left. A release it did not use was handed on
                // (and ends the sleep at once); otherwise the lock is held by whoever the one
                // before saw (perhaps itself), until the time it recorded at the latest.
                was_first = true;
                let now = sh.now();
                let hinted = reg.hint().filter(|t| *t > now);
                let t = hinted.unwrap_or(now + sh.cfg.retry_delay);
                fallback = self.bounded(t.min(now + self.refreshed(t - now)));
            }
            let until = if was_first {
                Some(fallback)
            } else {
                match self.opts.refresh {
                    Some(r) => Some(self.bounded(sh.now() + r)),
                    None => self.deadline,
                }
            };
            match self.sleep_once(until)? {
                Woke::Notified | Woke::Timeout => return Ok(()),
                Woke::Cancelled => return Err(Error::Cancelled),
                Woke::Changed => {
                    if !self.registration().subscribed() {
                        // A subscriber connection was lost: releases may have gone unheard.
                        return Ok(());
                    }
                }
            }
        }
    }

    /// `d`, or the refresh period of a fair waiter if that is shorter.
    fn refreshed(&self, d: Duration) -> Duration {
        self.opts.refresh.map_or(d, |r| r.min(d))
    }

    fn registration(&self) -> &Registration {
        self.reg.as_ref().expect("registered before use")
    }

    /// `t`, or the deadline if that comes first.
    fn bounded(&self, t: Instant) -> Instant {
        self.deadline.map_or(t, |d| d.min(t))
    }

    /// One sleep of the registered waiter.
    fn sleep_once(&self, until: Option<Instant>) -> Result<Woke, Error> {
        let reg = self.registration();
        reg.sleep(until, self.opts.cancel.as_ref())
            .map_err(|e| Error::Internal(format!("poll failed: {e}")))
    }

    /// Sleeps until `done` holds for the registration, a notification, or `until`.
    fn sleep_until(
        &self,
        until: Instant,
        done: impl Fn(&Registration) -> bool,
    ) -> Result<(), Error> {
        loop {
            if done(self.registration()) {
                return Ok(());
            }
            match self.sleep_once(Some(until))? {
                Woke::Cancelled => return Err(Error::Cancelled),
                Woke::Notified | Woke::Timeout => return Ok(()),
                Woke::Changed => {}
            }
        }
    }
}
