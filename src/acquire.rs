//! The acquisition driver: the options of an acquisition, and the loop that makes attempts
//! until one succeeds or the wait is over, the same for every primitive.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::lease::{Lease, RenewOptions, Shared};
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
    /// Retries after random pauses (up to the retry delay) until this long after the call; no
    /// attempt starts after that. The retry count does not apply.
    For(Duration),
    /// As `For`, until this instant.
    Until(Instant),
}

/// Options of one acquisition ([`Redlock::acquire`](crate::Redlock::acquire)).
///
/// ```
/// use std::time::Duration;
/// use redlock::{LockOptions, RenewOptions, Wait};
/// let opts = LockOptions::new()
///     .wait(Wait::For(Duration::from_secs(5)))
///     .fenced(true)
///     .auto_renew(RenewOptions::new().max_hold(Duration::from_secs(600)));
/// # let _ = opts;
/// ```
#[derive(Clone, Debug, Default)]
pub struct LockOptions {
    pub(crate) wait: Wait,
    pub(crate) fenced: bool,
    pub(crate) auto_renew: Option<RenewOptions>,
}

impl LockOptions {
    /// The defaults: wait as the manager's retry policy says, no fencing token, no
    /// auto-renewal.
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
}

/// Runs `attempt` until it grants a lease or `opts.wait` is over, then applies the options
/// that act on a granted lease. Refusals (`NotAcquired`, `Unavailable`, `Auth`) are retried; every
/// other error ends the call at once. The caller has validated its input and `opts`.
pub(crate) fn acquire(
    sh: &Arc<Shared>,
    opts: &LockOptions,
    mut attempt: impl FnMut() -> Result<Lease, Error>,
) -> Result<Lease, Error> {
    let called = sh.now();
    let deadline = match opts.wait {
        Wait::For(d) => Some(called + d),
        Wait::Until(t) => Some(t),
        Wait::No | Wait::Retries => None,
    };
    let m = &sh.cluster.metrics;
    let mut retries = 0;
    let mut at_once = 0;
    let r = loop {
        m.attempts.fetch_add(1, Ordering::Relaxed);
        let epoch = sh.cluster.trust_epoch();
        let e = match attempt() {
            // Auth too: a node that refused our credentials may be one of several missing.
            Err(e @ (Error::NotAcquired(_) | Error::Unavailable(_) | Error::Auth(_))) => e,
            other => break other,
        };
        // Nodes became trusted during this attempt (a brand-new cluster is trusted once every
        // node has answered, which a first attempt waits for): try again at once, without
        // counting it as a retry. Bounded, so that nodes flapping in and out cannot loop.
        if sh.cluster.trust_epoch() != epoch && at_once < MAX_AT_ONCE {
            at_once += 1;
            continue;
        }
        let go_on = match opts.wait {
            Wait::No => false,
            Wait::Retries => retries < sh.cfg.retry_count,
            Wait::For(_) | Wait::Until(_) => deadline.is_some_and(|d| sh.now() < d),
        };
        if !go_on {
            break Err(e);
        }
        log::debug!("attempt {} failed: {e}", retries + 1);
        retries += 1;
        if let Err(e) = pause(sh, deadline) {
            break Err(e);
        }
        if deadline.is_some_and(|d| sh.now() >= d) {
            break Err(e);
        }
        m.retries.fetch_add(1, Ordering::Relaxed);
    };
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

/// Sleeps a random pause of up to the retry delay ("full jitter", so that contending clients
/// spread out), never past `deadline`.
fn pause(sh: &Shared, deadline: Option<Instant>) -> Result<(), Error> {
    let max = sh.cfg.retry_delay.as_micros().min(u64::MAX as u128) as u64;
    let mut d = Duration::from_micros(token::uniform_inclusive(max)?);
    if let Some(deadline) = deadline {
        d = d.min(deadline.saturating_duration_since(sh.now()));
    }
    std::thread::sleep(d);
    Ok(())
}
