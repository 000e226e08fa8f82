//! A lease's renewal: the options a caller gives ([`RenewOptions`]), why a lease was lost
//! ([`LostReason`]), the renewal state one lease keeps, and the registry the manager's
//! renewal thread reads (renew.rs drives it).

use std::fmt;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::{Lease, LeaseInner};
use crate::error::{Error, Report};

/// The renewal thread's registry: the leases to renew, and its wake-up.
#[derive(Default)]
pub(crate) struct Renewals {
    pub(crate) reg: Mutex<Registered>,
    pub(crate) wake: Condvar,
}

/// See [`Renewals`].
#[derive(Default)]
pub(crate) struct Registered {
    pub(crate) leases: Vec<Weak<LeaseInner>>,
    /// Something changed since the thread last looked.
    pub(crate) dirty: bool,
    pub(crate) started: bool,
    pub(crate) shutdown: bool,
}

impl Renewals {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Registered> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn shut_down(&self) {
        self.lock().shutdown = true;
        self.wake.notify_all();
    }
}

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

/// A lease's auto-renewal bookkeeping (kept in its state, under its lock).
pub(crate) struct Renewal {
    pub(crate) max_hold: Duration,
    pub(crate) max_extensions: Option<u32>,
    renew_after: f64,
    pub(crate) on_lost: Option<LostCallback>,
    pub(crate) extensions: u32,
    pub(crate) next_due: Instant,
    pub(crate) last_failure: Option<Report>,
}

impl Renewal {
    /// Renewal for a lease last confirmed at `last` with `ttl`.
    pub(crate) fn new(opts: RenewOptions, last: Instant, ttl: Duration) -> Renewal {
        Renewal {
            max_hold: opts.max_hold,
            max_extensions: opts.max_extensions,
            renew_after: opts.renew_after,
            on_lost: opts.on_lost,
            extensions: 0,
            next_due: last + ttl.mul_f64(opts.renew_after),
            last_failure: None,
        }
    }

    /// The lease was extended from `start` with `ttl`: renew relative to that.
    pub(crate) fn renewed(&mut self, start: Instant, ttl: Duration) {
        self.next_due = start + ttl.mul_f64(self.renew_after);
        self.last_failure = None;
    }

    /// The fraction of the TTL after which a renewal falls due.
    pub(crate) fn renew_after(&self) -> f64 {
        self.renew_after
    }
}
