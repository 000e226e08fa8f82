//! Time: the injected clock and the per-TTL budget (node timeout, drift, validity).
//!
//! Every other module asks a [`Clock`] for the time; [`SystemClock`] is the only caller of
//! `Instant::now()`, so that unit tests can drive validity arithmetic and deadlines with a
//! manual clock instead of sleeping.

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

/// The remaining validity at `now` of a lock that expires at `expires`: zero once passed.
pub(crate) fn remaining(expires: Instant, now: Instant) -> Duration {
    expires.saturating_duration_since(now)
}

/// The timing rules of one manager, fixed at construction: how long a step waits for each
/// node, and how much of a TTL the drift allowance takes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// `TTL × drift_factor + 2 ms` is taken off every validity.
    pub drift_factor: f64,
    /// An explicit per-node timeout, overriding the derived one.
    pub node_timeout: Option<Duration>,
    /// The derived per-node timeout is `TTL / 200` clamped to `[floor, cap]`.
    pub floor: Duration,
    /// See `floor`.
    pub cap: Duration,
}

impl Budget {
    /// How long one step waits for each node's reply on a lock with this TTL.
    pub(crate) fn node_timeout(&self, ttl: Duration) -> Duration {
        match self.node_timeout {
            Some(t) => t,
            None => (ttl / 200).clamp(self.floor, self.cap),
        }
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
            cap: Duration::from_millis(50),
        }
    }

    #[test]
    fn node_timeouts_derive_from_the_ttl() {
        let b = budget();
        assert_eq!(
            b.node_timeout(Duration::from_secs(10)),
            Duration::from_millis(50)
        );
        assert_eq!(
            b.node_timeout(Duration::from_secs(1)),
            Duration::from_millis(10)
        );
        assert_eq!(
            b.node_timeout(Duration::from_secs(4)),
            Duration::from_millis(20)
        );
        let b = Budget {
            node_timeout: Some(Duration::from_millis(7)),
            ..b
        };
        assert_eq!(
            b.node_timeout(Duration::from_secs(10)),
            Duration::from_millis(7)
        );
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
