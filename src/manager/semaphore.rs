//! The counting semaphore's public handle ([`Semaphore`]) and the `Redlock` methods that make
//! one: the input is checked here, the attempt is `lock::semaphore`'s.

use std::fmt;
use std::time::Duration;

use crate::acquire::{self, LockOptions, Wait};
use crate::config;
use crate::error::Error;
use crate::lease::Lease;
use crate::lock;
use crate::ttl::Ttl;

use super::Redlock;

impl Redlock {
    /// The counting semaphore `name` with `permits` permits: at most that many valid leases
    /// of it at any instant, under the same assumptions as the lock. Nothing is sent until
    /// [`Semaphore::acquire`]. Every caller of one name must name the same count; see
    /// [`Semaphore`].
    ///
    /// Errors: [`Error::InvalidInput`] for an invalid name (as a resource's) or a count outside
    /// 1 to [`MAX_PERMITS`](crate::MAX_PERMITS).
    pub fn semaphore(&self, name: impl AsRef<[u8]>, permits: u32) -> Result<Semaphore, Error> {
        let name = name.as_ref();
        let key = config::check_permits(permits)
            .and_then(|_| self.shared.cfg.semaphore_key(name))
            .map_err(|e| self.refused_input(e))?;
        Ok(Semaphore {
            mgr: self.clone(),
            name: name.to_vec(),
            key,
            permits,
        })
    }

    /// Takes one permit of the semaphore `name` of `permits` permits for `ttl`:
    /// [`semaphore`](Self::semaphore) and then [`Semaphore::acquire`].
    pub fn semaphore_acquire(
        &self,
        name: impl AsRef<[u8]>,
        permits: u32,
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<Lease, Error> {
        self.semaphore(name, permits)?.acquire(ttl, opts)
    }
}

/// A counting semaphore over the quorum ([`Redlock::semaphore`]): at most
/// [`permits`](Self::permits) valid leases at any instant, each one a *permit*. A holder that
/// dies gives its permit back when its TTL runs out.
///
/// A permit is one of P slots held by a quorum of nodes exactly as a lock is, so the mutual
/// exclusion of each slot bounds the count; counting how many nodes admitted a caller would not
/// (see [`scripts::SEMAPHORE_ACQUIRE`](crate::scripts::SEMAPHORE_ACQUIRE) for the proof). An acquisition is one round trip when
/// the nodes agree on which slots are free, and two when they picked different ones.
///
/// A permit's [`Lease`] unlocks, extends, auto-renews and reports its validity as a lock's
/// does; with [`LockOptions::fenced`] it carries a fencing token, strictly greater than every
/// earlier holder's of the same slot ([`Lease::permit`] names the slot). A release wakes one
/// waiter of the semaphore in each process that waits (by notification, as for a lock).
///
/// The permit count is recorded on each node with the holds. A caller that names another
/// count while permits of the recorded one are held is refused with [`Error::InvalidInput`],
/// naming the recorded count; once none is held, a new count applies. A semaphore's keys
/// (`redlock-sem:` and the lock key of its name) never meet a lock's: a semaphore and a lock
/// of the same name are independent.
///
/// ```no_run
/// # fn main() -> Result<(), redlock::Error> {
/// use std::time::Duration;
/// use redlock::{Config, LockOptions, Redlock, Wait};
/// let mgr = Redlock::new(Config::new(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]))?;
/// let exports = mgr.semaphore("exports", 4)?;
/// let wait = LockOptions::new().wait(Wait::For(Duration::from_secs(30)));
/// let permit = exports.acquire(Duration::from_secs(60), &wait)?;
/// // ... at most 4 of these run at once ...
/// permit.unlock()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    mgr: Redlock,
    name: Vec<u8>,
    key: Vec<u8>,
    permits: u32,
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &String::from_utf8_lossy(&self.name))
            .field("permits", &self.permits)
            .finish()
    }
}

impl Semaphore {
    /// The semaphore's name, as given.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// How many permits it has.
    pub fn permits(&self) -> u32 {
        self.permits
    }

    /// The semaphore's key on every node (`redlock-sem:` and the lock key of its name), which
    /// is also the channel its releases are announced on.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Takes one permit for `ttl`, waiting as `opts` say (one attempt, the retry policy, or
    /// until a deadline, woken by releases), with a fencing token, auto-renewal and
    /// cancellation as for a lock.
    ///
    /// Errors: [`Error::InvalidInput`] (TTL out of range, bad renewal options,
    /// [`owner`](LockOptions::owner) or [`shared`](LockOptions::shared) given: nothing is
    /// sent; or another permit count recorded on the nodes), [`Error::NotAcquired`] (every
    /// permit is held), [`Error::Unavailable`], [`Error::Cancelled`], [`Error::Internal`].
    pub fn acquire(&self, ttl: Duration, opts: &LockOptions) -> Result<Lease, Error> {
        let mgr = &self.mgr;
        let sh = &mgr.shared;
        let checked = Ttl::new(ttl, &sh.cfg)
            .and_then(|t| {
                opts.auto_renew
                    .as_ref()
                    .map_or(Ok(t), |r| r.validate().map(|_| t))
            })
            .and_then(|t| match (&opts.owner, opts.shared, opts.fair) {
                (None, false, false) if opts.drop_out.is_none() => Ok(t),
                _ => Err(Error::invalid(
                    "a semaphore's permit is neither reentrant, shared nor fair: leave out \
                     owner, shared, fair and drop_out",
                )),
            });
        let ttl = match checked {
            Ok(t) => t,
            Err(e) => return Err(mgr.refused_input(e)),
        };
        acquire::acquire(sh, opts, &self.key, || {
            lock::attempt_permit(sh, &self.name, &self.key, self.permits, ttl, opts.fenced)
        })
    }

    /// One attempt to take a permit for `ttl`, with no retry.
    pub fn try_acquire(&self, ttl: Duration) -> Result<Lease, Error> {
        self.acquire(ttl, &LockOptions::new().wait(Wait::No))
    }
}
