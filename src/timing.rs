//! Time: the injected clock and the per-TTL budget (node timeout, drift, validity).
//!
//! Every other module asks a [`Clock`] for the time; [`SystemClock`] is the only caller of
//! `Instant::now()`, so that unit tests can drive validity arithmetic and deadlines with a
//! manual clock instead of sleeping.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic time source.
pub(crate) trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock.
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The wall clock in milliseconds since the Unix epoch (0 before it): when a plain lock was
/// taken, as its value records for [`Redlock::holders`](crate::Redlock::holders). Only a label
/// for people: no decision of the library depends on it.
pub(crate) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The constant part of the clock-drift allowance added to `TTL × drift_factor`.
pub const DRIFT_CONSTANT: Duration = Duration::from_millis(2);

/// The drift allowance for a TTL: `TTL × factor + 2 ms`, rounded up to whole microseconds.
pub(crate) fn drift(ttl: Duration, factor: f64) -> Duration {
    let micros = (ttl.as_micros() as f64 * factor).ceil();
    Duration::from_micros(micros as u64) + DRIFT_CONSTANT
}

/// The instant a lock acquired by a step that started at `start` stops being valid:
/// `start + TTL − drift`. Each node set the key at or after `start`, so each holds it until at
/// least `start + TTL` by its own clock; the drift allowance covers clocks that run at
/// different rates. The lock is granted only if this instant is still in the future when the
/// step ends, so an acquisition that took longer than the TTL can never yield a validity.
pub(crate) fn expiry(start: Instant, ttl: Duration, drift_factor: f64) -> Instant {
    start + ttl.saturating_sub(drift(ttl, drift_factor))
}

/// `t + d`, or, where that is past the clock's range (a wait of `Duration::MAX`, meaning
/// "no limit"), a century after `t`: a deadline that never comes, and never a panic.
pub(crate) fn after(t: Instant, d: Duration) -> Instant {
    const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
    t.checked_add(d)
        .or_else(|| t.checked_add(CENTURY))
        .unwrap_or(t)
}

/// The remaining validity at `now` of a lock that expires at `expires`: zero once passed.
pub(crate) fn remaining(expires: Instant, now: Instant) -> Duration {
    expires.saturating_duration_since(now)
}

/// What one unit of a command's work adds to the wait for each node: 50 µs for every key,
/// or semaphore slot, that the command touches on a node beyond the first. A script over
/// 1,000 keys is not a `PING`: on a quiet machine Redis runs it in a millisecond or two, and
/// on a busy one it may get a third of a core, so this allowance (50 ms for 1,000) is about
/// 25 times what the work takes when the server runs alone.
pub const WORK_ALLOWANCE: Duration = Duration::from_micros(50);

/// The allowance for `work` units (see [`WORK_ALLOWANCE`]): the first one is free.
pub(crate) fn work_allowance(work: usize) -> Duration {
    WORK_ALLOWANCE.saturating_mul(work.saturating_sub(1).min(u32::MAX as usize) as u32)
}

/// The timing rules of one manager, fixed at construction: how long each kind of step waits
/// for the nodes, and how much of a TTL the drift allowance takes.
///
/// A step returns as soon as its outcome is decided (a quorum succeeded, or can no longer),
/// so these bounds matter only while the nodes needed for a quorum have not all answered,
/// and a timeout is then evidence that a node failed, not that a thread was descheduled:
///
/// * **Acquire** (every grant, and the fencing round): the *acquire bound*, `TTL × fraction`
///   within `[floor, cap]` (a tenth of the TTL, 10 ms to 1 s, by default), so that a dead
///   node never eats more than that of the validity.
/// * **Extend**: until the current validity ends, the one bound the algorithm needs: an
///   extension confirmed after it counts for nothing.
/// * **Release**: the stale limit (1 s by default), the point at which a silent connection is
///   declared hung anyway. A release has no validity to protect, and one whose replies come
///   late was still applied, so it waits longer than an acquisition and reports a release it
///   could not confirm as such.
/// * **Renewal**: the acquire bound, within the lease's validity less half its lost margin.
///
/// The round adds the command's [`work_allowance`] to each (the commands a connection owes
/// count the same way against its stale limit). An explicit `node_timeout` replaces the
/// acquire bound and the release's wait (an extension still stops at the validity's end).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// `TTL × drift_factor + 2 ms` is taken off every validity.
    pub drift_factor: f64,
    /// An explicit per-node timeout, overriding the derived ones.
    pub node_timeout: Option<Duration>,
    /// The acquire bound is `TTL × fraction` clamped to `[floor, cap]` (`cap` never below
    /// `floor`).
    pub floor: Duration,
    /// See `floor`.
    pub cap: Duration,
    /// See `floor`.
    pub fraction: f64,
    /// How long a release waits (the stale limit), unless `node_timeout` is set.
    pub release: Duration,
}

impl Budget {
    /// The acquire bound for a lock with this TTL, for one key: how long a grant step waits
    /// for nodes while no quorum has answered.
    pub(crate) fn acquire_bound(&self, ttl: Duration) -> Duration {
        self.node_timeout.unwrap_or_else(|| {
            ttl.mul_f64(self.fraction)
                .min(self.cap.max(self.floor))
                .max(self.floor)
        })
    }

    /// How long a release waits for each node (before its work's allowance).
    pub(crate) fn release_bound(&self) -> Duration {
        self.node_timeout.unwrap_or(self.release)
    }

    /// How long an extension waits for each node when `validity` of the lock is left (before
    /// its work's allowance, and capped at the validity's end by the caller): that validity,
    /// or less when `node_timeout` is set.
    pub(crate) fn extend_bound(&self, validity: Duration) -> Duration {
        self.node_timeout.map_or(validity, |t| t.min(validity))
    }

    /// See [`expiry`].
    pub(crate) fn expiry(&self, start: Instant, ttl: Duration) -> Instant {
        expiry(start, ttl, self.drift_factor)
    }

    /// The last instant a lock valid until `expires` with this TTL was confirmed (its step's
    /// start): the inverse of [`expiry`](Self::expiry).
    pub(crate) fn confirmed_at(&self, expires: Instant, ttl: Duration) -> Instant {
        expires
            .checked_sub(ttl.saturating_sub(drift(ttl, self.drift_factor)))
            .unwrap_or(expires)
    }
}

/// The clock granularity term of the retransmission timeout: the least it adds to the
/// smoothed round trip however steady the node.
const RTO_GRANULARITY: Duration = Duration::from_millis(1);

/// How many times in a row a timeout may double a node's retransmission timeout.
const MAX_BACKOFF: u32 = 6;

/// One node's round-trip estimate and retransmission timeout, computed as TCP's (RFC 6298),
/// reported in [`NodeState`](crate::NodeState) to show how far and how steady a node is. It
/// no longer sets any deadline: a step under load took scheduling delays for dead nodes (see
/// [`Budget`]). Computed as TCP does:
/// the first sample `R` sets `SRTT = R` and `RTTVAR = R / 2`; each later one sets
/// `RTTVAR = 3/4 RTTVAR + 1/4 |SRTT − R|`, then `SRTT = 7/8 SRTT + 1/8 R`; and the timeout is
/// `SRTT + max(1 ms, 4 RTTVAR)`. A timeout doubles it (up to 2^6 times) until the next sample.
///
/// Samples are taken only from replies read while their caller still waited, so that a reply
/// read late (nobody was reading the connection when it arrived) does not inflate the
/// estimate; the doubling on timeouts is what lets a node that became slower be measured
/// again. `sample` must not run concurrently with itself (each link calls it under its lock);
/// `rto` and `timed_out` may run from any thread.
#[derive(Debug, Default)]
pub(crate) struct RttEstimate {
    /// Smoothed round trip in nanoseconds; 0 before the first sample.
    srtt_ns: AtomicU64,
    /// Round-trip variation in nanoseconds.
    rttvar_ns: AtomicU64,
    /// Doublings since the last sample.
    backoff: AtomicU32,
}

impl RttEstimate {
    /// Takes one round-trip sample.
    pub(crate) fn sample(&self, r: Duration) {
        let r = (r.as_nanos().min(u64::MAX as u128) as u64).max(1);
        let srtt = self.srtt_ns.load(Ordering::Relaxed);
        let (srtt, var) = if srtt == 0 {
            (r, r / 2)
        } else {
            let var = self.rttvar_ns.load(Ordering::Relaxed);
            let var = var - var / 4 + srtt.abs_diff(r) / 4;
            (srtt - srtt / 8 + r / 8, var)
        };
        self.rttvar_ns.store(var, Ordering::Relaxed);
        self.srtt_ns.store(srtt.max(1), Ordering::Relaxed);
        self.backoff.store(0, Ordering::Relaxed);
    }

    /// A step gave up waiting for this node: the next waits twice as long.
    pub(crate) fn timed_out(&self) {
        let _ = self
            .backoff
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                (b < MAX_BACKOFF).then_some(b + 1)
            });
    }

    /// The smoothed round trip, if measured.
    pub(crate) fn srtt(&self) -> Option<Duration> {
        match self.srtt_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The retransmission timeout, if measured: `(SRTT + max(1 ms, 4 RTTVAR)) × 2^backoff`.
    pub(crate) fn rto(&self) -> Option<Duration> {
        let srtt = self.srtt()?;
        let var = Duration::from_nanos(self.rttvar_ns.load(Ordering::Relaxed));
        let base = srtt + (var * 4).max(RTO_GRANULARITY);
        Some(base * (1 << self.backoff.load(Ordering::Relaxed).min(MAX_BACKOFF)))
    }
}

/// Instants as 64-bit offsets from a fixed epoch, so that an instant can live in an atomic.
/// Offset 0 means "none".
#[derive(Clone, Copy, Debug)]
pub(crate) struct Epoch(Instant);

impl Epoch {
    pub(crate) fn new(at: Instant) -> Epoch {
        Epoch(at)
    }

    /// Nanoseconds from the epoch to `t`, plus one so that 0 can mean "none".
    pub(crate) fn offset(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.0)
            .as_nanos()
            .min(u64::MAX as u128 - 1) as u64
            + 1
    }

    /// The instant an offset stands for; `None` for 0.
    pub(crate) fn instant(&self, offset: u64) -> Option<Instant> {
        (offset != 0).then(|| self.0 + Duration::from_nanos(offset - 1))
    }
}

/// A clock that moves only when told to (tests).
#[cfg(test)]
pub(crate) struct ManualClock(std::sync::Mutex<Instant>);

#[cfg(test)]
impl ManualClock {
    pub(crate) fn new() -> ManualClock {
        ManualClock(std::sync::Mutex::new(SystemClock.now()))
    }

    pub(crate) fn advance(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}

#[cfg(test)]
impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.0.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            drift_factor: 0.01,
            node_timeout: None,
            floor: Duration::from_millis(10),
            cap: Duration::from_secs(5),
            fraction: 0.1,
            release: Duration::from_secs(1),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn each_kind_of_step_has_its_own_bound() {
        let b = budget();
        // The acquire bound: a tenth of the TTL, within [10 ms, 5 s] here.
        assert_eq!(b.acquire_bound(Duration::from_secs(10)), ms(1000));
        assert_eq!(b.acquire_bound(Duration::from_secs(1)), ms(100));
        assert_eq!(b.acquire_bound(ms(20)), ms(10));
        assert_eq!(
            b.acquire_bound(Duration::from_secs(3600)),
            Duration::from_secs(5)
        );
        // Work beyond the first key adds 50 µs a unit: 1,000 keys, about 50 ms more.
        assert_eq!(work_allowance(1), Duration::ZERO);
        assert_eq!(work_allowance(1000), ms(49) + Duration::from_micros(950));
        assert_eq!(work_allowance(0), Duration::ZERO);
        assert_eq!(work_allowance(usize::MAX), WORK_ALLOWANCE * u32::MAX);
        // A release waits the stale limit; an extension until the validity ends.
        assert_eq!(b.release_bound(), Duration::from_secs(1));
        assert_eq!(b.extend_bound(ms(4321)), ms(4321));
        // An explicit timeout replaces the acquire bound and the release's wait, and an
        // extension still stops at the validity's end.
        let b = Budget {
            node_timeout: Some(ms(7)),
            ..b
        };
        assert_eq!(b.acquire_bound(Duration::from_secs(10)), ms(7));
        assert_eq!(b.release_bound(), ms(7));
        assert_eq!(b.extend_bound(ms(4321)), ms(7));
        assert_eq!(b.extend_bound(ms(3)), ms(3));
        // A cap below the floor never makes the bound smaller than the floor.
        let b = Budget {
            node_timeout: None,
            cap: ms(1),
            ..b
        };
        assert_eq!(b.acquire_bound(Duration::from_secs(10)), ms(10));
    }

    #[test]
    fn the_retransmission_timeout_follows_the_node() {
        let e = RttEstimate::default();
        assert_eq!(e.rto(), None);
        // First sample: SRTT = R, RTTVAR = R/2, RTO = R + 4 R/2 = 3 R.
        e.sample(ms(60));
        assert_eq!(e.srtt(), Some(ms(60)));
        assert_eq!(e.rto(), Some(ms(180)));
        // A steady node: the variation decays and the timeout closes in on the round trip,
        // never below it plus the granularity.
        for _ in 0..200 {
            e.sample(ms(60));
        }
        let rto = e.rto().unwrap();
        assert!(rto >= ms(61) && rto < ms(62), "{rto:?}");
        // Timeouts double it, up to 2^6 times; a sample ends the doubling.
        e.timed_out();
        e.timed_out();
        assert!(e.rto().unwrap() >= ms(244) && e.rto().unwrap() < ms(248));
        for _ in 0..20 {
            e.timed_out();
        }
        assert!(e.rto().unwrap() >= ms(61) * 64);
        e.sample(ms(60));
        assert!(e.rto().unwrap() < ms(62));
        // A jump to 40 ms from a 1 ms node: the first sample already lifts the timeout above
        // the new round trip.
        let e = RttEstimate::default();
        for _ in 0..50 {
            e.sample(ms(1));
        }
        e.sample(ms(40));
        assert!(e.rto().unwrap() > ms(40), "{:?}", e.rto());
    }

    #[test]
    fn validity_arithmetic() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        let ttl = Duration::from_secs(10);
        // drift = 10 s × 0.01 + 2 ms = 102 ms
        assert_eq!(drift(ttl, 0.01), Duration::from_millis(102));
        let e = expiry(t0, ttl, 0.01);
        assert_eq!(e - t0, Duration::from_millis(9898));
        assert_eq!(budget().confirmed_at(e, ttl), t0);
        // After 1 s elapsed, 8.898 s remain: TTL − elapsed − drift.
        clock.advance(Duration::from_secs(1));
        assert_eq!(remaining(e, clock.now()), Duration::from_millis(8898));
        // Elapsed beyond the TTL: zero, never a huge value from an underflow.
        assert_eq!(remaining(e, t0 + Duration::from_secs(11)), Duration::ZERO);
        assert_eq!(remaining(e, t0 + Duration::from_secs(3600)), Duration::ZERO);
        // Exactly at the boundary: zero.
        assert_eq!(remaining(e, e), Duration::ZERO);
        // A TTL shorter than its drift cannot produce a later expiry than its start.
        assert_eq!(expiry(t0, Duration::from_millis(1), 0.01), t0);
    }

    #[test]
    fn epoch_offsets_round_trip_and_zero_is_none() {
        let t0 = SystemClock.now();
        let e = Epoch::new(t0);
        let t = t0 + Duration::from_millis(1234);
        assert_eq!(e.instant(e.offset(t)), Some(t));
        assert_eq!(e.instant(0), None);
        assert_eq!(e.offset(t0), 1);
    }
}
