//! A lock's time to live as a type: validated once, where a call enters the library
//! ([`Ttl::new`]), and put on the wire one way ([`Ttl::px`]: the decimal milliseconds that
//! `PX` and every script's TTL argument take). A primitive receives a `Ttl`, never a bare
//! `Duration`, so no TTL reaches a node unchecked or converted twice.

use std::time::Duration;

use crate::config::{Config, MAX_TTL};
use crate::error::Error;
use crate::timing::drift;

/// A checked TTL: at least 1 ms, a whole number of milliseconds, at most the manager's
/// maximum TTL (and [`MAX_TTL`]), and longer than its own drift allowance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ttl(Duration);

impl Ttl {
    /// Checks `ttl` against a manager's configuration.
    pub(crate) fn new(ttl: Duration, cfg: &Config) -> Result<Ttl, Error> {
        check_ttl_for(ttl, cfg)?;
        Ok(Ttl(ttl))
    }

    /// The TTL as a duration.
    pub(crate) fn duration(self) -> Duration {
        self.0
    }

    /// The TTL as a command argument: its decimal milliseconds.
    pub(crate) fn px(self) -> Px {
        Px::new(self.0.as_millis() as u64)
    }
}

/// A number of milliseconds written as a command argument, without allocating.
pub(crate) struct Px {
    digits: [u8; 20],
    start: usize,
}

impl Px {
    fn new(n: u64) -> Px {
        let mut digits = [0u8; 20];
        let start = digits.len() - crate::resp::decimal(n, &mut digits).len();
        Px { digits, start }
    }
}

impl std::ops::Deref for Px {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.digits[self.start..]
    }
}

/// Checks a TTL against a manager's configuration: at most its maximum TTL, and see
/// [`check_ttl`].
fn check_ttl_for(ttl: Duration, cfg: &Config) -> Result<(), Error> {
    check_ttl(ttl, cfg.drift_factor)?;
    if ttl > cfg.max_ttl {
        return Err(Error::invalid(format!(
            "TTL of {} ms exceeds this manager's maximum TTL of {} ms (raise it with \
             Config::max_ttl, redlock_config_set_max_ttl, max_ttl_ms or WithMaxTTL; or hold \
             locks longer with auto-renewal)",
            ttl.as_millis(),
            cfg.max_ttl.as_millis()
        )));
    }
    Ok(())
}

/// Checks a TTL: at least 1 ms, at most [`MAX_TTL`], and longer than its own drift allowance
/// (otherwise no acquisition could ever leave a positive validity).
fn check_ttl(ttl: Duration, factor: f64) -> Result<(), Error> {
    if ttl < Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "TTL must be at least 1 ms, got {} µs",
            ttl.as_micros()
        )));
    }
    if ttl > MAX_TTL {
        return Err(Error::invalid(format!(
            "TTL must be at most {} ms, got {} ms",
            MAX_TTL.as_millis(),
            ttl.as_millis()
        )));
    }
    if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(Error::invalid(format!(
            "TTL must be a whole number of milliseconds (Redis PX), got {} µs",
            ttl.as_micros()
        )));
    }
    let d = drift(ttl, factor);
    if ttl <= d {
        return Err(Error::invalid(format!(
            "TTL of {} ms is not longer than its clock-drift allowance of {} µs",
            ttl.as_millis(),
            d.as_micros()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_rules() {
        assert!(check_ttl(Duration::ZERO, 0.01).is_err());
        assert!(check_ttl(Duration::from_millis(2), 0.01).is_err());
        assert!(check_ttl(Duration::from_millis(3), 0.01).is_ok());
        assert!(check_ttl(Duration::from_micros(1500), 0.0).is_err());
        assert!(check_ttl(MAX_TTL, 0.01).is_ok());
        assert!(check_ttl(MAX_TTL + Duration::from_millis(1), 0.01).is_err());
        assert_eq!(
            drift(Duration::from_secs(10), 0.01),
            Duration::from_millis(102)
        );
    }

    #[test]
    fn a_ttl_is_checked_against_the_manager_and_written_in_milliseconds() {
        let cfg = Config::new(["127.0.0.1:1"]).max_ttl(Duration::from_secs(10));
        assert!(Ttl::new(Duration::from_secs(11), &cfg).is_err());
        let t = Ttl::new(Duration::from_millis(10_000), &cfg).unwrap();
        assert_eq!(&*t.px(), b"10000");
        assert_eq!(&*Px::new(0), b"0");
        assert_eq!(&*Px::new(u64::MAX), b"18446744073709551615");
    }
}
