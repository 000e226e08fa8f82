//! Leader election's public handles ([`Election`], [`Leadership`], [`Observer`]) and the
//! `Redlock` method that makes one: the input is checked here, the rounds are
//! `lock::election`'s.

use std::fmt;
use std::time::Duration;

use crate::acquire::{self, LockOptions, Wait};
use crate::error::Error;
use crate::lease::{Lease, LostReason, RenewOptions};
use crate::lock::election::{self, Leader};
use crate::notify::Cancel;
use crate::ttl::Ttl;

use super::Redlock;

/// How long "until it leads" and "until a change" wait: as good as forever.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

impl Redlock {
    /// The election `name`. Nothing is sent until a call on it; an invalid name (as a
    /// resource's) is refused by each call with [`Error::InvalidInput`]. An election and a
    /// lock of the same name are independent (see [`ELECTION_PREFIX`](crate::ELECTION_PREFIX)).
    pub fn election(&self, name: impl AsRef<[u8]>) -> Election {
        let name = name.as_ref();
        Election {
            mgr: self.clone(),
            name: name.to_vec(),
            key: self.shared.cfg.election_key(name),
        }
    }
}

/// A leader election over the quorum ([`Redlock::election`]), in the shape of etcd's election
/// API: candidates [`campaign`](Self::campaign) and one of them leads at a time; anyone reads
/// the [`leader`](Self::leader) or [`observe`](Self::observe)s each new one.
///
/// Leadership is a fenced lease on the election, renewed automatically; its fencing token is
/// the **term**, which strictly increases from one leader to the next (as fencing tokens do,
/// under the same assumptions as the lock). Give the term to every store the leader writes to,
/// and have the store refuse a term below the highest it has seen
/// ([`scripts::FENCED_STORE_WRITE`](crate::scripts::FENCED_STORE_WRITE) does it for data in
/// Redis): a deposed leader that still acts, after a pause, is refused there.
///
/// A leader is told it lost leadership before its validity ends, when renewal cannot be
/// confirmed in time: [`Leadership::lost`], [`Leadership::wait_lost`], or the
/// [`RenewOptions::on_lost`] callback, a margin of TTL/20 (at least 2 ms, at most 250 ms)
/// before the end. A leader must stop acting as one when told.
///
/// ```no_run
/// # fn main() -> Result<(), redlock::Error> {
/// use std::time::Duration;
/// use redlock::{Config, LockOptions, Redlock};
/// let mgr = Redlock::new(Config::new(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"]))?;
/// let election = mgr.election("scheduler");
/// let leadership = election.campaign("10.0.0.7:8080", Duration::from_secs(10), &LockOptions::new())?;
/// println!("leading in term {}", leadership.term());
/// while !leadership.wait_lost(Duration::from_secs(1)) {
///     // ... lead, passing leadership.term() to every store written ...
/// #   break;
/// }
/// leadership.resign()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Election {
    mgr: Redlock,
    name: Vec<u8>,
    key: Result<Vec<u8>, Error>,
}

impl fmt::Debug for Election {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Election")
            .field("name", &String::from_utf8_lossy(&self.name))
            .finish()
    }
}

impl Election {
    /// The election's name, as given.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The election's key on every node (`redlock-elect:` and the lock key of its name),
    /// which is also the channel a resignation is announced on; invalid input for an invalid
    /// name.
    pub fn key(&self) -> Result<&[u8], Error> {
        self.key.as_deref().map_err(Clone::clone)
    }

    /// Campaigns with `value` (an address, say; at most
    /// [`MAX_LEADER_VALUE`](crate::MAX_LEADER_VALUE) bytes) until this candidate leads, and
    /// returns its leadership: a lease of `ttl`, renewed automatically, whose term is its
    /// fencing token.
    ///
    /// `opts` say how long to wait: the default ([`Wait::Retries`]) waits until it leads;
    /// [`Wait::No`] tries once; [`Wait::For`] and [`Wait::Until`] give a deadline. A
    /// [`cancel`](LockOptions::cancel) handle ends the wait. Waiting candidates are woken by
    /// the leader's resignation (a notification, not polling), or try when its TTL runs out.
    /// [`auto_renew`](LockOptions::auto_renew) options replace the default renewal (which
    /// renews for as long as the process lives, and may carry an `on_lost` callback).
    ///
    /// Errors: [`Error::InvalidInput`] (invalid name, TTL or value; `owner`, `shared`,
    /// `fair` or `drop_out` given; nothing is sent), [`Error::NotAcquired`] (another leads,
    /// and the wait is over), [`Error::Unavailable`], [`Error::Cancelled`],
    /// [`Error::Internal`].
    pub fn campaign(
        &self,
        value: impl AsRef<[u8]>,
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<Leadership, Error> {
        let value = value.as_ref();
        let mgr = &self.mgr;
        let sh = &mgr.shared;
        let (key, ttl, opts) = match self.checked(value, ttl, opts) {
            Ok(c) => c,
            Err(e) => return Err(mgr.refused_input(e)),
        };
        let lease = acquire::acquire(sh, &opts, &key, || {
            election::attempt(sh, &self.name, &key, ttl, value)
        })?;
        Ok(Leadership { lease })
    }

    /// Checks a campaign's input: the key, the TTL, and the options as a campaign uses them.
    fn checked(
        &self,
        value: &[u8],
        ttl: Duration,
        opts: &LockOptions,
    ) -> Result<(Vec<u8>, Ttl, LockOptions), Error> {
        let sh = &self.mgr.shared;
        let key = self.key()?.to_vec();
        let ttl = Ttl::new(ttl, &sh.cfg)?;
        election::check_value(value)?;
        if opts.owner.is_some() || opts.shared || opts.fair || opts.drop_out.is_some() {
            return Err(Error::invalid(
                "a leadership is neither reentrant, shared nor fair: leave out owner, shared, \
                 fair and drop_out",
            ));
        }
        let mut opts = opts.clone();
        opts.fenced = true;
        match &opts.auto_renew {
            Some(r) => r.validate()?,
            None => opts.auto_renew = Some(RenewOptions::new().max_hold(FOREVER)),
        }
        if opts.wait == Wait::Retries {
            opts.wait = Wait::For(FOREVER);
        }
        Ok((key, ttl, opts))
    }

    /// The current leader, read from every node: its term, value and remaining validity, or
    /// `None` when no leader is held by a quorum (nobody elected, the last leadership over,
    /// or a campaign still under way). A snapshot: the answer can change the moment it is
    /// read.
    ///
    /// Errors: [`Error::InvalidInput`], [`Error::Unavailable`] (fewer than a quorum of nodes
    /// answered), [`Error::Internal`].
    pub fn leader(&self) -> Result<Option<Leader>, Error> {
        election::read(&self.mgr.shared, self.key()?)
    }

    /// Waits for a leader whose term is above `after_term` and returns it, or `None` when
    /// `timeout` passes first. Woken by the nodes' announcement of each new term, not by
    /// polling; a leader elected meanwhile, with any number of terms missed, is returned as
    /// the latest. `cancel` ends the wait with [`Error::Cancelled`].
    ///
    /// Errors: [`Error::InvalidInput`], [`Error::Cancelled`], [`Error::Unavailable`] (the
    /// nodes could not be read when the timeout came), [`Error::Internal`].
    pub fn wait_change(
        &self,
        after_term: u64,
        timeout: Duration,
        cancel: Option<&Cancel>,
    ) -> Result<Option<Leader>, Error> {
        let sh = &self.mgr.shared;
        let until = sh.now() + timeout.min(FOREVER);
        election::wait_change(sh, self.key()?, after_term, until, cancel)
    }

    /// Every leader from now on, in term order: an iterator that yields the current leader
    /// first (if any), then each new one as it is elected (blocking until then). Terms never
    /// repeat or go back; intermediate terms may be skipped, never the latest.
    pub fn observe(&self) -> Observer {
        Observer {
            election: self.clone(),
            last: 0,
            cancel: None,
        }
    }
}

/// The leaders of an election, one after another ([`Election::observe`]).
#[derive(Debug)]
pub struct Observer {
    election: Election,
    last: u64,
    cancel: Option<Cancel>,
}

impl Observer {
    /// Ends a blocked [`next`](Iterator::next) (and every later one) with
    /// [`Error::Cancelled`] once `cancel` fires.
    pub fn with_cancel(mut self, cancel: Cancel) -> Observer {
        self.cancel = Some(cancel);
        self
    }

    /// The term of the last leader yielded (0 before the first).
    pub fn last_term(&self) -> u64 {
        self.last
    }

    /// The next leader, waiting at most `timeout`: `None` when none came in time.
    pub fn next_within(&mut self, timeout: Duration) -> Result<Option<Leader>, Error> {
        let l = (self.election).wait_change(self.last, timeout, self.cancel.as_ref())?;
        if let Some(l) = &l {
            self.last = l.term;
        }
        Ok(l)
    }
}

impl Iterator for Observer {
    type Item = Result<Leader, Error>;

    /// Blocks until a leader with a higher term than the last one yielded: `Some(Ok)`, or
    /// `Some(Err)` for an error that ends the observation (invalid name, cancelled).
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_within(FOREVER) {
                Ok(Some(l)) => return Some(Ok(l)),
                Ok(None) | Err(Error::Unavailable(_)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// This process's leadership of an election ([`Election::campaign`]): a fenced lease,
/// renewed automatically, whose fencing token is the term.
pub struct Leadership {
    lease: Lease,
}

impl fmt::Debug for Leadership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &String::from_utf8_lossy(self.name()))
            .field("term", &self.term())
            .field("validity", &self.lease.validity())
            .field("lost", &self.lost())
            .finish()
    }
}

impl Leadership {
    /// The term: this leadership's fencing token, greater than every earlier leader's.
    pub fn term(&self) -> u64 {
        self.lease.fencing_token().unwrap_or(0)
    }

    /// The value it campaigned with, or the latest it proclaimed.
    pub fn value(&self) -> Vec<u8> {
        Self::value_of(&self.lease).unwrap_or_default()
    }

    /// The name of the election it leads.
    pub fn name(&self) -> &[u8] {
        self.lease.resource()
    }

    /// Changes the leader's value, keeping the term: done when a quorum confirmed it while
    /// the leadership was valid; observers are woken and see it. A proclamation that fails
    /// may still be read by some readers (its nodes applied it).
    ///
    /// Errors: [`Error::InvalidInput`] (value too long; nothing sent), [`Error::NotHeld`]
    /// (leadership lost, resigned, or not confirmed in time), [`Error::Unavailable`].
    pub fn proclaim(&self, value: impl AsRef<[u8]>) -> Result<(), Error> {
        Self::proclaim_on(&self.lease, value)
    }

    /// [`proclaim`](Self::proclaim) on a leadership held as its lease
    /// ([`into_lease`](Self::into_lease); the C ABI's `redlock_lease`). Invalid input for a
    /// lease that is not a leadership.
    pub fn proclaim_on(lease: &Lease, value: impl AsRef<[u8]>) -> Result<(), Error> {
        election::proclaim(lease, value.as_ref())
    }

    /// The value of a leadership held as its lease (see [`proclaim_on`](Self::proclaim_on));
    /// `None` for a lease that is not a leadership.
    pub fn value_of(lease: &Lease) -> Option<Vec<u8>> {
        election::value_of(lease)
    }

    /// Resigns: releases the leadership at once, which wakes the waiting candidates.
    /// Errors as [`Lease::unlock`].
    pub fn resign(&self) -> Result<(), Error> {
        self.lease.unlock()
    }

    /// True once this process no longer leads: renewal could not confirm the leadership in
    /// time (it is told a margin before the validity ends; see [`Election`]), it reached a
    /// bound of its renewal options, its validity ran out, or it resigned.
    pub fn lost(&self) -> bool {
        self.lease.is_lost() || !self.lease.is_valid()
    }

    /// Why the leadership was lost, if renewal lost it.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.lease.lost_reason()
    }

    /// Blocks until the leadership is lost (true) or `timeout` passes (false); true at once
    /// when it is already lost or over.
    pub fn wait_lost(&self, timeout: Duration) -> bool {
        self.lost() || self.lease.wait_lost(timeout) || self.lost()
    }

    /// How long the leadership stays valid at least (zero once lost or resigned).
    pub fn validity(&self) -> Duration {
        self.lease.validity()
    }

    /// The leadership's lease (its fencing token is the term).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The leadership as a plain lease (unlock resigns).
    pub fn into_lease(self) -> Lease {
        self.lease
    }
}
